"""The store trusts no field a request's writer chose and fails cleanly (issues 19.2-19.3,
20.4-20.5): request ids, server-owned time and privacy, leases under skewed clocks,
cancel versus publication, read-only stores, stopped readers, a full disk."""
from __future__ import annotations

import json
import time

import pytest

from rexrank.backend.worker import Worker
from rexrank.cli.main import main
from rexrank.errors import SubmissionError
from rexrank.store import FAILED, FINISHED, Quota, open_store
from rexrank.store import records as R
from test_backend import cli, private_set, test_metrics  # noqa: F401 (fixtures)
from test_store import submit, variant, write_jsonl
from test_store_hub import fake_hub, hub  # noqa: F401 (fixtures)


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# ---- request ids -------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["status", "cancel", "requeue"])
@pytest.mark.parametrize("bad_id", ["../../x", "a" * 300, "queue/../../x", "x\x00y"])
def test_odd_request_ids_are_refused_before_any_path_is_built(tmp_path, capsys, command, bad_id):
    store = open_store(tmp_path / "s")
    req = submit(store)
    # a request-shaped file outside the store, where "../../x" would lead
    (tmp_path / "x.json").write_text(json.dumps({**req, "model_name": "outside-the-store"}))
    code, out, err = run(capsys, command, bad_id, "--store", str(tmp_path / "s"))
    assert code != 0 and out == ""
    assert len(err.strip().splitlines()) == 1 and "is not a request id" in err, err
    assert "outside-the-store" not in err and len(err) < 200


def test_a_forged_predictions_path_is_never_read(tmp_path):
    store = open_store(tmp_path / "s")
    req = submit(store)
    path = tmp_path / "s" / "requests" / "queue" / f"{req['id']}.json"
    (tmp_path / "secret.parquet").write_bytes(b"secret")
    path.write_text(json.dumps({**req, "predictions": {**req["predictions"], "path": "../../secret.parquet"}}))
    assert store.read_predictions(store.get_request(req["id"])) != b"secret"


# ---- privacy and quota: from the registry and the store, never from the request -----------

def rewrite(root, request_id: str, **fields) -> None:
    """Edit an open request's file as a writer with access to the store could."""
    path = root / "requests" / "queue" / f"{request_id}.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))


def test_a_request_saying_private_false_still_pays_for_a_failed_private_validation(tmp_path, private_set):
    data_dir, _ = private_set
    store = open_store(tmp_path / "s")
    probe = write_jsonl(tmp_path / "probe.jsonl", {"RG000": "x", "RG999": "y"})
    req = submit(store, probe, test_set="rexgradient")
    rewrite(tmp_path / "s", req["id"], private=False)
    Worker(store, data_dir=data_dir, metrics="bleu2", worker_id="w").run(once=True)
    assert store.get_request(req["id"])["failure_kind"] == "validation"
    with pytest.raises(SubmissionError, match="already has 1 submission"):
        submit(store, write_jsonl(tmp_path / "probe2.jsonl", {"RG001": "x"}), test_set="rexgradient", model_name="b")


def test_a_cancelled_request_counts_against_the_quota(tmp_path):
    store = open_store(tmp_path / "s")
    store.cancel(submit(store)["id"])
    with pytest.raises(SubmissionError, match="already has 1 submission"):
        submit(store, variant(tmp_path, 1), model_name="model-b")


# ---- time: the server's, never the writer's ----------------------------------------------

YEAR = 365 * 86400


def forge(tmp_path, n: int, **fields) -> dict:
    """A request written straight into the store (no client check), its fields then edited."""
    req = submit(open_store(tmp_path / "s", quota=Quota(0)), variant(tmp_path, n), model_name=f"m{n}",
                 **{k: v for k, v in fields.items() if k == "submitter"})
    rewrite(tmp_path / "s", req["id"], **{k: v for k, v in fields.items() if k != "submitter"})
    return req


@pytest.mark.parametrize("shift", [-30 * 86400, +YEAR])
def test_a_request_dated_by_its_writer_still_obeys_the_quota(tmp_path, shift):
    store = open_store(tmp_path / "s")  # 1 per 7 days
    first = submit(store)
    Worker(store, metrics="bleu2", worker_id="w").run(once=True)
    assert store.get_request(first["id"])["status"] == FINISHED
    forged = forge(tmp_path, 1, submitted_time=R.iso(time.time() + shift), received_time=R.iso(time.time() + shift))
    Worker(store, metrics="bleu2", worker_id="w").run(once=True)
    final = store.get_request(forged["id"])
    assert final["status"] == FAILED and "already has 1 submission" in final["error"], final
    assert abs(R.parse_iso(final["submitted_time"]) - time.time()) < 60  # the server's time, shown


def test_a_request_dated_back_does_not_jump_the_queue_and_shows_the_servers_date(tmp_path):
    store = open_store(tmp_path / "s", quota=Quota(0))
    running = submit(store, variant(tmp_path, 0), model_name="m0")
    waiting = submit(store, variant(tmp_path, 1), model_name="m1", submitter="bob")
    assert store.claim("w", lease_seconds=60)["id"] == running["id"]  # the backend sees `waiting` now
    time.sleep(1.1)
    forged = forge(tmp_path, 2, submitter="carol", submitted_time="2001-01-01T00:00:00Z")
    assert store.claim("w", lease_seconds=60)["id"] == waiting["id"]
    shown = {r["id"]: r["submitted_time"] for r in store.queue_view()}
    assert shown[forged["id"]] > shown[waiting["id"]] > "2026"
    store.release(waiting["id"], "w", reason="test")
    Worker(store, metrics="bleu2", worker_id="w2").run(once=True)
    dates = {r["id"]: r["date"] for r in store.list_results()}
    assert dates[forged["id"]] == R.iso(time.time())[:10]


# ---- leases: one clock -------------------------------------------------------------------

def test_two_backends_whose_clocks_differ_by_15_minutes_score_each_request_once(tmp_path):
    store = open_store(tmp_path / "s", quota=Quota(0))
    ids = {submit(store, variant(tmp_path, i), model_name=f"m{i}")["id"] for i in range(4)}
    log = tmp_path / "calls.log"
    procs = [cli("backend", "--store", str(tmp_path / "s"), "--once", "--metrics", "counting", "--worker-id", f"p{i}",
                 "--lease-seconds", "2", "--quota", "0",
                 env={"REXRANK_TEST_LOG": str(log), "REXRANK_TEST_SLOW": "1.5", "REXRANK_TEST_CLOCK_SKEW": str(skew)})
             for i, skew in enumerate([0, 15 * 60])]
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
    requests = store.list_requests()
    assert {r["id"] for r in requests} == ids and {r["status"] for r in requests} == {FINISHED}
    assert all(r["attempts"] == 1 for r in requests), [(r["id"], r["attempts"]) for r in requests]
    calls = [line.split()[0] for line in log.read_text().splitlines()]
    assert len(calls) == len(set(calls)) == 4  # each scored once: no live lease was taken


# ---- cancel means nothing published ------------------------------------------------------

@pytest.fixture(params=["local", "hub"])
def any_store(request, tmp_path):
    """A local store, and a Hub store on the fake Hub (its commits name their parent)."""
    if request.param == "local":
        return open_store(tmp_path / "s")
    request.getfixturevalue("hub")
    return open_store(f"hf://trust-{tmp_path.name[-20:].replace('_', '-')}")


def test_a_cancel_just_before_publication_publishes_nothing(any_store, monkeypatch):
    store = any_store
    req = submit(store)
    score = Worker.score

    def score_then_cancelled(self, request):  # the maintainers cancel as scoring ends
        out = score(self, request)
        store.cancel(request["id"], reason="withdrawn")
        return out

    monkeypatch.setattr(Worker, "score", score_then_cancelled)
    Worker(store, metrics="bleu2", worker_id="w").run(once=True)  # lease renewals far off
    final = store.get_request(req["id"])
    assert final["status"] == FAILED and final["failure_kind"] == "cancelled"
    assert store.list_results() == []


def test_a_request_being_published_can_no_longer_be_cancelled(tmp_path, capsys):
    store = open_store(tmp_path / "s")
    req = submit(store)
    store.claim("w", lease_seconds=60)
    assert store.begin_publish(req["id"], "w")
    code, out, err = run(capsys, "cancel", req["id"], "--store", str(tmp_path / "s"))
    assert code == 1 and "being published; too late to cancel" in err and len(err.strip().splitlines()) == 1
    assert store.finish(req["id"], "w", result_id=req["id"])
