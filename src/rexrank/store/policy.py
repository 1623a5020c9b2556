"""Submission rules checked against the queue and the published results: quota, identical
resubmissions, model-name ownership and visible names. The submitting client checks them
as a courtesy; the backend checks them again before scoring (`check_policy`), so a client
that skips them (`--quota 0`, REXRANK_QUOTA, an edited queue file) gains nothing."""
from __future__ import annotations

import os
from dataclasses import dataclass

from rexrank.errors import SubmissionError
from rexrank.store.names import check_name, check_one_script, check_submitter, check_url, display, name_key, same_name
from rexrank.store.records import CANCELLED, COVERAGE, FAILED, INTERNAL, REFUSED, VALIDATION, iso, parse_iso



@dataclass(frozen=True)
class Quota:
    """At most `limit` submissions per submitter, test set and track in `days` days
    (FAILED requests do not count, except cancelled ones and failed validation on a
    private test set).
    `limit <= 0` disables the quota."""

    limit: int = 1
    days: float = 7.0

    @classmethod
    def from_env(cls) -> "Quota":
        """REXRANK_QUOTA="N/DAYS" (e.g. "1/7", "0" to disable)."""
        return cls.parse(os.environ.get("REXRANK_QUOTA", ""))

    @classmethod
    def parse(cls, text: str) -> "Quota":
        text = text.strip()
        if not text:
            return cls()
        limit, _, days = text.partition("/")
        try:
            return cls(int(limit), float(days) if days else 7.0)
        except ValueError:
            raise SubmissionError(f"REXRANK_QUOTA={text!r}: expected N/DAYS, e.g. 1/7") from None


def account_key(name: str) -> str:
    """A Hub user or organisation name as the Hub tells accounts apart: spelt exactly, case
    aside (the Hub resolves `MBZUAI/...` and `mbzuai/...` to one repo: huggingface_hub issue
    #1453). Never the lookalike skeleton of model names: `stanford-aiml` and `stanford-aimi`
    are two accounts, and whoami has verified which one is submitting."""
    return str(name).strip().lower()


def same_submitter(a: str, b: str) -> bool:
    """Submitters, approved lists and the quota compare Hub accounts (account_key)."""
    return account_key(a) == account_key(b)


def is_private(test_set: str) -> bool:
    """From the test-set registry, never from a request (whose writer chose its fields)."""
    from rexrank.testsets.registry import TEST_SETS

    spec = TEST_SETS.get(test_set)
    return bool(spec is not None and spec.private)


def counts_for_quota(request: dict) -> bool:
    """FAILED requests do not use up the quota, except a cancelled one (cancelling must not
    be a way to retry for free) and, on a private test set, any failure after filing but a
    refusal (validation, coverage, internal): otherwise each failed probe would be a free
    question about its studies."""
    if request["status"] != FAILED:
        return True
    kind = request.get("failure_kind")
    return kind == CANCELLED or (kind in (VALIDATION, COVERAGE, INTERNAL) and is_private(request["test_set"]))


def check_quota(requests: list[dict], *, submitter: str, test_set: str, track: str, now: float, quota: Quota) -> None:
    """`requests`: those that count before the one being checked (dated `now`); the
    window reaches both ways, so dating a request back does not escape it."""
    if quota.limit <= 0:
        return
    window = quota.days * 86400
    recent = sorted(
        r["submitted_time"]
        for r in requests
        if same_submitter(r["submitter"], submitter)
        and r["test_set"] == test_set
        and r["track"] == track
        and counts_for_quota(r)
        and abs(parse_iso(r["submitted_time"]) - now) < window
    )
    if len(recent) >= quota.limit:
        next_ok = iso(parse_iso(recent[-quota.limit]) + quota.days * 86400)
        raise SubmissionError(
            f"submitter {display(submitter)!r} already has {len(recent)} submission(s) on {test_set}/{track} in the last "
            f"{quota.days:g} days (limit {quota.limit}); next submission possible after {next_ok}"
        )


def check_duplicate(requests: list[dict], *, model_name: str, sha256: str, test_set: str, track: str) -> None:
    for r in requests:
        if (
            r["predictions"]["sha256"] == sha256
            and same_name(r["model_name"], model_name)
            and r["test_set"] == test_set
            and r["track"] == track
            and r["status"] != FAILED
        ):
            raise SubmissionError(
                f"identical resubmission: request {r['id']} ({r['status']}) already has these predictions "
                f"for model {display(r['model_name'])!r} on {test_set}/{track}"
            )


def check_copied(requests: list[dict], *, submitter: str, sha256: str, test_set: str, track: str) -> None:
    """Predictions another submitter already filed (the same content, test set and track)
    are theirs: refused, by a message that names nothing of their filing (not its id, model,
    submitter or date)."""
    for r in requests:
        if (r["predictions"]["sha256"] == sha256 and r["test_set"] == test_set and r["track"] == track
                and r["status"] != FAILED and not same_submitter(r["submitter"], submitter)):
            raise SubmissionError(
                f"these predictions are identical to predictions another submitter filed on {test_set}/{track}: "
                "submit your own model's predictions")


def check_dataset_owner(repo_id: str, *, submitter: str, owners) -> None:
    """A predictions dataset on the Hub must belong to the submitter or one of their
    organisations (`owners`: the accounts whoami names for the submitter's token); checked
    before the Hub is asked anything about it."""
    namespace = repo_id.split("/", 1)[0]
    if not any(same_submitter(namespace, owner) for owner in owners):
        raise SubmissionError(
            f"the dataset {repo_id} belongs to {display(namespace)!r}, not to {display(submitter)!r} or one of their "
            f"organisations: submit predictions from a dataset of your own (e.g. {display(submitter)}/REPO)")


def name_owner(requests: list[dict], results: list[dict], model_name: str) -> tuple[str, str] | None:
    """Who a model name belongs to: ("published", label) when a published ReXrank entry
    has it, else ("submitter", name) of the first request that used it (a refused or
    cancelled request claims nothing); None when the name is free."""
    key = name_key(model_name)
    for r in results:
        if r.get("source") == "published" and name_key(str(r.get("model_name", ""))) == key:
            return "published", str(r["model_name"])
    earliest = None
    for r in requests:
        if r.get("failure_kind") in (REFUSED, CANCELLED) or name_key(r["model_name"]) != key:
            continue
        if earliest is None or (r["submitted_time"], r["id"]) < (earliest["submitted_time"], earliest["id"]):
            earliest = r
    for r in results:  # results outlive a cleaned queue
        if r.get("source") == "rexrank" and r.get("submitter") and name_key(str(r.get("model_name", ""))) == key:
            if earliest is None:
                earliest = {"submitter": r["submitter"]}
    return ("submitter", earliest["submitter"]) if earliest else None


def check_owner(requests: list[dict], results: list[dict], *, model_name: str, submitter: str) -> None:
    owner = name_owner(requests, results, model_name)
    if owner is None:
        return
    kind, who = owner
    if kind == "published":
        raise SubmissionError(
            f"model name {display(model_name)!r} is the published ReXrank entry {display(who)!r}; choose a name of your own "
            "(names are compared ignoring case, width, invisible characters and lookalike letters)"
        )
    if not same_submitter(who, submitter):
        raise SubmissionError(
            f"model name {display(model_name)!r} belongs to another submitter, who used it first; choose a name of your own "
            "(names are compared ignoring case, width, invisible characters and lookalike letters)"
        )


def check_names(*, model_name: str, submitter: str, institution: str = "", model_url: str = "") -> None:
    """Names as the leaderboard can show them (rexrank.store.names: the visible repertoire,
    nothing a spreadsheet reads as a formula); a submitter is a Hub user or organisation
    name; a model URL is http(s)."""
    check_submitter(submitter)
    check_name("model name", model_name)
    if institution:
        check_name("institution", institution)
    check_url("model URL", model_url or "")


def check_policy(
    earlier: list[dict], results: list[dict], request: dict, *, now: float, quota: Quota
) -> None:
    """Every rule a request must pass against the requests filed before it and the
    published results (the client checks it when filing, the backend again before scoring)."""
    check_names(model_name=request["model_name"], submitter=request["submitter"],
                institution=request.get("institution", ""), model_url=request.get("model_url", ""))
    check_owner(earlier, results, model_name=request["model_name"], submitter=request["submitter"])
    check_duplicate(earlier, model_name=request["model_name"], sha256=request["predictions"]["sha256"],
                    test_set=request["test_set"], track=request["track"])
    check_copied(earlier, submitter=request["submitter"], sha256=request["predictions"]["sha256"],
                 test_set=request["test_set"], track=request["track"])
    check_quota(earlier, submitter=request["submitter"], test_set=request["test_set"], track=request["track"],
                now=now, quota=quota)
    for label, value in (("model name", request["model_name"]), ("institution", request.get("institution") or "")):
        check_one_script(label, value)


def check_approved(approved: list[str] | None, *, submitter: str, test_set: str) -> None:
    """`approved`: the submitters the store's organisers approved for `test_set`
    (rexrank.store.config.approved_submitters); None = open to all."""
    if approved is not None and not any(same_submitter(a, submitter) for a in approved):
        raise SubmissionError(
            f"test set {test_set} accepts submissions only from submitters approved by its organisers, and "
            f"{display(submitter)!r} is not one of them; ask the organisers to be added"
        )
