"""Metric options given on the command line: `METRIC.KEY=VALUE`, e.g.
`sembscore.checkpoint_path=/data/chexbert.pth` or `bertscore.idf=true`."""
from __future__ import annotations

import inspect
import json
from typing import Iterable

from rexrank.errors import MetricError
from rexrank.metrics.registry import METRICS, metric_class
from rexrank.suggest import did_you_mean


def parse_metric_options(items: Iterable[str] | None, metrics: Iterable[str]) -> dict[str, dict]:
    """{metric: {key: value}}. Values are read as JSON when they parse (true, 3, 0.5,
    [1, 2], null), otherwise kept as text (paths)."""
    chosen = set(metrics)
    options: dict[str, dict] = {}
    for item in items or ():
        spec, sep, raw = item.partition("=")
        metric, dot, key = spec.partition(".")
        if not sep or not dot or not metric or not key:
            raise MetricError(f"--metric-option {item!r}: expected METRIC.KEY=VALUE, e.g. sembscore.checkpoint_path=/data/chexbert.pth")
        if metric not in METRICS:
            raise MetricError(f"--metric-option {item!r}: unknown metric {metric!r}{did_you_mean(metric, METRICS)}")
        if metric not in chosen:
            raise MetricError(f"--metric-option {item!r}: metric {metric!r} is not among --metrics ({', '.join(sorted(chosen))})")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        if key in options.setdefault(metric, {}):
            raise MetricError(f"--metric-option: {metric}.{key} given twice")
        options[metric][key] = value
    return options


def merge_options(*layers: dict[str, dict]) -> dict[str, dict]:
    """Later layers win, per metric and key."""
    merged: dict[str, dict] = {}
    for layer in layers:
        for metric, opts in layer.items():
            merged.setdefault(metric, {}).update(opts)
    return merged


def device_options(metrics: Iterable[str], device: str | None) -> dict[str, dict]:
    """`--device`: {metric: {"device": device}} for every chosen metric that runs a torch
    model (LLM metrics take it through their settings). The device is checked first, so
    `--device cuda` on a machine without one fails before any test set is read."""
    chosen = [name for name in metrics if _takes_device(name)] if device else []
    if not chosen:
        return {}
    check_device(device)
    return {name: {"device": device} for name in chosen}


def check_device(device: str) -> None:
    """Fail now if `device` cannot run the model metrics (unknown, no CUDA, no torch)."""
    from rexrank.models.checkpoints import pick_device

    try:
        pick_device(device)
    except ImportError as exc:
        raise MetricError(f"--device {device}: the model metrics need torch ({exc}); pip install 'rexrank[models]'") from None


def _takes_device(name: str) -> bool:
    parameters = inspect.signature(metric_class(name)).parameters
    if "device" in parameters:
        return True
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        from rexrank.llm.settings import LLMSettings

        return "device" in LLMSettings.__dataclass_fields__
    return False
