"""One client layer for the LLM-judged metrics (GREEN, FineRadScore, SPEC-CXR).

Two backends behind one interface: any OpenAI-compatible server through the `openai`
package (OpenAI, Azure's v1 endpoint, vLLM, ...) and local `transformers` checkpoints.
`LLMRunner` adds what every metric needs around them: an on-disk response cache, a
concurrency limit, progress, and token/cost accounting. Calls that fail are returned as
responses with `error` set, never raised mid-run, so a metric can report them per study.
"""
from rexrank.llm.settings import LLMSettings
from rexrank.llm.types import LLMRequest, LLMResponse
from rexrank.llm.runner import LLMRunner, build_backend

__all__ = ["LLMSettings", "LLMRequest", "LLMResponse", "LLMRunner", "build_backend"]
