"""rexrank/ratescore: RaTEScore as the official RaTEScore 0.6.0 (ReXrank's "RaTEScore" column).

Thin `evaluate` wrapper; the implementation is `rexrank.metrics.ratescore`. Options
(ner_path, embedding_path, affinity_matrix, sentence_splitter, batch_size, device, ...)
are passed to `compute`.
"""
import evaluate

from rexrank.evaluate_support import compute, metric_info


class RaTEScore(evaluate.Metric):
    def _info(self):
        return metric_info("ratescore")

    def _compute(self, predictions, references, **options):
        return compute("ratescore", predictions, references, **options)
