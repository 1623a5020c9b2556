"""SembScore ("CheXbert vector similarity", s_emb) as ReXrank computes it, plus the CheXbert
labels and CheXbert F1 of the same run (reference metrics_nonllm.md §3).

CXR-Report-Metric runs CheXbert's `encode.py` without `-l`, so it keeps the last-layer
[CLS] vector (768-d) of each report, not the label vector, and scores each study with the
plain cosine of prediction and reference vectors. Preprocessing: strip, newline -> space,
collapse whitespace, strip; bert-base-uncased WordPiece with [CLS]/[SEP]; over 512 ids ->
first 511 + [SEP]. Reference-side [CLS] vectors and labels are cached on disk.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from rexrank.metrics.base import Metric, MetricResult, StudyRows


class SembScore(Metric):
    name = "sembscore"
    version = "1"
    description = (
        "SembScore as in CXR-Report-Metric / ReXrank: cosine similarity of the CheXbert last-layer "
        "[CLS] embeddings of generated and reference report; also CheXbert labels and CheXbert F1."
    )
    citation = (
        "@inproceedings{smit2020chexbert, title={Combining Automatic Labelers and Expert Annotations for Accurate"
        " Radiology Report Labeling Using BERT}, author={Smit, Akshay and Jain, Saahil and Rajpurkar, Pranav and"
        " Pareek, Anuj and Ng, Andrew Y. and Lungren, Matthew P.}, booktitle={EMNLP}, year={2020}}\n"
        "@article{yu2023evaluating, title={Evaluating progress in automatic chest X-ray radiology report generation},"
        " author={Yu, Feiyang and others}, journal={Patterns}, year={2023}}"
    )
    higher_is_better = True

    def __init__(
        self,
        checkpoint_path: str | None = None,
        revision: str | None = None,
        tokenizer: str | None = None,
        num_attention_heads: int | None = None,
        batch_size: int = 32,
        device: str | None = None,
        cache: bool = True,
        cache_dir: str | None = None,
        labels: bool = True,
        progress: bool = True,
        run_context=None,
    ):
        self.options = dict(
            checkpoint_path=checkpoint_path,
            revision=revision,
            tokenizer=tokenizer,
            num_attention_heads=num_attention_heads,
            batch_size=batch_size,
            device=device,
        )
        self.progress = progress
        self.cache = cache
        self.cache_dir = cache_dir
        self.labels = labels
        self.run_context = run_context  # a scoring run's shared outputs (metrics.run_context)
        self._model = None

    @property
    def model(self):
        if self._model is None:
            from rexrank.models.chexbert import CheXbert
            from rexrank.models.shared import local_fingerprint, shared_model

            key = (*self._model_key(), local_fingerprint(self.options["checkpoint_path"]))
            self._model = shared_model(key, lambda: CheXbert(**self.options))
        return self._model

    def _model_key(self) -> tuple:
        """Everything that shapes the outputs, float rounding (batch size, device) included."""
        return ("chexbert", tuple(sorted(self.options.items())))

    def run_key(self):
        return (self.name, self._model_key(), self.cache, self.cache_dir)  # labels: details only

    def config(self) -> dict[str, Any]:
        from rexrank.models.chexbert import CHEXBERT_FILE, CHEXBERT_REPO, CHEXBERT_REVISION, TOKENIZER_REPO, TOKENIZER_REVISION

        return {
            "checkpoint": {
                "repo_id": CHEXBERT_REPO,
                "filename": CHEXBERT_FILE,
                "revision": self.options["revision"] or CHEXBERT_REVISION,
                "path": self.options["checkpoint_path"],
            },
            "tokenizer": self.options["tokenizer"] or f"{TOKENIZER_REPO}@{TOKENIZER_REVISION}",
            "embedding": "last-layer [CLS]",
            "label_mode": "rrg",
        }

    def _reference_cache(self):
        from rexrank.refcache import ReferenceCache

        return ReferenceCache(f"chexbert/v1/{self.model.identity}", self.cache_dir, enabled=self.cache)

    def _encode_texts(self, texts: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        return self.model.encode(texts, progress=self.progress)

    def _score(self, predictions: list[str], references: list[str]) -> StudyRows:
        from rexrank.metrics.run_context import shared_pairs

        hyps, refs = shared_pairs(self, self._reference_cache, predictions, references, self._encode_texts)
        scores = np.empty(len(predictions))
        failures: dict[int, str] = {}
        for i, ((hyp, _), (ref, _)) in enumerate(zip(hyps, refs)):
            norm = float(np.linalg.norm(hyp)) * float(np.linalg.norm(ref))
            if norm == 0.0:  # official code divides by zero (NaN); say so instead
                scores[i] = np.nan
                failures[i] = "zero-norm CheXbert embedding"
            else:
                scores[i] = float(np.dot(hyp.astype(np.float64), ref.astype(np.float64))) / norm
        side = {}
        if self.labels:  # each study's 14 CheXbert labels: the corpus F1 is computed from them
            side = {"chexbert_predictions": _label_matrix([labels for _, labels in hyps]),
                    "chexbert_references": _label_matrix([labels for _, labels in refs])}
        return self._rows({self.name: scores}, side=side, failures=failures)

    @classmethod
    def aggregate(cls, rows: StudyRows) -> MetricResult:
        """The mean SembScore, and with labels the CheXbert F1 of every study's labels."""
        result = super().aggregate(rows)
        if "chexbert_predictions" in rows.side:
            from rexrank.metrics.chexbert import chexbert_f1
            from rexrank.models.chexbert import CLASSES, CONDITIONS

            pred_labels = _label_matrix(rows.side["chexbert_predictions"])
            ref_labels = _label_matrix(rows.side["chexbert_references"])
            f1 = chexbert_f1(pred_labels, ref_labels)
            result.details = {
                **f1["summary"],
                "chexbert_report_all": f1["report_all"],
                "chexbert_report_5": f1["report_5"],
                "chexbert_label_mode": f1["mode"],
                "chexbert_labels": {
                    "conditions": list(CONDITIONS),
                    "classes": list(CLASSES),
                    "predictions": pred_labels.tolist(),
                    "references": ref_labels.tolist(),
                },
            }
        return result


def _label_matrix(rows) -> np.ndarray:
    """[n, 14] CheXbert labels (class indices), one row per study."""
    return np.stack([np.asarray(r) for r in rows]) if len(rows) else np.zeros((0, 14), dtype=np.int8)
