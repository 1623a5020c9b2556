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


# The reader's own functions, called in this process (read_rows_here: what the sandbox's child
# runs), and the validator on rows put together by hand: every message by the words a
# submitter reads, every location by the line, item, row or study it names.

from rexrank.submissions import RawPredictions, checked_rows, read_rows_here, validate_predictions  # noqa: E402


def _read(path, id_column=None, prediction_column=None):
    return read_rows_here(str(path), id_column, prediction_column)


def _refusal(path, id_column=None, prediction_column=None) -> str:
    with pytest.raises(SubmissionError) as err:
        _read(path, id_column, prediction_column)
    message = str(err.value)
    assert message.startswith(f"{path}: "), message  # each refusal names the file first
    return message[len(f"{path}: "):]


def test_csv_rows_are_located_by_line_counting_the_header_and_ids_are_text(tmp_path):
    (tmp_path / "p.csv").write_text("id,prediction\n007,a\n 8 ,\nS9,c\n")
    # line 1 is the header; an empty cell is an empty prediction; ids are stripped, never numbers
    assert _read(tmp_path / "p.csv") == [("007", "a", "line 2"), ("8", "", "line 3"), ("S9", "c", "line 4")]


@pytest.mark.parametrize("delimiter,named", [("\t", "tabs"), (";", "semicolons")])
def test_a_header_separated_by_tabs_or_semicolons_is_read_with_that_delimiter(tmp_path, delimiter, named):
    path = tmp_path / "p.csv"
    path.write_text(f"id{delimiter}prediction\nS1{delimiter}No effusion, no edema.\n")
    assert _read(path) == [("S1", "No effusion, no edema.", "line 2")]
    # a prediction holding the delimiter unquoted: three fields on a line of a two-field header
    path.write_text(f"id{delimiter}prediction\nS1{delimiter}a\nS2{delimiter}b{delimiter}c\n")
    message = _refusal(path)
    assert message.startswith("not a readable CSV: ") and f"its header line is separated by {named}" in message
    assert "write the file with a CSV writer (csv.writer, pandas' to_csv), which quotes such fields" in message


def test_a_csv_whose_every_line_is_wider_than_its_header_is_refused_not_read_shifted(tmp_path):
    # each prediction holds one unquoted comma: read as is, the ids would be "a" and "c" (pandas
    # takes a first column it has no header for as the index)
    path = tmp_path / "p.csv"
    path.write_text("id,prediction\nS1,a,b\nS2,c,d\n")
    assert _refusal(path) == (
        "not a readable CSV: every line after the header has more fields than the header; its header line is "
        "separated by commas: a line with more fields than the header holds the delimiter in a prediction that is "
        "not quoted; write the file with a CSV writer (csv.writer, pandas' to_csv), which quotes such fields")
    path.write_text('id,prediction\nS1,"a,b"\nS2,"c,d"\n')  # as a CSV writer writes them
    assert _read(path) == [("S1", "a,b", "line 2"), ("S2", "c,d", "line 3")]


def test_a_comma_header_is_read_with_commas_whatever_else_it_holds(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("id,prediction;x\nS1,a;b\n")  # a comma in the header: commas, the semicolon is text
    assert _read(path, prediction_column="prediction;x") == [("S1", "a;b", "line 2")]
    path.write_text("id,prediction\nS1,a\nS2,b,c\n")
    assert "its header line is separated by commas" in _refusal(path)


def test_an_empty_csv_says_what_a_csv_holds(tmp_path):
    (tmp_path / "p.csv").write_text("")
    message = _refusal(tmp_path / "p.csv")
    assert message.startswith("empty CSV file: expected a header line (id,prediction) and one line per study; "
                              "the accepted shapes: CSV")


def test_a_csv_header_of_1000_columns_is_read_and_one_more_is_refused(tmp_path):
    from rexrank import input_limits as L

    names = ["id", "prediction"] + [f"c{i}" for i in range(L.MAX_CSV_COLUMNS - 2)]
    (tmp_path / "ok.csv").write_text(",".join(names) + "\n" + ",".join(["S1", "a"] + ["x"] * (len(names) - 2)) + "\n")
    assert _read(tmp_path / "ok.csv") == [("S1", "a", "line 2")]
    (tmp_path / "wide.csv").write_text(",".join(names + ["one_more"]) + "\nS1,a\n")
    assert _refusal(tmp_path / "wide.csv") == "the header line has more than 1,000 columns"


def test_a_csv_one_row_past_the_limit_is_refused_and_one_of_the_limit_is_read(tmp_path):
    from rexrank import input_limits as L

    rows = "".join(f"S{i},a\n" for i in range(L.MAX_ROWS))
    (tmp_path / "full.csv").write_text("id,prediction\n" + rows)
    assert len(_read(tmp_path / "full.csv")) == L.MAX_ROWS
    (tmp_path / "over.csv").write_text("id,prediction\n" + rows + "S_last,a\n")
    assert _refusal(tmp_path / "over.csv").startswith("has more than 20,000 rows; ")


def test_a_csv_larger_than_the_table_cap_is_refused_and_a_json_of_that_size_is_read(tmp_path):
    from rexrank import input_limits as L

    big = "x" * (L.MAX_TABLE_BYTES + 1)  # one prediction too long, but first the file's size
    (tmp_path / "p.csv").write_text("id,prediction\nS1," + big + "\n")
    assert _refusal(tmp_path / "p.csv").startswith("file is 20.0 MiB")
    # a JSON file may be larger (MAX_FILE_BYTES): it is read, and refused for its prediction's length
    (tmp_path / "p.json").write_text(json.dumps({"S1": big}))
    assert "file is" not in _refusal(tmp_path / "p.json")


def test_file_types_by_their_suffix_in_any_case(tmp_path):
    (tmp_path / "P.CSV").write_text("id,prediction\nS1,a\n")
    assert _read(tmp_path / "P.CSV") == [("S1", "a", "line 2")]
    (tmp_path / "predictions").write_text("id,prediction\nS1,a\n")
    assert _refusal(tmp_path / "predictions").startswith("unsupported file type (none); the accepted shapes: CSV")
    (tmp_path / "p.tsv").write_text("id\tprediction\nS1\ta\n")
    assert _refusal(tmp_path / "p.tsv").startswith("unsupported file type .tsv; the accepted shapes:")


def test_a_json_object_of_strings_is_id_to_prediction_located_by_study(tmp_path):
    (tmp_path / "p.json").write_text(json.dumps({"S1": "a", "S2": ""}))
    assert _read(tmp_path / "p.json") == [("S1", "a", "study 'S1'"), ("S2", "", "study 'S2'")]
    for option in ({"id_column": "key"}, {"prediction_column": "text"}):
        message = _refusal(tmp_path / "p.json", **option)
        assert message == ("a JSON object {id: prediction} has no columns or fields to name: leave out --id-column "
                           "and --prediction-column")


def test_the_submission_json_reads_model_prediction_or_the_field_named(tmp_path):
    doc = {"S1": {"model_prediction": "a", "report": "r1", "findings": "x"}, "S2": {"model_prediction": "b", "report": "r2"}}
    (tmp_path / "s.json").write_text(json.dumps(doc))
    assert _read(tmp_path / "s.json") == [("S1", "a", "study 'S1'"), ("S2", "b", "study 'S2'")]
    assert _read(tmp_path / "s.json", prediction_column="report") == [("S1", "r1", "study 'S1'"), ("S2", "r2", "study 'S2'")]
    message = _refusal(tmp_path / "s.json", prediction_column="findings")
    assert message.startswith("study 'S2' has no 'findings' field (ReXrank submission JSON: the test JSON with "
                              "'findings' added to every study); the accepted shapes:")
    assert _refusal(tmp_path / "s.json", id_column="study") == \
        "a ReXrank submission JSON is keyed by study id: it has no id column to name"


def test_a_json_object_mixing_strings_and_other_values_names_the_study_and_both_shapes(tmp_path):
    (tmp_path / "m.json").write_text(json.dumps({"S1": {"model_prediction": "a"}, "S2": 7}))
    message = _refusal(tmp_path / "m.json")
    assert message.startswith("study 'S2' holds int 7, neither a prediction string nor an object with "
                              "'model_prediction': a JSON object is either {id: prediction} (every value a string) "
                              "or the ReXrank submission JSON (every value an object with 'model_prediction'); "
                              "the accepted shapes:")
    # objects throughout but one without the field: the submission JSON's message, not a type error
    (tmp_path / "o.json").write_text(json.dumps({"S1": {"model_prediction": "a"}, "S2": {"report": "b"}}))
    assert _refusal(tmp_path / "o.json").startswith("study 'S2' has no 'model_prediction' field")
    (tmp_path / "e.json").write_text("{}")
    assert _read(tmp_path / "e.json") == []


def test_a_json_list_of_records_is_located_by_item_and_its_columns_are_every_records(tmp_path):
    records = [{"id": "S1", "note": "x"}, {"study_id": "S2", "id": "S2", "report": "b", "prediction": "B"}]
    (tmp_path / "l.json").write_text(json.dumps(records))
    # `prediction` is a column because the second record has it; the first lacks it
    assert _refusal(tmp_path / "l.json") == "item 1 has no 'prediction' field"
    records[0]["prediction"] = "A"
    (tmp_path / "l.json").write_text(json.dumps(records))
    assert _read(tmp_path / "l.json") == [("S1", "A", "item 1"), ("S2", "B", "item 2")]
    assert _refusal(tmp_path / "l.json", id_column="study_id", prediction_column="report") == \
        "item 1 has no 'report' field"
    records[0].update(study_id="T1", report="R")
    (tmp_path / "l.json").write_text(json.dumps(records))
    assert _read(tmp_path / "l.json", id_column="study_id", prediction_column="report") == [("T1", "R", "item 1"),
                                                                                             ("S2", "b", "item 2")]


def test_a_record_without_an_id_is_a_missing_id_and_a_non_record_is_named(tmp_path):
    (tmp_path / "l.json").write_text(json.dumps([{"id": "S1", "prediction": "a"}, {"prediction": "b"}]))
    assert _refusal(tmp_path / "l.json") == "item 2: missing study id"
    (tmp_path / "n.json").write_text(json.dumps([{"id": "S1", "prediction": "a"}, 5]))
    assert _refusal(tmp_path / "n.json").startswith("expected objects with id and prediction fields, found int; "
                                                     "the accepted shapes:")
    (tmp_path / "s.json").write_text(json.dumps("S1,a"))
    assert _refusal(tmp_path / "s.json").startswith("expected a JSON object or list, got str; the accepted shapes:")


def test_jsonl_skips_blank_lines_and_names_a_broken_line_by_its_number(tmp_path):
    (tmp_path / "p.jsonl").write_text('{"id": "S1", "prediction": "a"}\n{"id": "S2", "prediction": "b"}\n')
    assert _read(tmp_path / "p.jsonl") == [("S1", "a", "line 1"), ("S2", "b", "line 2")]
    (tmp_path / "blank.jsonl").write_text('{"id": "S1", "prediction": "a"}\n\n  \n{"id": "S2", "prediction": "b"}\n')
    assert [row[:2] for row in _read(tmp_path / "blank.jsonl")] == [("S1", "a"), ("S2", "b")]
    (tmp_path / "bad.jsonl").write_text('{"id": "S1", "prediction": "a"}\n\n{"id": "S2"\n')
    assert _refusal(tmp_path / "bad.jsonl").startswith("line 3 is not valid JSON")


def test_repeated_keys_in_json_are_refused_by_where_they_repeat(tmp_path):
    (tmp_path / "o.json").write_text('{"S1": "a", "S2": "b", "S1": "c"}')
    with pytest.raises(SubmissionError) as err:
        _read(tmp_path / "o.json")
    assert str(err.value) == f"{tmp_path / 'o.json'}: study ids appear more than once: 'S1'"
    assert err.value.details == {"duplicates": ["S1"]}
    (tmp_path / "l.json").write_text('[{"id": "S1", "prediction": "a", "id": "S2"}]')
    with pytest.raises(SubmissionError) as err:
        _read(tmp_path / "l.json")
    assert str(err.value) == f"{tmp_path / 'l.json'}: keys repeated in [0]: 'id'"
    assert err.value.details == {"duplicates": []}  # no study id repeats at the top of a list
    (tmp_path / "p.jsonl").write_text('{"id": "S1", "prediction": "a"}\n{"id": "S2", "prediction": "b", "id": "S3"}\n')
    assert _refusal(tmp_path / "p.jsonl") == "line 2: keys appear more than once: 'id'"


def test_a_file_that_is_not_utf8_names_the_byte_and_its_position(tmp_path):
    (tmp_path / "p.json").write_bytes(b'{"S1": "caf\xe9"}')
    assert _refusal(tmp_path / "p.json") == "not UTF-8 text (byte 11: b'\\xe9'); save the file as UTF-8"


def test_parquet_rows_are_located_by_row_and_a_damaged_file_is_named(tmp_path):
    pd.DataFrame({"study_id": ["S1", "S2"], "report": ["a", "b"]}).to_parquet(tmp_path / "p.parquet", index=False)
    assert _read(tmp_path / "p.parquet") == [("S1", "a", "row 1"), ("S2", "b", "row 2")]


def test_a_parquet_file_that_breaks_while_read_is_named_with_the_first_line_of_why(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    pd.DataFrame({"id": ["S1"], "prediction": ["a"]}).to_parquet(tmp_path / "p.parquet", index=False)

    def broken(*args, **kwargs):
        raise OSError("page checksum mismatch\nat offset 4")

    monkeypatch.setattr(pq, "ParquetFile", broken)
    assert _refusal(tmp_path / "p.parquet") == "not a readable parquet file (OSError: page checksum mismatch)"


def _saved(folder, frame):
    datasets.Dataset.from_pandas(frame, preserve_index=False).save_to_disk(str(folder))
    return folder


def test_a_saved_dataset_dict_of_one_split_is_read_and_of_two_is_refused(tmp_path):
    frame = pd.DataFrame({"id": ["S1", "S2"], "prediction": ["a", "b"]})
    datasets.DatasetDict({"test": datasets.Dataset.from_pandas(frame, preserve_index=False)}).save_to_disk(
        str(tmp_path / "one"))
    assert _read(tmp_path / "one") == [("S1", "a", "row 1"), ("S2", "b", "row 2")]
    both = datasets.Dataset.from_pandas(frame, preserve_index=False)
    datasets.DatasetDict({"test": both, "val": both}).save_to_disk(str(tmp_path / "two"))
    assert _refusal(tmp_path / "two") == "saved DatasetDict has splits ['test', 'val']; save a single split"


NOT_SAVED = "not a folder saved with datasets.save_to_disk: "


@pytest.mark.parametrize("splits", [None, "test", ["../outside"], ["a/b"], [""], ["."], [".."], ["a\\b"],
                                    pytest.param(["a\0b"], id="nul"), [3]])
def test_a_dataset_dict_listing_no_plain_split_is_refused(tmp_path, splits):
    folder = _saved(tmp_path / "d" / "test", pd.DataFrame({"id": ["S1"], "prediction": ["a"]})).parent
    (folder / "dataset_dict.json").write_text(json.dumps({"splits": splits} if splits is not None else {}))
    assert _refusal(folder).startswith(NOT_SAVED + "its dataset_dict.json lists no splits; the accepted shapes:")


def test_a_folder_without_state_json_or_with_unreadable_json_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    assert _refusal(tmp_path / "empty").startswith(NOT_SAVED + "it has no state.json nor dataset_dict.json; ")
    folder = _saved(tmp_path / "d", pd.DataFrame({"id": ["S1"], "prediction": ["a"]}))
    (folder / "state.json").write_text("[1, 2]")
    assert _refusal(folder).startswith(NOT_SAVED + "its state.json is not a JSON object; ")
    (folder / "state.json").write_text("{oops")
    assert _refusal(folder).startswith(NOT_SAVED + "its state.json is not readable JSON (Expecting")
    (folder / "state.json").write_bytes(b'{"\xff": 1}')
    assert _refusal(folder).startswith(NOT_SAVED + "its state.json is not readable JSON (")
    (folder / "state.json").write_bytes(b"{" + b" " * (1024 * 1024) + b"}")  # over its 1 MiB cap
    assert _refusal(folder).startswith(NOT_SAVED + f"its state.json is not readable JSON ({folder / 'state.json'}: "
                                                   "file is 1.0 MiB")


@pytest.mark.parametrize("files", [None, [], "data.arrow", ["data.arrow"], [{"filename": "../x.arrow"}],
                                   [{"filename": "missing.arrow"}], [{"name": "data.arrow"}]])
def test_a_state_json_naming_no_data_file_of_the_folder_is_refused(tmp_path, files):
    folder = _saved(tmp_path / "d", pd.DataFrame({"id": ["S1"], "prediction": ["a"]}))
    (tmp_path / "x.arrow").write_bytes((next(folder.glob("*.arrow"))).read_bytes())
    (folder / "state.json").write_text(json.dumps({"_data_files": files} if files is not None else {}))
    assert _refusal(folder).startswith(NOT_SAVED + "its state.json names no data files of the folder; ")


def test_a_saved_folder_of_several_files_reads_each_and_refuses_other_columns(tmp_path):
    import pyarrow as pa

    folder = tmp_path / "d"
    folder.mkdir()

    def stream(name, table):
        with pa.ipc.new_stream(str(folder / name), table.schema) as writer:
            writer.write_table(table)

    stream("a.arrow", pa.table({"id": ["S1"], "prediction": ["a"]}))
    stream("b.arrow", pa.table({"id": ["S2", "S3"], "prediction": ["b", "c"]}))
    files = [{"filename": "a.arrow"}, {"filename": "b.arrow"}]
    (folder / "state.json").write_text(json.dumps({"_data_files": files}))
    assert _read(folder) == [("S1", "a", "row 1"), ("S2", "b", "row 2"), ("S3", "c", "row 3")]
    stream("b.arrow", pa.table({"id": ["S2"], "prediction": ["b"], "extra": ["x"]}))
    assert _refusal(folder).startswith(NOT_SAVED + "b.arrow has other columns than a.arrow; ")
    stream("a.arrow", pa.table({"key": ["S1"], "prediction": ["a"]}))
    assert _refusal(folder).startswith("no id column: expected one of id, study_id, found key, prediction")
    (folder / "a.arrow").write_bytes(b"\xff\xff\xff\xff\x05\x00\x00\x00abc")  # a damaged stream: pyarrow's reason
    assert _refusal(folder).startswith(NOT_SAVED + "Expected to read 5 metadata bytes, but only read 3; ")


def _raw(*rows, source="p.csv"):
    return RawPredictions([(sid, text, f"line {n}") for n, (sid, text) in enumerate(rows, 2)], source)


def test_ids_are_text_as_written_and_a_missing_or_blank_id_is_named_by_its_row():
    rows = checked_rows(_raw((12.0, "a"), (7, "b"), ("  S3\t", "c"), (2.5, "d")))
    assert rows == [("12", "a", "line 2"), ("7", "b", "line 3"), ("S3", "c", "line 4"), ("2.5", "d", "line 5")]
    for value, why in ((None, "missing"), (float("nan"), "missing"), (True, "missing"), (False, "missing"),
                       ("   ", "empty"), ("", "empty")):
        with pytest.raises(SubmissionError) as err:
            checked_rows(_raw(("S1", "a"), (value, "b")))
        assert str(err.value) == f"p.csv: line 3: {why} study id", value


def test_an_id_or_prediction_holding_a_lone_surrogate_is_refused_by_its_place():
    with pytest.raises(SubmissionError) as err:
        checked_rows(_raw(("S\ud800", "a")))
    assert str(err.value) == "p.csv: line 2: study id 'S\\ud800' holds a lone surrogate, not valid Unicode text"
    with pytest.raises(SubmissionError) as err:
        checked_rows(_raw(("S1", "ok"), ("S2", "ab\udc01c"), ("S3", "\ud83d")))
    assert str(err.value) == ("p.csv: 2 predictions are not valid Unicode text: line 3 (id 'S2'): lone surrogate "
                              "U+DC01 at character 3; line 4 (id 'S3'): lone surrogate U+D83D at character 1; write "
                              "real characters (UTF-8), not lone \\udXXX escapes")
    assert checked_rows(_raw(("S1", "\U0001F600 \ue000"))) == [("S1", "\U0001F600 \ue000", "line 2")]  # not surrogates


def test_json_values_are_counted_before_parsing_and_a_jsonl_line_is_a_value(tmp_path):
    """In this process (the sandbox's child runs the same reader): a JSON document of more than
    400,000 values is refused by its name before it is parsed, and in JSONL each line counts as a
    value even without a comma or a bracket (else 400,001 lines of numbers would be parsed)."""
    (tmp_path / "values.json").write_text("[" + ",".join(["1"] * 400_001) + "]")
    (tmp_path / "values.jsonl").write_text("1\n" * 400_001)
    for name in ("values.json", "values.jsonl"):
        assert _refusal(tmp_path / name) == ("holds more than 400,000 JSON values (objects, arrays, numbers, strings); "
                                             "the limit is 20,000 predictions of 20 values each")


def test_a_json_documents_newlines_are_layout_and_jsonl_reads_its_named_columns(tmp_path):
    """Newlines count as values in JSONL only: a JSON object spread over 400,001 lines is one
    prediction. JSONL rows are read by the columns named, as every other shape's."""
    (tmp_path / "spaced.json").write_text("{" + "\n" * 400_001 + '"S1": "a"}')
    assert [row[:2] for row in _read(tmp_path / "spaced.json")] == [("S1", "a")]
    (tmp_path / "named.jsonl").write_text('{"study": "S1", "report": "a"}\n{"study": "S2", "report": "b"}\n')
    assert [row[:2] for row in _read(tmp_path / "named.jsonl", "study", "report")] == [("S1", "a"), ("S2", "b")]


def test_a_jsonl_line_or_a_table_over_its_limit_is_refused_by_the_files_name(tmp_path):
    """In this process: the limits' refusals name the file first (`_refusal` checks it), and a
    prediction too long by its study id."""
    from rexrank.input_limits import MAX_LINE_BYTES, MAX_PREDICTION_CHARS, MAX_ROWS

    (tmp_path / "long.jsonl").write_text('{"id": "S1", "prediction": "' + "a" * MAX_LINE_BYTES + '"}\n')
    assert _refusal(tmp_path / "long.jsonl").startswith("line 1 is ")
    (tmp_path / "rows.csv").write_text("id,prediction\n" + "".join(f"S{i},a\n" for i in range(MAX_ROWS + 1)))
    assert _refusal(tmp_path / "rows.csv").startswith(f"has more than {MAX_ROWS:,} rows")
    (tmp_path / "long.json").write_text(json.dumps({"S1": "a", "S2": "b" * (MAX_PREDICTION_CHARS + 1)}))
    assert _refusal(tmp_path / "long.json") == (f"1 predictions are longer than {MAX_PREDICTION_CHARS} characters "
                                                f"(a report is ~1000): 'S2' ({MAX_PREDICTION_CHARS + 1} characters)")
    (tmp_path / "rows.json").write_text(json.dumps({f"S{i}": "a" for i in range(MAX_ROWS + 1)}))  # counted once read
    assert _refusal(tmp_path / "rows.json") == (f"has more than {MAX_ROWS:,} rows ({MAX_ROWS + 1:,}); the largest test "
                                                "set has 10,000 studies")


def test_non_string_and_non_unicode_predictions_list_ten_then_say_there_are_more():
    rows = [(f"S{i}", i) for i in range(11)]
    with pytest.raises(SubmissionError) as err:
        checked_rows(_raw(*rows))
    listed = "; ".join(f"line {i + 2} (id 'S{i}'): int {i}" for i in range(10))
    assert str(err.value) == f"p.csv: 11 predictions are not strings: {listed} …"
    assert err.value.details["non_string"] == [f"line {i + 2} (id 'S{i}'): int {i}" for i in range(11)]
    with pytest.raises(SubmissionError) as err:
        checked_rows(_raw(*rows[:10]))
    assert str(err.value) == f"p.csv: 10 predictions are not strings: {listed}"
    with pytest.raises(SubmissionError) as err:
        checked_rows(_raw(*[(f"S{i}", "\ud800") for i in range(11)]))
    assert str(err.value).endswith("line 11 (id 'S9'): lone surrogate U+D800 at character 1 …; write real characters "
                                   "(UTF-8), not lone \\udXXX escapes")
    with pytest.raises(SubmissionError) as err:  # a non-string is named before a lone surrogate
        checked_rows(_raw(("S1", "\ud800"), ("S2", None)))
    assert str(err.value) == "p.csv: 1 predictions are not strings: line 3 (id 'S2'): NoneType None"


def test_duplicates_name_each_id_at_three_places_and_ten_ids_at_most():
    with pytest.raises(SubmissionError) as err:
        validate_predictions(_raw(*[("S1", str(n)) for n in range(5)], ("S2", "x"), ("S2", "y")), ["S1", "S2"])
    assert str(err.value) == ("p.csv: 2 study ids appear more than once: 'S1' at line 2, line 3, line 4 and 2 more "
                              "places; 'S2' at line 7, line 8")
    assert err.value.details == {"duplicates": ["S1", "S2"]}
    ids = [f"S{i:02d}" for i in range(12)]
    with pytest.raises(SubmissionError) as err:
        validate_predictions(_raw(*[(sid, "a") for sid in ids * 2]), ids)
    message = str(err.value)
    assert message.startswith("p.csv: 12 study ids appear more than once: 'S00' at line 2, line 14; ")
    assert message.endswith("'S09' at line 11, line 23; … (2 more)") and "'S10'" not in message
    with pytest.raises(SubmissionError) as err:
        validate_predictions(_raw(*[(sid, "a") for sid in ids[:3] * 2]), ids)
    assert str(err.value) == ("p.csv: 3 study ids appear more than once: 'S00' at line 2, line 5; 'S01' at line 3, "
                              "line 6; 'S02' at line 4, line 7")


def test_missing_and_unknown_ids_are_one_message_listing_ten_of_each():
    expected = [f"S{i:02d}" for i in range(13)]
    unknown = [f"X{i:02d}" for i in range(11)]
    raw = _raw(*[(sid, "a") for sid in ["S00"] + unknown])
    with pytest.raises(SubmissionError) as err:
        validate_predictions(raw, expected, test_set="IU-Xray")
    missing_listed = ", ".join(f"'S{i:02d}'" for i in range(1, 11)) + ", … (2 more)"
    unknown_listed = ", ".join(f"'X{i:02d}'" for i in range(10)) + ", … (1 more)"
    assert str(err.value) == (f"p.csv: 12 of 13 studies of IU-Xray have no prediction: {missing_listed}; "
                              f"11 study ids are not in IU-Xray: {unknown_listed}")
    assert err.value.details == {"missing": expected[1:], "unknown": unknown, "n_expected": 13}


def test_predictions_for_another_test_set_are_recognised_by_every_id_being_unknown():
    with pytest.raises(SubmissionError) as err:
        validate_predictions(_raw(("X1", "a"), ("X2", "b"), ("X3", "c"), ("X4", "d")), ["S1", "S2"], test_set="ReXGradient")
    assert str(err.value) == ("p.csv: none of the 4 study ids belongs to ReXGradient (e.g. 'X1', 'X2', 'X3'); are these "
                              "predictions for another test set?")
    assert err.value.details == {"unknown": ["X1", "X2", "X3", "X4"], "n_expected": 2}
    # one known id among them: the usual message, naming the unknown ones and the missing one
    with pytest.raises(SubmissionError) as err:
        validate_predictions(_raw(("X1", "a"), ("S1", "b")), ["S1", "S2"], test_set="T")
    assert str(err.value) == "p.csv: 1 of 2 studies of T have no prediction: 'S2'; 1 study ids are not in T: 'X1'"
    # ids outside the track are not unknown, so predictions for those alone are not "another test set"
    with pytest.raises(SubmissionError) as err:
        validate_predictions(_raw(("S9", "a")), ["S1"], test_set="T", outside_track_ids=["S9"])
    assert str(err.value) == "p.csv: 1 of 1 studies of T have no prediction: 'S1'"
    # a track of no study, none outside it: every id is unknown, said as such
    with pytest.raises(SubmissionError) as err:
        validate_predictions(_raw(("S1", "a")), [], test_set="T")
    assert str(err.value) == "p.csv: 1 study ids are not in T: 'S1'"
    with pytest.raises(SubmissionError) as err:
        validate_predictions(_raw(("S1", "a")), [], test_set="T", outside_track_ids=["S2"])
    assert "none of the 1 study ids belongs to T" in str(err.value)


def test_valid_predictions_come_in_test_set_order_with_empty_and_outside_ones_reported():
    raw = _raw(("S3", " \n"), ("S9", "outside"), ("S1", "one"), ("S2", ""), source="mine.csv")
    predictions = validate_predictions(raw, ["S1", "S2", "S3"], outside_track_ids=["S9", "S8"])
    assert predictions.ids == ["S1", "S2", "S3"] and predictions.texts == ["one", "", " \n"]
    assert predictions.source == "mine.csv" and len(predictions) == 3
    assert predictions.n_empty == 2 and predictions.empty_ids == ["S2", "S3"]
    assert predictions.not_in_track_ids == ["S9"]
    # an id both in the track and listed outside it is the track's
    assert validate_predictions(_raw(("S1", "a")), ["S1"], outside_track_ids=["S1"]).not_in_track_ids == []
    assert validate_predictions(_raw(), []).ids == []


def test_the_warm_up_reads_a_file_of_each_format_without_a_refusal(monkeypatch):
    import rexrank.submissions as submissions

    read, folders = [], set()
    real = submissions.read_rows_here

    def counted(path, id_column, prediction_column):
        rows = real(path, id_column, prediction_column)
        read.append((path.rsplit("/", 1)[-1], rows))
        folders.add(path.rsplit("/", 2)[-2])
        return rows

    monkeypatch.setattr(submissions, "read_rows_here", counted)
    submissions.warm_up()
    rows = {name: [row[:2] for row in got] for name, got in read}
    assert list(rows) == ["p.csv", "p.jsonl", "p.json", "p.parquet", "saved"]
    assert all(got == [("S1", "a"), ("S2", "b")] for got in rows.values()), rows
    # one temporary folder, named for what made it (should one be left behind)
    assert len(folders) == 1 and folders.pop().startswith("rexrank-warm-up-")


def test_rows_put_together_elsewhere_are_held_to_the_readers_limits_and_named_by_their_source():
    from rexrank import input_limits as L

    rows = [(f"S{i}", "a") for i in range(L.MAX_ROWS + 1)]
    with pytest.raises(SubmissionError) as err:
        validate_predictions(_raw(*rows, source="hf://shards"), [sid for sid, _ in rows])
    assert str(err.value).startswith("hf://shards: has more than 20,000 rows (20,001); ")
    with pytest.raises(SubmissionError) as err:
        validate_predictions(_raw(("S1", "a"), ("S2", "x" * (L.MAX_PREDICTION_CHARS + 1)), source="hf://shards"),
                             ["S1", "S2"])
    assert str(err.value) == ("hf://shards: 1 predictions are longer than 20000 characters (a report is ~1000): "
                              "'S2' (20001 characters)")


def test_the_test_set_is_called_the_test_set_unless_named():
    with pytest.raises(SubmissionError) as err:
        validate_predictions(_raw(("S1", "a"), ("X", "b")), ["S1", "S2"])
    assert str(err.value) == ("p.csv: 1 of 2 studies of the test set have no prediction: 'S2'; 1 study ids are not in "
                              "the test set: 'X'")


def test_a_jsonl_file_is_refused_at_the_first_record_past_the_row_limit(tmp_path):
    from rexrank import input_limits as L

    lines = "".join(f'{{"id": "S{i}", "prediction": "a"}}\n' for i in range(L.MAX_ROWS + 1))
    (tmp_path / "over.jsonl").write_text(lines)
    # reading stops there, so the message gives no count of the rows
    assert _refusal(tmp_path / "over.jsonl").startswith("has more than 20,000 rows; the largest test set")


def test_ten_ids_and_three_places_are_listed_whole():
    expected = [f"S{i}" for i in range(11)]
    with pytest.raises(SubmissionError) as err:
        validate_predictions(_raw(("S0", "a")), expected)
    listed = ", ".join(f"'S{i}'" for i in range(1, 11))
    assert str(err.value) == f"p.csv: 10 of 11 studies of the test set have no prediction: {listed}"
    with pytest.raises(SubmissionError) as err:
        validate_predictions(_raw(("S0", "a"), ("S0", "b"), ("S0", "c")), ["S0"])
    assert str(err.value) == "p.csv: 1 study ids appear more than once: 'S0' at line 2, line 3, line 4"


def test_ten_duplicated_ids_are_listed_whole_and_columns_named_reach_the_reader(tmp_path):
    ids = [f"S{i}" for i in range(10)]
    with pytest.raises(SubmissionError) as err:
        validate_predictions(_raw(*[(sid, "a") for sid in ids * 2]), ids)
    assert str(err.value).endswith("'S9' at line 11, line 21")
    (tmp_path / "p.csv").write_text("key,text\nS0,a\n")
    assert load_predictions(tmp_path / "p.csv", ["S0"], id_column="key", prediction_column="text").texts == ["a"]


def test_ten_predictions_that_are_not_unicode_text_are_listed_whole():
    with pytest.raises(SubmissionError) as err:
        checked_rows(_raw(*[(f"S{i}", "\ud800") for i in range(10)]))
    listed = "; ".join(f"line {i + 2} (id 'S{i}'): lone surrogate U+D800 at character 1" for i in range(10))
    assert str(err.value) == (f"p.csv: 10 predictions are not valid Unicode text: {listed}; write real characters "
                              "(UTF-8), not lone \\udXXX escapes")


def test_a_refusal_by_the_reader_itself_names_the_file_as_given(tmp_path, monkeypatch):
    """A limit of the sandbox (here its answer limit, made tiny) is the reader's refusal, not the
    file's: it still names the file the submitter gave."""
    from rexrank import sandbox
    from rexrank.submissions import read_raw_predictions

    monkeypatch.setattr(sandbox, "LIMITS", sandbox.Limits(answer_bytes=16))
    (tmp_path / "p.csv").write_text("id,prediction\nS1,a prediction longer than sixteen bytes\n")
    with pytest.raises(SubmissionError) as err:
        read_raw_predictions(tmp_path / "p.csv")
    assert err.value.source == str(tmp_path / "p.csv")
    assert str(err.value).startswith(f"{tmp_path / 'p.csv'}: the reader's answer is over 16 bytes, the answer limit")


def test_a_json_files_rows_are_refused_naming_the_file(tmp_path):
    (tmp_path / "o.json").write_text(json.dumps({"S1": "a", " ": "b"}))
    assert _refusal(tmp_path / "o.json") == "study ' ': empty study id"
    (tmp_path / "s.json").write_text(json.dumps({"S1": {"model_prediction": 5}}))
    assert _refusal(tmp_path / "s.json") == "1 predictions are not strings: study 'S1' (id 'S1'): int 5"


def test_json_records_without_an_id_or_a_text_field_name_the_fields_found_and_the_option(tmp_path):
    (tmp_path / "k.json").write_text(json.dumps([{"key": "S1", "prediction": "a"}]))
    assert _refusal(tmp_path / "k.json").startswith("no id column: expected one of id, study_id, found key, "
                                                    "prediction; name yours with --id-column NAME (Python: id_column")
    (tmp_path / "t.jsonl").write_text(json.dumps({"id": "S1", "text": "a"}) + "\n")
    assert _refusal(tmp_path / "t.jsonl").startswith(
        "no prediction text column: expected one of prediction, report, found id, text; name yours with "
        "--prediction-column NAME (Python: prediction_column")


def test_parquet_rows_are_refused_naming_the_file(tmp_path):
    from rexrank import input_limits as L

    pd.DataFrame({"id": ["S1", " "], "prediction": ["a", "b"]}).to_parquet(tmp_path / "p.parquet", index=False)
    assert _refusal(tmp_path / "p.parquet") == "row 2: empty study id"
    # one prediction of 4 bytes a character and one byte more: past what any report of the limit's length takes
    long = "x" * (4 * L.MAX_PREDICTION_CHARS + 1)
    pd.DataFrame({"id": ["S1"], "prediction": [long]}).to_parquet(tmp_path / "long.parquet", index=False)
    assert _refusal(tmp_path / "long.parquet") == "column 'prediction' holds a value of 80,001 bytes; the limit is " \
                                                  "20,000 characters"


def test_parquet_is_read_two_columns_at_a_time_in_small_batches_on_one_thread_and_a_break_is_named(tmp_path,
                                                                                                  monkeypatch):
    """Only the id and text columns are decoded, BATCH_ROWS rows at a time and on this thread, so that
    the limits count each batch as it arrives; a file that breaks while read is named with why."""
    import pyarrow.parquet as pq

    from rexrank import input_limits as L

    asked = []

    class Recorded(pq.ParquetFile):
        def iter_batches(self, **kwargs):
            asked.append(kwargs)
            return super().iter_batches(**kwargs)

    pd.DataFrame({"study_id": ["S1"], "note": ["n"], "report": ["a"]}).to_parquet(tmp_path / "p.parquet", index=False)
    monkeypatch.setattr(pq, "ParquetFile", Recorded)
    assert _read(tmp_path / "p.parquet") == [("S1", "a", "row 1")]
    assert asked == [{"batch_size": L.BATCH_ROWS, "columns": ["study_id", "report"], "use_threads": False}]

    class Breaking(pq.ParquetFile):  # the metadata reads, a page does not
        def iter_batches(self, **kwargs):
            raise OSError("page checksum mismatch\nat offset 4")

    monkeypatch.setattr(pq, "ParquetFile", Breaking)
    assert _refusal(tmp_path / "p.parquet") == "not a readable parquet file (OSError: page checksum mismatch)"


def test_a_saved_folders_refusals_name_the_folder(tmp_path):
    folder = _saved(tmp_path / "t", pd.DataFrame({"id": ["S1"], "text": ["a"]}))
    assert _refusal(folder).startswith("no prediction text column: expected one of prediction, report, found id, "
                                       "text; name yours with --prediction-column NAME")
    folder = _saved(tmp_path / "n", pd.DataFrame({"id": [1], "prediction": ["a"]}))
    assert _refusal(folder) == ("column 'id' holds int64, not strings: write the study ids and the predictions as "
                                "text (a string column each)")
    folder = _saved(tmp_path / "d" / "test", pd.DataFrame({"id": ["S1"], "prediction": ["a"]})).parent
    (folder / "dataset_dict.json").write_text("{oops")
    assert _refusal(folder).startswith(NOT_SAVED + "its dataset_dict.json is not readable JSON (Expecting")
    crowded = tmp_path / "crowded"
    crowded.mkdir()
    for i in range(1001):
        (crowded / f"f{i}").touch()
    assert _refusal(crowded) == "holds more than 1,000 files: not a datasets folder"
    from rexrank import input_limits as L

    folder = _saved(tmp_path / "blank", pd.DataFrame({"id": ["S1", " "], "prediction": ["a", "b"]}))
    assert _refusal(folder) == "row 2: empty study id"
    folder = _saved(tmp_path / "long", pd.DataFrame({"id": ["S1"], "prediction": ["x" * (4 * L.MAX_PREDICTION_CHARS + 1)]}))
    assert _refusal(folder) == "column 'prediction' holds a value of 80,001 bytes; the limit is 20,000 characters"


def test_a_csv_without_an_id_column_names_the_columns_found_and_the_option(tmp_path):
    (tmp_path / "p.csv").write_text("key,prediction\nS1,a\n")
    assert _refusal(tmp_path / "p.csv").startswith("no id column: expected one of id, study_id, found key, prediction; "
                                                   "name yours with --id-column NAME (Python: id_column")
    assert _read(tmp_path / "p.csv", id_column="key") == [("S1", "a", "line 2")]  # named, it is read


def test_a_csvs_refusals_of_its_text_column_and_its_rows_name_the_file(tmp_path):
    (tmp_path / "t.csv").write_text("id,text\nS1,a\n")
    assert _refusal(tmp_path / "t.csv").startswith("no prediction text column: expected one of prediction, report, "
                                                   "found id, text; name yours with --prediction-column NAME")
    (tmp_path / "b.csv").write_text("id,prediction\nS1,a\n ,b\n")
    assert _refusal(tmp_path / "b.csv") == "line 3: empty study id"


def test_a_csvs_cells_stay_text_and_its_parser_stops_one_row_past_the_limit(tmp_path, monkeypatch):
    import pandas

    from rexrank import input_limits as L

    (tmp_path / "p.csv").write_text("id,prediction\n007,1.50\n010,2\n")
    # numbers as written: ids with their zeros, predictions as text (pandas would read both as numbers)
    assert _read(tmp_path / "p.csv") == [("007", "1.50", "line 2"), ("010", "2", "line 3")]
    asked = []
    real = pandas.read_csv
    monkeypatch.setattr(pandas, "read_csv", lambda *args, **kwargs: asked.append(kwargs["nrows"]) or real(*args, **kwargs))
    _read(tmp_path / "p.csv")
    assert asked == [L.MAX_ROWS + 1]


def test_a_csv_refused_for_its_wide_lines_says_why_and_by_which_delimiter(tmp_path):
    (tmp_path / "p.csv").write_text("id\tprediction\nS1\ta\nS2\tb\tc\n")
    assert _refusal(tmp_path / "p.csv").startswith("not a readable CSV: Error tokenizing data. C error: Expected 2 "
                                                   "fields in line 3, saw 3; its header line is separated by tabs")
    (tmp_path / "w.csv").write_text("id\tprediction\nS1\ta\tb\nS2\tc\td\n")
    assert _refusal(tmp_path / "w.csv").startswith("not a readable CSV: every line after the header has more fields "
                                                   "than the header; its header line is separated by tabs")


def test_a_json_file_that_is_not_json_says_so_with_where(tmp_path):
    (tmp_path / "b.json").write_text("{oops")
    assert _refusal(tmp_path / "b.json") == ("not valid JSON (line 1, column 2): Expecting property name enclosed "
                                             "in double quotes")
