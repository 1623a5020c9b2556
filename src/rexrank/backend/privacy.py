"""What may be published about a private test set (ReXGradient): noisy, rounded aggregates only.

`private_results` randomises and rounds a scoring run's summaries before anything is
derived from them; `private_view` keeps only aggregates; `validation_message` says what
was wrong with a submission in counts, never ids; `find_leaks` is the last check before
anything is written: no reference text may appear in it. `public_message` removes server
paths from any message a submitter sees.

Why rounding alone leaks
------------------------
A submitter controls every prediction. Leaving all predictions empty except the first k,
a binary search on k puts the published (rounded) mean on a rounding boundary; after that,
one more submission with a guess for one chosen study answers with certainty whether that
study's score crosses a threshold (whether the guess is close to its reference). Any
deterministic rounding has boundaries, so it cannot stop this.

The guarantee: ε-differential privacy per published number
---------------------------------------------------------
Every published aggregate of a private test set (each score column's mean and 95 % CI
half-width) is the true value plus Laplace noise of scale b = Δ / ε, then clamped to the
values it can take and rounded. Δ is the largest change one study can make to it (its
sensitivity): with per-study scores in a range of width w (PER_STUDY_RANGE) and n scored
studies, Δ = w / n for the mean and 1.96 · w / √(n (n − 1)) for the CI half-width (the
sample standard deviation is a norm of the centred scores, which one study moves by at
most w / √(n − 1)). Clamping and rounding are post-processing: they cannot weaken it.

So for any two test sets that differ in one study (or any two submissions that differ in
one study's prediction), each published number has a probability distribution that
changes by at most a factor e^ε = e^0.5 ≈ 1.65. A submitter who asks one yes/no question
about one study with one published number is right with probability at most
e^ε / (1 + e^ε) ≈ 0.62 (a coin toss is 0.5); tests/test_private_attack.py runs the
boundary attack above and checks it against this bound.

EPSILON = 0.5 per published number. The noise scale b (the Laplace parameter; its
standard deviation is √2 · b):

    score range (width w)          590 studies           10,000 studies
                                   mean      CI          mean      CI
    [0, 1]  BLEU-2, RadGraph, ...  0.0034    0.0066      0.0002    0.0004
    [-1, 1] BERTScore, SembScore   0.0068    0.0133      0.0004    0.0008
    0-4     FineRadScore           0.0136    0.0266      0.0008    0.0016
    RadCliQ-v1 (w ≈ 6.54)          0.0222    0.0435      0.0013    0.0026

At ReXGradient's 10,000 studies the noise on every [0, 1] and [-1, 1] mean and on the
[0, 1] CIs is below the 0.001 of ReXrank's 3 displayed decimals (RadCliQ-v1 and
FineRadScore are published at 2 decimals, above their noise).

What repeated submissions cost
------------------------------
Privacy losses add up (sequential composition): a submission that publishes m numbers
spends m · ε on every study; k submissions spend k · m · ε. ReXrank's metric set
publishes a mean and a CI for 11 columns, so m = 22 and one submission spends at most
11 on each study in the worst case (all numbers used against one study; one number
against one question: 0.5). The quota (1 submission per submitter, test set and track
in 7 days; failed validation counts) and, where organisers set it, the list of approved
submitters are what bound k: the noise is drawn afresh for every submission, identical
predictions included, so averaging many submissions works as fast as the budget says and
no faster. A store without a quota (`--quota 0`) has no budget limit.

Noise is drawn from a generator seeded from the operating system's secure randomness
(`secrets`) for every result: no submitter can reproduce or predict it. Rounding removes
the low bits of the floating-point noise, which could otherwise leak (Mironov 2012).

Rounding: the precision
-----------------------
Each published number is rounded to a step q, a power of ten, at least PRIVACY_FACTOR
(5) times its largest one-study change (above): so a lone study never shows in the
digits published even before noise. For ReXGradient (10,000 studies) this gives 3
decimals for the means and CIs of scores in [0, 1] (BLEU-2, RadGraph, RaTEScore, GREEN:
the ReXrank site's precision); BERTScore and SembScore ([-1, 1]) keep 3 decimals for the
mean and 2 for the CI; the mean FineRadScore severity (0–4) and mean RadCliQ-v1 (a linear
map of its components, width ≈ 6.5) get 2 decimals. The leaderboard's 1/RadCliQ-v1 and
1/FineRadScore are computed from the published means, so they reveal nothing more.
Per-study minima, maxima, medians and standard deviations are not published (a maximum
is one study's score); the counts n and n_missing are published as they are.

The guarantee assumes each per-study score lies in its declared range (PER_STUDY_RANGE);
scores are not clipped to it.
"""
from __future__ import annotations

import json
import math
import re
import secrets
from typing import Iterable, Sequence

from rexrank.errors import SubmissionError

# references shorter than this are phrases ("No acute findings.") that also occur in
# ordinary text; they identify nothing
MIN_LEAK_CHARS = 25
PRIVACY_FACTOR = 5
CI_FACTOR = 1.96  # the CI's one-study change relative to the mean's (see the module docstring)
EPSILON = 0.5  # privacy loss per published number (see the module docstring)


def _radcliq_v1_range() -> tuple[float, float]:
    """Lowest and highest per-study RadCliQ-v1 over the component ranges below."""
    from rexrank.metrics.radcliq_formula import radcliq_v1_extremes

    return radcliq_v1_extremes(**{part: PER_STUDY_RANGE[column] for part, column in
                                  (("radgraph", "radgraph"), ("bertscore", "bertscore"), ("semb", "sembscore"),
                                   ("bleu2", "bleu2"))})


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
    "rouge": (0.0, 1.0),  # F1 values
    "temporal_f1": (0.0, 1.0),
    "srr_bert": (0.0, 1.0),
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


def sensitivity(column: str, n: int) -> dict | None:
    """The largest change one study can make to a column's mean and CI half-width over
    `n` scored studies: {"mean": w / n, "ci95": 1.96 w / √(n (n − 1))}; None without a range."""
    if column not in PER_STUDY_RANGE or n < 2:
        return None
    low, high = PER_STUDY_RANGE[column]
    width = high - low
    return {"mean": width / n, "ci95": CI_FACTOR * width / math.sqrt(n * (n - 1))}


def noise_scale(column: str, n: int, *, epsilon: float = EPSILON) -> dict | None:
    """The Laplace scale b = sensitivity / ε of a column's mean and CI half-width."""
    delta = sensitivity(column, n)
    return None if delta is None else {k: v / epsilon for k, v in delta.items()}


def secure_rng():
    """A generator seeded from the operating system's secure randomness: a submitter can
    neither reproduce nor predict its draws."""
    import numpy as np

    return np.random.default_rng(secrets.randbits(128))


def _published(value, *, scale: float, decimals: int, rng, low: float = -math.inf, high: float = math.inf):
    """value + Laplace(scale), clamped to [low, high], rounded; None for a missing value."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        return None
    noisy = min(max(float(value) + float(rng.laplace(0.0, scale)), low), high)
    return round(noisy, decimals) + 0.0  # + 0.0: no "-0.0"


def private_results(results: dict, *, rng=None, epsilon: float = EPSILON) -> dict:
    """A scoring run's results (rexrank.scoring) with every metric's scores reduced to n,
    n_missing and the mean and CI with Laplace noise (ε per number), rounded (columns
    without a declared range: n only). `rng`: a numpy Generator (default: `secure_rng()`);
    tests pass a seeded one. Leaderboard values computed from it reveal nothing more."""
    rng = secure_rng() if rng is None else rng
    n_studies = int(results.get("test_set", {}).get("n_studies") or results.get("predictions", {}).get("n") or 0)
    metrics = {}
    for name, summary in results.get("metrics", {}).items():
        scores, rounding, scales = {}, {}, {}
        for column, s in summary.get("scores", {}).items():
            kept = {k: s[k] for k in ("n", "n_missing") if k in s}
            rule = rounding_for(column, n_studies)
            # fewer scored studies than the test set has: each moves the mean more
            n = min(int(s["n"]), n_studies) if s.get("n") else n_studies
            scale = noise_scale(column, n, epsilon=epsilon)
            if rule is not None and scale is not None:
                low, high = PER_STUDY_RANGE[column]
                kept["mean"] = _published(s.get("mean"), scale=scale["mean"], decimals=rule["mean"], rng=rng,
                                          low=low, high=high)
                kept["ci95"] = _published(s.get("ci95"), scale=scale["ci95"], decimals=rule["ci95"], rng=rng, low=0.0)
                rounding[column] = rule
                scales[column] = {k: float(f"{v:.3g}") for k, v in scale.items()}
            scores[column] = kept
        metrics[name] = {
            "scores": scores,
            "rounding_decimals": rounding,
            "privacy": {"mechanism": "laplace", "epsilon_per_number": epsilon, "noise_scale": scales},
            "higher_is_better": summary.get("higher_is_better"),
            **{k: summary[k] for k in ("n_studies", "n_scored", "n_failed", "seconds") if k in summary},
        }
    return {**results, "metrics": metrics}


def private_view(summary: dict) -> dict:
    """One metric's summary from `private_results`, as the result record keeps it."""
    return {k: v for k, v in summary.items() if k in ("scores", "rounding_decimals", "privacy", "higher_is_better",
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
