"""Server-side policy and operations (issue 13): the backend enforces the quota and
duplicates whatever the client did, and holds copies for review; model names belong to
namespaces (issue 37); names are compared normalised and shown without control characters;
requeue, cancel, a worker without its data, server paths, temporary files of a killed
worker."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

from support import backendhelpers
from rexrank.backend.worker import Worker
from rexrank.errors import SubmissionError
from rexrank.leaderboard.records import records_frame
from rexrank.store import FAILED, FINISHED, PENDING, RUNNING, Quota, open_store
from rexrank.store.accounts import Account, Submitter
from rexrank.store.review import HELD_MESSAGE
from support.backend_fixtures import PRIVATE_SENTENCES, cli, private_set, test_metrics  # noqa: F401 (fixtures)
from support.requests import EXAMPLE_PREDS, submit, variant
from support.backend_fixtures import run
from support.backend_fixtures import rogue  # noqa: F401 (fixtures)

PUBLISHED_MEDVERSA = {
    "id": "published/iu_xray/findings/medversa", "model_name": "MedVersa", "institution": "Harvard",
    "submitter": "ReXrank (published)", "test_set": "iu_xray", "track": "findings", "source": "published",
    "values": {"bleu2": {"mean": 0.2, "ci95": None, "n": None}},
}


# ---- quota --------------------------------------------------------------------------------

@pytest.mark.parametrize("bypass", ["--quota 0", "REXRANK_QUOTA=0"])
def test_the_backend_enforces_the_quota_the_client_skipped(tmp_path, capsys, monkeypatch, bypass):
    root = str(tmp_path / "s")
    ids = []
    for i in range(2):
        args = ["submit", "--store", root, "--dataset", "example", "--predictions", str(variant(tmp_path, i)),
                "--model-name", f"m{i}", "--submitter", "alice", "--json"]
        if bypass == "--quota 0":
            args += ["--quota", "0"]
        else:
            monkeypatch.setenv("REXRANK_QUOTA", "0")
        code, out, err = run(capsys, *args)
        assert code == 0, err  # the client was talked out of its courtesy check
        ids.append(json.loads(out)["id"])
    monkeypatch.delenv("REXRANK_QUOTA", raising=False)
    (tmp_path / "s" / "requests" / "config.json").write_text(json.dumps({"quota": "1/7"}))  # the store's own setting
    code, _, err = run(capsys, "backend", "--store", root, "--once", "--metrics", "bleu2")
    assert code == 1 and "1 request(s) FAILED" in err, err  # --once says so in its exit status (issue 31)
    first, second = (open_store(root).get_request(i) for i in ids)
    assert first["status"] == FINISHED
    assert second["status"] == FAILED and second["failure_kind"] == "refused"
    assert "already has 1 submission(s) on example/findings" in second["error"]
    assert 'the quota is set by the store\'s config.json key "quota" (1/7)' in second["error"]
    assert [r["id"] for r in open_store(root).list_results()] == [ids[0]]


def test_the_backend_refuses_an_identical_resubmission(tmp_path, rogue):
    store = open_store(tmp_path / "s", quota=Quota(0))
    first = submit(store)
    again = rogue(store, model_name="MODEL-A")
    Worker(store, metrics="bleu2", worker_id="w").run(once=True)
    assert store.get_request(first["id"])["status"] == FINISHED
    refused = store.get_request(again["id"])
    assert refused["status"] == FAILED and "identical resubmission" in refused["error"]


def test_the_backend_holds_another_submitters_identical_predictions_for_review(tmp_path, rogue):
    store = open_store(tmp_path / "s", quota=Quota(0))
    first = submit(store, model_name="Alice's model", submitter="alice")
    Worker(store, metrics="bleu2", worker_id="w").run(once=True)  # settled: found through the copy index
    copied = rogue(store, model_name="Mallory's model", submitter="mallory")  # a client that judged nothing
    Worker(store, metrics="bleu2", worker_id="w").run(once=True)
    held = store.get_request(copied["id"])
    assert held["status"] == "HELD" and held["error"] == HELD_MESSAGE
    assert [m["request_id"] for m in held["review"]["matches"]] == [first["id"]]  # for the maintainers
    assert [r["id"] for r in store.list_results()] == [first["id"]]
    assert store.claim("w", lease_seconds=60) is None  # no worker takes a held request


# Valid Hub names that differ from "alice" only in case: no other rule refuses them (the name
# rule accepts them, and the model name is a new one), so only counting them as alice's
# submissions under the quota does. Lookalikes with other letters or invisible characters
# ("\u0430lice", "al\u200bice") are refused earlier as names: test_a_submitter_name_must_be_a_hub_name.
@pytest.mark.parametrize("lookalike", ["ALICE", "Alice", "aLiCe"])
def test_a_lookalike_submitter_is_no_second_submitter(tmp_path, rogue, lookalike):
    store = open_store(tmp_path / "s", quota=Quota(1, 7))
    submit(store)
    quota_rule = r"submitter '.+' already has 1 submission\(s\) on example/findings in the last 7 days \(limit 1\)"
    with pytest.raises(SubmissionError, match=quota_rule):  # refused by the client ...
        submit(store, variant(tmp_path, 1), model_name="model-b", submitter=lookalike)
    sneaked = rogue(store, variant(tmp_path, 1), model_name="model-b", submitter=lookalike)
    Worker(store, metrics="bleu2", worker_id="w").run(once=True)  # ... and by the backend
    refused = store.get_request(sneaked["id"])
    assert refused["status"] == FAILED and refused["failure_kind"] == "refused"
    assert refused["error"].startswith("refused: ") and re.search(quota_rule, refused["error"])
    assert len(store.list_results()) == 1


def test_a_submitter_name_must_be_a_hub_name():
    from rexrank.store.names import check_submitter

    check_submitter("alice")
    check_submitter("stanford-aimi_lab.2")
    for bad in ("\u0430lice", "al\u200bice", "-alice", "x" * 97, "a\x1b[31m"):
        with pytest.raises(SubmissionError, match="Hugging Face user or organisation name"):
            check_submitter(bad)


def test_on_the_hub_the_submitter_is_the_tokens_account_never_the_typed_name(tmp_path, monkeypatch):
    import rexrank.leaderboard.submit as leaderboard_submit

    store = open_store(tmp_path / "s", quota=Quota(0))
    monkeypatch.setattr(leaderboard_submit, "is_hub_store", lambda _store: True)  # as for an hf:// store
    # the Hub's whoami, for the one token it knows (tests/leaderboard/test_submit_hub.py asks a fake Hub)
    monkeypatch.setattr(leaderboard_submit, "verified_submitter",
                        lambda token, endpoint=None: {"tok-bob": Submitter(Account("bob", "u-bob"))}[token] if token
                        else (_ for _ in ()).throw(SubmissionError("no Hugging Face token was sent")))
    common = dict(predictions=str(EXAMPLE_PREDS), test_set="example", track="findings", model_name="m")
    with pytest.raises(SubmissionError, match="no Hugging Face token"):
        leaderboard_submit.file_request(store, typed_name="alice", **common)
    request = leaderboard_submit.file_request(store, token="tok-bob", typed_name="alice", **common)
    assert (request["submitter"], request["submitter_id"], request["namespace"]) == ("bob", "u-bob", "bob")


# ---- names --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["MedVersa", "medversa", "ＭｅｄＶｅｒｓａ", " MedVersa "])
def test_a_published_model_name_is_shown_under_the_submitters_namespace(tmp_path, name):
    store = open_store(tmp_path / "s")
    store.add_result(PUBLISHED_MEDVERSA)
    submit(store, model_name=name, submitter="mallory")  # nobody owns a bare name, a published entry neither
    Worker(store, metrics="bleu2", worker_id="w").run(once=True)
    frame = records_frame(store.list_results())
    assert sorted(frame["model_name"]) == sorted(["MedVersa", f"mallory / {name.strip()}"])
    [published] = frame[frame["source"] == "published"].to_dict("records")
    assert published["submitter"] == "ReXrank (published)"


def test_two_namespaces_may_both_have_a_model_name(tmp_path, rogue):
    store = open_store(tmp_path / "s", quota=Quota(0))
    submit(store, model_name="CheXcellent", submitter="alice")
    submit(store, variant(tmp_path, 1), model_name="chexcellent", submitter="alice")  # the owner may go on
    submit(store, variant(tmp_path, 2), model_name="CheXcellent", submitter="mallory")
    with pytest.raises(SubmissionError, match="mixes Cyrillic and Latin"):  # a lookalike is still no valid name
        submit(store, variant(tmp_path, 3), model_name="\u0421heXcellent", submitter="mallory")  # Cyrillic С
    while Worker(store, metrics="bleu2", worker_id="w").run(once=True):
        pass
    frame = records_frame(store.list_results())
    assert sorted(frame["model_name"]) == ["alice / CheXcellent", "alice / chexcellent", "mallory / CheXcellent"]


def test_names_are_normalised_before_comparison():
    from rexrank.store.names import name_key

    same = ["MedVersa", "medversa", "Med\u200bVersa", "M\u0435dVersa", "ＭｅｄＶｅｒｓａ", "Med\u202eVersa", "  MedVersa "]
    assert {name_key(n) for n in same} == {"medversa"}
    assert name_key("MedVersa-2") != name_key("MedVersa")


def test_invisible_characters_in_a_model_name_are_refused(tmp_path):
    store = open_store(tmp_path / "s")
    for name in ("Med\u202eVersa", "Evil\x1b[31m red", "zero\u200bwidth"):
        with pytest.raises(SubmissionError, match="invisible or control character"):
            submit(store, model_name=name)
    assert store.list_requests() == []


def test_a_right_to_left_override_cannot_reverse_a_name_on_the_page():
    record = {"id": "r1", "model_name": "\u202easreVdeM", "institution": "Lab\u2067\x1b[31m", "test_set": "iu_xray",
              "track": "findings", "values": {"bleu2": {"mean": 0.1, "ci95": None, "n": 590}}}
    row = records_frame([record]).iloc[0]
    assert row["model_name"] == "asreVdeM" and row["institution"] == "Lab"


# ---- terminal injection -------------------------------------------------------------------

def test_escape_sequences_in_names_never_reach_the_terminal(tmp_path, capsys, rogue):
    root = tmp_path / "s"
    store = open_store(root, quota=Quota(0))
    evil = "\x1b[2J\x1b]0;owned\x07\x1b[31mEvil"
    req = rogue(store, model_name=evil)
    code, out, err = run(capsys, "status", "--store", str(root))
    assert code == 0 and "\x1b" not in out + err and "Evil" in out
    code, out, err = run(capsys, "status", "--store", str(root), req["id"])
    assert code == 0 and "\x1b" not in out + err
    code, out, err = run(capsys, "submit", "--store", str(root), "--dataset", "example", "--predictions",
                         str(variant(tmp_path, 1)), "--model-name", evil, "--submitter", "bob")
    assert code == 1 and "\x1b" not in out + err and "invisible or control character" in err
    proc = cli("backend", "--store", str(root), "--once", "--metrics", "bleu2", "--quota", "0")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "request(s) FAILED" in err, err  # the rogue request is refused: --once says so
    assert f"claimed {req['id']}" in err and "\x1b" not in out + err


def test_display_removes_escapes_and_invisible_characters():
    from rexrank.store.names import display

    assert display("\x1b[31mred\x1b[0m \u202eeman\u2066x\u200b") == "red emanx"
    assert display("a\nb\tc", keep_newlines=True) == "a\nb\tc" and display("a\nb") == "ab"


# ---- operations ---------------------------------------------------------------------------

def test_requeue_and_cancel_commands(tmp_path, capsys, test_metrics):  # noqa: F811
    root = tmp_path / "s"
    store = open_store(root, quota=Quota(0))
    failing = submit(store)
    Worker(store, metrics="crashing", worker_id="w").run(once=True)
    assert store.get_request(failing["id"])["status"] == FAILED
    code, out, err = run(capsys, "requeue", "--store", str(root), failing["id"])
    assert code == 0 and f"{failing['id']}: PENDING" in out
    requeued = store.get_request(failing["id"])
    assert requeued["status"] == PENDING and requeued["attempts"] == 0 and requeued["error"] is None
    Worker(store, metrics="bleu2", worker_id="w").run(once=True)
    assert store.get_request(failing["id"])["status"] == FINISHED
    code, _, err = run(capsys, "requeue", "--store", str(root), failing["id"])
    assert code == 1 and "only FAILED or RUNNING requests can be requeued" in err

    waiting = submit(store, variant(tmp_path, 1), model_name="m1")
    code, out, _ = run(capsys, "cancel", "--store", str(root), waiting["id"], "--reason", "asked by the submitter")
    assert code == 0 and "FAILED (cancelled by the maintainers: asked by the submitter)" in out
    cancelled = store.get_request(waiting["id"])
    assert cancelled["failure_kind"] == "cancelled"
    assert Worker(store, metrics="bleu2", worker_id="w").run(once=True) == 0
    code, _, err = run(capsys, "cancel", "--store", str(root), "20990101T000000.000000-0000000000")
    assert code == 1 and "no request" in err


def test_a_cancelled_running_request_publishes_nothing(tmp_path, test_metrics, monkeypatch):  # noqa: F811
    import threading

    store = open_store(tmp_path / "s")
    req = submit(store)
    monkeypatch.setenv("REXRANK_TEST_SLOW", "1.0")
    worker = Worker(store, metrics="counting", worker_id="slow", lease_seconds=0.3)
    thread = threading.Thread(target=worker.run, kwargs={"once": True})
    thread.start()
    while store.get_request(req["id"])["status"] != RUNNING:
        time.sleep(0.02)
    store.cancel(req["id"])
    thread.join(30)
    assert store.get_request(req["id"])["status"] == FAILED and store.list_results() == []


def test_a_backend_that_cannot_load_the_test_set_leaves_the_request_pending(tmp_path, private_set):  # noqa: F811
    _, preds = private_set
    root = tmp_path / "s"
    store = open_store(root)
    req = submit(store, preds, test_set="rexgradient")
    proc = cli("backend", "--store", str(root), "--once", "--metrics", "bleu2")  # no --data-dir
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert "cannot load test set 'rexgradient'" in err and "PENDING again" in err and "Traceback" not in err
    after = store.get_request(req["id"])
    assert after["status"] == PENDING and after["attempts"] == 0 and after["error"] is None
    from rexrank.backend.worker import BackendStop

    with pytest.raises(BackendStop):  # the same in a poll loop: it stops instead of failing every request
        Worker(store, metrics="bleu2", worker_id="w").run(poll=0.01)
    assert store.get_request(req["id"])["status"] == PENDING


def test_public_messages_hold_no_server_paths(tmp_path):
    secret = tmp_path / "srv-secret" / "weights" / "chexbert.pth"
    store = open_store(tmp_path / "s")
    req = submit(store)
    Worker(store, metrics="sembscore", metric_options={"sembscore": {"checkpoint_path": str(secret)}},
           worker_id="w").run(once=True)
    final = store.get_request(req["id"])
    assert final["status"] == FAILED and "checkpoint_path" in final["error"]
    assert str(tmp_path) not in final["error"] and "srv-secret" not in final["error"]
    assert "<server path>" in final["error"]


def test_temporary_files_of_a_killed_worker_are_removed_at_the_next_start(tmp_path, monkeypatch, test_metrics):  # noqa: F811
    import tempfile

    root = tmp_path / "s"
    store = open_store(root)
    submit(store)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    started = tmp_path / "started"
    proc = cli("backend", "--store", str(root), "--once", "--metrics", "counting", "--lease-seconds", "60",
               env={"TMPDIR": str(tmp), "REXRANK_TEST_SLOW": "60", "REXRANK_TEST_STARTED": str(started)})
    try:
        deadline = time.time() + 60
        while not started.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.time() < deadline
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()
    left = list((tmp / "rexrank-scratch").glob("backend-*/predictions.parquet"))
    assert len(left) == 1  # SIGKILL: nothing was cleaned up
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    from rexrank.store.scratch import ScratchDir

    alive = ScratchDir("backend")  # a live worker's folder on the same machine is kept
    Worker(store, metrics="bleu2", worker_id="next")
    assert not left[0].parent.exists() and alive.path.exists()
    alive.cleanup()
    assert not alive.path.exists()


def test_a_scratch_folder_is_never_taken_for_a_dead_workers_while_it_is_being_made(tmp_path, monkeypatch):
    """Another worker's remove_stale() running between a new folder's owner file and its lock
    (shard Jobs starting side by side) left the folder deleted under its living owner."""
    import fcntl

    from rexrank.store import scratch

    monkeypatch.setattr(scratch, "scratch_root", lambda: tmp_path)
    real_flock = fcntl.flock
    swept = []

    def flock_after_a_sweep(fd, op):
        if not swept:  # the owner's own lock: another worker sweeps first
            swept.append(scratch.remove_stale(tmp_path))
        return real_flock(fd, op)

    monkeypatch.setattr(scratch.fcntl, "flock", flock_after_a_sweep)
    made = scratch.ScratchDir("shard")
    monkeypatch.setattr(scratch.fcntl, "flock", real_flock)
    assert swept == [[]] and made.path.is_dir() and (made.path / scratch.OWNER_FILE).exists()
    assert scratch.remove_stale(tmp_path) == [] and made.path.is_dir()  # alive: its owner holds the lock
    made.cleanup()


def test_a_folder_removed_while_stale_ones_are_swept_is_passed_over(tmp_path, monkeypatch):
    """A folder without its owner file that its owner removes while remove_stale() looks at it
    (a shard finishing beside another one starting) raised FileNotFoundError in the new one."""
    from pathlib import Path

    from rexrank.store import scratch

    going = tmp_path / "backend-going"
    going.mkdir()
    real_stat, looks = Path.stat, []

    def stat(path, *a, **k):
        if path == going:
            looks.append(path)
            if len(looks) > 1:  # listed as a folder, then gone when its age is read
                raise FileNotFoundError(2, "No such file or directory", str(path))
        return real_stat(path, *a, **k)

    monkeypatch.setattr(Path, "stat", stat)
    assert scratch.remove_stale(tmp_path) == [] and len(looks) == 2


def test_dating_a_request_back_escapes_neither_quota_nor_copy_review(tmp_path, rogue):
    store = open_store(tmp_path / "s", quota=Quota(1, 7))
    now = time.time()
    first = submit(store, model_name="Owned", submitter="alice", now=now)
    Worker(store, metrics="bleu2", worker_id="w").run(once=True)
    assert store.get_request(first["id"])["status"] == FINISHED
    quota_dodge = rogue(store, variant(tmp_path, 1), model_name="Other", submitter="alice", now=now - 3600)
    copy_dated_back = rogue(store, model_name="owned", submitter="mallory", now=now - 7200)
    Worker(store, metrics="bleu2", worker_id="w").run(once=True)
    Worker(store, metrics="bleu2", worker_id="w").run(once=True)
    assert "already has 1 submission" in store.get_request(quota_dodge["id"])["error"]
    # the original is who had the predictions first: dated by the server, never by the request's writer
    assert store.get_request(copy_dated_back["id"])["status"] == "HELD"
    assert [r["id"] for r in store.list_results()] == [first["id"]]


def test_a_forged_request_for_an_unknown_test_set_is_refused_and_the_worker_goes_on(tmp_path):
    root = tmp_path / "s"
    store = open_store(root, quota=Quota(0))
    forged = submit(store, model_name="forged")
    good = submit(store, variant(tmp_path, 1), model_name="good")
    path = root / "requests" / "queue" / f"{forged['id']}.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "test_set": "secret_set"}))
    assert Worker(store, metrics="bleu2", worker_id="w").run(once=True) == 2
    refused = store.get_request(forged["id"])
    assert refused["status"] == FAILED and "unknown test set 'secret_set'" in refused["error"]
    assert store.get_request(good["id"])["status"] == FINISHED


def test_a_request_settled_by_another_worker_while_the_rules_are_checked_is_no_error(tmp_path):
    """The chaos test once saw a request FAILED with 'queue/<another request> not found': the
    rules list the queue, and another worker settled a listed request before it was read."""
    import threading

    store = open_store(tmp_path / "s", quota=Quota(0))
    other = submit(store, variant(tmp_path, 0), model_name="m0")
    mine = submit(store, variant(tmp_path, 1), model_name="m1")
    assert store.claim("w-other", lease_seconds=60)["id"] == other["id"]
    listing = store.requests.snapshot
    settler = threading.Thread(target=lambda: store.finish(other["id"], "w-other", result_id=other["id"]))

    def snapshot_then_another_worker_settles(*folders, **kw):
        snap = listing(*folders, **kw)
        if not settler.is_alive() and settler.ident is None:
            settler.start()
            settler.join(0.5)  # it commits now, unless the reads that follow hold commits off
        return snap

    store.requests.snapshot = snapshot_then_another_worker_settles
    assert store.policy_problem(mine) is None
    settler.join(10)
    assert not settler.is_alive() and store.get_request(other["id"])["status"] == FINISHED
