"""rexrank/srr_bert: SRR-BERT as RadEval computes it.

Thin `evaluate` wrapper of `rexrank.metrics.srr_bert`; its options and an example are in
`inputs_description` (`help(module.compute)`).
"""
import evaluate

from rexrank.evaluate_support import compute, metric_info


class SrrBert(evaluate.Metric):  # evaluate names the module after its class, snake-cased: "srr_bert"
    def _info(self):
        return metric_info("srr_bert")

    def _compute(self, predictions, references, **options):
        return compute("srr_bert", predictions, references, **options)
