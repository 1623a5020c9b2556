"""Synthetic benchmark reports: sentences of rexrank's own example set (no patient text),
recombined and varied with qualifiers so that texts repeat about as rarely as in real
test sets. Shared by the benchmark scripts (run as `python benchmarks/<name>.py`)."""
from __future__ import annotations

import json
import random

from rexrank.data import data_path

QUALIFIERS = [
    "in the left lower lobe", "in the right upper lobe", "at the lung bases", "in the right midlung",
    "since the prior study", "compared with the prior exam", "on the lateral view", "in the left apex",
    "with mild volume loss", "without change", "likely atelectasis", "possibly early pneumonia",
]


def example_sentences() -> list[str]:
    studies = json.loads(data_path("example_test.json").read_text())
    return sorted({
        s.strip()
        for study in studies.values()
        for s in study["report"].replace("Findings:", "").replace("Impression:", "").split(".")
        if len(s.strip()) > 3
    })


def synthetic_reports(n: int, seed: int) -> list[str]:
    """`n` reports of 2–7 sentences; half the sentences get a qualifier and a size."""
    base = example_sentences()
    rng = random.Random(seed)

    def sentence() -> str:
        s = rng.choice(base)
        if rng.random() < 0.5:
            s = f"{s} {rng.choice(QUALIFIERS)}, measuring {rng.randint(2, 40)} mm"
        return s + "."

    return [" ".join(sentence() for _ in range(rng.randint(2, 7))) for _ in range(n)]
