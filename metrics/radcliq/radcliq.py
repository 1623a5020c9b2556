"""rexrank/radcliq: RadCliQ-v1 (and v0) from texts, as CXR-Report-Metric; ReXrank shows
1 / mean RadCliQ-v1 (`radcliq_v1_inv` in the output).

Thin `evaluate` wrapper; the implementation is `rexrank.metrics.radcliq`. Options
(bertscore_options, sembscore_options, radgraph_options, device, cache, cache_dir) are
passed to `compute`.
"""
import evaluate

from rexrank.evaluate_support import compute, metric_info


class RadCliQ(evaluate.Metric):
    def _info(self):
        return metric_info("radcliq")

    def _compute(self, predictions, references, **options):
        return compute("radcliq", predictions, references, **options)
