"""Where shard Jobs run (rexrank.backend.jobs): a Job's state and seconds (what a Job is billed
for), the Hub's Jobs through huggingface_hub against the fake Hub (its passing faults retried
with backoff, a lost answer that did start a Job found by its labels), and local Jobs as
processes with their state on disk."""
from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time

import pytest

from rexrank.backend.jobs import HubJobs, JobsError, JobState, LocalJobs
from support.fakehub import Account, FakeHub

TOKEN, ORG = "hf_jobs_unit_token", "board"
SAY_HI = [sys.executable, "-c", "print('hi'); print('there')"]
SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]


def ended(jobs, job_id: str, timeout: float = 60.0) -> JobState:
    deadline = time.time() + timeout
    while True:
        state = jobs.inspect(job_id)
        if state is not None and not state.running:
            return state
        assert time.time() < deadline, f"Job {job_id} still {state and state.stage}"
        time.sleep(0.05)


# ---- a Job's state ------------------------------------------------------------------------

@pytest.mark.parametrize("stage, running", [("SCHEDULING", True), ("RUNNING", True), ("COMPLETED", False),
                                            ("CANCELED", False), ("ERROR", False), ("DELETED", False)])
def test_a_job_runs_while_scheduling_or_running(stage, running):
    assert JobState("j", stage).running is running


def test_a_jobs_seconds_run_from_its_start_to_its_end_or_now(monkeypatch):
    import rexrank.backend.jobs as jobs

    assert JobState("j", "SCHEDULING").seconds(now=500.0) == 0.0  # not started: nothing to bill
    assert JobState("j", "COMPLETED", started=100.0, finished=130.5).seconds(now=500.0) == 30.5
    assert JobState("j", "RUNNING", started=100.0).seconds(now=112.25) == 12.25
    assert JobState("j", "RUNNING", started=100.0).seconds(now=90.0) == 0.0  # a clock behind the Hub's
    monkeypatch.setattr(jobs.time, "time", lambda: 107.0)
    assert JobState("j", "RUNNING", started=100.0).seconds() == 7.0
    state = JobState("j", "RUNNING")
    assert (state.message, state.labels, state.flavor, state.started, state.finished) == (None, {}, "", None, None)


# ---- Jobs on the Hub (the fake Hub, as huggingface_hub calls it) ---------------------------

@pytest.fixture
def hub(monkeypatch):
    import huggingface_hub.constants as constants

    with FakeHub(accounts={TOKEN: Account("organiser", orgs=(ORG,))}) as fake:
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.delenv("HF_TOKEN", raising=False)
        monkeypatch.delenv("HF_ENDPOINT", raising=False)
        yield fake


def hub_jobs(hub, **kw) -> HubJobs:
    jobs = HubJobs(namespace=ORG, image="python:3.12", token=TOKEN, endpoint=hub.url, **kw)
    assert jobs.api.endpoint == hub.url  # the fake Hub, never the real one (whose calls hang here)
    return jobs


def test_a_hub_job_is_started_inspected_listed_and_read_as_the_hub_says(hub):
    jobs = hub_jobs(hub)
    before = time.time()
    job_id = jobs.run(command=SAY_HI, env={"A": "1"}, secrets={"S": "secret"}, flavor="cpu-upgrade", timeout=60,
                      labels={"request": "r1", "shard": "0"})  # not huggingface_hub's default flavour
    spec = hub.jobs[job_id].spec
    assert (spec["dockerImage"], spec["command"], spec["environment"], spec["secrets"], spec["flavor"],
            spec["timeoutSeconds"]) == ("python:3.12", SAY_HI, {"A": "1"}, {"S": "secret"}, "cpu-upgrade", 60)
    ours = {"request": "r1", "shard": "0"}  # huggingface_hub adds a "name" label of its own
    assert {k: v for k, v in spec["labels"].items() if k != "name"} == ours
    state = ended(jobs, job_id)
    assert (state.job_id, state.stage, state.message, state.labels, state.flavor) == (
        job_id, "COMPLETED", None, spec["labels"], "cpu-upgrade")
    # the Hub's start and end to the millisecond, as seconds since the epoch; a Job is billed from
    # its start, not from its creation (here it waited 5 s for a machine)
    fake = hub.jobs[job_id]
    fake.created -= 5
    state = jobs.inspect(job_id)
    assert state.started == pytest.approx(fake.started, abs=2e-3, rel=0)
    assert state.finished == pytest.approx(fake.finished, abs=2e-3, rel=0)
    assert before - 1 <= state.started <= state.finished <= time.time()
    assert state.seconds() == pytest.approx(state.finished - state.started)
    assert jobs.logs(job_id)[-2:] == ["hi", "there"]
    # JobInfo types the stage and flavour as enums (the installed huggingface_hub leaves the JSON's
    # strings): either way they are read as the Hub's words
    from huggingface_hub import JobHardware
    from huggingface_hub._jobs_api import JobStage

    info = jobs.api.inspect_job(job_id=job_id, namespace=ORG)
    info.status.stage, info.flavor = JobStage(info.status.stage), JobHardware(info.flavor)
    assert (jobs._state(info).stage, jobs._state(info).flavor) == ("COMPLETED", "cpu-upgrade")
    info.flavor = None  # JobInfo allows a Job without a flavour
    assert jobs._state(info).flavor == ""
    other = jobs.run(command=SAY_HI, env={}, secrets={}, flavor="cpu-basic", timeout=60, labels={"request": "r2"})
    assert [s.job_id for s in jobs.list({"request": "r1"})] == [job_id]
    assert {s.job_id for s in jobs.list({})} == {job_id, other}
    assert jobs.inspect("0" * 24) is None  # gone (404): no Job, no error


def test_a_hub_job_that_fails_or_is_cancelled_says_so(hub):
    jobs = hub_jobs(hub)
    failed = jobs.run(command=[sys.executable, "-c", "raise SystemExit(3)"], env={}, secrets={}, flavor="cpu-basic",
                      timeout=60, labels={})
    state = ended(jobs, failed)
    assert (state.stage, state.message) == ("ERROR", "exit code 3")
    sleeping = jobs.run(command=SLEEP, env={}, secrets={}, flavor="cpu-basic", timeout=60, labels={})
    jobs.cancel(sleeping)
    state = jobs.inspect(sleeping)  # at once: the Hub answers the cancel with the Job ended
    assert (state.stage, state.message) == ("CANCELED", "cancelled") and state.finished is not None
    nobody = "0" * 24
    for call, what in ((jobs.cancel, f"cancel Job {nobody}"), (jobs.logs, f"read the logs of Job {nobody}")):
        with pytest.raises(JobsError) as err:  # no such Job: a 404 is no passing fault
            call(nobody)
        assert str(err.value).startswith(f"could not {what}: 404 ") and not err.value.transient  # the Hub's answer
    assert {h.name for h in jobs.hardware()} >= {"cpu-basic", "a10g-large", "h200"}
    hub.inject("GET", "/api/jobs/hardware", 401)
    with pytest.raises(JobsError) as err:
        jobs.hardware()
    assert str(err.value).startswith("could not list the Jobs hardware: ")


def test_passing_faults_are_retried_with_doubling_waits_capped_and_a_retry_after_wins(hub, caplog):
    jobs = hub_jobs(hub, backoff=0.2, max_backoff=0.5)
    job_id = jobs.run(command=SAY_HI, env={}, secrets={}, flavor="cpu-basic", timeout=60, labels={})
    hub.inject("GET", f"/api/jobs/{ORG}/{job_id}", 503, 502, 500)
    with caplog.at_level(logging.WARNING, logger="rexrank.backend"):
        assert jobs.inspect(job_id).job_id == job_id
    waits = [r.getMessage().rsplit("trying again in ", 1)[1] for r in caplog.records]
    assert waits == ["0.2 s", "0.4 s", "0.5 s"] and {r.name for r in caplog.records} == {"rexrank.backend"}
    # each says what it tried and the Hub's answer
    assert caplog.records[0].getMessage().startswith(f"could not inspect Job {job_id} (Server error '503 Service Unavailable'")
    caplog.clear()
    hub.inject("GET", f"/api/jobs/{ORG}/{job_id}", 429, retry_after=0.3)
    with caplog.at_level(logging.WARNING, logger="rexrank.backend"):
        assert jobs.inspect(job_id).job_id == job_id
    assert [r.getMessage().rsplit("trying again in ", 1)[1] for r in caplog.records] == ["0.3 s"]
    caplog.clear()
    hub.inject("GET", f"/api/jobs/{ORG}/{job_id}", 429, retry_after=30)
    with caplog.at_level(logging.WARNING, logger="rexrank.backend"):
        assert jobs.inspect(job_id).job_id == job_id
    assert [r.getMessage().rsplit("trying again in ", 1)[1] for r in caplog.records] == ["0.5 s"]  # capped


def test_a_fault_that_outlasts_the_tries_is_transient_and_a_refusal_is_not_retried(hub, caplog):
    jobs = hub_jobs(hub, attempts=3, backoff=0.01)
    hub.inject("GET", f"/api/jobs/{ORG}/{'0' * 24}", 503, 503, 503)
    with pytest.raises(JobsError) as err:
        jobs.inspect("0" * 24)
    assert str(err.value).startswith(f"could not inspect Job {'0' * 24} after 3 tries: Server error '503 ") and err.value.transient
    assert len(hub.faults_served) == 3 and not hub.faults
    caplog.clear()
    stranger = HubJobs(namespace="elsewhere", image="python:3.12", token=TOKEN, endpoint=hub.url, backoff=0.01)
    with caplog.at_level(logging.WARNING, logger="rexrank.backend"), pytest.raises(JobsError) as err:
        stranger.list({})
    assert str(err.value).startswith("could not list the Jobs of elsewhere: ") and not err.value.transient
    assert caplog.records == []  # a 403 is asked once


def test_a_start_whose_answer_was_lost_is_found_by_its_labels_not_started_twice(hub):
    jobs = hub_jobs(hub, backoff=0.01)
    real_run = jobs.api.run_job

    def started_then_dropped(**kw):
        real_run(**kw)
        raise ConnectionError("connection reset by peer")

    jobs.api.run_job = started_then_dropped
    job_id = jobs.run(command=SLEEP, env={}, secrets={}, flavor="cpu-basic", timeout=60, labels={"request": "r7"})
    assert list(hub.jobs) == [job_id]
    # the answer lost before the Job started: tried again, one Job
    hub.inject("POST", f"/api/jobs/{ORG}", 503)
    jobs.api.run_job = real_run
    again = jobs.run(command=SLEEP, env={}, secrets={}, flavor="cpu-basic", timeout=60, labels={"request": "r8"})
    assert [s.job_id for s in jobs.list({"request": "r8"})] == [again] and len(hub.jobs) == 2


# ---- local Jobs ----------------------------------------------------------------------------

def test_a_local_job_starts_from_the_image_environment_and_its_spec_and_keeps_no_secret_on_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("CALLER_ONLY", "not for the Job")
    jobs = LocalJobs(tmp_path / "jobs", image_environment=("PATH",))
    show_env = [sys.executable, "-c", "import json, os; print(json.dumps(dict(os.environ)))"]
    job_id = jobs.run(command=show_env, env={"A": "1"}, secrets={"TOKEN": "hf_secret"}, flavor="a10g-large",
                      timeout=30, labels={"request": "r1"})
    state = ended(jobs, job_id)
    environment = json.loads(jobs.logs(job_id)[-1])
    assert {k: v for k, v in environment.items() if k in ("A", "TOKEN", "PATH", "CALLER_ONLY", "HOME")} == {
        "A": "1", "TOKEN": "hf_secret", "PATH": os.environ["PATH"]}
    meta = json.loads((tmp_path / "jobs" / job_id / "job.json").read_text())
    assert {k: v for k, v in meta.items() if k != "created"} == {
        "id": job_id, "command": show_env, "environment": {"A": "1"}, "labels": {"request": "r1"},
        "flavor": "a10g-large", "timeout": 30}
    assert "hf_secret" not in (tmp_path / "jobs" / job_id / "job.json").read_text()
    assert (state.stage, state.message, state.labels, state.flavor) == ("COMPLETED", None, {"request": "r1"}, "a10g-large")
    assert state.started == meta["created"] and state.started <= state.finished <= time.time()


def test_a_local_job_that_fails_is_cancelled_or_dies_says_so(tmp_path):
    jobs = LocalJobs(tmp_path / "jobs")
    failed = jobs.run(command=[sys.executable, "-c", "raise SystemExit(3)"], env={}, secrets={}, flavor="cpu-basic",
                      timeout=30, labels={})
    state = ended(jobs, failed)
    assert (state.stage, state.message) == ("ERROR", "the command exited with status 3")
    sleeping = jobs.run(command=SLEEP, env={}, secrets={}, flavor="cpu-basic", timeout=60, labels={"k": "v"})
    assert len(sleeping) == 24 and int(sleeping, 16) >= 0  # an id shaped as the Hub's
    for _ in range(5):  # looking does not disturb it
        assert jobs.inspect(sleeping).stage == "RUNNING"
        time.sleep(0.2)
    assert jobs._procs[sleeping].poll() is None
    jobs.cancel(sleeping)
    assert jobs._procs[sleeping].wait(timeout=10) == -signal.SIGKILL  # its process group is killed
    state = jobs.inspect(sleeping)
    assert state.stage == "CANCELED"
    assert state.finished == (tmp_path / "jobs" / sleeping / "canceled").stat().st_mtime
    died = jobs.run(command=SLEEP, env={}, secrets={}, flavor="cpu-basic", timeout=60, labels={})
    os.killpg(int((tmp_path / "jobs" / died / "pid").read_text()), signal.SIGKILL)  # its machine went
    state = ended(jobs, died)
    assert (state.stage, state.message) == ("ERROR", "the Job's process ended without an exit status")
    assert [s.job_id for s in jobs.list({"k": "v"})] == [sleeping]
    assert {s.job_id for s in jobs.list({})} == {failed, sleeping, died}
    garbled = jobs.run(command=[sys.executable, "-c", "import sys; sys.stdout.buffer.write(b'bad \\xff byte\\n')"],
                       env={}, secrets={}, flavor="cpu-basic", timeout=30, labels={})
    ended(jobs, garbled)
    assert jobs.logs(garbled) == ["bad \ufffd byte"]  # a byte that is no UTF-8 is shown replaced


def test_a_restarted_dispatcher_finds_its_local_jobs_and_their_ends(tmp_path):
    first = LocalJobs(tmp_path / "jobs")
    done = first.run(command=SAY_HI, env={}, secrets={}, flavor="cpu-basic", timeout=30, labels={})
    ended(first, done)
    died = first.run(command=SLEEP, env={}, secrets={}, flavor="cpu-basic", timeout=60, labels={})
    os.killpg(int((tmp_path / "jobs" / died / "pid").read_text()), signal.SIGKILL)
    deadline = time.time() + 30  # not reaped by its parent (`first`): a zombie until then, and no longer alive
    while open(f"/proc/{int((tmp_path / 'jobs' / died / 'pid').read_text())}/stat").read().split(")")[-1].split()[0] != "Z":
        assert time.time() < deadline
        time.sleep(0.05)
    again = LocalJobs(tmp_path / "jobs")
    assert again.inspect(done).stage == "COMPLETED" and again.logs(done)[-2:] == ["hi", "there"]
    assert (again.inspect(died).stage, again.inspect(died).message) == (
        "ERROR", "the Job's process ended without an exit status")
    first.inspect(died)  # reaped: its pid now names no process
    gone = again.inspect(died)
    assert (gone.stage, gone.message) == ("ERROR", "the Job's process ended without an exit status")


def test_a_local_job_being_started_runs_and_what_is_not_a_job_is_none(tmp_path):
    jobs = LocalJobs(tmp_path / "jobs")
    starting = tmp_path / "jobs" / "starting"
    starting.mkdir()
    (starting / "job.json").write_text(json.dumps({"labels": {}, "flavor": "cpu-basic", "created": 5.0}))
    assert (jobs.inspect("starting").stage, jobs.inspect("starting").started) == ("RUNNING", 5.0)  # no pid yet
    (tmp_path / "jobs" / "broken").mkdir()
    (tmp_path / "jobs" / "broken" / "job.json").write_text("{")
    assert jobs.inspect("broken") is None and jobs.inspect("never") is None
    assert [s.job_id for s in jobs.list({})] == ["starting"]
    assert jobs.logs("never") == []
    jobs.cancel("starting")  # no process to kill: marked, no error
    assert jobs.inspect("starting").stage == "CANCELED"


def test_a_local_jobs_folder_is_made_with_its_parents_its_stderr_logged_and_its_end_reaped(tmp_path):
    jobs = LocalJobs(tmp_path / "state" / "backend" / "jobs")
    job_id = jobs.run(command=[sys.executable, "-c", "import sys; print('out'); sys.stdout.flush(); sys.exit('err')"],
                      env={}, secrets={}, flavor="cpu-basic", timeout=30, labels={})
    pid = int((tmp_path / "state" / "backend" / "jobs" / job_id / "pid").read_text())
    assert ended(jobs, job_id).stage == "ERROR"
    assert jobs.logs(job_id) == ["out", "err"]  # stdout and stderr, in one log
    deadline = time.time() + 10  # its process ends just after its status is written; an inspection reaps it
    while os.path.exists(f"/proc/{pid}"):
        assert time.time() < deadline, "the ended Job's process is left a zombie"
        jobs.inspect(job_id)
        time.sleep(0.05)


def test_the_hub_jobs_retry_policy_and_endpoint_by_default(hub, monkeypatch):
    """Each call is tried 6 times, waiting 1 s doubled each time, at most 60 s; the Hub is
    HF_ENDPOINT's when no endpoint is given, as huggingface_hub's own calls."""
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    jobs = HubJobs(namespace=ORG, image="python:3.12", token=TOKEN)
    assert (jobs.attempts, jobs.backoff, jobs.max_backoff) == (6, 1.0, 60.0)
    assert jobs.api.endpoint == hub.url and {h.name for h in jobs.hardware()} >= {"cpu-basic"}


def test_a_start_the_hub_refuses_says_where(hub):
    jobs = hub_jobs(hub)
    hub.inject("POST", f"/api/jobs/{ORG}", 400)
    with pytest.raises(JobsError) as err:
        jobs.run(command=SAY_HI, env={}, secrets={}, flavor="cpu-basic", timeout=60, labels={})
    assert str(err.value) == f"could not start a Job in {ORG}: Bad request:" and not err.value.transient  # huggingface_hub's first line
