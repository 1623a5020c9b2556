"""rexrank/crimson: CRIMSON, the official prompt, answer reader and score; the fine-tuned
MedGemma judge locally or any judge at an OpenAI-compatible endpoint.

Thin `evaluate` wrapper of `rexrank.metrics.crimson`; its options and an example are in
`inputs_description` (`help(module.compute)`).
"""
import evaluate

from rexrank.evaluate_support import compute, metric_info


class Crimson(evaluate.Metric):  # evaluate names the module after its class, snake-cased: "crimson"
    def _info(self):
        return metric_info("crimson")

    def _compute(self, predictions, references, **options):
        return compute("crimson", predictions, references, **options)
