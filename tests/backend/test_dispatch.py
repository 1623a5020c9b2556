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
from support.backend_fixtures import PRIVATE_SENTENCES, leaks_in, private_set  # noqa: F401 (private_set: a fixture)
from support.requests import submit
from support.dispatch_fixtures import ORG, TOKEN, ThreadJobs, dispatcher, in_thread, wait_for, without_seconds
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


def published(store):
    [record] = store.list_results()
    return record, pd.read_parquet(io.BytesIO(store.read_per_study(record)))


def run_until_jobs_run(hub, store, tmp_path) -> tuple[threading.Thread, Path]:
    """A dispatcher in a thread scoring `counting`, returned once its three Jobs run and one
    has started scoring, with the file that lets the shards finish: each shard is held until
    it exists (not slept a fixed time), so the test acts while they run and waits no longer."""
    started, go = tmp_path / "started", tmp_path / "go"
    d = dispatcher(store, "counting", job_env={"HF_HUB_OFFLINE": "0", "REXRANK_TEST_HOLD": str(go),
                                               "REXRANK_TEST_STARTED": str(started)})
    thread = in_thread(lambda: d.run(once=True))
    wait_for(lambda: started.exists() and len(hub.jobs) == 3, what="three running Jobs")
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


def test_a_shard_killed_mid_run_is_retried_and_published_once(hub, tmp_path, test_metrics):
    store = open_store(f"hf://{ORG}", quota=Quota(0))
    req = submit(store)
    commits_before = hub.commits(f"{ORG}/results")
    thread, go = run_until_jobs_run(hub, store, tmp_path)
    victim = next(j for j in hub.jobs.values() if j.spec["labels"]["rexrank-shard"] == "1")
    hub.kill_job(victim.id)
    go.touch()  # the other shards, and the victim's second attempt, finish
    thread.join(timeout=180)
    final = store.get_request(req["id"])
    assert final["status"] == FINISHED, final.get("error")
    attempts = sorted((j["shard"], j["attempt"], j["state"]) for j in final["dispatch"]["jobs"])
    assert attempts == [(0, 1, "COMPLETED"), (1, 1, "ERROR"), (1, 2, "COMPLETED"), (2, 1, "COMPLETED")]
    assert hub.commits(f"{ORG}/results") - commits_before == 1  # one publishing commit
    record, per_study = published(store)
    _, single_per_study = single_worker_run(tmp_path, "counting")
    pd.testing.assert_frame_equal(per_study, single_per_study)


def test_a_vanished_shard_job_is_started_again(hub, tmp_path, test_metrics):
    store = open_store(f"hf://{ORG}", quota=Quota(0))
    req = submit(store)
    thread, go = run_until_jobs_run(hub, store, tmp_path)
    hub.forget_job(next(j.id for j in hub.jobs.values() if j.spec["labels"]["rexrank-shard"] == "2"))
    go.touch()
    thread.join(timeout=180)
    final = store.get_request(req["id"])
    assert final["status"] == FINISHED, final.get("error")
    assert sorted((j["shard"], j["attempt"], j["state"]) for j in final["dispatch"]["jobs"]) == [
        (0, 1, "COMPLETED"), (1, 1, "COMPLETED"), (2, 1, "VANISHED"), (2, 2, "COMPLETED")]
    assert len(store.list_results()) == 1


def test_a_shard_failing_every_attempt_fails_the_request_with_its_cause(hub, tmp_path, test_metrics):
    store = open_store(f"hf://{ORG}", quota=Quota(0))
    req = submit(store)
    d = dispatcher(store, "counting", shard_attempts=2, job_timeout=2,
                   job_env={"HF_HUB_OFFLINE": "0", "REXRANK_TEST_SLOW": "30"})
    assert d.run(once=True) == 1
    final = store.get_request(req["id"])
    assert final["status"] == FAILED and "failed 2 time(s)" in final["error"] and "Job timeout" in final["error"]
    assert store.list_results() == []
    failing = int(re.search(r"shard (\d) of 3 failed 2 time", final["error"]).group(1)) - 1
    attempts = {s: sorted(j["attempt"] for j in final["dispatch"]["jobs"] if j["shard"] == s) for s in range(3)}
    assert attempts[failing] == [1, 2]  # both attempts it was allowed, and no third
    # the others had both too, unless the machine was slow enough that the failing shard's second
    # timeout came before their first (their Jobs start one after another): then it stopped them
    assert all(a in ([1], [1, 2]) for a in attempts.values()) and len(hub.jobs) == sum(map(len, attempts.values()))
    # requeued once the cause is fixed: a new round of attempts, numbered after the old ones
    store.requeue(req["id"])
    assert dispatcher(store, "counting", job_env={"HF_HUB_OFFLINE": "0"}).run(once=True) == 1
    final = store.get_request(req["id"])
    assert final["status"] == FINISHED, final.get("error")
    assert sorted((j["shard"], j["attempt"]) for j in final["dispatch"]["jobs"]) == [(s, attempts[s][-1] + 1) for s in range(3)]


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


def test_a_restarted_dispatcher_adopts_the_running_jobs(hub, tmp_path, test_metrics):
    store = open_store(f"hf://{ORG}", quota=Quota(0))
    req = submit(store)
    started, go = tmp_path / "started", tmp_path / "go"  # the shards are held until `go` exists
    env = {"HF_HUB_OFFLINE": "0", "REXRANK_TEST_HOLD": str(go), "REXRANK_TEST_STARTED": str(started)}
    first_stop = threading.Event()
    first = dispatcher(store, "counting", worker_id="first", lease=2.0, job_env=env)
    thread = in_thread(lambda: first.run(stop=first_stop))
    wait_for(lambda: started.exists() and len(hub.jobs) == 3, what="three running Jobs")
    first_stop.set()  # the dispatcher stops (a restart, a crash); its Jobs run on
    thread.join(timeout=30)
    assert {j.stage for j in hub.jobs.values()} == {"RUNNING"}
    second_stop = threading.Event()
    second = dispatcher(open_store(f"hf://{ORG}", quota=Quota(0)), "counting", worker_id="second", lease=2.0,
                        job_env=env)
    thread = in_thread(lambda: second.run(stop=second_stop))
    try:
        wait_for(lambda: (lambda r: r.get("worker") == "second" and len((r.get("dispatch") or {}).get("jobs") or []) == 3)(
            store.get_request(req["id"])), what="the second dispatcher holding the request with its three Jobs")
        go.touch()  # the Jobs it adopted while they ran now finish
        wait_for(lambda: store.get_request(req["id"])["status"] == FINISHED, timeout=180, what="FINISHED")
    finally:
        second_stop.set()
        thread.join(timeout=30)
    assert len(hub.jobs) == 3  # no duplicate: the second dispatcher found them by their labels
    final = store.get_request(req["id"])
    assert final["worker"] == "second" and len(store.list_results()) == 1


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
                                                      worker_id=name, job_env=env).run(stop=stop))
               for name in ("left", "right")]
    try:
        wait_for(lambda: {r["status"] for r in store.list_requests()} == {FINISHED}, timeout=240, what="FINISHED")
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    started = [(j.spec["labels"]["rexrank-request"], j.spec["labels"]["rexrank-shard"]) for j in hub.jobs.values()]
    assert sorted(started) == sorted((rid, str(k)) for rid in ids for k in range(3))  # each shard once
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


def test_a_tiny_llm_judge_merges_into_the_single_worker_run(tmp_path):
    from support.llm_tiny_models import build_tiny_llama
    from rexrank.metrics.green_text import prompt_template

    corpus = [prompt_template()] * 3 + ["No pneumothorax. Mild cardiomegaly. Small left pleural effusion."] * 3
    model = build_tiny_llama(tmp_path / "llama", corpus=corpus)

    def options(cache: str) -> dict:  # separate answer caches: the single run must generate its own
        return {"green": dict(model_path=str(model), max_new_tokens=12, cache_dir=str(tmp_path / cache), batch_size=4,
                              keep_completions=True, progress=False)}

    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    s = DispatchSettings(mode="local", flavor="h200", max_jobs=3, target_shard_hours=1e-9, poll=0.3)
    worker = Worker(store, metrics="green", metric_options=options("c1"), worker_id="d")
    assert Dispatcher(worker, LocalJobs(tmp_path / "jobs"), s).run(once=True) == 1
    final = store.get_request(req["id"])
    assert final["status"] == FINISHED and final["dispatch"]["plan"]["ranges"] == [[0, 8], [8, 16], [16, 19]]
    record, per_study = published(store)
    single_store = open_store(tmp_path / "single", quota=Quota(0))
    submit(single_store)
    assert Worker(single_store, metrics="green", metric_options=options("c2"), worker_id="one").run(once=True) == 1
    single, single_per_study = published(single_store)
    pd.testing.assert_frame_equal(per_study, single_per_study)
    merged, alone = record["summaries"]["green"], single["summaries"]["green"]
    assert merged["details"]["completions"] == alone["details"]["completions"]  # the same generated tokens
    assert {k: v for k, v in merged.items() if k != "seconds"} == {k: v for k, v in alone.items() if k != "seconds"}


def test_an_encoder_metric_merges_within_1e_6_of_the_single_worker_run(tmp_path):
    from support.tiny_report_models import make_tiny_roberta

    model = make_tiny_roberta(tmp_path / "encoder")

    def options(cache: str) -> dict:
        return {"bertscore": dict(model=str(model), num_layers=2, rescale_with_baseline=False,
                                  cache_dir=str(tmp_path / cache))}

    store = open_store(tmp_path / "s", quota=Quota(0))
    submit(store)
    s = DispatchSettings(mode="local", flavor="l4x1", max_jobs=3, target_shard_hours=1e-9, poll=0.3)
    worker = Worker(store, metrics="bertscore", metric_options=options("c1"), worker_id="d")
    assert Dispatcher(worker, LocalJobs(tmp_path / "jobs"), s).run(once=True) == 1
    record, per_study = published(store)
    single_store = open_store(tmp_path / "single", quota=Quota(0))
    submit(single_store)
    assert Worker(single_store, metrics="bertscore", metric_options=options("c2"), worker_id="one").run(once=True) == 1
    single, single_per_study = published(single_store)
    assert list(per_study["id"]) == list(single_per_study["id"])
    for column in ("bertscore", "bertscore_precision", "bertscore_recall"):
        assert abs(per_study[column] - single_per_study[column]).max() <= 1e-6
    assert abs(record["values"]["bertscore"]["mean"] - single["values"]["bertscore"]["mean"]) <= 1e-6


def dispatched_and_single(tmp_path, metrics: str, options, *, jobs: str = "local", flavor: str = "l4x1",
                          **worker_kw):
    """The example submission dispatched as three shards (Jobs: "local" processes or
    "thread"s of this process), and scored by a single worker; `options(tag)` gives each run
    its own caches, so that each computes its own values. Returns (final request, its store,
    the single worker's store)."""
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    s = DispatchSettings(mode="local", flavor=flavor, max_jobs=3, target_shard_hours=1e-9, poll=0.2)
    runner = LocalJobs(tmp_path / "jobs") if jobs == "local" else ThreadJobs(str(tmp_path / "s"), None)
    worker = Worker(store, metrics=metrics, metric_options=options("c1"), worker_id="d", **worker_kw)
    assert Dispatcher(worker, runner, s).run(once=True) == 1
    single_store = open_store(tmp_path / "single", quota=Quota(0))
    submit(single_store)
    assert Worker(single_store, metrics=metrics, metric_options=options("c2"), worker_id="one", **worker_kw).run(once=True) == 1
    return store.get_request(req["id"]), store, single_store


def test_sembscore_details_and_radcliq_reach_a_dispatched_record(tmp_path):
    from support.tiny_report_models import make_tiny_radcliq_models

    m = make_tiny_radcliq_models(tmp_path / "models")

    def options(cache: str) -> dict:
        bertscore = {"model": str(m["roberta"]), "num_layers": 2, "baseline": (0.8, 0.81, 0.805)}
        sembscore = {"checkpoint_path": str(m["chexbert"]), "tokenizer": str(m["tokenizer"])}
        radgraph = {"model_path": str(m["radgraph"])}
        common = {"cache_dir": str(tmp_path / cache)}
        return {"sembscore": {**common, **sembscore},
                "radcliq": {**common, "bertscore_options": bertscore, "sembscore_options": sembscore,
                            "radgraph_options": radgraph}}

    final, store, single_store = dispatched_and_single(tmp_path, "sembscore,radcliq", options, jobs="thread")
    assert final["status"] == FINISHED, final.get("error")
    assert len(final["dispatch"]["plan"]["ranges"]) == 3
    (record, per_study), (single, single_per_study) = published(store), published(single_store)
    merged, alone = record["summaries"]["sembscore"]["details"], single["summaries"]["sembscore"]["details"]
    assert "not_merged" not in merged and merged["chexbert_labels"]["predictions"]  # every study's labels
    # the labels are discrete (the same in any batch): the F1 tables equal the single run's exactly
    assert merged == alone
    for column, tolerance in (("sembscore", 1e-6), ("radcliq", 2e-6), ("radcliq_v0", 2e-6)):
        assert abs(per_study[column] - single_per_study[column]).max() <= tolerance
    for column in ("radcliq_radgraph", "radcliq_bleu2"):  # each study's own reports: exactly
        pd.testing.assert_series_equal(per_study[column], single_per_study[column])
    assert record["values"].keys() == single["values"].keys()
    for column, value in record["values"].items():
        assert abs(value["mean"] - single["values"][column]["mean"]) <= 2e-6


def test_green_by_length_on_a_local_model_is_one_shard_and_equals_the_single_run(tmp_path):
    from support.llm_tiny_models import build_tiny_llama
    from rexrank.metrics.green import load_tokenizer
    from rexrank.metrics.green_text import make_prompt, prompt_template, render_model_input
    from rexrank.testsets.loading import track_studies
    from support.requests import EXAMPLE_PREDS

    corpus = [prompt_template()] * 3 + ["No pneumothorax. Mild cardiomegaly. Small left pleural effusion."] * 3
    model = build_tiny_llama(tmp_path / "llama", corpus=corpus)
    # room for a few tokens after the longest prompt: each completion's cap is max_length minus its
    # length-sorted batch's width, so a batch made of other studies changes the completions
    studies = track_studies("example", "findings")
    predictions = {k: v["section_findings"] for k, v in json.loads(Path(EXAMPLE_PREDS).read_text()).items()}
    tokenizer = load_tokenizer(str(model))
    lengths = [len(tokenizer(render_model_input(make_prompt(r, predictions[i])), add_special_tokens=True)["input_ids"])
               for i, r in zip(studies.ids, studies.references)]

    def options(cache: str) -> dict:
        return {"green": dict(model_path=str(model), batching="by_length", max_length=max(lengths) + 4, max_new_tokens=16,
                              batch_size=4, cache_dir=str(tmp_path / cache), keep_completions=True, progress=False)}

    final, store, single_store = dispatched_and_single(tmp_path, "green", options, jobs="thread", flavor="h200")
    assert final["status"] == FINISHED, final.get("error")
    assert final["dispatch"]["plan"]["ranges"] == [[0, 19]]  # the metric refuses a cut
    (record, per_study), (single, single_per_study) = published(store), published(single_store)
    pd.testing.assert_frame_equal(per_study, single_per_study)
    assert record["summaries"]["green"]["details"]["completions"] == single["summaries"]["green"]["details"]["completions"]
    assert without_seconds(record["summaries"]) == without_seconds(single["summaries"])


def test_a_shard_where_one_metric_scores_nothing_finishes_when_the_whole_request_passes(tmp_path, test_metrics):
    from rexrank.testsets.loading import track_studies

    references = list(track_studies("example", "findings").references)
    # the plan's last shard is studies [13, 19): the judge answers none of them, 13 of 19 in all (68 %)
    options = lambda cache: {"patchy": {"fail_references": references[13:]}}  # noqa: E731
    final, store, single_store = dispatched_and_single(tmp_path, "bleu2,patchy", options, jobs="thread",
                                                       flavor="cpu-basic", min_coverage=0.6)
    assert final["dispatch"]["plan"]["ranges"] == [[0, 7], [7, 13], [13, 19]]
    assert final["status"] == FINISHED, final.get("error")
    (record, per_study), (single, single_per_study) = published(store), published(single_store)
    pd.testing.assert_frame_equal(per_study, single_per_study)
    assert without_seconds(record["summaries"]) == without_seconds(single["summaries"])
    assert record["summaries"]["patchy"]["n_scored"] == 13
    # nothing scored in the whole request fails it, with the single worker's words
    nothing = lambda cache: {"patchy": {"fail_references": references}}  # noqa: E731
    final, _, single_store = dispatched_and_single(tmp_path / "all", "bleu2,patchy", nothing, jobs="thread",
                                                   flavor="cpu-basic", min_coverage=0.6)
    [alone] = single_store.list_requests()
    assert final["status"] == alone["status"] == FAILED
    assert "none of the 19 studies could be scored" in final["error"] and final["error"] == alone["error"]


def test_srr_bert_shards_and_merges_exactly_into_the_single_run(tmp_path, monkeypatch):
    import nltk

    from support import srr_bert_tiny
    from rexrank.models import srr_bert as S

    monkeypatch.setattr(nltk, "sent_tokenize", srr_bert_tiny.stand_in_sent_tokenize)  # punkt_tab is not here
    monkeypatch.setattr(S, "punkt_available", lambda: True)
    model_dir, tokenizer_dir = srr_bert_tiny.build(tmp_path / "srr")
    options = lambda cache: {"srr_bert": dict(model_path=str(model_dir), tokenizer_path=str(tokenizer_dir),  # noqa: E731
                                              device="cpu", cache=False, progress=False)}
    final, store, single_store = dispatched_and_single(tmp_path, "srr_bert", options, jobs="thread")
    assert final["status"] == FINISHED, final.get("error")
    assert len(final["dispatch"]["plan"]["ranges"]) == 3
    (record, per_study), (single, single_per_study) = published(store), published(single_store)
    pd.testing.assert_frame_equal(per_study, single_per_study)  # exactly: each shard classifies the run's batches
    assert record["values"] == single["values"]
    assert without_seconds(record["summaries"]) == without_seconds(single["summaries"])


def test_spec_cxr_shards_and_merges_into_the_single_run(tmp_path):
    import hashlib

    from support.llm_fake_server import FakeOpenAIServer, Reply, chat_body
    from rexrank.metrics.spec_cxr_text import load_entity_set

    entities = load_entity_set().entities
    labels = ("TP", "FP", "FN", "TN")

    def script(path, body):  # a judge whose answer follows from the candidate report
        candidate = body["messages"][1]["content"].split("CANDIDATE:\n")[1]
        digest = hashlib.sha256(candidate.encode()).digest()
        judged = [{"entity": entities[b % len(entities)], "presence": labels[b % 4], "comparison": "other",
                   "location": ("aligned", "not_aligned", "not_available")[b % 3], "severity": "not_available"}
                  for b in digest[:3]]
        if digest[5] % 7 == 0:
            return Reply(body=chat_body("not json"))  # some studies fail even after the re-ask
        return Reply(body=chat_body(json.dumps({"entities": judged})))

    with FakeOpenAIServer(script) as server:
        options = lambda cache: {"spec_cxr": dict(model="judge", base_url=server.base_url, max_reasks=1,  # noqa: E731
                                                  cache_dir=str(tmp_path / cache), progress=False)}
        final, store, single_store = dispatched_and_single(tmp_path, "spec_cxr", options, jobs="thread",
                                                           min_coverage=0.5)
    assert final["status"] == FINISHED, final.get("error")
    assert len(final["dispatch"]["plan"]["ranges"]) == 3
    (record, per_study), (single, single_per_study) = published(store), published(single_store)
    pd.testing.assert_frame_equal(per_study, single_per_study)
    assert record["summaries"]["spec_cxr"]["details"]["per_entity"]  # pooled over every study of every shard
    assert without_seconds(record["summaries"]) == without_seconds(single["summaries"])


def test_a_dispatched_private_request_publishes_aggregates_once(tmp_path, monkeypatch, private_set):
    import rexrank.backend.privacy as privacy_module

    data_dir, preds = private_set
    noised = []
    real = privacy_module.private_results
    monkeypatch.setattr(privacy_module, "private_results", lambda results, **kw: noised.append(1) or real(results, **kw))
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store, preds, test_set="rexgradient")
    s = DispatchSettings(mode="local", flavor="cpu-basic", max_jobs=3, target_shard_hours=1e-9, poll=0.1)
    worker = Worker(store, data_dir=data_dir, metrics="bleu2,leaky", worker_id="d", min_coverage=0.5)
    assert Dispatcher(worker, ThreadJobs(str(tmp_path / "s"), data_dir), s).run(once=True) == 1
    final = store.get_request(req["id"])
    assert final["status"] == FINISHED, final.get("error")
    assert len(final["dispatch"]["plan"]["ranges"]) == 3 and noised == [1]  # the noise drawn once, after the merge
    [record] = store.list_results()
    # through the privacy door: noised aggregates, no counts (rexrank.backend.public_door)
    assert not record["per_study_available"] and record["values"]["bleu2"]["n"] is None
    assert "dispatch" not in json.dumps(record) and "RG000" not in json.dumps(record)
    leaky = record["summaries"]["leaky"]
    # the careless metric fails the first study of each call it gets (one per shard): not said
    assert not {"n_failed", "n_scored", "failures", "seconds"} & set(leaky)
    assert leaks_in(tmp_path / "s") == []  # the shards' outputs (the careless details) are removed too


def test_the_merge_refuses_missing_shards_and_shards_of_other_code_or_options():
    from rexrank.backend.merge import MergeError, merge_shards, shard_header, shard_table
    from rexrank.scoring import score_submission
    from support.requests import EXAMPLE_PREDS

    ranges = [[0, 10], [10, 19]]
    shards = []
    for index, (start, stop) in enumerate(ranges):
        run = score_submission("example", "findings", EXAMPLE_PREDS, metrics="bleu2", progress=False, select=(start, stop))
        shards.append((shard_header(run, request_id="r", shard=index, attempt=1, start=start, stop=stop,
                                    metrics=["bleu2"], metric_options={}), shard_table(run)))
    whole = score_submission("example", "findings", EXAMPLE_PREDS, metrics="bleu2", progress=False)
    header = {**{k: v for k, v in whole.results.items() if k != "metrics"}, "predictions_ids": list(whole.per_study["id"])}
    results, table = merge_shards(shards, plan_ranges=ranges, header=header)
    pd.testing.assert_frame_equal(table, whole.per_study)
    assert results["metrics"]["bleu2"]["scores"] == whole.results["metrics"]["bleu2"]["scores"]
    with pytest.raises(MergeError, match="1 of 2 shards present"):
        merge_shards(shards[:1], plan_ranges=ranges, header=header)
    other_options = [shards[0], ({**shards[1][0], "options": "0123"}, shards[1][1])]
    with pytest.raises(MergeError, match="shard 1 was made with another options"):
        merge_shards(other_options, plan_ranges=ranges, header=header)
    other_code = [({**meta, "code": "0.0.1+abc"}, t) for meta, t in shards]
    with pytest.raises(MergeError, match="scored by rexrank 0.0.1"):
        merge_shards(other_code, plan_ranges=ranges, header=header)
    old_format = [shards[0], ({**shards[1][0], "format": 1}, shards[1][1])]
    with pytest.raises(MergeError, match="shard 1 is in shard format 1"):
        merge_shards(old_format, plan_ranges=ranges, header=header)


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
