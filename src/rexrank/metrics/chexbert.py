"""CheXbert label F1 ("F1CheXbert"), computed in numpy (reference metrics_nonllm.md §3.3).

f1chexbert 0.0.2 `forward(hyps, refs)` in mode "rrg": a label counts as present when CheXbert
says positive *or uncertain*; blank and negative count as absent. It then runs sklearn's
`classification_report` on the 14-column multilabel indicator matrices ("all") and on the 5
competition labels (Cardiomegaly, Edema, Consolidation, Atelectasis, Pleural Effusion), with
zero_division -> 0. Our numbers follow sklearn's definitions (checked against
`sklearn.metrics.classification_report` in the tests) without depending on sklearn, whose
private `_check_targets` broke f1chexbert on scikit-learn >= 1.8:
- per label: P = tp / predicted, R = tp / true, F1 = 2 tp / (true + predicted), 0 when a
  denominator is 0; support = true count;
- micro: the same over summed counts; macro: unweighted mean over labels; weighted: mean
  weighted by support (plain mean when no label has support);
- accuracy (5): exact match of all 5 labels per study, averaged (sklearn accuracy_score).
"""
from __future__ import annotations

import numpy as np

from rexrank.models.chexbert import CONDITIONS

POSITIVE, UNCERTAIN = 1, 3
FIVE = ("Cardiomegaly", "Edema", "Consolidation", "Atelectasis", "Pleural Effusion")
FIVE_INDEX = tuple(CONDITIONS.index(c) for c in FIVE)  # (1, 4, 5, 7, 9)


def binarize_rrg(labels: np.ndarray) -> np.ndarray:
    """f1chexbert mode "rrg": positive and uncertain -> 1, blank and negative -> 0."""
    labels = np.asarray(labels)
    return np.isin(labels, (POSITIVE, UNCERTAIN)).astype(np.int64)


def _divide(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    numerator = np.asarray(numerator, dtype=np.float64)
    denominator = np.asarray(denominator, dtype=np.float64)
    out = np.zeros_like(numerator)
    np.divide(numerator, denominator, out=out, where=denominator != 0)
    return out


def classification_report(y_true: np.ndarray, y_pred: np.ndarray, names: tuple[str, ...]) -> dict:
    """Per-label and micro/macro/weighted precision, recall, f1-score, support of 0/1
    indicator matrices [n_studies, n_labels], keyed like sklearn's output_dict."""
    y_true = np.asarray(y_true, dtype=bool)
    y_pred = np.asarray(y_pred, dtype=bool)
    if y_true.shape != y_pred.shape or y_true.ndim != 2 or y_true.shape[1] != len(names):
        raise ValueError(f"label matrices must both be [n, {len(names)}], got {y_true.shape} and {y_pred.shape}")
    tp = (y_true & y_pred).sum(axis=0)
    predicted = y_pred.sum(axis=0)
    true = y_true.sum(axis=0)
    precision = _divide(tp, predicted)
    recall = _divide(tp, true)
    f1 = _divide(2 * tp, true + predicted)
    report: dict = {
        name: {"precision": float(p), "recall": float(r), "f1-score": float(f), "support": int(s)}
        for name, p, r, f, s in zip(names, precision, recall, f1, true)
    }
    total = int(true.sum())
    report["micro avg"] = {
        "precision": float(_divide(tp.sum(), predicted.sum())),
        "recall": float(_divide(tp.sum(), true.sum())),
        "f1-score": float(_divide(2 * tp.sum(), true.sum() + predicted.sum())),
        "support": total,
    }
    report["macro avg"] = {
        "precision": float(precision.mean()),
        "recall": float(recall.mean()),
        "f1-score": float(f1.mean()),
        "support": total,
    }
    weights = true if total else None  # sklearn: all-zero weights -> unweighted mean
    report["weighted avg"] = {
        "precision": float(np.average(precision, weights=weights)),
        "recall": float(np.average(recall, weights=weights)),
        "f1-score": float(np.average(f1, weights=weights)),
        "support": total,
    }
    return report


def chexbert_f1(pred_labels: np.ndarray, ref_labels: np.ndarray) -> dict:
    """CheXbert F1 figures from 14-way label matrices (CLASSES indices, [n, 14])."""
    y_pred = binarize_rrg(pred_labels)
    y_true = binarize_rrg(ref_labels)
    cr = classification_report(y_true, y_pred, CONDITIONS)
    five = list(FIVE_INDEX)
    cr5 = classification_report(y_true[:, five], y_pred[:, five], FIVE)
    exact5 = (y_true[:, five] == y_pred[:, five]).all(axis=1)
    summary = {}
    for scope, report in (("all", cr), ("5", cr5)):
        for avg in ("micro", "macro", "weighted"):
            summary[f"chexbert_{scope}_{avg}_f1"] = report[f"{avg} avg"]["f1-score"]
    summary["chexbert_5_accuracy"] = float(exact5.mean()) if exact5.size else float("nan")
    return {"summary": summary, "report_all": cr, "report_5": cr5, "mode": "rrg (positive and uncertain -> 1)"}
