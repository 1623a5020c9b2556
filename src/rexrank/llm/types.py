"""Requests and responses exchanged between metrics, the runner and the backends."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class LLMRequest:
    """One call. `kind` "chat" sends `messages` (role/content dicts); "completion" sends
    the raw `prompt` text (GREEN's checkpoint needs its own chat rendering).
    `params` are generation parameters (temperature, seed, max_tokens, ...)."""

    kind: str
    messages: tuple = ()
    prompt: str = ""
    params: tuple = ()  # sorted (key, value) pairs, so the request is hashable
    prompt_ids: tuple = ()  # completion: the prompt as token ids, sent instead of the text (the server tokenises nothing)

    @staticmethod
    def chat(messages: list[dict], **params: Any) -> "LLMRequest":
        return LLMRequest("chat", messages=tuple((m["role"], m["content"]) for m in messages), params=_freeze(params))

    @staticmethod
    def completion(prompt: str, *, prompt_ids: list[int] | None = None, **params: Any) -> "LLMRequest":
        return LLMRequest("completion", prompt=prompt, params=_freeze(params), prompt_ids=tuple(prompt_ids or ()))

    @property
    def message_dicts(self) -> list[dict]:
        return [{"role": role, "content": content} for role, content in self.messages]

    @property
    def param_dict(self) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in self.params}

    def key_payload(self) -> dict:
        """Everything about the request that changes the answer (the cache key's request part)."""
        payload = {"kind": self.kind, "messages": self.message_dicts, "prompt": self.prompt, "params": self.param_dict}
        if self.prompt_ids:  # only then: the keys of text requests stay those cached before
            payload["prompt_ids"] = list(self.prompt_ids)
        return payload


def _freeze(params: dict) -> tuple:
    # values stored as JSON so dict-valued params (response_format) stay hashable
    return tuple(sorted((k, json.dumps(v, sort_keys=True)) for k, v in params.items() if v is not None))


@dataclass
class LLMResponse:
    text: str | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    cached: bool = False
    retries: int = 0
    error: str | None = None  # set when the call ultimately failed; text is then None
    completion_ids: list[int] | None = None  # local generation: the greedy ids (not cached; for checks)

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_cache(self) -> dict:
        return {
            "text": self.text,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "finish_reason": self.finish_reason,
        }


@dataclass
class Usage:
    """Token and cost accounting for one metric run."""

    requests: int = 0  # requests sent to the backend (cache misses), retries not included
    cache_hits: int = 0
    retries: int = 0
    failed: int = 0
    prompt_tokens: int = 0  # tokens of fresh calls (what was paid for)
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0  # tokens of answers read from the cache (not paid again)
    cached_completion_tokens: int = 0
    price_input_per_mtok: float | None = None
    price_output_per_mtok: float | None = None
    extra: dict = field(default_factory=dict)

    def add(self, response: LLMResponse) -> None:
        if response.cached:
            self.cache_hits += 1
            self.cached_prompt_tokens += response.prompt_tokens
            self.cached_completion_tokens += response.completion_tokens
            return
        self.requests += 1
        self.retries += response.retries
        if not response.ok:
            self.failed += 1
        self.prompt_tokens += response.prompt_tokens
        self.completion_tokens += response.completion_tokens

    @property
    def cost_usd(self) -> float | None:
        if self.price_input_per_mtok is None or self.price_output_per_mtok is None:
            return None
        return (self.prompt_tokens * self.price_input_per_mtok + self.completion_tokens * self.price_output_per_mtok) / 1e6

    def to_dict(self) -> dict:
        return {
            "requests": self.requests,
            "cache_hits": self.cache_hits,
            "retries": self.retries,
            "failed_calls": self.failed,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_prompt_tokens": self.cached_prompt_tokens,
            "cached_completion_tokens": self.cached_completion_tokens,
            "price_input_per_mtok": self.price_input_per_mtok,
            "price_output_per_mtok": self.price_output_per_mtok,
            "cost_usd": self.cost_usd,
            **self.extra,
        }
