"""Table building: ranking, search, highlighting, CI display, trained marker, overview,
model page and significance against neighbours."""
from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
import pytest

from rexrank.errors import RexrankError
from rexrank.leaderboard import tables
from rexrank.leaderboard.model_page import model_results, neighbour_significance
from rexrank.leaderboard.published import load_seed_records
from rexrank.leaderboard.records import records_frame
from rexrank.leaderboard.source import LeaderboardSource
from tests.conftest import grid, shared_path


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
