"""Peak memory and time of reading a predictions file at and past the input limits
(rexrank.input_limits), against an ordinary 10,000-study submission (issue 20.1).

Each input is read in a fresh process, as `rexrank score` / `submit` / the Submit tab read
it: `rexrank.submissions.load_predictions` against 10,000 test ids, pandas and pyarrow
imported before the clock starts. 'peak' is the process's peak resident memory while it
reads (VmHWM, reset after the imports; getrusage's maximum would carry over from this
parent through exec), the imports' floor included; 'work' is that peak minus the memory
resident after the imports,
'traced' Python's allocations (tracemalloc) plus Arrow's pool; time is the read alone
(the fastest of 5, in turns
with the ordinary submission of the same format, so that other load falls on both alike).

Goal: no input uses more than 2x the memory or time of the ordinary submission; the
nested-column bomb (a struct `prediction` column) is refused from the parquet schema in
<= 0.2 s with no more memory than the ordinary parquet file (issue 28.4).

    python input_limits.py [--keep DIR] [--only TEXT]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rexrank import input_limits as L

N = 10_000
IDS = [f"RG{i:05d}" for i in range(N)]
REPORT = ("The cardiomediastinal silhouette is within normal limits. The lungs are clear without focal "
          "consolidation, pleural effusion or pneumothorax. No acute osseous abnormality. ")  # ~180 characters

CHILD = r"""
import json, sys, time, tracemalloc
import pandas, pyarrow, pyarrow.compute, pyarrow.parquet  # the floor every reader pays, before the clock
from rexrank.errors import RexrankError
from rexrank.submissions import load_predictions
path, ordinary, ids = sys.argv[1], sys.argv[2], [f"RG{i:05d}" for i in range(10_000)]

def status(key):  # kB -> MB; VmHWM is this process's own peak (getrusage's carries over from the parent)
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(key + ":")) / 1024

def read(p):
    try:
        return f"accepted ({len(load_predictions(p, ids))} predictions)"
    except RexrankError as exc:
        return "refused: " + str(exc).split(": ", 1)[-1][:90]

def timed(p):
    t0 = time.perf_counter()
    read(p)
    return time.perf_counter() - t0

floor = status("VmRSS")
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")  # the peak starts again from here
outcome = read(path)
peak = status("VmHWM")
tracemalloc.start()  # one more read, traced: Python's allocations, and Arrow's from its pool
read(path)
traced = tracemalloc.get_traced_memory()[1] / 2**20 + pyarrow.default_memory_pool().max_memory() / 2**20
tracemalloc.stop()
# time: this input and the ordinary submission of its format in turns, the fastest of 5 each, so
# that the machine's other load falls on both alike
mine, theirs = zip(*[(timed(path), timed(ordinary)) for _ in range(5)])
print(json.dumps({"peak_mb": peak, "work_mb": peak - floor, "traced_mb": traced, "seconds": min(mine),
                  "time_ratio": min(mine) / min(theirs), "outcome": outcome}))
"""


def jsonl(path: Path, rows) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for sid, text in rows:
            fh.write(json.dumps({"id": sid, "prediction": text}) + "\n")
    return path


def dictionary_parquet(path: Path, n_rows: int, text: str, *, chunk: int = 1_000_000) -> Path:
    """`n_rows` rows of one id and one text, dictionary-encoded: small on disk, however many."""
    chunk = min(chunk, n_rows)
    zeros = pa.array(np.zeros(chunk, dtype=np.int32))
    table = pa.table({"id": pa.DictionaryArray.from_arrays(zeros, ["RG00000"]),
                      "prediction": pa.DictionaryArray.from_arrays(zeros, [text])})
    with pq.ParquetWriter(path, table.schema, compression="zstd") as writer:
        for start in range(0, n_rows, chunk):
            writer.write_table(table.slice(0, min(chunk, n_rows - start)))
    return path


NESTED_BOMB = "nested-column bomb: struct column, one 50 kB value on 20,000 rows"


def nested_parquet(path: Path, n_rows: int, text: str) -> Path:
    """A `prediction` column that is a struct whose leaf (`prediction.t`) repeats one value:
    under 1 kB on disk, n_rows x len(text) bytes once read (1 GB here)."""
    zeros = pa.array(np.zeros(n_rows, dtype=np.int32))
    leaf = pa.DictionaryArray.from_arrays(zeros, [text])
    pq.write_table(pa.table({"id": pa.DictionaryArray.from_arrays(zeros, ["RG00000"]),
                             "prediction": pa.StructArray.from_arrays([leaf], names=["t"])}), path, compression="zstd")
    return path


def rexrank_json(path: Path, prediction, findings: str) -> Path:
    """The ReXrank submission format: the test JSON (fields as IU-Xray's) plus
    `model_prediction` in each study."""
    doc = {sid: {"image_path": [f"{sid}/0.png", f"{sid}/1.png"], "key_image_path": f"{sid}/0.png", "context": "",
                 "section_findings": findings, "section_impression": "No acute cardiopulmonary process.",
                 "report": f"Findings: {findings} Impression: No acute cardiopulmonary process.", "site": "A",
                 "is_abnormal": False, "frontal_lateral": ["Frontal", "Lateral"], "model_prediction": prediction(i)}
           for i, sid in enumerate(IDS)}
    path.write_text(json.dumps(doc))
    return path


def csv_file(path: Path, rows) -> Path:
    import csv

    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["id", "prediction"])
        writer.writerows(rows)
    return path


def inputs(folder: Path) -> list[tuple[str, str, Path]]:
    """(format whose ordinary submission is the yardstick, label, file)."""
    ordinary = [(sid, f"{REPORT * 5} Study {i}.") for i, sid in enumerate(IDS)]  # ~0.9 kB a report
    full = [(sid, f"{(REPORT * 12)[: L.MAX_TOTAL_CHARS // N - 16]} {i:05d}") for i, sid in enumerate(IDS)]  # all of it
    pq.write_table(pa.table({"id": IDS, "prediction": [t for _, t in ordinary]}), folder / "ordinary.parquet")
    pq.write_table(pa.table({"id": IDS, "prediction": [t for _, t in full]}), folder / "full.parquet")
    zero = folder / "zero.json"
    zero.symlink_to("/dev/zero")
    fifo = folder / "fifo.jsonl"
    os.mkfifo(fifo)
    references = REPORT * 3  # a longer test JSON (~1.4 kB a study): near the byte cap
    return [
        ("json", "ordinary: ReXrank JSON, 10,000 studies, ~0.9 kB predictions",
         rexrank_json(folder / "ordinary.json", lambda i: ordinary[i][1], REPORT * 2)),
        ("jsonl", "ordinary: JSONL", jsonl(folder / "ordinary.jsonl", ordinary)),
        ("csv", "ordinary: CSV", csv_file(folder / "ordinary.csv", ordinary)),
        ("parquet", "ordinary: parquet", folder / "ordinary.parquet"),
        ("json", "at the limits: ReXrank JSON near the byte cap, 1.6 kB predictions (16 M)",
         rexrank_json(folder / "full.json", lambda i: full[i][1], references)),
        ("jsonl", "at the limits: JSONL, 16 M characters", jsonl(folder / "full.jsonl", full)),
        ("csv", "at the limits: CSV, 16 M characters", csv_file(folder / "full.csv", full)),
        ("parquet", "at the limits: parquet, 16 M characters", folder / "full.parquet"),
        ("parquet", "parquet bomb: 20,000,000 rows", dictionary_parquet(folder / "bomb.parquet", 20_000_000, "")),
        ("parquet", "parquet bomb: one 1 MB value on 20,000 rows",
         dictionary_parquet(folder / "dict.parquet", 20_000, "x" * 1_000_000)),
        ("parquet", "parquet: 100,000 empty row groups", _row_groups(folder / "groups.parquet", 100_000)),
        ("parquet", NESTED_BOMB, nested_parquet(folder / "nested.parquet", 20_000, "x" * 50_000)),
        ("jsonl", "10 MB per study, 2 studies (20 MB), JSONL",
         jsonl(folder / "10mb2.jsonl", [(s, "x" * 10_000_000) for s in IDS[:2]])),
        ("jsonl", "10 MB per study, 10 studies (100 MB), JSONL",
         jsonl(folder / "10mb10.jsonl", [(s, "x" * 10_000_000) for s in IDS[:10]])),
        ("jsonl", "row limit + 1: 20,001 rows, JSONL", jsonl(folder / "rows.jsonl", [(f"X{i}", "") for i in range(L.MAX_ROWS + 1)])),
        ("csv", "rows past the limit: 2,500,000 lines of CSV", _csv_rows(folder / "rows.csv", 2_500_000)),
        ("json", "JSON values: [{},{},...] 10,000,000 objects", _json_values(folder / "values.json", 10_000_000)),
        ("json", "/dev/zero (as zero.json)", zero),
        ("jsonl", "a FIFO", fifo),
    ]


def _row_groups(path: Path, n: int) -> Path:
    table = pa.table({"id": ["RG00000"], "prediction": ["x"]}).slice(0, 0)
    with pq.ParquetWriter(path, table.schema) as writer:
        for _ in range(n):
            writer.write_table(table)
    return path


def _csv_rows(path: Path, n: int) -> Path:
    with path.open("w") as fh:
        fh.write("id,prediction\n")
        fh.writelines(f"{i},\n" for i in range(n))
    return path


def _json_values(path: Path, n: int) -> Path:
    path.write_text("[" + ",".join(["{}"] * n) + "]")
    return path


def measure(path: Path, ordinary: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parent.parent / "src"),
                                                        os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", CHILD, str(path), str(ordinary)], capture_output=True, text=True, timeout=600, env=env)
    if done.returncode != 0:
        return {"peak_mb": float("nan"), "work_mb": float("nan"), "traced_mb": float("nan"), "seconds": float("nan"),
                "time_ratio": float("nan"), "outcome": "CRASHED: " + done.stderr.strip()[-200:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", help="build the inputs in this folder (default: a temporary one)")
    parser.add_argument("--only", help="measure only the inputs whose label holds this text (and the ordinary ones)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rexrank-limits-") as tmp:
        folder = Path(args.keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        cases = [case for case in inputs(folder)
                 if not args.only or args.only in case[1] or case[1].startswith("ordinary")]
        print(f"limits: {L.mib(L.MAX_FILE_BYTES)} a JSON file, {L.mib(L.MAX_TABLE_BYTES)} a table, {L.MAX_ROWS:,} rows, {L.MAX_PREDICTION_CHARS:,} characters a "
              f"prediction, {L.MAX_TOTAL_CHARS:,} in all, {L.MAX_JSON_VALUES:,} JSON values", flush=True)
        rows, base = [], {}
        ordinary = {fmt: path for fmt, label, path in cases if label.startswith("ordinary")}
        for i, (fmt, label, path) in enumerate(cases, 1):
            size = path.stat().st_size if path.is_file() and not path.is_symlink() else 0
            figures = measure(path, ordinary[fmt])
            base.setdefault(fmt, figures)  # the first row of each format is its ordinary submission
            rows.append((fmt, label, size, figures))
            print(f"[{i}/{len(cases)}] {label}: peak {figures['peak_mb']:.0f} MB, {figures['seconds']:.2f} s", flush=True)
        print("\npeak: the process's peak resident memory while reading, the imports' floor included; work: that peak "
              "minus the resident memory after the imports; traced: Python's allocations (tracemalloc) + Arrow's "
              "pool; time: the fastest of 5 reads, taken in turns with the ordinary submission's in the same process. "
              "Ratios (x): against the ordinary 10,000-study submission in the same format")
        print(f"{'input':<58} {'file':>7} {'peak':>6} {'x':>5} {'work':>6} {'x':>5} {'traced':>6} {'x':>5} "
              f"{'time':>6} {'x':>5}  outcome")
        worst = {"peak": 0.0, "work": 0.0, "traced": 0.0, "time": 0.0}
        for fmt, label, size, f in rows:
            b = base[fmt]
            ratios = {"peak": f["peak_mb"] / b["peak_mb"], "work": f["work_mb"] / b["work_mb"],
                      "traced": f["traced_mb"] / b["traced_mb"], "time": f["time_ratio"]}
            if not label.startswith("ordinary"):  # the goal is for inputs at and past the limits
                worst = {k: max(worst[k], v) for k, v in ratios.items()}
            print(f"{label[:58]:<58} {size / 2**20:>5.1f}MB {f['peak_mb']:>4.0f}MB {ratios['peak']:>5.2f} "
                  f"{f['work_mb']:>4.0f}MB {ratios['work']:>5.2f} {f['traced_mb']:>4.0f}MB {ratios['traced']:>5.2f} "
                  f"{f['seconds']:>5.2f}s {ratios['time']:>5.2f}  {f['outcome']}")
        nested = next((f for fmt, label, size, f in rows if label == NESTED_BOMB), None)
        if nested is not None:
            b = base["parquet"]
            print(f"\n{NESTED_BOMB}: {nested['outcome'][:60]} in {nested['seconds'] * 1000:.1f} ms (goal <= 200 ms), peak "
                  f"{nested['peak_mb']:.0f} MB against the ordinary parquet file's {b['peak_mb']:.0f} MB "
                  f"({nested['peak_mb'] / b['peak_mb']:.2f}x; work {nested['work_mb']:.1f} MB against "
                  f"{b['work_mb']:.1f} MB, goal <= 1x): "
                  f"{'MET' if nested['seconds'] <= 0.2 and nested['peak_mb'] <= b['peak_mb'] else 'NOT MET'}")
        met = all(v <= 2 for v in worst.values())
        print(f"\nworst input at or past the limits, as a multiple of the ordinary submission: peak {worst['peak']:.2f}x, "
              f"work {worst['work']:.2f}x, traced {worst['traced']:.2f}x, time {worst['time']:.2f}x (goal: <= 2x each): "
              f"{'MET' if met else 'NOT MET'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
