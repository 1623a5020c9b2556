"""Sentence splitting for RaTEScore.

The official code splits with medspaCy's PyRuSH sentencizer
(`medspacy.load(medspacy_enable=["medspacy_pyrush", ...])`), then keeps
`str(sentence).strip()` when it is non-blank and at least 3 characters long. medspaCy
pins spaCy < 3.8 and therefore numpy < 2 on Python 3.11, so it cannot be a default
dependency. Two splitters:

- "builtin" (default): a dependency-free splitter written to reproduce PyRuSH's boundaries
  on chest X-ray reports (the agreement measured on IU-Xray is in the metric card);
- "medspacy": the exact official pipeline, when medspaCy is installed
  (`pip install medspacy`; on Python 3.11 this downgrades numpy, use a separate env).

This module imports only the standard library (so it can be measured against PyRuSH in
an environment that has medspaCy but not rexrank's dependencies).
"""
from __future__ import annotations

import re
from typing import Callable

MIN_SENTENCE_CHARS = 3  # official: sentences shorter than this are dropped

# A boundary is sentence-final punctuation followed by whitespace, or a line break before
# a capital or a digit (headings, one finding per line; "size and\ncontour" is no break) ...
_BOUNDARY = re.compile(r"(?<=[.!?])\s+|\s*\n\s*(?=[A-Z0-9])")
# ... except where PyRuSH does not split (observed on IU-Xray reports):
# "effusion.. Heart"; titles and abbreviations ("Dr. XXXX", "3 p.m. today")
_NO_SPLIT_AFTER = re.compile(r"(\.\.|\b(?:Dr|Mr|Mrs|Ms|vs|[ap]\.m|e\.g|i\.e)\.)$", re.IGNORECASE)
_LIST_MARKER = re.compile(r"\d{1,2}\.")  # "2. Large hernia" stays one sentence
_PUNCTUATION_ONLY = re.compile(r"[.!?]+")


def _deidentified_pair(previous: str, piece: str) -> bool:
    # IU-Xray's de-identification token: PyRuSH does not split "XXXX. XXXX"
    return previous.endswith("XXXX.") and piece.startswith("XXXX")


def split_builtin(text: str) -> list[str]:
    """Sentences of `text` as substrings of it (not yet stripped or filtered)."""
    # pieces between boundaries, as (start, end) offsets so merged sentences keep the
    # original whitespace
    pieces: list[tuple[int, int]] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        pieces.append((start, match.start()))
        start = match.end()
    pieces.append((start, len(text)))

    spans: list[list[int]] = []
    glue = False  # the previous piece must not end a sentence
    for index, (begin, end) in enumerate(pieces):
        piece = text[begin:end]
        stray = _PUNCTUATION_ONLY.fullmatch(piece) is not None and index < len(pieces) - 1
        if spans and (stray or _deidentified_pair(text[spans[-1][0] : spans[-1][1]], piece)):
            # "limits. . Impression", "please XXXX. XXXX at": no boundary; a stray final
            # "." stays a sentence of its own (and is dropped as too short)
            glue = True
        if glue and spans:
            spans[-1][1] = end
        else:
            spans.append([begin, end])
        # a numbered-list marker opens the sentence it numbers, except at the very start
        # of the text, where PyRuSH leaves it alone (and the short-sentence filter drops it)
        glue = (
            stray
            or _NO_SPLIT_AFTER.search(text[spans[-1][0] : spans[-1][1]]) is not None
            or (index > 0 and _LIST_MARKER.fullmatch(piece) is not None)
        )
    return [text[begin:end] for begin, end in spans]


def keep(sentences: list[str]) -> list[str]:
    """The official filter: strip, then drop blank and < 3-character sentences."""
    kept = []
    for sentence in sentences:
        sentence = sentence.strip()
        if not sentence.split() or len(sentence) < MIN_SENTENCE_CHARS:
            continue
        kept.append(sentence)
    return kept


def _medspacy_splitter() -> Callable[[str], list[str]]:
    try:
        import medspacy
    except ImportError as exc:
        raise ImportError(
            "sentence_splitter='medspacy' needs medspaCy (pip install medspacy); on Python 3.11 it "
            "requires spaCy < 3.8 and numpy < 2, so install it in a separate environment"
        ) from exc
    nlp = medspacy.load(medspacy_enable=["medspacy_pyrush"])
    return lambda text: [str(s) for s in nlp(text).sents]


SPLITTERS = ("builtin", "medspacy")


def get_splitter(name: str) -> Callable[[str], list[str]]:
    """text -> kept sentences, with the splitter `name`."""
    if name == "builtin":
        raw = split_builtin
    elif name == "medspacy":
        raw = _medspacy_splitter()
    else:
        raise ValueError(f"unknown sentence splitter {name!r}; choose one of {', '.join(SPLITTERS)}")
    return lambda text: keep(raw(text))
