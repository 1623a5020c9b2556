"""Common file mistakes get their fix (issue 39.5), through the command line: a "CSV" separated
by tabs or semicolons is read with its delimiter, a JSON object {id: prediction} is accepted,
and every refusal of a file's shape names the shapes that work."""
from __future__ import annotations

import json

import pytest

from rexrank.cli.main import main
from support.commands import one_error_line
from support.requests import example_rows, write_jsonl

SHAPES = ("the accepted shapes: CSV, JSONL or a JSON list of records with id and prediction fields; a JSON object "
          "{id: prediction}; the ReXrank submission JSON (the test JSON with model_prediction added to each study); "
          "a parquet file; a datasets.save_to_disk folder")


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def score(capsys, path, tmp_path) -> tuple[int, dict | None, str]:
    """`rexrank score` with BLEU-2 on the example set: (exit code, results, stderr)."""
    out = tmp_path / f"{path.name}.results.json"
    code, _, err = run(capsys, "score", "--dataset", "example", "--predictions", str(path), "--metrics", "bleu2",
                       "--out", str(out), "--no-progress")
    return code, json.loads(out.read_text()) if code == 0 else None, err


def error_line(err: str, command: str) -> str:
    [line] = [x for x in err.splitlines() if x.startswith(f"rexrank {command}: error: ")]
    assert "Traceback" not in err
    return line


def bleu2(results: dict) -> float:
    return results["metrics"]["bleu2"]["scores"]["bleu2"]["mean"]


@pytest.mark.parametrize("delimiter", ["\t", ";"])
def test_a_csv_separated_by_tabs_or_semicolons_is_read_with_its_delimiter(tmp_path, capsys, delimiter):
    rows = example_rows()
    assert any("," in text for text in rows.values())  # (the old reader's "Expected 1 fields in line N, saw 2")
    path = tmp_path / "spreadsheet.csv"
    path.write_text(f"id{delimiter}prediction\n" + "".join(f"{sid}{delimiter}{text}\n" for sid, text in rows.items()),
                    encoding="utf-8")
    code, results, err = score(capsys, path, tmp_path)
    assert code == 0, err
    code, reference, err = score(capsys, write_jsonl(tmp_path / "same.jsonl", rows), tmp_path)
    assert code == 0, err
    assert bleu2(results) == bleu2(reference)


def test_an_unquoted_delimiter_in_a_prediction_names_the_delimiter_and_the_fix(tmp_path, capsys):
    path = tmp_path / "unquoted.csv"
    path.write_text("id,prediction\n" + "".join(f"{sid},{text}, more\n" for sid, text in example_rows().items()))
    code, _, err = score(capsys, path, tmp_path)
    line = error_line(err, "score")
    assert code == 1 and "not a readable CSV: Error tokenizing data" in line
    assert line.endswith("its header line is separated by commas: a line with more fields than the header holds "
                         "the delimiter in a prediction that is not quoted; write the file with a CSV writer "
                         "(csv.writer, pandas' to_csv), which quotes such fields")


def test_a_json_object_of_id_to_prediction_is_accepted(tmp_path, capsys):
    rows = example_rows()
    path = tmp_path / "predictions.json"
    path.write_text(json.dumps(rows))
    code, results, err = score(capsys, path, tmp_path)
    assert code == 0, err
    _, reference, _ = score(capsys, write_jsonl(tmp_path / "same.jsonl", rows), tmp_path)
    assert bleu2(results) == bleu2(reference)
    code, out, err = run(capsys, "submit", "--store", str(tmp_path / "store"), "--dataset", "example", "--predictions",
                         str(path), "--model-name", "Object model", "--submitter", "alice", "--json")
    assert code == 0, err
    assert json.loads(out)["status"] == "PENDING"
    code, _, err = run(capsys, "score", "--dataset", "example", "--predictions", str(path), "--id-column", "study",
                       "--no-progress")
    assert code == 1 and error_line(err, "score").endswith(
        "a JSON object {id: prediction} has no columns or fields to name: leave out --id-column and --prediction-column")


SHAPE_MISTAKES = {
    "predictions.txt": ("S1 a report\n", "unsupported file type .txt; "),
    "strings.json": ('["a report", "another"]', "expected objects with id and prediction fields, found str; "),
    "number.json": ("42", "expected a JSON object or list, got int; "),
    "mixed.json": ('{"S1": "a report", "S2": {"model_prediction": "x"}}',
                   "study 'S1' holds str 'a report', neither a prediction string nor an object with "
                   "'model_prediction': a JSON object is either {id: prediction} (every value a string) or the ReXrank "
                   "submission JSON (every value an object with 'model_prediction'); "),
    "nofield.json": ('{"S1": {"prediction": "x"}}', "study 'S1' has no 'model_prediction' field (ReXrank submission "
                                                    "JSON: the test JSON with 'model_prediction' added to every study); "),
    "empty.csv": ("", "empty CSV file: expected a header line (id,prediction) and one line per study; "),
    "renamed.csv": ("study,text\nS1,a\n", "no id column: expected one of id, study_id, found study, text; name yours "
                                          "with --id-column NAME (Python: id_column=NAME), or rename the column ("),
    "folder": (None, "not a folder saved with datasets.save_to_disk: it has no state.json nor dataset_dict.json; "),
}


@pytest.mark.parametrize("command", ["score", "submit"])
def test_every_refusal_of_a_files_shape_names_the_accepted_shapes(tmp_path, capsys, command):
    for name, (content, message) in SHAPE_MISTAKES.items():
        path = tmp_path / name
        if content is None:
            (path / "data").mkdir(parents=True)
            (path / "data" / "x.json").write_text("{}")
        else:
            path.write_text(content)
        line = one_error_line(capsys, command, path, tmp_path)
        assert f"{path}: {message}{SHAPES}" in line, (name, line)
