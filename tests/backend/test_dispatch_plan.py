"""The dispatcher's plan tells the truth (rexrank.backend.shards, rexrank.backend.dispatch): the
Hub's own hardware names and prices, slower flavours estimated slower, start-up in the
makespan, shards that fit the Job timeout, the Jobs a target wall time needs, an LLM judge no
Job can run refused at start, the Jobs cap and configured prices honoured, and a private
request planned from the test set's public size only."""
from __future__ import annotations

import json
import logging
import math
import threading
import time

import pytest

from rexrank.backend.dispatch import Dispatcher, DispatchSettings, dispatcher_for
from rexrank.backend.shards import (FLAVOR_PRICES, FLAVOR_SPEED, PRICE_TABLE_DATE, TIMEOUT_SHARE, PlanError,
                                    PriceList, check_flavor, job_flavors, plan_shards, seconds_per_study)
from rexrank.backend.worker import Worker
from rexrank.errors import RexrankError
from rexrank.store import FAILED, FINISHED, Quota, open_store
from rexrank.store.config import REXRANK_LLM_METRICS, REXRANK_METRICS
from support.backend_fixtures import private_set, test_metrics  # noqa: F401 (fixtures)
from support.requests import submit, write_jsonl
from support.dispatch_fixtures import InProcessJobs

FULL_SET = (*REXRANK_METRICS, *REXRANK_LLM_METRICS)


# ---- hardware, speed, prices -----------------------------------------------------------------

def test_the_planner_knows_the_hubs_hardware_and_nothing_else():
    from huggingface_hub import JobHardware

    hub = {flavor.value for flavor in JobHardware}
    assert set(job_flavors()) == hub
    assert set(FLAVOR_PRICES) == hub  # the dated table prices every flavour the Hub has
    assert set(FLAVOR_SPEED) <= hub and "h100" not in hub
    for flavor in ("h200", "a100-large", "l40sx1", "cpu-basic"):
        assert plan_shards(100, ["bleu2"], flavor=flavor, max_jobs=2).flavor == flavor
    for flavor in ("h100", "h100x8", "a10"):
        with pytest.raises(PlanError, match=f"unknown flavour '{flavor}': not Hugging Face Jobs hardware"):
            plan_shards(100, ["bleu2"], flavor=flavor, max_jobs=2)


@pytest.mark.parametrize("flavor, one", [("h200x8", "h200"), ("a100x4", "a100-large"), ("l40sx4", "l40sx1"),
                                         ("l4x4", "l4x1"), ("a10g-largex2", "a10g-large"),
                                         ("rtx-pro-6000x2", "rtx-pro-6000")])
def test_a_multi_gpu_flavour_is_refused_with_its_single_gpu_flavour_named(flavor, one):
    # never planned at one GPU's speed for several GPUs' price
    gpus = int(flavor.rsplit("x", 1)[1])
    with pytest.raises(PlanError, match=f"{flavor} has {gpus} GPUs.*use --flavor {one} with {gpus} times the --max-jobs"):
        plan_shards(10000, FULL_SET, flavor=flavor, max_jobs=1)
    assert one in job_flavors() and plan_shards(100, ["green"], flavor=one, max_jobs=1).flavor == one


def test_a_slower_gpu_takes_longer_and_costs_its_own_hours():
    # the H100 figures (GREEN 1.50 s per study) divided by each flavour's relative speed
    for flavor, speed in (("a10g-large", 0.25), ("a100-large", 0.6), ("h200", 1.3)):
        assert seconds_per_study(["green"], flavor) == pytest.approx(1.5 / speed)
        plan = plan_shards(600, ["green"], flavor=flavor, max_jobs=1, startup=0)
        assert plan.gpu_hours == pytest.approx(600 * 1.5 / speed / 3600)
        assert plan.cost_usd == pytest.approx(plan.gpu_hours * FLAVOR_PRICES[flavor])
    assert plan_shards(600, ["green"], flavor="a10g-large", max_jobs=1, startup=0).gpu_hours == pytest.approx(1.0)
    # a configured speed counts the same way
    assert seconds_per_study(["green"], "l4x1", speed={"l4x1": 0.5}) == pytest.approx(3.0)


def test_prices_come_from_the_hub_when_it_answers_else_from_the_dated_table(tmp_path, monkeypatch, caplog):
    import huggingface_hub.constants as constants

    from support.fakehub import Account, FakeHub

    token = "hf_prices"
    store_root = tmp_path / "s"
    store = open_store(store_root, quota=Quota(0))
    submit(store)
    worker = Worker(store, metrics="bleu2", worker_id="w")
    table = dispatcher_for(worker, dry_run=True, mode="local", flavor="h200")
    assert table.prices.per_hour["h200"] == 5.00 and table.prices.source.startswith("the Hub's Jobs pricing page as of")
    assert PRICE_TABLE_DATE in table.prices.source and "an estimate" in table.prices.source
    plans = __import__("rexrank.backend.dispatch", fromlist=["describe_plans"]).describe_plans(table)
    assert f"as of {PRICE_TABLE_DATE} (an estimate" in plans and "$5.00/h" in plans
    with FakeHub(accounts={token: Account("organiser", orgs=("board",))}) as hub:
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        hub.job_prices["h200"] = 7.25  # the Hub's price today
        from rexrank.backend.jobs import HubJobs
        from rexrank.backend.dispatch import job_prices

        live = job_prices(HubJobs(namespace="board", image="x", token=token, endpoint=hub.url))
        assert live.per_hour["h200"] == pytest.approx(7.25) and live.source == "the Hub's list_jobs_hardware()"
        assert "GET /api/jobs/hardware" in hub.requests
        hub.inject("GET", "/api/jobs/hardware", 400)  # the Hub refuses: the table, said as such
        with caplog.at_level(logging.WARNING, logger="rexrank"):
            fallback = job_prices(HubJobs(namespace="board", image="x", token=token, endpoint=hub.url))
        assert fallback.per_hour["h200"] == 5.00 and PRICE_TABLE_DATE in fallback.source
        # the log says why (the Hub's answer) and which figures the plans use instead
        said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("could not read the Hub's Jobs prices")]
        assert len(said) == 1 and "(could not list the Jobs hardware: Bad request" in said[0] and said[0].endswith(f"); estimating with {fallback.source}")


def test_configured_prices_win_over_the_hubs_and_the_tables(tmp_path):
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    settings = DispatchSettings(mode="local", flavor="cpu-basic", max_jobs=3, target_shard_hours=1e-9, poll=0.1,
                                flavor_prices={"cpu-basic": 36.0})
    live = PriceList({**FLAVOR_PRICES, "cpu-basic": 0.02}, "the Hub's list_jobs_hardware()")
    jobs = InProcessJobs(str(tmp_path / "s"))
    d = Dispatcher(Worker(store, metrics="bleu2", worker_id="d"), jobs, settings, prices=live)
    assert d.run(once=True) == 1
    final = store.get_request(req["id"])
    assert final["status"] == FINISHED, final.get("error")
    plan = final["dispatch"]["plan"]
    assert plan["price_per_hour"] == 36.0 and "flavor_prices in config.json for cpu-basic" in plan["price_source"]
    recorded = final["dispatch"]["jobs"]
    # one record per Job started, each naming its shard and first attempt, as the Job it was
    assert sorted((job["shard"], job["attempt"]) for job in recorded) == [(i, 1) for i in range(len(plan["ranges"]))]
    assert {job["job_id"] for job in recorded} == set(jobs.jobs)
    for job in recorded:  # each Job's recorded seconds, and its cost at the configured price
        ran = jobs.jobs[job["job_id"]]
        assert (job["flavor"], job["state"]) == ("cpu-basic", "COMPLETED")
        assert job["seconds"] == round(ran.finished - ran.started, 1)
        assert job["estimated_cost_usd"] == round(job["seconds"] / 3600 * 36.0, 4)
    assert plan["estimated_cost_usd"] == round(plan["estimated_gpu_hours"] * 36.0, 2)


# ---- start-up, timeout, target wall ------------------------------------------------------------

def test_job_start_up_is_in_the_makespan_and_the_bill():
    plan = plan_shards(10000, FULL_SET, flavor="h200", max_jobs=8, target_shard_hours=1e-9, local_judges=2)
    bare = plan_shards(10000, FULL_SET, flavor="h200", max_jobs=8, target_shard_hours=1e-9, startup=0)
    # the default: image and install, the encoders, and two 7B judges downloaded, stated in the plan
    assert plan.startup_seconds == 240 + 60 + 2 * 120 and "9.0 min of start-up" in plan.describe()
    assert plan.makespan_hours == pytest.approx(bare.makespan_hours + plan.startup_seconds / 3600)
    assert plan.gpu_hours == pytest.approx(bare.gpu_hours + 8 * plan.startup_seconds / 3600)
    # overridable, as one figure or by flavour
    assert plan_shards(100, ["bleu2"], flavor="h200", max_jobs=1, startup=42).startup_seconds == 42
    assert plan_shards(100, ["bleu2"], flavor="h200", max_jobs=1, startup={"h200": 7, "l4x1": 9}).startup_seconds == 7


def test_shards_fit_the_job_timeout_or_the_plan_says_what_to_change():
    timeout = 6 * 3600
    # 10,000 studies of the full board on a10g-large with 4 Jobs: 1,009-minute shards do not fit 6 h
    plan = plan_shards(10000, FULL_SET, flavor="a10g-large", max_jobs=4, local_judges=2, job_timeout=timeout)
    assert plan.k > 4 and plan.shard_hours * 3600 <= TIMEOUT_SHARE * timeout
    assert plan.waves == math.ceil(plan.k / 4) and plan.makespan_hours == pytest.approx(plan.waves * plan.shard_hours)
    assert f"in {plan.waves} waves of up to 4" in plan.describe()
    fewer = plan_shards(10000, FULL_SET, flavor="a10g-large", max_jobs=plan.k - 1, local_judges=2, job_timeout=None)
    assert fewer.shard_hours * 3600 > TIMEOUT_SHARE * timeout  # so the timeout is what added shards
    # a timeout no shard can fit (start-up alone is longer): refused, naming the setting and the least value
    with pytest.raises(PlanError, match=r"80% of the Job timeout \(4 min of 5 min\) leaves no room.*raise --job-timeout "
                                        r"to at least 12 min"):
        plan_shards(100, ["green"], flavor="h200", max_jobs=2, local_judges=2, job_timeout=300)


def test_target_wall_gives_the_jobs_needed():
    hour = 3600
    plan = plan_shards(10000, FULL_SET, flavor="h200", max_jobs=64, local_judges=2, target_wall=hour,
                       job_timeout=6 * hour)
    assert plan.makespan_hours <= 1.0
    one_fewer = plan_shards(10000, FULL_SET, flavor="h200", max_jobs=plan.k - 1, target_shard_hours=1e-9,
                            local_judges=2)
    assert one_fewer.makespan_hours > 1.0  # the fewest Jobs that make it
    with pytest.raises(PlanError, match=f"need {plan.k} Jobs at once and --max-jobs allows 4: raise --max-jobs to "
                                        f"{plan.k}, or allow a longer --target-wall"):
        plan_shards(10000, FULL_SET, flavor="h200", max_jobs=4, local_judges=2, target_wall=hour)
    with pytest.raises(PlanError, match="--target-wall 5 min leaves no room"):
        plan_shards(10000, FULL_SET, flavor="h200", max_jobs=64, local_judges=2, target_wall=300)


def test_target_wall_and_startup_are_settings(tmp_path):
    from rexrank.backend.dispatch import dispatch_settings

    store = open_store(tmp_path / "s", quota=Quota(0))
    (tmp_path / "s" / "requests" / "config.json").write_text(json.dumps(
        {"dispatch": {"mode": "hf-jobs", "target_wall": "1h", "job_startup": {"h200": 400}}}))
    s = dispatch_settings(store)
    assert s.target_wall == 3600 and s.job_startup == {"h200": 400}
    assert dispatch_settings(store, job_startup=90).job_startup == 90.0


# ---- an LLM judge no Job can run ---------------------------------------------------------------

LLM_VARIABLES = ("REXRANK_LLM_BASE_URL", "REXRANK_LLM_MODEL", "REXRANK_LLM_BACKEND", "OPENAI_BASE_URL")


def test_an_llm_judge_no_job_can_run_is_an_error_not_a_log_line(tmp_path, monkeypatch):
    for name in LLM_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    root = tmp_path / "s"
    store = open_store(root, quota=Quota(0))
    (root / "requests" / "config.json").write_text(json.dumps({"metrics": ["bleu2"], "llm_metrics": ["green"]}))
    submit(store)
    worker = Worker(store, worker_id="w")
    assert worker.not_scored  # the single worker scores without it and says so in each result
    with pytest.raises(RexrankError, match="green .*cannot run in any Job.*REXRANK_LLM_BASE_URL"):
        Dispatcher(worker, None, DispatchSettings(mode="local", flavor="h200"))
    with pytest.raises(RexrankError, match="cannot run in any Job"):
        dispatcher_for(worker, dry_run=True, mode="local", flavor="h200")
    # an endpoint every Job calls, or a checkpoint each Job runs itself, and the plan has the judge
    monkeypatch.setenv("REXRANK_LLM_BASE_URL", "http://judge.example:8000/v1")
    monkeypatch.setenv("REXRANK_LLM_MODEL", "green")
    assert "green" in dispatcher_for(Worker(store, worker_id="w2"), dry_run=True, mode="local", flavor="h200").worker.metrics
    # a Hub Job cannot reach this machine's endpoint, nor read its folders
    monkeypatch.setenv("REXRANK_LLM_BASE_URL", "http://localhost:8000/v1")
    with pytest.raises(RexrankError, match="a Hub Job cannot reach it"):
        Dispatcher(Worker(store, worker_id="w3"), None, DispatchSettings(mode="hf-jobs", flavor="h200"))
    monkeypatch.delenv("REXRANK_LLM_BASE_URL")
    folder = tmp_path / "weights"
    folder.mkdir()
    worker = Worker(store, metrics="green", metric_options={"green": {"model_path": str(folder)}}, worker_id="w4")
    with pytest.raises(RexrankError, match="is a folder of this machine: a Hub Job cannot read it"):
        Dispatcher(worker, None, DispatchSettings(mode="hf-jobs", flavor="h200"))
    assert Dispatcher(worker, None, DispatchSettings(mode="local", flavor="h200")).local_judges() == 1


# ---- Jobs in this process ----------------------------------------------------------------------

def test_no_more_jobs_run_at_once_than_max_jobs(tmp_path):
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    # shards that must be short (5 studies within 80 % of the Job timeout): four of them, two Jobs at once
    settings = DispatchSettings(mode="local", flavor="l4x1", max_jobs=2, target_shard_hours=1e-9, poll=0.05,
                                flavor_speed={"l4x1": 1e-4}, job_timeout=300, job_startup=0)
    jobs = InProcessJobs(str(tmp_path / "s"))
    jobs.go.clear()  # the Jobs run until the test lets them score
    thread = threading.Thread(target=lambda: Dispatcher(Worker(store, metrics="bleu2", worker_id="d"), jobs,
                                                        settings).run(once=True), daemon=True)
    thread.start()
    deadline = time.time() + 120
    while jobs.inspected < 20:  # many polls while two Jobs run and two shards wait
        assert thread.is_alive() and time.time() < deadline, f"the dispatcher stopped polling: {store.get_request(req['id'])}"
        time.sleep(0.01)
    assert len(jobs.jobs) == 2 and jobs.peak == 2
    jobs.go.set()
    thread.join(timeout=120)
    final = store.get_request(req["id"])
    assert final["status"] == FINISHED, final.get("error")
    assert len(final["dispatch"]["plan"]["ranges"]) == 4 and len(jobs.jobs) == 4 and jobs.peak == 2


def test_the_plans_ceiling_lets_exactly_its_gpu_hours_through(tmp_path, monkeypatch):
    from types import SimpleNamespace

    worker = Worker(open_store(tmp_path / "s", quota=Quota(0)), metrics="bleu2", worker_id="d")

    def refusal(ceiling):
        d = Dispatcher(worker, None, DispatchSettings(mode="local", flavor="l4x1", gpu_hours_ceiling=ceiling))
        monkeypatch.setattr(d, "plan", lambda resolved: SimpleNamespace(gpu_hours=2.0))
        plans: dict = {}
        said = d._plan_or_refusal(None, plans)
        assert plans["plan"].gpu_hours == 2.0  # the plan is kept for the record either way
        return said

    assert refusal(None) is None and refusal(2.0) is None
    assert refusal(1.99) == ("the estimated 2.00 GPU-hours exceed this board's per-request ceiling of 1.99 "
                             "(gpu_hours_ceiling); contact the maintainers")


def test_a_job_starts_only_while_fewer_than_max_jobs_run(tmp_path):
    worker = Worker(open_store(tmp_path / "s", quota=Quota(0)), metrics="bleu2", worker_id="d")
    d = Dispatcher(worker, None, DispatchSettings(mode="local", flavor="l4x1", max_jobs=2))
    assert [d._room_for_a_job(running) for running in range(4)] == [True, True, False, False]


def test_each_jobs_record_is_its_seconds_and_cost_at_the_price_of_its_flavour(tmp_path):
    from rexrank.backend.jobs import JobState

    worker = Worker(open_store(tmp_path / "s", quota=Quota(0)), metrics="bleu2", worker_id="d")
    d = Dispatcher(worker, None, DispatchSettings(mode="local", flavor="l4x1", flavor_prices={"l4x1": 0.8}))
    d._note("r", JobState("j1", "RUNNING", labels={}, flavor="l4x1", started=1000.0, finished=1900.04), 0, 1)
    # 900.04 s is recorded as 900.0; at $0.80 an hour that is $0.2 (0.8 * 900 / 3600)
    assert d._records["r"] == [{"job_id": "j1", "shard": 0, "attempt": 1, "flavor": "l4x1", "state": "RUNNING",
                                "seconds": 900.0, "estimated_cost_usd": 0.2}]
    # the same Job seen again replaces its record; another Job gets its own. A flavour with no
    # price (one the Hub added after this board's table) is recorded with its seconds, at no cost
    d._note("r", JobState("j1", "COMPLETED", flavor="l4x1", started=1000.0, finished=1000.0 + 4321.0), 0, 1)
    d._note("r", JobState("j2", "ERROR", flavor="b200", started=0.0, finished=60.0), 1, 2)
    assert d._records["r"] == [
        {"job_id": "j1", "shard": 0, "attempt": 1, "flavor": "l4x1", "state": "COMPLETED", "seconds": 4321.0,
         "estimated_cost_usd": 0.9602},  # 4321 / 3600 * 0.8 = 0.960222...
        {"job_id": "j2", "shard": 1, "attempt": 2, "flavor": "b200", "state": "ERROR", "seconds": 60.0,
         "estimated_cost_usd": 0.0}]


# ---- the GPU-hours the Jobs used ------------------------------------------------------------------

class _LongRunningJobs(InProcessJobs):
    """Jobs that say they started `ran_for` seconds ago (the hours a slow or stuck Job has billed)."""

    def __init__(self, store_name: str, ran_for: float):
        super().__init__(store_name)
        self.ran_for = ran_for

    def run(self, **job):
        job_id = super().run(**job)
        self.jobs[job_id].started -= self.ran_for
        return job_id


def test_the_used_hours_ceiling_counts_every_recorded_job_and_lets_exactly_the_ceiling_through(tmp_path):
    store = open_store(tmp_path / "s", quota=Quota(0))
    worker = Worker(store, metrics="bleu2", worker_id="d")
    d = Dispatcher(worker, None, DispatchSettings(mode="local", flavor="l4x1", gpu_hours_ceiling=1.5))
    d._records["r"] = [{"seconds": 1800.0}, {"seconds": 3600.0}]  # 1.5 h: the ceiling itself is allowed
    assert d._over_ceiling("r") is None
    d._records["r"].append({"seconds": 1.0})  # 5,401 s: one second over
    assert d._over_ceiling("r") == ("internal error while scoring: the Jobs used 1.50 GPU-hours, over this "
                                    "board's per-request ceiling of 1.5", "internal")
    # a previous holder's record of a Job it never saw run carries no seconds: it used none
    d._records["r"] = [{"seconds": 5400.0}, {"job_id": "adopted"}]
    assert d._over_ceiling("r") is None
    unlimited = Dispatcher(worker, None, DispatchSettings(mode="local", flavor="l4x1"))
    unlimited._records["r"] = [{"seconds": 1e9}]
    assert unlimited._over_ceiling("r") is None


def test_jobs_that_used_more_gpu_hours_than_the_ceiling_fail_the_request_and_stop(tmp_path):
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    # two shards, each Job said to have run 40 minutes: 80 GPU-minutes used against a ceiling of one hour
    settings = DispatchSettings(mode="local", flavor="l4x1", max_jobs=2, target_shard_hours=1e-9, poll=0.05,
                                flavor_speed={"l4x1": 1e-4}, job_timeout=300, job_startup=0, gpu_hours_ceiling=1.0)
    jobs = _LongRunningJobs(str(tmp_path / "s"), ran_for=2400)
    jobs.go.clear()  # the Jobs run on while the dispatcher polls them
    dispatcher = Dispatcher(Worker(store, metrics="bleu2", worker_id="d"), jobs, settings)
    thread = threading.Thread(target=lambda: dispatcher.run(once=True), daemon=True)
    thread.start()
    # the first poll that sees the Jobs' hours (the second inspection of each) fails the request: a
    # dispatcher still polling after 12 inspections let them run on (bounded by polls, not minutes)
    deadline = time.time() + 120
    while thread.is_alive() and jobs.inspected < 12 and time.time() < deadline:
        thread.join(timeout=0.05)
    jobs.go.set()
    assert not thread.is_alive(), f"the dispatcher let the Jobs run on past the ceiling ({jobs.inspected} inspections)"
    final = store.get_request(req["id"])
    assert final["status"] == FAILED and final["failure_kind"] == "internal"
    used = sum(job["seconds"] for job in final["dispatch"]["jobs"]) / 3600  # 1.33 and a little
    assert 4800 / 3600 <= used < 4800 / 3600 + 0.005
    assert final["error"] == ("internal error while scoring: the Jobs used 1.33 GPU-hours, over this board's "
                              "per-request ceiling of 1")
    assert {job["state"] for job in final["dispatch"]["jobs"]} == {"CANCELED"}


# ---- a private request is planned from public sizes --------------------------------------------

def private_variant(tmp_path, data_dir, name: str, drop_findings: int | None):
    """The private stand-in with one study's findings section removed (its track one study
    shorter; the whole set as large)."""
    folder = tmp_path / name / "rexgradient"
    folder.mkdir(parents=True)
    source = next((data_dir / "rexgradient").iterdir())
    studies = json.loads(source.read_text())
    if drop_findings is not None:
        sid = sorted(studies)[drop_findings]
        studies[sid]["section_findings"] = None
    (folder / source.name).write_text(json.dumps(studies))
    return tmp_path / name, sorted(studies)


def dispatch_private(tmp_path, data_dir, ids, name: str, **settings):
    store = open_store(tmp_path / f"store-{name}", quota=Quota(0))
    preds = write_jsonl(tmp_path / f"{name}.jsonl", {sid: "A patchy opacity in the left lower zone." for sid in ids})
    req = submit(store, preds, test_set="rexgradient")
    base = dict(mode="local", flavor="l4x1", max_jobs=8, target_shard_hours=1e-9, poll=0.05, job_startup=0,
                flavor_speed={"l4x1": 1e-5})
    s = DispatchSettings(**{**base, **settings})
    jobs = InProcessJobs(str(tmp_path / f"store-{name}"), data_dir)
    worker = Worker(store, data_dir=data_dir, metrics="bleu2", worker_id="d", min_coverage=0.5)
    Dispatcher(worker, jobs, s).run(once=True)
    return store.get_request(req["id"]), jobs


def test_a_private_requests_ceiling_refusal_comes_from_the_sets_public_size(tmp_path, private_set):
    data_dir, _ = private_set
    whole, ids = private_variant(tmp_path, data_dir, "whole", None)
    shorter, _ = private_variant(tmp_path, data_dir, "shorter", 0)
    refused = [dispatch_private(tmp_path, d, ids, name, gpu_hours_ceiling=0.5)[0]
               for d, name in ((whole, "a"), (shorter, "b"))]
    assert {r["status"] for r in refused} == {FAILED} and refused[0]["error"] == refused[1]["error"]
    # the estimate of the whole set's 6 studies (public), never the track's 6 or 5
    expected = plan_shards(6, ["bleu2"], flavor="l4x1", max_jobs=8, speed={"l4x1": 1e-5}, startup=0,
                           target_shard_hours=1e-9).gpu_hours
    assert f"the estimated {expected:.2f} GPU-hours exceed" in refused[0]["error"]
    assert all(r["failure_kind"] == "refused" for r in refused)


def test_a_private_requests_jobs_labels_and_logs_do_not_depend_on_its_track(tmp_path, private_set, caplog):
    caplog.set_level(logging.INFO, logger="rexrank")  # as a Job logs (rexrank backend-shard)
    data_dir, _ = private_set
    runs = []
    for name, drop in (("whole", None), ("shorter", 0), ("shortest", 5)):
        folder, ids = private_variant(tmp_path, data_dir, name, drop)
        final, jobs = dispatch_private(tmp_path, folder, ids, name)
        assert final["status"] == FINISHED, final.get("error")
        rid = final["id"]  # each store numbers its own request: the same request in every world
        runs.append(([{k: v.replace(rid, "RID") for k, v in job.labels.items()} for job in jobs.jobs.values()],
                     [[line.replace(rid, "RID") for line in jobs.lines[j]] for j in sorted(jobs.lines)]))
    labels, lines = runs[0]
    assert len(labels) == 6  # K from the whole set's six studies in every case
    for other in runs[1:]:
        assert other == runs[0]
    assert all(any("written" in line for line in job) for job in lines)
    assert not any("studies [" in line for job in lines for line in job)


def test_the_command_line_plans_the_jobs_a_target_wall_time_needs(tmp_path):
    import subprocess
    import sys

    root = tmp_path / "s"
    store = open_store(root, quota=Quota(0))
    req = submit(store)
    # a slow flavour (set in the store's config): one study takes 2,140 s, so an hour holds one per Job
    (root / "requests" / "config.json").write_text(json.dumps({"dispatch": {"flavor_speed": {"l4x1": 2e-6}}}))
    command = [sys.executable, "-c", "import sys; from rexrank.cli.main import main; sys.exit(main())", "backend",
               "--store", str(root), "--metrics", "bleu2", "--dispatch", "local", "--flavor", "l4x1",
               "--target-wall", "1h", "--job-startup", "60", "--dry-run"]
    out = subprocess.run([*command, "--max-jobs", "32"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"{req['id']} (example/findings):\n19 studies -> 19 shard(s) on l4x1" in out.stdout
    assert "1.0 min of start-up" in out.stdout and f"as of {PRICE_TABLE_DATE} (an estimate" in out.stdout
    capped = subprocess.run(command, capture_output=True, text=True, timeout=120)  # --max-jobs 4
    assert capped.returncode == 0, capped.stderr
    assert "the dispatcher would stop (its settings cannot plan it): 19 studies within 60 min need 19 Jobs at once and --max-jobs allows 4: raise " \
           "--max-jobs to 19" in capped.stdout
    assert store.get_request(req["id"])["status"] == "PENDING"


def test_a_public_requests_plan_is_estimated_from_the_studies_of_its_track(tmp_path):
    """The example's findings track holds 19 of its 20 studies: a public request's shards,
    GPU-hours and cost come from those 19 (only a private set's come from its public size)."""
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    d = Dispatcher(Worker(store, metrics="bleu2", worker_id="d"), None,
                   DispatchSettings(mode="local", flavor="l4x1", max_jobs=8, target_shard_hours=1e-9,
                                    flavor_speed={"l4x1": 1e-5}, job_startup=0))
    resolved, refusal = d.worker.resolve(req)
    assert refusal is None and (len(resolved.studies.ids), len(resolved.studies.outside_ids)) == (19, 1)
    plan = d.plan(resolved)
    track = plan_shards(19, ["bleu2"], flavor="l4x1", max_jobs=8, speed={"l4x1": 1e-5}, startup=0,
                        target_shard_hours=1e-9)
    whole = plan_shards(19, ["bleu2"], flavor="l4x1", max_jobs=8, speed={"l4x1": 1e-5}, startup=0,
                        target_shard_hours=1e-9, estimate_studies=20)
    assert (plan.gpu_hours, plan.cost_usd) == (track.gpu_hours, track.cost_usd) != (whole.gpu_hours, whole.cost_usd)


def test_the_dispatchers_plan_runs_the_jobs_its_target_wall_needs(tmp_path):
    """The board's target wall decides how many Jobs run (and what they cost), not the shard
    length: on a slow flavour an hour holds one study a Job, so 19 studies take 19 Jobs where
    its 100-hour shards make three (the fewest the 6-hour Job timeout allows)."""
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    settings = DispatchSettings(mode="local", flavor="l4x1", max_jobs=32, flavor_speed={"l4x1": 2e-6},
                                job_startup=60, target_shard_hours=100, target_wall=3600)
    d = Dispatcher(Worker(store, metrics="bleu2", worker_id="d"), None, settings)
    resolved, _ = d.worker.resolve(req)
    common = dict(flavor="l4x1", max_jobs=32, speed={"l4x1": 2e-6}, startup=60, prices=d.prices,
                  target_shard_hours=settings.target_shard_hours, job_timeout=settings.job_timeout)
    plan = d.plan(resolved)
    assert plan == plan_shards(19, ["bleu2"], target_wall=3600, **common) and plan.k == 19
    assert plan_shards(19, ["bleu2"], **common).k == 3


@pytest.mark.parametrize("flavor", ["a100x4", "no-such-gpu"])
def test_a_dispatcher_on_a_flavour_no_shard_job_can_use_is_refused_in_the_planners_words(tmp_path, flavor):
    store = open_store(tmp_path / "s", quota=Quota(0))
    with pytest.raises(PlanError) as cause:
        check_flavor(flavor)
    for settings in (dict(flavor=flavor), dict(flavor="l4x1", llm_flavor=flavor)):
        with pytest.raises(RexrankError) as refused:
            Dispatcher(Worker(store, metrics="bleu2", worker_id="d"), None, DispatchSettings(mode="local", **settings))
        assert str(refused.value) == str(cause.value)


def test_the_plan_is_made_with_the_metrics_options_and_the_local_judges(tmp_path, monkeypatch):
    """GREEN on a local model, batched by length: its batches mix the whole request's studies
    (one shard), and each Job loads the judge itself (its start-up); the dispatcher's plan is
    the planner's with both."""
    from support.green_token_folders import build_tiny_legacy_llama

    model = build_tiny_legacy_llama(tmp_path / "green", hidden=32, seed=1)
    options = {"green": {"model_path": str(model), "batching": "by_length"}}
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    settings = DispatchSettings(mode="local", flavor="l4x1", max_jobs=8, target_shard_hours=1e-9,
                                flavor_speed={"l4x1": 1.0}, target_wall=3600)  # the stated start-up
    d = Dispatcher(Worker(store, metrics="green", metric_options=options, worker_id="d"), None, settings)
    assert d.local_judges() == 1
    on_an_endpoint = Worker(store, metrics="green", metric_options={"green": {"base_url": "http://judge:8000/v1"}},
                            worker_id="e")
    assert Dispatcher(on_an_endpoint, None, settings).local_judges() == 0  # the endpoint generates
    resolved, _ = d.worker.resolve(req)
    plan = d.plan(resolved)
    common = dict(flavor="l4x1", max_jobs=8, target_shard_hours=1e-9, speed={"l4x1": 1.0}, prices=d.prices,
                  startup=settings.job_startup, job_timeout=settings.job_timeout)
    assert plan == plan_shards(19, ["green"], options, local_judges=1, target_wall=3600, **common)
    assert (len(plan.ranges), plan.align) == (1, 1)  # by length on a local model: one shard
    assert plan != plan_shards(19, ["green"], options, local_judges=0, target_wall=3600, **common)
    assert plan_shards(19, ["green"], {}, local_judges=1, target_wall=3600, **common).align == 8  # official batches
    monkeypatch.setenv("REXRANK_LLM_BASE_URL", "http://judge:8000/v1")  # the endpoint, for every judge without options
    assert Dispatcher(Worker(store, metrics="green", worker_id="f"), None, settings).local_judges() == 0
