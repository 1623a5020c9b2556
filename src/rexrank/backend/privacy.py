"""What may be published about a private test set (ReXGradient): rounded aggregates only.

`private_results` rounds a scoring run's summaries before anything is derived from them;
`private_view` keeps only aggregates; `validation_message` says what was wrong with a
submission in counts, never ids; `find_leaks` is the last check before anything is
written: no reference text may appear in it. `public_message` removes server paths from
any message a submitter sees.

Rounding: why this precision hides one study
--------------------------------------------
A submitter controls every prediction, so they can make two submissions that differ in
one study, or leave all predictions but one empty (the mean is then that study's score
divided by n). Replacing one study's score moves a mean over n studies by at most w / n,
where w is the width of the range a per-study score can take (1 for scores in [0, 1];
10,000 studies: 1e-4), and the 95 % CI half-width (1.96 × sample std / √n) by at most
1.96 · w / √(n (n − 1)) ≈ 1.96 · w / n (the sample std is a norm of the centred scores,
which one study moves by at most w).

Each published number is rounded to a step q, a power of ten, at least
PRIVACY_FACTOR (5) times that largest one-study change. Then
- a lone study never shows: its contribution (≤ w / n ≤ q / 5) is under half a step, so
  the empty-but-one submission publishes the value of the empty submission;
- a one-study difference changes the published value only when the unrounded value sits
  within w / n of a rounding boundary: for a value that is not known to the submitter to
  the last digit, at most 1 time in 5, and then it tells only "near a boundary"; each
  such probe costs a submission of the quota, and failed validation counts too.
Deterministic rounding cannot do better than this (a value on a boundary always flips);
it is the same guarantee for every column, whatever its range.

For ReXGradient (10,000 studies) this gives 3 decimals for the means and CIs of scores
in [0, 1] (BLEU-2, RadGraph, RaTEScore, GREEN: the ReXrank site's precision); BERTScore
and SembScore ([-1, 1]) keep 3 decimals for the mean and 2 for the CI; the mean
FineRadScore severity (0–4) and mean RadCliQ-v1 (a linear map of its components, width
≈ 6.5) get 2 decimals. The leaderboard's 1/RadCliQ-v1 and 1/FineRadScore are computed from the
rounded means, so they reveal nothing the rounded means do not. Per-study minima, maxima,
medians and standard deviations are not published (a maximum is one study's score).
"""
from __future__ import annotations

import json
import math
import re
from typing import Iterable, Sequence

from rexrank.errors import SubmissionError

# references shorter than this are phrases ("No acute findings.") that also occur in
# ordinary text; they identify nothing
MIN_LEAK_CHARS = 25
PRIVACY_FACTOR = 5
CI_FACTOR = 1.96  # the CI's one-study change relative to the mean's (see the module docstring)


def _radcliq_v1_range() -> tuple[float, float]:
    """Lowest and highest per-study RadCliQ-v1 over the component ranges below (it is
    linear in its components, so the extremes are at the corners)."""
    import numpy as np

    from rexrank.metrics.radcliq_formula import V1_COEFS, V1_MEAN, V1_SCALE

    lows = np.array([PER_STUDY_RANGE[c][0] for c in ("radgraph", "bertscore", "sembscore", "bleu2")])
    highs = np.array([PER_STUDY_RANGE[c][1] for c in ("radgraph", "bertscore", "sembscore", "bleu2")])
    slope = V1_COEFS[:4] / V1_SCALE
    at_low, at_high = slope * (lows - V1_MEAN), slope * (highs - V1_MEAN)
    return float(np.minimum(at_low, at_high).sum() + V1_COEFS[4]), float(np.maximum(at_low, at_high).sum() + V1_COEFS[4])


# The range each published per-study score can take. BLEU-2, RadGraph F1, RaTEScore,
# GREEN and the FineRadScore indicator columns lie in [0, 1] by construction, SembScore is
# a cosine similarity, FineRadScore's per-study value is a maximum severity 0-4. BERTScore
# (rescaled F1) is taken as [-1, 1]: rescaling could in theory go lower, but the official
# per-study outputs (shared/validation/moerad_iu) lie in [0.16, 1]; a study below -1 would
# move the mean by more than this assumes.
PER_STUDY_RANGE: dict[str, tuple[float, float]] = {
    "bleu2": (0.0, 1.0),
    "radgraph": (0.0, 1.0),
    "ratescore": (0.0, 1.0),
    "green": (0.0, 1.0),
    "crimson": (-1.0, 1.0),  # (-1, 1] by construction
    "bertscore": (-1.0, 1.0),
    "sembscore": (-1.0, 1.0),
    "fineradscore": (0.0, 4.0),
    "fineradscore_no_error": (0.0, 1.0),
    "fineradscore_no_actionable_error": (0.0, 1.0),
    "fineradscore_no_significant_error": (0.0, 1.0),
}
PER_STUDY_RANGE["radcliq"] = _radcliq_v1_range()


def decimals_for(width: float, n: int, *, factor: float = PRIVACY_FACTOR) -> int:
    """Decimals d such that the step 10**-d is at least `factor` × `width` / `n`."""
    return math.floor(math.log10(n / (factor * width)) + 1e-9)


def rounding_for(column: str, n_studies: int) -> dict | None:
    """{"mean": decimals, "ci95": decimals} for a score column of a private test set with
    `n_studies` studies; None for a column without a declared range (not published)."""
    if column not in PER_STUDY_RANGE or n_studies < 2:
        return None
    low, high = PER_STUDY_RANGE[column]
    width = high - low
    return {"mean": decimals_for(width, n_studies), "ci95": decimals_for(CI_FACTOR * width, n_studies)}


def _rounded(value, decimals: int):
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        return None
    return round(float(value), decimals) + 0.0  # + 0.0: no "-0.0"


def private_results(results: dict) -> dict:
    """A scoring run's results (rexrank.scoring) with every metric's scores reduced to n,
    n_missing and the rounded mean and CI (columns without a declared range: n only).
    Leaderboard values computed from it reveal nothing more than the rounded numbers."""
    n_studies = int(results.get("test_set", {}).get("n_studies") or results.get("predictions", {}).get("n") or 0)
    metrics = {}
    for name, summary in results.get("metrics", {}).items():
        scores, rounding = {}, {}
        for column, s in summary.get("scores", {}).items():
            kept = {k: s[k] for k in ("n", "n_missing") if k in s}
            rule = rounding_for(column, n_studies)
            if rule is not None:
                kept["mean"] = _rounded(s.get("mean"), rule["mean"])
                kept["ci95"] = _rounded(s.get("ci95"), rule["ci95"])
                rounding[column] = rule
            scores[column] = kept
        metrics[name] = {
            "scores": scores,
            "rounding_decimals": rounding,
            "higher_is_better": summary.get("higher_is_better"),
            **{k: summary[k] for k in ("n_studies", "n_scored", "n_failed", "seconds") if k in summary},
        }
    return {**results, "metrics": metrics}


def private_view(summary: dict) -> dict:
    """One metric's summary from `private_results`, as the result record keeps it."""
    return {k: v for k, v in summary.items() if k in ("scores", "rounding_decimals", "higher_is_better",
                                                      "n_studies", "n_scored", "n_failed", "seconds")}


def validation_message(exc: SubmissionError, n_expected: int | None) -> str:
    """A private test set's validation failure in counts: which ids are missing or
    unknown would tell a prober the test set's ids."""
    details = exc.details or {}
    parts = []
    if details.get("missing"):
        of = f" of {n_expected}" if n_expected else ""
        parts.append(f"{len(details['missing'])}{of} studies have no prediction")
    if details.get("unknown"):
        parts.append(f"{len(details['unknown'])} submitted study ids are not in the test set")
    if details.get("duplicates"):
        parts.append(f"{len(details['duplicates'])} study ids appear more than once")
    if details.get("non_string"):
        parts.append(f"{len(details['non_string'])} predictions are not strings")
    if not parts:
        parts.append("they could not be read as id/prediction pairs")
    return ("the predictions do not match the private test set: " + "; ".join(parts)
            + " (a private test set's study ids are never listed)")


_SERVER_PATH = re.compile(r"(?<![\w:/.~-])(?:~/|/)(?=[^\s/])[^\s'\"`:,;()\[\]<>]*")


def public_message(message: str, *, known_paths: Iterable[str] = (), limit: int = 2000) -> str:
    """`message` without file-system paths of the server (known ones first, then anything
    that looks like an absolute path), cut to `limit` characters."""
    for path in sorted({str(p) for p in known_paths if p and len(str(p)) > 1}, key=len, reverse=True):
        message = message.replace(path, "<server path>")
    message = _SERVER_PATH.sub("<server path>", message)
    return message[:limit]


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
