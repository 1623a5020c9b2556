"""Name -> metric class, imported lazily so that listing metrics needs no torch."""
from __future__ import annotations

import importlib
from typing import Any

from rexrank.errors import MetricError
from rexrank.suggest import did_you_mean, did_you_mean_all

# name -> ("module:Class", extra that provides its dependencies)
METRICS: dict[str, tuple[str, str]] = {
    "bleu2": ("rexrank.metrics.bleu2:Bleu2", "core"),
    "rouge": ("rexrank.metrics.rouge:Rouge", "core"),
    "temporal_f1": ("rexrank.metrics.temporal_f1:TemporalF1", "models"),  # Stanza's radiology NER (ner='keywords': none)
    "bertscore": ("rexrank.metrics.bertscore:BertScore", "models"),
    "sembscore": ("rexrank.metrics.sembscore:SembScore", "models"),
    "radcliq": ("rexrank.metrics.radcliq:RadCliQ", "models"),
    "radgraph": ("rexrank.metrics.radgraph:RadGraph", "models"),
    "ratescore": ("rexrank.metrics.ratescore:RaTEScore", "models"),
    "srr_bert": ("rexrank.metrics.srr_bert:SRRBert", "models"),
    "green": ("rexrank.metrics.green:Green", "models"),  # transformers by default; openai for an endpoint
    "crimson": ("rexrank.metrics.crimson:Crimson", "models"),  # transformers by default; openai for an endpoint
    "fineradscore": ("rexrank.metrics.fineradscore:FineRadScore", "llm"),
    "spec_cxr": ("rexrank.metrics.spec_cxr:SpecCxr", "llm"),
}


def available_metrics() -> list[str]:
    return sorted(METRICS)


def metric_class(name: str):
    try:
        target, extra = METRICS[name]
    except KeyError:
        raise MetricError(f"unknown metric {name!r}{did_you_mean(name, METRICS)}; available: "
                          f"{', '.join(available_metrics())}") from None
    module_name, cls_name = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        hint = f" (install it with: pip install 'rexrank[{extra}]')" if extra != "core" else ""
        raise MetricError(f"metric {name!r} cannot be imported: {exc}{hint}") from exc
    return getattr(module, cls_name)


def get_metric(name: str, **options: Any):
    """An instance of the metric `name`, configured with `options`."""
    cls = metric_class(name)
    try:
        return cls(**options)
    except TypeError as exc:
        raise MetricError(f"metric {name!r}: bad options {options}: {exc}") from exc


def parse_metric_list(spec: str | list[str] | None, default: tuple[str, ...] = ("bleu2",)) -> list[str]:
    """'bleu2,radcliq' -> ['bleu2', 'radcliq'], checking every name."""
    if spec is None:
        names = list(default)
    elif isinstance(spec, str):
        names = [s.strip() for s in spec.split(",") if s.strip()]
    else:
        names = list(spec)
    if not names:
        raise MetricError("no metric given")
    unknown = [n for n in names if n not in METRICS]
    if unknown:
        raise MetricError(f"unknown metric(s) {', '.join(map(repr, unknown))}{did_you_mean_all(unknown, METRICS)}; "
                          f"available: {', '.join(available_metrics())}")
    if len(set(names)) != len(names):
        raise MetricError(f"metric list has duplicates: {names}")
    return names
