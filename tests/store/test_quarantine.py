"""One bad queue or result file never stops the others (issue 13): it is skipped, named
once by `rexrank status` and the leaderboard's problems list, and every worker loop goes on."""
from __future__ import annotations

import json
import logging
import threading
import time

import pytest

from rexrank.backend.worker import Worker
from rexrank.cli.main import main
from rexrank.leaderboard.source import LeaderboardSource
from rexrank.store import FINISHED, PENDING, Quota, open_store
from support.requests import submit, variant
from support.store_fixtures import fake_hub, hub  # noqa: F401 (fixtures)


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def queue_file(root, request_id):
    return root / "requests" / "queue" / f"{request_id}.json"


def damage_queue(root, request_id, how: str) -> None:
    path = queue_file(root, request_id)
    if how == "truncated":
        path.write_bytes(path.read_bytes()[:57])
    else:  # a record without submitted_time (the poll worker died on the KeyError)
        record = json.loads(path.read_text())
        del record["submitted_time"]
        path.write_text(json.dumps(record))


@pytest.mark.parametrize("how", ["truncated", "no_submitted_time"])
def test_a_bad_queue_file_is_skipped_by_status_submit_and_backend(tmp_path, capsys, how):
    root = tmp_path / "s"
    store = open_store(root, quota=Quota(0))
    bad = submit(store, model_name="bad-one")
    good = submit(store, variant(tmp_path, 1), model_name="good-one")
    damage_queue(root, bad["id"], how)

    code, out, err = run(capsys, "status", "--store", str(root))
    assert code == 0, err
    assert good["id"] in out and "1 unreadable record(s) skipped" in out
    assert f"requests/queue/{bad['id']}.json" in out
    code, out, err = run(capsys, "submit", "--store", str(root), "--dataset", "example", "--predictions",
                         str(variant(tmp_path, 2)), "--model-name", "third", "--submitter", "bob", "--json")
    assert code == 0, err
    third = json.loads(out)["id"]
    code, _, err = run(capsys, "backend", "--store", str(root), "--once", "--metrics", "bleu2", "--quota", "0")
    assert code == 0, err
    assert {r["id"]: r["status"] for r in open_store(root).list_requests()} == {good["id"]: FINISHED, third: FINISHED}
    [problem] = store.problems()
    assert problem.repo == "requests" and problem.path == f"queue/{bad['id']}.json"


def test_the_poll_worker_survives_a_bad_record_and_reports_it_once(tmp_path, caplog):
    root = tmp_path / "s"
    store = open_store(root, quota=Quota(0))
    bad = submit(store, model_name="bad-one")
    damage_queue(root, bad["id"], "no_submitted_time")
    worker = Worker(store, metrics="bleu2", worker_id="poller")
    stop = threading.Event()
    errors = []

    def poll():
        try:
            worker.run(poll=0.05, stop=stop)
        except BaseException as exc:  # the old worker died here (KeyError: 'submitted_time')
            errors.append(exc)

    with caplog.at_level(logging.WARNING, logger="rexrank.store"):
        thread = threading.Thread(target=poll)
        thread.start()
        time.sleep(0.3)  # several polls over the bad record
        good = submit(store, variant(tmp_path, 1), model_name="good-one")
        deadline = time.time() + 60
        while store.get_request(good["id"])["status"] != FINISHED:
            assert not errors and thread.is_alive(), errors
            assert time.time() < deadline
            time.sleep(0.05)
        stop.set()
        thread.join(10)
    assert not errors
    reports = [r for r in caplog.records if bad["id"] in r.getMessage()]
    assert len(reports) == 1 and "lacks submitted_time" in reports[0].getMessage()  # once, not every poll


def test_a_truncated_result_record_does_not_stop_the_leaderboard(tmp_path):
    store = open_store(tmp_path / "s")
    good = {"id": "r-good", "model_name": "Good", "test_set": "iu_xray", "track": "findings",
            "values": {"bleu2": {"mean": 0.2, "ci95": None, "n": 590}}}
    store.add_results([good, {**good, "id": "r-bad", "model_name": "Bad"}])
    bad_file = next((tmp_path / "s" / "results").rglob("r-bad.json"))
    bad_file.write_bytes(bad_file.read_bytes()[:30])
    source = LeaderboardSource.from_store(store)
    frame = source.frame()
    assert list(frame["id"]) == ["r-good"]
    [problem] = source.problems
    assert "records/iu_xray/findings/r-bad.json" in problem and "not valid JSON" in problem


def test_leaderboard_app_starts_on_a_store_with_a_bad_record(tmp_path):
    from rexrank.leaderboard.app import _status, build_app

    store = open_store(tmp_path / "s")
    store.add_result({"id": "r1", "model_name": "A", "test_set": "iu_xray", "track": "findings",
                      "values": {"bleu2": {"mean": 0.2, "ci95": None, "n": 590}}})
    (tmp_path / "s" / "results" / "records" / "iu_xray" / "findings" / "broken.json").write_text("{")
    source = LeaderboardSource.from_store(store)
    build_app(source)  # used to raise StoreError before the page existed
    assert "1 result record(s) could not be shown" in _status(source) and "broken.json" in _status(source)


def test_a_bad_request_is_named_by_get_request_not_a_traceback(tmp_path, capsys):
    root = tmp_path / "s"
    store = open_store(root)
    req = submit(store)
    queue_file(root, req["id"]).write_text("[1, 2]")
    code, _, err = run(capsys, "status", "--store", str(root), req["id"])
    assert code == 1 and "cannot be read: a JSON list, not an object" in err


def test_a_queue_file_under_another_name_is_quarantined(tmp_path):
    # a copied file would make two queue entries for one request id
    root = tmp_path / "s"
    store = open_store(root)
    req = submit(store)
    copy = root / "requests" / "queue" / "20990101T000000-copy.json"
    copy.write_bytes(queue_file(root, req["id"]).read_bytes())
    assert [r["id"] for r in store.list_requests()] == [req["id"]]
    [problem] = store.problems()
    assert "belongs in" in problem.reason
    assert store.claim("w", lease_seconds=30)["id"] == req["id"]
    assert store.claim("w", lease_seconds=30) is None and store.get_request(req["id"])["status"] != PENDING


def test_a_bad_file_in_a_hub_store_is_quarantined_too(hub, tmp_path):
    from huggingface_hub import HfApi

    store = open_store("hf://orgq", quota=Quota(0))
    good = submit(store)
    HfApi(endpoint=hub.url, token="hf_fake").upload_file(
        path_or_fileobj=b'{"id": "x", "status": ', path_in_repo="queue/20000101T000000.000000-x.json",
        repo_id="orgq/requests", repo_type="dataset")
    assert [r["id"] for r in store.list_requests()] == [good["id"]]
    assert Worker(store, metrics="bleu2", worker_id="hub-w").run(once=True) == 1
    assert store.get_request(good["id"])["status"] == FINISHED
    [problem] = store.problems()
    assert problem.path == "queue/20000101T000000.000000-x.json" and "not valid JSON" in problem.reason
