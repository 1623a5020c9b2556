"""What one scoring run has already computed, so that no metric of the run computes it again.

A run (`rexrank score`, one backend request) scores the same predictions and references
with several metrics, and RadCliQ needs BLEU-2, BERTScore, SembScore and RadGraph-F1 of
the same pairs, which may be in the run on their own too. The run keeps:
- model outputs, per (model, side, texts): a metric that asks a loaded model for what an
  earlier metric of the run asked it (same model, batching and device, same texts) gets
  those outputs. They are dropped once no metric left in the run can ask for them;
- metric results: RadCliQ takes the per-study values of a component scored earlier in the
  run with the same settings (`Metric.run_key`) instead of scoring it again.
Reuse is exact: what is reused is the output of the same computation, so every per-study
value equals the one a run without sharing gives, bit for bit.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Hashable, Iterable, Sequence

from rexrank.errors import MetricError


def _consumers(name: str) -> set[str]:
    """Metrics that may ask for the model outputs of metric `name`: itself, and the
    metrics that compute it as a component."""
    from rexrank.metrics.radcliq import COMPONENTS

    return {name, "radcliq"} if name in COMPONENTS else {name}


class RunContext:
    def __init__(self, metrics: Iterable[str] = ()):
        self._pending = set(metrics)  # metrics of the run not yet started
        self._outputs: dict[tuple, tuple[set[str], list]] = {}
        self._results: list[tuple[str, Hashable, Sequence[str], Sequence[str], Any, Any]] = []
        self.reused_outputs = 0  # model calls answered from the run (for tests and reports)

    def __repr__(self) -> str:
        return f"RunContext(pending={sorted(self._pending)}, outputs={len(self._outputs)}, results={len(self._results)})"

    # -- model outputs -------------------------------------------------------------------
    def outputs(self, owner: str, model: Hashable, side: Hashable, texts: Sequence[str],
                compute: Callable[[list[str]], list]) -> list:
        """`compute(texts)`, or what it returned earlier in the run for the same model key,
        side and texts. `owner` is the metric whose model this is (for radcliq's
        components, the component's name)."""
        key = (model, side, tuple(texts))
        kept = self._outputs.get(key)
        if kept is not None:
            self.reused_outputs += 1
            return kept[1]
        values = compute(list(texts))
        if len(values) != len(texts):
            raise MetricError(f"{owner}: model returned {len(values)} outputs for {len(texts)} texts")
        consumers = _consumers(owner)
        if consumers & self._pending:  # someone still to come may ask again
            self._outputs[key] = (consumers, values)
        return values

    # -- metric results -------------------------------------------------------------------
    def result_like(self, metric, predictions: Sequence[str], references: Sequence[str]):
        """(result, the metric that produced it) of a metric scored earlier in this run with
        the same run_key on the same pairs, or None."""
        key = metric.run_key()
        for name, other_key, preds, refs, result, producer in self._results:
            if name == metric.name and other_key == key and _same(preds, predictions) and _same(refs, references):
                return result, producer
        return None

    def score(self, metric, predictions: Sequence[str], references: Sequence[str], part: tuple[int, int] | None = None):
        """metric.score(predictions, references, part=part) as a metric of this run (whose
        pairs are the part's, when one is given)."""
        with self._running(metric.name):
            if part is None:
                result = metric.score(predictions, references)
            else:
                result = metric.score(predictions, references, part=part)
                predictions, references = predictions[part[0]:part[1]], references[part[0]:part[1]]
        self._results.append((metric.name, metric.run_key(), predictions, references, result, metric))
        return result

    @contextmanager
    def _running(self, name: str):
        self._pending.discard(name)
        try:
            yield
        finally:
            self._outputs = {k: v for k, v in self._outputs.items() if v[0] & self._pending}


def shared_outputs(run_context: RunContext | None, owner: str, model: Hashable, side: Hashable,
                   texts: Sequence[str], compute: Callable[[list[str]], list]) -> list:
    """`compute(texts)`, shared through the scoring run when the metric is part of one."""
    if run_context is None:
        return compute(list(texts))
    return run_context.outputs(owner, model, side, texts, compute)


def shared_pairs(metric, open_cache: Callable[[], Any], predictions: Sequence[str], references: Sequence[str],
                 compute: Callable[[list[str]], list]) -> tuple[list, list]:
    """(prediction values, reference values) of a model metric (its `run_context`, `name`,
    `_model_key()`, `cache`, `cache_dir`): references from the on-disk reference cache
    (`open_cache()`), every other distinct text of both sides computed in one pass
    (`refcache.references_then_predictions`), shared through the scoring run."""
    from rexrank.refcache import references_then_predictions

    n = len(references)
    side = ("references+predictions", n, metric.cache, metric.cache_dir)
    values = shared_outputs(metric.run_context, metric.name, metric._model_key(), side, [*references, *predictions],
                            lambda texts: references_then_predictions(open_cache(), texts[:n], texts[n:], compute))
    return values[n:], values[:n]


def _same(a: Sequence[str], b: Sequence[str]) -> bool:
    return a is b or list(a) == list(b)
