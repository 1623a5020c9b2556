"""rexrank/bertscore: BERTScore exactly as CXR-Report-Metric (ReXrank's "BertScore" column).

Thin `evaluate` wrapper of `rexrank.metrics.bertscore`; its options and an example are in
`inputs_description` (`help(module.compute)`).
"""
import evaluate

from rexrank.evaluate_support import compute, metric_info


class Bertscore(evaluate.Metric):  # evaluate names the module after its class, snake-cased: "bertscore"
    def _info(self):
        return metric_info("bertscore")

    def _compute(self, predictions, references, **options):
        return compute("bertscore", predictions, references, **options)
