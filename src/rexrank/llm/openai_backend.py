"""OpenAI-compatible backend (OpenAI, Azure v1 endpoint, vLLM, llama.cpp server, ...).

The `openai` client's own retries are switched off so that every retry is counted and
reported; we retry 408/409/429/5xx, timeouts and connection errors with exponential
backoff (a server's Retry-After wins, capped), and fail fast on other 4xx (bad model
name, bad key): retrying those only burns time.
"""
from __future__ import annotations

import time

from rexrank.llm.settings import LLMSettings
from rexrank.llm.types import LLMRequest, LLMResponse

RETRY_STATUS = {408, 409, 429}


class OpenAIBackend:
    name = "openai"

    def __init__(self, settings: LLMSettings):
        import openai

        self.settings = settings
        self._openai = openai
        self.client = openai.OpenAI(
            base_url=settings.base_url, api_key=settings.api_key, timeout=settings.timeout, max_retries=0
        )
        self.max_concurrency = settings.max_concurrency

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

    def call(self, request: LLMRequest) -> LLMResponse:
        openai = self._openai
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
            out = self.client.completions.create(model=model, prompt=request.prompt, **params)
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
