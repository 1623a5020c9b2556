"""Where shard Jobs run: Hugging Face Jobs (`HubJobs`, through huggingface_hub's
run_job / inspect_job / list_jobs / cancel_job / fetch_job_logs) or local processes
(`LocalJobs`, for tests and laptops). Both answer the same five questions, so the
dispatcher has one code path. Neither schedules anything: the Hub (or the OS) does.

Secrets (the store token) are passed as Job secrets only: never in a Job's command,
environment or labels, which anyone with read access to the namespace can see.

A Job sees only what it is given (command, env, secrets): a Hub Job runs in its image, and
a local Job starts from an empty environment too (PATH and HOME aside), so what works
locally works on the Hub. The Hub's passing faults (5xx, dropped connections, 429 with
Retry-After) are retried with backoff in `HubJobs`; one that outlasts the retries is a
`JobsError` with `transient` set, which the dispatcher waits out instead of failing.
"""
from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from rexrank.errors import RexrankError
from rexrank.http_faults import retry_after, transient_fault

RUNNING_STAGES = ("SCHEDULING", "RUNNING")
TERMINAL_STAGES = ("COMPLETED", "CANCELED", "ERROR", "DELETED")


class JobsError(RexrankError):
    """The Jobs service refused or failed a call; `transient`: a passing fault of the
    service (5xx, a dropped connection, 429), worth trying again later."""

    def __init__(self, message: str, *, transient: bool = False):
        super().__init__(message)
        self.transient = transient


@dataclass
class JobState:
    job_id: str
    stage: str  # SCHEDULING, RUNNING, COMPLETED, CANCELED, ERROR, DELETED
    message: str | None = None
    labels: dict = field(default_factory=dict)
    flavor: str = ""
    started: float | None = None  # seconds since the epoch
    finished: float | None = None

    @property
    def running(self) -> bool:
        return self.stage in RUNNING_STAGES

    def seconds(self, now: float | None = None) -> float:
        if self.started is None:
            return 0.0
        return max(0.0, (self.finished or now or time.time()) - self.started)


class Jobs(Protocol):
    def run(self, *, command: list[str], env: dict[str, str], secrets: dict[str, str], flavor: str,
            timeout: int, labels: dict[str, str]) -> str:
        """Start a Job; its id."""
        ...

    def inspect(self, job_id: str) -> JobState | None:
        """None: the Job is gone (deleted, or never known here)."""
        ...

    def list(self, labels: dict[str, str]) -> list[JobState]:
        """Every Job carrying all of `labels`."""
        ...

    def cancel(self, job_id: str) -> None: ...

    def logs(self, job_id: str) -> list[str]: ...


def _epoch(value) -> float | None:
    return value.timestamp() if value is not None else None


class HubJobs:
    """Jobs on the Hub, in `namespace` (an org the token can run Jobs in). Each call is
    tried `attempts` times over a passing fault, waiting `backoff` seconds doubled each time
    (at most `max_backoff`; a Retry-After answer says how long)."""

    def __init__(self, *, namespace: str, image: str, token: str | None = None, endpoint: str | None = None,
                 attempts: int = 6, backoff: float = 1.0, max_backoff: float = 60.0):
        from huggingface_hub import HfApi

        self.namespace, self.image = namespace, image
        self.api = HfApi(endpoint=endpoint or os.environ.get("HF_ENDPOINT") or None, token=token)
        self.attempts, self.backoff, self.max_backoff = attempts, backoff, max_backoff

    def _state(self, info) -> JobState:
        return JobState(info.id, str(getattr(info.status.stage, "value", info.status.stage)), info.status.message,
                        dict(info.labels or {}), str(getattr(info.flavor, "value", info.flavor) or ""),
                        _epoch(info.started_at or info.created_at), _epoch(info.finished_at))

    def _call(self, what: str, call, *, missing=None, again=None):
        """`call()`, retried over passing faults; a 404 returns `missing()` when given;
        `again()` (before each retry) may return the answer instead (a Job the dropped
        call did start)."""
        for attempt in range(self.attempts):
            try:
                return call()
            except Exception as exc:
                status = getattr(getattr(exc, "response", None), "status_code", None)
                if status == 404 and missing is not None:
                    return missing()
                if not transient_fault(exc):
                    raise JobsError(f"could not {what}: {_first_line(exc)}") from None
                if attempt + 1 == self.attempts:
                    raise JobsError(f"could not {what} after {self.attempts} tries: {_first_line(exc)}",
                                    transient=True) from None
                wait = retry_after(exc)
                wait = min(self.max_backoff, self.backoff * 2 ** attempt if wait is None else wait)
                logging.getLogger("rexrank.backend").warning("could not %s (%s); trying again in %.1f s", what,
                                                             _first_line(exc), wait)
                time.sleep(wait)
                if again is not None:
                    found = again()
                    if found is not None:
                        return found

    def run(self, *, command, env, secrets, flavor, timeout, labels) -> str:
        def start():
            return self.api.run_job(image=self.image, command=list(command), env=dict(env), secrets=dict(secrets),
                                    flavor=flavor, timeout=int(timeout), labels=dict(labels),
                                    namespace=self.namespace).id

        def started():  # a run whose answer was lost may have started the Job: its labels find it
            try:
                found = self.list(labels)
            except JobsError:
                return None
            return found[0].job_id if found else None

        return self._call(f"start a Job in {self.namespace}", start, again=started)

    def inspect(self, job_id: str) -> JobState | None:
        return self._call(f"inspect Job {job_id}",
                          lambda: self._state(self.api.inspect_job(job_id=job_id, namespace=self.namespace)),
                          missing=lambda: None)

    def list(self, labels: dict[str, str]) -> list[JobState]:
        return self._call(f"list the Jobs of {self.namespace}", lambda: [
            self._state(info) for info in self.api.list_jobs(labels=dict(labels), namespace=self.namespace)])

    def cancel(self, job_id: str) -> None:
        self._call(f"cancel Job {job_id}", lambda: self.api.cancel_job(job_id=job_id, namespace=self.namespace))

    def logs(self, job_id: str) -> list[str]:
        return self._call(f"read the logs of Job {job_id}",
                          lambda: list(self.api.fetch_job_logs(job_id=job_id, namespace=self.namespace)))

    def hardware(self) -> list:
        """The Hub's Jobs hardware with prices (`HfApi.list_jobs_hardware()`)."""
        return self._call("list the Jobs hardware", lambda: self.api.list_jobs_hardware())


def _first_line(exc: BaseException) -> str:
    from rexrank.errors import first_line

    return first_line(exc)


# what a local Job's "image" provides: where programs are and the home folder (nothing else
# of the caller's environment: a Job gets the rest from its spec, as on the Hub)
LOCAL_IMAGE_ENVIRONMENT = ("PATH", "HOME")


class LocalJobs:
    """Jobs as local processes, each in its own session, with their state in `root`
    (one folder per Job: job.json, log, rc) so that a restarted dispatcher finds them."""

    def __init__(self, root: str | Path, *, image_environment: tuple[str, ...] = LOCAL_IMAGE_ENVIRONMENT):
        """`image_environment`: the variables of this process a Job starts with (none: `env -i`)."""
        self.root = Path(root)
        self.image_environment = image_environment
        self.root.mkdir(parents=True, exist_ok=True)
        self._procs: dict[str, subprocess.Popen] = {}  # started here: reaped when they end (no zombies)

    def run(self, *, command, env, secrets, flavor, timeout, labels) -> str:
        job_id = uuid.uuid4().hex[:24]
        folder = self.root / job_id
        folder.mkdir()
        meta = {"id": job_id, "command": list(command), "environment": dict(env), "labels": dict(labels),
                "flavor": flavor, "timeout": int(timeout), "created": time.time()}
        (folder / "job.json").write_text(json.dumps(meta))
        base = {k: os.environ[k] for k in self.image_environment if k in os.environ}
        child_env = {**base, **env, **secrets}
        with open(folder / "log", "wb") as log:
            proc = subprocess.Popen([sys.executable, "-m", "rexrank.backend.local_job", str(folder), *command],
                                    env=child_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        (folder / "pid").write_text(str(proc.pid))
        self._procs[job_id] = proc
        return job_id

    def inspect(self, job_id: str) -> JobState | None:
        folder = self.root / job_id
        try:
            meta = json.loads((folder / "job.json").read_text())
        except (OSError, ValueError):
            return None
        proc = self._procs.get(job_id)
        if proc is not None:
            proc.poll()
        state = JobState(job_id, "RUNNING", None, meta["labels"], meta["flavor"], meta["created"])
        if (folder / "canceled").exists():
            state.stage, state.finished = "CANCELED", (folder / "canceled").stat().st_mtime
        elif (folder / "rc").exists():
            outcome = json.loads((folder / "rc").read_text())
            state.finished = outcome["finished"]
            state.stage = "COMPLETED" if outcome["rc"] == 0 else "ERROR"
            state.message = outcome.get("message")
        elif not _alive(folder):
            state.stage, state.message = "ERROR", "the Job's process ended without an exit status"
        return state

    def list(self, labels: dict[str, str]) -> list[JobState]:
        found = []
        for folder in sorted(self.root.iterdir()):
            state = self.inspect(folder.name)
            if state is not None and all(state.labels.get(k) == v for k, v in labels.items()):
                found.append(state)
        return found

    def cancel(self, job_id: str) -> None:
        folder = self.root / job_id
        (folder / "canceled").touch()
        try:
            os.killpg(int((folder / "pid").read_text()), signal.SIGKILL)
        except (OSError, ValueError):
            pass

    def logs(self, job_id: str) -> list[str]:
        try:
            return (self.root / job_id / "log").read_text(errors="replace").splitlines()
        except OSError:
            return []


def _alive(folder: Path) -> bool:
    try:
        pid = int((folder / "pid").read_text())
    except (OSError, ValueError):
        return True  # being started
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie (ended, not yet reaped by its parent) is not alive
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True
