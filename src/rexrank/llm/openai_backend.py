"""OpenAI-compatible backend (OpenAI, Azure v1 endpoint, vLLM, llama.cpp server, ...).

The `openai` client's own retries are switched off so that every retry is counted and
reported; we retry 408/409/429/5xx, timeouts and connection errors with exponential
backoff (a server's Retry-After wins, capped), and fail fast on other 4xx (bad model
name, bad key): retrying those only burns time.
"""
from __future__ import annotations

import os
import threading
import time

from rexrank.llm.settings import LLMSettings
from rexrank.llm.types import LLMRequest, LLMResponse

RETRY_STATUS = {408, 409, 429}
PROBE_TIMEOUT = 2.0  # seconds to connect, and again to answer GET /models (any answer, even 404, counts)


class OpenAIBackend:
    name = "openai"

    def __init__(self, settings: LLMSettings):
        self.settings = settings
        self.max_concurrency = settings.max_concurrency
        self._client = None  # `openai` takes a second to import: only when a request is sent
        self._probe_lock = threading.Lock()
        self._probed: Exception | bool = False  # True (answers) or the EndpointUnreachable to raise again

    @property
    def client(self):
        if self._client is None:
            import openai

            self._client = openai.OpenAI(
                base_url=self.settings.base_url, api_key=self.settings.api_key, timeout=self.settings.timeout, max_retries=0
            )
        return self._client

    @property
    def base_url(self) -> str:
        """Where requests go, as the openai client decides it (argument, OPENAI_BASE_URL, OpenAI)."""
        return self.settings.base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"

    def identity(self) -> dict:
        return {"backend": self.name, "model": self.settings.model, "revision": self.settings.revision}

    def generate(self, requests: list[LLMRequest], on_progress=None, on_result=None) -> list[LLMResponse]:
        """One call after another; `on_result(i, response)` as each answer arrives."""
        out = []
        for i, request in enumerate(requests):
            out.append(self.call(request))
            if on_result:
                on_result(i, out[-1])
            if on_progress:
                on_progress(1)
        return out

    def check_reachable(self) -> None:
        """Raise EndpointUnreachable when the server does not accept connections: one probe,
        instead of every study's retries (minutes) ending in the same connection error."""
        with self._probe_lock:
            if self._probed is True:
                return
            if isinstance(self._probed, Exception):
                raise self._probed
            self._probed = self._probe()
            if isinstance(self._probed, Exception):
                raise self._probed

    def _probe(self) -> Exception | bool:
        """GET /models with short timeouts, through httpx as the openai client sends (proxies
        from the environment apply). Any HTTP answer, even 404, means a server is there."""
        import httpx

        from rexrank.models.advice import EndpointUnreachable

        url = self.base_url.rstrip("/") + "/models"
        try:
            with httpx.Client(timeout=PROBE_TIMEOUT) as probe:
                probe.get(url, headers={"Authorization": f"Bearer {self.settings.api_key}"})
        except httpx.TimeoutException:
            return EndpointUnreachable(self.base_url, f"does not answer within {PROBE_TIMEOUT:g} s")
        except httpx.TransportError as exc:  # refused, unknown host
            return EndpointUnreachable(self.base_url, f"cannot be reached ({type(exc).__name__}: {_short(str(exc))})")
        except httpx.HTTPError:
            pass  # it answered something
        return True

    def call(self, request: LLMRequest) -> LLMResponse:
        self.check_reachable()
        import openai  # imported once, by then
        retries = 0
        while True:
            try:
                return self._call_once(request, retries)
            except Exception as exc:  # classified below; anything unknown is a hard failure
                reason, retryable, wait = self._classify(exc, openai)
            if not retryable or retries >= self.settings.max_retries:
                tried = f" after {retries + 1} attempts" if retries else ""
                return LLMResponse(None, retries=retries, error=f"{reason}{tried}")
            delay = wait if wait is not None else self.settings.backoff * (2**retries)
            time.sleep(min(delay, self.settings.max_backoff))
            retries += 1

    def _classify(self, exc: Exception, openai) -> tuple[str, bool, float | None]:
        if isinstance(exc, openai.APITimeoutError):
            return f"timeout after {self.settings.timeout:g} s", True, None
        if isinstance(exc, openai.APIConnectionError):
            return f"connection error: {exc}", True, None
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            retryable = status in RETRY_STATUS or status >= 500
            return f"HTTP {status}: {_short(exc.message)}", retryable, _retry_after(exc.response)
        if isinstance(exc, (openai.APIResponseValidationError, ValueError, KeyError, IndexError, TypeError, AttributeError)):
            # a 200 whose body is not a well-formed completion object (proxy hiccup, broken server)
            return f"malformed response body: {type(exc).__name__}: {_short(str(exc))}", True, None
        return f"{type(exc).__name__}: {_short(str(exc))}", False, None

    def _call_once(self, request: LLMRequest, retries: int) -> LLMResponse:
        params = request.param_dict
        model = self.settings.model
        if request.kind == "chat":
            out = self.client.chat.completions.create(model=model, messages=request.message_dicts, **params)
            choice = out.choices[0]
            text = choice.message.content
        elif request.kind == "completion":
            # token ids when the request has them (vLLM's completions endpoint takes a list of ids)
            prompt = list(request.prompt_ids) if request.prompt_ids else request.prompt
            out = self.client.completions.create(model=model, prompt=prompt, **params)
            choice = out.choices[0]
            text = choice.text
        else:
            raise ValueError(f"unknown request kind {request.kind!r}")
        if text is None:
            raise ValueError("response has no text")
        usage = out.usage
        return LLMResponse(
            text,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            finish_reason=choice.finish_reason,
            retries=retries,
        )


def _retry_after(response) -> float | None:
    try:
        value = response.headers.get("retry-after")
        return float(value) if value is not None else None
    except (AttributeError, ValueError):
        return None


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
