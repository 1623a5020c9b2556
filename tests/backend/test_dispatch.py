"""The backend as a dispatcher over Jobs (rexrank.backend.dispatch): shards that merge into
exactly one worker's numbers, retries, cancel, restarts and the store token, against the
fake Hub's Jobs API (tests/support/fakehub.py), whose Jobs run as local processes."""
from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest

from rexrank.backend.dispatch import Dispatcher, DispatchSettings, dispatch_settings
from rexrank.backend.jobs import LocalJobs
from rexrank.backend.worker import Worker
from rexrank.store import FAILED, FINISHED, Quota, open_store
from support.requests import submit
from support.dispatch_fixtures import ORG, TOKEN, dispatcher, in_thread, logged, published, wait_for
from support.dispatch_fixtures import hub  # noqa: F401 (fixtures)
from support.backend_fixtures import HELPER
from support.backend_fixtures import test_metrics  # noqa: F401 (fixtures)

pytestmark = pytest.mark.long  # Job scenarios with fake Hubs and shard processes: minutes


def single_worker_run(tmp_path, metrics: str, **env):
    store = open_store(tmp_path / "single", quota=Quota(0))
    submit(store)
    assert Worker(store, metrics=metrics, worker_id="one").run(once=True) == 1
    [record] = store.list_results()
    return record, pd.read_parquet(io.BytesIO(store.read_per_study(record)))


def run_until_jobs_run(hub, store, tmp_path) -> tuple[threading.Thread, Path]:
    """A dispatcher in a thread scoring `counting` in two shards, returned once both Jobs run and
    one has started scoring, with the file that lets the shards finish: each shard is held until
    it exists (not slept a fixed time), so the test acts while they run and waits no longer."""
    started, go = tmp_path / "started", tmp_path / "go"
    d = dispatcher(store, "counting", max_jobs=2, job_env={"HF_HUB_OFFLINE": "0", "REXRANK_TEST_HOLD": str(go),
                                                            "REXRANK_TEST_STARTED": str(started)})
    thread = in_thread(lambda: d.run(once=True))
    wait_for(lambda: started.exists() and len(hub.jobs) == 2, what="two running Jobs")
    return thread, go


def test_three_shards_merge_into_the_single_worker_run(hub, tmp_path):
    store = open_store(f"hf://{ORG}", quota=Quota(0))
    req = submit(store)
    assert dispatcher(store, "bleu2,rouge").run(once=True) == 1
    final = store.get_request(req["id"])
    assert final["status"] == FINISHED, final.get("error")
    plan = final["dispatch"]["plan"]
    assert len(plan["ranges"]) == 3 and len(hub.jobs) == 3
    record, per_study = published(store)
    single, single_per_study = single_worker_run(tmp_path, "bleu2,rouge")
    pd.testing.assert_frame_equal(per_study, single_per_study)  # exactly, study by study
    assert record["values"] == single["values"]
    for name, summary in record["summaries"].items():
        assert {k: v for k, v in summary.items() if k != "seconds"} == \
               {k: v for k, v in single["summaries"][name].items() if k != "seconds"}
    # the organisers' record: every Job and the GPU-seconds per metric; the scratch area is emptied
    assert {j["state"] for j in final["dispatch"]["jobs"]} == {"COMPLETED"}
    assert set(final["dispatch"]["gpu_seconds"]) == {"bleu2", "rouge"}
    assert not [p for p in hub.files(f"{ORG}/requests") if p.startswith("scratch/")]


def test_a_shard_failing_every_attempt_fails_the_request_with_its_cause(hub, tmp_path, test_metrics):
    store = open_store(f"hf://{ORG}", quota=Quota(0))
    req = submit(store)
    d = dispatcher(store, "counting", shard_attempts=2, job_timeout=2, max_jobs=2,
                   job_env={"HF_HUB_OFFLINE": "0", "REXRANK_TEST_SLOW": "30"})
    assert d.run(once=True) == 1
    final = store.get_request(req["id"])
    assert final["status"] == FAILED and "failed 2 time(s)" in final["error"] and "Job timeout" in final["error"]
    assert store.list_results() == []
    failing = int(re.search(r"shard (\d) of 2 failed 2 time", final["error"]).group(1)) - 1
    attempts = {s: sorted(j["attempt"] for j in final["dispatch"]["jobs"] if j["shard"] == s) for s in range(2)}
    assert attempts[failing] == [1, 2]  # both attempts it was allowed, and no third
    # the other had both too, unless the machine was slow enough that the failing shard's second
    # timeout came before their first (their Jobs start one after another): then it stopped them
    assert all(a in ([1], [1, 2]) for a in attempts.values()) and len(hub.jobs) == sum(map(len, attempts.values()))
    # requeued once the cause is fixed: a new round of attempts, numbered after the old ones
    store.requeue(req["id"])
    assert dispatcher(store, "counting", max_jobs=2, job_env={"HF_HUB_OFFLINE": "0"}).run(once=True) == 1
    final = store.get_request(req["id"])
    assert final["status"] == FINISHED, final.get("error")
    assert sorted((j["shard"], j["attempt"]) for j in final["dispatch"]["jobs"]) == [(s, attempts[s][-1] + 1) for s in range(2)]


def test_cancel_mid_run_cancels_every_job_and_publishes_nothing(hub, tmp_path, test_metrics):
    store = open_store(f"hf://{ORG}", quota=Quota(0))
    req = submit(store)
    thread, _ = run_until_jobs_run(hub, store, tmp_path)  # held until cancelled
    store.cancel(req["id"], reason="withdrawn")
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert {j.stage for j in hub.jobs.values()} == {"CANCELED"}
    assert all(j.proc.wait(timeout=10) is not None for j in hub.jobs.values())  # the processes end
    assert store.get_request(req["id"])["status"] == FAILED
    assert store.list_results() == []
    assert not [p for p in hub.files(f"{ORG}/results") if p.startswith(("records/", "per_study/"))]
    assert not [p for p in hub.files(f"{ORG}/requests") if p.startswith("scratch/")]


def test_killed_and_vanished_jobs_are_started_again_and_a_restarted_dispatcher_adopts_the_running_ones(
        hub, tmp_path, test_metrics, caplog):
    """Through the Jobs API, with the Jobs as processes: a Job killed (ERROR) and one the Hub no
    longer knows (404) are started again by the dispatcher that polls them; a dispatcher started
    after it stopped finds the three running Jobs by their labels and starts none again; the
    request is published once, equal to a single worker's run. (Each fault alone, and more of
    them, in this process: test_dispatch_loop.py.)"""
    store = open_store(f"hf://{ORG}", quota=Quota(0))
    req = submit(store)
    commits_before = hub.commits(f"{ORG}/results")
    started, go = tmp_path / "started", tmp_path / "go"  # the shards are held until `go` exists
    env = {"HF_HUB_OFFLINE": "0", "REXRANK_TEST_HOLD": str(go), "REXRANK_TEST_STARTED": str(started)}

    def recorded_jobs() -> list[tuple[int, int, str]]:
        dispatch = store.get_request(req["id"]).get("dispatch") or {}
        return sorted((j["shard"], j["attempt"], j["state"]) for j in dispatch.get("jobs") or [])

    def job_of(shard: str) -> str:
        return next(j.id for j in hub.jobs.values() if j.spec["labels"]["rexrank-shard"] == shard)

    def started_again(shard: int, ended: str) -> bool:
        jobs = recorded_jobs()
        return (shard, 1, ended) in jobs and any(j[:2] == (shard, 2) for j in jobs)

    first_stop = threading.Event()
    first = dispatcher(store, "counting", worker_id="first", lease=2.0, job_env=env)
    thread = in_thread(lambda: first.run(stop=first_stop))
    wait_for(lambda: started.exists() and len(hub.jobs) == 3, what="three running Jobs")
    hub.kill_job(job_of("1"))
    wait_for(lambda: started_again(1, "ERROR"), what="the killed Job recorded and its shard started again")
    hub.forget_job(job_of("2"))
    wait_for(lambda: started_again(2, "VANISHED"), what="the forgotten Job recorded and its shard started again")
    first_stop.set()  # the dispatcher stops (a restart, a crash); its Jobs run on
    thread.join(timeout=30)
    assert not thread.is_alive() and {j.stage for j in hub.jobs.values()} == {"RUNNING", "ERROR"}
    second_stop = threading.Event()
    second = dispatcher(open_store(f"hf://{ORG}", quota=Quota(0)), "counting", worker_id="second", lease=2.0,
                        job_env=env)
    caplog.set_level("INFO", logger="rexrank")
    thread = in_thread(lambda: second.run(stop=second_stop))
    try:
        wait_for(lambda: len(logged(caplog, ": adopted the running Job ")) == 3,
                 what="the second dispatcher adopting the three running Jobs")
        go.touch()  # the Jobs it adopted while they ran now finish
        wait_for(lambda: store.get_request(req["id"])["status"] == FINISHED, timeout=180, what="FINISHED")
    finally:
        second_stop.set()
        thread.join(timeout=30)
    assert recorded_jobs() == [(0, 1, "COMPLETED"), (1, 1, "ERROR"), (1, 2, "COMPLETED"), (2, 1, "VANISHED"),
                               (2, 2, "COMPLETED")]
    assert len(hub.jobs) == 4  # the forgotten one aside: no Job started twice, none after the restart
    assert store.get_request(req["id"])["worker"] == "second"
    assert hub.commits(f"{ORG}/results") - commits_before == 1  # one publishing commit
    _, per_study = published(store)
    _, single_per_study = single_worker_run(tmp_path, "counting")
    pd.testing.assert_frame_equal(per_study, single_per_study)


def test_the_store_token_is_a_job_secret_only(hub, tmp_path, caplog):
    from huggingface_hub import HfApi

    store = open_store(f"hf://{ORG}", quota=Quota(0))
    req = submit(store)
    with caplog.at_level("INFO"):
        assert dispatcher(store, "bleu2").run(once=True) == 1
    final = store.get_request(req["id"])
    assert final["status"] == FINISHED  # the Jobs wrote their shards: they had the token
    api = HfApi(endpoint=hub.url, token=TOKEN)
    for job in hub.jobs.values():
        assert job.spec["secrets"] == {"HF_TOKEN": TOKEN}
        info = api.inspect_job(job_id=job.id, namespace=ORG)
        shown = json.dumps({"command": info.command, "arguments": info.arguments, "labels": info.labels,
                            "environment": info.environment, "secrets": info.secrets})
        assert TOKEN not in shown and TOKEN not in json.dumps(job.spec["command"] + [job.spec["environment"]])
        # follow=True: read until the service says the Job ended (no 5 s read timeout, a flake under load)
        logs = list(api.fetch_job_logs(job_id=job.id, namespace=ORG, follow=True))
        assert logs and TOKEN not in "\n".join(logs)
    assert TOKEN not in caplog.text and TOKEN not in json.dumps(final)


def test_local_dispatch_takes_the_same_path(tmp_path):
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    s = DispatchSettings(mode="local", flavor="cpu-basic", max_jobs=2, target_shard_hours=1e-9, poll=0.2)
    d = Dispatcher(Worker(store, metrics="bleu2", worker_id="laptop"), LocalJobs(tmp_path / "jobs"), s)
    assert d.run(once=True) == 1
    assert store.get_request(req["id"])["status"] == FINISHED
    _, per_study = published(store)
    _, single_per_study = single_worker_run(tmp_path, "bleu2")
    pd.testing.assert_frame_equal(per_study, single_per_study)


def test_dry_run_prints_the_plan_and_starts_nothing(tmp_path):
    root = tmp_path / "s"
    store = open_store(root, quota=Quota(0))
    req = submit(store)
    out = subprocess.run([sys.executable, "-c", "import sys; from rexrank.cli.main import main; sys.exit(main())",
                          "backend", "--store", str(root), "--metrics", "bleu2", "--dispatch", "local", "--flavor", "l4x1",
                          "--max-jobs", "8", "--dry-run"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert req["id"] in out.stdout and "1 shard(s) on l4x1" in out.stdout and "GPU-hours" in out.stdout
    assert store.get_request(req["id"])["status"] == "PENDING"


def test_config_settings_are_checked(tmp_path):
    from rexrank.store.repo import StoreError

    store = open_store(tmp_path / "s", quota=Quota(0))
    (tmp_path / "s" / "requests" / "config.json").write_text(json.dumps(
        {"dispatch": {"mode": "hf-jobs", "flavor": "a100-large", "max_jobs": 8, "job_timeout": "2h",
                      "gpu_hours_ceiling": 20}}))
    s = dispatch_settings(store, max_jobs=2)
    assert (s.mode, s.flavor, s.max_jobs, s.job_timeout, s.gpu_hours_ceiling) == ("hf-jobs", "a100-large", 2, 7200, 20.0)
    (tmp_path / "s" / "requests" / "config.json").write_text(json.dumps({"dispatch": {"max_job": 8}}))
    with pytest.raises(StoreError, match="unknown setting 'max_job'"):
        dispatch_settings(store)
    # durations are read as the publication slot's are (one parser), and a bad one names its setting
    (tmp_path / "s" / "requests" / "config.json").write_text(json.dumps({"dispatch": {"target_wall": " 1.5 h"}}))
    assert dispatch_settings(store).target_wall == 5400
    for bad in ("soon", "0s", "-5m", "2w"):
        (tmp_path / "s" / "requests" / "config.json").write_text(json.dumps({"dispatch": {"job_timeout": bad}}))
        with pytest.raises(StoreError, match=r"config\.json: dispatch: job_timeout .* is not a duration; give "
                                             r"positive seconds \(3600\) or a duration such as \"15m\""):
            dispatch_settings(store)


def test_two_dispatchers_on_one_store_never_score_a_shard_twice(hub, tmp_path, test_metrics):
    from support.requests import variant

    store = open_store(f"hf://{ORG}", quota=Quota(0))
    ids = {submit(store, variant(tmp_path, i), model_name=f"m{i}")["id"] for i in range(2)}
    stop = threading.Event()
    env = {"HF_HUB_OFFLINE": "0", "REXRANK_TEST_SLOW": "1"}
    threads = [in_thread(lambda name=name: dispatcher(open_store(f"hf://{ORG}", quota=Quota(0)), "counting",
                                                      worker_id=name, max_jobs=2, job_env=env).run(stop=stop))
               for name in ("left", "right")]
    try:
        wait_for(lambda: {r["status"] for r in store.list_requests()} == {FINISHED}, timeout=240, what="FINISHED")
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    started = [(j.spec["labels"]["rexrank-request"], j.spec["labels"]["rexrank-shard"]) for j in hub.jobs.values()]
    assert sorted(started) == sorted((rid, str(k)) for rid in ids for k in range(2))  # each shard once
    assert len(store.list_results()) == 2


def test_the_worker_resolves_a_request_once(tmp_path, monkeypatch):
    import rexrank.testsets.loading as loading
    import rexrank.testsets.registry as registry

    store = open_store(tmp_path / "s", quota=Quota(0))
    submit(store)
    worker = Worker(store, metrics="bleu2", worker_id="w")
    calls: list[str] = []
    for module, name in ((registry, "get_spec"), (registry, "check_track"), (loading, "track_studies")):
        def counted(*args, _real=getattr(module, name), _name=name, **kw):
            calls.append(_name)
            return _real(*args, **kw)
        monkeypatch.setattr(module, name, counted)
    assert worker.run(once=True) == 1
    assert sorted(calls) == ["check_track", "get_spec", "track_studies"]


def test_shard_boundaries_fall_between_the_official_llm_batches():
    from rexrank.backend.shards import PlanError, plan_shards

    plan = plan_shards(10000, ["bleu2", "bertscore", "green"], flavor="h200", max_jobs=7)
    assert plan.k == 7 and plan.align == 8 and plan.ranges[0][0] == 0 and plan.ranges[-1][1] == 10000
    assert all(start % 8 == 0 for start, _ in plan.ranges)  # every batch of 8 is the official one
    assert all(a[1] == b[0] for a, b in zip(plan.ranges, plan.ranges[1:]))
    assert plan_shards(10000, ["green"], {"green": {"batch_size": 6}}, flavor="h200", max_jobs=5).align == 6
    # the H100 figures: 1.50 s per study for GREEN, 15.4 s per 600 studies for the non-LLM suite; an H200 at 1.3x
    assert plan_shards(600, ["green"], flavor="h200", max_jobs=1, startup=0).gpu_hours == \
        pytest.approx(600 * 1.5 / 1.3 / 3600)
    # each metric says how it may be cut: SRR-BERT's sentence batches are rebuilt whole in each shard,
    # GREEN's length-sorted batches on a local model span the whole request
    small = dict(flavor="l4x1", max_jobs=8, target_shard_hours=1e-9)
    assert plan_shards(10000, ["bleu2", "srr_bert"], **small).k == 8
    one = plan_shards(10000, ["bleu2", "green"], {"green": {"batching": "by_length"}}, **small)
    assert one.k == 1 and "green: batching='by_length'" in one.why_one_shard
    assert plan_shards(10000, ["srr_bert"], {"srr_bert": {"batching": "distinct"}}, **small).k == 1
    with pytest.raises(PlanError, match="green need a GPU flavour"):
        plan_shards(100, ["green"], flavor="cpu-basic", max_jobs=2)
    with pytest.raises(PlanError, match="unknown flavour 'a10': not Hugging Face Jobs hardware"):
        plan_shards(100, ["bleu2"], flavor="a10", max_jobs=2)


def test_the_backend_command_dispatches_with_the_store_config(hub, tmp_path):
    import os

    from huggingface_hub import HfApi

    store = open_store(f"hf://{ORG}", quota=Quota(0))
    req = submit(store)
    config = {"dispatch": {"mode": "hf-jobs", "flavor": "cpu-basic", "max_jobs": 2, "target_shard_hours": 1e-9,
                           "poll": 0.2, "job_command": [sys.executable, HELPER], "job_env": {"HF_HUB_OFFLINE": "0"}}}
    HfApi(endpoint=hub.url, token=TOKEN).upload_file(path_or_fileobj=json.dumps(config).encode(),
                                                     path_in_repo="config.json", repo_id=f"{ORG}/requests",
                                                     repo_type="dataset")
    env = {**os.environ, "HF_HUB_OFFLINE": "0"}
    out = subprocess.run([sys.executable, HELPER, "backend", "--store", f"hf://{ORG}", "--metrics", "bleu2", "--once",
                          "--quota", "0"], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    final = store.get_request(req["id"])
    assert final["status"] == FINISHED and len(final["dispatch"]["plan"]["ranges"]) == 2 and len(hub.jobs) == 2
    assert TOKEN not in out.stderr + out.stdout
    status = subprocess.run([sys.executable, HELPER, "status", req["id"], "--store", f"hf://{ORG}"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert "dispatched: 2 shard(s) on cpu-basic" in status.stdout and status.stdout.count("COMPLETED") == 2
