"""rexrank/temporal_f1: Temporal F1 as RadEval computes it.

Thin `evaluate` wrapper of `rexrank.metrics.temporal_f1`; its options and an example are in
`inputs_description` (`help(module.compute)`).
"""
import evaluate

from rexrank.evaluate_support import compute, metric_info


class TemporalF1(evaluate.Metric):  # evaluate names the module after its class, snake-cased: "temporal_f1"
    def _info(self):
        return metric_info("temporal_f1")

    def _compute(self, predictions, references, **options):
        return compute("temporal_f1", predictions, references, **options)
