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
from test_store import example_rows

IDS = list(example_rows())


def one_error_line(capsys, command: str, path, tmp_path) -> str:
    if command == "score":
        args = ["score", "--dataset", "example", "--predictions", str(path), "--no-progress"]
    else:
        args = ["submit", "--store", str(tmp_path / "s"), "--dataset", "example", "--predictions", str(path),
                "--model-name", "m", "--submitter", "alice"]
    code = main(args)
    _, err = capsys.readouterr()
    assert code == 1 and "Traceback" not in err
    [line] = [x for x in err.splitlines() if x.startswith("rexrank ")]
    assert line.startswith(f"rexrank {command}: error: ")
    return line


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
