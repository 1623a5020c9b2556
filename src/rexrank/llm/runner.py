"""Runs a list of requests through a backend with caching, concurrency and accounting.

The cache key is sha256 over (backend, model, revision, full request: messages or prompt,
and every generation parameter), so any change that could change an answer misses.
Only successful answers are cached: a rerun retries what failed and costs nothing else
(with `batches`, a rerun regenerates whole batches: see `LLMRunner.run`).
Each answer is cached as it arrives, so a run killed midway re-sends only what was in
flight.
"""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from rexrank.llm.settings import LLMSettings
from rexrank.llm.types import LLMRequest, LLMResponse, Usage
from rexrank.refcache import ReferenceCache, default_cache_dir


def build_backend(settings: LLMSettings, **kwargs):
    """The backend for resolved `settings` (see LLMSettings.resolved)."""
    if settings.backend == "openai":
        from rexrank.llm.openai_backend import OpenAIBackend

        return OpenAIBackend(settings)
    from rexrank.llm.transformers_backend import TransformersBackend

    return TransformersBackend(settings, **kwargs)


class LLMRunner:
    def __init__(self, backend, settings: LLMSettings, *, progress: bool = True):
        self.backend = backend
        self.settings = settings
        self.progress = progress
        directory = Path(settings.cache_dir) if settings.cache_dir else default_cache_dir().parent / "llm"
        self.cache = ReferenceCache("llm-response-v1", directory, enabled=settings.cache)
        self.usage = Usage(price_input_per_mtok=settings.price_input_per_mtok, price_output_per_mtok=settings.price_output_per_mtok)

    def cache_key(self, request: LLMRequest) -> str:
        return json.dumps({**self.backend.identity(), **request.key_payload()}, sort_keys=True, ensure_ascii=False)

    def run(self, requests: list[LLMRequest], *, desc: str = "LLM", batches: list[int] | None = None) -> list[LLMResponse]:
        """Answers in request order. `batches` (a batch number per request) asks a batching
        backend for exactly those batches: a batch with every answer cached is skipped, any
        other batch is generated whole, cached answers and duplicates included, so every
        study sees the padding and neighbours of an uninterrupted run (GREEN's official
        batches). Without it, cached answers are reused and identical requests sent once."""
        from tqdm.auto import tqdm

        responses: list[LLMResponse | None] = [None] * len(requests)
        hits = [self.cache.get(self.cache_key(request)) for request in requests]
        jobs: list[tuple[LLMRequest, list[int]]] = []  # a request sent once, and the positions it answers
        exact: list[list[int]] | None = None  # job numbers per batch, when the batches are kept
        if batches is not None and getattr(self.backend, "fixed_batches", False):
            members: dict[int, list[int]] = {}
            for i, number in enumerate(batches):
                members.setdefault(number, []).append(i)
            exact = []
            for positions in members.values():
                if all(hits[i] is not None for i in positions):
                    continue
                exact.append(list(range(len(jobs), len(jobs) + len(positions))))
                jobs += [(requests[i], [i]) for i in positions]
        else:
            todo: dict[LLMRequest, list[int]] = {}  # identical requests are sent once
            for i, request in enumerate(requests):
                if hits[i] is None:
                    todo.setdefault(request, []).append(i)
            jobs = list(todo.items())
        sent = {i for _, positions in jobs for i in positions}
        for i, hit in enumerate(hits):
            if i not in sent:
                responses[i] = LLMResponse(**hit, cached=True)

        def arrived(job: int, response: LLMResponse) -> None:
            # cached the moment it arrives: a run killed later re-sends only what was in flight
            request, positions = jobs[job]
            if response.ok:
                self.cache.put(self.cache_key(request), response.to_cache())
            for n, i in enumerate(positions):
                # duplicates beyond the first were not paid for: account them as cache hits
                responses[i] = response if n == 0 else LLMResponse(**response.to_cache(), cached=True, error=response.error)

        with tqdm(total=len(jobs), desc=desc, unit="call", disable=not self.progress or not jobs) as bar:
            self._send([request for request, _ in jobs], bar, arrived, exact)
        for response in responses:
            self.usage.add(response)  # type: ignore[arg-type]
        return responses  # type: ignore[return-value]

    def _send(self, requests: list[LLMRequest], bar, arrived, batches: list[list[int]] | None = None) -> None:
        if not requests:
            return
        if self.backend.max_concurrency > 1:
            def call(index: int, request: LLMRequest) -> None:
                # kept in the calling thread before it sends its next request: at any moment at
                # most max_concurrency answers are not yet cached (those in flight)
                arrived(index, self.backend.call(request))

            with ThreadPoolExecutor(max_workers=min(self.backend.max_concurrency, len(requests))) as pool:
                for future in as_completed([pool.submit(call, i, r) for i, r in enumerate(requests)]):
                    future.result()
                    bar.update(1)
        else:
            # the backend batches (the given batches, or its own); it reports progress per batch
            # and hands over each answer through `on_result` as soon as it has it
            handed: set[int] = set()

            def on_result(index: int, response: LLMResponse) -> None:
                handed.add(index)
                arrived(index, response)

            extra = {"batches": batches} if batches is not None else {}
            results = self.backend.generate(requests, on_progress=bar.update, on_result=on_result, **extra)
            for index, response in enumerate(results):
                if index not in handed:
                    arrived(index, response)
