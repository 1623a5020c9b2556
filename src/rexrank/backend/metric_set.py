"""Which metrics a worker scores: its own `--metrics`, else the store's recorded set, else
ReXrank's (recorded in the store, so that every later worker and every reader of the
store sees it). See rexrank.store.config for the two parts of a set.

An LLM metric of the store's set runs only where this worker has an LLM configured for
it: an endpoint or local weights given explicitly. Without one the worker does not fail
every request, and does not drop the metric silently either: it logs the reason at
start, and every result it writes names the metric under `not_scored` (the request's
notes say the same to the submitter).
"""
from __future__ import annotations

import logging
import os
from typing import Sequence

from rexrank.errors import MetricError
from rexrank.store.config import REXRANK_SET, MetricSet, record_set, recorded_set

log = logging.getLogger("rexrank.backend")

LLM_OPTIONS = ("base_url", "model", "model_path", "backend")
LLM_ENVIRONMENT = ("REXRANK_LLM_BASE_URL", "REXRANK_LLM_MODEL", "REXRANK_LLM_BACKEND", "OPENAI_BASE_URL")


def worker_metric_set(store, metrics: Sequence[str] | str | None) -> MetricSet:
    from rexrank.metrics.registry import parse_metric_list

    if metrics is not None:
        return MetricSet(tuple(parse_metric_list(metrics)), (), "this worker's --metrics")
    recorded = recorded_set(store)
    if recorded is not None:
        return recorded
    chosen = record_set(store, REXRANK_SET, only_if_absent=True)
    if chosen == REXRANK_SET:
        log.info("%s records no metric set: recorded ReXrank's (%s; LLM-judged where an LLM is configured: %s)",
                 store.name, ", ".join(REXRANK_SET.metrics), ", ".join(REXRANK_SET.llm_metrics))
    return chosen


def llm_problem(name: str, options: dict) -> str | None:
    """Why the LLM-judged metric `name` cannot run on this worker, or None if it can."""
    from rexrank.metrics.registry import get_metric

    if not any(options.get(k) for k in LLM_OPTIONS) and not any(os.environ.get(v) for v in LLM_ENVIRONMENT):
        return (f"no LLM is configured for it on this backend (an endpoint: REXRANK_LLM_BASE_URL and "
                f"REXRANK_LLM_MODEL, or local weights: --metric-option {name}.model_path=DIR)")
    try:
        get_metric(name, **options)
    except MetricError as exc:
        return str(exc)
    return None


def runnable_metrics(metric_set: MetricSet, options: dict[str, dict]) -> tuple[list[str], dict[str, str]]:
    """(metrics this worker scores, {LLM metric of the set it cannot run: why}). A required
    metric that cannot even be set up (bad options, an LLM metric given without an LLM)
    raises MetricError now, naming it, instead of failing every request later."""
    from rexrank.metrics.registry import get_metric

    for name in metric_set.metrics:
        try:
            get_metric(name, **options.get(name, {}))
        except MetricError as exc:
            raise MetricError(f"{name} (in {metric_set.origin or 'the metric set'}) cannot run on this worker: {exc}") from None
    skipped = {}
    for name in metric_set.llm_metrics:
        why = llm_problem(name, options.get(name, {}))
        if why is not None:
            skipped[name] = why
            log.warning("%s is in the store's metric set but is not scored by this worker: %s; results will say so",
                        name, why)
    return [*metric_set.metrics, *(m for m in metric_set.llm_metrics if m not in skipped)], skipped
