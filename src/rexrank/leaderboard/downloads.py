"""CSV files for the leaderboard's download buttons.

Each table is written once per distinct content, under a readable file name (the name the
browser saves it as), in one folder per app: sessions never overwrite each other's file.
"""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path

import pandas as pd


class CsvFiles:
    def __init__(self, folder: str | Path | None = None):
        self.folder = Path(folder) if folder else Path(tempfile.mkdtemp(prefix="rexrank-csv-"))

    def write(self, table: pd.DataFrame, name: str) -> str:
        """Path of a CSV file holding `table` (UTF-8, header row, no index), named `name`.csv."""
        data = table.to_csv(index=False).encode("utf-8")
        safe = re.sub(r"[^A-Za-z0-9_.+-]+", "-", name).strip("-.") or "table"
        path = self.folder / hashlib.sha256(data).hexdigest()[:16] / f"{safe}.csv"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            # write then rename: a concurrent request never reads a half-written file
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".part")
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        return str(path)
