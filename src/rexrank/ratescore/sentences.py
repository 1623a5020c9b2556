"""Sentence splitting for RaTEScore.

The official code splits with medSpaCy's PyRuSH sentencizer
(`medspacy.load(medspacy_enable=["medspacy_pyrush", "medspacy_conte"])`; "medspacy_conte"
names no component, so the pipeline is spaCy's English tokenizer plus PyRuSH), then keeps
`str(sentence).strip()` when it is non-blank and at least 3 characters long. medSpaCy
pins spaCy < 3.8 and therefore numpy < 2 on Python 3.11, so it cannot be a dependency.
Three splitters:

- "pyrush" (default): rexrank's implementation of the official pipeline: RuSH's rules and
  engine (`rexrank.ratescore.rush`), sentence starts placed on spaCy's token edges as
  PyRuSH's sentencizer does (`rexrank.ratescore.tokens`). Identical sentences for all
  9,438 IU-Xray, MIMIC-CXR and CheXpert Plus texts of ReXrank's test files (figures and
  the one known source of disagreement in the metric card);
- "regex": rexrank's earlier regular-expression splitter (faster, ~88 % agreement on
  MIMIC-CXR), kept for comparison with earlier results;
- "medspacy": the official pipeline itself, where medSpaCy is installed
  (`pip install medspacy`; on Python 3.11 this downgrades numpy, use a separate env).

This module and the two above import only the standard library (so they can be measured
against PyRuSH in an environment that has medSpaCy but not rexrank's dependencies).
"""
from __future__ import annotations

import re
from typing import Callable

from rexrank.ratescore.rush import sentence_spans
from rexrank.ratescore.tokens import token_starts

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


def split_regex(text: str) -> list[str]:
    """The "regex" splitter: sentences of `text` as substrings of it (not yet
    stripped or filtered)."""
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


def split_pyrush(text: str) -> list[str]:
    """The "pyrush" splitter: the official pipeline's sentences as substrings of `text`
    (not yet stripped or filtered)."""
    if not text:
        return []
    starts = _sentence_starts(token_starts(text), sentence_spans(text))
    return [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)])]


def _sentence_starts(tokens: list[tuple[int, bool]], spans: list[tuple[int, int]]) -> list[int]:
    """Offsets where sentences start: RuSH's character spans placed on tokens the way
    PyRuSH's sentencizer does (`cpredict_split_gaps`, merge_gaps off): a token starting a
    span starts a sentence, so does the token right after a span's last token; in a gap
    between spans the first whitespace token (else the first token) starts one, and after
    the last span every whitespace token does. spaCy's first token always starts one."""
    marked = [False] * len(tokens)
    t, k, n_spans = 0, 0, len(spans)
    while t < len(tokens):
        offset, is_space = tokens[t]
        next_begin = spans[k + 1][0] if k < n_spans - 1 else -1
        if k < n_spans - 1 and spans[k][1] <= offset < next_begin:
            gap_end = t
            while gap_end < len(tokens) and tokens[gap_end][0] < next_begin:
                gap_end += 1
            marked[next((i for i in range(t, gap_end) if tokens[i][1]), t)] = True
            t = gap_end
            continue
        while k < n_spans and offset >= spans[k][1]:
            k += 1
        if k >= n_spans:
            marked[t] = marked[t] or is_space
        elif spans[k][0] <= offset:  # inside span k (its end is beyond, see the loop above)
            if offset == spans[k][0]:
                marked[t] = True
            if t + 1 < len(tokens) and tokens[t + 1][0] >= spans[k][1]:
                marked[t + 1] = True
        t += 1
    return [0, *(offset for i, (offset, _) in enumerate(tokens) if marked[i] and i > 0)]


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
    nlp = medspacy.load(medspacy_enable=["medspacy_pyrush", "medspacy_conte"])
    return lambda text: [str(s) for s in nlp(text).sents]


SPLITTERS = ("pyrush", "regex", "medspacy")
DEFAULT_SPLITTER = "pyrush"


def get_splitter(name: str) -> Callable[[str], list[str]]:
    """text -> kept sentences, with the splitter `name`."""
    if name == "pyrush":
        raw = split_pyrush
    elif name == "regex":
        raw = split_regex
    elif name == "medspacy":
        raw = _medspacy_splitter()
    else:
        raise ValueError(f"unknown sentence splitter {name!r}; choose one of {', '.join(SPLITTERS)}")
    return lambda text: keep(raw(text))
