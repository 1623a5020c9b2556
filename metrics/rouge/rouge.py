"""rexrank/rouge: ROUGE-1, ROUGE-2 and ROUGE-L as RadEval computes them.

Thin `evaluate` wrapper of `rexrank.metrics.rouge`; its options and an example are in
`inputs_description` (`help(module.compute)`).
"""
import evaluate

from rexrank.evaluate_support import compute, metric_info


class Rouge(evaluate.Metric):  # evaluate names the module after its class, snake-cased: "rouge"
    def _info(self):
        return metric_info("rouge")

    def _compute(self, predictions, references, **options):
        return compute("rouge", predictions, references, **options)
