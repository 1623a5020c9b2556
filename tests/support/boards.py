"""Leaderboard inputs and views: result records, per-study files and a tab's grid."""
from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd


MOERAD_SCORES = ("validation", "moerad_iu", "report_scores.csv")


def per_study_bytes(ids, radcliq) -> bytes:
    buf = io.BytesIO()
    pd.DataFrame({"id": ids, "radcliq_v1": radcliq}).to_parquet(buf, index=False)
    return buf.getvalue()


def result(name, radcliq_per_study=None, *, mean=None, source="rexrank", test_set="iu_xray", date="2026-01-15",
           trained_on=(), bleu=None):
    """A result record; with per-study RadCliQ-v1 scores its 1/mean comes from them."""
    values = {}
    if radcliq_per_study is not None:
        values["radcliq_v1_inv"] = {"mean": 1 / float(np.nanmean(radcliq_per_study)), "ci95": 0.01,
                                    "n": int(np.isfinite(radcliq_per_study).sum())}
    elif mean is not None:
        values["radcliq_v1_inv"] = {"mean": mean, "ci95": None, "n": None}
    if bleu is not None:
        values["bleu2"] = {"mean": bleu, "ci95": None, "n": None}
    return {
        "id": f"{source}/{test_set}/findings/{name.lower()}", "model_name": name, "institution": "Lab",
        "model_url": "", "date": date, "test_set": test_set, "track": "findings", "source": source,
        "trained_on": list(trained_on), "per_study_available": radcliq_per_study is not None, "values": values,
    }


def grid(frame, test_set: str, track: str, rank_by: str | None = None, query: str = "", **options):
    """A test-set tab's grid as the page builds it (rexrank.leaderboard.tables.page_views;
    `options`: its filters, columns, per_study)."""
    from rexrank.leaderboard import tables
    from rexrank.results_schema import DEFAULT_RANK_KEY

    views = tables.page_views(frame, track, rank_by or DEFAULT_RANK_KEY, query, test_sets=(test_set,), **options)
    return views.tables[test_set].display


def nan(x) -> bool:
    return isinstance(x, float) and math.isnan(x)
