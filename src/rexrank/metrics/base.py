"""The metric protocol every rexrank metric implements.

A metric takes predictions and references (same length, same order) and returns per-study
scores plus corpus values. The corpus value is the mean of the per-study primary score
unless the official metric defines it otherwise (RadCliQ: 1 / mean).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from rexrank.errors import MetricError
from rexrank.models.advice import AdvisedError, WeightsUnavailable


@dataclass
class MetricResult:
    """What a metric returns.

    per_study: column name -> one float per study, in input order. The metric's primary
        column is named after the metric. NaN marks a study that could not be scored
        (LLM failures); such studies are listed in `failures`.
    corpus: corpus-level values (the primary one is named after the metric).
    details: anything else worth reporting (label F1 tables, token cost, ...).
    failures: study position -> reason, for studies that could not be scored.
    """

    name: str
    per_study: dict[str, np.ndarray]
    corpus: dict[str, float]
    details: dict[str, Any] = field(default_factory=dict)
    failures: dict[int, str] = field(default_factory=dict)

    @property
    def primary(self) -> np.ndarray:
        return self.per_study[self.name]

    @property
    def value(self) -> float:
        return self.corpus[self.name]


class Metric:
    """Base class. Subclasses set `name`, `version`, `description`, `citation`,
    `higher_is_better`, and implement `_score`."""

    name: ClassVar[str]
    version: ClassVar[str] = "1"
    description: ClassVar[str] = ""
    citation: ClassVar[str] = ""
    higher_is_better: ClassVar[bool] = True

    def config(self) -> dict[str, Any]:
        """Everything that changes the numbers (checkpoints, revisions, options)."""
        return {}

    def provenance(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "config": self.config()}

    def run_key(self) -> Any:
        """Equal for two instances that give identical per-study values on the same pairs
        (a scoring run then reuses one's result for the other, see metrics.run_context).
        Model metrics add what changes float rounding: batching and device."""
        return repr(self.provenance())

    def score(self, predictions: Sequence[str], references: Sequence[str]) -> MetricResult:
        predictions, references = check_pairs(predictions, references, metric=self.name)
        try:
            result = self._score(predictions, references)
        except AdvisedError as exc:
            exc.note_metric(self.name)  # the advice then names this metric's option (radcliq.sembscore_options=...)
            if isinstance(exc, WeightsUnavailable) and exc.inventory is None:
                from rexrank.models import weights

                exc.inventory = weights  # so the advice can name `rexrank weights download <metric>`
            raise
        for column, values in result.per_study.items():
            if len(values) != len(predictions):
                raise MetricError(
                    f"{self.name}: column {column!r} has {len(values)} scores for {len(predictions)} studies"
                )
        return result

    def _score(self, predictions: list[str], references: list[str]) -> MetricResult:  # pragma: no cover
        raise NotImplementedError

    # helper for the common case: corpus = mean of each per-study column
    def _result_from_columns(
        self, columns: Mapping[str, Sequence[float]], details: dict | None = None, failures: dict | None = None
    ) -> MetricResult:
        per_study = {k: np.asarray(v, dtype=np.float64) for k, v in columns.items()}
        corpus = {k: nanmean_or_nan(v) for k, v in per_study.items()}
        return MetricResult(self.name, per_study, corpus, details or {}, failures or {})


def nanmean_or_nan(values: np.ndarray) -> float:
    kept = values[~np.isnan(values)]
    return float(kept.mean()) if kept.size else math.nan


def check_pairs(predictions: Sequence[Any], references: Sequence[Any], *, metric: str) -> tuple[list[str], list[str]]:
    """Same length, strings only. Nothing is coerced silently: None/NaN is an error."""
    predictions = list(predictions)
    references = list(references)
    if len(predictions) != len(references):
        raise MetricError(
            f"{metric}: got {len(predictions)} predictions but {len(references)} references; they must pair up"
        )
    for label, texts in (("prediction", predictions), ("reference", references)):
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise MetricError(
                    f"{metric}: {label} at position {i} is {type(text).__name__} ({text!r}), expected a string"
                )
    return predictions, references
