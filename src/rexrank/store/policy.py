"""Submission rules checked against the queue: quota and identical resubmissions."""
from __future__ import annotations

import os
from dataclasses import dataclass

from rexrank.errors import SubmissionError
from rexrank.store.records import FAILED, iso, parse_iso

# a report is ~1 kB; anything this long is not a report and would only stress the metrics
MAX_PREDICTION_CHARS = 20_000


@dataclass(frozen=True)
class Quota:
    """At most `limit` submissions per submitter, test set and track in `days` days
    (FAILED requests do not count). `limit <= 0` disables the quota."""

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


def same_submitter(a: str, b: str) -> bool:
    return a.strip().casefold() == b.strip().casefold()


def check_quota(requests: list[dict], *, submitter: str, test_set: str, track: str, now: float, quota: Quota) -> None:
    if quota.limit <= 0:
        return
    since = now - quota.days * 86400
    recent = sorted(
        r["submitted_time"]
        for r in requests
        if same_submitter(r["submitter"], submitter)
        and r["test_set"] == test_set
        and r["track"] == track
        and r["status"] != FAILED
        and parse_iso(r["submitted_time"]) > since
    )
    if len(recent) >= quota.limit:
        next_ok = iso(parse_iso(recent[-quota.limit]) + quota.days * 86400)
        raise SubmissionError(
            f"submitter {submitter!r} already has {len(recent)} submission(s) on {test_set}/{track} in the last "
            f"{quota.days:g} days (limit {quota.limit}); next submission possible after {next_ok}"
        )


def check_duplicate(requests: list[dict], *, model_name: str, sha256: str, test_set: str, track: str) -> None:
    for r in requests:
        if (
            r["predictions"]["sha256"] == sha256
            and r["model_name"].strip().casefold() == model_name.strip().casefold()
            and r["test_set"] == test_set
            and r["track"] == track
            and r["status"] != FAILED
        ):
            raise SubmissionError(
                f"identical resubmission: request {r['id']} ({r['status']}) already has these predictions "
                f"for model {r['model_name']!r} on {test_set}/{track}"
            )


def check_lengths(ids: list[str], texts: list[str], *, source: str, max_chars: int = MAX_PREDICTION_CHARS) -> None:
    long = [(sid, len(t)) for sid, t in zip(ids, texts) if len(t) > max_chars]
    if long:
        shown = ", ".join(f"{sid!r} ({n} characters)" for sid, n in long[:10])
        raise SubmissionError(
            f"{len(long)} predictions are longer than {max_chars} characters (a report is ~1000): {shown}",
            source=source,
        )
