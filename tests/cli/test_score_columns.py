"""Predictions with other column names (`--id-column`, `--prediction-column` on `score` and
`submit`), and the bootstrap interval in `rexrank score`'s table."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from rexrank.cli.main import main
from rexrank.data import data_path
from rexrank.scoring import score_submission

EXAMPLE_PREDICTIONS = data_path("example_predictions.json")


@pytest.fixture
def renamed_csv(tmp_path):
    """The example predictions as a model repo often ships them: `dicom_id` and `generated`."""
    preds = json.loads(EXAMPLE_PREDICTIONS.read_text())
    path = tmp_path / "preds.csv"
    pd.DataFrame({"dicom_id": list(preds), "generated": [p["model_prediction"] for p in preds.values()]}).to_csv(path, index=False)
    return path


def test_score_reads_named_columns(renamed_csv, tmp_path, capsys):
    base = ["score", "--dataset", "example", "--predictions", str(renamed_csv), "--no-progress"]
    assert main(base) == 1
    assert "no id column: expected one of id, study_id, found dicom_id, generated" in capsys.readouterr().err
    out = tmp_path / "r.json"
    assert main([*base, "--id-column", "dicom_id", "--prediction-column", "generated", "--out", str(out)]) == 0
    expected = score_submission("example", "findings", EXAMPLE_PREDICTIONS, metrics="bleu2", progress=False)
    assert json.loads(out.read_text())["metrics"]["bleu2"]["scores"] == expected.results["metrics"]["bleu2"]["scores"]
    # a name that is not there is named in the error
    assert main([*base, "--id-column", "dicom_id", "--prediction-column", "text"]) == 1
    assert "no prediction text column: expected one of text, found dicom_id, generated" in capsys.readouterr().err


def test_submission_json_field_can_be_named_but_has_no_id_column(tmp_path, capsys):
    preds = json.loads(EXAMPLE_PREDICTIONS.read_text())
    path = tmp_path / "sub.json"
    path.write_text(json.dumps({k: {"pred": v["model_prediction"]} for k, v in preds.items()}))
    base = ["score", "--dataset", "example", "--predictions", str(path), "--no-progress"]
    assert main([*base, "--prediction-column", "pred"]) == 0
    capsys.readouterr()
    assert main([*base, "--prediction-column", "pred", "--id-column", "study"]) == 1
    assert "keyed by study id: it has no id column" in capsys.readouterr().err


def test_submit_reads_named_columns(renamed_csv, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("REXRANK_QUOTA", raising=False)
    store = str(tmp_path / "store")
    code = main(["submit", "--store", store, "--dataset", "example", "--predictions", str(renamed_csv), "--model-name", "m",
                 "--submitter", "alice", "--id-column", "dicom_id", "--prediction-column", "generated", "--json"])
    assert code == 0
    request_id = json.loads(capsys.readouterr().out)["id"]
    assert main(["backend", "--store", store, "--once", "--metrics", "bleu2", "--worker-id", "w"]) == 0
    capsys.readouterr()
    assert main(["status", "--store", store, request_id, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    expected = score_submission("example", "findings", EXAMPLE_PREDICTIONS, metrics="bleu2", progress=False)
    assert status["status"] == "FINISHED"
    assert status["results"]["bleu2"]["mean"] == expected.results["metrics"]["bleu2"]["scores"]["bleu2"]["mean"]


def test_bootstrap_interval_is_in_the_table(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["score", "--dataset", "example", "--predictions", str(EXAMPLE_PREDICTIONS), "--bootstrap", "200",
                 "--seed", "3", "--out", str(out), "--no-progress"]) == 0
    table = capsys.readouterr().out
    header = next(line for line in table.splitlines() if line.startswith("metric"))
    assert "bootstrap 95% CI" in header
    s = json.loads(out.read_text())["metrics"]["bleu2"]["scores"]["bleu2"]
    row = next(line for line in table.splitlines() if line.startswith("bleu2 "))
    assert f"[{s['bootstrap_low']:.4f}, {s['bootstrap_high']:.4f}]" in row
    # without --bootstrap there is no such column
    assert main(["score", "--dataset", "example", "--predictions", str(EXAMPLE_PREDICTIONS), "--no-progress"]) == 0
    assert "bootstrap" not in capsys.readouterr().out
