"""The published ReXrank tables (gh-pages `results/*.csv`) as rexrank result records.

The CSVs hold one row per model: Rank, Date, Model Name, Institution, Model URL and the
eight leaderboard columns (display names in `results_schema.LEADERBOARD_COLUMNS`). They
carry only system-level means: no per-study data, no confidence intervals.

Source: rajpurkarlab/ReXrank, branch gh-pages, `results/` (MIT licence), 2025-09 snapshot.
The converted records ship as `rexrank/data/published_results.json` (leaderboard numbers,
no report text) and seed an empty default store.
"""
from __future__ import annotations

import csv
import json
import math
import re
from importlib import resources
from pathlib import Path

from rexrank.errors import RexrankError
from rexrank.results_schema import LEADERBOARD_COLUMNS, PUBLISHED_FILES

SEED_FILE = "published_results.json"
SOURCE = {
    "repository": "https://github.com/rajpurkarlab/ReXrank",
    "branch": "gh-pages",
    "path": "results/",
    "licence": "MIT",
    "snapshot": "2025-09",
}
ID_FIELDS = ("Rank", "Date", "Model Name", "Institution", "Model URL")
INVERSE_KEYS = {"radcliq_v1_inv", "fineradscore_inv"}

# "Trained on this test set's training split". The current published CSVs carry no marker;
# older ReXrank tables marked such models with "*" ("* denotes the model used the training
# set"): history main@8152f99 result_mimic-cxr.csv and result_iu_xray@54f5fcc. Models
# added later are marked only where their published name states the training data
# (-IU, -MIMIC, -CheX); every other model is left unmarked (unknown, not "no").
TRAINED_ON: dict[str, tuple[str, ...]] = {
    # "*" in the 2024 MIMIC-CXR table
    "CheXagent": ("mimic_cxr",),
    "CheXpertPlus-MIMIC": ("mimic_cxr",),
    "Cvt2distilgpt2-MIMIC": ("mimic_cxr",),
    "MedVersa": ("mimic_cxr",),
    "RadFM": ("mimic_cxr",),
    "RaDialog": ("mimic_cxr",),
    "RGRG": ("mimic_cxr",),
    "VLCI-MIMIC": ("mimic_cxr",),
    "LLM-CXR": ("mimic_cxr",),
    # "*" in the 2024 IU-Xray table
    "Cvt2distilgpt2-IU": ("iu_xray",),
    "VLCI-IU": ("iu_xray",),
    "BiomedGPT-IU": ("iu_xray",),
    # named after their training data
    "CheXpertPlus-CheX": ("chexpert_plus",),
    "CheXpertPlus-CheX-MIMIC": ("chexpert_plus", "mimic_cxr"),
    "MoERad-IU": ("iu_xray",),
    "MoERad-MIMIC": ("mimic_cxr",),
}

_BY_DISPLAY = {c.display: c for c in LEADERBOARD_COLUMNS if not c.optional}  # ReXrank publishes no optional column


def canonical_model_name(name: str) -> str:
    """One name per model across tables: the findings+impression CheXpert Plus table spells
    `CheXpertPlus_MIMIC` what every other table spells `CheXpertPlus-MIMIC`."""
    return name.strip().replace("_", "-")


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def record_id(source: str, test_set: str, track: str, model_name: str) -> str:
    return f"{source}/{test_set}/{track}/{slug(model_name)}"


def _parse_value(text: str, *, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise RexrankError(f"{where}: {text!r} is not a number") from None
    if not math.isfinite(value):
        raise RexrankError(f"{where}: {text!r} is not a finite number")
    return value


def read_published_csv(path: str | Path) -> list[dict]:
    """One published table -> result records (source "published"), in the file's row order.

    A trailing cell left out (the UniRG-CXR rows have no 1/FineRadScore) and a 0 in a 1/x
    column (impossible for a reciprocal: the site's placeholder for "not computed") become
    a missing value, listed in the record's provenance; anything else malformed is an error
    naming the file, line and column.
    """
    path = Path(path)
    stem = path.stem
    if stem not in PUBLISHED_FILES:
        known = ", ".join(f"{s}.csv" for s in PUBLISHED_FILES)
        raise RexrankError(f"{path}: not a known published ReXrank table (expected one of {known})")
    test_set, track = PUBLISHED_FILES[stem]
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    if not rows:
        raise RexrankError(f"{path}: empty file")
    header = [h.strip() for h in rows[0]]
    missing_fields = [h for h in ID_FIELDS if h not in header]
    if missing_fields:
        raise RexrankError(f"{path}: header lacks {', '.join(missing_fields)} (header: {header})")
    unknown = [h for h in header if h not in ID_FIELDS and h not in _BY_DISPLAY]
    if unknown:
        raise RexrankError(
            f"{path}: unknown column(s) {unknown}; known metric columns: {list(_BY_DISPLAY)}"
        )
    records: list[dict] = []
    seen: dict[str, int] = {}
    for line_no, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) > len(header):
            raise RexrankError(f"{path}:{line_no}: {len(row)} cells but the header has {len(header)}")
        cells = dict(zip(header, (c.strip() for c in row)))
        published_name = cells.get("Model Name", "")
        if not published_name:
            raise RexrankError(f"{path}:{line_no}: empty Model Name")
        name = canonical_model_name(published_name)
        if name in seen:
            raise RexrankError(f"{path}:{line_no}: model {name!r} already listed on line {seen[name]}")
        seen[name] = line_no
        values: dict[str, dict] = {}
        not_reported: dict[str, str] = {}
        for display, column in _BY_DISPLAY.items():
            if display not in header:
                not_reported[column.key] = "column absent from the published table"
                continue
            text = cells.get(display)
            if text is None or text == "":
                not_reported[column.key] = "cell empty or missing in the published table"
                continue
            value = _parse_value(text, where=f"{path}:{line_no} column {display!r}")
            if column.key in INVERSE_KEYS and value == 0:
                not_reported[column.key] = "published as 0, which a reciprocal cannot be (not computed)"
                continue
            values[column.key] = {"mean": value, "ci95": None, "n": None}
        records.append(
            {
                "id": record_id("published", test_set, track, name),
                "model_name": name,
                "institution": cells.get("Institution", ""),
                "model_url": cells.get("Model URL", ""),
                "submitter": "ReXrank (published)",
                "date": cells.get("Date", ""),
                "test_set": test_set,
                "track": track,
                "source": "published",
                "trained_on": list(TRAINED_ON.get(name, ())),
                "per_study_available": False,
                "values": values,
                "provenance": {
                    **SOURCE,
                    "file": path.name,
                    "line": line_no,
                    "published_name": published_name,
                    "published_rank": cells.get("Rank", ""),
                    "not_reported": not_reported,
                    "trained_on_source": "ReXrank '*' marker or model name" if name in TRAINED_ON else "unknown",
                },
            }
        )
    return records


def read_published_dir(directory: str | Path) -> tuple[list[dict], list[Path]]:
    """All known published tables in `directory` -> (records, other CSV files not imported)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise RexrankError(f"{directory}: not a folder (give the folder holding the published ReXrank CSVs)")
    csvs = sorted(directory.glob("*.csv"))
    known = [p for p in csvs if p.stem in PUBLISHED_FILES]
    others = [p for p in csvs if p.stem not in PUBLISHED_FILES]
    if not known:
        names = ", ".join(f"{s}.csv" for s in PUBLISHED_FILES)
        raise RexrankError(f"{directory}: no published ReXrank table found (looked for {names})")
    records: list[dict] = []
    for path in known:
        records.extend(read_published_csv(path))
    return records, others


def seed_document(records: list[dict]) -> dict:
    return {
        "description": "Published ReXrank leaderboard (system-level means; no per-study data, no CIs)",
        "source": SOURCE,
        "records": records,
    }


def write_seed(directory: str | Path, out: str | Path) -> int:
    """Convert the published folder into the seed file shipped in rexrank.data."""
    records, _ = read_published_dir(directory)
    doc = seed_document(records)
    # one record per line: compact, and a changed number shows as a one-line diff
    head = {k: v for k, v in doc.items() if k != "records"}
    text = json.dumps(head, ensure_ascii=False)[:-1] + ', "records": [\n'
    text += ",\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n]}\n"
    Path(out).write_text(text, encoding="utf-8")
    return len(records)


def load_seed_records() -> list[dict]:
    """The shipped published results (rexrank/data/published_results.json)."""
    text = resources.files("rexrank.data").joinpath(SEED_FILE).read_text(encoding="utf-8")
    return json.loads(text)["records"]


if __name__ == "__main__":  # regenerate the seed: python -m rexrank.leaderboard.published DIR OUT
    import sys

    print(write_seed(sys.argv[1], sys.argv[2]), "records written")
