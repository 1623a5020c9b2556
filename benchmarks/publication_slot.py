"""What a private request's publication slot hides, and what it costs (issue 37).

1. Scoring time, measured: a worker scores two stand-ins for ReXGradient (800 synthetic
   studies each) that differ only in how many studies the findings track holds (800 vs
   100), with long predictions; the time from taking the request up to the end of scoring
   is what a results commit's date minus `scored_time` published before the slot (median of
   --repeats, each on a fresh store).
2. What the slot still says: the two end in different slots only if a slot boundary falls
   between them, probability d / slot for a start the grid does not know.
3. Latency: the wait from the end of scoring to the slot, for end times spread uniformly
   over a week (--draws, seeded), mean and longest, for each slot length.

The slot is the store's `"publication_slot"` in config.json (default 3600 s: the next whole
hour UTC). Run: python benchmarks/publication_slot.py [--repeats 3] [--metrics bleu2]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from stores import quiet_logs
from synthetic_reports import synthetic_reports

N_STUDIES = 800
SLOTS = {"1 h (default)": 3600.0, "15 min": 900.0, "5 min": 300.0}


class EndOfScoring:
    """The machine's clock, except that the wait for the slot only notes when scoring ended."""

    def __init__(self):
        self.ended: list[float] = []

    def now(self) -> float:
        return time.time()

    def wait_until(self, when: float) -> None:
        self.ended.append(time.time())


def stand_in(folder: Path, in_track: int) -> tuple[Path, list[str]]:
    """A ReXGradient stand-in of N_STUDIES studies, the first `in_track` with findings."""
    from rexrank.testsets.registry import TEST_SETS

    texts = synthetic_reports(N_STUDIES, seed=1)
    ids = [f"RG{i:04d}" for i in range(N_STUDIES)]
    studies = {sid: {"section_findings": text if i < in_track else None, "section_impression": "Impression.",
                     "report": text, "image_path": [f"{sid}/0.png"], "key_image_path": "", "context": "",
                     "site": "A", "is_abnormal": True, "frontal_lateral": ["Frontal"]}
               for i, (sid, text) in enumerate(zip(ids, texts))}
    (folder / "rexgradient").mkdir(parents=True)
    (folder / "rexgradient" / TEST_SETS["rexgradient"].filenames[0]).write_text(json.dumps(studies))
    return folder, ids


def scoring_seconds(in_track: int, metrics: str) -> float:
    """Seconds from taking one private request up to the end of its scoring."""
    from rexrank.backend.worker import Worker
    from rexrank.store import Quota, open_store

    with tempfile.TemporaryDirectory(prefix="rexrank-slot-") as tmp:
        data_dir, ids = stand_in(Path(tmp) / "data", in_track)
        predictions = Path(tmp) / "predictions.jsonl"
        long_texts = [" ".join([t] * 4) for t in synthetic_reports(N_STUDIES, seed=7)]
        predictions.write_text("".join(json.dumps({"id": i, "prediction": t}) + "\n" for i, t in zip(ids, long_texts)))
        store = open_store(Path(tmp) / "store", quota=Quota(0))
        store.submit(test_set="rexgradient", track="findings", predictions=predictions, model_name="bench",
                     submitter="bench")
        clock = EndOfScoring()
        worker = Worker(store, data_dir=data_dir, metrics=metrics, worker_id="bench", clock=clock)
        started = time.time()
        worker.run(once=True)
        [ended] = clock.ended
        return ended - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--metrics", default="bleu2")
    parser.add_argument("--draws", type=int, default=200_000)
    args = parser.parse_args()
    quiet_logs()
    from rexrank.backend.publication_slot import next_slot
    from rexrank.testsets import registry

    # the stand-in's size, not ReXGradient's declared 10,000
    registry.TEST_SETS["rexgradient"] = dataclasses.replace(registry.TEST_SETS["rexgradient"], n_studies=None)
    scoring_seconds(100, args.metrics)  # imports and first loads, not counted
    times = {n: statistics.median(scoring_seconds(n, args.metrics) for _ in range(args.repeats)) for n in (800, 100)}
    d = times[800] - times[100]
    print(f"scoring time, {args.metrics}, {N_STUDIES} studies in the set, long predictions (median of {args.repeats}):")
    for n, seconds in times.items():
        print(f"  {n:4d} studies in the findings track: {seconds:6.2f} s")
    print(f"  difference d = {d:.2f} s (ratio {times[800] / times[100]:.1f}x): what the commit date told before the slot")
    ends = np.random.default_rng(37).uniform(0, 7 * 86400, args.draws)
    print(f"\nslot     P(different slots) = d / slot   wait after scoring (mean, longest; {args.draws:,} end times)")
    for label, slot in SLOTS.items():
        waits = np.array([next_slot(t, slot) for t in ends]) - ends
        print(f"{label:>14}  {d / slot:9.3%}              {waits.mean() / 60:6.1f} min  {waits.max() / 60:6.1f} min "
              f"(mean / slot = {waits.mean() / slot:.3f})")


if __name__ == "__main__":
    main()
