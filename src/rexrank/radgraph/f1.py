"""Scores from two RadGraph annotations (dicts in radgraph's format, see annotator.py).

1. CXR-Report-Metric / RadCliQ (`radgraph_evaluate_model.py`, MIT; reference §4.1):
   entity set {(tokens, label)}, relation set {((src tokens, src label), (tgt tokens,
   tgt label), relation)}; F1 with test = reference, retrieved = prediction; precision and
   recall are 0 when their denominator is 0 and F1 is 0 when P + R = 0, so two empty sets
   score 0. radgraph_combined = (entity F1 + relation F1) / 2. Case is kept.
2. F1RadGraph rewards of radgraph 0.1.18 (`rewards.py`, MIT; reference §4.2):
   0 when either report has no entity; otherwise F1 over
   - simple:   {(tokens, label)}
   - partial:  (tokens, label) for entities without relations, (tokens, label, True) for
               entities with at least one relation
   - complete: (tokens, label) for entities without relations (case kept), and one
               (tokens.lower(), label, relation, target tokens.lower()) per relation.
   0.1.18 lower-cases only those relation tuples; the unreleased master (commit b5ab8d0)
   lower-cases tokens everywhere, so its scores can differ. We follow 0.1.18.
"""
from __future__ import annotations

from typing import Hashable, Iterable


def entity_set(annotation: dict) -> set[tuple[str, str]]:
    return {(e["tokens"], e["label"]) for e in annotation["entities"].values()}


def relation_set(annotation: dict) -> set[tuple]:
    entities = annotation["entities"]
    out = set()
    for e in entities.values():
        for relation, target in e["relations"]:
            t = entities[target]
            out.add(((e["tokens"], e["label"]), (t["tokens"], t["label"]), relation))
    return out


def set_f1(reference: set, prediction: set) -> float:
    """CXR-Report-Metric `compute_f1(test, retrieved)`."""
    tp = len(reference & prediction)
    precision = tp / len(prediction) if prediction else 0.0
    recall = tp / len(reference) if reference else 0.0
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def combined(prediction: dict, reference: dict) -> tuple[float, float, float]:
    """(entity F1, relation F1, radgraph_combined) as in CXR-Report-Metric."""
    ent = set_f1(entity_set(reference), entity_set(prediction))
    rel = set_f1(relation_set(reference), relation_set(prediction))
    return ent, rel, (ent + rel) / 2


def _simple(annotation: dict) -> set[Hashable]:
    return entity_set(annotation)


def _partial(annotation: dict) -> set[Hashable]:
    return {
        (e["tokens"], e["label"], True) if e["relations"] else (e["tokens"], e["label"])
        for e in annotation["entities"].values()
    }


def _complete(annotation: dict) -> set[Hashable]:
    entities = annotation["entities"]
    out: set[Hashable] = set()
    for e in entities.values():
        if not e["relations"]:
            out.add((e["tokens"], e["label"]))
        for relation, target in e["relations"]:
            out.add((e["tokens"].lower(), e["label"], relation, entities[target]["tokens"].lower()))
    return out


def _reward_f1(hyp: Iterable, ref: Iterable) -> float:
    hyp, ref = set(hyp), set(ref)
    precision = sum(1 for x in hyp if x in ref) / len(hyp) if hyp else 0.0
    recall = sum(1 for x in ref if x in hyp) / len(ref) if ref else 0.0
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def rewards(hypothesis: dict, reference: dict) -> tuple[float, float, float]:
    """(simple, partial, complete) F1RadGraph rewards, radgraph 0.1.18 semantics."""
    if not hypothesis["entities"] or not reference["entities"]:
        return 0.0, 0.0, 0.0
    return tuple(_reward_f1(level(hypothesis), level(reference)) for level in (_simple, _partial, _complete))  # type: ignore[return-value]
