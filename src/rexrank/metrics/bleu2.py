"""BLEU-2 exactly as CXR-Report-Metric computes it (reference metrics_nonllm.md §1.1).

Official pipeline: `prep_reports` tokenisation, then fast_bleu 0.0.90
`BLEU([ref], {"bigram": (0.5, 0.5)}).get_score([hyp])`, one hypothesis against one reference.
fast_bleu's defaults equal NLTK `sentence_bleu(weights=(0.5, 0.5), smoothing=method1)`:
clipped unigram/bigram precision over max(1, #hyp n-grams); 0 if no unigram matches;
a zero bigram numerator becomes 0.1 / denominator; brevity penalty exp(1 - r/c) when c <= r.

Written from that definition; no compiled dependency. The official code and fast_bleu are MIT.
"""
from __future__ import annotations

import math
from collections import Counter

from rexrank.metrics.base import Metric, MetricResult

EPSILON = 0.1  # smoothing method1


def tokenize(report: str) -> list[str]:
    """CXR-Report-Metric `prep_reports`: lower-case, split '.' off, split on single spaces.

    Newlines and tabs are not separators (official behaviour): "effusion.\\nheart" ->
    ["effusion", ".\\nheart"].
    """
    return [t for t in report.lower().replace(".", " .").split(" ") if t != ""]


def _clipped_matches(hyp: Counter, ref: Counter) -> int:
    return sum(min(count, ref[gram]) for gram, count in hyp.items() if gram in ref)


def sentence_bleu2(hyp_tokens: list[str], ref_tokens: list[str]) -> float:
    c = len(hyp_tokens)
    if c == 0:
        return 0.0
    unigram_hits = _clipped_matches(Counter(hyp_tokens), Counter(ref_tokens))
    if unigram_hits == 0:
        return 0.0
    p1 = unigram_hits / c
    bigram_total = max(1, c - 1)
    bigram_hits = _clipped_matches(Counter(zip(hyp_tokens, hyp_tokens[1:])), Counter(zip(ref_tokens, ref_tokens[1:])))
    p2 = (bigram_hits if bigram_hits else EPSILON) / bigram_total
    r = len(ref_tokens)
    brevity = 1.0 if c > r else math.exp(1 - r / c)
    return brevity * math.exp(math.fsum((0.5 * math.log(p1), 0.5 * math.log(p2))))


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

    def _score(self, predictions: list[str], references: list[str]) -> MetricResult:
        # Reports repeat a lot (normal studies): tokenise each distinct text once.
        token_cache: dict[str, list[str]] = {}

        def tokens(text: str) -> list[str]:
            got = token_cache.get(text)
            if got is None:
                got = token_cache[text] = tokenize(text)
            return got

        scores = [sentence_bleu2(tokens(p), tokens(r)) for p, r in zip(predictions, references)]
        return self._result_from_columns({self.name: scores})
