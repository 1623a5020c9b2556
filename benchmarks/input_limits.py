"""Peak memory and time of reading a predictions file at and past the input limits
(rexrank.input_limits), against an ordinary 10,000-study submission (issues 20.1 and 37.1).

Each input is read in a fresh process, as `rexrank score` / `submit` / the Submit tab read it:
`rexrank.submissions.load_predictions` against 10,000 test ids. The file itself is read in a
child process with hard limits (rexrank.sandbox), forked from the reader's server, which is
started (by a first read of a small file) before the clock. Figures:

    parent peak   the reading process's peak resident memory while it reads (VmHWM, reset after
                  the imports and the server's start; getrusage's maximum would carry over from
                  this process through exec): what the Space, the backend or the command line
                  holds;
    parent work   that peak minus the memory resident before the read;
    child peak    the sandbox child's peak resident memory (wait4's ru_maxrss), which counts the
                  server's pages it shares (the imports: the ordinary submission's child peak is
                  mostly them); the child's address space is limited to what it starts with
                  plus rexrank.sandbox.LIMITS.memory_bytes;
    time          the read alone (fork, reading, answer, validation), the fastest of 5, in turns
                  with the ordinary submission of the same format, so that other load falls on
                  both alike.

Goals: for every input, the parent's peak and work at most 2x the ordinary submission's in the
same format (the Space does not grow by more than an ordinary submission's, issue 37.1); inputs
at the limits also in at most 2x the time; the hostile ones refused naming a limit, the child
within its own limits; the nested-column bomb refused from the parquet schema in <= 0.2 s
(issue 28.4). Also the start cost: the server's start (once per process), and what each read
costs over reading in the calling process (a fork, the limits, the answer's frame), against an
interpreter started per read.

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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import forged_parquet as F  # noqa: E402 (the tests' forgeries of parquet footers and page headers)

N = 10_000
IDS = [f"RG{i:05d}" for i in range(N)]
REPORT = ("The cardiomediastinal silhouette is within normal limits. The lungs are clear without focal "
          "consolidation, pleural effusion or pneumothorax. No acute osseous abnormality. ")  # ~180 characters

CHILD = r"""
import json, sys, time
from rexrank import sandbox
from rexrank.errors import RexrankError
from rexrank.submissions import load_predictions
path, ordinary, warm_up, ids = sys.argv[1], sys.argv[2], sys.argv[3], [f"RG{i:05d}" for i in range(10_000)]

def status(key):  # kB -> MB; VmHWM is this process's own peak (getrusage's carries over from the parent)
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(key + ":")) / 1024

def read(p):
    try:
        return f"accepted ({len(load_predictions(p, ids))} predictions)"
    except RexrankError as exc:
        return "refused: " + str(exc).split(": ", 1)[-1][:110]

def timed(p):
    t0 = time.perf_counter()
    read(p)
    return time.perf_counter() - t0

read(warm_up)  # the reader's server starts here, before the clock
floor = status("VmRSS")
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")  # the peak starts again from here
outcome = read(path)
peak = status("VmHWM")
child = sandbox.last_cost()
# time: this input and the ordinary submission of its format in turns, the fastest of 5 each, so
# that the machine's other load falls on both alike
mine, theirs = zip(*[(timed(path), timed(ordinary)) for _ in range(5)])
print(json.dumps({"peak_mb": peak, "work_mb": peak - floor, "child_mb": child.peak_bytes / 2**20 if child else 0.0,
                  "child_cpu": child.cpu_seconds if child else 0.0, "seconds": min(mine),
                  "time_ratio": min(mine) / min(theirs), "outcome": outcome}))
"""

START = r"""
import json, sys, time
from pathlib import Path
from rexrank import sandbox
from rexrank.submissions import read_raw_predictions, read_rows_here
tiny = sys.argv[1]

def fastest(read, n=20):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        read(tiny)
        times.append(time.perf_counter() - t0)
    return min(times)

t0 = time.perf_counter()
read_raw_predictions(tiny)
cold = time.perf_counter() - t0
read_rows_here(tiny, None, None)  # its imports, before the clock
server = Path(f"/proc/{sandbox._current.process.pid}/status").read_text()
rss = next(int(line.split()[1]) for line in server.splitlines() if line.startswith("VmRSS:")) / 1024
print(json.dumps({"cold_s": cold, "sandboxed_ms": 1000 * fastest(read_raw_predictions),
                  "in_process_ms": 1000 * fastest(lambda p: read_rows_here(p, None, None)), "server_mb": rss}))
"""
# what an interpreter started for each read would pay before reading (the readers' imports)
INTERPRETER = "import rexrank.submissions, pyarrow.parquet, pyarrow.compute, pyarrow.ipc, pandas"


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


def datasets_folder(folder: Path, rows, *, compression: str | None = None, batch_rows: int = 1_000) -> Path:
    """A datasets.save_to_disk folder of `rows`, its Arrow stream written again with
    `compression` (zstd: a few kB on disk however much it holds)."""
    import datasets

    datasets.Dataset.from_dict({"id": ["RG00000"], "prediction": ["x"]}).save_to_disk(str(folder))
    [arrow] = folder.glob("*.arrow")
    ids, texts = zip(*rows)
    table = pa.table({"id": list(ids), "prediction": list(texts)})
    options = pa.ipc.IpcWriteOptions(compression=compression)
    with pa.ipc.new_stream(str(arrow), table.schema, options=options) as writer:
        writer.write_table(table, max_chunksize=batch_rows)
    return folder


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
    page = 256 << 20
    return [
        ("json", "ordinary: ReXrank JSON, 10,000 studies, ~0.9 kB predictions",
         rexrank_json(folder / "ordinary.json", lambda i: ordinary[i][1], REPORT * 2)),
        ("jsonl", "ordinary: JSONL", jsonl(folder / "ordinary.jsonl", ordinary)),
        ("csv", "ordinary: CSV", csv_file(folder / "ordinary.csv", ordinary)),
        ("parquet", "ordinary: parquet", folder / "ordinary.parquet"),
        ("folder", "ordinary: datasets folder", datasets_folder(folder / "ordinary-folder", ordinary)),
        ("json", "at the limits: ReXrank JSON near the byte cap, 1.6 kB predictions (16 M)",
         rexrank_json(folder / "full.json", lambda i: full[i][1], references)),
        ("jsonl", "at the limits: JSONL, 16 M characters", jsonl(folder / "full.jsonl", full)),
        ("csv", "at the limits: CSV, 16 M characters", csv_file(folder / "full.csv", full)),
        ("parquet", "at the limits: parquet, 16 M characters", folder / "full.parquet"),
        ("folder", "at the limits: datasets folder, 16 M characters", datasets_folder(folder / "full-folder", full)),
        ("parquet", "parquet bomb: 20,000,000 rows", dictionary_parquet(folder / "bomb.parquet", 20_000_000, "")),
        ("parquet", "parquet bomb: one 1 MB value on 20,000 rows",
         dictionary_parquet(folder / "dict.parquet", 20_000, "x" * 1_000_000)),
        ("parquet", "parquet: 100,000 empty row groups", _row_groups(folder / "groups.parquet", 100_000)),
        ("parquet", NESTED_BOMB, nested_parquet(folder / "nested.parquet", 20_000, "x" * 50_000)),
        ("parquet", FORGED_FOOTER, F.forge_footer(F.strings_parquet(folder / "footer.parquet", 20_000, "x" * 16_000))),
        ("parquet", "forged page headers: 16 MB pages that claim 1,000 bytes",
         F.forge_page_headers(F.forge_footer(F.strings_parquet(folder / "pages.parquet", 2_000, "x" * 16_000)), 1_000)),
        ("parquet", "forged page header: a 256 MiB page that claims 2 GiB",
         F.forge_page_headers(F.forge_footer(F.strings_parquet(folder / "claims.parquet", 1, "x" * page)), 2**31 - 1)),
        ("parquet", "huge single page: one 256 MiB string",
         F.forge_footer(F.strings_parquet(folder / "page256.parquet", 1, "x" * page))),
        ("parquet", "huge single page: one 512 MiB string",
         F.forge_footer(F.strings_parquet(folder / "page512.parquet", 1, "x" * (2 * page)))),
        ("folder", "datasets folder: 320 MiB of zstd record batches",
         datasets_folder(folder / "bomb-folder", [(s, "x" * 16_000) for s in IDS] * 2, compression="zstd")),
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


FORGED_FOOTER = "forged footer: 320 MiB of zstd strings, the footer claims 1,000 bytes"


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


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parent.parent / "src"),
                                                         os.environ.get("PYTHONPATH", "")])}


def measure(path: Path, ordinary: Path, warm_up: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, str(path), str(ordinary), str(warm_up)], capture_output=True,
                          text=True, timeout=900, env=_env())
    if done.returncode != 0:
        return {"peak_mb": float("nan"), "work_mb": float("nan"), "child_mb": float("nan"), "child_cpu": float("nan"),
                "seconds": float("nan"), "time_ratio": float("nan"), "outcome": "CRASHED: " + done.stderr.strip()[-200:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def start_cost(tiny: Path) -> None:
    """The reader's server start, a sandboxed read against one in the calling process, and an
    interpreter started for each read (what the server saves)."""
    import time

    done = subprocess.run([sys.executable, "-c", START, str(tiny)], capture_output=True, text=True, timeout=600,
                          env=_env(), check=True)
    cost = json.loads(done.stdout.strip().splitlines()[-1])
    starts = []
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", INTERPRETER], check=True, env=_env())
        starts.append(time.perf_counter() - t0)
    print(f"\nstart cost: the reader's server starts once per process in {cost['cold_s']:.2f} s (its first read "
          f"included) and holds {cost['server_mb']:.0f} MB; then a read of a 2-study CSV takes "
          f"{cost['sandboxed_ms']:.1f} ms against {cost['in_process_ms']:.1f} ms in the calling process "
          f"(+{cost['sandboxed_ms'] - cost['in_process_ms']:.1f} ms: fork, limits, answer); an interpreter started "
          f"for each read would pay {min(starts):.2f} s for the readers' imports alone", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", help="build the inputs in this folder (default: a temporary one)")
    parser.add_argument("--only", help="measure only the inputs whose label holds this text (and the ordinary ones)")
    args = parser.parse_args()
    from rexrank.sandbox import LIMITS

    with tempfile.TemporaryDirectory(prefix="rexrank-limits-") as tmp:
        folder = Path(args.keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        cases = [case for case in inputs(folder)
                 if not args.only or args.only in case[1] or case[1].startswith("ordinary")]
        tiny = csv_file(folder / "tiny.csv", [(IDS[0], REPORT), (IDS[1], REPORT)])
        print(f"limits: {L.mib(L.MAX_FILE_BYTES)} a JSON file, {L.mib(L.MAX_TABLE_BYTES)} a table, {L.MAX_ROWS:,} rows, "
              f"{L.MAX_PREDICTION_CHARS:,} characters a prediction, {L.MAX_TOTAL_CHARS:,} in all, "
              f"{L.MAX_JSON_VALUES:,} JSON values; the reader's child: {LIMITS.memory_bytes / 2**20:,.0f} MiB of "
              f"address space over its start, {LIMITS.cpu_seconds} s of CPU, {LIMITS.wall_seconds:g} s", flush=True)
        start_cost(tiny)
        rows, base = [], {}
        ordinary = {fmt: path for fmt, label, path in cases if label.startswith("ordinary")}
        for i, (fmt, label, path) in enumerate(cases, 1):
            size = _size(path)
            figures = measure(path, ordinary[fmt], tiny)
            base.setdefault(fmt, figures)  # the first row of each format is its ordinary submission
            rows.append((fmt, label, size, figures))
            print(f"[{i}/{len(cases)}] {label}: parent peak {figures['peak_mb']:.0f} MB, child peak "
                  f"{figures['child_mb']:.0f} MB, {figures['seconds']:.2f} s", flush=True)
        print("\nparent: the reading process's peak resident memory while reading, and that peak less what it held "
              "before (work); child: the sandbox child's peak resident memory, the server's shared pages included; "
              "time: the fastest of 5 reads, taken in turns with the ordinary submission's in the same process. "
              "Ratios (x): against the ordinary 10,000-study submission in the same format")
        print(f"{'input':<62} {'file':>7} {'parent':>6} {'x':>5} {'work':>6} {'x':>5} {'child':>6} {'x':>5} "
              f"{'time':>6} {'x':>5}  outcome")
        worst = {"parent": 0.0, "work": 0.0, "child": 0.0, "time at the limits": 0.0}
        for fmt, label, size, f in rows:
            b = base[fmt]
            ratios = {"parent": f["peak_mb"] / b["peak_mb"], "work": f["work_mb"] / max(b["work_mb"], 1.0),
                      "child": f["child_mb"] / b["child_mb"], "time": f["time_ratio"]}
            if not label.startswith("ordinary"):  # the goals are for inputs at and past the limits
                worst["parent"] = max(worst["parent"], ratios["parent"])
                worst["work"] = max(worst["work"], ratios["work"])
                worst["child"] = max(worst["child"], ratios["child"])
                if label.startswith("at the limits"):
                    worst["time at the limits"] = max(worst["time at the limits"], ratios["time"])
            print(f"{label[:62]:<62} {size / 2**20:>5.1f}MB {f['peak_mb']:>4.0f}MB {ratios['parent']:>5.2f} "
                  f"{f['work_mb']:>4.0f}MB {ratios['work']:>5.2f} {f['child_mb']:>4.0f}MB {ratios['child']:>5.2f} "
                  f"{f['seconds']:>5.2f}s {ratios['time']:>5.2f}  {f['outcome']}")
        found = {label: f for fmt, label, size, f in rows}
        b = base.get("parquet")
        if NESTED_BOMB in found:
            nested = found[NESTED_BOMB]
            print(f"\n{NESTED_BOMB}: {nested['outcome'][:60]} in {nested['seconds'] * 1000:.1f} ms (goal <= 200 ms), "
                  f"parent peak {nested['peak_mb']:.0f} MB against the ordinary parquet file's {b['peak_mb']:.0f} MB: "
                  f"{'MET' if nested['seconds'] <= 0.2 and nested['peak_mb'] <= b['peak_mb'] else 'NOT MET'}")
        if FORGED_FOOTER in found:
            footer = found[FORGED_FOOTER]
            print(f"\n{FORGED_FOOTER}: {footer['outcome'][:70]}; the parent grew {footer['work_mb']:.1f} MB (the "
                  f"ordinary parquet file: {b['work_mb']:.1f} MB), the child peaked at {footer['child_mb']:.0f} MB "
                  f"(ordinary: {b['child_mb']:.0f} MB) in {footer['seconds']:.2f} s")
        hostile = [(label, f) for fmt, label, size, f in rows
                   if not label.startswith(("ordinary", "at the limits"))]
        unnamed = [label for label, f in hostile if not f["outcome"].startswith("refused")]
        met = worst["parent"] <= 2 and worst["work"] <= 2 and worst["time at the limits"] <= 2 and not unnamed
        print(f"\nworst input at or past the limits, as a multiple of the ordinary submission: parent peak "
              f"{worst['parent']:.2f}x, parent work {worst['work']:.2f}x (goal: <= 2x each), child peak "
              f"{worst['child']:.2f}x (bounded by the child's limit instead), time at the limits "
              f"{worst['time at the limits']:.2f}x (goal: <= 2x); hostile inputs not refused: "
              f"{', '.join(unnamed) or 'none'}: {'MET' if met else 'NOT MET'}")
    return 0


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size if path.is_file() and not path.is_symlink() else 0


if __name__ == "__main__":
    sys.exit(main())
