"""rexrank/radgraph: RadGraph-F1 as in CXR-Report-Metric (ReXrank's "RadGraph" column), plus the
F1RadGraph reward levels of radgraph 0.1.18.

Thin `evaluate` wrapper; the implementation is `rexrank.metrics.radgraph`. Options (model_type,
model_path, revision, transformer_path, transformer_revision, batch_size, device, cache,
cache_dir, progress) are passed to `compute`.
"""
import evaluate

from rexrank.evaluate_support import compute, metric_info


class RadGraph(evaluate.Metric):
    def _info(self):
        return metric_info("radgraph")

    def _compute(self, predictions, references, **options):
        return compute("radgraph", predictions, references, **options)
