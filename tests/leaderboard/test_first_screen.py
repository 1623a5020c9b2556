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
from support.boards import per_study_bytes, result

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
    assert "http://127.0.0.1:7860/?model=me+%2F+My+Model" in capsys.readouterr().out


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


# ---- issue 39: the legend and notes speak of what a table shows; a search names other tabs ----

def test_the_legend_promises_no_ci_n_or_tier_and_the_note_says_where_they_are():
    from rexrank.leaderboard.app import LEGEND

    assert "CI" not in LEGEND and "Tier" not in LEGEND and " n " not in LEGEND  # the published tables have none
    published = _frame(result("P1", mean=1.2, source="published"), result("P2", mean=1.0, source="published"))
    assert "CI" not in _view(published).note
    mixed = _frame(result("P1", mean=1.2, source="published"), result("S", RNG.uniform(1, 2, 40)))
    assert "Values: mean ± 95\u00a0% CI, n = studies scored; 1 published result gives means only." in _view(mixed).note


def test_a_search_that_matches_nothing_here_names_the_tabs_where_it_matches():
    from rexrank.leaderboard.view_state import view_link

    frame = _frame(result("MyModel", bleu=0.3), result("Other", mean=1.0, test_set="mimic_cxr"),
                   result("MyModel-2", bleu=0.2, test_set="chexpert_plus"))
    views = tables.page_views(frame, "findings", "bleu2", "mymodel",
                              link=lambda t: view_link(t, "findings", "bleu2", "mymodel"))
    note = views.tables["mimic_cxr"].note  # a result there, but not this one
    assert note.startswith("No model or institution matches the search")
    assert note.endswith("It matches on [IU-Xray](?tab=iu_xray&rank=bleu2&q=mymodel) (1 result), "
                         "[CheXpert Plus](?tab=chexpert_plus&rank=bleu2&q=mymodel) (1 result).")
    assert "It matches on" not in views.tables["iu_xray"].note  # it has its match
    nowhere = tables.page_views(frame, "findings", "bleu2", "nothing", link=lambda t: "?").tables["iu_xray"].note
    assert "It matches on" not in nowhere


def test_a_models_link_ranks_by_a_metric_its_result_has():
    from rexrank.leaderboard.model_page import model_link

    frame = _frame(result("P", mean=1.0, source="published", bleu=0.3), result("S", bleu=0.2))
    assert tables.rank_key_of(frame, "iu_xray", "findings", "S") == "bleu2"  # no 1/RadCliQ-v1: BLEU
    assert tables.rank_key_of(frame, "iu_xray", "findings", "P") == "radcliq_v1_inv"  # has the default
    assert model_link("My Model", test_set="iu_xray") == "?tab=iu_xray&model=My+Model"
    assert model_link("M", test_set="mimic_cxr", track="findings_impression") == "?tab=mimic_cxr&track=findings_impression&model=M"
    assert model_link("M", test_set="example") == "?model=M"  # no table of its own: the Model page
    from rexrank.leaderboard.submit import describe_request

    request = {"id": "r1", "model_name": "My Model", "test_set": "iu_xray", "track": "findings", "status": "PENDING",
               "predictions": {"n": 3, "n_empty": 0, "ids_checked": True}}
    answer = describe_request(request)  # the Submit tab's answer: the row on the board, and the model's page
    assert "[ranked on the IU-Xray table](?tab=iu_xray&model=My+Model)" in answer and "(?model=My+Model)" in answer


def test_standings_share_a_place_and_count_ties_as_the_ranking_does():
    frame = _frame(result("A", mean=1.0, bleu=0.3), result("B", mean=0.9, bleu=0.3), result("S", bleu=0.2),
                   result("T", bleu=0.4))
    placed = tables.standings(tables.ranked(frame, "iu_xray", "findings"), "radcliq_v1_inv")
    assert placed == {"rexrank/iu_xray/findings/s": "4th of 4 by BLEU", "rexrank/iu_xray/findings/t": "1st of 4 by BLEU"}
    assert [tables.ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st", "111th"]
