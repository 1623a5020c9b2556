"""Issue 31: the first screen is a leaderboard. A test set's table puts rank, model and the
ranking metric first (what a phone shows), n and Tier only where they exist, tiers only
where two rows or more have per-study scores (and a note on the rows without one), a row
without the ranking metric says why, and a submitter is pointed at their model's page."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rexrank.leaderboard import tables
from rexrank.leaderboard.model_page import model_results
from rexrank.leaderboard.records import records_frame
from tests.test_leaderboard_views import per_study_bytes, result

RNG = np.random.default_rng(31)
IDS = [f"s{i}" for i in range(40)]


def _frame(*records) -> pd.DataFrame:
    return records_frame(list(records))


def _view(frame, rank_by="radcliq_v1_inv", per_study=None):
    return tables.page_views(frame, "findings", rank_by, test_sets=("iu_xray",), per_study=per_study).tables["iu_xray"]


def _per_study(scores: dict):
    return lambda rid: (pd.DataFrame({"id": IDS, "radcliq_v1": scores[rid]}) if rid in scores else None)


def test_rank_model_and_the_ranking_metric_come_first_and_n_only_where_it_exists():
    published = _frame(result("P1", mean=1.2, source="published", bleu=0.2), result("P2", mean=1.0, source="published", bleu=0.3))
    view = _view(published)
    assert list(view.display.columns)[:3] == ["Rank", "Model", "1/RadCliQ-v1 ↑ ▼"]
    assert "n" not in view.display.columns and "Tier" not in view.display.columns  # published: neither exists
    by_bleu = _view(published, "bleu2")
    assert list(by_bleu.display.columns)[:3] == ["Rank", "Model", "BLEU ↑ ▼"]
    assert view.slots == ("Rank", "Model", "radcliq_v1_inv", "Institution", "Date",
                          *(k for k in tables.DEFAULT_COLUMNS if k != "radcliq_v1_inv"), "Source")
    scored = _frame(result("P1", mean=1.2, source="published"), result("S", RNG.uniform(1, 2, 40)))
    assert list(_view(scored).display.columns)[:4] == ["Rank", "Model", "1/RadCliQ-v1 ↑ ▼", "n"]


def test_no_tier_column_for_one_row_with_per_study_scores():
    a = RNG.uniform(1, 2, 40)
    frame = _frame(result("P", mean=2.0, source="published"), result("A", a))
    view = _view(frame, per_study=_per_study({"rexrank/iu_xray/findings/a": a}))
    assert "Tier" not in view.display.columns
    assert "Tier" not in view.note


def test_tiers_are_numbered_among_rows_with_per_study_scores_and_the_note_names_the_others():
    a = RNG.uniform(1, 2, 40)
    b = a + 0.5 + RNG.normal(0, 0.05, 40)  # clearly worse (RadCliQ-v1: lower is better)
    frame = _frame(result("P", mean=2.0, source="published"), result("A", a), result("B", b),
                   result("S", mean=0.1))  # submitted, no per-study scores
    view = _view(frame, per_study=_per_study({"rexrank/iu_xray/findings/a": a, "rexrank/iu_xray/findings/b": b}))
    rows = dict(zip(view.display["Model"], view.display.to_dict("records")))
    assert [rows[m]["Rank"] for m in ("P", "A", "B", "S")] == ["1", "2", "3", "4"]
    # the published row above has no tier: an empty cell, never "n/a" beside a better rank
    assert [rows[m]["Tier"] for m in ("P", "A", "B", "S")] == ["", "1", "2", ""]
    assert view.note.endswith("Tiers compare the 2 results with per-study scores (About); no tier for 1 published "
                              "(the site gives means only) and 1 submitted without per-study scores of the ranking metric.")
    assert view.plain["Tier"].tolist()[1:3] == [1, 2]


def test_a_row_without_the_ranking_metric_says_why_and_where_it_stands_in_the_row():
    frame = _frame(result("P", mean=1.0, source="published"), result("Q", source="published", bleu=0.3),
                   result("S", bleu=0.2))  # a submitted result scored on BLEU only
    shown = _view(frame).display.set_index("Model")
    # issue 39: where it stands by each metric it has (BLEU: Q 0.3 first, S 0.2 second of the two with BLEU)
    assert shown.loc["Q", "1/RadCliQ-v1 ↑ ▼"] == "– not published · 1st of 2 by BLEU" and shown.loc["Q", "Rank"] == "–"
    assert shown.loc["S", "1/RadCliQ-v1 ↑ ▼"] == "– not scored · 2nd of 2 by BLEU" and shown.loc["S", "Rank"] == "–"
    assert shown.loc["S", "BLEU ↑"] == "0.200"  # other columns: their value, or a plain –
    mine = model_results(frame, "S")  # its Model page too
    assert mine["Rank"].tolist() == ["–"] and mine["1/RadCliQ-v1"].tolist() == ["– not scored · 2nd of 2 by BLEU"]


def test_the_submit_answer_links_to_the_models_page(tmp_path):
    from rexrank.leaderboard.model_page import model_link
    from rexrank.leaderboard.submit import describe_request

    request = {"id": "r1", "model_name": "My Model", "test_set": "iu_xray", "track": "findings", "status": "PENDING",
               "predictions": {"n": 3, "n_empty": 0, "ids_checked": True}}
    assert "(?model=My+Model)" in describe_request(request)
    assert model_link("My Model", "rexrank/leaderboard") == "https://huggingface.co/spaces/rexrank/leaderboard?model=My+Model"
    assert model_link("a", "http://127.0.0.1:7860") == "http://127.0.0.1:7860/?model=a"


def test_rexrank_submit_prints_the_link_to_the_model(tmp_path, capsys):
    from rexrank.cli.main import main
    from rexrank.data import data_path

    store = tmp_path / "store"
    assert main(["submit", "--store", str(store), "--dataset", "example", "--track", "findings", "--predictions",
                 str(data_path("example_predictions.json")), "--model-name", "My Model", "--submitter", "me"]) == 0
    assert "http://127.0.0.1:7860/?model=My+Model" in capsys.readouterr().out


@pytest.mark.parametrize("rank_by", tables.METRIC_KEYS)
def test_widths_follow_the_columns_of_each_table(rank_by):
    from rexrank.leaderboard.page_style import results_layout
    from rexrank.results_schema import COLUMNS_BY_KEY

    frame = _frame(result("P", mean=1.0, source="published", bleu=0.2))
    view = _view(frame, rank_by)
    widths = results_layout(view.slots, rank_by, {k: c.display for k, c in COLUMNS_BY_KEY.items()}).widths
    assert len(widths) == len(view.display.columns)
    # rank, model and the ranking metric fit the 325 px a 390 px phone leaves the grid
    assert sum(int(w[:-2]) for w in widths[:3]) <= 325
