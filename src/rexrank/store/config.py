"""A store's settings, kept in the store itself (config.json in its requests repo): every
worker on the store scores with the same metric set, and anyone reading the store can see
which set its results were scored with.

It may also restrict test sets to submitters the organisers approved, as ReXrank's own
process does for its private test set:
    "approved_submitters": {"rexgradient": ["alice", "stanford-aimi"]}
a test set listed there accepts requests from those submitters only (names compared as
the quota compares them); one not listed is open to all.

The metric set has two parts:
    metrics       run on every request; a metric that cannot run fails the request with
                  the metric and the reason (the coverage rule: it scored no study)
    llm_metrics   LLM-judged metrics, run where the worker has an LLM configured for them;
                  a worker without one scores the request without them and says so (in
                  the worker's log, the request's notes and the result's `not_scored`)
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

from rexrank.errors import RexrankError
from rexrank.store import records as R
from rexrank.store.repo import Snapshot, StoreError, transact

# The published ReXrank columns (rexrank.results_schema.LEADERBOARD_COLUMNS) and the metric
# that makes each: BLEU-2, BERTScore, SembScore, RadGraph, 1/RadCliQ-v1, RaTEScore need
# only their checkpoints; GREEN and 1/FineRadScore need an LLM.
REXRANK_METRICS = ("bleu2", "bertscore", "sembscore", "radgraph", "radcliq", "ratescore")
REXRANK_LLM_METRICS = ("green", "fineradscore")


@dataclass(frozen=True)
class MetricSet:
    metrics: tuple[str, ...]
    llm_metrics: tuple[str, ...] = ()
    origin: str = ""  # for messages: where the set came from

    @property
    def all(self) -> tuple[str, ...]:
        return (*self.metrics, *self.llm_metrics)

    def to_json(self) -> dict:
        return {"metrics": list(self.metrics), "llm_metrics": list(self.llm_metrics)}


REXRANK_SET = MetricSet(REXRANK_METRICS, REXRANK_LLM_METRICS, "ReXrank's metric set")

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*")


def parse_duration(value, *, setting: str, where: str) -> float:
    """Seconds of a duration setting (the publication slot, the dispatcher's Job timeout and
    target wall): a positive number of seconds, or "90s", "15m", "1.5h", "1d". `setting` and
    `where` (the file or flag it was read from) name it in the error."""
    seconds = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and (match := _DURATION.fullmatch(value)):
        seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        raise StoreError(f"{where}: {setting} {value!r} is not a duration; give positive seconds (3600) or a "
                         "duration such as \"15m\", \"1h\", \"1d\"")
    return seconds


def checked_set(metrics, llm_metrics=(), *, origin: str) -> MetricSet:
    """A metric set with every name checked (unknown names, duplicates, LLM metrics in the
    wrong part are errors naming `origin`)."""
    from rexrank.metrics.llm_common import LLM_METRICS
    from rexrank.metrics.registry import parse_metric_list

    try:
        names = parse_metric_list(list(metrics)) if metrics else []
        llm = parse_metric_list(list(llm_metrics)) if llm_metrics else []
    except RexrankError as exc:
        raise StoreError(f"{origin}: {exc}") from None
    both = set(names) & set(llm)
    if both:
        raise StoreError(f"{origin}: {sorted(both)} listed both as metrics and as llm_metrics")
    not_llm = [n for n in llm if n not in LLM_METRICS]
    if not_llm:
        raise StoreError(f"{origin}: llm_metrics {not_llm} are not LLM-judged metrics ({', '.join(LLM_METRICS)})")
    if not names and not llm:
        raise StoreError(f"{origin}: the metric set is empty")
    return MetricSet(tuple(names), tuple(llm), origin)


def read_config(store) -> dict:
    data = store.requests.read_optional(store.requests.snapshot(), R.CONFIG_FILE)
    if data is None:
        return {}
    try:
        config = json.loads(data)
    except ValueError as exc:
        raise StoreError(f"{store.name}: {R.CONFIG_FILE} is not valid JSON ({exc}); fix or remove it") from None
    if not isinstance(config, dict):
        raise StoreError(f"{store.name}: {R.CONFIG_FILE} must hold a JSON object")
    return config


def recorded_set(store) -> MetricSet | None:
    """The metric set the store records, checked; None if it records none."""
    config = read_config(store)
    if "metrics" not in config and "llm_metrics" not in config:
        return None
    return checked_set(config.get("metrics") or [], config.get("llm_metrics") or [],
                       origin=f"the metric set recorded in {store.name}/{R.CONFIG_FILE}")


def record_set(store, metric_set: MetricSet, *, only_if_absent: bool = False) -> MetricSet:
    """Record `metric_set` as the store's (keeping its other settings); with
    `only_if_absent`, keep a set already recorded (two workers starting at once agree on
    the first one written). Returns the set the store now records."""
    chosen: list[MetricSet] = []

    def decide(snap: Snapshot):
        data = store.requests.read_optional(snap, R.CONFIG_FILE)
        config = json.loads(data) if data else {}
        if only_if_absent and ("metrics" in config or "llm_metrics" in config):
            chosen.append(checked_set(config.get("metrics") or [], config.get("llm_metrics") or [],
                                      origin=f"the metric set recorded in {store.name}/{R.CONFIG_FILE}"))
            return None
        chosen.append(metric_set)
        config.update(metric_set.to_json())
        return {R.CONFIG_FILE: (json.dumps(config, indent=2) + "\n").encode()}, "record the metric set", None

    transact(store.requests, decide)
    return chosen[-1]


APPROVED_KEY = "approved_submitters"


def approved_submitters(store, test_set: str) -> list[str] | None:
    """The submitters the store's config approves for `test_set`; None if it is open to all."""
    listed = read_config(store).get(APPROVED_KEY)
    if listed is None:
        return None
    where = f"{store.name}/{R.CONFIG_FILE}: {APPROVED_KEY}"
    if not isinstance(listed, dict):
        raise StoreError(f"{where} must be an object mapping test set names to lists of submitters")
    names = listed.get(test_set)
    if names is None:
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise StoreError(f"{where}[{test_set!r}] must be a list of submitter names")
    return names
