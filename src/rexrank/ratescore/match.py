"""RaTEScore's entity matching score (RaTEScore 0.6.0 `utils.compute` and
`RaTEScore.compute_score`, MIT; reference metrics_nonllm.md §6 steps 5-6).

S(A -> B): every entity a of A is matched to its most cosine-similar entity b* of B;
S = sum(cos(a, b*) * W[type a, type b*] * penalty) / sum(W[type a, type b*]), where the
penalty is the negation weight for polarity-flipping type pairs (and is not in the
denominator). RaTEScore is the harmonic mean of both directions; 0.5 when either report
has no entity; 0 when both directions are 0.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from rexrank.ratescore.affinity import Affinity

NO_ENTITY_SCORE = 0.5


def _unit_rows(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    # torch.nn.functional.normalize clamps the norm at 1e-12; same here
    return x / np.maximum(norms, 1e-12)


def directional_score(
    a_emb: np.ndarray, b_emb: np.ndarray, a_types: Sequence[str], b_types: Sequence[str], affinity: Affinity
) -> float:
    sims = _unit_rows(a_emb) @ _unit_rows(b_emb).T
    best = np.argmax(sims, axis=1)  # first maximum on ties
    numerator = 0.0
    denominator = 0.0
    for i, j in enumerate(best):
        a_type, b_type = a_types[i], b_types[j]
        w = affinity.weight(a_type, b_type)
        numerator += float(sims[i, j]) * w * affinity.penalty(a_type, b_type)
        denominator += w
    return numerator / denominator if denominator != 0 else 0.0


def rate_score(
    pred_emb: np.ndarray,
    pred_types: Sequence[str],
    ref_emb: np.ndarray,
    ref_types: Sequence[str],
    affinity: Affinity,
) -> float:
    if len(pred_types) == 0 or len(ref_types) == 0:
        return NO_ENTITY_SCORE
    ref_to_pred = directional_score(ref_emb, pred_emb, ref_types, pred_types, affinity)
    pred_to_ref = directional_score(pred_emb, ref_emb, pred_types, ref_types, affinity)
    if ref_to_pred + pred_to_ref == 0:
        return 0.0
    return 2 * ref_to_pred * pred_to_ref / (ref_to_pred + pred_to_ref)
