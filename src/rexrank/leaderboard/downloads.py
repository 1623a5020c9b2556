"""CSV files for the leaderboard's download buttons.

Each table is written once per distinct content, under a readable file name (the name the
browser saves it as), in one folder per app: sessions never overwrite each other's file.
At most `keep` files are kept: writing one more removes the least recently served (every
distinct search makes its own files, so without a bound they would fill the disk).

Text cells that a spreadsheet would run as a formula (they begin with = + - @, a tab or a
carriage return) are written with a leading ' (OWASP's rule for CSV injection); numeric
columns are written as numbers (a negative BERTScore stays a number).
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from rexrank.store.names import FORMULA_START

KEEP_FILES = 256


def escape_formulas(table: pd.DataFrame) -> pd.DataFrame:
    """`table` with every text cell that begins like a formula prefixed with '."""
    out = table.copy()
    for column in out.columns:
        if out[column].dtype == object or pd.api.types.is_string_dtype(out[column].dtype):
            out[column] = out[column].map(lambda v: "'" + v if isinstance(v, str) and v.startswith(FORMULA_START) else v)
    out.columns = [("'" + c if isinstance(c, str) and c.startswith(FORMULA_START) else c) for c in out.columns]
    return out


@dataclass(frozen=True)
class PreparedCsv:
    data: bytes
    path: Path


class CsvFiles:
    def __init__(self, folder: str | Path | None = None, *, keep: int | None = None):
        self.folder = Path(folder) if folder else Path(tempfile.mkdtemp(prefix="rexrank-csv-"))
        self.keep = KEEP_FILES if keep is None else keep
        self._lock = threading.Lock()

    def write(self, table: pd.DataFrame, name: str) -> str:
        """Path of a CSV file holding `table` (UTF-8, header row, no index), named `name`.csv."""
        return self.write_prepared(self.prepare(table, name))

    def prepare(self, table: pd.DataFrame, name: str) -> "PreparedCsv":
        """The file's bytes and path, not yet written: what a cached view keeps, so that a
        page load only checks that the file is still there (`write_prepared`)."""
        data = escape_formulas(table).to_csv(index=False).encode("utf-8")
        safe = re.sub(r"[^A-Za-z0-9_.+-]+", "-", name).strip("-.") or "table"
        return PreparedCsv(data, self.folder / hashlib.sha256(data + b"\x00" + safe.encode()).hexdigest()[:16] / f"{safe}.csv")

    def write_prepared(self, prepared: "PreparedCsv") -> str:
        data, path = prepared.data, prepared.path
        with self._lock:
            if path.exists():
                os.utime(path.parent)  # served again: the most recently used
                return str(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            # write then rename: a concurrent request never reads a half-written file
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".part")
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
            self._prune(keep_also=path.parent)
        return str(path)

    def _prune(self, *, keep_also: Path) -> None:
        folders = [p for p in self.folder.iterdir() if p.is_dir() and p != keep_also]
        excess = len(folders) + 1 - self.keep
        if excess > 0:
            for old in sorted(folders, key=lambda p: p.stat().st_mtime_ns)[:excess]:
                shutil.rmtree(old, ignore_errors=True)

    def count(self) -> int:
        """How many files are kept now."""
        return sum(1 for p in self.folder.iterdir() if p.is_dir())
