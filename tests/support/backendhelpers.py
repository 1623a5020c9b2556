"""Test-only metrics for the backend tests (registered by monkeypatching the registry, or
by `run_cli_with_test_metrics` in worker subprocesses)."""
from __future__ import annotations

import hashlib
import os
import sys
import time
from pathlib import Path

from rexrank.metrics.base import Metric

TESTS_DIR = Path(__file__).resolve().parents[1]  # on sys.path, `support.backendhelpers` names the test metrics
TEST_METRICS = {
    "counting": ("support.backendhelpers:Counting", "core"),
    "leaky": ("support.backendhelpers:Leaky", "core"),
    "crashing": ("support.backendhelpers:Crashing", "core"),
    "patchy": ("support.backendhelpers:Patchy", "core"),
}


def predictions_key(predictions) -> str:
    return hashlib.sha256("\x00".join(predictions).encode()).hexdigest()[:16]


class Counting(Metric):
    """Logs each scoring call (REXRANK_TEST_LOG) and can be slow (REXRANK_TEST_SLOW
    seconds, after writing REXRANK_TEST_STARTED) or held (until the file REXRANK_TEST_HOLD
    exists): lets tests count how often a submission was scored and act mid-scoring.
    Score = prediction length / 100."""

    name = "counting"

    def _score(self, predictions, references):
        log = os.environ.get("REXRANK_TEST_LOG")
        if log:
            with open(log, "a") as fh:
                fh.write(f"{predictions_key(predictions)} {os.getpid()}\n")
        if os.environ.get("REXRANK_TEST_STARTED"):
            Path(os.environ["REXRANK_TEST_STARTED"]).write_text("started")
        time.sleep(float(os.environ.get("REXRANK_TEST_SLOW", "0")))
        hold = os.environ.get("REXRANK_TEST_HOLD")
        while hold and not Path(hold).exists():  # the test releases it by creating the file
            time.sleep(0.05)
        return self._rows({self.name: [len(p) / 100 for p in predictions]})


class Leaky(Metric):
    """A careless metric: puts reference text into its details and failure reasons."""

    name = "leaky"

    def _score(self, predictions, references):
        scores = [float(len(set(p.split()) & set(r.split()))) for p, r in zip(predictions, references)]
        scores[0] = float("nan")
        return self._rows({self.name: scores}, side={"reference": list(references)},
                          failures={0: f"could not parse the reference {references[0]!r}"})

    @classmethod
    def aggregate(cls, rows):
        result = super().aggregate(rows)
        references = rows.side["reference"]
        result.details = {"examples": list(references[:3]), "worst": {"reference": references[1]}}
        return result


class Patchy(Metric):
    """A judge that gives no answer for the studies whose reference is in `fail_references`
    (NaN and a failure), and 1 for the others."""

    name = "patchy"

    def __init__(self, fail_references=()):
        self.fail_references = set(fail_references)

    def _score(self, predictions, references):
        failures = {i: "the judge gave no answer" for i, r in enumerate(references) if r in self.fail_references}
        return self._rows({self.name: [float("nan") if i in failures else 1.0 for i in range(len(references))]},
                          failures=failures)


class Crashing(Metric):
    """Raises an exception that quotes a reference."""

    name = "crashing"

    def _score(self, predictions, references):
        raise ValueError(f"cannot handle reference: {references[2]}")


def main(argv: list[str]) -> int:
    """`python backendhelpers.py ARGS`: the rexrank CLI with the test metrics registered."""
    import rexrank.metrics.registry as registry
    from rexrank.cli.main import main as cli

    registry.METRICS.update(TEST_METRICS)
    skew = float(os.environ.get("REXRANK_TEST_CLOCK_SKEW", "0"))
    if skew:  # this host's clock set `skew` seconds apart from the others'
        real = time.time
        time.time = lambda: real() + skew
    return cli(argv)


if __name__ == "__main__":
    sys.path.insert(0, str(TESTS_DIR))
    sys.exit(main(sys.argv[1:]))
