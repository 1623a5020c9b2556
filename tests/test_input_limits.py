"""Bounded work for any input (issue 20.1): limits checked before a file is loaded, only
regular files read, and short messages however many problems a file has."""
from __future__ import annotations

import json
import os
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rexrank import input_limits as L
from rexrank.cli.main import main
from rexrank.errors import SubmissionError, TestSetError
from rexrank.submissions import (RawPredictions, load_predictions, read_raw_predictions, read_rows_here,
                                 validate_predictions)
from support.requests import example_rows
from support.commands import one_error_line

IDS = list(example_rows())


def unblock_fifo_later(path, seconds=3.0):
    """Old code opened a FIFO and waited for a writer forever: this writer lets such a test
    end (and fail on its message) instead of hanging."""
    def write():
        try:
            fd = os.open(path, os.O_WRONLY)
            os.write(fd, b'{"id": "EX001", "prediction": "x"}\n')
            os.close(fd)
        except OSError:
            pass

    timer = threading.Timer(seconds, write)
    timer.daemon = True
    timer.start()
    return timer


@pytest.mark.parametrize("command", ["score", "submit"])
def test_a_fifo_is_refused_at_once(tmp_path, capsys, command):
    fifo = tmp_path / "preds.jsonl"
    os.mkfifo(fifo)
    link = tmp_path / "link.jsonl"
    link.symlink_to(fifo)
    for path in (fifo, link):
        timer = unblock_fifo_later(path)
        try:
            line = one_error_line(capsys, command, path, tmp_path)
        finally:
            timer.cancel()
        assert "is a FIFO (named pipe)" in line and line.endswith("not a regular file")
    assert f"a symlink to {fifo}" in line


@pytest.mark.parametrize("command", ["score", "submit"])
def test_dev_zero_and_folders_are_one_line_errors(tmp_path, capsys, command):
    # (today's code read /dev/zero through a .json symlink until MemoryError: not run here unbounded)
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")
    line = one_error_line(capsys, command, zero, tmp_path)
    assert "is a character device (a symlink to /dev/zero), not a regular file" in line
    folder = tmp_path / "not-a-dataset"
    (folder / "sub").mkdir(parents=True)
    (folder / "x.json").write_text("{}")
    line = one_error_line(capsys, command, folder, tmp_path)
    assert "not a folder saved with datasets.save_to_disk" in line
    (folder / "data.arrow").symlink_to("/dev/zero")  # inside a folder too
    line = one_error_line(capsys, command, folder, tmp_path)
    assert "data.arrow: is a character device" in line
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    assert "cannot read it: Too many levels of symbolic links" in one_error_line(capsys, command, loop, tmp_path)
    assert "holds more than 1,000 files" in one_error_line(capsys, command, "/usr", tmp_path)


def test_a_test_set_file_that_is_a_fifo_or_device_is_one_line(tmp_path):
    from rexrank.testsets.download import sha256_of
    from rexrank.testsets.reading import iter_raw_studies

    fifo = tmp_path / "test.json"
    os.mkfifo(fifo)
    timer = unblock_fifo_later(fifo)
    try:
        with pytest.raises(TestSetError, match="is a FIFO"):
            list(iter_raw_studies(fifo))
        with pytest.raises(TestSetError, match="is a character device"):
            sha256_of("/dev/zero")
    finally:
        timer.cancel()


def bomb(path, n_rows: int, *, text: str = "") -> None:
    """A parquet file of `n_rows` identical rows: dictionary + RLE encoding make it a few
    hundred kB, pandas makes it gigabytes."""
    import numpy as np

    chunk = min(n_rows, 1_000_000)
    zeros = pa.array(np.zeros(chunk, dtype=np.int32))  # built as dictionaries: never expanded here either
    table = pa.table({"id": pa.DictionaryArray.from_arrays(zeros, ["EX001"]),
                      "prediction": pa.DictionaryArray.from_arrays(zeros, [text])})
    with pq.ParquetWriter(path, table.schema, compression="zstd") as writer:
        for start in range(0, n_rows, chunk):
            writer.write_table(table.slice(0, min(chunk, n_rows - start)))


def test_a_parquet_bomb_is_refused_from_its_metadata(tmp_path, monkeypatch):
    path = tmp_path / "bomb.parquet"
    bomb(path, 3_000_000)
    assert path.stat().st_size < 1_000_000

    def no_reading(*a, **k):
        raise AssertionError("the rows were read")

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", no_reading)
    # the reader's own function, in this process (where the patch holds), refuses it from the metadata
    with pytest.raises(SubmissionError, match=r"has more than 20,000 rows \(3,000,000\)"):
        read_rows_here(str(path), None, None)
    with pytest.raises(SubmissionError, match=r"has more than 20,000 rows \(3,000,000\)"):
        read_raw_predictions(path)  # and so does the child process
    wide = tmp_path / "wide.parquet"  # few rows, each a long string: refused by its decompressed size
    pq.write_table(pa.table({"id": ["EX001", "EX002", "EX003"], "prediction": [c * 15_000_000 for c in "abc"]}), wide,
                   compression="zstd")
    assert wide.stat().st_size < 100_000
    with pytest.raises(SubmissionError, match=r"columns decompress to 42\.\d MiB; the limit is 20\.0 MiB"):
        read_raw_predictions(wide)


def test_parquet_metadata_is_limited_before_it_is_parsed(tmp_path):
    # 5,000 empty row groups: no rows, and (at 50,000) a gigabyte to read them
    groups = tmp_path / "groups.parquet"
    table = pa.table({"id": ["EX001"], "prediction": ["x"]})
    with pq.ParquetWriter(groups, table.schema) as writer:
        for _ in range(5_000):
            writer.write_table(table.slice(0, 0))
    with pytest.raises(SubmissionError, match="has 5,000 row groups; the limit is 1,000"):
        read_raw_predictions(groups)
    footer = tmp_path / "footer.parquet"  # a file whose declared metadata is 20 MB
    footer.write_bytes(b"PAR1" + b"\0" * 100 + (20_000_000).to_bytes(4, "little") + b"PAR1")
    with pytest.raises(SubmissionError, match=r"its metadata is 19\.1 MiB; the limit is 1\.0 MiB"):
        read_raw_predictions(footer)


def test_a_dictionary_bomb_is_refused_before_it_expands(tmp_path):
    # one 1 MB value on 20,000 rows: a dictionary page of 1 MB on disk, 20 GB once expanded
    path = tmp_path / "dict.parquet"
    bomb(path, 20_000, text="x" * 1_000_000)
    assert path.stat().st_size < 200_000
    with pytest.raises(SubmissionError, match="column 'prediction' holds a value of 1,000,000 bytes"):
        read_raw_predictions(path)
    ids = tmp_path / "ids.parquet"
    zeros = pa.array([0] * 19_999, type=pa.int32())
    pq.write_table(pa.table({"id": pa.DictionaryArray.from_arrays(zeros, ["I" * 20_000]),
                             "prediction": pa.DictionaryArray.from_arrays(zeros, ["x"])}), ids)
    # 381.5 MiB once expanded: counted as the rows are decoded, it stops past 20 MiB
    with pytest.raises(SubmissionError, match=r"its 'id' and 'prediction' columns hold more than 20\.0 MiB once "
                                              r"decompressed \(counted as they are read, after 1,088 rows\); the "
                                              r"limit is 20\.0 MiB \(MAX_TABLE_BYTES\)"):
        read_raw_predictions(ids)


NOT_STRINGS = {
    "struct": ("prediction", pa.array([{"t": "x"}] * 3)),
    "list": ("prediction", pa.array([["x"]] * 3)),
    "map": ("prediction", pa.array([[("k", "x")]] * 3, type=pa.map_(pa.string(), pa.string()))),
    "binary": ("prediction", pa.array([b"x"] * 3)),
    "integer ids": ("id", pa.array([1, 2, 3])),
    "nested ids": ("id", pa.array([{"a": [{"b": "EX001"}]}] * 3)),
}


def test_only_string_id_and_prediction_columns_pass_the_schema_check(tmp_path, monkeypatch):
    """A struct column's values are in leaves (`prediction.t`) that no size check of a
    `prediction` column sees: a 48 kB file grew the Space's Submit handler by ~1 GB."""
    def no_reading(*a, **k):
        raise AssertionError("the data was read")

    with monkeypatch.context() as m:
        m.setattr(pq.ParquetFile, "iter_batches", no_reading)
        for kind, (column, values) in NOT_STRINGS.items():
            path = tmp_path / f"{kind}.parquet"
            pq.write_table(pa.table({"id": ["EX001", "EX002", "EX003"], "prediction": ["a", "b", "c"], column: values}),
                           path)
            with pytest.raises(SubmissionError, match=rf"column '{column}' holds .+, not strings: write the study ids"):
                read_rows_here(str(path), None, None)  # in this process, where the patch holds
            with pytest.raises(SubmissionError, match=rf"column '{column}' holds .+, not strings: write the study ids"):
                read_raw_predictions(path)
    import datasets

    folder = tmp_path / "saved"  # a datasets.save_to_disk folder: its schema, before any row is converted
    datasets.Dataset.from_dict({"id": IDS[:3], "prediction": [{"t": "x"}] * 3}).save_to_disk(str(folder))
    with pytest.raises(SubmissionError, match=r"column 'prediction' holds struct<t: string>, not strings"):
        read_raw_predictions(folder)
    path = tmp_path / "strings.parquet"  # large and dictionary-encoded strings are strings
    pq.write_table(pa.table({"id": pa.array(IDS, type=pa.large_string()),
                             "prediction": pa.array(["x"] * len(IDS)).dictionary_encode()}), path)
    assert len(load_predictions(path, IDS)) == len(IDS)


@pytest.mark.parametrize("command", ["score", "submit"])
def test_the_command_line_refuses_a_nested_column_bomb_in_one_line(tmp_path, capsys, command):
    import numpy as np

    zeros = pa.array(np.zeros(20_000, dtype=np.int32))
    leaf = pa.DictionaryArray.from_arrays(zeros, ["x" * 50_000])  # 1 GB once expanded
    path = tmp_path / "nested.parquet"
    pq.write_table(pa.table({"id": pa.DictionaryArray.from_arrays(zeros, ["EX001"]),
                             "prediction": pa.StructArray.from_arrays([leaf], names=["t"])}), path, compression="zstd")
    assert path.stat().st_size < 2_000
    assert "column 'prediction' holds struct<t: dictionary<values=string" in one_error_line(capsys, command, path, tmp_path)


def test_text_files_are_read_with_a_byte_cap(tmp_path, monkeypatch):
    big = tmp_path / "big.jsonl"
    with big.open("wb") as fh:  # sparse: nothing is written to disk
        fh.truncate(L.MAX_TABLE_BYTES + 1)
    calls = []
    real = os.open
    monkeypatch.setattr(os, "open", lambda p, *a, **k: calls.append(p) or real(p, *a, **k))
    with pytest.raises(SubmissionError, match=r"file is 20\.0 MiB \(20,971,521 bytes\); the limit is 20\.0 MiB"):
        read_rows_here(str(big), None, None)  # the reader's own function, in this process (where the patch holds)
    assert str(big) not in map(str, calls)  # refused from its size, never opened


@pytest.mark.parametrize("name, content, message", [
    # 3 bytes of file per Python object
    ("values.json", "[" + ",".join(["{}"] * 500_000) + "]", "holds more than 400,000 JSON values"),
    ("rows.jsonl", "".join(json.dumps({"id": f"S{i}", "prediction": ""}) + "\n" for i in range(20_001)),
     "has more than 20,000 rows"),
    ("line.jsonl", json.dumps({"id": "S1", "prediction": "x"}) + "\n" + json.dumps({"id": "S2", "prediction": "y" * 300_000}),
     "line 2 is 300,030 bytes, more than a line may hold"),
    ("rows.csv", "id,prediction\n" + "".join(f"S{i},\n" for i in range(25_000)), "has more than 20,000 rows"),
    ("header.csv", ",".join(f"c{i}" for i in range(5_000)) + "\n", "header line has more than 1,000 columns"),
    ("total.jsonl", "".join(json.dumps({"id": f"S{i}", "prediction": "x" * 19_000}) + "\n" for i in range(1_000)),
     "the predictions hold 19,000,000 characters together; the limit is 16,000,000"),
])
def test_rows_values_and_characters_are_limited(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(SubmissionError, match=message) as caught:
        read_raw_predictions(path)
    assert len(str(caught.value)) < 500


def test_a_datasets_folder_is_limited_before_it_is_loaded(tmp_path):
    import datasets

    folder = tmp_path / "ds"
    datasets.Dataset.from_dict({"id": [f"S{i}" for i in range(20_001)], "prediction": [""] * 20_001}).save_to_disk(folder)
    with pytest.raises(SubmissionError, match="has more than 20,000 rows"):
        read_raw_predictions(folder)


def test_a_million_duplicates_give_a_short_message():
    rows = [("EX001", "x", f"line {i + 1}") for i in range(1_000_000)]
    with pytest.raises(SubmissionError) as caught:  # (today's code: a 12.9 MB message listing every line)
        validate_predictions(RawPredictions(rows, "p.jsonl"), IDS)
    assert str(caught.value) == "p.jsonl: has more than 20,000 rows (1,000,000); the largest test set has 10,000 studies"
    # within the row limit: one id on 19,940 rows and 30 ids of 5,000+ characters twice each
    rows = rows[:19_940] + [(f"X{i}" * 5000, "x", f"line {i}") for i in range(30)] * 2
    with pytest.raises(SubmissionError) as caught:
        validate_predictions(RawPredictions(rows, "p.jsonl"), IDS)
    message = str(caught.value)
    assert len(message) < 2000, len(message)
    assert message.startswith("p.jsonl: 31 study ids appear more than once: 'EX001' at line 1, line 2, line 3 "
                              "and 19937 more places")
    assert "(21 more)" in message


def test_a_non_string_of_megabytes_is_named_briefly(tmp_path):
    path = tmp_path / "p.json"
    doc = {sid: {"model_prediction": "x"} for sid in IDS}
    doc[IDS[0]]["model_prediction"] = {"k": "v" * 1_000_000}
    path.write_text(json.dumps(doc))
    with pytest.raises(SubmissionError, match="predictions are not strings") as caught:
        load_predictions(path, IDS)
    assert len(str(caught.value)) < 500


def test_the_limits_let_a_10000_study_submission_through(tmp_path):
    """The limits are not so tight that ReXGradient's 10,000 studies in the ReXrank format
    (the test JSON plus a prediction, ~1.5 kB a study) are refused."""
    report = "The lungs are clear without focal consolidation, effusion or pneumothorax. " * 8  # ~600 characters
    doc = {f"RG{i:05d}": {"section_findings": report, "section_impression": "No acute process.", "report": report,
                          "image_path": [f"RG{i:05d}/0.png", f"RG{i:05d}/1.png"], "context": "", "site": "A",
                          "model_prediction": report} for i in range(10_000)}
    path = tmp_path / "submission.json"
    path.write_text(json.dumps(doc))
    assert 15e6 < path.stat().st_size < L.MAX_FILE_BYTES
    assert len(read_raw_predictions(path).rows) == 10_000


def test_the_space_and_the_cli_set_gradios_upload_limit(monkeypatch, tmp_path):
    import runpy
    from pathlib import Path

    import gradio as gr

    launched = []
    monkeypatch.setattr(gr.Blocks, "launch", lambda self, **kw: launched.append(kw))
    monkeypatch.setenv("REXRANK_STORE", str(tmp_path / "store"))
    app = Path(__file__).resolve().parent.parent / "leaderboard_space" / "app.py"
    runpy.run_path(str(app), run_name="__main__")
    assert main(["leaderboard", "--store", str(tmp_path / "store")]) == 0
    assert [kw.get("max_file_size") for kw in launched] == [L.MAX_FILE_BYTES] * 2


# ---- input limits: sizes, counts and messages by hand (mutmut's first run over input_limits.py) ----
def test_what_a_file_that_is_no_regular_file_is_called():
    import stat

    from rexrank.input_limits import kind_of

    assert kind_of(stat.S_IFIFO) == "a FIFO (named pipe)"
    assert kind_of(stat.S_IFLNK) == "not a regular file"


def test_a_file_of_exactly_the_cap_passes_and_one_byte_more_is_refused(tmp_path):
    from rexrank.input_limits import check_size, read_capped

    path = tmp_path / "p.jsonl"
    path.write_bytes(b"x" * 10)
    check_size(path, 10)
    assert read_capped(path, 10) == b"x" * 10
    path.write_bytes(b"x" * 11)
    with pytest.raises(SubmissionError) as err:
        check_size(path, 10)
    assert err.value.source == str(path)
    assert str(err.value) == f"{path}: file is 0.0 MiB (11 bytes); the limit is 0.0 MiB"


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/status"), reason="needs Linux's /proc")
def test_a_file_longer_than_it_said_is_refused_at_the_cap():
    """/proc files say they are 0 bytes long and hold more: the read stops at cap + 1."""
    from rexrank.input_limits import read_capped

    with pytest.raises(SubmissionError) as err:
        read_capped("/proc/self/status", 10)
    assert err.value.source == "/proc/self/status"
    assert str(err.value) == "/proc/self/status: file is more than 0.0 MiB; the limit is 0.0 MiB"


def test_json_values_are_counted_by_hand():
    """Commas, "{" and "[" count the values, and each newline in JSONL: b'{"a": [1, 2]}\\n{"b": [3]}\\n'
    holds 1 + 2 + 2 + 2 = 7; strings' commas are taken out only when that bound is over the limit."""
    from rexrank.input_limits import check_json_values

    jsonl = b'{"a": [1, 2]}\n{"b": [3]}\n'
    check_json_values(jsonl, source="s", lines=True, limit=7)
    with pytest.raises(SubmissionError):
        check_json_values(jsonl, source="s", lines=True, limit=6)
    check_json_values(b"[1,\n2]\n", source="s", limit=2)  # JSON: newlines are layout (1 + 1)
    check_json_values(b'["a,b", 1]', source="s", limit=2)  # 3 by the bound, 2 without the string's comma
    with pytest.raises(SubmissionError):
        check_json_values(b'["a,b", 1]', source="s", limit=1)
    with pytest.raises(SubmissionError) as err:
        check_json_values(b"[" + b"1," * 400_001 + b"1]", source="s")
    assert err.value.source == "s"
    assert str(err.value) == ("s: holds more than 400,000 JSON values (objects, arrays, numbers, strings); the limit is "
                              "20,000 predictions of 20 values each")


def test_jsonl_lines_by_hand():
    import itertools

    from rexrank.input_limits import MAX_LINE_BYTES, jsonl_lines

    def lines(data):  # at most 5: a reader that never ends fails here instead of hanging
        return list(itertools.islice(jsonl_lines(data, source="s"), 5))

    assert lines(b"{}\n[]") == [b"{}\n", b"[]"]
    assert lines(b"\n{}\n") == [b"\n", b"{}\n"]
    longest = b"x" * (MAX_LINE_BYTES - 1) + b"\n"
    assert lines(longest) == [longest]
    with pytest.raises(SubmissionError) as err:
        lines(b"{}\nx" + longest)
    assert err.value.source == "s"
    assert str(err.value) == ("s: line 2 is 262,145 bytes, more than a line may hold (262,144): predictions longer "
                              "than 20000 characters are refused (a report is ~1000)")

    # the length is the line's own, wherever it starts: two lines of 200,000 bytes pass
    second_line = b"y" * 199_999 + b"\n"
    assert lines(b"x" * 199_999 + b"\n" + second_line)[1] == second_line


def test_rows_are_counted_over_batches_as_they_arrive(monkeypatch):
    """The rows so far and the batch's, against MAX_ROWS (here 3): reading stops at the batch
    that passes it, and the message does not claim a total it never counted."""
    import pyarrow as pa

    from rexrank import input_limits
    from rexrank.input_limits import rows_of_batches

    monkeypatch.setattr(input_limits, "MAX_ROWS", 3)
    two = pa.record_batch({"n": ["1", "2"], "p": ["a", "b"]})
    one = pa.record_batch({"n": ["3"], "p": ["c"]})
    assert [r[0] for r in rows_of_batches([two, one], "n", "p", source="f.parquet")] == ["1", "2", "3"]
    with pytest.raises(SubmissionError) as err:
        rows_of_batches([two, two], "n", "p", source="f.parquet")
    assert err.value.source == "f.parquet"
    assert str(err.value) == "f.parquet: has more than 3 rows; the largest test set has 10,000 studies"


def test_a_column_of_empty_or_no_values_holds_zero_bytes():
    import pyarrow as pa

    from rexrank.input_limits import _value_bytes

    assert _value_bytes(pa.array([""])) == (0, 0)
    assert _value_bytes(pa.array([], type=pa.string())) == (0, 0)
    assert _value_bytes(pa.array(["", "ab"]).dictionary_encode()) == (2, 2)

def test_row_and_character_messages_by_hand():
    from rexrank.input_limits import check_rows, check_texts

    check_rows(20_000, source="s")
    with pytest.raises(SubmissionError) as err:
        check_rows(20_001, source="s", counted=False)
    assert str(err.value) == "s: has more than 20,000 rows; the largest test set has 10,000 studies"
    ids = [f"s{i}" for i in range(12)]
    check_texts(["x" * 20_000] * 12, ids, source="f")  # exactly the limit passes
    with pytest.raises(SubmissionError) as err:
        check_texts(["x" * 20_001] * 12, ids, source="f")
    assert err.value.source == "f"
    listed = ", ".join(f"'s{i}' (20001 characters)" for i in range(10))
    assert str(err.value) == ("f: 12 predictions are longer than 20000 characters (a report is ~1000): "
                              f"{listed}, … (2 more)")
    with pytest.raises(SubmissionError) as err:
        check_texts(["x" * 20_001] * 2, ids[:2], source="f", shown=2)
    assert str(err.value).endswith("'s0' (20001 characters), 's1' (20001 characters)")
    check_texts(["x" * 20_000] * 800, list(range(800)), source="f")  # 16,000,000 characters: the limit
    with pytest.raises(SubmissionError) as err:
        check_texts(["x" * 20_000] * 800 + ["x"], list(range(801)), source="f")
    assert err.value.source == "f"
    assert str(err.value) == "f: the predictions hold 16,000,001 characters together; the limit is 16,000,000"


# ---- input limits, round two: the reading, the folder, the schema and parquet's metadata by hand ----
def test_the_id_and_prediction_columns_must_be_text_and_a_long_type_is_cut_at_80():
    """A string_view column is text (pyarrow's is_string_view). A refused type is shown whole
    up to 80 characters and cut to 77 + "..." beyond: str(struct<a...a: int8>) is
    "struct<" (7) + k + ": int8>" (7) = k + 14 characters."""
    import pyarrow as pa

    from rexrank.input_limits import check_string_columns

    assert hasattr(pa, "string_view"), "pyarrow >= 16 has string_view"
    check_string_columns(pa.schema([("id", pa.string_view()), ("text", pa.dictionary(pa.int32(), pa.large_string()))]),
                         ("id", "text"), source="p.parquet")
    at_80 = "struct<" + "a" * 66 + ": int8>"
    at_81 = "struct<" + "a" * 67 + ": int8>"
    assert (len(at_80), len(at_81)) == (80, 81)
    for k, shown in ((66, at_80), (67, at_81[:77] + "...")):
        schema = pa.schema([("id", pa.string()), ("text", pa.struct([("a" * k, pa.int8())]))])
        with pytest.raises(SubmissionError) as err:
            check_string_columns(schema, ("id", "text"), source="p.parquet")
        assert err.value.source == "p.parquet"
        assert str(err.value) == (f"p.parquet: column 'text' holds {shown}, not strings: write the study ids and the "
                                  "predictions as text (a string column each)")


def test_a_file_of_the_cap_is_read_whole_and_a_refusal_names_what_it_read(tmp_path):
    from rexrank.errors import RexrankError
    from rexrank.input_limits import read_capped

    path = tmp_path / "p.csv"
    path.write_bytes(b"0123456789")
    assert read_capped(path, 10) == b"0123456789"  # cap bytes: read whole (cap + 1 asked for)
    path.write_bytes(b"0123456789!")
    with pytest.raises(SubmissionError) as err:
        read_capped(path, 10, what="predictions file")
    assert str(err.value) == f"{path}: predictions file is 0.0 MiB (11 bytes); the limit is 0.0 MiB"
    with pytest.raises(RexrankError) as err:
        read_capped(path, 10, error=RexrankError, what="test set")
    assert type(err.value) is RexrankError
    assert str(err.value) == f"{path}: test set is 0.0 MiB (11 bytes); the limit is 0.0 MiB"


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/status"), reason="needs Linux's /proc")
def test_a_file_that_grew_past_the_cap_after_its_size_was_checked_is_refused_with_its_name():
    """/proc/self/status says 0 bytes (stat) and holds ~1 kB: the read of cap + 1 bytes finds
    more than the cap; the message says "more than" the cap (the size is not known)."""
    from rexrank.errors import RexrankError
    from rexrank.input_limits import read_capped

    with pytest.raises(SubmissionError) as err:
        read_capped("/proc/self/status", 100, what="predictions file")
    assert err.value.source == "/proc/self/status"
    assert str(err.value) == "/proc/self/status: predictions file is more than 0.0 MiB; the limit is 0.0 MiB"
    with pytest.raises(RexrankError) as err:
        read_capped("/proc/self/status", 100, error=RexrankError, what="test set")
    assert type(err.value) is RexrankError
    assert str(err.value) == "/proc/self/status: test set is more than 0.0 MiB; the limit is 0.0 MiB"


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/mem"), reason="needs Linux's /proc")
def test_a_file_that_cannot_be_opened_or_read_is_one_line():
    """/proc/self/mem is a regular file of 0 bytes whose first page (address 0) is never
    mapped: reading it is an I/O error. /proc/sys/vm/compact_memory is write-only (mode 0200),
    for root too: opening it to read is refused."""
    import os

    from rexrank.errors import RexrankError
    from rexrank.input_limits import read_capped

    with pytest.raises(SubmissionError) as err:
        read_capped("/proc/self/mem", 100)
    assert err.value.source == "/proc/self/mem"
    assert str(err.value) == "/proc/self/mem: cannot read it: Input/output error"
    with pytest.raises(RexrankError) as err:
        read_capped("/proc/self/mem", 100, error=RexrankError)
    assert type(err.value) is RexrankError and str(err.value) == "/proc/self/mem: cannot read it: Input/output error"
    write_only = "/proc/sys/vm/compact_memory"
    if os.path.exists(write_only):
        with pytest.raises(SubmissionError) as err:
            read_capped(write_only, 100)
        assert err.value.source == write_only
        assert str(err.value) == f"{write_only}: cannot read it: Permission denied"
        with pytest.raises(RexrankError) as err:
            read_capped(write_only, 100, error=RexrankError)
        assert type(err.value) is RexrankError and str(err.value) == f"{write_only}: cannot read it: Permission denied"


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="needs FIFOs")
def test_a_file_swapped_for_a_fifo_after_the_check_is_refused_without_blocking(tmp_path, monkeypatch):
    """A FIFO that replaced the file between the size check and the open: opened
    non-blocking, it is refused at once from fstat; a blocking open would wait for a writer
    forever. The check is skipped here to stand for the swap."""
    import os

    from rexrank import input_limits
    from rexrank.errors import RexrankError

    fifo = tmp_path / "p.jsonl"
    os.mkfifo(fifo)
    monkeypatch.setattr(input_limits, "check_size", lambda *args, **kwargs: None)
    for error in (SubmissionError, RexrankError):
        outcome = []

        def read():
            try:
                outcome.append(input_limits.read_capped(fifo, 100, error=error))
            except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
                outcome.append(exc)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(10)
        if reader.is_alive():  # blocked in open(): give it a writer so the thread ends
            with open(fifo, "wb"):
                pass
            reader.join(10)
            pytest.fail("read_capped blocked opening a FIFO")
        [exc] = outcome
        assert type(exc) is error
        assert str(exc) == f"{fifo}: is a FIFO (named pipe), not a regular file"
        if error is SubmissionError:
            assert exc.source == str(fifo)


def test_what_check_regular_says_of_a_missing_file_a_broken_symlink_a_folder_and_a_fifo(tmp_path):
    import os

    from rexrank.errors import RexrankError
    from rexrank.input_limits import check_regular

    missing, broken = tmp_path / "missing.csv", tmp_path / "broken.csv"
    broken.symlink_to(missing)
    for error in (SubmissionError, RexrankError):
        with pytest.raises(error) as err:
            check_regular(missing, error=error)
        assert type(err.value) is error and str(err.value) == f"{missing}: file not found"
        with pytest.raises(error) as err:
            check_regular(broken, error=error)
        assert str(err.value) == f"{broken}: file not found (a broken symlink)"
    (tmp_path / "a.csv").write_text("id,text\n")
    under_a_file = tmp_path / "a.csv" / "b.csv"  # stat: ENOTDIR, an OSError that is not FileNotFoundError
    with pytest.raises(SubmissionError) as err:
        check_regular(under_a_file)
    assert err.value.source == str(under_a_file)
    assert str(err.value) == f"{under_a_file}: cannot read it: Not a directory"
    with pytest.raises(SubmissionError) as err:
        check_regular(tmp_path)  # a folder only with allow_dir
    assert str(err.value) == f"{tmp_path}: is a folder, not a regular file"
    assert check_regular(tmp_path, allow_dir=True).st_ino == os.stat(tmp_path).st_ino
    if hasattr(os, "mkfifo"):
        fifo, link = tmp_path / "p.fifo", tmp_path / "p.jsonl"
        os.mkfifo(fifo)
        link.symlink_to(fifo)
        with pytest.raises(SubmissionError) as err:
            check_regular(fifo)
        assert str(err.value) == f"{fifo}: is a FIFO (named pipe), not a regular file"
        with pytest.raises(SubmissionError) as err:
            check_regular(link)
        assert str(err.value) == f"{link}: is a FIFO (named pipe) (a symlink to {os.path.realpath(fifo)}), not a regular file"


def test_a_datasets_folder_of_1000_files_and_20_mib_passes_and_one_more_is_refused(tmp_path):
    """rglob counts files and sub-folders: 1,000 entries pass, 1,001 do not. Sizes are the
    files' st_size (sparse files here): 20 MiB − 1 + 1 byte = 20 MiB passes, + 2 bytes does not."""
    from rexrank.input_limits import check_folder

    many = tmp_path / "many"
    many.mkdir()
    for i in range(1000):
        (many / f"{i}.arrow").touch()
    check_folder(many, source="d")
    (many / "1000.arrow").touch()
    with pytest.raises(SubmissionError) as err:
        check_folder(many, source="d")
    assert err.value.source == "d"
    assert str(err.value) == "d: holds more than 1,000 files: not a datasets folder"
    big = tmp_path / "big"
    (big / "train").mkdir(parents=True)
    with open(big / "train" / "a.arrow", "wb") as fh:
        fh.truncate(20 * 2**20 - 1)
    with open(big / "b.arrow", "wb") as fh:
        fh.truncate(1)
    check_folder(big, source="d")
    with open(big / "b.arrow", "wb") as fh:
        fh.truncate(2)
    with pytest.raises(SubmissionError) as err:
        check_folder(big, source="d")
    assert err.value.source == "d"
    assert str(err.value) == "d: the folder's files are 20.0 MiB together; the limit is 20.0 MiB"


def test_a_folder_that_cannot_be_listed_is_one_line(tmp_path, monkeypatch):
    """pathlib passes over a sub-folder it may not open (PermissionError) and raises any other
    OSError, an I/O error on a network share, say; it stands in for one here."""
    import errno
    import pathlib

    from rexrank.input_limits import check_folder

    (tmp_path / "a.arrow").touch()

    def rglob(self, pattern):
        yield tmp_path / "a.arrow"
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(pathlib.Path, "rglob", rglob)
    with pytest.raises(SubmissionError) as err:
        check_folder(tmp_path, source="d")
    assert err.value.source == "d"
    assert str(err.value) == "d: cannot read the folder: Input/output error"


def test_decoded_lengths_by_hand_for_each_text_type(monkeypatch):
    """rows_of_batches counts bytes as batches arrive: a value of 4 × 20,000 = 80,000 bytes
    passes (4 bytes the most a character takes), 80,001 does not, in a string or large_string
    column, plain or dictionary-encoded; the total is summed over both columns and every batch
    (an all-null batch adds 0) and compared with the limit, here set to the hand count."""
    import pyarrow as pa

    from rexrank import input_limits
    from rexrank.input_limits import rows_of_batches

    def batch(ids, texts):
        return pa.record_batch({"n": ids, "p": texts})

    for kind in (pa.string(), pa.large_string()):
        edge = "x" * 80_000
        assert rows_of_batches([batch(pa.array(["1"]), pa.array([edge], type=kind))], "n", "p", source="p") == [
            ("1", edge, "row 1")]
        too_long = pa.array([edge + "x"], type=kind)
        for column in (too_long, too_long.dictionary_encode()):
            with pytest.raises(SubmissionError) as err:
                rows_of_batches([batch(pa.array(["1"]), pa.array(["a"], type=kind)), batch(pa.array(["2"]), column)],
                                "n", "p", source="p")
            assert err.value.source == "p"
            assert str(err.value) == "p: column 'p' holds a value of 80,001 bytes; the limit is 20,000 characters"
    # ids "1", "2" + "abc", "de"; "3" x 3 + "fg" x 3 (a dictionary); an all-null batch: 2 + 5 + 3 + 6 + 0 = 16 bytes
    batches = [batch(pa.array(["1", "2"]), pa.array(["abc", "de"])),
               batch(pa.array(["3"] * 3), pa.array(["fg"] * 3).dictionary_encode()),
               batch(pa.array([None, None], type=pa.string()), pa.array([None, None], type=pa.string()))]
    monkeypatch.setattr(input_limits, "MAX_TABLE_BYTES", 16)
    assert [r[2] for r in rows_of_batches(batches, "n", "p", source="p")] == [f"row {i}" for i in range(1, 8)]
    monkeypatch.setattr(input_limits, "MAX_TABLE_BYTES", 15)
    with pytest.raises(SubmissionError) as err:
        rows_of_batches(batches, "n", "p", source="p")
    assert err.value.source == "p"
    assert str(err.value) == ("p: its 'n' and 'p' columns hold more than 0.0 MiB once decompressed (counted as they "
                              "are read, after 5 rows); the limit is 0.0 MiB (MAX_TABLE_BYTES): keep the id and "
                              "prediction columns only, and predictions of report length")


def test_parquet_footer_length_is_the_last_eight_bytes_by_the_format(tmp_path):
    """A parquet file ends in the metadata's length (4 bytes, little-endian) and b"PAR1"; the
    length equals the metadata's serialized size (pyarrow). Shorter than 8 bytes or another
    ending: 0."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rexrank.input_limits import _parquet_footer_length

    path = tmp_path / "p.parquet"
    pq.write_table(pa.table({"id": ["s1"], "text": ["a"]}), path)
    assert _parquet_footer_length(path) == pq.ParquetFile(path).metadata.serialized_size > 0
    for data, length in ((b"\x05\x00\x00\x00PAR1", 5), (b"\x05\x00\x00PAR1", 0), (b"", 0),
                         (b"\x05\x01\x00\x00PAR2", 0), (b"x\x05\x01\x00\x00PAR1", 261)):
        path.write_bytes(data)
        assert _parquet_footer_length(path) == length, data


def test_parquet_metadata_limits_at_and_one_past_each(tmp_path, monkeypatch):
    """Footer length, rows, row groups and columns, each at its limit and one past, with the
    message; the two columns' size is their column chunks' uncompressed (or compressed, if
    larger) sizes summed over every row group, as the format's metadata gives them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rexrank import input_limits
    from rexrank.input_limits import parquet_columns

    path = tmp_path / "p.parquet"

    def refused(source="p"):
        with pytest.raises(SubmissionError) as err:
            parquet_columns(path, ("id",), ("text",), source=source)
        assert err.value.source == source
        return str(err.value)[len(source) + 2:]

    # a footer that declares 1 MiB passes to pyarrow (which finds no such metadata); one byte more is refused
    for declared, expected in ((2**20, None), (2**20 + 1, "its metadata is 1.0 MiB; the limit is 1.0 MiB")):
        path.write_bytes(b"PAR1" + b"\0" * 16 + declared.to_bytes(4, "little") + b"PAR1")
        try:
            pq.ParquetFile(path)
        except Exception as exc:  # noqa: BLE001 - pyarrow's own words are the oracle
            theirs = f"not a readable parquet file ({type(exc).__name__}: {str(exc).strip().splitlines()[0]})"
        assert refused() == (expected or theirs)

    pq.write_table(pa.table({"id": [f"s{i}" for i in range(20_001)], "text": ["a"] * 20_001}), path)
    assert refused() == "has more than 20,000 rows (20,001); the largest test set has 10,000 studies"
    for groups in (1000, 1001):
        pq.write_table(pa.table({"id": [f"s{i}" for i in range(groups)], "text": ["a"] * groups}), path, row_group_size=1)
        assert pq.ParquetFile(path).metadata.num_row_groups == groups
        if groups == 1000:
            assert parquet_columns(path, ("id",), ("text",), source="p") == ("id", "text")
        else:
            assert refused() == "has 1,001 row groups; the limit is 1,000"
    for width in (1000, 1001):
        pq.write_table(pa.table({"id": ["s1"], "text": ["a"], **{f"c{i}": [i] for i in range(width - 2)}}), path)
        if width == 1000:
            assert parquet_columns(path, ("study_id", "id"), ("report", "text"), source="p") == ("id", "text")
        else:
            assert refused() == "has 1,001 columns; the limit is 1,000"

    pq.write_table(pa.table({"study": ["s1"], "text": ["a"]}), path)
    assert refused() == ("no id column: expected one of id, found study, text; name yours with --id-column NAME "
                         "(Python: id_column=NAME), or rename the column (the accepted shapes: CSV, JSONL or a JSON list of records with id and prediction fields; "
                         "a JSON object {id: prediction}; the ReXrank submission JSON (the test JSON with "
                         "model_prediction added to each study); a parquet file; a datasets.save_to_disk folder)")
    pq.write_table(pa.table({"id": ["s1"], "report": ["a"]}), path)
    assert refused() == ("no prediction text column: expected one of text, found id, report; name yours with "
                         "--prediction-column NAME (Python: prediction_column=NAME), or rename the column ("
                         "the accepted shapes: CSV, JSONL or a JSON list of records with id and prediction fields; "
                         "a JSON object {id: prediction}; the ReXrank submission JSON (the test JSON with "
                         "model_prediction added to each study); a parquet file; a datasets.save_to_disk folder)")
    pq.write_table(pa.table({"id": [1], "text": ["a"]}), path)
    assert refused() == ("column 'id' holds int64, not strings: write the study ids and the predictions as text "
                         "(a string column each)")

    # two row groups of three columns: only "id" and "text" count, in every row group
    pq.write_table(pa.table({"id": ["s1", "s2"], "text": ["abc", "de"], "other": ["x" * 500] * 2}), path, row_group_size=1)
    meta = pq.ParquetFile(path).metadata
    chunks = [meta.row_group(g).column(c) for g in range(2) for c in range(3)]
    size = sum(max(c.total_uncompressed_size, c.total_compressed_size) for c in chunks if c.path_in_schema != "other")
    assert len([c for c in chunks if c.path_in_schema != "other"]) == 4
    monkeypatch.setattr(input_limits, "MAX_TABLE_BYTES", size)
    assert parquet_columns(path, ("id",), ("text",), source="p") == ("id", "text")
    monkeypatch.setattr(input_limits, "MAX_TABLE_BYTES", size - 1)
    assert refused() == "its 'id' and 'text' columns decompress to 0.0 MiB; the limit is 0.0 MiB"


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/status"), reason="needs Linux's /proc")
def test_read_capped_asks_for_cap_plus_one_bytes_and_no_more(monkeypatch):
    """The bound itself: a file that grows without end (or a /proc file that says 0 bytes)
    costs at most cap + 1 bytes of reading. A spy on the opened file records what is asked."""
    import os

    from rexrank.input_limits import read_capped

    asked, fdopen = [], os.fdopen

    class Spy:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return self.fh.__exit__(*exc)

        def read(self, size=-1):
            asked.append(size)
            return self.fh.read(size)

    monkeypatch.setattr(os, "fdopen", lambda *args, **kwargs: Spy(fdopen(*args, **kwargs)))
    with pytest.raises(SubmissionError):
        read_capped("/proc/self/status", 100)
    assert asked == [101]
