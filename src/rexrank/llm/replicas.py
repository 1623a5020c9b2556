"""Several fixed batches generated at once, each exactly as the sequential run generates it.

Greedy ids in float16 depend on a batch's members and padded width, so batches are never
merged or split: each whole batch goes to one replica of the model, a worker process that
uses the parent's weights in place and calls the same `TransformersBackend._generate_batch`
(same inputs, same kernels, same ids) as the sequential path. The gain is on a GPU that a
single `generate` loop leaves mostly idle (its per-step host work); processes rather than
threads, so that one replica's Python does not wait for another's (the GIL).

The replicas share the parent's weights (CUDA tensors through CUDA IPC handles, CPU tensors
through shared memory): one copy of the weights, one key/value cache per replica.
`default_replicas` picks how many caches fit in the free GPU memory; on the CPU it is 1.
"""
from __future__ import annotations

import os
import time
from dataclasses import replace

from rexrank.llm.settings import LLMSettings
from rexrank.llm.types import LLMResponse

MAX_AUTO_REPLICAS = 8
OVERHEAD_BYTES = 1 << 30  # a CUDA context, activations and the allocator's slack, per replica
BARRIER_TIMEOUT = 600.0  # seconds a loaded replica waits for the others before it starts anyway

_worker = None  # the backend of this worker process


def default_replicas(config, *, device: str, dtype: str, batch_size: int, max_length: int) -> int:
    """As many replicas as the free memory of `device` holds now (the shared weights already
    loaded): each needs a key/value cache for a whole batch at `max_length` tokens and
    OVERHEAD_BYTES. 1 on the CPU (replicas there compete for the same cores) and on any doubt."""
    if not device.startswith("cuda"):
        return 1
    try:
        import torch

        free, _ = torch.cuda.mem_get_info(torch.device(device))
        need = replica_bytes(config, dtype=dtype, batch_size=batch_size, max_length=max_length)
    except Exception:  # a config without the usual fields, no driver: the sequential run
        return 1
    return max(1, min(MAX_AUTO_REPLICAS, int(free * 0.9) // need))


def replica_bytes(config, *, dtype: str, batch_size: int, max_length: int) -> int:
    """Memory one replica needs besides the shared weights: the key/value cache of one batch
    at `max_length` tokens, plus overhead."""
    config = getattr(config, "text_config", None) or config  # vision-language checkpoints (CRIMSON's Gemma 3)
    size = {"float32": 4, "float16": 2, "bfloat16": 2}.get(dtype, 4)
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    return 2 * config.num_hidden_layers * kv_heads * head_dim * size * batch_size * max_length + OVERHEAD_BYTES


def _init_worker(backend_class, settings: LLMSettings, backend_kwargs: dict, barrier, shared: tuple) -> None:
    global _worker
    try:
        _worker = backend_class(replace(settings, replicas=1), **backend_kwargs)
        _worker._attach(*shared)
    except BaseException:
        barrier.abort()  # the other replicas do not wait for this one
        raise
    try:
        barrier.wait(BARRIER_TIMEOUT)  # every replica starts together: none takes all the batches while others load
    except Exception:  # a replica that failed to load breaks the barrier: the others go on
        pass


def _generate_in_worker(batch: list[list[int]], params: dict) -> tuple[list[LLMResponse], int, float, float]:
    start = time.monotonic()
    responses = _worker._generate_batch(batch, params)
    return responses, os.getpid(), start, time.monotonic()


class ReplicaPool:
    """`replicas` worker processes, each with its own `backend_class(settings, **backend_kwargs)`
    running the parent's model (`shared`: `TransformersBackend._shared_model()`), kept for
    the backend's lifetime; the parent keeps the weights alive meanwhile. `log` holds (worker pid, start, end) per generated batch
    (time.monotonic, one clock for every process on the machine)."""

    def __init__(self, replicas: int, backend_class, settings: LLMSettings, backend_kwargs: dict, shared: tuple):
        from concurrent.futures import ProcessPoolExecutor

        import torch.multiprocessing  # its pickling of tensors: CUDA IPC handles, shared memory

        context = torch.multiprocessing.get_context("spawn")  # CUDA cannot be used in a forked child
        barrier = context.Barrier(replicas)
        self.replicas = replicas
        self.log: list[tuple[int, float, float]] = []
        self.broken: str | None = None  # why the replicas stopped, once they have
        self._executor = ProcessPoolExecutor(replicas, mp_context=context, initializer=_init_worker,
                                             initargs=(backend_class, settings, backend_kwargs, barrier, shared))

    def generate(self, batches: list[list[list[int]]], params: list[dict], on_batch) -> list[int]:
        """Generates the batches; `on_batch(k, responses)` in the calling thread as batch k
        ends. Returns the numbers of the batches not generated because the replicas stopped
        (a replica out of memory or killed, or workers that could not start: a script
        without `if __name__ == "__main__":` re-runs itself in them)."""
        from concurrent.futures import as_completed
        from concurrent.futures.process import BrokenProcessPool

        futures = {self._executor.submit(_generate_in_worker, batch, p): k for k, (batch, p) in enumerate(zip(batches, params))}
        left = []
        for future in as_completed(futures):
            k = futures[future]
            try:
                responses, pid, start, end = future.result()
            except BrokenProcessPool as exc:
                self.broken = str(exc) or type(exc).__name__
                left.append(k)
                continue
            self.log.append((pid, start, end))
            on_batch(k, responses)
        return sorted(left)

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)


def overlapping(log: list[tuple[int, float, float]]) -> int:
    """How many pairs of batches, on different workers, were generated at the same time."""
    return sum(1 for i, (p, s, e) in enumerate(log) for q, t, f in log[i + 1:] if p != q and s < f and t < e)
