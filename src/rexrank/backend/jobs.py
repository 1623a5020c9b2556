"""Where shard Jobs run: Hugging Face Jobs (`HubJobs`, through huggingface_hub's
run_job / inspect_job / list_jobs / cancel_job / fetch_job_logs) or local processes
(`LocalJobs`, for tests and laptops). Both answer the same five questions, so the
dispatcher has one code path. Neither schedules anything: the Hub (or the OS) does.

Secrets (the store token) are passed as Job secrets only: never in a Job's command,
environment or labels, which anyone with read access to the namespace can see.
"""
from __future__ import annotations

import json
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

RUNNING_STAGES = ("SCHEDULING", "RUNNING")
TERMINAL_STAGES = ("COMPLETED", "CANCELED", "ERROR", "DELETED")


class JobsError(RexrankError):
    """The Jobs service refused or failed a call."""


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
    """Jobs on the Hub, in `namespace` (an org the token can run Jobs in)."""

    def __init__(self, *, namespace: str, image: str, token: str | None = None, endpoint: str | None = None):
        from huggingface_hub import HfApi

        self.namespace, self.image = namespace, image
        self.api = HfApi(endpoint=endpoint or os.environ.get("HF_ENDPOINT") or None, token=token)

    def _state(self, info) -> JobState:
        return JobState(info.id, str(getattr(info.status.stage, "value", info.status.stage)), info.status.message,
                        dict(info.labels or {}), str(info.flavor or ""), _epoch(info.started_at or info.created_at),
                        _epoch(info.finished_at))

    def run(self, *, command, env, secrets, flavor, timeout, labels) -> str:
        try:
            info = self.api.run_job(image=self.image, command=list(command), env=dict(env), secrets=dict(secrets),
                                    flavor=flavor, timeout=int(timeout), labels=dict(labels), namespace=self.namespace)
        except Exception as exc:
            raise JobsError(f"could not start a Job in {self.namespace}: {_first_line(exc)}") from None
        return info.id

    def inspect(self, job_id: str) -> JobState | None:
        from huggingface_hub.errors import HfHubHTTPError

        try:
            return self._state(self.api.inspect_job(job_id=job_id, namespace=self.namespace))
        except HfHubHTTPError as exc:
            if exc.response is not None and exc.response.status_code == 404:
                return None
            raise JobsError(f"could not inspect Job {job_id}: {_first_line(exc)}") from None

    def list(self, labels: dict[str, str]) -> list[JobState]:
        try:
            return [self._state(info) for info in self.api.list_jobs(labels=dict(labels), namespace=self.namespace)]
        except Exception as exc:
            raise JobsError(f"could not list the Jobs of {self.namespace}: {_first_line(exc)}") from None

    def cancel(self, job_id: str) -> None:
        try:
            self.api.cancel_job(job_id=job_id, namespace=self.namespace)
        except Exception as exc:
            raise JobsError(f"could not cancel Job {job_id}: {_first_line(exc)}") from None

    def logs(self, job_id: str) -> list[str]:
        return list(self.api.fetch_job_logs(job_id=job_id, namespace=self.namespace))


def _first_line(exc: BaseException) -> str:
    from rexrank.errors import first_line

    return first_line(exc)


class LocalJobs:
    """Jobs as local processes, each in its own session, with their state in `root`
    (one folder per Job: job.json, log, rc) so that a restarted dispatcher finds them."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._procs: dict[str, subprocess.Popen] = {}  # started here: reaped when they end (no zombies)

    def run(self, *, command, env, secrets, flavor, timeout, labels) -> str:
        job_id = uuid.uuid4().hex[:24]
        folder = self.root / job_id
        folder.mkdir()
        meta = {"id": job_id, "command": list(command), "environment": dict(env), "labels": dict(labels),
                "flavor": flavor, "timeout": int(timeout), "created": time.time()}
        (folder / "job.json").write_text(json.dumps(meta))
        child_env = {**os.environ, **env, **secrets}
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
