"""rexrank/bleu2: BLEU-2 exactly as CXR-Report-Metric (ReXrank's "BLEU" column).

Thin `evaluate` wrapper; the implementation is `rexrank.metrics.bleu2`.
"""
import evaluate

from rexrank.evaluate_support import compute, metric_info


class Bleu2(evaluate.Metric):
    def _info(self):
        return metric_info("bleu2")

    def _compute(self, predictions, references):
        return compute("bleu2", predictions, references)
