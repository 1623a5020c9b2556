"""Preparing the next batch while the current one runs (on a GPU by default) changes no
number: RadGraph's annotations, RaTEScore's entities and embeddings are identical with and
without it, and the preparing really happens in another thread. Forced on here, on the CPU."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from rexrank.models.prefetch import ahead, behind, on_device
from support.tiny_report_models import CORPUS, make_tiny_radcliq_models

TEXTS = CORPUS + [" ".join(CORPUS[i:i + 3]) for i in range(len(CORPUS) - 2)] + ["Mild edema.", "No effusion."]


def _threads_of(record: list):
    def wrap(fn):
        def run(*args, **kwargs):
            record.append(threading.current_thread().name)
            return fn(*args, **kwargs)
        return run
    return wrap


def test_ahead_keeps_order_and_prepares_in_a_background_thread():
    seen = []
    out = list(ahead(range(5), _threads_of(seen)(lambda k: k * k), enabled=True))
    assert out == [(k, k * k) for k in range(5)] and set(seen) == {"rexrank-prefetch_0"}
    seen.clear()
    assert list(ahead(range(3), _threads_of(seen)(lambda k: -k), enabled=False)) == [(0, 0), (1, -1), (2, -2)]
    assert set(seen) == {threading.current_thread().name}
    assert on_device("cuda:0") and not on_device("cpu")


def test_behind_runs_in_order_in_a_background_thread_and_raises_errors():
    seen, done = [], []
    with behind(enabled=True) as submit:
        for k in range(5):
            submit(_threads_of(seen)(done.append), k)
    assert done == list(range(5)) and set(seen) == {"rexrank-finish_0"}

    def fail(k):
        if k == 1:
            raise ValueError("batch 1")
        done.append(k)

    done.clear()
    with pytest.raises(ValueError, match="batch 1"), behind(enabled=True) as submit:
        for k in range(4):
            submit(fail, k)
    assert done[:1] == [0] and 1 not in done
    seen.clear()
    with behind(enabled=False) as submit:
        submit(_threads_of(seen)(lambda: None))
    assert seen == [threading.current_thread().name]


def test_radgraph_annotations_are_identical_with_batches_prepared_ahead(tmp_path):
    from rexrank.radgraph.annotator import RadGraphAnnotator

    folder = make_tiny_radcliq_models(tmp_path)["radgraph"]
    annotator = RadGraphAnnotator(model_path=str(folder), batch_size=3, device="cpu")
    assert annotator.prefetch is False  # the CPU keeps the plain loop
    plain = annotator.annotate(TEXTS, progress=False)
    seen: list = []
    annotator._encode = _threads_of(seen)(annotator._encode)
    annotator.prefetch = True
    assert annotator.annotate(TEXTS, progress=False) == plain
    assert len(seen) >= 4 and "rexrank-prefetch_0" in seen


class _Recorded:
    """The tokenizer, with the thread of each call recorded (pad and __call__)."""

    def __init__(self, tokenizer, seen):
        self._tokenizer, self._seen = tokenizer, seen

    def __call__(self, *args, **kwargs):
        self._seen.append(threading.current_thread().name)
        return self._tokenizer(*args, **kwargs)

    def pad(self, *args, **kwargs):
        self._seen.append(threading.current_thread().name)
        return self._tokenizer.pad(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._tokenizer, name)


@pytest.mark.parametrize("part", ["tagger", "encoder"])
def test_ratescore_models_give_identical_outputs_with_batches_prepared_ahead(part, tmp_path):
    from rexrank.ratescore.models import EntityEncoder, EntityTagger
    from support.ratescore_models import _build_encoder, _build_tagger

    if part == "tagger":
        model = EntityTagger(_build_tagger(tmp_path / "ner"), "cpu", 3)
    else:
        model = EntityEncoder(_build_encoder(tmp_path / "encoder"), "cpu", 3)
    inputs = [s for text in TEXTS for s in text.split(". ")]
    assert model.prefetch is False
    plain = model(inputs, progress=False)
    seen: list = []
    model.tokenizer = _Recorded(model.tokenizer, seen)
    model.prefetch = True
    again = model(inputs, progress=False)
    if part == "tagger":
        assert again == plain
    else:
        np.testing.assert_array_equal(again, plain)
    assert "rexrank-prefetch_0" in seen


def test_ratescore_splits_while_its_models_load_with_identical_scores(tmp_path, monkeypatch):
    """On a GPU (forced here) the sentence splitting runs in a thread while the models load;
    the scores are the plain run's, and a loading error is still raised only when a sentence
    needs the models."""
    import rexrank.metrics.ratescore as module
    from rexrank.errors import MetricError
    from rexrank.metrics.registry import get_metric
    from support.ratescore_models import _build_encoder, _build_tagger

    paths = dict(ner_path=str(_build_tagger(tmp_path / "ner")), embedding_path=str(_build_encoder(tmp_path / "encoder")))
    predictions, references = TEXTS[:6] + ["", "ab"], TEXTS[6:12] + ["Mild edema.", ""]
    plain = get_metric("ratescore", device="cpu", cache=False, **paths).score(predictions, references)
    monkeypatch.setattr(module, "on_device", lambda device: True)
    seen: list = []
    split_on = module.RaTEScore._splitter

    def recorded(self):
        return _threads_of(seen)(split_on(self))

    monkeypatch.setattr(module.RaTEScore, "_splitter", recorded)
    metric = get_metric("ratescore", device="cpu", cache=False, **paths)
    overlapped = metric.score(predictions, references)
    np.testing.assert_array_equal(overlapped.primary, plain.primary)
    assert set(seen) == {"rexrank-split_0"} and metric._tagger is not None

    missing = dict(paths, ner_path=str(tmp_path / "nope"))
    assert list(get_metric("ratescore", device="cpu", cache=False, **missing).score(["", "ab"], ["  ", ""]).primary) == [0.5, 0.5]
    with pytest.raises(MetricError, match="does not exist"):
        get_metric("ratescore", device="cpu", cache=False, **missing).score(["No effusion."], ["Mild edema."])
