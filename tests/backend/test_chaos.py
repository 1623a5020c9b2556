"""Chaos: three worker processes on one store, SIGKILLed at random moments and restarted,
with a bad queue file in the way. Every good request ends FINISHED with exactly one
result, the bad file never stops anyone, and no temporary folder outlives its worker."""
from __future__ import annotations

import random
import time

from rexrank.store import FINISHED, Quota, open_store
from support.backend_fixtures import cli
from support.requests import submit, variant

N_REQUESTS = 6
N_WORKERS = 3


def test_workers_killed_at_random_score_every_request_exactly_once(tmp_path):
    rng = random.Random(13)
    root = tmp_path / "s"
    store = open_store(root, quota=Quota(0))
    ids = {submit(store, variant(tmp_path, i), model_name=f"m{i}")["id"] for i in range(N_REQUESTS)}
    (root / "requests" / "queue" / "20000101T000000.000000-broken.json").write_text('{"id": ')
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    log = tmp_path / "calls.log"
    env = {"REXRANK_TEST_LOG": str(log), "REXRANK_TEST_SLOW": "0.6", "TMPDIR": str(tmp)}

    def start(i: int):
        # many attempts allowed: here the kills, not the requests, are at fault
        return cli("backend", "--store", str(root), "--poll", "0.1", "--metrics", "counting", "--worker-id", f"w{i}",
                   "--lease-seconds", "2", "--max-attempts", "50", "--quota", "0", env=env)

    workers = [start(i) for i in range(N_WORKERS)]
    kills = 0
    deadline = time.time() + 300
    try:
        while {r["status"] for r in store.list_requests()} != {FINISHED}:
            assert time.time() < deadline, [(r["id"], r["status"], r.get("attempts")) for r in store.list_requests()]
            time.sleep(rng.uniform(0.1, 0.7))
            for i, proc in enumerate(workers):
                assert proc.poll() is None or proc.returncode == -9, proc.communicate()
            if kills < 8 and rng.random() < 0.6:
                victim = rng.randrange(N_WORKERS)
                workers[victim].kill()
                workers[victim].wait()
                kills += 1
                workers[victim] = start(victim)
    finally:
        for proc in workers:
            proc.kill()
            proc.wait()
    assert kills >= 4
    requests = store.list_requests()
    assert {r["id"] for r in requests} == ids and all(r["status"] == FINISHED for r in requests)
    results = store.list_results()
    assert sorted(r["id"] for r in results) == sorted(ids)  # one result per request, none twice
    assert [p.path for p in store.problems()] == ["queue/20000101T000000.000000-broken.json"]
    scored = {line.split()[0] for line in log.read_text().splitlines()}
    assert len(scored) == N_REQUESTS  # every submission was scored (some more than once after a kill)
    # a fresh start removes the temporary folders of the killed workers
    proc = cli("backend", "--store", str(root), "--once", "--metrics", "counting", "--quota", "0", env=env)
    proc.communicate(timeout=120)
    assert proc.returncode == 0
    scratch = tmp / "rexrank-scratch"
    assert not scratch.exists() or list(scratch.iterdir()) == []
