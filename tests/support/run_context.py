"""What a metric asks of its scoring run's context (rexrank.metrics.run_context.shared_outputs)."""
from __future__ import annotations


def record_shared_outputs(monkeypatch, answer=None) -> list:
    """shared_outputs replaced by a recorder: each call's (context, owner, model, side, texts)
    is appended to the list returned; it answers `answer(texts)`, or the metric's own
    `compute(texts)` when `answer` is None."""
    import rexrank.metrics.run_context as run_context

    shared: list = []

    def shared_outputs(context, owner, model, side, texts, compute):
        shared.append((context, owner, model, side, list(texts)))
        return (answer or compute)(texts)

    monkeypatch.setattr(run_context, "shared_outputs", shared_outputs)
    return shared
