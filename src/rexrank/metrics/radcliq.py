"""RadCliQ-v1 (and v0) from texts: BLEU-2, BERTScore, SembScore and RadGraph-F1 computed as
CXR-Report-Metric does, then combined with the official coefficients
(`rexrank.metrics.radcliq_formula`, reference metrics_nonllm.md §5).

Each component metric embeds/annotates each distinct text once and caches the reference
side. In a scoring run (`run_context`), a component already scored in the run with the same
settings is not scored again: its per-study values are taken as they are; and a component
scored here lends its model outputs to the same metric later in the run. BERTScore uses the official CXR-Report-Metric setting (idf off, config.USE_IDF=False);
RadEval's RadCliQ turns idf on: pass bertscore_options={"idf": True} to reproduce RadEval.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from rexrank.errors import MetricError
from rexrank.metrics.base import Metric, MetricResult, ShardRule, StudyRows
from rexrank.metrics.radcliq_formula import radcliq_from_components

COMPONENTS = ("radgraph", "bertscore", "sembscore", "bleu2")


class RadCliQ(Metric):
    name = "radcliq"
    version = "1"
    description = (
        "RadCliQ-v1 as in CXR-Report-Metric / ReXrank: a linear combination of RadGraph-F1, BERTScore and "
        "SembScore (and BLEU-2, whose v1 weight is ~0) fitted to radiologists' error counts; lower is better. "
        "ReXrank ranks by 1 / mean RadCliQ-v1 (`radcliq_v1_inv`). RadCliQ-v0 is reported too."
    )
    citation = (
        "@article{yu2023evaluating, title={Evaluating progress in automatic chest X-ray radiology report generation},"
        " author={Yu, Feiyang and Endo, Mark and Krishnan, Rayan and others}, journal={Patterns}, year={2023}}"
    )
    higher_is_better = False

    def __init__(
        self,
        bertscore_options: dict | None = None,
        sembscore_options: dict | None = None,
        radgraph_options: dict | None = None,
        device: str | None = None,
        cache: bool = True,
        cache_dir: str | None = None,
        progress: bool = True,
        run_context=None,
    ):
        from rexrank.metrics.registry import get_metric

        shared = {"cache": cache, "cache_dir": cache_dir, "progress": progress}
        if device is not None:
            shared["device"] = device
        if run_context is not None:
            shared["run_context"] = run_context
        options = {
            "bertscore": {**shared, **(bertscore_options or {})},
            "sembscore": {**shared, "labels": False, **(sembscore_options or {})},
            "radgraph": {**shared, **(radgraph_options or {})},
            "bleu2": {},
        }
        self.components = {name: get_metric(name, **options[name]) for name in COMPONENTS}
        self.run_context = run_context
        self._producers: dict = {}  # component -> the metric whose result was used (for provenance)

    def config(self) -> dict[str, Any]:
        return {
            "coefficients": "CXR-Report-Metric pickles (normalizer.pkl, composite_metric_model.pkl, radcliq-v1.pkl)",
            "components": {name: self._producers.get(name, metric).provenance() for name, metric in self.components.items()},
        }

    @classmethod
    def shard_rule(cls, options: dict) -> ShardRule:
        """The components' rules under their options: a cut each of them allows."""
        from rexrank.metrics.registry import metric_class

        keys = {"bertscore": "bertscore_options", "sembscore": "sembscore_options", "radgraph": "radgraph_options"}
        rules = {name: metric_class(name).shard_rule(dict(options.get(keys.get(name, "")) or {})) for name in COMPONENTS}
        refusals = [f"{name}: {rule.refusal}" for name, rule in rules.items() if rule.refusal]
        if refusals:
            return ShardRule(refusal="; ".join(refusals))
        return ShardRule(align=math.lcm(*(rule.align for rule in rules.values())))

    def _score_part(self, predictions: list[str], references: list[str], start: int, stop: int) -> StudyRows:
        """Each component scores studies [start, stop) as its own run over all the pairs
        scores them (BERTScore's idf counts over every reference)."""
        values: dict[str, np.ndarray] = {}
        failures: dict[int, str] = {}
        reused = []
        part_predictions, part_references = predictions[start:stop], references[start:stop]
        for name, metric in self.components.items():
            earlier = (self.run_context.result_like(metric, part_predictions, part_references)
                       if self.run_context else None)
            if earlier is not None:
                result, self._producers[name] = earlier
                reused.append(name)
            else:
                result = metric.score(predictions, references, part=(start, stop))
                self._producers[name] = metric
            values[name] = result.primary
            for i, why in result.failures.items():
                failures.setdefault(i, f"{name}: {why}")
        parts = dict(radgraph=values["radgraph"], bertscore=values["bertscore"], semb=values["sembscore"], bleu2=values["bleu2"])
        v1 = radcliq_from_components(**parts, version="v1")
        v0 = radcliq_from_components(**parts, version="v0")
        columns = {
            self.name: v1,  # primary: per-study RadCliQ-v1
            f"{self.name}_v0": v0,
            **{f"{self.name}_{name}": values[name] for name in COMPONENTS},
        }
        # which components came from the run: the same in every shard of a request (same metrics, same order)
        return self._rows(columns, failures=failures, settings={"components_from_the_run": reused})

    @classmethod
    def aggregate(cls, rows: StudyRows) -> MetricResult:
        result = super().aggregate(rows)
        reused = rows.settings.get("components_from_the_run")
        if reused:
            result.details = {"components_from_the_run": list(reused)}
        mean_v1 = result.corpus[cls.name]
        if mean_v1 == 0:
            raise MetricError("radcliq: mean RadCliQ-v1 is exactly 0, its inverse is undefined")
        result.corpus[f"{cls.name}_v1_inv"] = 1.0 / mean_v1  # what ReXrank shows
        return result
