"""Result records -> one flat DataFrame that every leaderboard view is cut from.

A record (format in `rexrank.results_schema`) is one model on one test set and track. The
frame has one row per record: identity columns (names with control and invisible
characters removed: a name cannot reverse itself or hide text on the page; a submitted
model's `model_name` is its title "namespace / name", so that two namespaces' models of one
name stay two models, and `namespace` is its namespace alone), `trained`
(the model used this test set's training split), and for each leaderboard column key `k`
the mean `k`, the 95 % CI half-width `k_ci` (NaN when the results have none, as for the
published numbers) and `k_n`, the number of studies it was computed on; `n_studies` is
the test set's size for the track when the record says it (`coverage_notes` lists the
values computed on fewer studies).
"""
from __future__ import annotations

import math
import re
from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd

from rexrank.errors import RexrankError
from rexrank.results_schema import COLUMNS_BY_KEY, LEADERBOARD_COLUMNS, value_in_range
from rexrank.store.names import display, model_title
from rexrank.testsets.registry import TEST_SETS, TRACKS

# The order the ReXrank site shows them: private set first, then the public ones.
LEADERBOARD_TEST_SETS = ("rexgradient", "mimic_cxr", "iu_xray", "chexpert_plus")
TEST_SET_LABELS = {
    "rexgradient": "ReXGradient (private)",
    "mimic_cxr": "MIMIC-CXR",
    "iu_xray": "IU-Xray",
    "chexpert_plus": "CheXpert Plus",
    "example": "Example (synthetic)",
}
TRACK_LABELS = {"findings": "Findings", "findings_impression": "Findings + Impression"}
IDENTITY = ("id", "model_name", "institution", "model_url", "date", "submitter", "namespace", "test_set", "track",
            "source")
METRIC_KEYS = tuple(c.key for c in LEADERBOARD_COLUMNS)
FRAME_COLUMNS = (*IDENTITY, "trained", "per_study_available", *METRIC_KEYS, *(f"{k}_ci" for k in METRIC_KEYS), "n",
                 *(f"{k}_n" for k in METRIC_KEYS), "n_studies")


def _number(value, *, where: str, allow_none: bool) -> float:
    if value is None and allow_none:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RexrankError(f"{where}: {value!r} is not a finite number")
    return float(value)


def check_date(text: str) -> str | None:
    """Why a record's date is not a real date that has happened (YYYY, YYYY-MM or
    YYYY-MM-DD; a day of slack for time zones), or None when it is."""
    formats = {4: "%Y", 7: "%Y-%m", 10: "%Y-%m-%d"}
    if not re.fullmatch(r"\d{4}(-\d{2}(-\d{2})?)?", text):
        return f"date {text!r} is not YYYY-MM-DD"
    try:
        when = datetime.strptime(text, formats[len(text)]).replace(tzinfo=timezone.utc)
    except ValueError:
        return f"date {text!r} is not a real date"
    if when > datetime.now(timezone.utc) + timedelta(days=1):
        return f"date {text!r} is in the future"
    return None


def _value_problem(key: str, mean: float, ci: float, n: float, test_set: str) -> str | None:
    """Why one column's value cannot be ranked (rexrank.results_schema.value_in_range, a
    negative CI, more studies than the test set has), or None."""
    ok, allowed = value_in_range(key, mean)
    if not ok:
        return f"mean {mean!r} is outside the metric's range ({allowed})"
    if not math.isnan(ci) and ci < 0:
        return f"ci95 {ci!r} is negative"
    size = TEST_SETS[test_set].n_studies
    if not math.isnan(n) and (n < 1 or n != int(n) or (size is not None and n > size)):
        return f"n {n:g} is not a count of studies of the test set ({size} studies)"
    return None


def record_namespace(record: dict) -> str:
    """The namespace the board shows a result under: its own; a submission filed before
    namespaces existed, its submitter's (as store.accounts.namespace_of files it); a
    published ReXrank entry has none."""
    if record.get("namespace") or record.get("source") == "published":
        return str(record.get("namespace") or "")
    return str(record.get("submitter") or "")


def board_title(record: dict) -> str:
    """The model's name as the board shows it: "namespace / name" (`record_namespace`)."""
    return model_title(display(record_namespace(record)), display(record.get("model_name") or ""))


def check_record(record: dict, *, value_problems: list[str] | None = None) -> dict:
    """One frame row from a record; every problem is an error naming the record. A value
    that cannot be ranked (`_value_problem`) is an error too, unless `value_problems` is
    a list: then that column is left empty in the row (the other columns stay ranked) and
    the reason is added to the list."""
    if not isinstance(record, dict):
        raise RexrankError(f"result record is a {type(record).__name__}, not an object")
    rid = record.get("id") or f"<record of {record.get('model_name', '?')}>"
    for field in ("id", "model_name", "test_set", "track", "values"):
        if not record.get(field):
            raise RexrankError(f"result record {rid}: field {field!r} is missing or empty")
    if record["test_set"] not in TEST_SETS:
        raise RexrankError(f"result record {rid}: unknown test set {record['test_set']!r} (known: {', '.join(TEST_SETS)})")
    if record["track"] not in TRACKS:
        raise RexrankError(f"result record {rid}: unknown track {record['track']!r} (known: {', '.join(TRACKS)})")
    values = record["values"]
    if not isinstance(values, dict):
        raise RexrankError(f"result record {rid}: 'values' must be an object keyed by column")
    unknown = [k for k in values if k not in COLUMNS_BY_KEY]
    if unknown:
        raise RexrankError(f"result record {rid}: unknown leaderboard column(s) {unknown} (known: {list(COLUMNS_BY_KEY)})")
    row = {f: display(record.get(f) or "") for f in IDENTITY}
    row["namespace"] = display(record_namespace(record))
    row["model_name"] = model_title(row["namespace"], row["model_name"])
    wrong_date = check_date(row["date"]) if row["date"] else None
    if wrong_date:
        raise RexrankError(f"result record {rid}: {wrong_date}")
    row["source"] = row["source"] or "rexrank"
    trained_on = record.get("trained_on") or []
    if not isinstance(trained_on, (list, tuple)):
        raise RexrankError(f"result record {rid}: 'trained_on' must be a list of test set names")
    row["trained"] = record["test_set"] in trained_on
    row["per_study_available"] = bool(record.get("per_study_available"))
    ns = []
    for key in METRIC_KEYS:
        entry = values.get(key)
        row[f"{key}_n"] = math.nan
        if entry is None:
            row[key] = row[f"{key}_ci"] = math.nan
            continue
        if not isinstance(entry, dict) or "mean" not in entry:
            raise RexrankError(f"result record {rid}: values[{key!r}] must be an object with a 'mean'")
        row[key] = _number(entry["mean"], where=f"result record {rid} values[{key!r}].mean", allow_none=False)
        row[f"{key}_ci"] = _number(entry.get("ci95"), where=f"result record {rid} values[{key!r}].ci95", allow_none=True)
        if entry.get("n") is not None:
            row[f"{key}_n"] = _number(entry["n"], where=f"result record {rid} values[{key!r}].n", allow_none=False)
        why = _value_problem(key, row[key], row[f"{key}_ci"], row[f"{key}_n"], record["test_set"])
        if why:
            message = f"result record {rid} values[{key!r}]: {why}; not ranked by {COLUMNS_BY_KEY[key].display}"
            if value_problems is None:
                raise RexrankError(message)
            value_problems.append(message)
            row[key] = row[f"{key}_ci"] = row[f"{key}_n"] = math.nan
        elif not math.isnan(row[f"{key}_n"]):
            ns.append(int(row[f"{key}_n"]))
    row["n"] = max(ns) if ns else math.nan
    test_set_info = (record.get("provenance") or {}).get("test_set") if isinstance(record.get("provenance"), dict) else None
    n_studies = test_set_info.get("n_studies") if isinstance(test_set_info, dict) else None
    row["n_studies"] = _number(n_studies, where=f"result record {rid} provenance.test_set.n_studies", allow_none=True)
    return row


def coverage_notes(frame: pd.DataFrame) -> list[str]:
    """One line per result with a value computed on fewer studies than its test set has
    (the backend publishes such values only above its coverage rule, e.g. 99 %)."""
    notes = []
    counts = frame[[f"{k}_n" for k in METRIC_KEYS]].to_numpy(dtype=np.float64)
    short_rows = (counts < frame["n_studies"].to_numpy(dtype=np.float64)[:, None]).any(axis=1)  # NaN compares False
    for row in frame[short_rows].to_dict("records"):  # only the few rows that have a note (never one without n_studies)
        total = row["n_studies"]
        short = [f"{COLUMNS_BY_KEY[k].display} n = {int(row[f'{k}_n'])}" for k in METRIC_KEYS
                 if not math.isnan(row[f"{k}_n"]) and row[f"{k}_n"] < total]
        if short:
            where = f"{TEST_SET_LABELS.get(row['test_set'], row['test_set'])} / {TRACK_LABELS.get(row['track'], row['track'])}"
            notes.append(f"{row['model_name']} on {where}: {', '.join(short)} of {int(total)} studies")
    return notes


def records_frame(records, *, problems: list[str] | None = None) -> pd.DataFrame:
    """All records as one frame.

    With `problems=None` a bad record raises; with a list, bad records are left out, values
    that cannot be ranked are left empty, and each is described in `problems` (the app
    shows them, so nothing disappears silently).
    """
    rows = []
    seen: set[str] = set()
    for record in records:
        try:
            row = check_record(record, value_problems=problems)
            if row["id"] in seen:
                raise RexrankError(f"result record {row['id']}: id appears more than once")
        except RexrankError as exc:
            if problems is None:
                raise
            problems.append(str(exc))
            continue
        seen.add(row["id"])
        rows.append(row)
    return frame_from_rows(rows)


NUMBER_COLUMNS = (*METRIC_KEYS, *(f"{k}_ci" for k in METRIC_KEYS), "n", *(f"{k}_n" for k in METRIC_KEYS), "n_studies")


def frame_from_rows(rows: list[dict]) -> pd.DataFrame:
    """Rows made by `check_record` as a frame with FRAME_COLUMNS and their types."""
    frame = pd.DataFrame(rows, columns=list(FRAME_COLUMNS))
    return frame.astype({**dict.fromkeys(NUMBER_COLUMNS, np.float64), "trained": bool, "per_study_available": bool})
