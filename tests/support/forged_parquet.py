"""Parquet files that lie about themselves (issue 37.1), for the tests and
benchmarks/input_limits.py: a footer whose sizes are forged small, page headers whose sizes are
forged, and single data pages of one huge string.

A parquet footer and its page headers are Thrift compact-protocol structs, where an integer is
a zigzag varint (parquet-format's parquet.thrift: ColumnMetaData field 6 is
total_uncompressed_size, RowGroup field 2 total_byte_size, PageHeader field 2
uncompressed_page_size). A varint may carry redundant continuation bytes (0x80 ... 0x00) and
still decode to the same number, so a size is rewritten in place with a number of no more
varint bytes than the original's, and every offset in the file stays valid.
"""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

_I32, _I64 = 5, 6  # compact-protocol field types


def zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def padded_varint(n: int, length: int) -> bytes:
    """`n` as a varint of exactly `length` bytes (redundant continuation bytes)."""
    out = bytearray()
    for i in range(length):
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if i < length - 1 else 0))
    if n:
        raise ValueError(f"does not fit in {length} varint bytes")
    return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _skip(data: bytes, pos: int, kind: int) -> int:
    """Past one compact-protocol value of type `kind` at `pos`."""
    if kind in (1, 2):  # a boolean field: its value is in the type
        return pos
    if kind == 3:
        return pos + 1
    if kind in (4, 5, 6):
        return _read_varint(data, pos)[1]
    if kind == 7:
        return pos + 8
    if kind == 8:
        size, pos = _read_varint(data, pos)
        return pos + size
    if kind in (9, 10):
        head = data[pos]
        pos += 1
        size, element = head >> 4, head & 0x0F
        if size == 15:
            size, pos = _read_varint(data, pos)
        for _ in range(size):
            pos = pos + 1 if element in (1, 2) else _skip(data, pos, element)
        return pos
    if kind == 11:
        size, pos = _read_varint(data, pos)
        if size:
            key, value = data[pos] >> 4, data[pos] & 0x0F
            pos += 1
            for _ in range(size):
                pos = _skip(data, _skip(data, pos, key), value)
        return pos
    if kind == 12:
        return _struct_fields(data, pos)[1]
    raise ValueError(f"compact-protocol type {kind} at {pos}")


def _struct_fields(data: bytes, pos: int) -> tuple[dict[int, tuple[int, int]], int]:
    """{field id: (type, where its value starts)} of the struct at `pos`, and where it ends."""
    fields, last = {}, 0
    while True:
        head = data[pos]
        pos += 1
        if head == 0:
            return fields, pos
        delta, kind = head >> 4, head & 0x0F
        if delta:
            field = last + delta
        else:
            raw, pos = _read_varint(data, pos)
            field = (raw >> 1) ^ -(raw & 1)
        fields[field] = (kind, pos)
        pos = _skip(data, pos, kind)
        last = field


def _rewrite(data: bytearray, pos: int, value: int) -> None:
    """The varint at `pos` rewritten as `value`, in as many bytes as it had."""
    _, end = _read_varint(data, pos)
    data[pos:end] = padded_varint(zigzag(value), end - pos)


def strings_parquet(path: Path, n_rows: int, value: str, *, data_page_size: int = 1024 * 1024,
                    level: int = 3) -> Path:
    """`n_rows` rows of `value`, each made distinct by its row number in its first characters
    (a reader that reads into a dictionary keeps each of them), ids S00000, ...; plainly
    encoded (no dictionary) in zstd data pages of about `data_page_size` bytes: a value longer
    than a page is a page of its own. No statistics, which would copy values into the footer."""
    values = [f"{i:05d}{value[5:]}" if len(value) > 5 else value for i in range(n_rows)]
    table = pa.table({"id": [f"S{i:05d}" for i in range(n_rows)], "prediction": values})
    pq.write_table(table, path, compression="zstd", compression_level=level, use_dictionary=False,
                   write_statistics=False, data_page_size=data_page_size)
    return path


def _sizes(meta) -> list[int]:
    return [meta.row_group(g).column(c).total_uncompressed_size
            for g in range(meta.num_row_groups) for c in range(meta.num_columns)]


def forge_footer(path: Path, claimed: int = 1_000) -> Path:
    """Each column chunk's total_uncompressed_size, and each row group's total_byte_size, that
    is over `claimed` rewritten to `claimed` (what a reader that trusts the footer believes it
    will decompress)."""
    meta = pq.ParquetFile(path).metadata
    real = set(_sizes(meta)) | {meta.row_group(g).total_byte_size for g in range(meta.num_row_groups)}
    real = {size for size in real if size > claimed}
    data = bytearray(path.read_bytes())
    footer_start = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    for size in sorted(real, reverse=True):
        pattern = bytes([0x10 | _I64]) + varint(zigzag(size))  # an i64 field one after the previous
        at = data.find(pattern, footer_start)
        while at >= 0:
            _rewrite(data, at + 1, claimed)
            at = data.find(pattern, at + len(pattern))
    path.write_bytes(bytes(data))
    assert max(_sizes(pq.ParquetFile(path).metadata)) <= claimed, "the footer was not forged"
    return path


def page_headers(path: Path, column: str = "prediction") -> list[dict]:
    """The data and dictionary pages of `column`'s chunks: where each header's
    uncompressed_page_size varint is, and its sizes."""
    meta = pq.ParquetFile(path).metadata
    data = path.read_bytes()
    pages = []
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        chunk = next(group.column(c) for c in range(group.num_columns) if group.column(c).path_in_schema == column)
        pos = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
        end = pos + chunk.total_compressed_size
        while pos < end:
            fields, body = _struct_fields(data, pos)
            uncompressed_at = fields[2][1]
            uncompressed = _read_varint(data, uncompressed_at)[0] >> 1
            compressed = _read_varint(data, fields[3][1])[0] >> 1
            pages.append({"uncompressed_at": uncompressed_at, "uncompressed": uncompressed, "compressed": compressed})
            pos = body + compressed
    return pages


def forge_page_headers(path: Path, claimed: int, column: str = "prediction") -> Path:
    """Every page of `column` claims `claimed` uncompressed bytes (it must fit the varint bytes
    of each page's real size: up to 2**27 - 1 for a page under 128 MiB, 2**31 - 1 past it)."""
    data = bytearray(path.read_bytes())
    for page in page_headers(path, column):
        _rewrite(data, page["uncompressed_at"], claimed)
    path.write_bytes(bytes(data))
    return path
