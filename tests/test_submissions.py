"""The one predictions validator, on every accepted format and every bad input."""
from __future__ import annotations

import json

import datasets
import pandas as pd
import pytest

from support.paths import shared_path
from rexrank.errors import SubmissionError
from rexrank.submissions import load_predictions

IDS = [f"S{i:02d}" for i in range(15)]
TEXTS = [f"Report {i}. No effusion." for i in range(15)]


def _frame(ids=IDS, texts=TEXTS, id_col="id", text_col="prediction"):
    return pd.DataFrame({id_col: ids, text_col: texts})


@pytest.mark.parametrize("id_col,text_col", [("id", "prediction"), ("study_id", "report")])
def test_csv_jsonl_parquet_json_list_and_datasets_folder(tmp_path, id_col, text_col):
    frame = _frame(id_col=id_col, text_col=text_col).iloc[::-1]  # order differs from the test set
    paths = [tmp_path / "p.csv", tmp_path / "p.jsonl", tmp_path / "p.parquet", tmp_path / "p.json", tmp_path / "ds"]
    frame.to_csv(paths[0], index=False)
    frame.to_json(paths[1], orient="records", lines=True)
    frame.to_parquet(paths[2], index=False)
    paths[3].write_text(json.dumps(frame.to_dict(orient="records")))
    datasets.Dataset.from_pandas(frame, preserve_index=False).save_to_disk(str(paths[4]))
    for path in paths:
        preds = load_predictions(path, IDS)
        assert preds.ids == IDS, path
        assert preds.texts == TEXTS, path
        assert preds.n_empty == 0


def test_rexrank_submission_json_of_a_real_model():
    path = shared_path("validation", "moerad_iu", "MoERad.json")
    raw = json.loads(path.read_text())
    preds = load_predictions(path, list(raw))
    assert len(preds) == 590
    first = next(iter(raw))
    assert preds.texts[0] == raw[first]["model_prediction"]


def test_numeric_ids_in_csv_match_string_test_ids(tmp_path):
    pd.DataFrame({"study_id": [50051329, 53492798], "report": ["A.", "B."]}).to_csv(tmp_path / "p.csv", index=False)
    assert load_predictions(tmp_path / "p.csv", ["53492798", "50051329"]).texts == ["B.", "A."]


def test_missing_ids_name_the_count_and_the_first_ten(tmp_path):
    _frame(IDS[:2], TEXTS[:2]).to_csv(tmp_path / "p.csv", index=False)
    with pytest.raises(SubmissionError) as err:
        load_predictions(tmp_path / "p.csv", IDS, test_set="IU-Xray")
    message = str(err.value)
    assert str(tmp_path / "p.csv") in message
    assert "13 of 15 studies of IU-Xray have no prediction" in message
    assert "'S02', 'S03'" in message and "'S11'" in message and "'S12'" not in message
    assert "3 more" in message
    assert err.value.details["missing"] == IDS[2:]


def test_unknown_and_duplicate_ids(tmp_path):
    _frame(IDS + ["X99"], TEXTS + ["extra"]).to_csv(tmp_path / "u.csv", index=False)
    with pytest.raises(SubmissionError, match=r"1 study ids are not in the test set: 'X99'"):
        load_predictions(tmp_path / "u.csv", IDS)
    _frame(IDS + ["S03"], TEXTS + ["again"]).to_csv(tmp_path / "d.csv", index=False)
    with pytest.raises(SubmissionError, match=r"appear more than once: 'S03' at line 5, line 17"):
        load_predictions(tmp_path / "d.csv", IDS)


def test_wrong_test_set_is_recognised(tmp_path):
    _frame([f"CXR{i}" for i in range(15)]).to_csv(tmp_path / "p.csv", index=False)
    with pytest.raises(SubmissionError, match="none of the 15 study ids belongs to MIMIC-CXR.*another test set"):
        load_predictions(tmp_path / "p.csv", IDS, test_set="MIMIC-CXR")


def test_non_string_predictions_are_errors_with_location(tmp_path):
    records = [{"id": i, "prediction": t} for i, t in zip(IDS, TEXTS)]
    records[4]["prediction"] = None
    records[7]["prediction"] = 3.5
    (tmp_path / "p.jsonl").write_text("\n".join(json.dumps(r) for r in records))
    with pytest.raises(SubmissionError, match=r"2 predictions are not strings: line 5 \(id 'S04'\): NoneType None; line 8"):
        load_predictions(tmp_path / "p.jsonl", IDS)
    doc = {sid: {"model_prediction": text} for sid, text in zip(IDS, TEXTS)}
    doc["S01"]["model_prediction"] = ["list", "of", "sentences"]
    (tmp_path / "sub.json").write_text(json.dumps(doc))
    with pytest.raises(SubmissionError, match=r"study 'S01' \(id 'S01'\): list"):
        load_predictions(tmp_path / "sub.json", IDS)


def test_empty_predictions_are_allowed_but_counted(tmp_path):
    texts = list(TEXTS)
    texts[3] = ""
    texts[9] = "   "
    _frame(texts=texts).to_csv(tmp_path / "p.csv", index=False)
    preds = load_predictions(tmp_path / "p.csv", IDS)
    assert preds.n_empty == 2 and preds.empty_ids == ["S03", "S09"]
    assert preds.texts[3] == ""  # an empty CSV cell is an empty string, not NaN


def test_predictions_outside_the_track_are_reported_not_errors(tmp_path):
    _frame().to_csv(tmp_path / "p.csv", index=False)
    preds = load_predictions(tmp_path / "p.csv", IDS[:10], outside_track_ids=IDS[10:])
    assert preds.ids == IDS[:10] and preds.not_in_track_ids == IDS[10:]


def test_malformed_files(tmp_path):
    with pytest.raises(SubmissionError, match="file not found"):
        load_predictions(tmp_path / "none.csv", IDS)
    (tmp_path / "p.txt").write_text("x")
    with pytest.raises(SubmissionError, match="unsupported file type .txt"):
        load_predictions(tmp_path / "p.txt", IDS)
    pd.DataFrame({"key": IDS, "prediction": TEXTS}).to_csv(tmp_path / "noid.csv", index=False)
    with pytest.raises(SubmissionError, match="no id column: expected one of id, study_id, found key, prediction"):
        load_predictions(tmp_path / "noid.csv", IDS)
    pd.DataFrame({"id": IDS, "text": TEXTS}).to_csv(tmp_path / "notext.csv", index=False)
    with pytest.raises(SubmissionError, match="no prediction text column"):
        load_predictions(tmp_path / "notext.csv", IDS)
    (tmp_path / "bad.json").write_text("{oops")
    with pytest.raises(SubmissionError, match="not valid JSON"):
        load_predictions(tmp_path / "bad.json", IDS)
    (tmp_path / "nofield.json").write_text(json.dumps({"S00": {"report": "x"}}))
    with pytest.raises(SubmissionError, match="study 'S00' has no 'model_prediction' field"):
        load_predictions(tmp_path / "nofield.json", IDS)
    (tmp_path / "bad.jsonl").write_text('{"id": "S00", "prediction": "a"}\n{broken\n')
    with pytest.raises(SubmissionError, match="line 2 is not valid JSON"):
        load_predictions(tmp_path / "bad.jsonl", IDS)
    pd.DataFrame({"id": ["", "S01"], "prediction": ["a", "b"]}).to_csv(tmp_path / "blankid.csv", index=False)
    with pytest.raises(SubmissionError, match="line 2: empty study id"):
        load_predictions(tmp_path / "blankid.csv", IDS)


def test_non_utf8_file_is_a_clear_error(tmp_path):
    (tmp_path / "p.csv").write_bytes("id,prediction\nS00,Effusion \xe9panchement\n".encode("latin-1"))
    with pytest.raises(SubmissionError, match="not UTF-8 text"):
        load_predictions(tmp_path / "p.csv", IDS)
