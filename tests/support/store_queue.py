"""A store holding one request, and a monotonic clock moved by hand: the queue's rules are checked on them."""
from __future__ import annotations


class _Clock:
    """time.monotonic for the queue module, moved by hand."""

    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def _store_with_request(tmp_path, **kw):
    from rexrank.data import data_path
    from rexrank.store import Quota, open_store

    store = open_store(tmp_path / "s", quota=Quota(1, 7))
    args = dict(test_set="example", track="findings", predictions=data_path("example_predictions.json"),
                model_name="model-a", submitter="alice")
    return store, store.submit(**{**args, **kw})


T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z (56 x 365 days + 14 leap days after 1970, by hand)
