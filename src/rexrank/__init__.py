"""rexrank: the ReXrank benchmark for chest X-ray report generation.

`import rexrank` stays light (no torch, no datasets): the public names below are
resolved on first use.
"""
from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> "module:attribute", imported lazily so that `import rexrank` is fast
_LAZY = {
    "load_test_set": "rexrank.testsets.loading:load_test_set",
    "TEST_SETS": "rexrank.testsets.registry:TEST_SETS",
    "TRACKS": "rexrank.testsets.registry:TRACKS",
    "load_predictions": "rexrank.submissions:load_predictions",
    "SubmissionError": "rexrank.errors:SubmissionError",
    "RexrankError": "rexrank.errors:RexrankError",
    "get_metric": "rexrank.metrics.registry:get_metric",
    "available_metrics": "rexrank.metrics.registry:available_metrics",
    "aggregate": "rexrank.stats:aggregate",
    "score_submission": "rexrank.scoring:score_submission",
    "radcliq_from_components": "rexrank.metrics.radcliq_formula:radcliq_from_components",
    "submit": "rexrank.leaderboard.client:submit",
    "submission_status": "rexrank.leaderboard.client:status",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'rexrank' has no attribute {name!r}")
    module_name, attr = target.split(":")
    value = getattr(importlib.import_module(module_name), attr)
    globals()[name] = value
    return value
