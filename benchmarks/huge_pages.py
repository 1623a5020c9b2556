"""What THP_MEM_ALLOC_ENABLE (set by `rexrank.models.huge_pages` in rexrank's programs)
does to a model's forward passes on CPU.

The RaTE-NER tagger (DeBERTa-v3-base token classifier, random weights, the real
architecture, built as in ratescore.py) tags the distinct sentences of N synthetic pairs,
`--passes` times in one fresh process per setting; rounds alternate the settings. Each pass
prints its user and kernel CPU seconds and minor page faults; the last lines give the
medians and the ratios without/with.

Usage: python benchmarks/huge_pages.py [--pairs 60] [--rounds 2] [--passes 3] [--threads 1]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from synthetic_reports import synthetic_reports

VARIABLE = "THP_MEM_ALLOC_ENABLE"

CHILD = """
import json, os, resource, sys
from pathlib import Path
import torch
from rexrank.ratescore.models import EntityTagger
ner, sentences, threads, passes = json.loads(sys.argv[1])
torch.set_num_threads(threads)
tagger = EntityTagger(Path(ner), "cpu", 32)
for _ in range(passes):
    t0, r0 = os.times(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    tagger(sentences, progress=False)
    t1, r1 = os.times(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    print(json.dumps({"user": t1.user - t0.user, "sys": t1.system - t0.system, "faults": r1 - r0}), flush=True)
"""


def passes(setting: str, ner: str, sentences: list[str], threads: int, count: int) -> list[dict]:
    env = {**os.environ, VARIABLE: setting}
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps([ner, sentences, threads, count])], env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode:
        sys.exit(done.stderr[-3000:])
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    from ratescore import build_models

    from rexrank.ratescore.sentences import DEFAULT_SPLITTER, get_splitter

    texts = synthetic_reports(args.pairs, seed=1) + synthetic_reports(args.pairs, seed=2)
    split = get_splitter(DEFAULT_SPLITTER)
    sentences = list(dict.fromkeys(s for t in texts for s in split(t)))
    seen: dict[str, list[dict]] = {"0": [], "1": []}
    with tempfile.TemporaryDirectory() as tmp:
        ner, _ = build_models(Path(tmp), texts, layers=12)
        print(f"RaTE-NER architecture over {len(sentences)} distinct sentences ({args.pairs} pairs), batch 32, "
              f"{args.threads} torch thread(s), {args.passes} passes per process")
        for r in range(args.rounds):
            for setting in ("0", "1"):
                for p in passes(setting, ner, sentences, args.threads, args.passes):
                    seen[setting].append(p)
                    print(f"round {r + 1} {VARIABLE}={setting}: user {p['user']:6.2f} s, kernel {p['sys']:5.2f} s, "
                          f"CPU {p['user'] + p['sys']:6.2f} s, {p['faults']:>9,} page faults")
    median = {s: {k: statistics.median(p[k] for p in ps) for k in ("user", "sys", "faults")} for s, ps in seen.items()}
    cpu = {s: [p["user"] + p["sys"] for p in ps] for s, ps in seen.items()}
    for s in ("0", "1"):
        print(f"{VARIABLE}={s}: median CPU {statistics.median(cpu[s]):.2f} s (range {min(cpu[s]):.2f}-{max(cpu[s]):.2f}), "
              f"kernel {median[s]['sys']:.2f} s, {median[s]['faults']:,.0f} page faults")
    print(f"without/with: CPU {statistics.median(cpu['0']) / statistics.median(cpu['1']):.2f}x, "
          f"page faults {median['0']['faults'] / max(median['1']['faults'], 1):.0f}x")


if __name__ == "__main__":
    main()
