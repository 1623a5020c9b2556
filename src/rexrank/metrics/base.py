"""The metric protocol every rexrank metric implements.

A metric takes predictions and references (same length, same order) and keeps, study by
study, everything its published values come from (`StudyRows`); one function of those rows
(`Metric.aggregate`) computes its corpus values and details. A single run and the merge of a
dispatched request's shards both call it, so a sharded run is a single run by construction.
The corpus value is the mean of the per-study primary score unless the official metric
defines it otherwise (RadCliQ: 1 / mean).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from rexrank.errors import MetricError
from rexrank.models.advice import AdvisedError, WeightsUnavailable


@dataclass
class StudyRows:
    """What a metric keeps of each study: everything `Metric.aggregate` computes its published
    values from. A shard of a dispatched request writes its studies' rows; the merge
    concatenates them (`StudyRows.concat`).

    columns: the published per-study scores (the per-study table), one float per study.
    side: per-study values the corpus values and details need that are not published as
        columns (CheXbert labels, SPEC-CXR's judgements, GREEN's completions): key -> one
        JSON-able value per study (a 2-D array: one row per study).
    failures: study position -> why it has no score.
    settings: what is the same for every study of the run (thresholds, the entity set);
        every shard must have the same.
    tallies: the run's accounting (LLM tokens, cache hits, re-asks): counts, added up over shards.
    """

    columns: dict[str, np.ndarray]
    side: dict[str, Any] = field(default_factory=dict)
    failures: dict[int, str] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    tallies: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.columns = {k: np.asarray(v, dtype=np.float64) for k, v in self.columns.items()}

    def __len__(self) -> int:
        lengths = {len(v) for v in (*self.columns.values(), *self.side.values())}
        if len(lengths) > 1:
            raise MetricError(f"study rows of different lengths: {sorted(lengths)}")
        return lengths.pop() if lengths else 0

    @classmethod
    def concat(cls, parts: Sequence["StudyRows"]) -> "StudyRows":
        """The rows of consecutive parts (shards) as one run's. Raises ValueError when the
        parts cannot be one run's (other columns or settings)."""
        first = parts[0]
        for part in parts[1:]:
            if list(part.columns) != list(first.columns) or list(part.side) != list(first.side):
                raise ValueError(f"parts with other columns: {list(part.columns) + list(part.side)} and "
                                 f"{list(first.columns) + list(first.side)}")
            if part.settings != first.settings:
                raise ValueError("parts run with other settings")
        columns = {k: np.concatenate([p.columns[k] for p in parts]) for k in first.columns}
        side = {k: _concat_side([p.side[k] for p in parts]) for k in first.side}
        failures, offset = {}, 0
        for part in parts:
            failures.update({offset + i: why for i, why in part.failures.items()})
            offset += len(part)
        tallies: dict = {}
        for part in parts:
            tallies = add_tallies(tallies, part.tallies)
        return cls(columns, side, failures, dict(first.settings), tallies)


def _concat_side(values: list) -> Any:
    if all(isinstance(v, np.ndarray) for v in values):
        return np.concatenate(values)
    return [x for v in values for x in v]


def add_tallies(a: dict, b: dict) -> dict:
    """Counts added key by key (nested dicts alike); a value that is not a number must be
    equal on both sides (a price, a note)."""
    out = dict(a)
    for key, value in b.items():
        if key not in out:
            out[key] = value
        elif isinstance(value, dict):
            out[key] = add_tallies(out[key], value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = out[key] + value
        elif out[key] != value:
            raise ValueError(f"tally {key!r} differs between parts: {out[key]!r} and {value!r}")
    return out


@dataclass
class MetricResult:
    """What a metric returns.

    per_study: column name -> one float per study, in input order. The metric's primary
        column is named after the metric. NaN marks a study that could not be scored
        (LLM failures); such studies are listed in `failures`.
    corpus: corpus-level values (the primary one is named after the metric).
    details: anything else worth reporting (label F1 tables, token cost, ...).
    failures: study position -> reason, for studies that could not be scored.
    rows: what all of these were computed from (Metric.aggregate).
    """

    name: str
    per_study: dict[str, np.ndarray]
    corpus: dict[str, float]
    details: dict[str, Any] = field(default_factory=dict)
    failures: dict[int, str] = field(default_factory=dict)
    rows: StudyRows | None = None

    @property
    def primary(self) -> np.ndarray:
        return self.per_study[self.name]

    @property
    def value(self) -> float:
        return self.corpus[self.name]


@dataclass(frozen=True)
class ShardRule:
    """How a metric's studies may be cut into shards (contiguous runs of studies scored apart,
    rexrank.backend.shards): every boundary a multiple of `align` (its batches stay whole),
    or not at all when `refusal` says why."""

    align: int = 1
    refusal: str = ""


class Metric:
    """Base class. Subclasses set `name`, `version`, `description`, `citation`,
    `higher_is_better`, and implement `_score` (and `aggregate` where a corpus value is not
    a column's mean, or the metric has details)."""

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

    def score(self, predictions: Sequence[str], references: Sequence[str], *,
              part: tuple[int, int] | None = None) -> MetricResult:
        """Score the pairs. `part` = (start, stop): only studies [start, stop), as a run over
        all the pairs scores them (one shard of a dispatched request)."""
        predictions, references = check_pairs(predictions, references, metric=self.name)
        start, stop = (0, len(predictions)) if part is None else part
        if not 0 <= start <= stop <= len(predictions):
            raise MetricError(f"{self.name}: part [{start}, {stop}) is outside the {len(predictions)} studies")
        try:
            rows = self._score_part(predictions, references, start, stop)
        except AdvisedError as exc:
            exc.note_metric(self.name)  # the advice then names this metric's option (radcliq.sembscore_options=...)
            if isinstance(exc, WeightsUnavailable) and exc.inventory is None:
                from rexrank.models import weights

                exc.inventory = weights  # so the advice can name `rexrank weights download <metric>`
            raise
        for column, values in (*rows.columns.items(), *rows.side.items()):
            if len(values) != stop - start:
                raise MetricError(
                    f"{self.name}: column {column!r} has {len(values)} scores for {stop - start} studies"
                )
        return self.aggregate(rows)

    def _score_part(self, predictions: list[str], references: list[str], start: int, stop: int) -> StudyRows:
        """Studies [start, stop) of these pairs. By default the studies alone: right for a
        metric whose studies are scored independently or whose batches `shard_rule` keeps whole."""
        return self._score(predictions[start:stop], references[start:stop])

    def _score(self, predictions: list[str], references: list[str]) -> StudyRows:  # pragma: no cover
        raise NotImplementedError

    @classmethod
    def aggregate(cls, rows: StudyRows) -> MetricResult:
        """Everything the metric publishes beyond its per-study scores, from its rows alone:
        here the mean of each column; subclasses add their corpus values and details."""
        corpus = {k: nanmean_or_nan(v) for k, v in rows.columns.items()}
        return MetricResult(cls.name, dict(rows.columns), corpus, {}, dict(rows.failures), rows)

    @classmethod
    def shard_rule(cls, options: dict) -> ShardRule:
        """How a request scored with these options may be cut into shards (any boundary:
        the studies do not share a batch, or share only float rounding within 1e-6)."""
        return ShardRule()

    # helper for the common case
    def _rows(self, columns: Mapping[str, Sequence[float]], *, side: dict | None = None, failures: dict | None = None,
              settings: dict | None = None, tallies: dict | None = None) -> StudyRows:
        return StudyRows(dict(columns), side or {}, failures or {}, settings or {}, tallies or {})


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
