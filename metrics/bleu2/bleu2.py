"""rexrank/bleu2: BLEU-2 exactly as CXR-Report-Metric (ReXrank's "BLEU" column).

Thin `evaluate` wrapper of `rexrank.metrics.bleu2`; its options and an example are in
`inputs_description` (`help(module.compute)`).
"""
import evaluate

from rexrank.evaluate_support import compute, metric_info


class Bleu2(evaluate.Metric):  # evaluate names the module after its class, snake-cased: "bleu2"
    def _info(self):
        return metric_info("bleu2")

    def _compute(self, predictions, references):
        return compute("bleu2", predictions, references)
