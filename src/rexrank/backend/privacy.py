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
sensitivity): with per-study scores in a range of width w (PER_STUDY_RANGE) over n
studies (L = ⌈0.99 n⌉ on the backend, see "Decisions from private data"), Δ = w / n for
the mean and 1.96 · w / √(n (n − 1)) for the CI half-width (the
sample standard deviation is a norm of the centred scores, which one study moves by at
most w / √(n − 1)). Clamping and rounding are post-processing: they cannot weaken it.

So for any two test sets that differ in one study (or any two submissions that differ in
one study's prediction), each published number has a probability distribution that
changes by at most a factor e^ε = e^0.5 ≈ 1.65. A submitter who asks one yes/no question
about one study with one published number is right with probability at most
e^ε / (1 + e^ε) ≈ 0.62 (a coin toss is 0.5); tests/backend/test_private_attack.py runs the
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

What repeated submissions cost: the ledger
------------------------------------------
Privacy losses add up (sequential composition): a submission that publishes m numbers and
takes d decisions from private data spends (m + d) · ε on every study in the worst case
(every number aimed at one study). ReXrank's metric set publishes a mean and a CI for 11
columns (BLEU-2, BERTScore, SembScore, RadGraph, RadCliQ-v1, RaTEScore, GREEN, and
FineRadScore's severity and three indicator shares), so m = 22, and one decision (the
coverage rule, below), d = 1:

    ε per submission of the full set = (22 + 1) × 0.5 = 11.5
    ledger total (LEDGER_TOTAL)       = 12 submissions × 11.5 = 138 per 365 days

The backend keeps a ledger per submitter (Hub account) and private test set in the store
(rexrank.store.ledger): every private request it takes up is charged its full cost before
scoring, whatever then happens to it (finished, failed coverage, internal error,
cancelled); a request requeued by the maintainers is charged again for its new round, and
one cancelled (`rexrank cancel`) before the backend took it up is charged too, so that
cancelling is no way around the budget. A request that would take the account's last 365
days above the total
is refused before scoring, with a message that names only the budget. Organisers can set
another total per test set in the store's config.json ("privacy_budget").

The guarantee over all of an account's submissions: everything the account can see about a
private test set in 365 days (every published number and outcome) is ε-differentially
private for each study with ε = the ledger's total, 138. Said plainly: each number or
outcome answers a yes/no question about one study right with probability at most
e^0.5 / (1 + e^0.5) ≈ 0.62, and the ledger caps how many an account gets: 276 a year.
Aimed all at one study (a majority vote over 276 answers), they can settle one question
about it; spread over studies, they learn a little about each. The total is a count that
grows with the calendar, not with how many probes a script can send. That bound is per account: one person with many
free Hub accounts has a budget per account. The list of approved submitters (config.json,
"approved_submitters") is what bounds the number of accounts, and so the set's total
exposure: (number of approved accounts) × LEDGER_TOTAL. A private test set should be open
only to approved accounts. A store without a quota and without a ledger (`--quota 0`,
"privacy_budget": 0) has no budget limit.

Decisions from private data
---------------------------
What the public sees besides the numbers is a fixed vocabulary of outcomes
(rexrank.backend.public_door). Three of them could depend on private data:

- FINISHED vs FAILED by the coverage rule: a noisy threshold. With c_m the studies metric m
  scored, k_m how many studies' references one reference can change the scores of (its
  coupling, 1 for every metric but GREEN's official batches: 8), n the track's studies and
  r the minimum coverage, the request passes if min_m (c_m − r·n) / k_m + Laplace(1 / ε)
  ≥ −M: one reference moves the minimum by at most 1, so the outcome costs ε = 0.5
  (EPSILON_DECISION). M = ln(1 / (2β)) / ε = 26.2 (COVERAGE_MARGIN, β = 1e-6) makes a
  request that meets the rule pass with probability at least 1 − β; one that misses it by
  more than about 2M = 52 studies (k_m · 52 for a coupled metric) fails almost surely, and
  in between the outcome is random. On a small private set (a few hundred studies) the
  rule is that loose: what ε costs there.
- Track membership (the findings track scores only studies with findings): a private set's
  predictions are validated against all of its ids, the same list for every track, so the
  outcome does not depend on which studies have findings; predictions for studies the
  track does not score are dropped, and their number is not published.
- Which studies a metric could score: never published (no n, n_scored, n_failed,
  n_missing, failure reasons, token lengths or timings); each mean is taken over at least
  L = ⌈r·n⌉ studies (a mean over fewer is scaled down to L), so its sensitivity is w / L
  whatever the number scored, and the noise of the table above holds with L for n. A
  metric that scored no study is the case c_m = 0 of the same rule, not an error: if the
  noisy threshold lets it through, its mean is the lowest value plus noise.

Time: publication slots
-----------------------
How long scoring takes depends on the private set: it counts the track's studies and, for
the LLM judges, grows with the references' lengths (800 vs 100 studies in the findings
track: 5.6 s vs 0.5 s as issue 37 measured it; benchmarks/publication_slot.py: 1.33 s vs
0.32 s for bleu2 and rouge). Published when scoring ended, a result's commit date minus the
scoring's start would publish that time, with no noise and no charge on the ledger. So a
private request is settled (its result written, or its failure) only at the next
publication slot after its scoring ended: the next whole hour UTC by default, or the grid
the store's config.json sets ("publication_slot": seconds, or "15m", "1h";
rexrank.backend.publication_slot). The worker waits for the slot before anything else
(the next request's start would date the end too). A private result record carries no
start or scoring time (`provenance` has no `scored_time`); its date is the submission's.
What stays public is the slot: neighbouring sets whose scoring times differ by d seconds
land in different slots with probability about d / slot (0.14 % for the 5.1 s above with
the hourly slot, 0.03 % for the benchmark's 1 s), which the ledger does not count. The
cost is latency: half a slot on average (30 min with the hourly default), at most one slot.

Workers that die scoring a private request (killed, out of memory, past their lease) leave
it RUNNING; the next worker's claim scores it again, settled at its own slot. One
interrupted `max_attempts` times is failed by the worker whose claim finds it so, at the
slot after that claim, with the door's fixed internal-error sentence (the queue fails a
public one at the claim, naming the count). The claim comes a lease after the last death,
and the death can come at a time that depends on the scoring: that time reaches the public
only as the slot, with the probability above. How often a request was interrupted is not
published either: a private record's provenance has no `attempt`.

tests/backend/test_private_door.py runs GREEN's length probe and the findings-track probe through
the leaderboard's /submit and /status, and checks what the probes one ledger allows can
learn against these bounds.

GREEN's official batches couple studies: the completion budget of each of 8 studies is
2,048 minus its batch's longest prompt, so one reference can change 8 scores. Its noise is
taken 8 times larger (Δ = 8 w / L): b ≈ 0.0016 for the mean and 0.0032 for the CI at
10,000 studies, above the third decimal, so GREEN is published to 2 decimals on
ReXGradient, unlike the other [0, 1] columns. (Scoring private sets with a length cap per
prompt would remove the coupling, at the price of GREEN numbers that differ from the
official batching on long reports; not done here.)

Noise is drawn from a generator seeded from the operating system's secure randomness
(`secrets`) for every result: no submitter can reproduce or predict it. Rounding removes
the low bits of the floating-point noise, which could otherwise leak (Mironov 2012).

Rounding: the precision, from public sizes
------------------------------------------
Each published number is rounded to a step q, a power of ten, at least PRIVACY_FACTOR
(5) times its largest one-study change (above) over the test set's total number of
studies (`public_size`: every track's studies, which the registry declares and a private
set's validation messages count against), never over the track's: decimals taken from
the track's size said whether it held 50 or 49 studies, i.e. whether one study has a
findings section, with no noise. The same holds for every other formatting decision (the
`study_coupling` said of GREEN's batches by similar length is the set's size too, which
only adds noise). For a track of n of the set's N studies the step is at least 5 n / N
times one study's change to the mean, so it can be finer than that change when the track
holds under a fifth of the set; there the noise alone hides a study (as it does
everywhere: rounding is post-processing), and the rounding still drops the noise's low
bits. For ReXGradient (10,000 studies) this gives 3
decimals for the means and CIs of scores in [0, 1] (BLEU-2, RadGraph, RaTEScore: the
ReXrank site's precision; GREEN, whose batches couple 8 studies, gets 2); BERTScore and SembScore ([-1, 1]) keep 3 decimals for the
mean and 2 for the CI; the mean FineRadScore severity (0–4) and mean RadCliQ-v1 (a linear
map of its components, width ≈ 6.5) get 2 decimals. The leaderboard's 1/RadCliQ-v1 and
1/FineRadScore are computed from the published means, so they reveal nothing more.
Per-study minima, maxima, medians and standard deviations are not published (a maximum
is one study's score), nor are counts of scored, failed or missing studies.

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
EPSILON_DECISION = 0.5  # per outcome decided from private data (the coverage rule's noisy threshold)
LEDGER_TOTAL = 138.0  # per submitter and private test set in LEDGER_DAYS: 12 submissions of 11.5
LEDGER_DAYS = 365.0
COVERAGE_BETA = 1e-6  # the chance that a request meeting the coverage rule fails it by the noise
COVERAGE_MARGIN = math.log(1 / (2 * COVERAGE_BETA)) / EPSILON_DECISION  # ≈ 26.2 studies


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


# The columns a private test set publishes, by metric (a mean and a CI each): what a
# submission's ε is counted on (`submission_cost`), so nothing else is published.
PUBLISHED_COLUMNS: dict[str, tuple[str, ...]] = {
    **{name: (name,) for name in ("bleu2", "bertscore", "sembscore", "radgraph", "radcliq", "ratescore", "green",
                                  "crimson", "rouge", "temporal_f1", "srr_bert")},
    "fineradscore": ("fineradscore", "fineradscore_no_error", "fineradscore_no_actionable_error",
                     "fineradscore_no_significant_error"),
}
DEFAULT_MIN_COVERAGE = 0.99  # the coverage rule's default share (rexrank.backend.worker)


def numbers_published(metrics: Iterable[str]) -> int:
    """How many numbers a private result of `metrics` publishes: a mean and a CI per column."""
    return 2 * sum(len(PUBLISHED_COLUMNS.get(name, ())) for name in metrics)


def submission_cost(metrics: Iterable[str]) -> float:
    """ε one private request of `metrics` spends: each published number, plus the coverage
    decision (ReXrank's full set: 22 × 0.5 + 0.5 = 11.5)."""
    return numbers_published(list(metrics)) * EPSILON + EPSILON_DECISION


def study_coupling(name: str, provenance: dict | None, n_studies: int) -> int:
    """How many studies' scores one reference can change in metric `name`: GREEN's official
    batches share a completion budget (2,048 minus the batch's longest prompt), so one
    reference moves its batch; batches by length move with every prompt (`n_studies`: on a
    private set, the test set's total, which bounds the track's and is public)."""
    config = (provenance or {}).get("config") or {}
    if name != "green":
        return 1
    cap = str(config.get("length_cap", ""))
    official = re.search(r"batch of (\d+) in input order", cap)
    if official:
        return max(1, int(official.group(1)))
    if "similar length" in cap:
        return max(1, n_studies)
    return 1


def decimals_for(width: float, n: int, *, factor: float = PRIVACY_FACTOR) -> int:
    """Decimals d such that the step 10**-d is at least `factor` × `width` / `n`."""
    return math.floor(math.log10(n / (factor * width)) + 1e-9)


def rounding_for(column: str, n_studies: int, *, coupling: int = 1) -> dict | None:
    """{"mean": decimals, "ci95": decimals} for a score column of a private test set with
    `n_studies` studies in all (`public_size`: never the track's, which is private); None
    for a column without a declared range (not published)."""
    if column not in PER_STUDY_RANGE or n_studies < 2:
        return None
    low, high = PER_STUDY_RANGE[column]
    width = (high - low) * coupling
    return {"mean": decimals_for(width, n_studies), "ci95": decimals_for(CI_FACTOR * width, n_studies)}


def sensitivity(column: str, n: int) -> dict | None:
    """The largest change one study can make to a column's mean and CI half-width over
    `n` scored studies: {"mean": w / n, "ci95": 1.96 w / √(n (n − 1))}; None without a range."""
    if column not in PER_STUDY_RANGE or n < 2:
        return None
    low, high = PER_STUDY_RANGE[column]
    width = high - low
    return {"mean": width / n, "ci95": CI_FACTOR * width / math.sqrt(n * (n - 1))}


def noise_scale(column: str, n: int, *, epsilon: float = EPSILON, coupling: int = 1) -> dict | None:
    """The Laplace scale b = coupling × sensitivity / ε of a column's mean and CI half-width."""
    delta = sensitivity(column, n)
    return None if delta is None else {k: coupling * v / epsilon for k, v in delta.items()}


def public_size(results: dict) -> int:
    """The test set's total number of studies, every track's (`n_studies` plus
    `n_studies_outside_track` of a scoring run's test set): public, unlike the track's
    size, since a private set's validation counts against all of its ids and the registry
    declares it. Every formatting decision about a private result is taken from it."""
    info = results.get("test_set") or {}
    in_track = info.get("n_studies") or (results.get("predictions") or {}).get("n") or 0
    return int(in_track) + int(info.get("n_studies_outside_track") or 0)


def floor_studies(n_studies: int, min_coverage: float = DEFAULT_MIN_COVERAGE) -> int:
    """L = ⌈r · n⌉: the fewest studies a published mean is taken over (see the docstring)."""
    return max(2, math.ceil(min_coverage * n_studies - 1e-9))


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


def _floored(summary: dict, low: float, floor: int) -> tuple:
    """(mean, CI) over the scored studies, the mean scaled down as if taken over `floor`
    studies when fewer were scored (what keeps its sensitivity at w / floor; see the
    docstring): no score at all is the lowest mean with a CI of 0, published like any other."""
    mean, ci, scored = summary.get("mean"), summary.get("ci95"), summary.get("n")
    if not isinstance(scored, int) or scored >= floor:
        return mean, ci
    if scored == 0 or not isinstance(mean, (int, float)) or not math.isfinite(mean):
        return low, 0.0
    ci = ci if isinstance(ci, (int, float)) and math.isfinite(ci) else 0.0
    return low + (mean - low) * scored / floor, ci


def private_results(results: dict, *, rng=None, epsilon: float = EPSILON,
                    min_coverage: float = DEFAULT_MIN_COVERAGE) -> dict:
    """A scoring run's results (rexrank.scoring) with every metric's scores reduced to the
    mean and CI of its PUBLISHED_COLUMNS with Laplace noise (ε per number), rounded: no
    counts, failures or timings. Each mean is over at least ⌈min_coverage · n⌉ studies
    (`floor_studies`). `rng`: a numpy Generator (default: `secure_rng()`); tests pass a
    seeded one. Leaderboard values computed from it reveal nothing more."""
    rng = secure_rng() if rng is None else rng
    n_studies = int(results.get("test_set", {}).get("n_studies") or results.get("predictions", {}).get("n") or 0)
    floor = floor_studies(n_studies, min_coverage)  # the noise's scale: the track's (noised numbers only)
    n_public = public_size(results)  # decimals and the coupling said in `privacy`: the whole set's
    metrics = {}
    for name, summary in results.get("metrics", {}).items():
        scores, rounding = {}, {}
        coupling = study_coupling(name, summary.get("provenance"), n_public)
        for column, s in summary.get("scores", {}).items():
            rule = rounding_for(column, n_public, coupling=coupling)
            scale = noise_scale(column, floor, epsilon=epsilon, coupling=coupling)
            if column not in PUBLISHED_COLUMNS.get(name, ()) or rule is None or scale is None:
                continue
            low, high = PER_STUDY_RANGE[column]
            mean, ci = _floored(s, low, floor)
            scores[column] = {
                "mean": _published(mean, scale=scale["mean"], decimals=rule["mean"], rng=rng, low=low, high=high),
                "ci95": _published(ci, scale=scale["ci95"], decimals=rule["ci95"], rng=rng, low=0.0),
            }
            rounding[column] = rule
        privacy = {"mechanism": "laplace", "epsilon_per_number": epsilon, "studies_at_least": f"{min_coverage:.0%}"}
        if coupling > 1:
            privacy["study_coupling"] = coupling
        metrics[name] = {"scores": scores, "rounding_decimals": rounding, "privacy": privacy,
                         "higher_is_better": summary.get("higher_is_better")}
    return {**results, "metrics": metrics}


def private_view(summary: dict) -> dict:
    """One metric's summary from `private_results`, as the result record keeps it."""
    return {k: v for k, v in summary.items() if k in ("scores", "rounding_decimals", "privacy", "higher_is_better")}


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
