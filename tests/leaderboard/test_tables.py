"""Table building: ranking, search, highlighting, CI display, trained marker, overview,
model page and significance against neighbours."""
from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
import pytest

from rexrank.errors import RexrankError
from rexrank.leaderboard import records as R
from rexrank.leaderboard import tables
from rexrank.leaderboard import tables as T
from rexrank.leaderboard.model_page import model_results, neighbour_significance
from rexrank.leaderboard.published import load_seed_records
from rexrank.leaderboard.records import records_frame
from rexrank.leaderboard.source import LeaderboardSource
from support.boards import grid
from support.paths import shared_path


@pytest.fixture(scope="module")
def frame():
    return records_frame(load_seed_records())


def record(name, test_set="iu_xray", track="findings", institution="Inst", trained_on=(), source="rexrank", **values):
    return {
        "id": f"{source}/{test_set}/{track}/{name}",
        "model_name": name,
        "institution": institution,
        "model_url": f"https://example.org/{name}",
        "date": "2025",
        "test_set": test_set,
        "track": track,
        "source": source,
        "trained_on": list(trained_on),
        "per_study_available": False,
        "values": {k: ({"mean": v[0], "ci95": v[1], "n": 100} if isinstance(v, tuple) else {"mean": v, "ci95": None, "n": None})
                   for k, v in values.items()},
    }


def _model(cell: str) -> str:
    """Model name from a markdown model cell: [Name](url) \\*"""
    return cell.split("](")[0].lstrip("[").replace("\\", "").replace(" *", "")


@pytest.mark.parametrize("csv_name,test_set,track,column,key", [
    ("findings_result_iu_xray.csv", "iu_xray", "findings", "1/RadCliQ-v1", "radcliq_v1_inv"),
    ("result_mimiccxr.csv", "mimic_cxr", "findings_impression", "1/RadCliQ-v1", "radcliq_v1_inv"),
    ("findings_result_gradienthealth.csv", "rexgradient", "findings", "1/FineRadScore", "fineradscore_inv"),
    ("findings_result_chexpertplus.csv", "chexpert_plus", "findings", "GREEN", "green"),
])
def test_ranking_matches_the_csv_sorted_independently(frame, csv_name, test_set, track, column, key):
    csv = pd.read_csv(shared_path("data", "published", "current", csv_name))
    csv["Model Name"] = csv["Model Name"].str.replace("_", "-")
    values = csv[column].where(~((csv[column] == 0) & column.startswith("1/")))
    csv = csv.assign(v=values).sort_values(["v", "Model Name"], ascending=[False, True], na_position="last")
    view = grid(frame, test_set, track, key)
    assert [_model(c) for c in view["Model"]] == csv["Model Name"].tolist()
    # ties share the best rank; unranked rows (no value) show a dash
    expected_ranks = csv["v"].rank(method="min", ascending=False)
    assert view["Rank"].tolist() == ["–" if math.isnan(r) else str(int(r)) for r in expected_ranks]


def test_best_value_per_column_is_bold_and_only_there(frame):
    csv = pd.read_csv(shared_path("data", "published", "current", "findings_result_mimiccxr.csv"))
    view = grid(frame, "mimic_cxr", "findings")
    for header in ["BLEU", "BertScore", "SembScore", "RadGraph", "1/RadCliQ-v1", "RaTEScore", "GREEN", "1/FineRadScore"]:
        col = next(c for c in view.columns if c.startswith(header + " "))
        best = csv[header].max()
        bold = [cell for cell in view[col] if cell.startswith("**")]
        assert bold == [f"**{best:.3f}**"] * int((csv[header] == best).sum()), header


def test_search_keeps_best_from_the_full_table(frame):
    view = grid(frame, "iu_xray", "findings", query="csiro")
    assert set(view["Institution"]) == {"CSIRO"} and len(view) == 4
    # CSIRO holds no column's best on IU-Xray findings: the search must not bold anything
    assert not any(str(c).startswith("**") for c in view.drop(columns=["Model"]).to_numpy().ravel())
    # all words must match, in model name or institution, any case
    view = grid(frame, "iu_xray", "findings", query="chexpertplus STANFORD mimic")
    assert sorted(_model(c) for c in view["Model"]) == ["CheXpertPlus-CheX-MIMIC", "CheXpertPlus-MIMIC"]
    assert grid(frame, "iu_xray", "findings", query="no such model").empty


def test_ci_display_and_trained_marker():
    frame = records_frame([
        record("A", trained_on=["iu_xray"], bleu2=(0.5, 0.02), radcliq_v1_inv=(1.2, 0.05)),
        record("B", trained_on=["mimic_cxr"], bleu2=(0.4, 0.01), radcliq_v1_inv=(1.2, 0.04)),
        record("C", bleu2=0.3, radcliq_v1_inv=0.9),
    ])
    view = grid(frame, "iu_xray", "findings")
    assert [_model(c) for c in view["Model"]] == ["A", "B", "C"]
    assert view["Rank"].tolist() == ["1", "1", "3"]  # tie on 1/RadCliQ-v1
    assert view["Model"][0].endswith("\\*") and not view["Model"][1].endswith("\\*")  # B trained on another set
    bleu = next(c for c in view.columns if c.startswith("BLEU"))
    # the ± between no-break spaces: a value never breaks over two lines in a narrow column (issue 39)
    assert view[bleu].tolist() == ["**0.500**\u00a0±\u00a00.020", "0.400\u00a0±\u00a00.010", "0.300"]
    rq = next(c for c in view.columns if c.startswith("1/RadCliQ-v1"))
    assert rq.endswith("▼") and view[rq].tolist()[:2] == ["**1.200**\u00a0±\u00a00.050", "**1.200**\u00a0±\u00a00.040"]
    assert view["1/FineRadScore ↑"].tolist() == ["–"] * 3


def test_markdown_is_escaped_and_only_web_links_are_linked():
    bad = record("x](javascript:alert(1))", bleu2=0.1)
    bad["model_url"] = "javascript:alert(1)"
    frame = records_frame([bad, record("ok", bleu2=0.2)])
    view = grid(frame, "iu_xray", "findings", "bleu2")
    assert view["Model"][1] == "x\\]\\(javascript:alert\\(1\\)\\)"
    assert view["Model"][0] == "[ok](https://example.org/ok)"


def test_unknown_rank_key_is_an_error(frame):
    with pytest.raises(RexrankError, match="cannot rank by 'bleu4'"):
        grid(frame, "iu_xray", "findings", "bleu4")


def test_bad_records_raise_or_are_listed():
    good = record("A", bleu2=0.1)
    bad_value = record("B", bleu2=float("nan"))
    bad_key = record("C", bleu3=0.1)
    bad_set = record("D", test_set="nih", bleu2=0.1)
    with pytest.raises(RexrankError, match=r"rexrank/iu_xray/findings/B values\['bleu2'\].mean: nan is not a finite number"):
        records_frame([good, bad_value])
    problems: list[str] = []
    frame = records_frame([good, bad_value, bad_key, bad_set, good], problems=problems)
    assert frame["model_name"].tolist() == ["A"]
    assert len(problems) == 4
    assert "unknown leaderboard column(s) ['bleu3']" in problems[1]
    assert "unknown test set 'nih'" in problems[2]
    assert "appears more than once" in problems[3]


def test_overview_is_the_top_of_each_test_set(frame):
    over = tables.overview(frame, "findings", top=10)
    assert list(over.columns) == ["Rank", "ReXGradient (private)", "MIMIC-CXR", "IU-Xray", "CheXpert Plus"]
    assert len(over) == 10
    for label, test_set in [("MIMIC-CXR", "mimic_cxr"), ("IU-Xray", "iu_xray")]:
        ranked = tables.ranked(frame, test_set, "findings")
        assert [c.split(" (")[0].replace(" \\*", "") for c in over[label]] == ranked["model_name"].head(10).tolist()
    # the findings + impression track has 7 models: shorter columns
    assert len(tables.overview(frame, "findings_impression", top=10)) == 7
    # MedVersa is starred on MIMIC-CXR (trained on it), not on IU-Xray
    assert any(c.startswith("MedVersa \\*") for c in over["MIMIC-CXR"])
    assert any(c.startswith("MedVersa (") for c in over["IU-Xray"])


def test_model_results_lists_every_table(frame):
    rows = model_results(frame, "MedVersa")
    assert len(rows) == 8
    mimic = rows[(rows["Test set"] == "MIMIC-CXR") & (rows["Track"] == "Findings")].iloc[0]
    assert mimic["Trained on it"] == "yes" and mimic["Per-study data"] == "no"
    csv = pd.read_csv(shared_path("data", "published", "current", "findings_result_mimiccxr.csv"))
    expected_rank = int((csv["1/RadCliQ-v1"] > csv.loc[csv["Model Name"] == "MedVersa", "1/RadCliQ-v1"].iloc[0]).sum()) + 1
    assert mimic["Rank"] == f"{expected_rank} / 25"


def _per_study_bytes(ids, values):
    buf = io.BytesIO()
    pd.DataFrame({"id": ids, "radcliq_v1": values}).to_parquet(buf, index=False)
    return buf.getvalue()


def test_significance_against_neighbours_from_a_store(tmp_path):
    from rexrank.store import open_store

    rng = np.random.default_rng(0)
    ids = [f"s{i}" for i in range(200)]
    base = rng.uniform(0.5, 1.5, size=200)
    # per-study RadCliQ-v1 (lower is better): A clearly better than B, B ≈ C
    noise = 0.05 * (-1.0) ** np.arange(200) + 0.002  # C a hair worse than B, far within the noise
    scores = {"A": base - 0.3, "B": base, "C": base + noise}
    scores["C"][0] = np.nan  # one study C could not score
    means = {"A": base.mean() - 0.3, "B": base.mean(), "C": base.mean() + 0.002}
    store = open_store(tmp_path / "store")
    for name, per_study in scores.items():
        rec = record(name, radcliq_v1_inv=(1 / means[name], 0.01))
        store.add_result(rec, per_study=_per_study_bytes(ids, per_study))
    store.add_result(record("P", source="published", radcliq_v1_inv=0.1))  # no per-study data
    source = LeaderboardSource.from_store(store)
    table = neighbour_significance(source, "B")
    assert table["Neighbour"].tolist() == ["A (above)", "C (below)"]
    above, below = table.iloc[0], table.iloc[1]
    d = float(np.mean(scores["B"] - scores["A"]))  # independent: mean paired difference
    assert float(above["Δ mean radcliq_v1"]) == pytest.approx(d, abs=1e-4)
    assert above["Result"] == "worse (significant)"
    assert below["Studies"].startswith("199 (1 with a missing score left out)")
    assert below["Result"].endswith("(not significant)")
    # C's neighbour below is the published result: no per-study data to test with
    table_c = neighbour_significance(source, "C")
    assert table_c.iloc[-1]["Result"] == "no per-study data for both"
    # the published result itself gets no tests, and its table says why (issue 21.5)
    from rexrank.leaderboard.model_page import NO_TEST_PUBLISHED

    assert neighbour_significance(source, "P")["Result"].tolist() == [NO_TEST_PUBLISHED]


def test_rank_key_for_every_displayed_header():
    from rexrank.results_schema import LEADERBOARD_COLUMNS

    for rank_by in ("radcliq_v1_inv", "bleu2"):
        headers = tables.display_headers(rank_by, columns=[c.key for c in LEADERBOARD_COLUMNS])
        keys = [tables.rank_key_for_header(h) for h in headers]
        # the fixed columns and Source rank nothing; each metric header maps to its own key, the
        # ranking metric's next to the model (rank, model, metric, n, tier, institution, date)
        others = [c.key for c in LEADERBOARD_COLUMNS if c.key != rank_by]
        assert keys == [None, None, rank_by, None, None, None, None, *others, None]
    assert tables.rank_key_for_header("1/RadCliQ-v1") == "radcliq_v1_inv"  # the model page's headers
    assert tables.rank_key_for_header("1/RadCliQ") is None and tables.rank_key_for_header("") is None


def test_table_notes_count_with_correct_plurals():
    assert tables.table_note(1, 1, "", "findings") == "1 result in the Findings track."
    assert tables.table_note(25, 25, "  ", "findings_impression") == "25 results in the Findings + Impression track."
    assert tables.table_note(1, 25, "csiro", "findings") == "1 of 25 results matches the search."
    assert tables.table_note(3, 25, "csiro  lab", "findings") == "3 of 25 results match the search."
    empty = tables.table_note(0, 1, "x_y", "findings")
    assert empty.startswith("No model or institution matches the search") and "all 1 result." in empty
    # a search can come from a link (?q=): its text is not repeated in the note
    assert "evil" not in tables.table_note(0, 25, "https://evil.example \u202e", "findings")
    assert tables.table_note(0, 0, "", "findings").startswith("No results in the Findings track")


def test_page_views_csv_holds_the_rows_the_grid_shows(frame):
    views = tables.page_views(frame, "findings", "fineradscore_inv", "csiro")
    iu = views.tables["iu_xray"]
    assert iu.note == "4 of 25 results match the search."
    display, plain = iu.display, iu.plain
    # same rows, same order; names without markdown; ranks as numbers, unranked empty
    assert plain["Model"].tolist() == [_model(c) for c in display["Model"]]
    assert [("–" if pd.isna(r) else str(r)) for r in plain["Rank"]] == display["Rank"].tolist()
    assert set(plain["Test set"]) == {"IU-Xray"} and set(plain["Track"]) == {"Findings"}
    # full-precision means that the grid rounds; no CI for published results
    csv = pd.read_csv(shared_path("data", "published", "current", "findings_result_iu_xray.csv"))
    csv = csv.set_index(csv["Model Name"].str.replace("_", "-"))
    for header in ["BLEU", "1/FineRadScore", "GREEN"]:
        shown = next(c for c in display.columns if c.startswith(header + " "))
        for model, value, cell in zip(plain["Model"], plain[header], display[shown]):
            assert value == pytest.approx(csv.loc[model, header])
            assert cell.strip("*") == f"{value:.3f}"
        assert plain[f"{header} 95% CI ±"].isna().all()
    assert all(u.startswith("https://") for u in plain["Model URL"])
    # the CSV text round-trips to the same table
    back = pd.read_csv(io.StringIO(plain.to_csv(index=False)), keep_default_na=False, na_values=[""])
    assert back["Model"].tolist() == plain["Model"].tolist()
    assert back["BLEU"].tolist() == pytest.approx(plain["BLEU"].tolist())
    # a search that matches nothing: an empty table, and a note that says so
    none = tables.page_views(frame, "findings", query="no such model").tables["mimic_cxr"]
    assert none.display.empty and none.plain.empty and none.note.startswith("No model or institution matches")


def test_csv_carries_ci_and_trained_marker():
    frame = records_frame([
        record("A", trained_on=["iu_xray"], bleu2=(0.5, 0.02), radcliq_v1_inv=(1.2, 0.05)),
        record("B_x", bleu2=0.3),
    ])
    plain = tables.page_views(frame, "findings", test_sets=("iu_xray",)).tables["iu_xray"].plain
    assert plain["Model"].tolist() == ["A", "B_x"]  # no markdown escapes in the CSV
    assert plain["Trained on this test set"].tolist() == ["yes", ""]
    assert plain["BLEU 95% CI ±"].tolist()[0] == pytest.approx(0.02) and math.isnan(plain["BLEU 95% CI ±"][1])
    assert plain["Rank"].tolist()[0] == 1 and pd.isna(plain["Rank"][1])  # B has no 1/RadCliQ-v1: unranked
    over = tables.page_views(frame, "findings", test_sets=("iu_xray",)).overview_plain
    assert over["IU-Xray"].tolist() == ["A * (Inst)"]


def test_model_page_header_link_and_named_empty_tables(frame):
    from rexrank.leaderboard.model_page import RESULT_COLUMNS, model_header, model_link

    header = model_header(frame, "MedVersa")
    assert "8 results;" in header and f"]({model_link('MedVersa')})" in header
    assert model_link("A b/(c)") == "?model=A+b%2F%28c%29"  # safe inside a markdown link
    one = records_frame([record("Solo", bleu2=0.1)])
    assert "1 result;" in model_header(one, "Solo")
    assert list(model_results(frame, "no such model").columns) == RESULT_COLUMNS


# ---- tables: a small board written out by hand -------------------------------------------
KEYS = ("bleu2", "bertscore", "sembscore", "radgraph", "radcliq_v1_inv", "ratescore", "green", "fineradscore_inv",
        "rouge", "temporal_f1", "srr_bert", "crimson")


LABELS = ("BLEU", "BertScore", "SembScore", "RadGraph", "1/RadCliQ-v1", "RaTEScore", "GREEN", "1/FineRadScore",
          "ROUGE-L", "Temporal F1", "SRR-BERT F1", "CRIMSON")


def board_record(rid, name, *, source="rexrank", test_set="iu_xray", track="findings", institution="Lab", url="",
                 date="2025", trained_on=(), per_study=False, **entries) -> dict:
    return {"id": rid, "model_name": name, "institution": institution, "model_url": url, "date": date,
            "test_set": test_set, "track": track, "source": source, "trained_on": list(trained_on),
            "per_study_available": per_study,
            "values": {k: (v if isinstance(v, dict) else {"mean": v}) for k, v in entries.items()}}


def board() -> pd.DataFrame:
    """IU-Xray findings: A and B tie on 1/RadCliQ-v1 (1.25), C below (0.9), D has none; E on
    MIMIC-CXR, F in the other track, G on CheXpert Plus without 1/RadCliQ-v1."""
    return R.records_frame([
        board_record("a", "A", institution="Lab A", url="https://a.example/m", date="2026-03-04", trained_on=["iu_xray"], per_study=True,
                     radcliq_v1_inv={"mean": 1.25, "ci95": 0.05, "n": 590}, bleu2={"mean": 0.2, "ci95": 0.01, "n": 588}),
        board_record("d", "D", institution="D", url="http://d.example", date=None, bleu2=0.25, rouge=0.4),
        board_record("c", "C", institution="C (inst)", date="2025-01", per_study=True,
                     radcliq_v1_inv={"mean": 0.9, "ci95": 0.1, "n": 590},
                     bleu2={"mean": 0.1, "n": 590}, green=0.5),
        board_record("b", "B", source="published", institution="Uni_B", url="javascript:alert(1)", date="2024",
                     radcliq_v1_inv=1.25, bleu2=0.3),
        board_record("e", "E", test_set="mimic_cxr", institution="Lab E", trained_on=["iu_xray"], radcliq_v1_inv=1.0),
        board_record("f", "F", track="findings_impression", radcliq_v1_inv=2.0),
        board_record("g", "G", test_set="chexpert_plus", bleu2=0.5),
    ])


def test_ranked_sorts_best_first_ties_by_name_and_shares_the_best_rank():
    table = T.ranked(board(), "iu_xray", "findings")
    assert table["model_name"].tolist() == ["A", "B", "C", "D"]
    assert table["rank"].tolist()[:3] == [1.0, 1.0, 3.0] and math.isnan(table["rank"].tolist()[3])
    assert table.index.tolist() == [0, 1, 2, 3] and "index" not in table.columns
    by_bleu = T.ranked(board(), "iu_xray", "findings", "bleu2")
    assert by_bleu["model_name"].tolist() == ["B", "D", "A", "C"] and by_bleu["rank"].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert T.ranked(board(), "mimic_cxr", "findings")["model_name"].tolist() == ["E"]
    assert T.ranked(board(), "iu_xray", "findings_impression")["model_name"].tolist() == ["F"]
    with pytest.raises(RexrankError) as err:
        T.ranked(board(), "iu_xray", "findings", "bleu4")
    assert str(err.value) == ("cannot rank by 'bleu4': known columns are bleu2, bertscore, sembscore, radgraph, "
                              "radcliq_v1_inv, ratescore, green, fineradscore_inv, rouge, temporal_f1, srr_bert, crimson")


def test_ties_on_the_published_mimic_table_share_the_best_rank_and_follow_by_name():
    """The published MIMIC-CXR findings table ranked by BERTScore (three pairs of ties):
    pandas' own min rank of the published column, descending, ties broken by name."""
    from rexrank.leaderboard.published import load_seed_records
    from support.boards import grid
    from support.paths import shared_path

    csv = pd.read_csv(shared_path("data", "published", "current", "findings_result_mimiccxr.csv"))
    csv["Model Name"] = csv["Model Name"].str.replace("_", "-")
    assert csv["BertScore"].duplicated().sum() == 3  # the ties are what is pinned
    table = T.ranked(R.records_frame(load_seed_records()), "mimic_cxr", "findings", "bertscore")
    expected = csv.sort_values(["BertScore", "Model Name"], ascending=[False, True], kind="stable")
    assert table["model_name"].tolist() == expected["Model Name"].tolist()
    assert table["rank"].tolist() == expected["BertScore"].rank(method="min", ascending=False).tolist()


def test_a_lower_is_better_column_ranks_lowest_first_with_its_arrows(monkeypatch):
    import dataclasses

    monkeypatch.setitem(T.COLUMNS_BY_KEY, "bleu2", dataclasses.replace(T.COLUMNS_BY_KEY["bleu2"], higher_is_better=False))
    table = T.ranked(board(), "iu_xray", "findings", "bleu2")
    assert table["model_name"].tolist() == ["C", "A", "D", "B"] and table["rank"].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert T.best_values(table)["bleu2"] == 0.1
    assert T.column_header("bleu2", "bleu2") == "BLEU ↓ ▲" and T.column_header("bleu2", "green") == "BLEU ↓"
    assert T.sort_mark("bleu2") == "▲"


def test_filters_leave_rows_out_and_say_which():
    frame = board()
    hide = T.Filters(hide_trained=True)
    assert T.ranked(frame, "iu_xray", "findings", filters=hide)["model_name"].tolist() == ["B", "C", "D"]
    published = T.Filters(sources=("published",))
    assert T.ranked(frame, "iu_xray", "findings", filters=published)["model_name"].tolist() == ["B"]
    submitted = T.Filters(hide_trained=True, sources=("submitted",))
    assert T.ranked(frame, "iu_xray", "findings", filters=submitted)["model_name"].tolist() == ["C", "D"]
    assert T.ranked(frame, "iu_xray", "findings", filters=T.Filters(sources=()))["model_name"].tolist() == []
    assert T.ranked(frame, "iu_xray", "findings", filters=T.Filters(sources=("submitted", "published")))["model_name"].tolist() == [
        "A", "B", "C", "D"]
    assert T.Filters().describe() == "" and T.Filters(sources=("submitted", "published")).describe() == ""
    assert hide.describe() == "models trained on this test set (\\*) hidden"
    assert published.describe() == "only published results"
    assert submitted.describe() == "models trained on this test set (\\*) hidden; only submitted results"
    assert T.Filters(sources=()).describe() == "no source chosen"
    assert T.Filters(sources=("published", "mirrored")).describe() == "only published and mirrored results"
    assert [T.source_label(s) for s in ("published", "rexrank", "other")] == ["published", "submitted", "submitted"]


def test_search_matches_every_word_in_name_or_institution_in_any_case():
    table = T.ranked(board(), "iu_xray", "findings")
    assert T.search(table, "LAB")["model_name"].tolist() == ["A"]
    assert T.search(table, "a lab")["model_name"].tolist() == ["A"]  # both words
    assert T.search(table, "b uni_")["model_name"].tolist() == ["B"]
    assert T.search(table, "(inst)")["model_name"].tolist() == ["C"]  # no regular expression
    assert T.search(table, "d a")["model_name"].tolist() == []  # "D" has no "a"; "A" no "d"
    assert T.search(table, "c d")["model_name"].tolist() == []  # no row holds both
    assert T.search(table, "a\u00a0c")["model_name"].tolist() == []  # "a" and "c": str.split() splits at U+00A0
    assert T.search(table, "xx")["model_name"].tolist() == []  # nothing but a space between name and institution
    for empty in ("", "   ", None):
        assert T.search(table, empty)["model_name"].tolist() == ["A", "B", "C", "D"]


def test_test_set_view_cells_by_hand():
    view = T.test_set_view(T.ranked(board(), "iu_xray", "findings"), "iu_xray", "findings", "radcliq_v1_inv", "")
    headers = ["Rank", "Model", "1/RadCliQ-v1 ↑ ▼", "n", "Institution", "Date", "BLEU ↑", "BertScore ↑", "SembScore ↑",
               "RadGraph ↑", "RaTEScore ↑", "GREEN ↑", "1/FineRadScore ↑", "ROUGE-L ↑", "Source"]
    assert list(view.display.columns) == headers
    assert view.slots == ("Rank", "Model", "radcliq_v1_inv", "n", "Institution", "Date", "bleu2", "bertscore", "sembscore",
                          "radgraph", "ratescore", "green", "fineradscore_inv", "rouge", "Source")
    rows = [
        ["1", "[A](https://a.example/m) \\*", "**1.250**\u00a0±\u00a00.050", "590", "Lab A", "2026", "0.200\u00a0±\u00a00.010",
         "–", "–", "–", "–", "–", "–", "–", "submitted"],
        ["1", "B", "**1.250**", "–", "Uni\\_B", "2024", "**0.300**", "–", "–", "–", "–", "–", "–", "–", "published"],
        ["3", "C", "0.900\u00a0±\u00a00.100", "590", "C \\(inst\\)", "2025", "0.100", "–", "–", "–", "–", "**0.500**", "–", "–",
         "submitted"],
        ["–", "[D](http://d.example)", "– not scored · 2nd of 4 by BLEU; 1st of 1 by ROUGE-L", "–", "D", "", "0.250", "–", "–", "–", "–", "–", "–", "**0.400**",
         "submitted"],
    ]
    assert view.display.to_numpy().tolist() == rows
    assert view.note == ("4 results in the Findings track. 1 result without a 1/RadCliQ-v1 value: unranked (–), listed last; "
                         "its row gives its place by the metrics it has. Values: mean ± 95\u00a0% CI, n = studies scored; 1 published result gives means only.")


def test_a_published_row_without_the_ranking_metric_says_not_published():
    frame = R.records_frame([board_record("p", "P", source="published", bleu2=0.2),
                             board_record("q", "Q", bleu2=0.1, radcliq_v1_inv=1.0)])
    view = grid(frame, "iu_xray", "findings")
    assert view["1/RadCliQ-v1 ↑ ▼"].tolist() == ["**1.000**", "– not published · 1st of 2 by BLEU"]
    assert view["Rank"].tolist() == ["1", "–"] and "n" not in view.columns  # no row says its n


def test_csv_rows_by_hand():
    plain = T.test_set_view(T.ranked(board(), "iu_xray", "findings"), "iu_xray", "findings", "radcliq_v1_inv", "").plain
    nan = math.nan
    columns = ["Test set", "Track", "Rank", "Tier", "Model", "Institution", "Date", "n", "Trained on this test set",
               "Lookalike name"]
    for label in LABELS:
        columns += [label, f"{label} 95% CI ±"]
    expected = pd.DataFrame({
        "Test set": ["IU-Xray"] * 4, "Track": ["Findings"] * 4,
        "Rank": pd.array([1, 1, 3, None], dtype="Int64"), "Tier": pd.array([None] * 4, dtype="Int64"),
        "Model": ["A", "B", "C", "D"], "Institution": ["Lab A", "Uni_B", "C (inst)", "D"],
        "Date": ["2026-03-04", "2024", "2025-01", ""], "n": pd.array([590, None, 590, None], dtype="Int64"),
        "Trained on this test set": ["yes", "", "", ""], "Lookalike name": ["", "", "", ""],
        **{label: [nan] * 4 for label in LABELS}, **{f"{label} 95% CI ±": [nan] * 4 for label in LABELS},
        "Source": ["submitted", "published", "submitted", "submitted"],
        "Model URL": ["https://a.example/m", "javascript:alert(1)", "", "http://d.example"],
    })
    expected["1/RadCliQ-v1"] = [1.25, 1.25, 0.9, nan]
    expected["1/RadCliQ-v1 95% CI ±"] = [0.05, nan, 0.1, nan]
    expected["BLEU"] = [0.2, 0.3, 0.1, 0.25]
    expected["BLEU 95% CI ±"] = [0.01, nan, nan, nan]
    expected["GREEN"] = [nan, nan, 0.5, nan]
    expected["ROUGE-L"] = [nan, nan, nan, 0.4]
    pd.testing.assert_frame_equal(plain, expected[[*columns, "Source", "Model URL"]])
    # n falls back to the result's n where the ranking metric does not say
    by_bleu = T.csv_table(T.ranked(board(), "iu_xray", "findings", "bleu2"), "iu_xray", "findings", rank_by="bleu2")
    assert by_bleu["Model"].tolist() == ["B", "D", "A", "C"] and by_bleu["n"].tolist() == [pd.NA, pd.NA, 588, 590]
    # a test set and track without a label keep their names
    odd = T.csv_table(T.ranked(board(), "iu_xray", "findings").head(1), "nih", "impression")
    assert (odd["Test set"].tolist(), odd["Track"].tolist()) == (["nih"], ["impression"])


def test_tiers_in_the_grid_the_csv_and_the_note():
    table = T.ranked(board(), "iu_xray", "findings")
    view = T.test_set_view(table, "iu_xray", "findings", "radcliq_v1_inv", "", tiers={"a": 1, "c": 2})
    assert view.slots[:5] == ("Rank", "Model", "radcliq_v1_inv", "n", "Tier")
    assert view.display["Tier"].tolist() == ["1", "", "2", ""]
    assert view.plain["Tier"].tolist() == [1, pd.NA, 2, pd.NA]
    note = ("Tiers compare the 2 results with per-study scores (About); no tier for 1 published (the site gives means "
            "only) and 1 submitted without per-study scores of the ranking metric.")
    assert view.note == ("4 results in the Findings track. 1 result without a 1/RadCliQ-v1 value: unranked (–), listed "
                         "last; its row gives its place by the metrics it has. Values: mean ± 95\u00a0% CI, n = studies "
                         "scored; 1 published result gives means only. " + note)
    assert T.tier_note(table, {"a": 1, "c": 2}) == note
    assert T.tier_note(table, {"a": 1, "b": 1, "c": 2}) == ("Tiers compare the 3 results with per-study scores (About); "
                                                          "no tier for 1 submitted without per-study scores of the ranking metric.")
    assert T.tier_note(table, {"a": 1, "d": 2, "c": 2}) == ("Tiers compare the 3 results with per-study scores (About); "
                                                          "no tier for 1 published (the site gives means only).")
    assert T.tier_note(table, {"a": 1, "b": 1, "c": 2, "d": 3}) == "Tiers compare the 4 results with per-study scores (About)."
    published_two = pd.concat([table, table.iloc[[1]].assign(id="b2")])
    assert T.tier_note(published_two, {"a": 1, "c": 2, "d": 3}) == ("Tiers compare the 3 results with per-study scores "
                                                                  "(About); no tier for 2 published (the site gives means only).")
    # one tiered row is no tier: no column, no note
    one = T.test_set_view(table, "iu_xray", "findings", "radcliq_v1_inv", "", tiers={"a": 1})
    assert "Tier" not in one.display.columns and one.plain["Tier"].isna().all() and "Tier" not in one.note
    assert T.tier_note(table, {"a": 1}) == "" and T.tier_note(table, None) == ""
    assert [T.has_tiers(t) for t in (None, {}, {"a": 1}, {"a": 1, "b": 2}, {"a": 1, "b": 2, "c": 3})] == [
        False, False, False, True, True]


def test_a_search_keeps_the_columns_and_the_best_values_of_the_whole_table():
    table = T.ranked(board(), "iu_xray", "findings")
    view = T.test_set_view(table, "iu_xray", "findings", "radcliq_v1_inv", "uni")
    assert view.display.to_numpy().tolist() == [
        ["1", "B", "**1.250**", "–", "Uni\\_B", "2024", "**0.300**", "–", "–", "–", "–", "–", "–", "published"]]
    # n stays (other rows have it); ROUGE-L goes (the row shown has none); the note counts the search
    assert list(view.display.columns)[3] == "n" and "ROUGE-L ↑" not in view.display.columns
    assert view.note == "1 of 4 results matches the search."
    shown_d = T.test_set_view(table, "iu_xray", "findings", "radcliq_v1_inv", "D")
    # its place is of the whole table (a search does not move it)
    assert shown_d.display["1/RadCliQ-v1 ↑ ▼"].tolist() == ["– not scored · 2nd of 4 by BLEU; 1st of 1 by ROUGE-L"]
    assert shown_d.display["BLEU ↑"].tolist() == ["0.250"]
    assert shown_d.note == ("1 of 4 results matches the search. 1 result without a 1/RadCliQ-v1 value: unranked (–), listed "
                            "last; its row gives its place by the metrics it has.")
    assert T.test_set_view(table, "iu_xray", "findings", "radcliq_v1_inv", "zzz").note == (
        "No model or institution matches the search: the table is empty. Clear the search to see all 4 results.")


def test_table_notes_by_hand():
    hide = T.Filters(hide_trained=True)
    assert T.table_note(0, 0, "", "findings", filters=hide) == (
        "No results in the Findings track on this test set with these filters (models trained on this test set (\\*) hidden).")
    assert T.table_note(0, 0, "x", "other") == "No results in the other track on this test set yet."
    assert T.table_note(2, 3, "", "findings", filters=hide, n_unranked=2) == (
        "3 results in the Findings track. Filters: models trained on this test set (\\*) hidden. "
        "2 results without a 1/RadCliQ-v1 value: unranked (–), listed last; their rows give their places by the metrics "
        "they have.")
    assert T.table_note(3, 3, "", "findings", rank_by="green", none_ranked=True, n_unranked=3, tiers_note="Tiers.") == (
        "3 results in the Findings track. No result here has a GREEN value, so none is ranked (–): rank by another metric. Tiers.")
    assert T.table_note(2, 5, "a b", "findings_impression") == "2 of 5 results match the search."
    assert T.table_note(1, 1, "a", "findings") == "1 of 1 result matches the search."
    assert T.table_note(0, 1, "a", "findings") == (
        "No model or institution matches the search: the table is empty. Clear the search to see all 1 result.")
    assert T.table_note(1, 1, "", "findings", tiers_note="") == "1 result in the Findings track."


def test_plural_and_the_rank_choices():
    assert [T.plural(n, "result") for n in (0, 1, 2)] == ["0 results", "1 result", "2 results"]
    assert [T.plural(n, "study", "studies") for n in (1, 2)] == ["1 study", "2 studies"]
    assert T.rank_choices() == [
        ("1/RadCliQ-v1 (ReXrank default)", "radcliq_v1_inv"), ("1/FineRadScore (ReXrank Challenge)", "fineradscore_inv"),
        ("BLEU", "bleu2"), ("BertScore", "bertscore"), ("SembScore", "sembscore"), ("RadGraph", "radgraph"),
        ("RaTEScore", "ratescore"), ("GREEN", "green"), ("ROUGE-L", "rouge"), ("Temporal F1", "temporal_f1"),
        ("SRR-BERT F1", "srr_bert"), ("CRIMSON", "crimson")]


def test_cells_escape_link_and_format_by_hand():
    assert T.md_escape("a_b*c[d](e)#|<x>!~`\\") == "a\\_b\\*c\\[d\\]\\(e\\)\\#\\|\\<x\\>\\!\\~\\`\\\\"
    assert T.md_escape(12) == "12"
    assert [T.web_url(u) for u in ("https://x.org/a?b=1", "http://x", "javascript:alert(1)", "https://x.org/a b",
                                   "https://x.org/(a)", "ftp://x", None, "", "HTTPS://X.ORG")] == [
        "https://x.org/a?b=1", "http://x", None, None, None, None, None, None, None]
    row = {"model_name": "M_1", "model_url": "https://m.example", "trained": True}
    assert T.model_cell(row) == "[M\\_1](https://m.example) \\*"
    assert T.model_cell(row, link=False) == "M\\_1 \\*"
    assert T.model_cell({"model_name": "N", "model_url": "data:x", "trained": False}) == "N"
    assert T.model_cell({"model_name": "N", "trained": False}) == "N"
    assert T.format_value(0.5, 0.02) == "0.500\u00a0±\u00a00.020" and T.format_value(0.5, 0.02, best=True) == "**0.500**\u00a0±\u00a00.020"
    assert T.format_value(1, None) == "1.000" and T.format_value(0.12345, math.nan) == "0.123"
    assert T.format_value(None, 0.1) == "–" and T.format_value(math.nan, 0.1) == "–"
    assert T.format_value(np.float64(0.25), np.float64(0.5)) == "0.250\u00a0±\u00a00.500"
    assert [T.year(d) for d in ("2026-11-25", " 2025", "2024", "", None, "unknown_date", 2023)] == [
        "2026", "2025", "2024", "", "", "unknown\\_date", "2023"]


def test_metric_cells_bold_the_best_and_add_each_ci():
    means = np.array([0.5, 0.3, np.nan, 0.5])
    cis = np.array([0.01, np.nan, 0.2, np.nan])
    assert T.metric_cells(means, cis, 0.5) == ["**0.500**\u00a0±\u00a00.010", "0.300", "–", "**0.500**"]
    assert T.metric_cells(means, cis, math.nan) == ["0.500\u00a0±\u00a00.010", "0.300", "–", "0.500"]
    assert T.metric_cells(np.array([0.3, 0.2]), np.array([np.nan, np.nan]), 0.2) == ["0.300", "**0.200**"]
    # within 1e-12 of the best (floating-point noise) is the best; 1e-9 away is not
    assert T.metric_cells(np.array([1e-12, 0.0, -1e-9]), np.full(3, np.nan), 1e-12) == ["**0.000**", "**0.000**", "-0.000"]
    assert T.metric_cells(np.array([-0.25]), np.array([0.125]), -0.25) == ["**-0.250**\u00a0±\u00a00.125"]


def test_headers_columns_and_slots_by_hand():
    default = ["Rank", "Model", "1/RadCliQ-v1 ↑ ▼", "n", "Tier", "Institution", "Date", "BLEU ↑", "BertScore ↑",
               "SembScore ↑", "RadGraph ↑", "RaTEScore ↑", "GREEN ↑", "1/FineRadScore ↑", "Source"]
    assert T.display_headers() == default
    assert T.display_headers("bleu2", ["green"], with_n=False, with_tier=False) == [
        "Rank", "Model", "BLEU ↑ ▼", "Institution", "Date", "GREEN ↑", "Source"]
    assert T.display_headers("rouge", with_tier=False)[:4] == ["Rank", "Model", "ROUGE-L ↑ ▼", "n"]
    assert T.display_headers("rouge", with_n=False)[:4] == ["Rank", "Model", "ROUGE-L ↑ ▼", "Tier"]
    table = T.ranked(board(), "iu_xray", "findings")
    assert T.display_headers(table=table)[-2:] == ["ROUGE-L ↑", "Source"]
    assert T.shown_columns(None, "crimson") == (*KEYS[:8], "crimson")
    assert T.shown_columns(["green", "bleu2", "bleu2"], "radcliq_v1_inv") == ("bleu2", "radcliq_v1_inv", "green")
    assert T.shown_columns([], "green") == ("green",)
    assert T.shown_columns(None, "bleu2", table) == (*KEYS[:8], "rouge")
    assert T.shown_columns(None, "bleu2", table.iloc[:3]) == KEYS[:8]  # D, the row with ROUGE-L, left out
    assert T.display_slots(("bleu2",), "green") == ("Rank", "Model", "green", "n", "Tier", "Institution", "Date", "bleu2",
                                                   "Source")  # n and Tier unless told otherwise
    assert T.display_slots(("bleu2", "green"), "green", with_n=False, with_tier=True) == (
        "Rank", "Model", "green", "Tier", "Institution", "Date", "bleu2", "Source")
    assert T.slot_header("Model", "bleu2") == "Model" and T.slot_header("green", "green") == "GREEN ↑ ▼"
    assert T.column_header("green", "bleu2") == "GREEN ↑" and T.sort_mark("green") == "▼"
    for header, key in (("BLEU ↑", "bleu2"), ("1/RadCliQ-v1 ↑ ▼", "radcliq_v1_inv"), ("GREEN", "green"),
                        ("  ROUGE-L ↓ ▲ ", "rouge"), ("Model", None), ("", None), (None, None), ("BLEU ↑ x", None)):
        assert T.rank_key_for_header(header) == key, header


def test_best_values_and_shown_n_by_hand():
    table = T.ranked(board(), "iu_xray", "findings")
    best = T.best_values(table)
    assert (best["bleu2"], best["radcliq_v1_inv"], best["green"], best["rouge"]) == (0.3, 1.25, 0.5, 0.4)
    assert math.isnan(best["bertscore"]) and math.isnan(best["crimson"]) and list(best) == list(KEYS)
    shown = T.shown_n(table, "bleu2")  # BLEU's own n, else the result's n
    assert shown.tolist()[0] == 588 and math.isnan(shown[1]) and shown.tolist()[2] == 590 and math.isnan(shown[3])
    assert T.shown_n(table, "radcliq_v1_inv")[0] == 590


def test_the_overview_is_each_test_sets_ranked_top_with_its_note():
    frame = board()
    views = T.page_views(frame, "findings", test_sets=("iu_xray", "mimic_cxr", "chexpert_plus"))
    assert views.overview.to_dict("list") == {
        "Rank": ["1", "2", "3"],
        "IU-Xray": ["A \\* (Lab A)", "B (Uni\\_B)", "C (C \\(inst\\))"],
        "MIMIC-CXR": ["E (Lab E)", "", ""],
        "CheXpert Plus": ["", "", ""],
    }
    assert views.overview_plain.to_dict("list") == {
        "Rank": ["1", "2", "3"],
        "IU-Xray": ["A * (Lab A)", "B (Uni_B)", "C (C (inst))"],
        "MIMIC-CXR": ["E (Lab E)", "", ""],  # E is trained on IU-Xray, not on MIMIC-CXR
        "CheXpert Plus": ["", "", ""],
    }
    assert views.overview_note == ("No result on CheXpert Plus (1 result) has a 1/RadCliQ-v1 value, so nothing is "
                                   "ranked there: rank by another metric to see them.")
    assert set(views.tables) == {"iu_xray", "mimic_cxr", "chexpert_plus"}
    assert views.tables["mimic_cxr"].display["Model"].tolist() == ["E"]
    assert views.tables["chexpert_plus"].note == ("1 result in the Findings track. No result here has a 1/RadCliQ-v1 "
                                                 "value, so none is ranked (–): rank by another metric.")
    assert T.overview(frame, "findings", top=2, test_sets=("iu_xray",))["IU-Xray"].tolist() == ["A \\* (Lab A)", "B (Uni\\_B)"]
    assert T.overview(frame, "findings", top=None, test_sets=("iu_xray", "nih")).columns.tolist() == ["Rank", "IU-Xray", "nih"]
    assert T.overview(frame, "findings", "bleu2", test_sets=("iu_xray",), markdown=False)["IU-Xray"].tolist() == [
        "B (Uni_B)", "D (D)", "A * (Lab A)", "C (C (inst))"]
    empty = T.overview(frame, "findings", test_sets=())
    assert empty.columns.tolist() == ["Rank"] and len(empty) == 0
    two = {"iu_xray": T.ranked(frame, "iu_xray", "findings"), "chexpert_plus": T.ranked(frame, "chexpert_plus", "findings"),
           "mimic_cxr": T.ranked(frame, "mimic_cxr", "findings").iloc[:0]}
    two["iu_xray"] = two["iu_xray"].assign(rank=math.nan)
    assert T.overview_note(two, "green") == ("No result on IU-Xray (4 results), CheXpert Plus (1 result) has a GREEN value, "
                                             "so nothing is ranked there: rank by another metric to see them.")
    assert T.overview(frame, "findings", "green", test_sets=("iu_xray",), ranked_tables=two)["IU-Xray"].tolist() == []
    # every test set ranks something: no note; a test set without a label is named as it is
    assert T.page_views(frame, "findings", test_sets=("iu_xray", "mimic_cxr")).overview_note == ""
    assert T.overview_note({"nih": two["chexpert_plus"]}, "radcliq_v1_inv") == (
        "No result on nih (1 result) has a 1/RadCliQ-v1 value, so nothing is ranked there: rank by another metric to see them.")


def test_the_overview_shows_the_top_ten_by_default():
    frame = R.records_frame([board_record(f"m{i}", f"M{i:02d}", bleu2=i / 100, radcliq_v1_inv=1 + i / 100) for i in range(12)])
    over = T.overview(frame, "findings", test_sets=("iu_xray",))
    assert over["Rank"].tolist() == [str(i) for i in range(1, 11)]
    assert over["IU-Xray"].tolist() == [f"M{i:02d} (Lab)" for i in range(11, 1, -1)]
    assert T.overview_cells(T.ranked(frame, "iu_xray", "findings"))[1] == [f"M{i:02d} (Lab)" for i in range(11, 1, -1)]


def test_overview_cells_keep_the_top_ranked_rows():
    table = T.ranked(board(), "iu_xray", "findings")
    assert T.overview_cells(table, top=2) == (["A \\* (Lab A)", "B (Uni\\_B)"], ["A * (Lab A)", "B (Uni_B)"])
    assert T.overview_cells(table, top=None)[1] == ["A * (Lab A)", "B (Uni_B)", "C (C (inst))"]
    assert T.overview_cells(table)[1] == ["A * (Lab A)", "B (Uni_B)", "C (C (inst))"]


def test_every_view_of_both_tracks_and_the_system_table():
    frame = board()
    views = {track: T.page_views(frame, track) for track in ("findings", "findings_impression")}
    for track, view in views.items():
        assert set(view.tables) == {"rexgradient", "mimic_cxr", "iu_xray", "chexpert_plus"}, track
    assert views["findings_impression"].tables["iu_xray"].display["Model"].tolist() == ["F"]
    assert views["findings"].tables["iu_xray"].display["Model"].tolist() == ["[A](https://a.example/m) \\*", "B", "C",
                                                                           "[D](http://d.example)"]
    assert views["findings"].overview.columns.tolist() == ["Rank", "ReXGradient (private)", "MIMIC-CXR", "IU-Xray",
                                                           "CheXpert Plus"]
    by_bleu = T.page_views(frame, "findings", "bleu2")
    assert set(by_bleu.tables) == {"rexgradient", "mimic_cxr", "iu_xray", "chexpert_plus"}
    assert by_bleu.tables["chexpert_plus"].display["Rank"].tolist() == ["1"]
    searched = T.page_views(frame, "findings", "radcliq_v1_inv", "lab", test_sets=("iu_xray", "mimic_cxr"))
    tables_ = {t: v.display for t, v in searched.tables.items()}
    assert set(tables_) == {"iu_xray", "mimic_cxr"} and tables_["iu_xray"]["Model"].tolist() == ["[A](https://a.example/m) \\*"]
    assert searched.overview["MIMIC-CXR"].tolist() == ["E (Lab E)", "", ""]  # the overview is not searched: IU-Xray's 3 ranked rows
    system = T.system_table(frame, "iu_xray", "findings")
    assert system.index.tolist() == ["A", "D", "C", "B"] and system.index.name == "system"
    assert system.columns.tolist() == list(KEYS) and system.loc["B", "bleu2"] == 0.3
    twice = R.records_frame([board_record("x1", "X", bleu2=0.1), board_record("x2", "X", source="published", bleu2=0.2),
                             board_record("y", "Y", bleu2=0.3)])
    assert T.system_table(twice, "iu_xray", "findings").index.tolist() == ["X (rexrank)", "X (published)", "Y"]


def test_page_views_go_through_the_part_cache_and_pass_each_option():
    frame = board()
    calls = []

    def cached(key, part, compute):
        calls.append((key, part))
        return compute()

    views = T.page_views(frame, "findings", "bleu2", "lab", ("iu_xray",), cached=cached, filters=T.Filters(hide_trained=True),
                         columns=["green"])
    hide = T.Filters(hide_trained=True)
    assert calls == [(("ranked", "bleu2", hide), ("iu_xray", "findings")),
                     (("view", "bleu2", "lab", hide, ("green",)), ("iu_xray", "findings")),
                     (("overview", "bleu2", hide), ("iu_xray", "findings"))]
    iu = views.tables["iu_xray"]
    assert list(iu.display.columns) == ["Rank", "Model", "BLEU ↑ ▼", "n", "Institution", "Date", "GREEN ↑", "Source"]
    assert iu.display["Model"].tolist() == [] and iu.note == (
        "No model or institution matches the search: the table is empty. Clear the search to see all 3 results. "
        "Filters: models trained on this test set (\\*) hidden.")
    assert views.overview["IU-Xray"].tolist() == ["B (Uni\\_B)", "D (D)", "C (C \\(inst\\))"]
    assert views.overview_plain["IU-Xray"].tolist() == ["B (Uni_B)", "D (D)", "C (C (inst))"]  # A hidden here too
    # tiers: computed through the cache from each table's per-study scores
    calls.clear()
    seen = []
    scores = {"a": np.array([1.0, 2.0, 3.0, 4.0]), "c": np.array([2.0, 3.0, 4.0, 5.5])}

    def per_study(rid):
        seen.append(rid)
        return pd.DataFrame({"id": ["s1", "s2", "s3", "s4"], "radcliq_v1": scores[rid]}) if rid in scores else None

    p_cache: dict = {}
    views = T.page_views(frame, "findings", test_sets=("iu_xray",), cached=cached, per_study=per_study, p_cache=p_cache)
    assert [c[0][0] for c in calls] == ["ranked", "tiers", "view", "overview"]
    assert calls[1] == (("tiers", "radcliq_v1_inv", T.NO_FILTERS), ("iu_xray", "findings"))
    assert seen == ["a", "c"]  # the rows with per-study scores, best first
    # C - A = 1, 1, 1, 1.5 per study: t = 1.125 / (0.25 / 2) = 9 on 3 degrees of freedom, p < 0.05: a tier apart
    from scipy import stats as sps

    assert sps.ttest_rel(scores["a"], scores["c"]).pvalue < 0.05
    # the paired test is kept in the caller's p_cache, keyed by (above, below, per-study column)
    assert list(p_cache) == [("a", "c", "radcliq_v1")]
    assert p_cache[("a", "c", "radcliq_v1")] == pytest.approx(sps.ttest_rel(scores["a"], scores["c"]).pvalue)
    assert views.tables["iu_xray"].display["Tier"].tolist() == ["1", "", "2", ""]
    assert views.tables["iu_xray"].plain["Tier"].tolist() == [1, pd.NA, 2, pd.NA]


def test_the_n_column_falls_back_to_the_results_n_where_the_ranking_metric_does_not_say():
    """C gives GREEN without n; its result's n is its largest, 590 (1/RadCliQ-v1 and BLEU)."""
    table = T.ranked(board(), "iu_xray", "findings", "green")
    assert table["model_name"].tolist() == ["C", "A", "B", "D"]
    shown = T.shown_n(table, "green")
    assert shown[0] == 590 and shown[1] == 590 and math.isnan(shown[2]) and math.isnan(shown[3])  # A: max(590, 588)
    assert T.csv_table(table, "iu_xray", "findings", rank_by="green")["n"].tolist() == [590, 590, pd.NA, pd.NA]
    assert grid(board(), "iu_xray", "findings", "green")["n"].tolist() == ["590", "590", "–", "–"]


def test_a_searched_tables_csv_keeps_each_rows_own_values():
    view = T.test_set_view(T.ranked(board(), "iu_xray", "findings"), "iu_xray", "findings", "radcliq_v1_inv", "c (inst")
    plain = view.plain
    assert plain.index.tolist() == [0]
    assert plain[["Rank", "Model", "Institution", "Date", "n", "BLEU", "GREEN", "Source"]].to_dict("records") == [
        {"Rank": 3, "Model": "C", "Institution": "C (inst)", "Date": "2025-01", "n": 590, "BLEU": 0.1, "GREEN": 0.5,
         "Source": "submitted"}]
    assert plain["Test set"].tolist() == ["IU-Xray"] and plain["Track"].tolist() == ["Findings"]


def test_a_grid_follows_its_filters_columns_and_tiers():
    frame = board()
    hidden = grid(frame, "iu_xray", "findings", filters=T.Filters(hide_trained=True))
    assert hidden["Model"].tolist() == ["B", "C", "[D](http://d.example)"] and hidden["Rank"].tolist() == ["1", "2", "–"]
    chosen = grid(frame, "iu_xray", "findings", columns=["green"])
    assert list(chosen.columns) == ["Rank", "Model", "1/RadCliQ-v1 ↑ ▼", "n", "Institution", "Date", "GREEN ↑", "Source"]
    scores = {"a": [1.0, 2.0, 3.0, 4.0], "c": [2.0, 3.0, 4.0, 5.5]}  # a tier apart (see the page_views test)
    tiered = grid(frame, "iu_xray", "findings", "radcliq_v1_inv", "lab",
                                per_study=lambda rid: pd.DataFrame({"id": ["s1", "s2", "s3", "s4"], "radcliq_v1": scores[rid]})
                                if rid in scores else None)
    assert list(tiered.columns)[:5] == ["Rank", "Model", "1/RadCliQ-v1 ↑ ▼", "n", "Tier"] and tiered["Tier"].tolist() == ["1"]
    assert "Tier" not in grid(frame, "iu_xray", "findings").columns


def test_a_views_columns_n_and_note_follow_its_ranking_metric_and_choice():
    by_green = T.test_set_view(T.ranked(board(), "iu_xray", "findings", "green"), "iu_xray", "findings", "green", "")
    assert by_green.note == ("4 results in the Findings track. 3 results without a GREEN value: unranked (–), listed last; "
                             "their rows give their places by the metrics they have. Values: mean ± 95\u00a0% CI, n = studies scored; 1 published result gives means only.")
    assert by_green.slots == ("Rank", "Model", "green", "n", "Institution", "Date", "bleu2", "bertscore", "sembscore",
                              "radgraph", "radcliq_v1_inv", "ratescore", "fineradscore_inv", "rouge", "Source")
    by_bleu = T.test_set_view(T.ranked(board(), "iu_xray", "findings", "bleu2"), "iu_xray", "findings", "bleu2", "")
    assert by_bleu.plain["Model"].tolist() == ["B", "D", "A", "C"] and by_bleu.plain["n"].tolist() == [pd.NA, pd.NA, 588, 590]
    chosen = T.test_set_view(T.ranked(board(), "iu_xray", "findings"), "iu_xray", "findings", "radcliq_v1_inv", "",
                             columns=("green",))
    assert chosen.slots == ("Rank", "Model", "radcliq_v1_inv", "n", "Institution", "Date", "green", "Source")
    # the n column: there when a row says its n, not when none does (published rows never do)
    published = R.records_frame([board_record("p", "P", source="published", radcliq_v1_inv=1.0, bleu2=0.2)])
    none_say = T.test_set_view(T.ranked(published, "iu_xray", "findings"), "iu_xray", "findings", "radcliq_v1_inv", "")
    assert "n" not in none_say.slots and "n" not in none_say.display.columns
    scored = R.records_frame([board_record("s", "S", radcliq_v1_inv={"mean": 1.0, "n": 590})])
    all_say = T.test_set_view(T.ranked(scored, "iu_xray", "findings"), "iu_xray", "findings", "radcliq_v1_inv", "")
    assert all_say.slots[3] == "n" and all_say.display["n"].tolist() == ["590"]


def test_lookalike_names_and_titles_are_marked_except_the_published_original():
    """Rule (lookalikes): a row is marked when its model's name, or its whole title, reads the
    same (name_key: case, l for I, ...) as another row's spelt otherwise; a published entry
    is the original and never marked; two namespaces' models of one name spelt alike are no
    lookalikes. Nobody takes another's place: the rows all stay."""
    table = pd.DataFrame({
        "model_name": ["MAIRA-2", "mallory / MAlRA-2", "stanford-aimi / X", "stanford-aiml / X", "alice / CheXagent",
                       "bob / CheXagent", "carol / Foo", "dave / FOO"],
        "namespace": ["", "mallory", "stanford-aimi", "stanford-aiml", "alice", "bob", "carol", "dave"],
        "source": ["published", "rexrank", "rexrank", "rexrank", "rexrank", "rexrank", "rexrank", "rexrank"]})
    assert T.lookalikes(table) == [False, True, True, True, False, False, True, True]
    bare = pd.DataFrame({"model_name": ["MAIRA-2", "MAlRA-2", "Other"]})  # no namespace, no source: names are titles
    assert T.lookalikes(bare) == [True, True, False]
    # a title that does not begin with its namespace is its own name (nothing cut off it)
    unprefixed = pd.DataFrame({"model_name": ["MAIRA-2", "other / MAlRA-2"], "namespace": ["acme", "other"],
                               "source": ["rexrank", "rexrank"]})
    assert T.lookalikes(unprefixed) == [True, True]


def _lookalike_board() -> pd.DataFrame:
    """IU-Xray findings: the published "MAIRA-2" (1.5, no n), a submitted lookalike "MAlRA-2"
    trained on IU-Xray (1.25 ± 0.05, n 590) and "S", scored by BLEU only (n 500)."""
    return R.records_frame([
        board_record("m", "MAIRA-2", source="published", radcliq_v1_inv=1.5, bleu2=0.2),
        board_record("l", "MAlRA-2", url="https://m.example/x", trained_on=["iu_xray"],
                     radcliq_v1_inv={"mean": 1.25, "ci95": 0.05, "n": 590}, bleu2=0.3),
        board_record("s", "S", bleu2={"mean": 0.1, "n": 500}),
    ])


def test_a_table_by_hand_with_its_n_column_an_unranked_rows_standing_and_a_lookalike_mark():
    table = T.ranked(_lookalike_board(), "iu_xray", "findings")
    shown = T.display_table(table, T.best_values(table), "radcliq_v1_inv", columns=("bleu2",))
    lookalike = "[MAlRA-2](https://m.example/x) \\* ⚠ lookalike name"
    assert shown.to_dict("list") == {
        "Rank": ["1", "2", "–"],
        "Model": ["MAIRA-2", lookalike, "S"],
        "1/RadCliQ-v1 ↑ ▼": ["**1.500**", "1.250\u00a0±\u00a00.050", "– not scored · 3rd of 3 by BLEU"],
        "n": ["–", "590", "500"],  # the ranking metric's n, else the result's
        "Institution": ["Lab"] * 3,
        "Date": ["2025"] * 3,
        "BLEU ↑": ["0.200", "**0.300**", "0.100"],
        "Source": ["published", "submitted", "submitted"],
    }
    # the mark stays when a filter hides the original, and where a table has no marks of its own
    submitted = T.ranked(_lookalike_board(), "iu_xray", "findings", filters=T.Filters(sources=("submitted",)))
    shown = T.display_table(submitted, T.best_values(submitted), "radcliq_v1_inv", columns=("bleu2",))
    assert shown["Model"].tolist() == [lookalike, "S"] and shown["n"].tolist() == ["590", "500"]
    unmarked = table.drop(columns="lookalike")
    assert T.display_table(unmarked, T.best_values(table), "radcliq_v1_inv")["Model"].tolist() == ["MAIRA-2", lookalike, "S"]
    # with_n given wins; no row with an n, no n column
    assert "n" not in T.display_table(table, T.best_values(table), "radcliq_v1_inv", with_n=False)
    no_n = table.assign(n=math.nan, radcliq_v1_inv_n=math.nan)
    assert "n" not in T.display_table(no_n, T.best_values(table), "radcliq_v1_inv")
    # the standing given (the whole table's, before a search) is the one shown
    placed = T.display_table(table, T.best_values(table), "radcliq_v1_inv", placed={"s": "2nd of 9 by BLEU"})
    assert placed["1/RadCliQ-v1 ↑ ▼"].tolist()[2] == "– not scored · 2nd of 9 by BLEU"


def test_an_unranked_cell_says_why_by_source_and_adds_a_standing_only_when_there_is_one():
    assert T.unranked_cell("published") == "– not published"
    assert T.unranked_cell("rexrank", "") == "– not scored"
    assert T.unranked_cell("rexrank", "1st of 2 by BLEU") == "– not scored · 1st of 2 by BLEU"


def test_the_overview_cells_mark_a_lookalike_name_in_both_forms():
    table = T.ranked(_lookalike_board(), "iu_xray", "findings")
    assert T.overview_cells(table) == (["MAIRA-2 (Lab)", "MAlRA-2 \\* ⚠ lookalike name (Lab)"],
                                       ["MAIRA-2 (Lab)", "MAlRA-2 * ⚠ lookalike name (Lab)"])


def test_ordinals_past_a_hundred_follow_the_last_two_digits():
    assert [T.ordinal(n) for n in (0, 10, 20, 110, 111, 112, 113, 120, 121, 122, 123, 1002, 1011)] == [
        "0th", "10th", "20th", "110th", "111th", "112th", "113th", "120th", "121st", "122nd", "123rd", "1002nd", "1011th"]


def test_the_elsewhere_note_names_each_tab_with_matches_by_its_label_or_key():
    link = "?tab={}".format
    assert T.elsewhere_note({"iu_xray": 0, "nih": 2, "mimic_cxr": 1}, link) == (
        "It matches on [nih](?tab=nih) (2 results), [MIMIC-CXR](?tab=mimic_cxr) (1 result).")
    assert T.elsewhere_note({"iu_xray": 0}, link) == ""


def test_a_models_ranking_is_the_one_asked_when_it_has_it_else_the_first_it_has():
    problems = []  # a value outside its metric's range is kept as no value, and said
    frame = R.records_frame([board_record("p", "P", radcliq_v1_inv=1.0, bleu2=0.3), board_record("s", "S", bleu2=0.2),
                             board_record("n", "N", bleu2=5.0)], problems=problems)
    assert len(problems) == 1
    assert T.rank_key_of(frame, "iu_xray", "findings", "P", "bleu2") == "bleu2"  # asked, and it has it
    assert T.rank_key_of(frame, "iu_xray", "findings", "S") == "bleu2"
    assert math.isnan(frame.loc[frame["model_name"] == "N", "bleu2"].item())
    assert T.rank_key_of(frame, "iu_xray", "findings", "N", "green") == "green"  # no value at all: as asked
    assert T.rank_key_of(frame, "iu_xray", "findings", "Nobody", "green") == "green"


def test_the_elsewhere_hint_is_only_for_a_search_with_a_link_and_adds_nothing_when_it_matches_nowhere():
    frame = R.records_frame([board_record("a", "Alpha", bleu2=0.3), board_record("b", "Beta", test_set="mimic_cxr", bleu2=0.2)])
    plain = T.page_views(frame, "findings", "bleu2", "alpha", test_sets=("iu_xray", "mimic_cxr"))
    linked = T.page_views(frame, "findings", "bleu2", "alpha", test_sets=("iu_xray", "mimic_cxr"), link="?tab={}".format)
    assert linked.tables["mimic_cxr"].note == f"{plain.tables['mimic_cxr'].note} It matches on [IU-Xray](?tab=iu_xray) (1 result)."
    nowhere = T.page_views(frame, "findings", "bleu2", "gamma", test_sets=("iu_xray", "mimic_cxr"), link="?tab={}".format)
    unlinked = T.page_views(frame, "findings", "bleu2", "gamma", test_sets=("iu_xray", "mimic_cxr"))
    assert [v.note for v in nowhere.tables.values()] == [v.note for v in unlinked.tables.values()]
    # no search: no hint, even on a tab with no row
    empty_tab = T.page_views(frame, "findings", "bleu2", test_sets=("iu_xray", "chexpert_plus"), link="?tab={}".format)
    assert "It matches on" not in empty_tab.tables["chexpert_plus"].note


def test_the_values_note_says_why_published_rows_give_means_only_in_the_right_number():
    table = T.ranked(_lookalike_board(), "iu_xray", "findings")
    values = "Values: mean ± 95\u00a0% CI, n = studies scored"
    assert T.values_note(table) == f"{values}; 1 published result gives means only."
    two = table.assign(source=["published", "rexrank", "published"])
    assert T.values_note(two) == f"{values}; 2 published results give means only."
    assert T.values_note(table.assign(source="rexrank")) == f"{values}."
    assert T.values_note(table.assign(**{f"{k}_ci": math.nan for k in T.METRIC_KEYS})) == ""


def test_the_csv_says_which_names_are_lookalikes_and_the_view_which_columns_have_a_ci():
    table = T.ranked(_lookalike_board(), "iu_xray", "findings")
    csv = T.csv_table(table, "iu_xray", "findings")
    assert csv["Lookalike name"].tolist() == ["", "yes", ""] and csv["Trained on this test set"].tolist() == ["", "yes", ""]
    view = T.page_views(_lookalike_board(), "findings", test_sets=("iu_xray",)).tables["iu_xray"]
    assert view.ci_columns == frozenset({"radcliq_v1_inv"})  # only MAlRA-2's 1/RadCliQ-v1 has one
    # a row without the ranking metric and without a standing given: why, and nothing more
    shown = T.display_table(table, T.best_values(table), "radcliq_v1_inv", placed={})
    assert shown["1/RadCliQ-v1 ↑ ▼"].tolist()[2] == "– not scored"


def test_standings_by_hand_ties_at_the_best_place_values_shared_places_and_a_lower_is_better_metric(monkeypatch):
    """"S" lacks 1/RadCliQ-v1: it ties A and B on BLEU (0.3, all three 1st: the best rank of a
    tie) and is 2nd of 2 by GREEN (0.4 ± 0.02 below A's 0.5); with BERTScore and ROUGE-L both
    2nd of 2 the place is shared by their names."""
    import dataclasses

    frame = R.records_frame([
        board_record("a", "A", radcliq_v1_inv=1.0, bleu2=0.3, green=0.5, bertscore=0.9, rouge=0.5),
        board_record("b", "B", radcliq_v1_inv=0.9, bleu2=0.3),
        board_record("s", "S", bleu2=0.3, green={"mean": 0.4, "ci95": 0.02}, bertscore=0.8, rouge=0.4),
    ])
    table = T.ranked(frame, "iu_xray", "findings")
    assert T.standings(table, "radcliq_v1_inv") == {
        "s": "1st of 3 by BLEU; 2nd of 2 by BertScore, GREEN, ROUGE-L"}
    assert T.standings(table, "radcliq_v1_inv", with_values=True) == {
        "s": "1st of 3 by BLEU (0.300); 2nd of 2 by BertScore (0.800), GREEN (0.400\u00a0±\u00a00.020), ROUGE-L (0.400)"}
    # a metric where lower is better places the lowest first (places in the order of their first
    # metric in the site's columns)
    monkeypatch.setitem(T.COLUMNS_BY_KEY, "green", dataclasses.replace(T.COLUMNS_BY_KEY["green"], higher_is_better=False))
    assert T.standings(table, "radcliq_v1_inv")["s"] == "1st of 3 by BLEU; 2nd of 2 by BertScore, ROUGE-L; 1st of 2 by GREEN"
