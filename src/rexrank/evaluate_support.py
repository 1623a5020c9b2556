"""What every `metrics/<name>/<name>.py` evaluate module delegates to, so the modules stay thin.

Output contract of every module's `compute`: the corpus value under the metric's name,
the primary per-study scores (input order) under "per_study", every other corpus value
under its own key, and every other per-study column under "per_study_columns".
"""
from __future__ import annotations

import math
from typing import Any

from rexrank.metrics.registry import get_metric, metric_class


# where the official computation of a metric lives, when it is not CXR-Report-Metric
OFFICIAL_CODE = {name: "https://github.com/jbdel/RadEval" for name in ("rouge", "temporal_f1", "srr_bert")}


def metric_info(name: str):
    import datasets
    import evaluate

    from rexrank.evaluate_inputs import inputs_description

    cls = metric_class(name)
    return evaluate.MetricInfo(
        description=cls.description,
        citation=cls.citation,
        inputs_description=inputs_description(name),
        features=datasets.Features({"predictions": datasets.Value("string"), "references": datasets.Value("string")}),
        homepage="https://rexrank.ai",
        codebase_urls=[OFFICIAL_CODE.get(name, "https://github.com/rajpurkarlab/CXR-Report-Metric")],
    )


def _plain(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def compute(name: str, predictions, references, **options) -> dict[str, Any]:
    metric = get_metric(name, **options)
    result = metric.score(list(predictions), list(references))
    out: dict[str, Any] = {name: _plain(result.value), "per_study": [_plain(float(v)) for v in result.primary]}
    for key, value in result.corpus.items():
        if key != name:
            out[key] = _plain(value)
    extra_columns = {k: [_plain(float(x)) for x in v] for k, v in result.per_study.items() if k != name}
    if extra_columns:
        out["per_study_columns"] = extra_columns
    if result.details:
        out["details"] = result.details
    if result.failures:
        out["failures"] = {str(k): v for k, v in result.failures.items()}
    out["config"] = metric.provenance()
    return out
