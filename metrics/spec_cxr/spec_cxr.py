"""rexrank/spec_cxr: SPEC-CXR-style entity-level evaluation (rexrank's own version).

Thin `evaluate` wrapper of `rexrank.metrics.spec_cxr`; its options and an example are in
`inputs_description` (`help(module.compute)`).
"""
import evaluate

from rexrank.evaluate_support import compute, metric_info


class SpecCxr(evaluate.Metric):  # evaluate names the module after its class, snake-cased: "spec_cxr"
    def _info(self):
        return metric_info("spec_cxr")

    def _compute(self, predictions, references, **options):
        return compute("spec_cxr", predictions, references, **options)
