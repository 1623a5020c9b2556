"""A small Gradio app for a metric's Space (evaluate's launch_gradio_widget is broken on gradio >= 4)."""
from __future__ import annotations

import json


def build_metric_demo(name: str, **options):
    from rexrank.models.huge_pages import prefer_huge_pages

    prefer_huge_pages()  # before the metric's model creates a tensor
    import gradio as gr

    from rexrank.evaluate_support import compute
    from rexrank.metrics.registry import metric_class

    cls = metric_class(name)

    def run(predictions_text: str, references_text: str) -> tuple[str, str]:
        predictions = [line for line in predictions_text.splitlines()]
        references = [line for line in references_text.splitlines()]
        if len(predictions) != len(references):
            raise gr.Error(
                f"{len(predictions)} prediction lines but {len(references)} reference lines: give one report per line, paired"
            )
        out = compute(name, predictions, references, **options)
        return f"{out[name]:.4f}" if out[name] is not None else "n/a", json.dumps(out, indent=2)

    with gr.Blocks(title=f"rexrank/{name}") as demo:
        gr.Markdown(f"# rexrank/{name}\n\n{cls.description}\n\nOne report per line; line *i* of each box is a pair.")
        with gr.Row():
            predictions = gr.Textbox(label="Predictions (one report per line)", lines=6)
            references = gr.Textbox(label="References (one report per line)", lines=6)
        button = gr.Button("Compute", variant="primary")
        value = gr.Textbox(label=name)
        details = gr.Code(label="Full output (JSON)", language="json")
        button.click(run, [predictions, references], [value, details], api_name="compute")
    return demo
