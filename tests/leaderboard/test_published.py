"""The shipped seed (published ReXrank results) against the published CSVs, read here with
pandas and a column map written out in this test (not the converter's)."""
from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from rexrank.errors import RexrankError
from rexrank.leaderboard.published import load_seed_records, read_published_csv, read_published_dir
from support.paths import shared_path

# independent of results_schema: the published header -> leaderboard key
CSV_COLUMNS = {
    "BLEU": "bleu2",
    "BertScore": "bertscore",
    "SembScore": "sembscore",
    "RadGraph": "radgraph",
    "1/RadCliQ-v1": "radcliq_v1_inv",
    "RaTEScore": "ratescore",
    "GREEN": "green",
    "1/FineRadScore": "fineradscore_inv",
}
FILES = {
    "findings_result_iu_xray.csv": ("iu_xray", "findings"),
    "findings_result_mimiccxr.csv": ("mimic_cxr", "findings"),
    "findings_result_chexpertplus.csv": ("chexpert_plus", "findings"),
    "findings_result_gradienthealth.csv": ("rexgradient", "findings"),
    "result_iu_xray.csv": ("iu_xray", "findings_impression"),
    "result_mimiccxr.csv": ("mimic_cxr", "findings_impression"),
    "result_chexpertplus.csv": ("chexpert_plus", "findings_impression"),
    "result_gradienthealth.csv": ("rexgradient", "findings_impression"),
}


@pytest.fixture(scope="module")
def seed():
    return load_seed_records()


def _by_key(records):
    return {(r["test_set"], r["track"], r["provenance"]["published_name"]): r for r in records}


def test_seed_numbers_equal_the_published_csvs(seed):
    folder = shared_path("data", "published", "current")
    by_key = _by_key(seed)
    n_rows = 0
    for name, (test_set, track) in FILES.items():
        csv = pd.read_csv(folder / name)
        for _, row in csv.iterrows():
            n_rows += 1
            record = by_key[(test_set, track, row["Model Name"])]
            assert record["institution"] == row["Institution"]
            assert record["model_url"] == row["Model URL"]
            assert record["source"] == "published"
            assert record["per_study_available"] is False
            for header, key in CSV_COLUMNS.items():
                value = row[header]
                if pd.isna(value) or (key == "fineradscore_inv" and value == 0):
                    # not reported (the UniRG-CXR rows): absent, and the reason is recorded
                    assert key not in record["values"], (name, row["Model Name"], key)
                    assert key in record["provenance"]["not_reported"]
                else:
                    entry = record["values"][key]
                    assert entry["mean"] == pytest.approx(float(value), abs=1e-12), (name, row["Model Name"], key)
                    assert entry["ci95"] is None and entry["n"] is None
    assert n_rows == len(seed) == 4 * 25 + 4 * 7


def test_shipped_seed_is_the_conversion_of_the_published_folder(seed):
    records, others = read_published_dir(shared_path("data", "published", "current"))
    assert others == []
    assert json.loads(json.dumps(records)) == seed


def test_unirg_missing_fineradscore_is_not_a_zero(seed):
    unirg = [r for r in seed if r["model_name"] == "UniRG-CXR"]
    assert len(unirg) == 8
    assert all("fineradscore_inv" not in r["values"] for r in unirg)
    # the CheXpert Plus findings table publishes a literal 0 for it
    cxp = next(r for r in unirg if r["test_set"] == "chexpert_plus" and r["track"] == "findings")
    assert "0" in cxp["provenance"]["not_reported"]["fineradscore_inv"]


def test_names_are_unified_across_tables(seed):
    # result_chexpertplus.csv spells CheXpertPlus_MIMIC; every other table CheXpertPlus-MIMIC
    tables = {(r["test_set"], r["track"]) for r in seed if r["model_name"] == "CheXpertPlus-MIMIC"}
    assert len(tables) == 8
    assert not any("_" in r["model_name"] for r in seed)


def test_trained_markers_follow_the_sites_asterisks(seed):
    """Models starred ("* denotes the model used the training set") in the 2024 MIMIC-CXR
    table whose names are unchanged today are marked as trained on MIMIC-CXR."""
    history = pd.read_csv(shared_path("data", "published", "history", "main@8152f99_result_mimic-cxr.csv"))
    current = {r["model_name"] for r in seed}
    starred = {n.rstrip("*") for n in history["Model Name"] if n.endswith("*")}
    unstarred = {n for n in history["Model Name"] if not n.endswith("*")}
    checked = 0
    for r in seed:
        if r["model_name"] in starred:
            assert "mimic_cxr" in r["trained_on"], r["id"]
            checked += 1
        if r["model_name"] in unstarred:
            assert r["trained_on"] == [], r["id"]
    assert starred & current == {"CheXagent", "MedVersa", "RadFM", "RaDialog", "RGRG", "LLM-CXR"}
    assert unstarred & current == {"GPT4V"}
    assert checked > 0


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


HEADER = "Rank,Date,Model Name,Institution,Model URL,BLEU,BertScore,SembScore,RadGraph,1/RadCliQ-v1,RaTEScore,GREEN,1/FineRadScore\n"


def test_bad_number_names_file_line_and_column(tmp_path):
    path = _write(tmp_path, "result_iu_xray.csv", HEADER + "1,2024,M,I,https://x,0.1,abc,0.3,0.4,1.0,0.5,0.6,0.7\n")
    with pytest.raises(RexrankError, match=r"result_iu_xray.csv:2 column 'BertScore': 'abc' is not a number"):
        read_published_csv(path)


def test_unknown_column_and_unknown_file_are_errors(tmp_path):
    path = _write(tmp_path, "result_iu_xray.csv", HEADER.replace("GREEN", "GREENER") + "")
    with pytest.raises(RexrankError, match="unknown column.*GREENER"):
        read_published_csv(path)
    other = _write(tmp_path, "result_other.csv", HEADER)
    with pytest.raises(RexrankError, match="not a known published ReXrank table"):
        read_published_csv(other)


def test_duplicate_model_and_extra_cells_are_errors(tmp_path):
    row = "1,2024,M,I,https://x,0.1,0.2,0.3,0.4,1.0,0.5,0.6,0.7\n"
    path = _write(tmp_path, "result_mimiccxr.csv", HEADER + row + row)
    with pytest.raises(RexrankError, match="already listed on line 2"):
        read_published_csv(path)
    path = _write(tmp_path, "result_mimiccxr.csv", HEADER + row.strip() + ",9\n")
    with pytest.raises(RexrankError, match="14 cells but the header has 13"):
        read_published_csv(path)


def test_missing_trailing_cell_is_recorded_not_reported(tmp_path):
    path = _write(tmp_path, "findings_result_mimiccxr.csv", HEADER + "1,2024,M,I,https://x,0.1,0.2,0.3,0.4,1.0,0.5,0.6")
    (record,) = read_published_csv(path)
    assert set(record["values"]) == set(CSV_COLUMNS.values()) - {"fineradscore_inv"}
    assert math.isclose(record["values"]["green"]["mean"], 0.6)
    assert record["test_set"] == "mimic_cxr" and record["track"] == "findings"


def test_folder_without_tables_is_an_error(tmp_path):
    _write(tmp_path, "notes.csv", "a,b\n")
    with pytest.raises(RexrankError, match="no published ReXrank table found"):
        read_published_dir(tmp_path)
