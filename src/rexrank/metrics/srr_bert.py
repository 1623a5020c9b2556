"""SRR-BERT as RadEval computes it (`srrbert`, reference metrics_nonllm.md §7; radeval 2.2.1,
MIT, read, not copied): structured finding labels with their status, from the SRR-BERT
sentence classifier (rexrank.models.srr_bert), compared between each generated report and
its reference.

- per study (RadEval's `multilabel_prf_per_sample`, mean over the labels either report has,
  eps = 1e-8): per label P = tp / (tp + fp + eps), R = tp / (tp + fn + eps),
  F1 = 2tp / (2tp + fp + fn + eps); a study where neither report has a label scores 1;
- corpus (RadEval's aggregate): sklearn `classification_report(reference labels, generated
  labels, zero_division=0)` "weighted avg" precision, recall and F1 over all studies.
The primary per-study column `srr_bert` is the per-study F1 (the leaderboard shows its mean);
the corpus value `srr_bert` is the weighted F1 RadEval reports.
By default (`batching="radeval"`) the sentences are classified as RadEval does: every
sentence of every study, the reference's then the prediction's, study after study, in
batches of 4. A label whose logit sits within float error of the threshold can flip with a
batch's members and padding, so the official labels are those of these batches.
`batching="distinct"` (faster, a named option) classifies each distinct sentence once, in
batches of 32, and keeps the references' labels in the reference cache (keyed by the loaded
files), so a second submission classifies only its own: near-threshold labels may differ.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from rexrank.catalogue import CXR_BERT_GENERAL, SRR_BERT
from rexrank.errors import MetricError
from rexrank.metrics.base import Metric, MetricResult, ShardRule, StudyRows
from rexrank.models.checkpoints import Checkpoint

SAMPLE_EPS = 1e-8
BATCHING = ("radeval", "distinct")
BATCH_SIZE = {"radeval": 4, "distinct": 32}  # RadEval's SRRBert(batch_size=4); the faster option's


def per_study_prf(refs: np.ndarray, hyps: np.ndarray, eps: float = SAMPLE_EPS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-study precision, recall and F1: means over the labels in the union of both reports."""
    refs, hyps = refs.astype(bool), hyps.astype(bool)
    tp = (refs & hyps).astype(np.float64)
    fp = (~refs & hyps).astype(np.float64)
    fn = (refs & ~hyps).astype(np.float64)
    union = refs | hyps
    out = []
    for values in (tp / (tp + fp + eps), tp / (tp + fn + eps), 2 * tp / (2 * tp + fp + fn + eps)):
        # row by row, numpy's mean of the selected values: the official summation order, to the last bit
        out.append(np.array([row[keep].mean() if keep.any() else 1.0 for row, keep in zip(values, union)]))
    return out[0], out[1], out[2]


def weighted_prf(refs: np.ndarray, hyps: np.ndarray) -> tuple[float, float, float]:
    """sklearn's classification_report 'weighted avg' (weights: each label's reference count;
    a label's undefined P, R or F1 counts 0), computed from its definition."""
    refs, hyps = refs.astype(bool), hyps.astype(bool)
    tp = (refs & hyps).sum(axis=0).astype(np.float64)
    predicted = hyps.sum(axis=0).astype(np.float64)
    support = refs.sum(axis=0).astype(np.float64)
    if support.sum() == 0:
        return 0.0, 0.0, 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(predicted > 0, tp / predicted, 0.0)
        recall = np.where(support > 0, tp / support, 0.0)
        f1 = np.where(predicted + support > 0, 2 * tp / (predicted + support), 0.0)
    weights = support / support.sum()
    return float(precision @ weights), float(recall @ weights), float(f1 @ weights)


class SRRBert(Metric):
    name = "srr_bert"
    version = "1"
    description = (
        "SRR-BERT as RadEval computes it: finding labels with their status (163, e.g. 'Edema (Present)') from "
        "the SRR-BERT sentence classifier, precision/recall/F1 of the generated report's labels against the reference's."
    )
    citation = (
        "@inproceedings{delbrouck2025srrg, title={Automated structured radiology report generation},"
        " author={Delbrouck, Jean-Benoit and Xu, Justin and Moll, Johannes and Thomas, Alois and Chen, Zhihong and"
        " Ostmeier, Sophie and Azhar, Asfandyar and Li, Kelvin Zhenghao and Johnston, Andrew and Bluethgen, Christian"
        " and others}, booktitle={ACL}, year={2025}}\n"
        "@inproceedings{xu2025radeval, title={RadEval: A framework for radiology text evaluation},"
        " author={Xu, Justin and Zhang, Xi and others and Delbrouck, Jean-Benoit},"
        " booktitle={EMNLP System Demonstrations}, year={2025}}"
    )
    higher_is_better = True

    def __init__(self, model: str = SRR_BERT.repo_id, revision: str = SRR_BERT.revision, model_path: str | None = None,
                 tokenizer_path: str | None = None, batching: str = "radeval", batch_size: int | None = None,
                 device: str | None = None, cache: bool = True, cache_dir: str | None = None, progress: bool = True,
                 run_context=None):
        if batching not in BATCHING:
            raise MetricError(f"srr_bert: batching must be one of {', '.join(map(repr, BATCHING))}, got {batching!r}")
        self.batching = batching
        batch_size = BATCH_SIZE[batching] if batch_size is None else batch_size
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise MetricError(f"srr_bert: batch_size must be a positive integer, got {batch_size!r}")
        self.checkpoint = Checkpoint(model, revision, path=model_path, licence=SRR_BERT.licence)
        self.tokenizer = (Checkpoint(CXR_BERT_GENERAL.repo_id, "local", path=tokenizer_path) if tokenizer_path
                          else CXR_BERT_GENERAL)
        self.batch_size = batch_size
        self.device = device
        self.cache = cache
        self.cache_dir = cache_dir
        self.progress = progress
        self.run_context = run_context
        self._labeler = None

    def config(self) -> dict:
        return {"model": self.checkpoint.provenance(), "tokenizer": self.tokenizer.provenance(),
                "num_labels": 163, "threshold": 0.5, "max_tokens": 512,
                "sentences": "RadEval srr_bert_parse_sentences + nltk.sent_tokenize (punkt_tab)",
                "batching": (f"RadEval's: every sentence, reference then prediction, batches of {self.batch_size}"
                             if self.batching == "radeval" else f"distinct sentences, batches of {self.batch_size}"),
                "per_study": "multilabel_prf_per_sample (mean over the union of labels, eps 1e-8)",
                "corpus": "classification_report weighted avg"}

    def _model_key(self) -> tuple:
        from rexrank.models.shared import local_fingerprint

        return ("srr_bert", self.checkpoint.describe(), self.tokenizer.describe(), local_fingerprint(self.checkpoint.path),
                self.batch_size, self.device)

    def run_key(self) -> Any:
        return (self.name, self._model_key(), self.cache, self.cache_dir)

    @property
    def labeler(self):
        if self._labeler is None:
            from rexrank.models.shared import shared_model
            from rexrank.models.srr_bert import SRRBertLabeler

            self._labeler = shared_model(self._model_key(), lambda: SRRBertLabeler(
                self.checkpoint, self.tokenizer, device=self.device, batch_size=self.batch_size))
        return self._labeler

    def all_labels(self, predictions: list[str], references: list[str]) -> dict[str, np.ndarray]:
        """Every distinct report's labels: references from the on-disk reference cache where it
        has them, the rest in one pass (a sentence in both sides is classified once)."""
        import nltk

        from rexrank.refcache import ReferenceCache

        cache = ReferenceCache(f"srr_bert/v1/{self.labeler.identity}/nltk-{nltk.__version__}", self.cache_dir,
                               enabled=self.cache)
        known, missing = cache.lookup(references)
        computed = self.report_labels(missing + predictions)
        for text in missing:
            cache.put(text, computed[text])
        return {**known, **computed}

    def report_labels(self, texts: list[str]) -> dict[str, np.ndarray]:
        """Each distinct report's labels: the union over its sentences' labels."""
        from rexrank.metrics.run_context import shared_outputs
        from rexrank.models.srr_bert import require_punkt, sentences

        require_punkt()
        split = {t: sentences(t) for t in dict.fromkeys(texts)}
        distinct = list(dict.fromkeys(s for parts in split.values() for s in parts))
        labels = self.labeler  # load (or fail on missing weights) before the run's bookkeeping
        rows = shared_outputs(self.run_context, self.name, self._model_key(), "sentences", distinct,
                              lambda todo: list(labels.labels(todo, progress=self.progress)))
        by_sentence = dict(zip(distinct, rows))
        return {t: np.any([by_sentence[s] for s in parts], axis=0).astype(np.int8) for t, parts in split.items()}

    def radeval_labels(self, predictions: list[str], references: list[str], start: int = 0,
                       stop: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Reference and prediction labels of studies [start, stop) with RadEval's batches:
        every sentence of every study, the study's reference then its prediction, study after
        study, cut into batches of `batch_size` (a batch spans studies). For a part of the
        studies (a shard) exactly the whole run's batches that hold its sentences are
        classified, neighbours' sentences included, so each label is the whole run's.
        Nothing cached: a label depends on its batch."""
        from rexrank.models.srr_bert import require_punkt, sentences

        require_punkt()
        stop = len(predictions) if stop is None else stop
        split = {t: sentences(t) for t in dict.fromkeys(references + predictions)}
        order: list[str] = []
        bounds = []
        for reference, prediction in zip(references, predictions):
            first = len(order)
            order += split[reference]
            middle = len(order)
            order += split[prediction]
            bounds.append((first, middle, len(order)))
        bounds = bounds[start:stop]
        size = self.batch_size
        # from the first sentence's batch start to the last sentence's batch end (or the end of all)
        low = bounds[0][0] // size * size if bounds else 0
        high = min(len(order), -(-bounds[-1][2] // size) * size) if bounds else 0
        rows = self.labeler.labels(order[low:high], progress=self.progress)
        # the labels' width from the model's rows: a part of no study has (0, labels), not an error
        width = rows.shape[1]
        refs = np.array([rows[a - low:b - low].any(axis=0) for a, b, _ in bounds], dtype=np.int8).reshape(len(bounds), width)
        hyps = np.array([rows[b - low:c - low].any(axis=0) for _, b, c in bounds], dtype=np.int8).reshape(len(bounds), width)
        return refs, hyps

    @classmethod
    def shard_rule(cls, options: dict) -> ShardRule:
        if options.get("batching", "radeval") == "distinct":
            return ShardRule(refusal="batching='distinct' classifies the request's distinct sentences together "
                                     "(batching='radeval', the default, shards)")
        return ShardRule()  # a shard classifies the whole run's batches that hold its sentences

    def _score_part(self, predictions: list[str], references: list[str], start: int, stop: int) -> StudyRows:
        if start == stop:
            return self._rows({self.name: [], "srr_bert_precision": [], "srr_bert_recall": []})
        if self.batching == "radeval":
            refs, hyps = self.radeval_labels(predictions, references, start, stop)
        else:
            predictions, references = predictions[start:stop], references[start:stop]
            labels = self.all_labels(predictions, references)
            hyps = np.array([labels[t] for t in predictions]).reshape(len(predictions), -1)
            refs = np.array([labels[t] for t in references]).reshape(len(references), -1)
        precision, recall, f1 = per_study_prf(refs, hyps)
        return self._rows({self.name: f1, "srr_bert_precision": precision, "srr_bert_recall": recall},
                          side={"labels_reference": refs, "labels_prediction": hyps})

    @classmethod
    def aggregate(cls, rows: StudyRows) -> MetricResult:
        """Means of the per-study columns; the corpus values RadEval reports (weighted P, R,
        F1 over every study's labels) and the mean per-study F1."""
        result = super().aggregate(rows)
        if "labels_reference" in rows.side:
            refs = np.asarray(rows.side["labels_reference"], dtype=np.int8)
            hyps = np.asarray(rows.side["labels_prediction"], dtype=np.int8)
            wp, wr, wf = weighted_prf(refs, hyps)
            result.corpus.update({cls.name: wf, "srr_bert_precision": wp, "srr_bert_recall": wr,
                                  "srr_bert_mean_f1": float(rows.columns[cls.name].mean())})
        return result
