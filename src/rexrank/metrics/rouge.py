"""ROUGE-1, ROUGE-2 and ROUGE-L F1 as RadEval computes them (reference metrics_nonllm.md §7):
Google's `rouge_score` package (0.1.2, Apache-2.0) with `use_stemmer=True`, scoring each
prediction against its reference; the corpus value of each is the mean of the per-study F1.

Written from rouge_score's definition, read, not copied (google-research/rouge, Apache-2.0):
- tokens: lower-case, every run of characters outside [a-z0-9] becomes a space, split on
  whitespace; tokens longer than 3 characters go through NLTK's Porter stemmer (its default
  NLTK_EXTENSIONS mode, as `porter.PorterStemmer()`); empty tokens are dropped;
- ROUGE-N: clipped n-gram matches; precision = matches / max(1, #prediction n-grams),
  recall = matches / max(1, #reference n-grams);
- ROUGE-L: longest common subsequence of the token lists; 0 when either side has no token;
- F1 = 2PR / (P + R), 0 when P + R = 0.
Each distinct text is tokenised once per run.
"""
from __future__ import annotations

from collections import Counter
from functools import lru_cache

from rexrank.errors import MetricError
from rexrank.metrics.base import Metric, StudyRows

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")
_STEM_MIN_CHARS = 4  # rouge_score stems only tokens longer than 3 characters


@lru_cache(maxsize=None)
def _stemmer():
    from nltk.stem import porter

    return porter.PorterStemmer()


@lru_cache(maxsize=1 << 16)
def _stem(word: str) -> str:
    return _stemmer().stem(word)


def tokenize(text: str, *, stem: bool = True) -> list[str]:
    """rouge_score's tokens of `text`."""
    import re

    words = re.sub(r"[^a-z0-9]+", " ", text.lower()).split()
    if stem:
        words = [_stem(w) if len(w) >= _STEM_MIN_CHARS else w for w in words]
    return [w for w in words if w]


def f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def ngram_f1(reference: list[str], prediction: list[str], n: int) -> float:
    ref = Counter(zip(*(reference[i:] for i in range(n))))
    hyp = Counter(zip(*(prediction[i:] for i in range(n))))
    matches = sum((ref & hyp).values())
    return f1(matches / max(sum(hyp.values()), 1), matches / max(sum(ref.values()), 1))


def lcs_length(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence, bit-parallel (Hyyrö 2004): one big-integer
    pass per token of `a` instead of a len(a) x len(b) table."""
    if not a or not b:
        return 0
    masks: dict[str, int] = {}
    for j, token in enumerate(b):
        masks[token] = masks.get(token, 0) | (1 << j)
    full = (1 << len(b)) - 1
    v = full
    for token in a:
        u = v & masks.get(token, 0)
        v = ((v + u) | (v - u)) & full
    return len(b) - bin(v).count("1")


def lcs_f1(reference: list[str], prediction: list[str]) -> float:
    if not reference or not prediction:
        return 0.0
    lcs = lcs_length(reference, prediction)
    return f1(lcs / len(prediction), lcs / len(reference))


class Rouge(Metric):
    name = "rouge"
    version = "1"
    description = (
        "ROUGE-1, ROUGE-2 and ROUGE-L F1 as RadEval computes them (rouge_score, Porter stemmer on), "
        "mean over studies; the primary value `rouge` is ROUGE-L."
    )
    citation = (
        "@inproceedings{lin2004rouge, title={ROUGE: A package for automatic evaluation of summaries},"
        " author={Lin, Chin-Yew}, booktitle={Text Summarization Branches Out}, year={2004}}\n"
        "@inproceedings{xu2025radeval, title={RadEval: A framework for radiology text evaluation},"
        " author={Xu, Justin and Zhang, Xi and Abderezaei, Javid and Bauml, Julie and Boodoo, Roger and"
        " Haghighi, Fatemeh and Ganjizadeh, Ali and Brattain, Eric and Van Veen, Dave and Meng, Zaiqiao and"
        " Eyre, David and Delbrouck, Jean-Benoit}, booktitle={EMNLP System Demonstrations}, year={2025}}"
    )
    higher_is_better = True

    def __init__(self, use_stemmer: bool = True):
        if not isinstance(use_stemmer, bool):
            raise MetricError(f"rouge: use_stemmer must be true or false, got {use_stemmer!r}")
        self.use_stemmer = use_stemmer

    def config(self) -> dict:
        return {"rouge_types": list(ROUGE_TYPES), "use_stemmer": self.use_stemmer,
                "tokenizer": "rouge_score 0.1.2 DefaultTokenizer", "score": "F1, mean over studies"}

    def _score(self, predictions: list[str], references: list[str]) -> StudyRows:
        tokens = {t: tokenize(t, stem=self.use_stemmer) for t in dict.fromkeys(predictions + references)}
        columns: dict[str, list[float]] = {k: [] for k in ROUGE_TYPES}
        for hyp, ref in zip(predictions, references):
            h, r = tokens[hyp], tokens[ref]
            columns["rouge1"].append(ngram_f1(r, h, 1))
            columns["rouge2"].append(ngram_f1(r, h, 2))
            columns["rougeL"].append(lcs_f1(r, h))
        return self._rows({self.name: columns["rougeL"], **columns})
