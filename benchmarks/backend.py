"""Backend cost per request, and its independence of the store's history.

For each store (a local folder; hf://bench on the fake Hub of the tests, served from a
child process) and each history size (settled requests and their result records, written
in the earlier layout, so the store's one-off move to the current layout is timed too):

- claim: a poll of an empty queue, and a claim that takes a request (median of --claims),
  and the files it reads and lists (figures the machine's load cannot change);
  beside them, in the same run, reading every request of the history (`list_requests`,
  what each claim cost before the queue was split), as a reference;
- submit: filing one request (validation and the submission rules);
- N bleu2-only requests scored by a worker on a synthetic IU-Xray-sized test set (590
  studies): requests per minute, and the overhead per request: its wall time minus the
  time inside the metric (claim, rules, predictions, test set, result, settling), and the
  most files one request read and listed. The first request (imports, test set load) is
  reported apart.

Goals (issue 15): overhead <= 20 ms after the first request; claim <= 10 ms at 8,000.
Run: python benchmarks/backend.py [--requests 20] [--history 100,2000,8000] [--stores local,hub]
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from stores import FileCounter, add_history, open_bench_store, quiet_logs, run_grid, timed
from synthetic_reports import synthetic_reports

N_STUDIES = 590
OVERHEAD_GOAL_MS = 20.0
CLAIM_GOAL_MS = 10.0


def synthetic_test_set(folder: Path) -> list[str]:
    """An IU-Xray-sized test set (synthetic texts) in ReXrank format; returns its ids."""
    findings = synthetic_reports(N_STUDIES, seed=1)
    impressions = synthetic_reports(N_STUDIES, seed=2)
    ids = [f"bench-{i:04d}" for i in range(N_STUDIES)]
    doc = {sid: {"image_path": [f"{sid}.png"], "frontal_lateral": ["Frontal"], "key_image_path": f"{sid}.png",
                 "context": "", "section_findings": f, "section_impression": i, "split": "test"}
           for sid, f, i in zip(ids, findings, impressions)}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ReXRank_IUXray_test.json").write_text(json.dumps(doc))
    return ids


def predictions_file(folder: Path, ids: list[str], n: int) -> Path:
    texts = synthetic_reports(len(ids), seed=100 + n)
    path = folder / f"predictions-{n}.jsonl"
    path.write_text("".join(json.dumps({"id": i, "prediction": t}) + "\n" for i, t in zip(ids, texts)))
    return path


def submit(store, data_dir: Path, ids: list[str], n: int) -> dict:
    return store.submit(test_set="iu_xray", track="findings", predictions=predictions_file(data_dir, ids, n),
                        model_name=f"bench-model-{n}", submitter="bench", data_dir=data_dir)


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def run_store(kind: str, history: int, args, hub_url: str | None, counter: list[int]) -> dict:
    from rexrank.backend.worker import Worker

    store = open_bench_store(kind, f"bench{history}", hub_url, args.local_dir)
    add_history(store, history)
    data_dir = Path(tempfile.mkdtemp(prefix="rexrank-bench-data-"))
    ids = synthetic_test_set(data_dir)
    out = {"store": kind, "history": history}
    out["move_s"], _ = timed(store.claim, "bench", lease_seconds=600)  # the one-off move to the current layout

    def next_n() -> int:
        counter[0] += 1
        return counter[0]

    worker = Worker(store, data_dir=data_dir, metrics="bleu2", worker_id="bench")
    submit(store, data_dir, ids, next_n())
    out["first_s"], _ = timed(worker.process_next)  # imports, test set load, the results index
    files = FileCounter(store)
    submits, walls, metric_s, touched = [], [], [], []
    for _ in range(args.requests):
        t, _ = timed(submit, store, data_dir, ids, next_n())
        submits.append(t)
        files.take()
        t, request = timed(worker.process_next)
        touched.append(files.take())
        assert request["status"] == "FINISHED", request.get("error")
        record = store.get_result(request["id"], test_set="iu_xray", track="findings")
        walls.append(t)
        metric_s.append(record["summaries"]["bleu2"]["seconds"])
    polls, takes, claim_files = [], [], []
    for _ in range(args.claims):
        polls.append(timed(store.claim, "bench", lease_seconds=600)[0])
        req = submit(store, data_dir, ids, next_n())
        files.take()
        t, claimed = timed(store.claim, "bench", lease_seconds=600)
        claim_files.append(files.take())
        assert claimed["id"] == req["id"]
        takes.append(t)
        store.fail(req["id"], "bench", error="benchmark: claimed only", kind="cancelled")
    out["list_requests_ms"] = timed(store.list_requests)[0] * 1000
    out["poll_ms"], out["claim_ms"] = median_ms(polls), median_ms(takes)
    out["submit_ms"] = median_ms(submits)
    out["request_ms"] = statistics.mean(walls) * 1000
    out["overhead_ms"] = statistics.median([w - m for w, m in zip(walls, metric_s)]) * 1000
    out["metric_ms"] = statistics.median(metric_s) * 1000
    out["per_minute"] = 60 / statistics.mean(walls)
    out["request_files"] = max(touched)  # (read, listed): the most any request needed
    out["claim_files"] = max(claim_files)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20, help="bleu2 requests scored per store and history size")
    parser.add_argument("--claims", type=int, default=15, help="claims timed per store and history size")
    parser.add_argument("--history", default="100,2000,8000", help="history sizes (settled requests)")
    parser.add_argument("--stores", default="local,hub", help="local, hub or both")
    parser.add_argument("--local-dir", default=None,
                        help="where local stores are made (default: the temporary folder; /dev/shm for a RAM disk, "
                        "which takes the disk's own latency out of the figures)")
    args = parser.parse_args()
    quiet_logs()
    sizes = [int(x) for x in args.history.split(",")]
    kinds = [k.strip() for k in args.stores.split(",")]
    counter = [0]

    def describe(r: dict) -> str:
        return (f"{r['store']:5s} history {r['history']:5d}: claim {r['claim_ms']:6.1f} ms (poll {r['poll_ms']:5.1f}; reading "
                f"every request {r['list_requests_ms']:7.1f}), submit {r['submit_ms']:6.1f} ms, request {r['request_ms']:6.1f} "
                f"ms = bleu2 {r['metric_ms']:5.1f} + overhead {r['overhead_ms']:5.1f} ms, {r['per_minute']:5.0f} requests/min "
                f"(first {r['first_s']:.2f} s; move to layout {r['move_s']:.2f} s once); files read/listed: claim "
                f"{r['claim_files'][0]}/{r['claim_files'][1]}, request {r['request_files'][0]}/{r['request_files'][1]}")

    rows = run_grid(kinds, sizes, lambda kind, size, url: run_store(kind, size, args, url, counter), describe)
    for kind in kinds:
        mine = [r for r in rows if r["store"] == kind]
        big, small = mine[-1], mine[0]
        print(f"{kind}: at {big['history']} vs {small['history']}: claim x{big['claim_ms'] / small['claim_ms']:.2f}, "
              f"overhead x{big['overhead_ms'] / small['overhead_ms']:.2f}, reading every request "
              f"x{big['list_requests_ms'] / small['list_requests_ms']:.1f}")
        print(f"{kind}: overhead per request {big['overhead_ms']:.1f} ms (goal <= {OVERHEAD_GOAL_MS:.0f}: "
              f"{'met' if big['overhead_ms'] <= OVERHEAD_GOAL_MS else 'NOT met'}); claim {big['claim_ms']:.1f} ms, poll "
              f"{big['poll_ms']:.1f} ms at {big['history']} (goal <= {CLAIM_GOAL_MS:.0f}: "
              f"{'met' if big['claim_ms'] <= CLAIM_GOAL_MS else 'NOT met'})")


if __name__ == "__main__":
    main()
