"""The leaderboard's columns and how a scoring run's results map onto them.

Shared by the backend (which writes result records), `import-published` (which seeds the
published ReXrank tables) and the leaderboard Space (which renders them).

A result record (one model on one test set and track) is a JSON object:
    {"id", "model_name", "institution", "model_url", "submitter", "date",
     "test_set", "track", "source": "rexrank" | "published",
     "trained_on": [test set names], "per_study_available": bool,
     "values": {column key: {"mean": float, "ci95": float | None, "n": int | None}},
     "provenance": {...}}
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    key: str  # key in a record's "values"
    display: str  # header on the ReXrank site and in its published CSVs
    metric: str  # rexrank metric that produces it
    higher_is_better: bool = True
    optional: bool = False  # not a published ReXrank column: never the default ranking, hidden once columns can be chosen


# In the order the ReXrank site shows them.
LEADERBOARD_COLUMNS: tuple[Column, ...] = (
    Column("bleu2", "BLEU", "bleu2"),
    Column("bertscore", "BertScore", "bertscore"),
    Column("sembscore", "SembScore", "sembscore"),
    Column("radgraph", "RadGraph", "radgraph"),
    Column("radcliq_v1_inv", "1/RadCliQ-v1", "radcliq"),
    Column("ratescore", "RaTEScore", "ratescore"),
    Column("green", "GREEN", "green"),
    Column("fineradscore_inv", "1/FineRadScore", "fineradscore"),
    Column("crimson", "CRIMSON", "crimson", optional=True),
)
COLUMNS_BY_KEY = {c.key: c for c in LEADERBOARD_COLUMNS}
DEFAULT_RANK_KEY = "radcliq_v1_inv"

# Published CSV file stems (shared/data/published/current) -> (test set, track)
PUBLISHED_FILES = {
    "findings_result_iu_xray": ("iu_xray", "findings"),
    "findings_result_mimiccxr": ("mimic_cxr", "findings"),
    "findings_result_chexpertplus": ("chexpert_plus", "findings"),
    "findings_result_gradienthealth": ("rexgradient", "findings"),
    "result_iu_xray": ("iu_xray", "findings_impression"),
    "result_mimiccxr": ("mimic_cxr", "findings_impression"),
    "result_chexpertplus": ("chexpert_plus", "findings_impression"),
    "result_gradienthealth": ("rexgradient", "findings_impression"),
}


def _summary(results: dict, metric: str, column: str) -> dict | None:
    entry = results.get("metrics", {}).get(metric)
    if not entry:
        return None
    return entry.get("scores", {}).get(column)


def _inverse(summary: dict | None) -> dict | None:
    """1 / mean with a delta-method CI half-width (ci / mean²): how ReXrank shows
    RadCliQ-v1 and FineRadScore (1 / mean of per-study scores)."""
    if not summary or not summary.get("mean"):
        return None
    mean = summary["mean"]
    ci = summary.get("ci95")
    return {"mean": 1.0 / mean, "ci95": (ci / mean**2) if ci is not None else None, "n": summary.get("n")}


def leaderboard_values(results: dict) -> dict[str, dict]:
    """Leaderboard values from a scoring run's results JSON (see rexrank.scoring)."""
    values: dict[str, dict] = {}
    for key, metric, column in (
        ("bleu2", "bleu2", "bleu2"),
        ("bertscore", "bertscore", "bertscore"),
        ("sembscore", "sembscore", "sembscore"),
        ("radgraph", "radgraph", "radgraph"),
        ("ratescore", "ratescore", "ratescore"),
        ("green", "green", "green"),
        ("crimson", "crimson", "crimson"),
    ):
        s = _summary(results, metric, column)
        if s is not None:
            values[key] = {"mean": s["mean"], "ci95": s.get("ci95"), "n": s.get("n")}
    # RadCliQ is also computed inside `radcliq`, FineRadScore inside `fineradscore`
    for key, metric, column in (("radcliq_v1_inv", "radcliq", "radcliq"), ("fineradscore_inv", "fineradscore", "fineradscore")):
        inv = _inverse(_summary(results, metric, column))
        if inv is not None:
            values[key] = inv
    return values
