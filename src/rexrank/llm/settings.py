"""Settings shared by the LLM-judged metrics, from arguments or the environment.

Arguments win over environment variables:
    REXRANK_LLM_BACKEND   "openai" (any OpenAI-compatible server) or "transformers"
    REXRANK_LLM_BASE_URL  e.g. http://localhost:8000/v1 (vLLM); falls back to OPENAI_BASE_URL
    REXRANK_LLM_API_KEY   falls back to OPENAI_API_KEY
    REXRANK_LLM_MODEL     model name on the server, or hub id / local path for transformers
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field

from rexrank.errors import MetricError

BACKENDS = ("openai", "transformers")


@dataclass
class LLMSettings:
    backend: str | None = None
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    revision: str | None = None  # hub revision (transformers) or a label for the served weights (openai)
    model_path: str | None = None  # local weights folder (transformers), wins over the hub
    max_concurrency: int = 8
    timeout: float = 300.0  # seconds per HTTP request
    max_retries: int = 5  # retries on 429 / 5xx / timeouts / connection errors
    backoff: float = 2.0  # first retry delay in seconds, doubled each time (Retry-After wins)
    max_backoff: float = 60.0
    seed: int | None = 0
    cache: bool = True
    cache_dir: str | None = None
    price_input_per_mtok: float | None = None  # USD per million prompt tokens, for the cost report
    price_output_per_mtok: float | None = None
    device: str | None = None  # transformers: cuda / cpu
    dtype: str | None = None  # transformers: float16 / bfloat16 / float32 (default fp16 on GPU, fp32 on CPU)
    batch_size: int = 8  # transformers
    # transformers: batches generated at once, each whole by one replica (a process sharing the weights; same ids
    # as one after another); None = as many as the free GPU memory holds, 1 on the CPU
    replicas: int | None = None

    def __post_init__(self) -> None:
        if self.max_concurrency < 1:
            raise MetricError(f"max_concurrency must be >= 1, got {self.max_concurrency}")
        if self.max_retries < 0:
            raise MetricError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.timeout <= 0:
            raise MetricError(f"timeout must be > 0 seconds, got {self.timeout}")
        if self.batch_size < 1:
            raise MetricError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.replicas is not None and (isinstance(self.replicas, bool) or not isinstance(self.replicas, int) or self.replicas < 1):
            raise MetricError(f"replicas must be a positive integer (or None: as many as GPU memory holds), got {self.replicas!r}")

    def chosen_backend(self, default_backend: str) -> str:
        """The backend these settings and the environment choose (an endpoint's address
        chooses "openai"), before any check."""
        base_url = self.base_url or os.environ.get("REXRANK_LLM_BASE_URL") or None
        return self.backend or os.environ.get("REXRANK_LLM_BACKEND") or ("openai" if base_url else default_backend)

    def resolved(self, *, default_backend: str, default_model: str | None = None) -> "LLMSettings":
        """A copy with environment fallbacks and defaults applied, checked."""
        env = os.environ
        base_url = self.base_url or env.get("REXRANK_LLM_BASE_URL") or None
        backend = self.chosen_backend(default_backend)
        if backend not in BACKENDS:
            raise MetricError(f"unknown LLM backend {backend!r}; use one of {', '.join(BACKENDS)}")
        model = self.model or env.get("REXRANK_LLM_MODEL") or default_model
        if not model and not (backend == "transformers" and self.model_path):
            raise MetricError(
                f"no LLM model given for the {backend} backend: pass model=... (CLI --llm-model) "
                "or set REXRANK_LLM_MODEL"
            )
        api_key = self.api_key or env.get("REXRANK_LLM_API_KEY") or env.get("OPENAI_API_KEY")
        if backend == "openai" and not api_key:
            if not (base_url or env.get("OPENAI_BASE_URL")):
                raise MetricError(
                    "the openai backend needs an API key for api.openai.com: pass api_key=... or set "
                    "REXRANK_LLM_API_KEY / OPENAI_API_KEY (or give base_url for a local server)"
                )
            api_key = "EMPTY"  # local servers (vLLM) accept any key
        values = asdict(self)
        values.update(backend=backend, model=model, base_url=base_url, api_key=api_key)
        return LLMSettings(**values)

    def provenance(self) -> dict:
        """What goes into a metric's config: no key, no machine-specific paths beyond the model."""
        return {
            "backend": self.backend,
            "model": self.model,
            "revision": self.revision,
            "model_path": self.model_path,
            "base_url": self.base_url,
            "seed": self.seed,
            "dtype": self.dtype,
        }
