"""rexrank/green: GREEN, the official prompt and checkpoint, local weights or an endpoint.

Thin `evaluate` wrapper of `rexrank.metrics.green`; its options and an example are in
`inputs_description` (`help(module.compute)`).
"""
import evaluate

from rexrank.evaluate_support import compute, metric_info


class Green(evaluate.Metric):  # evaluate names the module after its class, snake-cased: "green"
    def _info(self):
        return metric_info("green")

    def _compute(self, predictions, references, **options):
        return compute("green", predictions, references, **options)
