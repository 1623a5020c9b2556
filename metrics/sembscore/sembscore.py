"""rexrank/sembscore: SembScore (CheXbert [CLS] cosine) exactly as CXR-Report-Metric
(ReXrank's "SembScore" column), with CheXbert labels and CheXbert F1 under "details".

Thin `evaluate` wrapper; the implementation is `rexrank.metrics.sembscore`. Options
(checkpoint_path, revision, tokenizer, batch_size, device, cache, cache_dir, labels) are
passed to `compute`.
"""
import evaluate

from rexrank.evaluate_support import compute, metric_info


class SembScore(evaluate.Metric):
    def _info(self):
        return metric_info("sembscore")

    def _compute(self, predictions, references, **options):
        return compute("sembscore", predictions, references, **options)
