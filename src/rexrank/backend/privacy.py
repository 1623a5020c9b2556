"""What a result may say about a private test set (ReXGradient): aggregates only.

`private_view` removes everything per-study from a scoring run's summaries (failure
reasons by study, metric details, lists of study ids); `find_leaks` is the last check
before anything is written: no reference text may appear in it."""
from __future__ import annotations

import json
from typing import Iterable, Sequence

# references shorter than this are phrases ("No acute findings.") that also occur in
# ordinary text; they identify nothing
MIN_LEAK_CHARS = 25
# per-summary fields that are aggregates (rexrank.stats.Summary and the run's bookkeeping)
AGGREGATE_FIELDS = {"n", "n_missing", "mean", "std", "sem", "ci95", "bootstrap_low", "bootstrap_high", "median", "min", "max"}


def private_view(summary: dict) -> dict:
    """One metric's summary from rexrank.scoring with only aggregate numbers left."""
    scores = {
        col: {k: v for k, v in s.items() if k in AGGREGATE_FIELDS and isinstance(v, (int, float, type(None)))}
        for col, s in summary.get("scores", {}).items()
    }
    corpus = {k: v for k, v in summary.get("corpus", {}).items() if isinstance(v, (int, float))}
    return {
        "scores": scores,
        "corpus": corpus,
        "higher_is_better": summary.get("higher_is_better"),
        "n_failed": summary.get("n_failed", 0),
        "seconds": summary.get("seconds"),
    }


def normalise(text: str) -> str:
    return " ".join(text.split()).casefold()


def _strings(obj) -> Iterable[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _strings(v)


def find_leaks(payloads: Iterable[str | bytes | dict], references: Sequence[str], *, min_chars: int = MIN_LEAK_CHARS) -> list[int]:
    """Positions of the references whose text (whitespace- and case-insensitively)
    appears in any payload. JSON bytes are parsed first, so escaped quotes and newlines
    cannot hide a reference; other bytes are scanned as UTF-8 text."""
    texts: list[str] = []
    for p in payloads:
        if isinstance(p, bytes):
            text = p.decode("utf-8", errors="replace")
            texts.append(text)
            try:
                p = json.loads(text)
            except ValueError:
                continue
        texts.extend(_strings(p))
    haystack = "\n".join(normalise(t) for t in texts)
    return [i for i, ref in enumerate(references) if ref and len(ref.strip()) >= min_chars and normalise(ref) in haystack]
