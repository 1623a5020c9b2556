"""A fake Hub with the organisers' account, dispatchers on it, and Jobs run in this process."""
from __future__ import annotations

import dataclasses
import io
import itertools
import logging
import sys
import threading
import time

import pandas as pd
import pytest

from rexrank.backend.dispatch import Dispatcher, DispatchSettings
from rexrank.backend.jobs import HubJobs
from rexrank.backend.worker import Worker
from rexrank.store import Quota, open_store
from support.backend_fixtures import HELPER
from support.fakehub import Account, FakeHub


TOKEN = "hf_store_secret_7f3a9c"  # the organisers' store token: a Job secret, nowhere else


ORG = "board"


@pytest.fixture
def hub(monkeypatch):
    import huggingface_hub.constants as constants

    with FakeHub(accounts={TOKEN: Account("organiser", orgs=(ORG,))}) as fake:
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setenv("HF_ENDPOINT", fake.url)
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        yield fake


def settings(**kw) -> DispatchSettings:
    # tiny shards (three for the example's 19 studies); each Job runs the test helper, which
    # is the rexrank command line with the test metrics registered; the Jobs polled every 0.5 s
    # (each poll asks the fake Hub once per Job: at 0.2 s the polls cost more CPU than they save)
    base = dict(mode="hf-jobs", flavor="cpu-basic", max_jobs=3, target_shard_hours=1e-9, poll=0.5,
                job_command=(sys.executable, HELPER), job_env={"HF_HUB_OFFLINE": "0"}, job_timeout=300, job_startup=0)
    return DispatchSettings(**{**base, **kw})


def dispatcher(store, metrics: str, worker_id: str = "dispatcher", lease: float = 30.0, **kw) -> Dispatcher:
    s = settings(**kw)
    jobs = HubJobs(namespace=ORG, image=s.image, token=TOKEN)
    return Dispatcher(Worker(store, metrics=metrics, worker_id=worker_id, lease_seconds=lease), jobs, s)


def wait_for(condition, timeout=120.0, what=""):
    deadline = time.time() + timeout
    while not condition():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def in_thread(target):
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def run_once_unless(dispatcher, went_wrong, timeout=120.0) -> None:
    """Run `dispatcher` until its queue is empty, stopping it as soon as `went_wrong()` says it
    never would end (a test then fails in seconds, not at a deadline)."""
    stop = threading.Event()
    thread = in_thread(lambda: dispatcher.run(once=True, stop=stop))
    try:
        wait_for(lambda: not thread.is_alive() or went_wrong(), timeout=timeout, what="the queue settled")
    finally:
        stop.set()
        thread.join(timeout=30)


def logged(caplog, words: str) -> list[str]:
    """The captured log messages holding `words`."""
    return [m for m in caplog.messages if words in m]


def without_seconds(summaries: dict) -> dict:
    """The summaries without what measures this machine's load rather than the scoring: the
    seconds, and an LLM endpoint's retry count (a slow answer under load is asked again)."""
    def comparable(summary: dict) -> dict:
        summary = {k: v for k, v in summary.items() if k != "seconds"}
        usage = (summary.get("details") or {}).get("llm_usage")
        if usage is not None:
            summary["details"] = {**summary["details"], "llm_usage": {k: v for k, v in usage.items() if k != "retries"}}
        return summary

    return {name: comparable(summary) for name, summary in summaries.items()}


class ThreadJobs:
    """Jobs run in this process's threads (so that a test's monkeypatched test set reaches
    them): each runs `rexrank backend-shard`'s function on its own store object."""

    def __init__(self, store_name: str, data_dir):
        from rexrank.backend.jobs import JobState

        self.store_name, self.data_dir, self.jobs, self.State = store_name, data_dir, {}, JobState
        self._ids = itertools.count()  # the service never gives a forgotten Job's id again

    def run(self, *, command, env, secrets, flavor, timeout, labels):
        import traceback

        from rexrank.backend.shard_job import run_shard

        job = self.State(f"t{next(self._ids)}", "RUNNING", None, dict(labels), flavor, time.time())
        self.jobs[job.job_id] = job

        def work():
            # a shard that raises ends as ERROR, as a Job whose process dies does: left RUNNING, the
            # dispatcher would wait for it for ever (a CI run hung here once)
            try:
                rc = run_shard(open_store(self.store_name, quota=Quota(0)), labels["rexrank-request"],
                               int(labels["rexrank-shard"]), int(labels["rexrank-attempt"]), data_dir=self.data_dir)
            except BaseException:
                traceback.print_exc()  # pytest shows it with the failing test's output
                rc = 1
            job.stage, job.finished = ("COMPLETED" if rc == 0 else "ERROR"), time.time()

        in_thread(work)
        return job.job_id

    def inspect(self, job_id):
        return self.jobs.get(job_id)

    def list(self, labels):
        # what the service saw then, as the Hub answers: a later cancel changes none of them
        return [dataclasses.replace(j) for j in list(self.jobs.values())
                if all(j.labels.get(k) == v for k, v in labels.items())]

    def cancel(self, job_id):
        self.jobs[job_id].stage = "CANCELED"

    def logs(self, job_id):
        return []


class InProcessJobs(ThreadJobs):
    """ThreadJobs (each Job `rexrank backend-shard`'s function in a thread of this
    process, on its own store object) whose Jobs wait for `go` before they score; how many run
    at once is counted, and the lines each shard logs are kept (what the Jobs service shows
    whoever can read the namespace). The test plays the Jobs service's faults: `kill` (the Job
    ends ERROR), `forget` (the service no longer knows it), and `failing_shards`, whose Jobs end
    ERROR ("Job timeout") as they start; a Job stopped before `go` scores nothing, as a
    process that ended writes nothing."""

    def __init__(self, store_name: str, data_dir=None, *, failing_shards=()):
        super().__init__(store_name, data_dir)
        self.failing_shards = set(failing_shards)
        self.lines: dict[str, list[str]] = {}
        self.go = threading.Event()
        self.go.set()
        self.inspected = self.peak = 0

    def run(self, *, command, env, secrets, flavor, timeout, labels):
        import traceback

        from rexrank.backend.shard_job import run_shard

        job = self.State(f"t{next(self._ids)}", "RUNNING", None, dict(labels), flavor, time.time())
        self.jobs[job.job_id] = job
        self.peak = max(self.peak, sum(1 for j in list(self.jobs.values()) if j.running))
        lines = self.lines[job.job_id] = []
        if int(labels["rexrank-shard"]) in self.failing_shards:
            self.kill(job.job_id, message="Job timeout")
            return job.job_id

        def work():
            self.go.wait()
            if not job.running:  # killed or cancelled while it waited
                return
            handler = _ThreadLines(lines)
            logging.getLogger("rexrank").addHandler(handler)
            try:
                rc = run_shard(open_store(self.store_name, quota=Quota(0)), labels["rexrank-request"],
                               int(labels["rexrank-shard"]), int(labels["rexrank-attempt"]), data_dir=self.data_dir)
            except BaseException:
                traceback.print_exc()  # a shard that raises ends as ERROR, as a Job whose process dies
                rc = 1
            finally:
                logging.getLogger("rexrank").removeHandler(handler)
            job.stage, job.finished = ("COMPLETED" if rc == 0 else "ERROR"), time.time()

        threading.Thread(target=work, daemon=True).start()
        return job.job_id

    def inspect(self, job_id):
        self.inspected += 1
        return super().inspect(job_id)

    def kill(self, job_id, *, message="killed"):
        job = self.jobs[job_id]
        job.stage, job.message, job.finished = "ERROR", message, time.time()

    def forget(self, job_id):
        self.jobs.pop(job_id).stage = "DELETED"

    def logs(self, job_id):
        return list(self.lines.get(job_id, []))


class _ThreadLines(logging.Handler):
    """The records logged by the thread that made it."""

    def __init__(self, lines):
        super().__init__(logging.DEBUG)
        self.lines, self.thread = lines, threading.get_ident()

    def emit(self, record):
        if record.thread == self.thread:
            self.lines.append(f"{record.name} {record.levelname} {record.getMessage()}")


def published(store):
    """The store's one result record and its per-study table."""
    [record] = store.list_results()
    return record, pd.read_parquet(io.BytesIO(store.read_per_study(record)))
