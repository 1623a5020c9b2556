"""BLEU-2 exactly as CXR-Report-Metric computes it (reference metrics_nonllm.md §1.1).

Official pipeline: `prep_reports` tokenisation, then fast_bleu 0.0.90
`BLEU([ref], {"bigram": (0.5, 0.5)}).get_score([hyp])`, one hypothesis against one reference.
fast_bleu's defaults equal NLTK `sentence_bleu(weights=(0.5, 0.5), smoothing=method1)`:
clipped unigram/bigram precision over max(1, #hyp n-grams); 0 if no unigram matches;
a zero bigram numerator becomes 0.1 / denominator; brevity penalty exp(1 - r/c) when c <= r.

Written from that definition; no compiled dependency. The official code and fast_bleu are MIT.

It is the metric run most often, so the whole corpus is scored at once: one tokenisation
pass over the joined texts, n-gram counts as sparse matrices, clipped matches as their
element-wise minimum.
"""
from __future__ import annotations

import numpy as np
from scipy import sparse

from rexrank.metrics.base import Metric, StudyRows

EPSILON = 0.1  # smoothing method1
_BOUNDARY = "\x00"  # joins texts for one-pass tokenisation; a token of its own


def tokenize(report: str) -> list[str]:
    """CXR-Report-Metric `prep_reports`: lower-case, split '.' off, split on single spaces.

    Newlines and tabs are not separators (official behaviour): "effusion.\\nheart" ->
    ["effusion", ".\\nheart"].
    """
    return list(filter(None, report.lower().replace(".", " .").split(" ")))


def _corpus_token_ids(texts: list[str]) -> tuple[np.ndarray, np.ndarray, int]:
    """Token ids of all texts in order, the text index of each token, and the vocabulary size."""
    joined = f" {_BOUNDARY} ".join(texts)
    if joined.isascii() and _BOUNDARY not in "".join(texts):
        # One C-level pass. Lower-casing ASCII is per character, so joining changes nothing.
        raw = joined.lower().replace(".", " .").split(" ")
        row_of = None
    else:
        per_text = [tokenize(t) for t in texts]
        raw = [tok for toks in per_text for tok in toks]
        row_of = np.repeat(np.arange(len(texts)), [len(t) for t in per_text])
    index = {tok: i for i, tok in enumerate(dict.fromkeys(raw))}
    ids = np.fromiter(map(index.__getitem__, raw), dtype=np.int64, count=len(raw))
    if row_of is None:
        is_boundary = ids == index.get(_BOUNDARY, -1)  # absent when there is one text
        row_of = np.cumsum(is_boundary)
        keep = ~is_boundary & (ids != index.get("", -1))  # "" comes from runs of spaces
        ids, row_of = ids[keep], row_of[keep]
    return ids, row_of, max(len(index), 1)


def _count_matrices(texts: list[str]) -> tuple[sparse.csr_matrix, sparse.csr_matrix, np.ndarray]:
    """Per text: unigram counts, bigram counts (sparse rows) and token count."""
    ids, rows, vocab = _corpus_token_ids(texts)
    n = len(texts)
    ones = np.ones(len(ids), dtype=np.int64)
    unigrams = sparse.csr_matrix((ones, (rows, ids)), shape=(n, vocab))  # duplicates are summed
    same_text = rows[:-1] == rows[1:]
    bigram_codes = ids[:-1][same_text] * vocab + ids[1:][same_text]
    codes, bigram_ids = np.unique(bigram_codes, return_inverse=True)
    bigrams = sparse.csr_matrix(
        (np.ones(len(bigram_ids), dtype=np.int64), (rows[:-1][same_text], bigram_ids)), shape=(n, max(len(codes), 1))
    )
    lengths = np.bincount(rows, minlength=n)
    return unigrams, bigrams, lengths


def _clipped(counts: sparse.csr_matrix, hyp_rows: np.ndarray, ref_rows: np.ndarray) -> np.ndarray:
    return np.asarray(counts[hyp_rows].minimum(counts[ref_rows]).sum(axis=1)).ravel()


def bleu2_scores(predictions: list[str], references: list[str]) -> np.ndarray:
    """Per-pair BLEU-2 of each prediction against its reference."""
    distinct = list(dict.fromkeys(predictions + references))
    row = {text: i for i, text in enumerate(distinct)}
    hyp_rows = np.fromiter(map(row.__getitem__, predictions), dtype=np.int64, count=len(predictions))
    ref_rows = np.fromiter(map(row.__getitem__, references), dtype=np.int64, count=len(references))
    unigrams, bigrams, lengths = _count_matrices(distinct)
    unigram_hits = _clipped(unigrams, hyp_rows, ref_rows)
    bigram_hits = _clipped(bigrams, hyp_rows, ref_rows)
    c = lengths[hyp_rows].astype(np.float64)
    r = lengths[ref_rows].astype(np.float64)
    scored = (c > 0) & (unigram_hits > 0)  # otherwise BLEU is 0 (official: no unigram match)
    c_safe = np.where(scored, c, 1.0)
    p1 = np.where(scored, unigram_hits, 1) / c_safe
    p2 = np.where(bigram_hits > 0, bigram_hits, EPSILON) / np.maximum(1.0, c_safe - 1)
    brevity = np.where(c_safe > r, 1.0, np.exp(1 - r / c_safe))
    scores = brevity * np.exp(0.5 * np.log(p1) + 0.5 * np.log(p2))
    return np.where(scored, scores, 0.0)


class Bleu2(Metric):
    name = "bleu2"
    version = "1"
    description = (
        "BLEU-2 as in CXR-Report-Metric / ReXrank: sentence-level BLEU with bigram weights "
        "(1/2, 1/2) and smoothing method 1, on lower-cased tokens with '.' split off."
    )
    citation = (
        "@inproceedings{papineni2002bleu, title={BLEU: a method for automatic evaluation of machine translation},"
        " author={Papineni, Kishore and Roukos, Salim and Ward, Todd and Zhu, Wei-Jing}, booktitle={ACL}, year={2002}}\n"
        "@article{yu2023evaluating, title={Evaluating progress in automatic chest X-ray radiology report generation},"
        " author={Yu, Feiyang and others}, journal={Patterns}, year={2023}}"
    )
    higher_is_better = True

    def config(self) -> dict:
        return {"weights": [0.5, 0.5], "smoothing": "method1", "epsilon": EPSILON, "tokenizer": "cxr-report-metric prep_reports"}

    def _score(self, predictions: list[str], references: list[str]) -> StudyRows:
        if not predictions:
            return self._rows({self.name: []})
        return self._rows({self.name: bleu2_scores(predictions, references)})
