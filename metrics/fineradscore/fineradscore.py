"""rexrank/fineradscore: FineRadScore with rexrank's own prompt implementing its rubric.

Thin `evaluate` wrapper of `rexrank.metrics.fineradscore`; its options and an example are in
`inputs_description` (`help(module.compute)`).
"""
import evaluate

from rexrank.evaluate_support import compute, metric_info


class Fineradscore(evaluate.Metric):  # evaluate names the module after its class, snake-cased: "fineradscore"
    def _info(self):
        return metric_info("fineradscore")

    def _compute(self, predictions, references, **options):
        return compute("fineradscore", predictions, references, **options)
