"""The one door: everything the public can see about a request is built here, for public
and private test sets alike: the result record (with its provenance), the coverage
decision, the failure messages, the `/status` answer and the notes. Nothing else writes
them (the worker and the leaderboard call these functions).

On a private test set (rexrank.backend.privacy explains the guarantee) the door admits:
- the mean and CI of each published column, with Laplace noise (`privacy.private_results`);
- outcomes from a fixed vocabulary: FINISHED, or FAILED with one of the messages below;
  which one depends on private data through the coverage rule's noisy threshold
  (`coverage_failure`), which spends EPSILON_DECISION, and otherwise only through a bug
  (an internal error, said in one fixed sentence, is not accounted for);
- validation failures in counts against the set's full id list (the same list for every
  track, rexrank.backend.public_door.check_private_ids), which depend only on the
  submitter's own file and that list;
- what the submitter filed (model name, their own file's row and empty counts, its sha).
It admits no counts of scored, failed, missing or out-of-track studies, no token lengths,
no timings and no text of an exception raised while scoring. Its time is its publication
slot (rexrank.backend.publication_slot): the worker settles a private request only then,
and the record carries no start or scoring time; every decimal is taken from the test
set's total size (`privacy.public_size`), never the track's. `PUBLIC_FIELDS` lists every
field a private request's public answers may hold; tests/backend/test_public_door.py fails when a
new one appears without a decision about it.
"""
from __future__ import annotations

from collections import Counter
from typing import Iterable

from rexrank.backend import privacy as P
from rexrank.errors import MetricError, ReaderKilled, RexrankError, SubmissionError
from rexrank.store import records as R
from rexrank.store.accounts import Account

PRIVATE_INTERNAL_ERROR = (
    "scoring failed with an internal error on the private test set; details are kept out of the "
    "public queue — contact the maintainers with this request id"
)
PRIVATE_COVERAGE_FAILED = (
    "below the coverage rule on the private test set: a metric scored fewer studies than the rule asks "
    f"(decided with a noisy threshold, ε = {P.EPSILON_DECISION:g}; which metric and how many studies are not "
    "published). Nothing was published; the maintainers can requeue this request once the cause is fixed."
)
PRIVATE_OUTCOMES = (PRIVATE_COVERAGE_FAILED, PRIVATE_INTERNAL_ERROR)  # with validation counts and budget refusals
COVERAGE_TAIL = (". Nothing was published. The answers already received are kept in the cache: the maintainers "
                 "can requeue this request once the cause is fixed, and only the missing studies are scored again.")


class CoverageError(RexrankError):
    """A metric scored fewer studies than the coverage rule asks: nothing is published.
    `without_causes`: the same message without the failure reasons."""

    def __init__(self, message: str, *, without_causes: str):
        super().__init__(message)
        self.without_causes = without_causes


def is_private(test_set: str) -> bool:
    """From the test-set registry, never from the request (whose writer chose its fields)."""
    from rexrank.store.policy import is_private as registry_private

    return registry_private(test_set)


# ---- the coverage rule -------------------------------------------------------------------

def _scored(summary: dict, n: int) -> int:
    scored = summary.get("n_scored")
    return n - summary.get("n_failed", n) if scored is None else scored


def coverage_failure(results: dict, metrics: Iterable[str], *, min_coverage: float, private: bool,
                     rng=None) -> CoverageError | None:
    """The coverage rule (each metric scores at least `min_coverage` of the studies): the
    CoverageError to fail the request with, or None. On a private test set the decision is
    a noisy threshold (rexrank.backend.privacy, "Decisions from private data") and the
    message is the fixed PRIVATE_COVERAGE_FAILED."""
    metrics = list(metrics)
    if private:
        return _private_coverage(results, metrics, min_coverage=min_coverage, rng=rng)
    short, causes = [], []
    for name in metrics:  # a metric of the set with no summary did not run: not a silent pass
        if name not in results["metrics"]:
            short.append(f"{name} scored 0 studies")
            causes.append("it did not run")
    for name, summary in results["metrics"].items():
        n = summary.get("n_studies") or results["predictions"]["n"]
        scored = _scored(summary, n)
        if n and scored / n < min_coverage:
            short.append(f"{name} scored {scored} of {n} studies ({scored / n:.1%})")
            causes.append(_causes(summary.get("failures") or {}))
    if not short:
        return None
    head = f"below the coverage rule (each metric must score at least {min_coverage:.0%} of the studies): "
    return CoverageError(head + "; ".join(f"{s}; cause: {c}" for s, c in zip(short, causes)) + COVERAGE_TAIL,
                         without_causes=head + "; ".join(short) + COVERAGE_TAIL)


def _private_coverage(results: dict, metrics: list[str], *, min_coverage: float, rng) -> CoverageError | None:
    n = int(results.get("test_set", {}).get("n_studies") or results["predictions"]["n"])
    gaps = []
    for name in dict.fromkeys([*metrics, *results["metrics"]]):
        summary = results["metrics"].get(name)
        scored = 0 if summary is None else _scored(summary, n)
        coupling = P.study_coupling(name, (summary or {}).get("provenance"), n)
        gaps.append((scored - min_coverage * n) / coupling)  # one reference moves it by at most 1
    rng = P.secure_rng() if rng is None else rng
    if not gaps or min(gaps) + float(rng.laplace(0.0, 1.0 / P.EPSILON_DECISION)) >= -P.COVERAGE_MARGIN:
        return None
    return CoverageError(PRIVATE_COVERAGE_FAILED, without_causes=PRIVATE_COVERAGE_FAILED)


def _causes(failures: dict, *, shown: int = 3) -> str:
    """The most common failure reasons with counts (public test sets only)."""
    if not failures:
        return "no per-study reasons were recorded"
    reasons = Counter(" ".join(str(why).split())[:200] for why in failures.values())
    return ", ".join(f"{n} × {why}" for why, n in reasons.most_common(shown)) + (
        f" and {len(reasons) - shown} other reason(s)" if len(reasons) > shown else ""
    )


# ---- validation on a private set -----------------------------------------------------------

def check_private_ids(predictions_file, studies, *, title: str) -> None:
    """A private set's predictions against ALL of its ids, whatever the track (`studies`: the
    track's, rexrank.testsets.loading.TrackStudies, with the set's other ids): leaving out a
    study fails the same way whether or not the track scores it (SubmissionError with
    counts, rendered by `failure`)."""
    from rexrank.submissions import read_raw_predictions, validate_predictions

    every_id = sorted({*studies.ids, *studies.outside_ids})
    validate_predictions(read_raw_predictions(predictions_file), every_id, test_set=title)


# ---- the result record -----------------------------------------------------------------------

def predictions_provenance(request: dict, results: dict, *, private: bool) -> dict:
    """How a result names the predictions it scored. A dataset filed as private
    (`predictions.public` not True, decided when it was filed) is "a private dataset at commit SHA"
    with its content sha, enough for its owner to verify; on a private test set only the
    submitter's own file's counts (not those of the track's studies)."""
    filed = request["predictions"]
    info = {"sha256": filed["sha256"], "source": R.public_predictions_source(filed)}
    if private:
        return {**info, "n": filed.get("n"), "n_empty": filed.get("n_empty")}
    preds = results["predictions"]
    return {**info, "n": preds["n"], "n_empty": preds["n_empty"], "n_not_in_track": preds["n_not_in_track"],
            "empty_ids": preds["empty_ids"]}


PRIVATE_TEST_SET_FIELDS = ("name", "title", "split", "track", "access")


def result_record(request: dict, results: dict, *, private: bool, worker_id: str, not_scored: dict[str, str],
                  version: str, min_coverage: float = P.DEFAULT_MIN_COVERAGE, rng=None) -> dict:
    """The result record of a scored request (rexrank.results_schema format)."""
    from rexrank.results_schema import leaderboard_values

    # checkpoint and model files by their base names: the server's folders are not published
    provenance = R.public_paths({name: s["provenance"] for name, s in results["metrics"].items()})
    test_set = dict(results["test_set"])
    if private:  # noised and rounded before anything is derived from it
        results = P.private_results(results, rng=rng, min_coverage=min_coverage)
        summaries = {name: P.private_view(s) for name, s in results["metrics"].items()}
        # the track's size and its references' hash are facts of the private data
        test_set = {k: test_set[k] for k in PRIVATE_TEST_SET_FIELDS if k in test_set}
    else:
        summaries = {name: {k: v for k, v in s.items() if k != "provenance"} for name, s in results["metrics"].items()}
    return {
        "id": request["id"],
        "request_id": request["id"],
        "model_name": request["model_name"],
        "institution": request.get("institution", ""),
        "model_url": request.get("model_url", ""),
        "submitter": request["submitter"],
        # the model's identity is its namespace and name (rexrank.store.accounts); a linked Hub model repo
        "namespace": request.get("namespace") or request["submitter"],
        **({"model_repo": request["model_repo"]} if request.get("model_repo") else {}),
        "date": request["submitted_time"][:10],
        "test_set": request["test_set"],
        "track": request["track"],
        "source": "rexrank",
        "trained_on": request.get("trained_on", []),
        "per_study_available": False,
        "values": leaderboard_values(results),
        **({"not_scored": dict(not_scored)} if not_scored else {}),  # metrics this backend could not run, and why
        "summaries": summaries,
        "provenance": {
            "rexrank_version": version,
            # when scoring started: on a private set, with the results commit's date, how long
            # it took (rexrank.backend.publication_slot); its result is dated by its slot only
            **({} if private else {"scored_time": results["created"]}),
            "python": results.get("python"),
            "worker": worker_id,
            # how often scoring was interrupted (a crash can depend on the track): public sets only
            **({} if private else {"attempt": request.get("attempts")}),
            "metrics": provenance,
            "test_set": test_set,
            "predictions": predictions_provenance(request, results, private=private),
            "statistics": results.get("statistics"),
        },
    }


# ---- failures ----------------------------------------------------------------------------------

def failure(request: dict, exc: BaseException, *, known_paths: Iterable[str] = (),
            private: bool | None = None) -> tuple[str, str]:
    """(what the submitter sees, failure kind). Never a server path; on a private test set
    only the fixed vocabulary: validation in counts, else PRIVATE_OUTCOMES. `private`: the
    test set's access when the caller has resolved it already."""
    from rexrank.testsets.registry import get_spec

    if private is None:
        try:
            private = get_spec(request["test_set"]).private
        except RexrankError:
            private = False
    if isinstance(exc, SubmissionError) and not isinstance(exc, ReaderKilled):  # (that one is the machine's)
        kind = R.VALIDATION
        message = (P.validation_message(exc, exc.details.get("n_expected")) if private
                   else f"the predictions do not match the test set: {exc}")
    elif isinstance(exc, CoverageError):
        kind, message = R.COVERAGE, (PRIVATE_COVERAGE_FAILED if private else str(exc))
    elif isinstance(exc, MetricError):
        # a metric that cannot run scores no study: the coverage rule's case (nothing published;
        # the maintainers requeue it once the cause is fixed). On a private set the backend
        # scores with nothing_scored_is_error=False, so this is a metric that could not start
        # (no weights): a fact of the server, said in the same words as the coverage rule.
        kind = R.COVERAGE
        message = PRIVATE_COVERAGE_FAILED if private else (
            f"a metric of this backend's set could not run, so it scored none of the studies: {exc}. Nothing was "
            "published; the maintainers can requeue this request once the cause is fixed.")
    else:
        kind = R.INTERNAL
        message = PRIVATE_INTERNAL_ERROR if private else f"internal error while scoring ({type(exc).__name__}: {exc})"
    return P.public_message(message, known_paths=known_paths), kind


def policy_refusal(problem: str) -> str:
    """A request the submission rules refuse (quota, names, approval): facts of the queue."""
    return f"refused: {problem}"


def budget_refusal(request: dict, refusal) -> str:
    """A private request the ledger cannot pay for: the budget's figures only (they follow
    from the account's earlier requests, not from the test set)."""
    head = (f"refused: this request would spend ε {refusal.cost:g} on {request['test_set']}, and "
            f"{request['submitter']} has spent {refusal.spent:g} of its {refusal.total:g} in the last 365 days "
            f"(the privacy budget of a private test set)")
    if refusal.cost > refusal.total:
        return head + "; no request of this size fits: ask the organisers for a smaller metric set or a larger budget"
    return head + f"; the next request of this size fits after {refusal.next_fit}"


def request_cost(metrics: Iterable[str]) -> tuple[float, int]:
    """(ε, numbers published) of one private request scored with `metrics`."""
    metrics = list(metrics)
    return P.submission_cost(metrics), P.numbers_published(metrics)


def _store_request_cost(store) -> tuple[float, int]:
    from rexrank.store.config import REXRANK_SET, recorded_set

    return request_cost((recorded_set(store) or REXRANK_SET).all)


def charge_cancelled(store, request: dict) -> None:
    """A cancelled request on a private set is charged like one the backend scored (once;
    one the backend had taken up is charged already): cancelling is no way around the ledger.
    Only a PENDING or RUNNING request can be cancelled (Store.cancel), the states a worker
    takes up (Store.claim); a HELD one is rejected instead, never taken up nor charged."""
    from rexrank.store import ledger

    if not is_private(request["test_set"]):
        return
    cost, numbers = _store_request_cost(store)
    ledger.charge(store, request, cost=cost, numbers=numbers, decisions=1, limit=ledger.Budget(0.0, P.LEDGER_DAYS))


def filing_budget_problem(store, *, submitter: Account | str, test_set: str,
                          now: float | None = None) -> str | None:
    """At filing (a courtesy: the backend charges and checks again before scoring): the
    refusal if the submitter's ledger (an account, by its id; a name on a local store)
    cannot pay for a request of the store's metric set."""
    from rexrank.store import ledger

    if not is_private(test_set):
        return None
    limit = ledger.budget(store, test_set, default_total=P.LEDGER_TOTAL, days=P.LEDGER_DAYS)
    if limit.total <= 0:
        return None
    cost, _ = _store_request_cost(store)
    charges = ledger.charges(store, submitter, test_set)
    ts = R.now() if now is None else now
    spent = limit.spent(charges, ts)
    if spent + cost <= limit.total + 1e-9:
        return None
    refusal = ledger.Refusal(spent, limit.total, cost, limit.next_fit(charges, cost, ts))
    return budget_refusal({"test_set": test_set, "submitter": getattr(submitter, "name", submitter)}, refusal)


def notes(not_scored: dict[str, str]) -> list[str]:
    """The request's notes: metrics of the store's set this backend could not run, and why."""
    return [f"{name} was not scored: {why}" for name, why in not_scored.items()]


# ---- what /status and /submit answer ---------------------------------------------------------

PUBLIC_PREDICTION_FIELDS = ("revision", "n", "n_empty", "ids_checked")


def public_request(request: dict, *, own: bool = False) -> dict:
    """What anyone may read of a request (`rexrank status --leaderboard`): never the worker,
    lease, stored paths or the dataset's name (it may be private). `own`: for the submitter
    who just filed it (`/submit`'s answer), the dataset's name and commit too."""
    p = request.get("predictions") or {}
    return {
        "id": request["id"],
        "status": request["status"],
        "model_name": request["model_name"],
        "test_set": request["test_set"],
        "track": request["track"],
        "submitter": request["submitter"],
        "namespace": request.get("namespace") or request["submitter"],
        "submitted_time": request["submitted_time"],
        "predictions": {k: p[k] for k in (("source", "repo") if own else ()) + PUBLIC_PREDICTION_FIELDS if k in p},
        "error": P.public_message(request["error"]) if request.get("error") else None,
    }


def status_answer(request: dict, result: dict | None) -> dict:
    """`/status`: {"found", "request" (public fields), "results", "notes", "error"}."""
    return {"found": True, "error": None, "request": public_request(request),
            "results": result.get("values") if result else None, "notes": list(request.get("notes") or [])}


# Every field of a private request's public answers, and why it may be public. The test of
# this module walks what the door emits and fails on a field not listed here.
PUBLIC_FIELDS = {
    "status": {"found", "error", "request", "results", "notes"},
    "request": {"id", "status", "model_name", "test_set", "track", "submitter", "namespace", "submitted_time",
                "predictions", "error"},  # error: the fixed vocabulary, validation counts or "held for review"
    "request.predictions": {"source", "repo", *PUBLIC_PREDICTION_FIELDS},  # the submitter's own file
    "values": {"mean", "ci95", "n"},  # n: None on a private set
    "record": {"id", "request_id", "model_name", "institution", "model_url", "submitter", "namespace", "model_repo",
               "date", "test_set", "track", "source", "trained_on", "per_study_available", "values", "not_scored",
               "summaries", "provenance"},
    "summary": {"scores", "rounding_decimals", "privacy", "higher_is_better"},
    "summary.scores": {"mean", "ci95"},  # noised
    "summary.privacy": {"mechanism", "epsilon_per_number", "studies_at_least", "study_coupling"},  # public settings
    "provenance": {"rexrank_version", "python", "worker", "metrics", "test_set", "predictions", "statistics"},
    "provenance.test_set": set(PRIVATE_TEST_SET_FIELDS),
    "provenance.predictions": {"sha256", "source", "revision", "n", "n_empty"},  # the submitter's own file
}
