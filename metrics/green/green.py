"""rexrank/green: thin `evaluate` wrapper; the implementation is `rexrank.metrics.green`.

LLM settings (backend, model, base_url, api_key, ...) are passed to `compute` as keyword
arguments or read from REXRANK_LLM_* environment variables; see the card.
"""
import evaluate

from rexrank.evaluate_support import compute, metric_info


class Green(evaluate.Metric):
    def _info(self):
        return metric_info("green")

    def _compute(self, predictions, references, **options):
        return compute("green", predictions, references, **options)
