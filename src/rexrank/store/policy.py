"""Submission rules checked against the queue: visible names, identical resubmissions and
the quota. Who is who is the Hub account's immutable id (rexrank.store.accounts). A model's
name belongs to its namespace (the submitter or one of their organisations): two
namespaces may both have "CheXagent-3", nobody owns a bare name, and lookalikes are
annotated on the board (rexrank.leaderboard.records), not refused. Predictions another
party had first are held for the maintainers' review (rexrank.store.copies), judged after
every rule here, so that a filing these rules refuse learns nothing of anyone's.

The submitting client checks them as a courtesy; the backend checks them again before
scoring (`check_policy`), so a client that skips them (`--quota 0`, REXRANK_QUOTA, an
edited queue file) gains nothing.

The quota: an explicit `--quota` (or REXRANK_QUOTA) wins; else the store's config.json key
"quota" ("N/DAYS"); else a Hub store has ReXrank's 1 per 7 days (a public service) and a
local store none (one person's folder protects nothing).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from rexrank.errors import SubmissionError
from rexrank.store.accounts import Account, account_key, namespace_key, namespace_of, submitter_of
from rexrank.store.names import check_name, check_one_script, check_submitter, check_url, display, model_title, name_key
from rexrank.store.records import CANCELLED, COVERAGE, FAILED, INTERNAL, REJECTED, VALIDATION, iso, parse_iso

QUOTA_KEY = "quota"  # config.json: "N/DAYS"
QUOTA_ENV = "REXRANK_QUOTA"
QUOTA_SETTINGS = f'--quota or the store\'s config.json key "{QUOTA_KEY}"'


@dataclass(frozen=True)
class Quota:
    """At most `limit` submissions per submitter (its Hub account's id), test set and track in
    `days` days; what counts is `counts_for_quota`'s (every request but a FAILED one, except
    that a cancelled or rejected one counts, and on a private test set so does one that failed
    validation, coverage or with an internal error). `limit <= 0` disables the quota. `origin`: where it was set, which a refusal
    names (so that whoever can change it knows where)."""

    limit: int = 1
    days: float = 7.0
    origin: str = field(default=f"set with {QUOTA_SETTINGS}", compare=False)

    @classmethod
    def from_env(cls) -> "Quota":
        """REXRANK_QUOTA="N/DAYS" (e.g. "1/7", "0" to disable); ReXrank's 1/7 when unset."""
        return cls.env_setting() or cls(origin=f"ReXrank's for a public service; its organisers change it with {QUOTA_SETTINGS}")

    @classmethod
    def env_setting(cls) -> "Quota | None":
        text = os.environ.get(QUOTA_ENV, "").strip()
        return cls.parse(text, where=QUOTA_ENV, origin=f"set by {QUOTA_ENV} (or --quota)") if text else None

    @classmethod
    def parse(cls, text: str, *, where: str = QUOTA_ENV, origin: str = "set with --quota") -> "Quota":
        """"N/DAYS" (e.g. "1/7"; "N" is N per 7 days; "0" disables it); `where` names the
        setting in an error."""
        text = str(text).strip()
        if not text:
            return cls(origin=origin)
        limit, _, days = text.partition("/")
        try:
            return cls(int(limit), float(days) if days else 7.0, origin=origin)
        except ValueError:
            raise SubmissionError(f"{where}={text!r}: expected N/DAYS, e.g. 1/7") from None


def same_submitter(a: str, b: str) -> bool:
    """Account names compared as the Hub compares them (account_key)."""
    return account_key(a) == account_key(b)


def is_private(test_set: str) -> bool:
    """From the test-set registry, never from a request (whose writer chose its fields)."""
    from rexrank.testsets.registry import TEST_SETS

    spec = TEST_SETS.get(test_set)
    return bool(spec is not None and spec.private)


def counts_for_quota(request: dict) -> bool:
    """FAILED requests do not use up the quota, except a cancelled or a rejected one
    (cancelling, or filing someone else's predictions, must not be a way to retry for
    free) and, on a private test set, any failure after filing but a refusal (validation,
    coverage, internal): otherwise each failed probe would be a free question about its
    studies. A request held for review counts."""
    if request["status"] != FAILED:
        return True
    kind = request.get("failure_kind")
    return kind in (CANCELLED, REJECTED) or (kind in (VALIDATION, COVERAGE, INTERNAL) and is_private(request["test_set"]))


def check_quota(requests: list[dict], *, submitter: Account, test_set: str, track: str, now: float,
                quota: Quota) -> None:
    """`requests`: those that count before the one being checked (dated `now`); the
    window reaches both ways, so dating a request back does not escape it. Requests are
    the submitter's by id (rexrank.store.accounts), whatever name they were filed under."""
    if quota.limit <= 0:
        return
    window = quota.days * 86400
    recent = sorted(
        r["submitted_time"]
        for r in requests
        if submitter_of(r).key == submitter.key
        and r["test_set"] == test_set
        and r["track"] == track
        and counts_for_quota(r)
        and abs(parse_iso(r["submitted_time"]) - now) < window
    )
    if len(recent) >= quota.limit:
        next_ok = iso(parse_iso(recent[-quota.limit]) + quota.days * 86400)
        raise SubmissionError(
            f"submitter {display(submitter.name)!r} already has {len(recent)} submission(s) on {test_set}/{track} in "
            f"the last {quota.days:g} days (limit {quota.limit}); next submission possible after {next_ok} (the quota "
            f"is {quota.origin})"
        )


def check_duplicate(requests: list[dict], request: dict) -> None:
    """The same model (namespace and name) filed again with the same predictions, unless
    the first one failed."""
    ns, key = namespace_key(request), name_key(request["model_name"])
    for r in requests:
        if (
            r["predictions"]["sha256"] == request["predictions"]["sha256"]
            and namespace_key(r) == ns
            and name_key(r["model_name"]) == key
            and r["test_set"] == request["test_set"]
            and r["track"] == request["track"]
            and r["status"] != FAILED
        ):
            title = model_title(namespace_of(r).name, r["model_name"])
            raise SubmissionError(
                f"identical resubmission: request {r['id']} ({r['status']}) already has these predictions "
                f"for model {display(title)!r} on {request['test_set']}/{request['track']}"
            )


def check_dataset_owner(repo_id: str, *, submitter: str, owners) -> None:
    """A predictions dataset on the Hub must belong to the submitter or one of their
    organisations (`owners`: the account names whoami gave for the submitter's token just
    now); checked before the Hub is asked anything about it."""
    namespace = repo_id.split("/", 1)[0]
    if not any(same_submitter(namespace, owner) for owner in owners):
        raise SubmissionError(
            f"the dataset {repo_id} belongs to {display(namespace)!r}, not to {display(submitter)!r} or one of their "
            f"organisations: submit predictions from a dataset of your own (e.g. {display(submitter)}/REPO)")


def check_names(*, model_name: str, submitter: str, institution: str = "", model_url: str = "",
                namespace: str = "") -> None:
    """Names as the leaderboard can show them (rexrank.store.names: the visible repertoire,
    nothing a spreadsheet reads as a formula); a submitter and a namespace are Hub user or
    organisation names; a model URL is http(s)."""
    check_submitter(submitter)
    if namespace:
        check_submitter(namespace, label="namespace")
    check_name("model name", model_name)
    if institution:
        check_name("institution", institution)
    check_url("model URL", model_url or "")


def check_policy(earlier: list[dict], request: dict, *, now: float, quota: Quota) -> None:
    """Every rule a request must pass against the requests filed before it (the client
    checks it when filing, the backend again before scoring)."""
    check_names(model_name=request["model_name"], submitter=request["submitter"],
                institution=request.get("institution", ""), model_url=request.get("model_url", ""),
                namespace=request.get("namespace") or "")
    check_duplicate(earlier, request)
    check_quota(earlier, submitter=submitter_of(request), test_set=request["test_set"], track=request["track"],
                now=now, quota=quota)
    for label, value in (("model name", request["model_name"]), ("institution", request.get("institution") or "")):
        check_one_script(label, value)
