"""Temporal F1 as RadEval computes it (`temporal`, radeval/metrics/f1temporal, MIT; adapted
there from Libra's temporal_f1): the F1 of the temporal words two reports use.

Written from that code's definition, read, not copied. Per report, the temporal entities are
the union of
- the words of KEYWORDS found as whole words in the report after its clean-up (runs of `_`
  and `-` become spaces, every character other than word characters, whitespace and
  `.,:;()` is deleted, which can join two words: "new/increased" -> "newincreased"), and
- (ner="stanza", the official default) the OBSERVATION / OBSERVATION_MODIFIER entities that
  Stanza's radiology NER tags in the raw report, lower-cased, that are themselves KEYWORDS.
Per study, with epsilon 1e-10 as officially:
- reference with no entity: 1.0 when the prediction has none either, else epsilon;
- else precision = (tp + eps) / (|pred| + eps), recall = (tp + eps) / (|ref| + eps),
  F1 = 2PR / (P + R + eps).
The corpus value is the mean. Each distinct text is analysed once per run.
"""
from __future__ import annotations

import re
from typing import Any, Callable

from rexrank.errors import MetricError
from rexrank.metrics.base import Metric, StudyRows

EPSILON = 1e-10
# Bannur et al., Learning to Exploit Temporal Structure for Biomedical Vision-Language
# Processing (CVPR 2023), the temporal keywords RadEval / Libra use
KEYWORDS = frozenset({
    "bigger", "change", "cleared", "constant", "decrease", "decreased", "decreasing", "elevated", "elevation",
    "enlarged", "enlargement", "enlarging", "expanded", "greater", "growing", "improved", "improvement",
    "improving", "increase", "increased", "increasing", "larger", "new", "persistence", "persistent",
    "persisting", "progression", "progressive", "reduced", "removal", "resolution", "resolved", "resolving",
    "smaller", "stability", "stable", "stably", "unchanged", "unfolded", "worse", "worsen", "worsened",
    "worsening", "unaltered",
})
NER_TYPES = frozenset({"OBSERVATION", "OBSERVATION_MODIFIER"})
NER_CHOICES = ("stanza", "keywords")
_SPACED = re.compile(r"[_-]+")  # become one space
_DELETED = re.compile(r"[^\w\s.,:;()-]")  # deleted outright
_WORD = re.compile(r"\w+")


def keyword_entities(text: str) -> set[str]:
    """The KEYWORDS found as whole words in the cleaned, lower-cased report."""
    cleaned = _DELETED.sub("", _SPACED.sub(" ", text)).lower()
    return {w for w in _WORD.findall(cleaned) if w in KEYWORDS}


def ner_entities(doc: Any) -> set[str]:
    """The keywords among a Stanza document's observation entities."""
    return {e.text.lower() for e in doc.entities if e.type in NER_TYPES} & KEYWORDS


def temporal_f1(prediction: set[str], reference: set[str], epsilon: float = EPSILON) -> float:
    if not reference:
        return 1.0 if not prediction else epsilon
    tp = len(prediction & reference)
    precision = (tp + epsilon) / (len(prediction) + epsilon)
    recall = (tp + epsilon) / (len(reference) + epsilon)
    return 2 * precision * recall / (precision + recall + epsilon)


class TemporalF1(Metric):
    name = "temporal_f1"
    version = "1"
    description = (
        "Temporal F1 as RadEval computes it: F1 of the temporal words (new, increased, unchanged, ...) of "
        "the generated and the reference report, found by keyword and by Stanza's radiology NER; mean over studies."
    )
    citation = (
        "@article{zhang2024libra, title={Libra: Leveraging temporal images for biomedical radiology analysis},"
        " author={Zhang, Xi and Meng, Zaiqiao and Lever, Jake and Ho, Edmond S. L.}, journal={arXiv:2411.19378}, year={2024}}\n"
        "@inproceedings{xu2025radeval, title={RadEval: A framework for radiology text evaluation},"
        " author={Xu, Justin and Zhang, Xi and others and Delbrouck, Jean-Benoit},"
        " booktitle={EMNLP System Demonstrations}, year={2025}}"
    )
    higher_is_better = True

    def __init__(self, ner: str = "stanza", stanza_dir: str | None = None, progress: bool = True):
        if ner not in NER_CHOICES:
            raise MetricError(f"temporal_f1: ner must be one of {', '.join(map(repr, NER_CHOICES))}, got {ner!r}")
        self.ner = ner
        self.stanza_dir = stanza_dir
        self.progress = progress
        self._pipeline: Callable | None = None

    def config(self) -> dict:
        from rexrank.models.stanza_ner import pipeline_config

        return {"keywords": "Bannur et al. 2023 (RadEval f1temporal.KEYWORDS)", "epsilon": EPSILON,
                "ner": pipeline_config(self.stanza_dir) if self.ner == "stanza" else "none (keywords only)"}

    def _entities(self, texts: list[str]) -> dict[str, set[str]]:
        from tqdm.auto import tqdm

        if self.ner == "stanza" and self._pipeline is None:
            from rexrank.models.stanza_ner import load_pipeline

            self._pipeline = load_pipeline(self.stanza_dir)
        out = {}
        for text in tqdm(texts, desc="temporal_f1", unit="text", disable=not self.progress or len(texts) < 50):
            found = keyword_entities(text)
            if self._pipeline is not None:
                found |= ner_entities(self._pipeline(text))
            out[text] = found
        return out

    def _score(self, predictions: list[str], references: list[str]) -> StudyRows:
        entities = self._entities(list(dict.fromkeys(predictions + references)))
        scores = [temporal_f1(entities[p], entities[r]) for p, r in zip(predictions, references)]
        return self._rows({self.name: scores})
