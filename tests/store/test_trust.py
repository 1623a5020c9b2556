"""The store trusts no field a request's writer chose and fails cleanly (issues 19.2-19.3,
20.4-20.5): request ids, server-owned time and privacy, leases under skewed clocks,
cancel versus publication, read-only stores, stopped readers, a full disk."""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rexrank.backend.worker import Worker
from rexrank.cli.main import main
from rexrank.errors import SubmissionError
from rexrank.store import FAILED, FINISHED, Quota, StoreError, open_store
from rexrank.store import records as R
from support.backend_fixtures import HELPER, cli, private_set, test_metrics  # noqa: F401 (fixtures)
from support.requests import example_rows, submit, variant, write_jsonl
from support.store_fixtures import fake_hub, hub  # noqa: F401 (fixtures)


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# ---- request ids -------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["status", "cancel", "requeue"])
@pytest.mark.parametrize("bad_id", ["../../x", "a" * 300, "queue/../../x", "x\x00y",
                                    "\u0662" * 8 + "T000000.000000-0123456789"])  # Arabic-Indic digits
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
    store = open_store(tmp_path / "s", quota=Quota(1, 7))
    probe = write_jsonl(tmp_path / "probe.jsonl", {"RG000": "x", "RG999": "y"})
    req = submit(store, probe, test_set="rexgradient")
    rewrite(tmp_path / "s", req["id"], private=False)
    Worker(store, data_dir=data_dir, metrics="bleu2", worker_id="w").run(once=True)
    assert store.get_request(req["id"])["failure_kind"] == "validation"
    with pytest.raises(SubmissionError, match="already has 1 submission"):
        submit(store, write_jsonl(tmp_path / "probe2.jsonl", {"RG001": "x"}), test_set="rexgradient", model_name="b")


def test_a_private_filing_with_more_rows_than_the_set_has_studies_is_refused_at_filing(tmp_path):
    from rexrank.testsets.registry import get_spec

    n = get_spec("rexgradient").n_studies
    rows = write_jsonl(tmp_path / "many.jsonl", {f"RG{i:05d}": "x" for i in range(n + 1)})
    with pytest.raises(SubmissionError, match=f"{n + 1} predictions, but .* has {n} studies"):
        submit(open_store(tmp_path / "s"), rows, test_set="rexgradient")


def test_a_cancelled_request_counts_against_the_quota(tmp_path):
    store = open_store(tmp_path / "s", quota=Quota(1, 7))
    store.cancel(submit(store)["id"])
    with pytest.raises(SubmissionError, match="already has 1 submission"):
        submit(store, variant(tmp_path, 1), model_name="model-b")


# ---- time: the server's, never the writer's ----------------------------------------------

YEAR = 365 * 86400


def forge(tmp_path, n: int, **fields) -> dict:
    """A request written straight into the store's files, not through the filing API (no
    check, no entry in the backend's register), with fields its writer chose."""
    scratch = tmp_path / f"scratch{n}"
    req = submit(open_store(scratch, quota=Quota(0)), variant(tmp_path, n), model_name=f"m{n}",
                 **{k: v for k, v in fields.items() if k == "submitter"})
    for path in (R.request_path(req["id"]), R.predictions_path(req["id"])):
        target = tmp_path / "s" / "requests" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(scratch / "requests" / path, target)
    rewrite(tmp_path / "s", req["id"], **{k: v for k, v in fields.items() if k != "submitter"})
    return req


@pytest.mark.parametrize("how", ["written-straight-into-the-store", "seen-by-the-backend-then-edited",
                                 "filed-through-the-api-then-edited"])
@pytest.mark.parametrize("shift", [-30 * 86400, +YEAR])
def test_a_request_dated_by_its_writer_still_obeys_the_quota(tmp_path, shift, how):
    store = open_store(tmp_path / "s", quota=Quota(1, 7))
    first = submit(store)
    Worker(store, metrics="bleu2", worker_id="w").run(once=True)
    assert store.get_request(first["id"])["status"] == FINISHED
    dated = {"submitted_time": R.iso(time.time() + shift), "received_time": R.iso(time.time() + shift)}
    if how == "written-straight-into-the-store":
        forged = forge(tmp_path, 1, **dated)
    elif how == "seen-by-the-backend-then-edited":  # seen while the backend claims another request
        other = submit(store, variant(tmp_path, 2), model_name="m2", submitter="bob")
        forged = forge(tmp_path, 1)
        assert store.claim("w", lease_seconds=60)["id"] == other["id"]
        rewrite(tmp_path / "s", forged["id"], **dated)
        store.release(other["id"], "w", reason="test")
    else:  # filed by a client that skips the quota check, then its file edited
        forged = submit(open_store(tmp_path / "s", quota=Quota(0)), variant(tmp_path, 1), model_name="m1")
        rewrite(tmp_path / "s", forged["id"], **dated)
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

    def score_then_cancelled(self, resolved):  # the maintainers cancel as scoring ends
        out = score(self, resolved)
        store.cancel(resolved.id, reason="withdrawn")
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


# ---- a store that fails cleanly ----------------------------------------------------------

def namespace_available() -> bool:
    """Private mounts (read-only binds, a tiny tmpfs) in a throw-away mount namespace."""
    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=4k tmpfs /mnt"],
                           capture_output=True)
    return probe.returncode == 0


needs_mounts = pytest.mark.skipif(not namespace_available(), reason="needs `unshare -m` and mount (root)")
RX = f"{sys.executable} {HELPER}"


def in_namespace(script: str) -> subprocess.CompletedProcess:
    return subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300)


def results_of(out: Path, name: str) -> tuple[int, str, str]:
    return (int((out / f"{name}.rc").read_text()), (out / f"{name}.out").read_text(), (out / f"{name}.err").read_text())


@needs_mounts
def test_every_reader_works_on_a_read_only_store_and_a_writer_says_so_in_one_line(tmp_path):
    root = tmp_path / "s"
    store = open_store(root, quota=Quota(0))
    done = submit(store)
    Worker(store, metrics="bleu2", worker_id="w").run(once=True)
    waiting = submit(store, variant(tmp_path, 1), model_name="m1")
    out = tmp_path / "out"
    out.mkdir()
    leaderboard = ("from rexrank.leaderboard.source import LeaderboardSource; from rexrank.store import open_store; "
                   f"print(len(LeaderboardSource.from_store(open_store('{root}', create=False), ttl=0).frame()))")
    commands = {"list": f"{RX} status --store {root}", "one": f"{RX} status {done['id']} --store {root} --json",
                "board": f"{sys.executable} -c \"{leaderboard}\"", "cancel": f"{RX} cancel {waiting['id']} --store {root}"}
    script = f"mount --bind {root} {root} && mount -o remount,bind,ro {root} || exit 99\n" + "\n".join(
        f"{cmd} > {out}/{name}.out 2> {out}/{name}.err; echo $? > {out}/{name}.rc" for name, cmd in commands.items())
    assert in_namespace(script).returncode == 0
    code, listing, err = results_of(out, "list")
    assert code == 0 and done["id"] in listing and waiting["id"] in listing, err
    code, one, err = results_of(out, "one")
    assert code == 0 and json.loads(one)["status"] == FINISHED, err
    code, board, err = results_of(out, "board")
    assert code == 0 and board.strip() == "1", err
    code, _, err = results_of(out, "cancel")
    assert code == 1 and err.strip().splitlines() == [err.strip()] and "Read-only file system" in err, err
    assert store.get_request(waiting["id"])["status"] == "PENDING"


STOPPED_READER = """
import os, signal, sys
import rexrank.store.store as store_module
from rexrank.store import open_store
read = store_module.Store._read_records
def stop_midway(self, *args, **kw):
    found = read(self, *args, **kw)
    os.kill(os.getpid(), signal.SIGSTOP)  # Ctrl-Z while `rexrank status` lists the queue
    return found
store_module.Store._read_records = stop_midway
open_store(sys.argv[1], create=False).list_requests()
"""


def test_a_stopped_reader_does_not_block_writers(tmp_path):
    root = tmp_path / "s"
    store = open_store(root, quota=Quota(0))
    submit(store)
    reader = subprocess.Popen([sys.executable, "-c", STOPPED_READER, str(root)])
    try:
        deadline = time.time() + 60
        while Path(f"/proc/{reader.pid}/stat").read_text().split(") ")[1][0] != "T":
            assert reader.poll() is None and time.time() < deadline
            time.sleep(0.02)
        filed = []
        writer = threading.Thread(target=lambda: filed.append(submit(store, variant(tmp_path, 1), model_name="m1")),
                                  daemon=True)
        writer.start()
        writer.join(10)
        assert filed, "the writer waited for the stopped reader"
    finally:
        reader.kill()
        reader.wait()


def big_predictions(tmp_path) -> Path:
    """Valid predictions of ~110 kB that do not compress: more than the tiny disk holds."""
    rows = {sid: base64.b64encode(os.urandom(4500)).decode() for sid in example_rows()}
    return write_jsonl(tmp_path / "big.jsonl", rows)


@needs_mounts
def test_a_full_disk_at_submission_is_one_line_and_leaves_nothing_behind(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    submit_cmd = (f"{RX} submit --store {disk}/s --dataset example --predictions {big_predictions(tmp_path)} "
                  "--model-name m --submitter alice --no-progress")
    script = (f"mount -t tmpfs -o size=64k tmpfs {disk} || exit 99\n"
              f"{submit_cmd} > {out}/submit.out 2> {out}/submit.err; echo $? > {out}/submit.rc\n"
              f"cd {disk}/s && find . > {out}/files.out; echo 0 > {out}/files.rc; : > {out}/files.err")
    assert in_namespace(script).returncode == 0
    code, _, err = results_of(out, "submit")
    assert code == 1 and "No space left on device" in err and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err
    files = results_of(out, "files")[1].split()
    assert not [f for f in files if f.startswith(("./requests/predictions/", "./requests/queue/")) or ".tmp-" in f], files


@needs_mounts
def test_a_full_disk_when_publishing_puts_the_request_back_at_once(tmp_path):
    root = tmp_path / "s"
    store = open_store(root)
    req = submit(store)
    out = tmp_path / "out"
    out.mkdir()
    script = (f"mount -t tmpfs -o size=64k tmpfs {root}/results || exit 99\n"
              f"{sys.executable} -c \"from rexrank.store.local import LocalRepo; LocalRepo('{root}/results')\"\n"
              f"dd if=/dev/zero of={root}/results/.fill bs=4096 2>/dev/null\n"
              f"{RX} backend --store {root} --once --metrics bleu2 > {out}/backend.out 2> {out}/backend.err; "
              f"echo $? > {out}/backend.rc\n"
              f"cd {root}/results && find . -name '.tmp-*' -o -path './records/*' -o -path './per_study/*' "
              f"> {out}/left.out; echo 0 > {out}/left.rc; : > {out}/left.err")
    assert in_namespace(script).returncode == 0
    code, _, err = results_of(out, "backend")
    last = err.strip().splitlines()[-1]
    assert code == 1 and "No space left on device" in last and "is PENDING again" in last, err
    assert "Traceback" not in err
    assert results_of(out, "left")[1].split() == []  # no temporary file, no record, no empty folder
    after = store.get_request(req["id"])
    assert after["status"] == "PENDING" and after["attempts"] == 0


STOPPED_WRITER = """
import os, signal, sys
import rexrank.store.local as local
from rexrank.store import open_store
commit = local.LocalRepo._commit_locked
def stop_midway(self, *args, **kw):
    os.kill(os.getpid(), signal.SIGSTOP)  # Ctrl-Z while `rexrank cancel` holds the write lock
    return commit(self, *args, **kw)
local.LocalRepo._commit_locked = stop_midway
open_store(sys.argv[1], create=False).cancel(sys.argv[2])
"""


def test_a_writer_waiting_for_a_stopped_writer_ends_with_a_message_naming_it(tmp_path, monkeypatch):
    root = tmp_path / "s"
    store = open_store(root, quota=Quota(0))
    req = submit(store)
    holder = subprocess.Popen([sys.executable, "-c", STOPPED_WRITER, str(root), req["id"]])
    try:
        deadline = time.time() + 60
        while Path(f"/proc/{holder.pid}/stat").read_text().split(") ")[1][0] != "T":
            assert holder.poll() is None and time.time() < deadline
            time.sleep(0.02)
        monkeypatch.setenv("REXRANK_LOCK_WAIT", "1")
        errors = []

        def file():
            try:
                submit(store, variant(tmp_path, 1), model_name="m1")
            except StoreError as exc:
                errors.append(str(exc))

        writer = threading.Thread(target=file, daemon=True)
        writer.start()
        writer.join(30)
        assert not writer.is_alive(), "the writer waited for the stopped writer with no end"
        assert len(errors) == 1 and f"held for 1 s by pid {holder.pid} (" in errors[0] and "resume it" in errors[0]
        assert store.get_request(req["id"])["status"] == "PENDING"  # and readers still read
    finally:
        holder.kill()
        holder.wait()


def test_a_waiting_request_that_says_it_is_being_published_can_still_be_cancelled(tmp_path):
    forged = forge(tmp_path, 1, publishing=True)
    assert open_store(tmp_path / "s").cancel(forged["id"])["failure_kind"] == "cancelled"
