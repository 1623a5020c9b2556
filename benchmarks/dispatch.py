"""The backend as a dispatcher over Jobs (rexrank.backend.dispatch): what K Jobs buy on a
10,000-study submission with the full ReXrank metric set, and what the dispatcher itself
costs next to the scoring.

1. The full-board plan of 10,000 studies on the Hub's h200 and a100-large Jobs, as the
   dispatcher makes it (rexrank.backend.shards): the Jobs needed to finish within an hour
   (--target-wall), then makespan, GPU-hours and cost against K Jobs. From per-study costs
   measured on one NVIDIA H100 with random-weight models of the real architectures (the
   figures of issue 29; no GPU was used for this script), divided by each flavour's
   relative speed (an estimate): the non-LLM suite 15.4 s per 600 studies, GREEN 1.50 s per
   study in official batches of 8; FineRadScore taken as GREEN's cost (not measured). Each
   Job's start-up (image pull, install, encoders, two 7B judges downloaded) is the
   planner's stated default unless --job-start gives seconds; prices are the dated table.
2. The dispatcher's own work per shard, measured here: a local store, one request, K
   shards, Jobs that "finish" at once having written synthetic shard outputs (the
   dispatcher's plan, starts, polls, record updates, merge and publish; no scoring).
3. The merge at 10,000 studies, measured here: synthetic study rows of the full metric
   set (columns, labels, accounting) in K shards, merged into one run's results by each
   metric's own aggregate().

Usage: python benchmarks/dispatch.py [--studies 10000] [--jobs 1,2,4,8,16,32] [--job-start SECONDS]
       [--target-wall 3600]
"""
from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from rexrank.backend.merge import merge_shards, shard_header, shard_table  # noqa: E402
from rexrank.backend.shards import plan_shards  # noqa: E402
from rexrank.store.config import REXRANK_LLM_METRICS, REXRANK_METRICS  # noqa: E402

FULL_SET = (*REXRANK_METRICS, *REXRANK_LLM_METRICS)
# the per-study columns each metric writes (names as the metrics write them)
COLUMNS = {
    "bleu2": ["bleu2"], "bertscore": ["bertscore", "bertscore_precision", "bertscore_recall"],
    "sembscore": ["sembscore"], "radgraph": ["radgraph", "radgraph_simple", "radgraph_partial", "radgraph_complete"],
    "radcliq": ["radcliq", "radcliq_v0", "radcliq_radgraph", "radcliq_bertscore", "radcliq_semb", "radcliq_bleu2"],
    "ratescore": ["ratescore"],
    "green": ["green", "green_matched_findings", "green_significant_errors", "green_insignificant_errors",
              *[f"green_sig_{k}" for k in "abcdef"]],
    "fineradscore": ["fineradscore", "fineradscore_sum", "fineradscore_n_corrections", "fineradscore_no_error",
                     "fineradscore_no_actionable_error", "fineradscore_no_significant_error"],
}


FLAVORS = ("h200", "a100-large")  # the Hub's single-GPU flavours for the LLM judges


def board_plan(n: int, flavor: str, *, max_jobs: int, job_start: float | None, target_wall: float | None = None):
    """The dispatcher's plan of `n` studies of the full board on `flavor` (each Job generating
    with both judges itself: their checkpoints are in its start-up)."""
    return plan_shards(n, FULL_SET, flavor=flavor, max_jobs=max_jobs, target_shard_hours=1e-9, local_judges=2,
                       startup=job_start, job_timeout=6 * 3600, target_wall=target_wall)


def makespans(n: int, ks: list[int], flavor: str, job_start: float | None) -> list[tuple[int, float, float, float]]:
    """(shards, makespan hours, GPU-hours, cost USD) on `flavor` with K Jobs at once, start-up
    included (more shards than K where the 6 h Job timeout needs them: they run in waves)."""
    rows = []
    for k in ks:
        plan = board_plan(n, flavor, max_jobs=k, job_start=job_start)
        rows.append((plan.k, plan.makespan_hours, plan.gpu_hours, plan.cost_usd))
    return rows


def synthetic_rows(name: str, n: int, rng):
    """Random StudyRows of the shape metric `name` keeps (its columns, side values, settings,
    tallies), for its own aggregate() to read."""
    from rexrank.metrics.base import StudyRows

    columns = {c: rng.random(n) for c in COLUMNS[name]}
    side, settings, tallies = {}, {}, {}
    if name == "bertscore":
        side = {"empty_pair": [False] * n}
    if name == "sembscore":
        side = {f"chexbert_{s}": rng.integers(0, 4, (n, 14)).astype(np.int8) for s in ("predictions", "references")}
    if name in ("radgraph", "ratescore"):
        side = {f"entities_{s}": rng.integers(0, 9, n).tolist() for s in ("prediction", "reference")}
    if name == "ratescore":
        tallies = {"reference_cache": {"hits": 0, "misses": n}}
    if name == "radcliq":
        settings = {"components_from_the_run": ["bleu2", "bertscore", "sembscore", "radgraph"]}
    if name in ("green", "fineradscore"):
        usage = {"requests": n, "cache_hits": 0, "retries": 0, "failed": 0, "prompt_tokens": 700 * n,
                 "completion_tokens": 300 * n, "cached_prompt_tokens": 0, "cached_completion_tokens": 0}
        tallies = {"llm_usage": usage}
        settings = {"llm_prices": {"price_input_per_mtok": None, "price_output_per_mtok": None}}
    if name == "green":
        side = {"unparseable": (rng.random(n) < 0.01).tolist()}
    if name == "fineradscore":
        columns["fineradscore"] = rng.integers(0, 5, n).astype(float)
        settings["thresholds"] = {"no_actionable_max": 1, "no_significant_max": 2}
        tallies["reasks"] = 0
    return StudyRows(columns, side, {}, settings, tallies)


def synthetic_shards(n: int, ranges, rng) -> tuple[list, dict]:
    """K (shard JSON, shard table) pairs and the whole run's header, as the shards and the dispatcher make them."""
    from types import SimpleNamespace

    from rexrank.metrics.base import MetricResult

    ids = [f"s{i:05d}" for i in range(n)]
    shards = []
    for index, (start, stop) in enumerate(ranges):
        table = pd.DataFrame({"id": ids[start:stop]})
        summaries, results = {}, {}
        for name in FULL_SET:
            rows = synthetic_rows(name, stop - start, rng)
            for column, values in rows.columns.items():
                table[column] = values
            results[name] = MetricResult(name, rows.columns, {}, rows=rows)
            summaries[name] = {"provenance": {"version": "x"}, "higher_is_better": True, "seconds": 1.0}
        run = SimpleNamespace(results={"metrics": summaries, "seconds": 1.0}, metric_results=results, per_study=table)
        meta = shard_header(run, request_id="r", shard=index, attempt=1, start=start, stop=stop, metrics=FULL_SET,
                            metric_options={})
        buf = io.BytesIO()
        shard_table(run).to_parquet(buf, index=False)  # the merge reads parquet back, as from the store
        shards.append((meta, pd.read_parquet(io.BytesIO(buf.getvalue()))))
    header = {"predictions": {"n": n}, "predictions_ids": ids, "metrics": {}}
    return shards, header


def merge_seconds(n: int, k: int, repeats: int = 3) -> float:
    rng = np.random.default_rng(0)
    ranges = plan_shards(n, FULL_SET, flavor="h200", max_jobs=k, target_shard_hours=1e-9).ranges
    shards, header = synthetic_shards(n, ranges, rng)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        merge_shards(shards, plan_ranges=[list(r) for r in ranges], header=header)
        best = min(best, time.perf_counter() - t0)
    return best


def dispatcher_seconds_per_shard(k: int) -> float:
    """Wall time of one dispatched request on a local store, per shard, with Jobs that finish at once."""
    from rexrank.backend.dispatch import Dispatcher, DispatchSettings
    from rexrank.backend.jobs import JobState
    from rexrank.backend.worker import Worker
    from rexrank.scoring import score_submission
    from rexrank.store import Quota, open_store
    from rexrank.store import records as R
    from rexrank.store.repo import transact
    from test_store import EXAMPLE_PREDS, submit

    class InstantJobs:
        """Jobs that have run already: `run` writes the shard's output as a Job would."""

        def __init__(self, store, runs):
            self.store, self.runs, self.jobs = store, runs, {}

        def run(self, *, command, env, secrets, flavor, timeout, labels):
            rid, shard, attempt = labels["rexrank-request"], int(labels["rexrank-shard"]), int(labels["rexrank-attempt"])
            meta, table = self.runs[shard]
            meta = {**meta, "request_id": rid, "attempt": attempt}
            json_path, parquet_path = R.shard_paths(rid, shard, attempt)
            buf = io.BytesIO()
            table.to_parquet(buf, index=False)
            transact(self.store.requests, lambda snap: ({json_path: R.dumps(R.jsonable(meta)),
                                                         parquet_path: buf.getvalue()}, "shard", None))
            job_id = f"job{len(self.jobs)}"
            self.jobs[job_id] = JobState(job_id, "COMPLETED", None, dict(labels), flavor, time.time(), time.time())
            return job_id

        def inspect(self, job_id):
            return self.jobs.get(job_id)

        def list(self, labels):
            return [j for j in self.jobs.values() if all(j.labels.get(a) == b for a, b in labels.items())]

        def cancel(self, job_id):
            pass

        def logs(self, job_id):
            return []

    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp) / "s", quota=Quota(0))
        submit(store)
        n = 19
        plan = plan_shards(n, ["bleu2"], flavor="cpu-basic", max_jobs=k, target_shard_hours=1e-9)
        runs = []
        for index, (start, stop) in enumerate(plan.ranges):
            run = score_submission("example", "findings", EXAMPLE_PREDS, metrics="bleu2", progress=False, select=(start, stop))
            runs.append((shard_header(run, request_id="", shard=index, attempt=1, start=start, stop=stop,
                                      metrics=["bleu2"], metric_options={}), shard_table(run)))
        settings = DispatchSettings(mode="local", flavor="cpu-basic", max_jobs=k, target_shard_hours=1e-9, poll=0.0)
        dispatcher = Dispatcher(Worker(store, metrics="bleu2", worker_id="bench"), InstantJobs(store, runs), settings)
        t0 = time.perf_counter()
        assert dispatcher.run(once=True) == 1
        seconds = time.perf_counter() - t0
        assert store.list_requests()[0]["status"] == "FINISHED"
        return seconds / plan.k


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=10000)
    parser.add_argument("--jobs", default="1,2,4,8,16,32")
    parser.add_argument("--job-start", type=float, default=None,
                        help="seconds from a Job's start to its first study (default: the planner's stated default)")
    parser.add_argument("--target-wall", type=float, default=3600.0, help="seconds the Jobs needed must finish within")
    args = parser.parse_args()
    ks = [int(k) for k in args.jobs.split(",")]
    n = args.studies
    print(f"{n} studies, full metric set {', '.join(FULL_SET)} (issue 29's H100 figures; FineRadScore as GREEN)")
    for flavor in FLAVORS:
        plan = board_plan(n, flavor, max_jobs=1000, job_start=args.job_start, target_wall=args.target_wall)
        print(f"\n{flavor}: Jobs needed for <= {args.target_wall / 3600:g} h: {plan.k}")
        print(plan.describe().split("\n  shard 0")[0])
        print(f"{'K at once':>9}  {'shards':>6}  {'makespan h':>10}  {'speed-up':>8}  {'GPU-hours':>9}  {'cost USD':>8}")
        rows = makespans(n, ks, flavor, args.job_start)
        for asked, (k, hours, gpu_hours, cost) in zip(ks, rows):
            print(f"{asked:>9}  {k:>6}  {hours:>10.2f}  {rows[0][1] / hours:>7.1f}x  {gpu_hours:>9.2f}  {cost:>8.2f}")
    rows = makespans(n, ks, FLAVORS[0], args.job_start)
    scoring_seconds = board_plan(n, FLAVORS[0], max_jobs=1, job_start=0).scoring_hours * 3600
    print(f"\nscoring time on {FLAVORS[0]} (GPU-seconds, all shards together): {scoring_seconds:,.0f} s")
    # per shard: measured with min(K, 19) shards (the example test set has 19 studies)
    print(f"\n{'shards':>6}  {'merge s':>8}  {'merge/scoring':>13}  {'dispatcher s/shard':>18}  {'overhead/scoring':>16}  "
          f"{'overhead/makespan':>17}")
    for (k, hours, _, _), asked in zip(rows, ks):
        merge = merge_seconds(n, k)
        per_shard = dispatcher_seconds_per_shard(min(asked, 19))
        overhead = merge + per_shard * k
        print(f"{k:>6}  {merge:>8.3f}  {merge / scoring_seconds:>12.4%}  {per_shard:>18.3f}  "
              f"{overhead / scoring_seconds:>15.4%}  {overhead / (hours * 3600):>16.4%}")
    print("\ngoal: dispatcher overhead (merge + per-shard work) <= 1 % of the scoring time")


if __name__ == "__main__":
    main()
