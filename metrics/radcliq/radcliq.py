"""rexrank/radcliq: RadCliQ-v1 (and v0) from texts as CXR-Report-Metric; ReXrank shows 1 / mean RadCliQ-v1.

Thin `evaluate` wrapper of `rexrank.metrics.radcliq`; its options and an example are in
`inputs_description` (`help(module.compute)`).
"""
import evaluate

from rexrank.evaluate_support import compute, metric_info


class Radcliq(evaluate.Metric):  # evaluate names the module after its class, snake-cased: "radcliq"
    def _info(self):
        return metric_info("radcliq")

    def _compute(self, predictions, references, **options):
        return compute("radcliq", predictions, references, **options)
