"""The neighbouring-dataset harness (issue 37): the whole public path of one private request,
run on one private test set, and everything the public can read afterwards.

A "world" is one run: a fresh fake Hub (tests/support/fakehub.py: the organisers' private requests
repo, the public results repo, whoami), the leaderboard Space's app built in this process
(`rexrank.leaderboard.app.build_app` on the Hub store), one filing through its /submit, the
backend scoring it (the single worker, or the dispatcher with its shard Jobs), then:

- every public repo of the Hub (here the results repo): each commit as the Hub lists it to
  anyone (`HfApi.list_repo_commits` without a token: title, message, date, authors) with
  every file as it stood at that commit;
- every function the Space serves (each named endpoint and each step its page calls),
  called with its default inputs (the request id for /status, the private set for views of
  one test set);
- /submit's answer, and the Jobs' labels and the lines they logged.

The two worlds share the clock's start (`ControlledClock`: nothing sleeps; a wait moves it),
the noise generator's seed, the request and the filer; only the private set differs. Each
number published through the noise (`rexrank.backend.privacy._published`) is masked where
it is made: it keeps its rounding, and its value is MASK. So a number derived from one (the
leaderboard's 1/x, a record's content id, a table cell) masks itself, and any byte that still
differs between the worlds is something private that reached the public.

Scoring time is modelled by the `timed` metric: it advances the world's clock by
SECONDS_PER_CHARACTER for every character of the references it scores, as an LLM judge's
time grows with them.
"""
from __future__ import annotations

import dataclasses
import difflib
import io
import json
import logging
import threading
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from support.backendhelpers import TEST_METRICS
from support.fakehub import Account, FakeHub
from rexrank.metrics.base import Metric
from support.dispatch_fixtures import ThreadJobs
from support.backend_fixtures import stand_in

BOT, PROBER = "hf_bot", "hf_prober"
ACCOUNTS = {BOT: Account("rexrank-bot", ("rexrank",)), PROBER: Account("prober")}
START = datetime(2026, 3, 2, 10, 10, tzinfo=timezone.utc).timestamp()  # the slot is 11:00 UTC
SECONDS_PER_CHARACTER = 0.001
MASK = 0.123456789  # what every noised number becomes (rounded as it was)
MODEL = "probe-model"
METRICS = "bleu2,timed"


def WORLD_METRICS(registry) -> dict:
    """The metric registry of a world: the real metrics, the backend tests' and `timed`."""
    return {**registry.METRICS, **TEST_METRICS, "timed": ("support.neighbours:Timed", "core")}
STORE = "hf://rexrank"


class ControlledClock:
    """Time that moves only when told: `advance` (work done) or `wait_until` (a wait)."""

    def __init__(self, start: float):
        self.t = start
        self.waits: list[tuple[float, float]] = []  # (from, until) of each wait
        self._lock = threading.Lock()

    def now(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.t += seconds

    def wait_until(self, when: float) -> None:
        with self._lock:
            self.waits.append((self.t, when))
            self.t = max(self.t, when)


CLOCK: ControlledClock | None = None  # the running world's (read by `Timed`)


class Timed(Metric):
    """Scoring that takes time: SECONDS_PER_CHARACTER of the world's clock per character of
    the references scored. Score 0 for every study (a column no private set publishes)."""

    name = "timed"

    def _score(self, predictions, references):
        CLOCK.advance(SECONDS_PER_CHARACTER * sum(len(r) for r in references))
        return self._rows({self.name: [0.0] * len(predictions)})


def masked_noise(real):
    """`privacy._published` whose output, when there is one, is MASK rounded as the real one."""

    def published(value, *, scale, decimals, rng, low=float("-inf"), high=float("inf")):
        out = real(value, scale=scale, decimals=decimals, rng=rng, low=low, high=high)
        return None if out is None else round(MASK, decimals) + 0.0

    return published


class LoggedThreadJobs(ThreadJobs):
    """The Jobs service in this process (tests/support/dispatch_fixtures.py's ThreadJobs: each Job runs
    `rexrank backend-shard`'s function in a thread, so the test's registry, test set and
    clock reach it), with each Job's log: what its shard logged (logger, level, message; the
    service's own time stamps are left out: what dates a Job is not its shard's text)."""

    def __init__(self, store_name: str, data_dir: Path):
        super().__init__(store_name, data_dir)
        self.lines: dict[tuple[str, str], list[str]] = {}  # (shard, attempt) -> its log

    def logged(self, run_shard):
        """`run_shard` keeping what it logs under its shard and attempt."""

        def run(store, request_id, shard, attempt, **kw):
            lines = self.lines.setdefault((str(shard), str(attempt)), [])
            handler = _ThreadLog(lines)
            logging.getLogger("rexrank").addHandler(handler)
            try:
                return run_shard(store, request_id, shard, attempt, **kw)
            finally:
                logging.getLogger("rexrank").removeHandler(handler)

        return run

    def logs(self, job_id):
        labels = self.jobs[job_id].labels
        return list(self.lines.get((labels["rexrank-shard"], labels["rexrank-attempt"]), []))


class _ThreadLog(logging.Handler):
    """Records logged by the thread that made it."""

    def __init__(self, lines: list[str]):
        super().__init__(logging.INFO)
        self.lines, self.thread = lines, threading.get_ident()
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record):
        if record.thread == self.thread:
            self.lines.append(self.format(record))


# ---- what the public can read -------------------------------------------------------------------

def public_form(obj):
    """`obj` as JSON values: tables by columns and rows, figures by their JSON (an image as the
    Space sends it), a file the Space serves by its content (its path is a temporary folder's)."""
    import numpy as np

    if isinstance(obj, pd.DataFrame):
        return {"columns": [str(c) for c in obj.columns], "rows": public_form(obj.astype(object).values.tolist())}
    if hasattr(obj, "to_plotly_json"):
        return public_form(obj.to_plotly_json())
    if isinstance(obj, dict):
        return {str(k): public_form(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [public_form(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return public_form(obj.tolist())
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, str) and _is_file(obj):
        return {"file content": Path(obj).read_text(errors="replace")}
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    if hasattr(obj, "model_dump"):  # a Gradio data model (a figure's PlotData: the image as it is sent)
        return public_form(obj.model_dump())
    if hasattr(obj, "get_config"):  # a gradio component sent as an update: its properties
        return public_form({k: v for k, v in obj.get_config().items() if k not in ("id", "_id")})  # ids count blocks
    if dataclasses.is_dataclass(obj):
        return public_form(dataclasses.asdict(obj))
    # a new kind of answer: teach this function to read it rather than compare less
    raise TypeError(f"the Space answered a {type(obj).__name__}, which public_form cannot read yet")


def _is_file(text: str) -> bool:
    try:
        return "\n" not in text and Path(text).is_absolute() and Path(text).is_file()
    except OSError:  # not a name a file can have
        return False


def public_repos(hub: FakeHub) -> dict[str, str]:
    """Every public repo of the Hub: each commit as listed to anyone, with its files."""
    from huggingface_hub import HfApi

    api = HfApi(endpoint=hub.url, token=False)
    out = {}
    for (repo_type, repo_id), repo in sorted(hub.repos.items()):
        if repo.private:
            continue
        files_at = dict(repo.history)
        commits = list(reversed(api.list_repo_commits(repo_id, repo_type=repo_type)))  # oldest first
        for k, commit in enumerate(commits):
            where = f"{repo_type} {repo_id} commit {k}"
            out[where] = json.dumps({"title": commit.title, "message": commit.message,
                                     "date": commit.created_at.isoformat(), "authors": commit.authors}, indent=1)
            for path, data in sorted(files_at[commit.commit_id].items()):
                out[f"{where} file {path}"] = _text(data)
    return out


def _text(data: bytes) -> str:
    """A file as text: JSON pretty-printed (a diff then points at the field), parquet as a table."""
    if data[:4] == b"PAR1":
        return pd.read_parquet(io.BytesIO(data)).to_json(orient="split", indent=1)
    text = data.decode("utf-8", errors="replace")
    try:
        return json.dumps(json.loads(text), indent=1, sort_keys=True, ensure_ascii=False)
    except ValueError:
        return text


def space_endpoints(app, *, request_id: str) -> dict[str, str]:
    """What each function of the Space answers: every one with a Python function (named
    endpoints and the steps its page runs), in a fixed order, with its inputs' default
    values; /status asks for the request, views of one test set show the private one;
    /submit (already called to file) is left out."""
    import inspect

    import gradio as gr

    given = {"request_id": request_id, "test_set": "rexgradient", "name": MODEL}
    out = {}
    for index, fn in sorted(app.fns.items()):
        if fn.fn is None or fn.api_name == "submit":
            continue
        parameters = list(inspect.signature(fn.fn).parameters.values())
        args = []
        for position, parameter in enumerate(parameters):
            if parameter.annotation in (gr.Request, "gr.Request"):
                args.append(None)
            elif parameter.name in given:
                args.append(given[parameter.name])
            elif position < len(fn.inputs) and hasattr(fn.inputs[position], "value"):
                args.append(fn.inputs[position].value)
            elif parameter.default is not inspect.Parameter.empty:
                args.append(parameter.default)
            else:
                args.append(None)
        try:
            answer = fn.fn(*args)
        except Exception as exc:  # what a visitor would get: the same in both worlds, or a finding
            answer = f"raised {type(exc).__name__}: {exc}"
        out[f"space {fn.api_name or fn.name} #{index}"] = json.dumps(public_form(answer), indent=1,
                                                                     sort_keys=True, ensure_ascii=False, default=str)
    return out


def jobs_view(jobs: LoggedThreadJobs | None) -> dict[str, str]:
    if jobs is None:
        return {}
    return {f"job {job_id}": json.dumps({"labels": job.labels, "log": jobs.logs(job_id)}, indent=1, sort_keys=True)
            for job_id, job in sorted(jobs.jobs.items())}


def differences(a: dict[str, str], b: dict[str, str]) -> str:
    """A readable diff of two worlds' public views ("" when equal)."""
    parts = []
    for key in sorted(set(a) | set(b)):
        if a.get(key) == b.get(key):
            continue
        if key not in a or key not in b:
            parts.append(f"--- {key}: only in world {'A' if key in a else 'B'}")
            continue
        diff = difflib.unified_diff(a[key].splitlines(), b[key].splitlines(), "world A", "world B", lineterm="", n=2)
        parts.append(f"--- {key}\n" + "\n".join(list(diff)[2:]))
    return "\n".join(parts)


# ---- one world ------------------------------------------------------------------------------------

@dataclasses.dataclass
class World:
    """What one run left: its public view, and for the attack tests the parts read directly."""

    public: dict[str, str]
    request_id: str
    status: dict  # /status
    request: dict  # the organisers' record (requests repo)
    record: dict | None  # the result record
    results_commits: list[dict]  # newest first: title, date
    scoring_ended: float | None  # the clock when the whole request's results were in
    waits: list[tuple[float, float]]


def run_world(tmp: Path, findings: dict[str, str | None], *, dispatched: bool = False, config: dict | None = None,
              predictions: dict[str, str] | None = None, seed: int = 37, metrics: str = METRICS,
              interrupted: int = 0) -> World:
    """The whole path on one private set (see the module's note); `config`: the store's
    config.json; `predictions`: the filer's (default: one sentence for every study);
    `metrics`: the backend's (tests/support/backendhelpers.py's test metrics may be named too);
    `interrupted`: workers that claimed the request and died scoring it before the backend's."""
    import gradio.oauth
    import huggingface_hub.constants as constants
    import numpy as np
    import pytest
    from huggingface_hub import HfApi

    import rexrank.metrics.registry as registry
    from rexrank.backend import privacy
    from rexrank.store import records as R
    from rexrank.testsets import registry as testsets

    global CLOCK
    clock = CLOCK = ControlledClock(START)
    predictions = predictions or {sid: "An opacity in the left lower zone, unchanged." for sid in findings}
    data_dir = stand_in(tmp / "data", findings)
    upload = tmp / "predictions.jsonl"
    upload.write_text("".join(json.dumps({"id": k, "prediction": v}) + "\n" for k, v in predictions.items()))
    ended: list[float] = []
    with FakeHub(ACCOUNTS, clock=clock.now) as hub, pytest.MonkeyPatch.context() as mp:
        mp.setattr(constants, "HF_HUB_OFFLINE", False)
        mp.setenv("HF_ENDPOINT", hub.url)
        # outside a Space gradio mocks the sign-in with the server's own whoami, at huggingface.co
        mp.setattr(gradio.oauth, "whoami", lambda *a, **k: HfApi(endpoint=hub.url, token=BOT).whoami())
        mp.setenv("HF_TOKEN", BOT)
        mp.setenv("HF_HOME", str(tmp / "hf-home"))
        mp.delenv("REXRANK_QUOTA", raising=False)
        mp.delenv("REXRANK_DATA_DIR", raising=False)
        mp.setattr(R, "now", clock.now)
        mp.setattr(privacy, "secure_rng", lambda: np.random.default_rng(seed))
        mp.setattr(privacy, "_published", masked_noise(privacy._published))
        mp.setattr(registry, "METRICS", WORLD_METRICS(registry))
        spec = testsets.TEST_SETS["rexgradient"]
        mp.setitem(testsets.TEST_SETS, "rexgradient", dataclasses.replace(spec, n_studies=None))
        logger, level = logging.getLogger("rexrank"), logging.getLogger("rexrank").level
        logger.setLevel(logging.INFO)  # what a Job's log holds (`rexrank backend-shard` logs at INFO)
        try:
            store = _hub_store(hub, config or {})
            app = _space(store)
            filed = _file(app, upload)
            request_id = filed["answer"]["request"]["id"]
            _die_scoring(store, findings, clock, interrupted)
            jobs = _score(store, data_dir, clock, metrics, dispatched=dispatched, ended=ended)
            public = {"space submit": json.dumps(public_form(filed), indent=1, sort_keys=True),
                      **public_repos(hub), **space_endpoints(app, request_id=request_id), **jobs_view(jobs)}
        finally:
            logger.setLevel(level)
        status = next(fn.fn for fn in app.fns.values() if fn.api_name == "status")(request_id)
        request = store.get_request(request_id)
        record = store.get_result(request_id, test_set="rexgradient", track="findings")
        commits = [{"title": c.title, "date": c.created_at.timestamp()}
                   for c in HfApi(endpoint=hub.url, token=False).list_repo_commits("rexrank/results",
                                                                                    repo_type="dataset")]
    return World(public, request_id, status, request, record, commits, ended[-1] if ended else None,
                 list(clock.waits))


def _hub_store(hub: FakeHub, config: dict):
    """The store as `rexrank hub deploy` leaves it: requests private, results public."""
    from huggingface_hub import HfApi

    from rexrank.store import Quota, open_store

    api = HfApi(endpoint=hub.url, token=BOT)
    api.create_repo("rexrank/requests", repo_type="dataset", private=True)
    api.create_repo("rexrank/results", repo_type="dataset", private=False)
    if config:
        api.upload_file(path_or_fileobj=json.dumps(config).encode(), path_in_repo="config.json",
                        repo_id="rexrank/requests", repo_type="dataset")
    return open_store(STORE, token=BOT, create=False, quota=Quota(0))


def _space(store):
    from rexrank.leaderboard.app import build_app
    from rexrank.leaderboard.source import LeaderboardSource

    return build_app(LeaderboardSource.from_store(store, ttl=0))


def _file(app, upload: Path) -> dict:
    """/submit, as the prober signed in on the Space: its JSON answer (the page's too)."""
    import gradio as gr

    submit = next(fn.fn for fn in app.fns.values() if fn.api_name == "submit")
    page, answer, queue = submit(str(upload), "", "rexgradient", "findings", MODEL, "", "", [], "",
                                 oauth_token=gr.OAuthToken(token=PROBER, scope="", expires_at=0))
    assert answer["filed"], answer["error"]
    return {"page": page, "answer": answer, "queue": queue}


def _die_scoring(store, findings: dict[str, str | None], clock: ControlledClock, times: int) -> None:
    """`times` workers that claimed the request and died scoring it, each after the time its
    scoring took (`Timed`'s rate over the track's references: private), their short leases
    left to end (a lease is measured on this host's monotonic clock: a short real wait)."""
    import time

    track_characters = sum(len(text) for text in findings.values() if text)
    for i in range(times):
        assert store.claim(f"died-{i}", lease_seconds=0.05, max_attempts=times + 1) is not None
        clock.advance(SECONDS_PER_CHARACTER * track_characters)
        time.sleep(0.1)


def _score(store, data_dir: Path, clock: ControlledClock, metrics: str, *, dispatched: bool, ended: list[float]):
    """The backend, single or dispatched, until the queue is empty; `ended` gets the clock's
    time when scoring ended (the start of the wait for the slot, or of the publication)."""
    from rexrank.backend.worker import Worker

    worker = Worker(store, data_dir=data_dir, metrics=metrics, worker_id="backend", lease_seconds=7200)
    worker.clock = clock
    real_parts = worker.published_parts

    def published_parts(*args, **kwargs):  # the end of scoring, whatever the code does next
        ended.append(clock.now())
        return real_parts(*args, **kwargs)

    worker.published_parts = published_parts
    if not dispatched:
        while worker.run(once=True):
            pass
        return None
    import pytest

    from rexrank.backend import shard_job
    from rexrank.backend.dispatch import Dispatcher, dispatch_settings

    jobs = LoggedThreadJobs(STORE, data_dir)
    settings = dispatch_settings(store, mode="local", flavor="cpu-basic", max_jobs=3, target_shard_hours=1e-9,
                                 poll=0.02)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(shard_job, "run_shard", jobs.logged(shard_job.run_shard))
        while Dispatcher(worker, jobs, settings).run(once=True):
            pass
    return jobs
