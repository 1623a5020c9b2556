"""Reading and validating predictions: one validator for every entry point.

Accepted shapes (`ACCEPTED_SHAPES`, named by every refusal of a file's shape):
- CSV (comma-separated; a header separated by tabs or semicolons is read with that
  delimiter), JSONL, or a JSON list of records, with an id column (`id` or `study_id`) and a
  text column (`prediction` or `report`);
- a JSON object {study id: prediction}, every value a string;
- ReXrank submission JSON: the test JSON with `model_prediction` added to each study (an
  object keyed by study id whose values are objects);
- Parquet, or a folder written by `datasets.Dataset.save_to_disk`, with the same columns.

Every file is read in a child process with hard limits (`read_raw_predictions` runs
`read_rows_here` there, rexrank.sandbox): the caller receives (id, prediction, location)
strings only, never what a file expands to.

Nothing is dropped or coerced silently: missing, unknown and duplicate ids and
non-string predictions are errors that name the file and the studies. Empty predictions
are allowed but counted.
"""
from __future__ import annotations

import json
import math
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, NoReturn, Sequence

from rexrank.errors import SubmissionError, first_line
from rexrank.prediction_columns import ACCEPTED_SHAPES, first_present, short_repr

ID_COLUMNS = ("id", "study_id")
TEXT_COLUMNS = ("prediction", "report")
SUBMISSION_JSON_FIELD = "model_prediction"
SHOWN = 10  # how many offending ids an error message lists


@dataclass
class Predictions:
    """Validated predictions, aligned to the test set's study order."""

    ids: list[str]
    texts: list[str]
    source: str
    n_empty: int
    empty_ids: list[str] = field(default_factory=list)
    # predictions for studies of the test set that the track does not score (e.g. studies
    # without findings in the findings track): accepted, not scored, and reported
    not_in_track_ids: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class RawPredictions:
    """(id, text, location) rows as read from a file, before validation."""

    rows: list[tuple[Any, Any, str]]
    source: str


def _rows_from_records(records: list, *, source: str, location: str, ids=ID_COLUMNS, texts=TEXT_COLUMNS) -> RawPredictions:
    columns: dict[str, None] = {}
    for rec in records:
        if not isinstance(rec, dict):
            raise SubmissionError(f"expected objects with id and prediction fields, found {type(rec).__name__}; "
                                  f"{ACCEPTED_SHAPES}", source=source)
        columns.update(dict.fromkeys(rec))
    id_col = first_present(columns, ids, what="id", source=source)
    text_col = first_present(columns, texts, what="prediction text", source=source)
    rows = []
    for i, rec in enumerate(records):
        if text_col not in rec:
            raise SubmissionError(f"{location} {i + 1} has no {text_col!r} field", source=source)
        rows.append((rec.get(id_col), rec[text_col], f"{location} {i + 1}"))
    return RawPredictions(rows, source)


def _read_json_object(doc: dict, *, source: str, ids, texts) -> RawPredictions:
    """A JSON object keyed by study id: {id: prediction} when every value is a string, else the
    ReXrank submission JSON (every value an object holding the prediction field)."""
    if doc and all(isinstance(value, str) for value in doc.values()):
        if ids != ID_COLUMNS or texts != TEXT_COLUMNS:
            raise SubmissionError("a JSON object {id: prediction} has no columns or fields to name: leave out "
                                  "--id-column and --prediction-column", source=source)
        return RawPredictions([(sid, text, f"study {short_repr(sid)}") for sid, text in doc.items()], source)
    if ids != ID_COLUMNS:
        raise SubmissionError("a ReXrank submission JSON is keyed by study id: it has no id column to name", source=source)
    field = texts[0] if texts != TEXT_COLUMNS else SUBMISSION_JSON_FIELD
    rows = []
    for study_id, study in doc.items():
        if not isinstance(study, dict):
            raise SubmissionError(
                f"study {short_repr(study_id)} holds {type(study).__name__} {short_repr(study)}, neither a prediction "
                f"string nor an object with {field!r}: a JSON object is either {{id: prediction}} (every value a "
                f"string) or the ReXrank submission JSON (every value an object with {field!r}); {ACCEPTED_SHAPES}",
                source=source)
        if field not in study:
            raise SubmissionError(
                f"study {short_repr(study_id)} has no {field!r} field (ReXrank submission JSON: the test "
                f"JSON with {field!r} added to every study); {ACCEPTED_SHAPES}",
                source=source,
            )
        rows.append((study_id, study[field], f"study {short_repr(study_id)}"))
    return RawPredictions(rows, source)


def _read_table(frame, *, source: str, location: str, ids=ID_COLUMNS, texts=TEXT_COLUMNS) -> RawPredictions:
    id_col = first_present(frame.columns, ids, what="id", source=source)
    text_col = first_present(frame.columns, texts, what="prediction text", source=source)
    ids = frame[id_col].tolist()
    texts = frame[text_col].tolist()
    return RawPredictions([(i, t, f"{location} {n + 1}") for n, (i, t) in enumerate(zip(ids, texts))], source)


def read_raw_predictions(path: str | Path, *, id_column: str | None = None, prediction_column: str | None = None) -> RawPredictions:
    """Rows of a predictions file; `id_column` / `prediction_column` name its columns when
    they are not the usual ones (for a ReXrank submission JSON: the prediction field).

    The file is read in a child process with hard limits (rexrank.sandbox): what comes back
    are (id, prediction, location) strings, already checked by `checked_rows`."""
    from rexrank import sandbox

    source = str(path)
    return RawPredictions(sandbox.run(read_rows_here, [source, id_column, prediction_column], source=source), source)


def read_rows_here(path: str, id_column: str | None, prediction_column: str | None) -> list[tuple[str, str, str]]:
    """The child's part of `read_raw_predictions`, run in this process: the file's rows, each
    id and prediction a string (or a SubmissionError). Call it directly only on a file that
    cannot hurt (a test's)."""
    try:
        raw = _read_raw_predictions(Path(path), id_column, prediction_column)
    except UnicodeDecodeError as exc:
        raise SubmissionError(
            f"not UTF-8 text (byte {exc.start}: {exc.object[exc.start:exc.start + 1]!r}); save the file as UTF-8",
            source=path,
        ) from None
    return checked_rows(raw)


def warm_up() -> None:
    """Read a two-row file of each format here (the reader's server runs this once, so that its
    children find what the libraries load on first use already loaded)."""
    import tempfile

    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"id": "S1", "prediction": "a"}, {"id": "S2", "prediction": "b"}]
    with tempfile.TemporaryDirectory(prefix="rexrank-warm-up-") as tmp:
        folder = Path(tmp)
        (folder / "p.csv").write_text("id,prediction\nS1,a\nS2,b\n", encoding="utf-8")
        (folder / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        (folder / "p.json").write_text(json.dumps({r["id"]: r["prediction"] for r in rows}), encoding="utf-8")
        table = pa.Table.from_pylist(rows)
        pq.write_table(table, folder / "p.parquet")
        saved = folder / "saved"  # as datasets.save_to_disk lays it out
        saved.mkdir()
        (saved / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data.arrow"}]}))
        with pa.ipc.new_stream(str(saved / "data.arrow"), table.schema) as writer:
            writer.write_table(table)
        for name in ("p.csv", "p.jsonl", "p.json", "p.parquet", "saved"):
            read_rows_here(str(folder / name), None, None)


def _read_raw_predictions(path: Path, id_column: str | None = None, prediction_column: str | None = None) -> RawPredictions:
    from rexrank import input_limits as L

    source = str(path)
    # only a regular file or a folder: a FIFO would block here forever, /dev/zero never ends
    st = L.check_regular(path, allow_dir=True)
    columns = dict(ids=(id_column,) if id_column else ID_COLUMNS, texts=(prediction_column,) if prediction_column else TEXT_COLUMNS)
    if stat.S_ISDIR(st.st_mode):
        raw = _read_dataset_folder(path, source=source, **columns)
    else:
        raw = _read_file(path, source=source, **columns)
    L.check_rows(len(raw.rows), source=source)
    L.check_texts([r[1] for r in raw.rows], [r[0] for r in raw.rows], source=source)
    return raw


def _read_dataset_folder(path: Path, *, source: str, ids, texts) -> RawPredictions:
    """A `datasets.save_to_disk` folder, read as what it is (its state.json's list of Arrow
    stream files) batch by batch, so that compressed record batches are counted as they are
    decoded (`datasets.load_from_disk` would decode every batch first)."""
    import pyarrow as pa

    from rexrank import input_limits as L

    L.check_folder(path, source=source)  # regular files, MAX_TABLE_BYTES in all, before any is opened
    splits_file = path / "dataset_dict.json"
    if splits_file.is_file():
        splits = _small_json(splits_file, source=source).get("splits")
        if not isinstance(splits, list) or not all(isinstance(s, str) and _plain_name(s) for s in splits):
            raise SubmissionError(_not_saved("its dataset_dict.json lists no splits"), source=source)
        if len(splits) != 1:
            raise SubmissionError(f"saved DatasetDict has splits {splits}; save a single split", source=source)
        path = path / splits[0]
    state_file = path / "state.json"
    if not state_file.is_file():
        raise SubmissionError(_not_saved("it has no state.json nor dataset_dict.json"), source=source)
    files = _small_json(state_file, source=source).get("_data_files")
    names = [f.get("filename") for f in files] if isinstance(files, list) and all(isinstance(f, dict) for f in files) else None
    if not names or not all(isinstance(n, str) and _plain_name(n) and (path / n).is_file() for n in names):
        raise SubmissionError(_not_saved("its state.json names no data files of the folder"), source=source)
    try:
        readers = [pa.ipc.open_stream(pa.OSFile(str(path / name))) for name in names]
        schema = readers[0].schema
        id_col = first_present(schema.names, ids, what="id", source=source)
        text_col = first_present(schema.names, texts, what="prediction text", source=source)
        L.check_string_columns(schema, (id_col, text_col), source=source)
        for name, reader in zip(names, readers):
            if not reader.schema.equals(schema):
                raise SubmissionError(_not_saved(f"{name} has other columns than {names[0]}"), source=source)
        batches = (batch.select([id_col, text_col]) for reader in readers for batch in reader)
        return RawPredictions(L.rows_of_batches(batches, id_col, text_col, source=source), source)
    except (SubmissionError, MemoryError):
        raise
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... for a damaged file
        raise SubmissionError(_not_saved(first_line(exc)), source=source) from None


def _not_saved(reason: str) -> str:
    return f"not a folder saved with datasets.save_to_disk: {reason}; {ACCEPTED_SHAPES}"


def _plain_name(name: str) -> bool:
    """A file or folder name of this folder, never a path out of it."""
    return bool(name) and name not in (".", "..") and "/" not in name and "\\" not in name and "\0" not in name


def _small_json(path: Path, *, source: str) -> dict:
    from rexrank import input_limits as L

    try:
        doc = json.loads(L.read_capped(path, 1024 * 1024))
    except (ValueError, SubmissionError) as exc:  # (UnicodeDecodeError is a ValueError)
        raise SubmissionError(_not_saved(f"its {path.name} is not readable JSON ({first_line(exc)})"),
                              source=source) from None
    if not isinstance(doc, dict):
        raise SubmissionError(_not_saved(f"its {path.name} is not a JSON object"), source=source)
    return doc


def _read_parquet(path: Path, *, source: str, ids, texts) -> RawPredictions:
    import pyarrow.parquet as pq

    from rexrank import input_limits as L

    L.check_size(path, L.MAX_FILE_BYTES)
    # what the metadata claims may refuse the file sooner; the limits hold on what is decoded
    id_col, text_col = L.parquet_columns(path, ids, texts, source=source)
    try:
        batches = pq.ParquetFile(path).iter_batches(batch_size=L.BATCH_ROWS, columns=[id_col, text_col],
                                                    use_threads=False)
        return RawPredictions(L.rows_of_batches(batches, id_col, text_col, source=source), source)
    except (SubmissionError, MemoryError):
        raise
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... for a damaged file
        raise SubmissionError(f"not a readable parquet file ({type(exc).__name__}: {first_line(exc)})", source=source) from None


def _read_file(path: Path, *, source: str, ids, texts) -> RawPredictions:
    from rexrank import input_limits as L

    suffix = path.suffix.lower()
    columns = dict(ids=ids, texts=texts)
    if suffix == ".parquet":
        return _read_parquet(path, source=source, **columns)
    if suffix not in (".csv", ".jsonl", ".json"):
        raise SubmissionError(f"unsupported file type {suffix or '(none)'}; {ACCEPTED_SHAPES}", source=source)
    data = L.read_capped(path, L.MAX_FILE_BYTES if suffix == ".json" else L.MAX_TABLE_BYTES)
    if suffix == ".csv":
        return _read_csv(data, source=source, **columns)
    L.check_json_values(data, source=source, lines=suffix == ".jsonl")
    if suffix == ".jsonl":
        records = []
        for lineno, line in enumerate(L.jsonl_lines(data, source=source), 1):  # one line decoded at a time
            if not line.strip():
                continue
            records.append(_strict_json(line.decode("utf-8"), source=source, where=f"line {lineno}"))
            L.check_rows(len(records), source=source, counted=False)
        return _rows_from_records(records, source=source, location="line", **columns)
    doc = _strict_json(data.decode("utf-8"), source=source, where="")
    del data
    if isinstance(doc, dict):
        return _read_json_object(doc, source=source, **columns)
    if isinstance(doc, list):
        return _rows_from_records(doc, source=source, location="item", **columns)
    raise SubmissionError(f"expected a JSON object or list, got {type(doc).__name__}; {ACCEPTED_SHAPES}", source=source)


# a header line separated by one of these and holding no comma is read with it: a spreadsheet's
# "CSV" export is often tab- or semicolon-separated
OTHER_DELIMITERS = {"\t": "tabs", ";": "semicolons"}


def _read_csv(data: bytes, *, source: str, ids, texts) -> RawPredictions:
    import io

    import pandas as pd

    from rexrank import input_limits as L

    header = data.split(b"\n", 1)[0]
    delimiter = next((d for d in OTHER_DELIMITERS if b"," not in header and d.encode() in header), ",")
    if header.count(delimiter.encode()) + 1 > L.MAX_CSV_COLUMNS:
        raise SubmissionError(f"the header line has more than {L.MAX_CSV_COLUMNS:,} columns", source=source)
    # keep_default_na=False: an empty cell is an empty prediction, not NaN; ids stay text;
    # nrows: parsing stops one row past the limit
    try:
        frame = pd.read_csv(io.BytesIO(data), sep=delimiter, dtype=str, keep_default_na=False, nrows=L.MAX_ROWS + 1,
                            encoding="utf-8")
    except pd.errors.EmptyDataError:
        raise SubmissionError("empty CSV file: expected a header line (id,prediction) and one line per study; "
                              f"{ACCEPTED_SHAPES}", source=source) from None
    except pd.errors.ParserError as exc:
        _refuse_wide_lines(first_line(exc), delimiter, source)
    if not isinstance(frame.index, pd.RangeIndex):
        # every line one field wider than the header: pandas would take the first column for an
        # index and read the others shifted (ids from the predictions), so it is refused
        _refuse_wide_lines("every line after the header has more fields than the header", delimiter, source)
    L.check_rows(len(frame), source=source, counted=False)
    # CSV row numbers count the header as line 1
    raw = _read_table(frame, source=source, location="line", ids=ids, texts=texts)
    raw.rows = [(i, t, f"line {n + 2}") for n, (i, t, _) in enumerate(raw.rows)]
    return raw


def _refuse_wide_lines(problem: str, delimiter: str, source: str) -> NoReturn:
    named = OTHER_DELIMITERS.get(delimiter, "commas")
    raise SubmissionError(f"not a readable CSV: {problem}; its header line is separated by {named}: a line with "
                          "more fields than the header holds the delimiter in a prediction that is not quoted; "
                          "write the file with a CSV writer (csv.writer, pandas' to_csv), which quotes such fields",
                          source=source) from None


def _strict_json(text: str, *, source: str, where: str):
    """JSON with repeated keys refused (json.loads would keep the last one silently)."""
    from rexrank.strict_json import JSONProblem, describe_duplicates, duplicate_keys, loads

    try:
        doc = loads(text)
    except JSONProblem as exc:
        raise SubmissionError(f"{where} is {exc}" if where else str(exc), source=source) from None
    found = duplicate_keys(doc)
    if found:
        top = "study ids" if not where and isinstance(doc, dict) else "keys"
        listed = describe_duplicates(found, top_level=top)
        raise SubmissionError(f"{where}: {listed}" if where else listed, source=source,
                              details={"duplicates": [k for w, keys in found if not w for k in keys]})
    return doc


_SURROGATE = re.compile("[\ud800-\udfff]")


def _surrogate_at(text: str) -> int | None:
    """Position of a lone surrogate (\\udXXX in JSON: not a character, cannot be encoded)."""
    found = _SURROGATE.search(text)
    return found.start() if found else None


def _normalise_id(value: Any, location: str, source: str) -> str:
    if isinstance(value, bool) or value is None or (isinstance(value, float) and math.isnan(value)):
        raise SubmissionError(f"{location}: missing study id", source=source)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = str(value).strip()
    if not text:
        raise SubmissionError(f"{location}: empty study id", source=source)
    if _surrogate_at(text) is not None:
        raise SubmissionError(f"{location}: study id {short_repr(text)} holds a lone surrogate, not valid Unicode text", source=source)
    return text


def _listing(ids: Sequence[str]) -> str:
    shown = ", ".join(map(short_repr, ids[:SHOWN]))
    return shown + (f", … ({len(ids) - SHOWN} more)" if len(ids) > SHOWN else "")


def _places(sid: str, locations: list[str], shown: int = 3) -> str:
    more = f" and {len(locations) - shown} more places" if len(locations) > shown else ""
    return f"{short_repr(sid)} at {', '.join(locations[:shown])}{more}"


def checked_rows(raw: RawPredictions) -> list[tuple[str, str, str]]:
    """(study id, prediction, location) of each row, the id as text: a SubmissionError for a
    missing or empty id, and for predictions that are not strings or not valid Unicode text
    (all of them named). Run where the file is read (the reader's child process) and again by
    the validator on rows put together elsewhere."""
    source = raw.source
    rows: list[tuple[str, str, str]] = []
    bad_types: list[str] = []
    bad_text: list[str] = []
    for value, text, location in raw.rows:
        sid = _normalise_id(value, location, source)
        if not isinstance(text, str):
            bad_types.append(f"{location} (id {short_repr(sid)}): {type(text).__name__} {short_repr(text)}")
        elif (pos := _surrogate_at(text)) is not None:
            bad_text.append(f"{location} (id {short_repr(sid)}): lone surrogate U+{ord(text[pos]):04X} at character {pos + 1}")
        rows.append((sid, text, location))
    if bad_types:
        raise SubmissionError(
            f"{len(bad_types)} predictions are not strings: " + "; ".join(bad_types[:SHOWN])
            + (" …" if len(bad_types) > SHOWN else ""),
            source=source,
            details={"non_string": bad_types},
        )
    if bad_text:
        raise SubmissionError(
            f"{len(bad_text)} predictions are not valid Unicode text: " + "; ".join(bad_text[:SHOWN])
            + (" …" if len(bad_text) > SHOWN else "") + "; write real characters (UTF-8), not lone \\udXXX escapes",
            source=source,
        )
    return rows


def validate_predictions(
    raw: RawPredictions,
    test_ids: Sequence[str],
    *,
    test_set: str = "the test set",
    outside_track_ids: Iterable[str] = (),
) -> Predictions:
    """Check raw rows against the test set's ids; return predictions in test-set order.

    `outside_track_ids`: studies of the test set that this track does not score; a
    prediction for one is accepted and reported, not an error.
    """
    from rexrank import input_limits as L

    source = raw.source
    # again here: rows put together from several files (parquet shards of a Hub repo)
    L.check_rows(len(raw.rows), source=source)
    L.check_texts([r[1] for r in raw.rows], [r[0] for r in raw.rows], source=source)
    by_id: dict[str, tuple[str, str]] = {}
    duplicates: dict[str, list[str]] = {}
    for sid, text, location in checked_rows(raw):
        if sid in by_id:
            duplicates.setdefault(sid, [by_id[sid][1]]).append(location)
        else:
            by_id[sid] = (text, location)
    if duplicates:
        listed = "; ".join(_places(sid, locs) for sid, locs in list(duplicates.items())[:SHOWN])
        more = f"; … ({len(duplicates) - SHOWN} more)" if len(duplicates) > SHOWN else ""
        raise SubmissionError(
            f"{len(duplicates)} study ids appear more than once: {listed}{more}", source=source, details={"duplicates": list(duplicates)}
        )
    expected = list(test_ids)
    expected_set = set(expected)
    outside = set(outside_track_ids)
    not_in_track = [sid for sid in by_id if sid in outside and sid not in expected_set]
    unknown = [sid for sid in by_id if sid not in expected_set and sid not in outside]
    missing = [sid for sid in expected if sid not in by_id]
    if by_id and len(unknown) == len(by_id) and (outside or expected):
        raise SubmissionError(
            f"none of the {len(by_id)} study ids belongs to {test_set} (e.g. {_listing(unknown[:3])}); "
            "are these predictions for another test set?",
            source=source,
            details={"unknown": unknown, "n_expected": len(expected)},
        )
    problems = []
    if missing:
        problems.append(f"{len(missing)} of {len(expected)} studies of {test_set} have no prediction: {_listing(missing)}")
    if unknown:
        problems.append(f"{len(unknown)} study ids are not in {test_set}: {_listing(unknown)}")
    if problems:
        raise SubmissionError("; ".join(problems), source=source,
                              details={"missing": missing, "unknown": unknown, "n_expected": len(expected)})
    texts = [by_id[sid][0] for sid in expected]
    empty_ids = [sid for sid, text in zip(expected, texts) if not text.strip()]
    return Predictions(
        ids=expected,
        texts=texts,
        source=source,
        n_empty=len(empty_ids),
        empty_ids=empty_ids,
        not_in_track_ids=not_in_track,
    )


def load_predictions(
    path: str | Path, test_ids: Sequence[str], *, test_set: str = "the test set", outside_track_ids: Iterable[str] = (),
    id_column: str | None = None, prediction_column: str | None = None,
) -> Predictions:
    """Read a predictions file in any accepted format and validate it against `test_ids`."""
    return validate_predictions(
        read_raw_predictions(path, id_column=id_column, prediction_column=prediction_column), test_ids,
        test_set=test_set, outside_track_ids=outside_track_ids,
    )
