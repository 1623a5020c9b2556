"""Limits on the input files rexrank reads (predictions, test sets), checked before a file
is loaded, and the reading that keeps to them.

Every predictions file, whatever the entry point (`rexrank score`, `rexrank submit`, the
leaderboard's Submit tab, the backend), is held to:

    MAX_FILE_BYTES         bytes of any file, and of a JSON file (the ReXrank format
                           carries the test set's fields beside each prediction); the
                           leaderboard's upload limit
    MAX_TABLE_BYTES        bytes of a JSONL or CSV file (id and prediction only), of a
                           parquet file's or a datasets folder's two columns once
                           decompressed (counted as they are read, `rows_of_batches`; the
                           parquet metadata's sizes may refuse a file sooner, never let
                           one through), of a datasets folder's files
    MAX_ROWS               rows (predictions) in a file (parquet: its metadata's count may
                           refuse it sooner)
    MAX_PREDICTION_CHARS   characters in one prediction (a report is ~1,000)
    MAX_TOTAL_CHARS        characters in all predictions together
    MAX_JSON_VALUES        JSON values (objects, arrays, numbers, strings, ...) in a JSON
                           or JSONL file: 3 bytes (`{},`) make a Python object of ~100
    MAX_CSV_COLUMNS        columns in a CSV header (and a parquet file)
    MAX_PARQUET_FOOTER     bytes of a parquet file's metadata, read before it is parsed
    MAX_ROW_GROUPS         row groups of a parquet file (50,000 empty ones cost 1 GB)

They are set so that a submission for the largest test set (ReXGradient, 10,000 studies)
may hold predictions of 1.6 kB on average (ReXrank's reports are a few hundred
characters), in the ReXrank format with test-set fields of ~1.5 kB a study, while the
most a file within them can cost stays under twice the memory and time of an ordinary
10,000-study submission (~0.9 kB predictions) in the same format
(benchmarks/input_limits.py measures it).

Every predictions file is read in a child process with limits of its own on memory, CPU
time and wall-clock time (rexrank.sandbox): what a page or batch holds is known only once it is
decompressed whole, and these limits bound that too.

Only regular files are read (a FIFO would block the reader forever, /dev/zero never
ends); a symlink counts as what it points to. Test-set files, which come from the
organisers, have a larger byte cap (MAX_TEST_SET_BYTES) and no row limit.
"""
from __future__ import annotations

import itertools
import os
import stat
from pathlib import Path

from rexrank.errors import RexrankError, SubmissionError, first_line

MAX_FILE_BYTES = 32 * 1024 * 1024
MAX_TABLE_BYTES = 20 * 1024 * 1024
MAX_ROWS = 20_000
MAX_PREDICTION_CHARS = 20_000
MAX_TOTAL_CHARS = 16_000_000
MAX_JSON_VALUES = 20 * MAX_ROWS
MAX_CSV_COLUMNS = 1_000
MAX_PARQUET_FOOTER = 1024 * 1024  # a parquet file's metadata, parsed whole before anything else
MAX_ROW_GROUPS = 1_000
# a JSONL line: one prediction of MAX_PREDICTION_CHARS, each character written as a 6-byte
# \uXXXX escape at worst (120,000 bytes), its id and other fields, with room
MAX_LINE_BYTES = 256 * 1024
MAX_TEST_SET_BYTES = 512 * 1024 * 1024

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))


def mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def kind_of(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def check_regular(path: str | Path, *, error=SubmissionError, allow_dir: bool = False) -> os.stat_result:
    """stat() of `path` (following symlinks) if it is a regular file (or, with `allow_dir`,
    a folder); else `error` with a one-line reason. Never opens the file."""
    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise _error(error, "file not found" + (" (a broken symlink)" if path.is_symlink() else ""), path) from None
    except OSError as exc:
        raise _error(error, f"cannot read it: {exc.strerror or exc}", path) from None
    if stat.S_ISREG(st.st_mode) or (allow_dir and stat.S_ISDIR(st.st_mode)):
        return st
    via = f" (a symlink to {os.path.realpath(path)})" if path.is_symlink() else ""
    raise _error(error, f"is {kind_of(st.st_mode)}{via}, not a regular file", path)


def read_capped(path: str | Path, cap: int, *, error=SubmissionError, what: str = "file") -> bytes:
    """The bytes of a regular file of at most `cap` bytes; `error` otherwise. The file is
    opened non-blocking and checked again once open (it may have been swapped for a FIFO
    after the first check), and at most cap + 1 bytes are read (it may grow meanwhile)."""
    path = Path(path)
    check_size(path, cap, error=error, what=what)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise _error(error, f"cannot read it: {exc.strerror or exc}", path) from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _error(error, f"is {kind_of(os.fstat(fd).st_mode)}, not a regular file", path)
        try:
            data = fh.read(cap + 1)
        except OSError as exc:  # e.g. a /proc file with nothing to read yet (EAGAIN), an I/O error
            raise _error(error, f"cannot read it: {exc.strerror or exc}", path) from None
    if len(data) > cap:
        raise _too_big(error, what, len(data), cap, path, at_least=True)
    return data


def check_size(path: Path, cap: int, *, error=SubmissionError, what: str = "file") -> os.stat_result:
    """check_regular, and at most `cap` bytes."""
    st = check_regular(path, error=error)
    if st.st_size > cap:
        raise _too_big(error, what, st.st_size, cap, path)
    return st


def _too_big(error, what: str, size: int, cap: int, path: Path, *, at_least: bool = False) -> RexrankError:
    shown = f"more than {mib(cap)}" if at_least else f"{mib(size)} ({size:,} bytes)"
    return _error(error, f"{what} is {shown}; the limit is {mib(cap)}", path)


def _error(error, message: str, path: Path) -> RexrankError:
    return error(message, source=str(path)) if error is SubmissionError else error(f"{path}: {message}")


def check_json_values(data: bytes, *, source: str, lines: bool = False, limit: int = MAX_JSON_VALUES) -> None:
    """At most `limit` JSON values in `data`, counted before parsing (a JSON parser makes a
    Python object of each: `[{},{},...]` costs ~100 bytes of memory per 3 bytes of file).
    Commas and brackets count the values; only when that bound is over the limit are the
    strings (whose commas are text) taken out and the count made exact. `lines`: JSONL,
    where each line is a value (elsewhere a newline is only layout)."""
    def count(b: bytes) -> int:
        return b.count(b",") + b.count(b"{") + b.count(b"[") + (b.count(b"\n") if lines else 0)

    if count(data) <= limit:
        return
    import re

    bare = re.sub(rb'"[^"\\]*(?:\\.[^"\\]*)*"', b"", data)  # each string, escapes included
    if count(bare) > limit:
        raise SubmissionError(
            f"holds more than {limit:,} JSON values (objects, arrays, numbers, strings); the limit is "
            f"{MAX_ROWS:,} predictions of {limit // MAX_ROWS} values each", source=source)


def jsonl_lines(data: bytes, *, source: str):
    """The lines of a JSONL file, each checked against MAX_LINE_BYTES before it is copied
    out (a 10 MB line is refused without being decoded or parsed)."""
    start = 0
    for lineno in itertools.count(1):
        if start >= len(data):
            return
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end + 1
        if end - start > MAX_LINE_BYTES:
            raise SubmissionError(f"line {lineno} is {end - start:,} bytes, more than a line may hold "
                                  f"({MAX_LINE_BYTES:,}): predictions longer than {MAX_PREDICTION_CHARS} characters "
                                  "are refused (a report is ~1000)", source=source)
        yield data[start:end]
        start = end


def check_rows(n: int, *, source: str, counted: bool = True) -> None:
    """At most MAX_ROWS; `counted`=False when reading stopped at the first row too many."""
    if n > MAX_ROWS:
        raise SubmissionError(f"has more than {MAX_ROWS:,} rows{f' ({n:,})' if counted else ''}; "
                              "the largest test set has 10,000 studies", source=source)


def check_texts(texts: list, ids: list, *, source: str, shown: int = 10) -> None:
    """Characters per prediction and in all predictions (non-strings are left to the
    validator, which names them)."""
    from rexrank.prediction_columns import short_repr

    strings = [(i, t) for i, t in zip(ids, texts) if isinstance(t, str)]
    long = [(i, len(t)) for i, t in strings if len(t) > MAX_PREDICTION_CHARS]
    if long:
        listed = ", ".join(f"{short_repr(i)} ({n} characters)" for i, n in long[:shown])
        more = f", … ({len(long) - shown} more)" if len(long) > shown else ""
        raise SubmissionError(f"{len(long)} predictions are longer than {MAX_PREDICTION_CHARS} characters "
                              f"(a report is ~1000): {listed}{more}", source=source)
    total = sum(len(t) for _, t in strings)
    if total > MAX_TOTAL_CHARS:
        raise SubmissionError(f"the predictions hold {total:,} characters together; the limit is {MAX_TOTAL_CHARS:,}",
                              source=source)


def parquet_columns(path: Path, id_names, text_names, *, source: str):
    """(id column, text column) of a parquet file, after its metadata passed the limits:
    rows (num_rows) and the two columns' decompressed size (a small file can expand to
    millions of rows: an honest bomb is refused before a page is read). The metadata may lie
    (issue 37.1): passing here lets a file be read, counted by `rows_of_batches`, no more."""
    import pyarrow.parquet as pq

    from rexrank.prediction_columns import first_present as _first_present

    footer = _parquet_footer_length(path)
    if footer > MAX_PARQUET_FOOTER:
        raise SubmissionError(f"its metadata is {mib(footer)}; the limit is {mib(MAX_PARQUET_FOOTER)}", source=source)
    try:
        meta = pq.ParquetFile(path).metadata
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... for a damaged file
        raise SubmissionError(f"not a readable parquet file ({type(exc).__name__}: {first_line(exc)})", source=source) from None
    check_rows(meta.num_rows, source=source)
    if meta.num_row_groups > MAX_ROW_GROUPS:
        raise SubmissionError(f"has {meta.num_row_groups:,} row groups; the limit is {MAX_ROW_GROUPS:,}", source=source)
    if meta.num_columns > MAX_CSV_COLUMNS:
        raise SubmissionError(f"has {meta.num_columns:,} columns; the limit is {MAX_CSV_COLUMNS:,}", source=source)
    schema = meta.schema.to_arrow_schema()
    id_col = _first_present(schema.names, id_names, what="id", source=source)
    text_col = _first_present(schema.names, text_names, what="prediction text", source=source)
    check_string_columns(schema, (id_col, text_col), source=source)
    size = 0
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            column = group.column(c)
            if column.path_in_schema in (id_col, text_col):
                size += max(column.total_uncompressed_size, column.total_compressed_size)
    if size > MAX_TABLE_BYTES:
        raise SubmissionError(f"its {id_col!r} and {text_col!r} columns decompress to {mib(size)}; the limit is "
                              f"{mib(MAX_TABLE_BYTES)}", source=source)
    return id_col, text_col


def check_string_columns(schema, names, *, source: str) -> None:
    """The id and prediction columns of a table's schema (pyarrow) hold strings, decided from
    the schema before any data is read: a struct, list or map column keeps its values in
    leaves the size checks of a string column never see (a 48 kB file with a struct
    `prediction` column expands to gigabytes), and binary is not text."""
    import pyarrow as pa

    for name in names:
        kind = schema.field(name).type
        value = kind.value_type if pa.types.is_dictionary(kind) else kind
        is_text = pa.types.is_string(value) or pa.types.is_large_string(value) or (
            hasattr(pa.types, "is_string_view") and pa.types.is_string_view(value))
        if not is_text:
            shown = str(kind) if len(str(kind)) <= 80 else f"{str(kind)[:77]}..."  # a type nested 1,000 deep
            raise SubmissionError(f"column {name!r} holds {shown}, not strings: write the study ids and the "
                                  "predictions as text (a string column each)", source=source)


def _parquet_footer_length(path: Path) -> int:
    """The metadata length a parquet file declares in its last 8 bytes (length, b"PAR1");
    0 when it has no such ending (pyarrow then says it is not parquet)."""
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        if fh.tell() < 8:
            return 0
        fh.seek(-8, os.SEEK_END)
        tail = fh.read(8)
    return int.from_bytes(tail[:4], "little") if tail[4:] == b"PAR1" else 0


# rows decoded at a time from a parquet file: a batch of values of the most a prediction may
# hold (4 bytes x MAX_PREDICTION_CHARS) is 5 MiB, and a dictionary of one long value repeated on
# every row expands 64 times at most before its length is seen
BATCH_ROWS = 64


def rows_of_batches(batches, id_col: str, text_col: str, *, source: str) -> list[tuple]:
    """(id, text, "row N") from Arrow record batches, with the limits counted on what each batch
    really holds once decoded, as it arrives: rows (MAX_ROWS), bytes of a value (at most 4 a
    character of MAX_PREDICTION_CHARS) and of the two columns together (MAX_TABLE_BYTES).
    Reading stops at the first batch past a limit. Nothing the file says about itself (a
    parquet footer's sizes, a page header) counts: a footer that claims 1,000 bytes for 320 MiB
    of zstd strings is stopped after 20 MiB of them. A dictionary column is measured from its
    dictionary's value lengths and its indices, before any value is repeated."""
    rows: list[tuple] = []
    total = 0
    for batch in batches:
        check_rows(len(rows) + batch.num_rows, source=source, counted=False)
        for name in (id_col, text_col):
            longest, size = _value_bytes(batch.column(name))
            if longest > 4 * MAX_PREDICTION_CHARS:  # 4 bytes the most a character takes in UTF-8
                raise SubmissionError(f"column {name!r} holds a value of {longest:,} bytes; the limit is "
                                      f"{MAX_PREDICTION_CHARS:,} characters", source=source)
            total += size
        if total > MAX_TABLE_BYTES:
            raise SubmissionError(f"its {id_col!r} and {text_col!r} columns hold more than {mib(MAX_TABLE_BYTES)} "
                                  f"once decompressed (counted as they are read, after {len(rows) + batch.num_rows:,} "
                                  f"rows); the limit is {mib(MAX_TABLE_BYTES)} (MAX_TABLE_BYTES): keep the id and "
                                  "prediction columns only, and predictions of report length", source=source)
        first = len(rows) + 1
        rows.extend((i, t, f"row {first + n}") for n, (i, t) in
                    enumerate(zip(batch.column(id_col).to_pylist(), batch.column(text_col).to_pylist())))
    return rows


def _value_bytes(array) -> tuple[int, int]:
    """(longest value, all values) of a string array in bytes, a dictionary's as expanded."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values, indices = (array.dictionary, array.indices) if isinstance(array, pa.DictionaryArray) else (array, None)
    lengths = pc.binary_length(values).cast(pa.int64())
    if indices is not None:
        lengths = pc.take(lengths, indices)
    return pc.max(lengths).as_py() or 0, pc.sum(lengths).as_py() or 0


def check_folder(path: Path, *, source: str) -> None:
    """A datasets folder: regular files only (a symlink to /dev/zero inside would never end),
    and at most MAX_TABLE_BYTES in all (its arrow files are uncompressed)."""
    total, count = 0, 0
    try:
        for child in path.rglob("*"):
            count += 1
            if count > 1000:
                raise SubmissionError("holds more than 1,000 files: not a datasets folder", source=source)
            st = check_regular(child, allow_dir=True)
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
    except OSError as exc:  # a sub-folder that cannot be listed
        raise SubmissionError(f"cannot read the folder: {exc.strerror or exc}", source=source) from None
    if total > MAX_TABLE_BYTES:
        raise SubmissionError(f"the folder's files are {mib(total)} together; the limit is {mib(MAX_TABLE_BYTES)}",
                              source=source)
