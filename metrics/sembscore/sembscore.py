"""rexrank/sembscore: SembScore (CheXbert [CLS] cosine) exactly as CXR-Report-Metric (ReXrank's "SembScore" column).

Thin `evaluate` wrapper of `rexrank.metrics.sembscore`; its options and an example are in
`inputs_description` (`help(module.compute)`).
"""
import evaluate

from rexrank.evaluate_support import compute, metric_info


class Sembscore(evaluate.Metric):  # evaluate names the module after its class, snake-cased: "sembscore"
    def _info(self):
        return metric_info("sembscore")

    def _compute(self, predictions, references, **options):
        return compute("sembscore", predictions, references, **options)
