"""Inputs that used to merge silently or end in a traceback: each is one line and exit 1 (issue 13)."""
from __future__ import annotations

import json

import pytest

from rexrank.cli.main import main
from rexrank.errors import SubmissionError, TestSetError
from rexrank.submissions import load_predictions
from rexrank.testsets.reading import iter_raw_studies
from support.requests import EXAMPLE_PREDS, example_rows

IDS = ["S1", "S2", "S3"]


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_duplicate_study_ids_in_rexrank_json_are_an_error_naming_them(tmp_path):
    # json.loads keeps the last of two equal keys: S2 would have been scored on "second"
    path = tmp_path / "dup.json"
    path.write_text('{"S1": {"model_prediction": "a"}, "S2": {"model_prediction": "first"}, '
                    '"S3": {"model_prediction": "c"}, "S2": {"model_prediction": "second"}}')
    with pytest.raises(SubmissionError, match=r"study ids appear more than once: 'S2'"):
        load_predictions(path, IDS)


def test_repeated_field_inside_a_study_is_an_error(tmp_path):
    path = tmp_path / "dupfield.json"
    path.write_text('{"S1": {"model_prediction": "a", "model_prediction": "b"}, "S2": {"model_prediction": "x"}, '
                    '"S3": {"model_prediction": "y"}}')
    with pytest.raises(SubmissionError, match=r"keys repeated in \['S1'\]: 'model_prediction'"):
        load_predictions(path, IDS)


def test_duplicate_ids_in_a_test_set_json_are_an_error(tmp_path):
    path = tmp_path / "test.json"
    path.write_text('{"A1": {"report": "x"}, "A2": {"report": "y"}, "A1": {"report": "z"}}')
    with pytest.raises(TestSetError, match=r"study ids appear more than once: 'A1'"):
        list(iter_raw_studies(path))


def deep_json(depth: int = 100_000) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("empty.csv", b"", "empty CSV file"),
        ("garbage.parquet", b"PAR1 this is not a parquet file at all \x00\x01", "not a readable parquet file"),
        ("surrogate.json", None, "not valid Unicode text"),
        ("deep.json", deep_json().encode(), "nested too deeply"),
        ("deep.jsonl", (deep_json() + "\n").encode(), "line 1 is nested too deeply"),
    ],
)
@pytest.mark.parametrize("command", ["score", "submit"])
def test_bad_files_give_one_line_and_exit_1(tmp_path, capsys, name, content, message, command):
    path = tmp_path / name
    if content is None:  # a lone surrogate escape: valid JSON, not valid text (cannot be encoded)
        rows = {sid: f"{text}" for sid, text in example_rows().items()}
        doc = {sid: {"model_prediction": text} for sid, text in rows.items()}
        text = json.dumps(doc).replace('"model_prediction": "', '"model_prediction": "\\ud800', 1)
        path.write_text(text)
    else:
        path.write_bytes(content)
    if command == "score":
        args = ["score", "--dataset", "example", "--predictions", str(path), "--no-progress"]
    else:
        args = ["submit", "--store", str(tmp_path / "s"), "--dataset", "example", "--predictions", str(path),
                "--model-name", "m", "--submitter", "alice"]
    code, _, err = run(capsys, *args)
    assert code == 1
    assert "Traceback" not in err
    [line] = [line for line in err.splitlines() if line.startswith("rexrank ")]  # (progress bars aside)
    assert line.startswith(f"rexrank {command}: error: ") and message in line


def test_garbage_store_version_file_does_not_stop_the_store(tmp_path, capsys):
    store = str(tmp_path / "s")
    code, out, _ = run(capsys, "submit", "--store", store, "--dataset", "example", "--predictions", str(EXAMPLE_PREDS),
                       "--model-name", "m", "--submitter", "alice", "--json")
    assert code == 0
    rid = json.loads(out)["id"]
    (tmp_path / "s" / "requests" / ".rexrank-version").write_text("garbage\x00")
    code, out, err = run(capsys, "status", "--store", store)
    assert code == 0 and rid in out and "Traceback" not in err
    code, _, err = run(capsys, "backend", "--store", store, "--once", "--metrics", "bleu2")
    assert code == 0, err
    code, out, _ = run(capsys, "status", "--store", store, rid, "--json")
    assert json.loads(out)["status"] == "FINISHED"
