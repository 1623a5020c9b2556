"""rexrank/bertscore: BERTScore exactly as CXR-Report-Metric (ReXrank's "BertScore" column).

Thin `evaluate` wrapper; the implementation is `rexrank.metrics.bertscore`. Options
(model, revision, num_layers, idf, rescale_with_baseline, baseline, batch_size, device,
cache, cache_dir) are passed to `compute`.
"""
import evaluate

from rexrank.evaluate_support import compute, metric_info


class BertScore(evaluate.Metric):
    def _info(self):
        return metric_info("bertscore")

    def _compute(self, predictions, references, **options):
        return compute("bertscore", predictions, references, **options)
