"""A stand-in for rexrank.models.shared in tests of a metric's model loading: every load runs,
its key is recorded, and a local file's fingerprint reads "fingerprint of PATH"."""
from __future__ import annotations


def record_shared_loads(monkeypatch) -> list:
    """The keys of the model loads, in order, as the metric asks rexrank.models.shared."""
    import rexrank.models.shared as shared

    loads = []

    def shared_model(key, load):
        loads.append(key)
        return load()

    monkeypatch.setattr(shared, "shared_model", shared_model)
    monkeypatch.setattr(shared, "local_fingerprint", lambda path: f"fingerprint of {path}")
    return loads
