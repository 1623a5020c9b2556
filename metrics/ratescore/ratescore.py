"""rexrank/ratescore: RaTEScore as the official RaTEScore 0.6.0 (ReXrank's "RaTEScore" column).

Thin `evaluate` wrapper of `rexrank.metrics.ratescore`; its options and an example are in
`inputs_description` (`help(module.compute)`).
"""
import evaluate

from rexrank.evaluate_support import compute, metric_info


class Ratescore(evaluate.Metric):  # evaluate names the module after its class, snake-cased: "ratescore"
    def _info(self):
        return metric_info("ratescore")

    def _compute(self, predictions, references, **options):
        return compute("ratescore", predictions, references, **options)
