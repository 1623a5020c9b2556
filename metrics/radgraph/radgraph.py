"""rexrank/radgraph: RadGraph-F1 as CXR-Report-Metric (ReXrank's "RadGraph" column) and the F1RadGraph rewards.

Thin `evaluate` wrapper of `rexrank.metrics.radgraph`; its options and an example are in
`inputs_description` (`help(module.compute)`).
"""
import evaluate

from rexrank.evaluate_support import compute, metric_info


class Radgraph(evaluate.Metric):  # evaluate names the module after its class, snake-cased: "radgraph"
    def _info(self):
        return metric_info("radgraph")

    def _compute(self, predictions, references, **options):
        return compute("radgraph", predictions, references, **options)
