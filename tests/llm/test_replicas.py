"""Official batches generated at once by several replicas of the model give every batch the
ids of the official sequential run (tiny GREEN-architecture Llama, float16 as officially, CPU)."""
from __future__ import annotations

import os
from dataclasses import replace

import pytest

from support.green_token_folders import build_tiny_legacy_llama
from rexrank.errors import MetricError
from rexrank.llm import LLMSettings
from rexrank.llm.replicas import overlapping, replica_bytes
from rexrank.llm.transformers_backend import TransformersBackend
from rexrank.metrics.registry import get_metric

pytestmark = pytest.mark.long  # generation on two replicas against the sequential path: minutes


@pytest.fixture(scope="module")
def tiny_green(tmp_path_factory):
    return build_tiny_legacy_llama(tmp_path_factory.mktemp("green_replicas"), hidden=64, seed=1)


def _studies(n: int) -> tuple[list[str], list[str]]:
    preds = [f"candidate {i}: " + " ".join(["Small left pleural effusion."] * (1 + i % 4)) for i in range(n)]
    refs = [" ".join(["Mild cardiomegaly, no pneumothorax."] * (1 + (3 * i) % 5)) for i in range(n)]
    return preds, refs


def _ids_per_batch(metric, preds, refs):
    """Every request's greedy ids, grouped in the official batches of 8."""
    requests, _ = metric._requests(preds, refs)
    backend = metric.runner.backend
    batches = [list(range(start, min(start + 8, len(requests)))) for start in range(0, len(requests), 8)]
    responses = backend.generate(requests, batches=batches)
    return [[responses[i].completion_ids for i in batch] for batch in batches], backend


def test_concurrent_official_batches_give_the_sequential_ids(tiny_green):
    preds, refs = _studies(20)  # three official batches
    options = dict(model_path=str(tiny_green), max_new_tokens=10, cache=False, progress=False)
    sequential, backend = _ids_per_batch(get_metric("green", replicas=1, **options), preds, refs)
    assert backend.batch_log == [] and backend._model is not None  # generated here, one batch after another
    metric = get_metric("green", replicas=2, **options)
    backend = metric.runner.backend
    official, _ = metric._requests(preds, refs)
    asked = []  # what the metric's scoring asks of its backend: one round on the replicas gives the ids and the scores
    generate = backend.generate

    def recorded(requests, **kw):
        asked.append((requests, kw.get("batches"), generate(requests, **kw)))
        return asked[-1][2]

    backend.generate = recorded
    try:
        again = metric.score(preds, refs)
        [(requests, batches, responses)] = asked
        # the same requests in the official batches of 8 that _ids_per_batch gave the sequential run
        assert requests == official and batches == [list(range(start, min(start + 8, 20))) for start in range(0, 20, 8)]
        concurrent = [[responses[i].completion_ids for i in batch] for batch in batches]
        assert backend.replicas == 2  # the option is honoured: two worker processes generated, none of it here
        log = backend.batch_log
        assert len(log) == 3 and len({pid for pid, _, _ in log}) == 2 and os.getpid() not in {pid for pid, _, _ in log}
        assert overlapping(log) >= 1  # two batches were generated at the same time
        assert all(len(ids) > 0 for batch in sequential for ids in batch)
        assert concurrent == sequential  # every batch's ids, study by study
        # and the scores through the metric are those of the sequential run
        assert again.details["llm_usage"]["requests"] == 20 and not again.failures
    finally:
        backend.close()


def test_replicas_option_is_checked():
    with pytest.raises(MetricError, match="replicas must be a positive integer"):
        LLMSettings(replicas=0)
    with pytest.raises(MetricError, match="replicas must be a positive integer"):
        get_metric("green", replicas="two", base_url="http://127.0.0.1:9/v1")


def test_default_is_one_replica_on_the_cpu(tiny_green):
    backend = TransformersBackend(LLMSettings(backend="transformers", model_path=str(tiny_green), device="cpu"))
    assert backend._replica_count([{"max_length": 2048}]) == 1
    # what a replica needs on a GPU besides the shared weights: one batch's key/value cache + overhead
    from transformers import AutoConfig

    need = replica_bytes(AutoConfig.from_pretrained(tiny_green), dtype="float16", batch_size=8, max_length=2048)
    assert need == 2 * 2 * 2 * 16 * 2 * 8 * 2048 + (1 << 30)  # 2 x layers x kv heads x head dim x bytes x tokens


def test_crimson_batches_of_one_on_two_replicas_give_the_sequential_ids(tmp_path):
    """CRIMSON's official batches of one, on a tiny MedGemma-architecture model (Gemma 3
    vision-language, stops at <end_of_turn>): the same mechanism, the same ids."""
    from support.crimson_cases import PAIRS, TOKENIZER_CORPUS
    from support.llm_tiny_models import build_tiny_gemma3

    folder = build_tiny_gemma3(tmp_path / "medgemma", corpus=TOKENIZER_CORPUS)
    refs, cands, _ = zip(*PAIRS[:4])
    options = dict(model_path=str(folder), max_new_tokens=6, cache=False, progress=False, device="cpu")
    ids = {}
    for replicas in (1, 2):
        metric = get_metric("crimson", replicas=replicas, **options)
        backend = metric.runner.backend
        try:
            responses = backend.generate(metric.requests(list(cands), list(refs)))
            ids[replicas] = [r.completion_ids for r in responses]
            assert len({pid for pid, _, _ in backend.batch_log}) == (2 if replicas == 2 else 0)
        finally:
            backend.close()
    assert all(ids[1]) and ids[2] == ids[1]


class ReplicaThatCannotStart(TransformersBackend):
    """A replica whose model cannot be set up (as one out of GPU memory)."""

    def _attach(self, *shared):
        raise MemoryError("no room for this replica")


def test_replicas_that_stop_leave_the_batches_to_the_sequential_path(tiny_green, caplog):
    from rexrank.llm import LLMRequest

    requests = [LLMRequest.completion(f"Small left pleural effusion {i}.", max_tokens=6) for i in range(16)]
    batches = [list(range(8)), list(range(8, 16))]
    settings = LLMSettings(backend="transformers", model_path=str(tiny_green), dtype="float16")
    sequential = TransformersBackend(replace(settings, replicas=1), legacy_llama_tokenizer=True).generate(requests, batches=batches)
    backend = ReplicaThatCannotStart(replace(settings, replicas=2), legacy_llama_tokenizer=True)
    with caplog.at_level("WARNING", logger="rexrank.llm.transformers_backend"):
        responses = backend.generate(requests, batches=batches)
    assert "replicas stopped" in caplog.text and "2 remaining batch(es) one after another" in caplog.text
    assert backend.replicas == 1 and backend._pool is None
    assert all(r.ok for r in responses)
    assert [r.completion_ids for r in responses] == [r.completion_ids for r in sequential]
