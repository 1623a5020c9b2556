"""Issue 31, item 5: an error a user can fix names the fix, as the command line spells it
(a flag) and as Python spells it (an argument)."""
from __future__ import annotations

import json

import pandas as pd
import pytest

import rexrank
from rexrank.cli.main import main
from rexrank.data import data_path
from rexrank.errors import SubmissionError, TestSetError
from rexrank.submissions import read_raw_predictions


@pytest.fixture
def renamed_csv(tmp_path):
    preds = json.loads(data_path("example_predictions.json").read_text())
    path = tmp_path / "preds.csv"
    pd.DataFrame({"study": list(preds), "generated_report": [p["model_prediction"] for p in preds.values()]}).to_csv(path, index=False)
    return path


def test_cli_no_id_column_names_the_flag(renamed_csv, capsys):
    assert main(["score", "--dataset", "example", "--predictions", str(renamed_csv), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "no id column: expected one of id, study_id, found study, generated_report" in err
    assert "--id-column NAME" in err


def test_cli_no_prediction_column_names_the_flag(renamed_csv, capsys):
    assert main(["score", "--dataset", "example", "--predictions", str(renamed_csv), "--id-column", "study",
                 "--no-progress"]) == 1
    assert "--prediction-column NAME" in capsys.readouterr().err


def test_python_no_id_column_names_the_argument(renamed_csv):
    with pytest.raises(SubmissionError, match=r"id_column=NAME"):
        read_raw_predictions(renamed_csv)
    with pytest.raises(SubmissionError, match=r"prediction_column=NAME"):
        read_raw_predictions(renamed_csv, id_column="study")


def test_the_leaderboard_says_rename_not_a_flag_it_does_not_have(renamed_csv):
    from rexrank.leaderboard.submit import describe_error

    with pytest.raises(SubmissionError) as caught:
        read_raw_predictions(renamed_csv)
    text = describe_error(caught.value)
    assert "rename the column" in text and "--id-column" not in text and "id_column=" not in text


def test_a_test_set_not_given_names_the_python_argument_and_the_cli_flag(monkeypatch, capsys):
    monkeypatch.delenv("REXRANK_DATA_DIR", raising=False)
    with pytest.raises(TestSetError, match=r"data_dir="):
        rexrank.load_test_set("mimic_cxr")
    assert main(["score", "--dataset", "mimic_cxr", "--predictions", str(data_path("example_predictions.json")),
                 "--no-progress"]) == 1
    assert "--data-dir" in capsys.readouterr().err
