"""Stores with a long history, for the store benchmarks (backend.py, leaderboard.py).

A store is a local folder or hf://bench on the fake Hub of the tests (tests/support/fakehub.py,
imported by path), served from a child process as the real Hub is another machine: the
client's costs are then not mixed with the server's in one interpreter.

The history is written as a store of the earlier layout would hold it (every request in
queue/, result records without an index): the benchmarks time the store's one-off move
to the current layout, then what each operation costs afterwards.
"""
from __future__ import annotations

import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from rexrank.leaderboard.records import LEADERBOARD_TEST_SETS, METRIC_KEYS
from rexrank.store import FINISHED, Quota, open_store
from rexrank.store import records as R
from rexrank.testsets.registry import TEST_SETS, TRACKS

TESTS_DIR = Path(__file__).resolve().parent.parent / "tests"
COMBOS = [(t, k) for t in LEADERBOARD_TEST_SETS for k in TRACKS]


def _serve(ready, keep_versions: int) -> None:
    sys.path.insert(0, str(TESTS_DIR))
    from fakehub import FakeHub

    hub = FakeHub(keep_versions=keep_versions).start()
    ready.put(hub.url)
    while True:
        time.sleep(3600)


class FakeHubProcess:
    """The fake Hub in a child process; `url` is its endpoint."""

    def __init__(self, keep_versions: int = 8):
        ctx = multiprocessing.get_context("spawn")
        ready = ctx.Queue()
        self.process = ctx.Process(target=_serve, args=(ready, keep_versions), daemon=True)
        self.process.start()
        self.url = ready.get(timeout=60)

    def __enter__(self) -> "FakeHubProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.process.kill()
        self.process.join()


def open_bench_store(kind: str, name: str, hub_url: str | None = None, local_dir: str | None = None):
    """A fresh store: kind "local" (a temporary folder, in `local_dir` if given) or "hub"
    (hf://<name> on the fake Hub)."""
    if kind == "local":
        return open_store(Path(tempfile.mkdtemp(prefix=f"rexrank-bench-{name}-", dir=local_dir)) / "store", quota=Quota(0))
    import huggingface_hub.constants as constants

    constants.HF_HUB_OFFLINE = False  # the benchmarks may run with HF_HUB_OFFLINE=1 set
    return open_store(f"hf://{name}", quota=Quota(0), endpoint=hub_url, token="hf_bench")


def history_request(i: int) -> dict:
    """The i-th settled request of a synthetic history: ~1,000 models on the 8 test sets
    and tracks, ~330 submitters, one FAILED in ten (as the queue of a busy leaderboard)."""
    test_set, track = COMBOS[i % len(COMBOS)]
    ts = 1.7e9 + i * 600.0
    rid = R.new_request_id(ts, f"team-{i // 24}", f"model-{i // 8}", str(i))
    failed = i % 10 == 9
    status = "FAILED" if failed else FINISHED
    return {
        "id": rid, "status": status, "test_set": test_set, "track": track, "private": test_set == "rexgradient",
        "model_name": f"model-{i // 8}", "submitter": f"team-{i // 24}", "institution": f"Institution {i % 17}",
        "model_url": "", "trained_on": [], "submitted_time": R.iso(ts),
        "predictions": {"path": R.predictions_path(rid), "source": "bench.jsonl", "sha256": f"{i:064x}", "n": 590,
                        "n_empty": 0, "ids_checked": True},
        "worker": "bench", "lease_expires": None, "attempts": 1,
        "error": "a metric could not run" if failed else None, "failure_kind": "internal" if failed else None,
        "result_id": None if failed else rid, "finished_time": R.iso(ts + 300),
        "history": [{"time": R.iso(ts), "status": "PENDING"}, {"time": R.iso(ts + 1), "status": "RUNNING"},
                    {"time": R.iso(ts + 300), "status": status}],
    }


def history_result(request: dict, rng: np.random.Generator) -> dict:
    # within every metric's range (results_schema.value_in_range), on every study of the test
    # set: no value is left unranked
    n = TEST_SETS[request["test_set"]].n_studies
    values = {k: {"mean": float(rng.uniform(0.3, 0.95)), "ci95": float(rng.uniform(0.005, 0.03)), "n": n}
              for k in METRIC_KEYS}
    return {
        "id": request["id"], "request_id": request["id"], "model_name": request["model_name"],
        "institution": request["institution"], "model_url": "", "submitter": request["submitter"],
        "date": request["submitted_time"][:10], "test_set": request["test_set"], "track": request["track"],
        "source": "rexrank", "trained_on": [], "per_study_available": False, "values": values,
        "provenance": {"test_set": {"n_studies": n}},
    }


def add_history(store, n: int, *, results: bool = True, seed: int = 0) -> None:
    """`n` settled requests (with a stand-in predictions file each) and, with `results`,
    the result record of each finished one: one commit per repo, in the earlier layout."""
    rng = np.random.default_rng(seed)
    requests = [history_request(i) for i in range(n)]
    changes: dict[str, bytes | None] = {}
    for req in requests:
        changes[R.request_path(req["id"])] = R.dumps(req)  # queue/: where the earlier layout kept every request
        changes[req["predictions"]["path"]] = b"PAR1 stand-in: history predictions are never read"
    store.requests.commit(changes, message=f"history: {n} requests", parent=store.requests.version())
    if results:
        records = {R.result_path(r): R.dumps(r) for r in (history_result(q, rng) for q in requests if q["status"] == FINISHED)}
        store.results.commit(records, message=f"history: {len(records)} results", parent=store.results.version())


def run_grid(kinds: list[str], sizes: list[int], run_one, describe) -> list[dict]:
    """run_one(kind, size, hub_url) for every store kind and history size (the fake Hub
    started once, if a kind needs it); each row is printed with describe(row) as it comes."""
    rows = []
    hub = FakeHubProcess() if "hub" in kinds else None
    try:
        for kind in kinds:
            for size in sizes:
                rows.append(run_one(kind, size, hub.url if hub else None))
                print(describe(rows[-1]), flush=True)
    finally:
        if hub:
            hub.__exit__()
    print()
    return rows


class FileCounter:
    """Counts the files a store reads and lists (both repos): figures that do not depend on
    the machine's load, unlike times."""

    def __init__(self, store):
        self.read = self.listed = 0
        for repo in (store.requests, store.results):
            reader, snapshot = repo.read_optional, repo.snapshot

            def read_optional(snap, path, _reader=reader):
                self.read += 1
                return _reader(snap, path)

            def counted_snapshot(*folders, _snapshot=snapshot, **kw):
                snap = _snapshot(*folders, **kw)
                self.listed += len(snap.files)
                return snap

            repo.read_optional, repo.snapshot = read_optional, counted_snapshot

    def take(self) -> tuple[int, int]:
        """(files read, files listed) since the last call."""
        out = (self.read, self.listed)
        self.read = self.listed = 0
        return out


def timed(fn, *args, **kwargs) -> tuple[float, object]:
    t0 = time.perf_counter()
    value = fn(*args, **kwargs)
    return time.perf_counter() - t0, value


def quiet_logs() -> None:
    import logging

    logging.getLogger("rexrank").setLevel(logging.WARNING)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
