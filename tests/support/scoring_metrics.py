"""A test-only metric for the scoring engine's tests (registered by monkeypatching the registry):
it takes the options a scoring run may add (progress, run_context) and records what it got."""
from __future__ import annotations

from rexrank.metrics.base import Metric

SCORING_METRICS = {"optioned": ("support.scoring_metrics:Optioned", "core")}


class Optioned(Metric):
    """Score = words of the prediction × `scale`; a second column, the prediction's length.
    Keeps the options it was built with (`made`) and, per call, (pairs given, start, stop) (`parts`)."""

    name = "optioned"
    made: list[dict] = []
    parts: list[tuple[int, int, int]] = []

    def __init__(self, progress: bool = True, run_context=None, scale: float = 1.0, patient_context=None):
        self.progress, self.run_context, self.scale = progress, run_context, scale
        Optioned.made.append({"progress": progress, "run_context": run_context, "scale": scale,
                              "patient_context": patient_context})

    def config(self) -> dict:
        return {"scale": self.scale}

    def _score_part(self, predictions, references, start, stop):
        Optioned.parts.append((len(predictions), start, stop))
        return super()._score_part(predictions, references, start, stop)

    def _score(self, predictions, references):
        return self._rows({self.name: [len(p.split()) * self.scale for p in predictions],
                           "optioned_length": [float(len(p)) for p in predictions]})
