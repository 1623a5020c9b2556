"""GREEN (Ostmeier et al., Findings of EMNLP 2024) as the official inference computes it.

Reference: shared metrics_llm.md §1; Stanford-AIMI/GREEN (MIT per setup.py). Two paths,
one prompt text: the local `transformers` checkpoint (default
StanfordAIMI/GREEN-radllama2-7b) or a completions endpoint serving it (vLLM). Greedy,
total length (prompt + completion) 2048 tokens.

Failures: a call that fails, or a completion without a [Matched Findings] section, is NaN
and listed in `failures` (the official code would silently score it 0; pass
unparseable="zero" for that behaviour — such studies are still listed in details).
"""
from __future__ import annotations

import math

import numpy as np

from rexrank.errors import MetricError
from rexrank.llm import LLMRequest
from rexrank.metrics.base import MetricResult
from rexrank.metrics.green_text import (
    MAX_WORDS,
    SUB_CATEGORIES,
    SUB_KEYS,
    clean_completion,
    make_prompt,
    render_model_input,
    score_completion,
)
from rexrank.metrics.llm_common import LLMMetric, failure_report

DEFAULT_MODEL = "StanfordAIMI/GREEN-radllama2-7b"
TOTAL_LENGTH = 2048
FALLBACK_MAX_TOKENS = 1024  # completions endpoint without a local tokenizer (see card)


class Green(LLMMetric):
    name = "green"
    version = "1"
    description = (
        "GREEN: a fine-tuned LLM counts clinically significant errors (six categories) and matched "
        "findings between candidate and reference; score = matched / (matched + significant errors)."
    )
    citation = (
        "@inproceedings{ostmeier2024green, title={GREEN: Generative Radiology Report Evaluation and Error Notation},"
        " author={Ostmeier, Sophie and Xu, Justin and Chen, Zhihong and others}, booktitle={Findings of EMNLP},"
        " pages={374--390}, year={2024}}"
    )
    higher_is_better = True
    default_backend = "transformers"
    default_model = DEFAULT_MODEL
    backend_kwargs = {"licence": "llama2 (model card of StanfordAIMI/GREEN-RadLlama2-7b)"}

    def __init__(
        self,
        *,
        max_length: int = TOTAL_LENGTH,
        max_words: int = MAX_WORDS,
        max_new_tokens: int | None = None,
        tokenizer_path: str | None = None,
        unparseable: str = "fail",
        keep_completions: bool = False,
        **llm_options,
    ):
        super().__init__(**llm_options)
        if unparseable not in ("fail", "zero"):
            raise MetricError(f"green: unparseable must be 'fail' or 'zero', got {unparseable!r}")
        self.max_length = max_length
        self.max_words = max_words
        self.max_new_tokens = max_new_tokens  # extra cap on the completion; None = official (total length only)
        self.tokenizer_path = tokenizer_path
        self.unparseable = unparseable
        self.keep_completions = keep_completions
        self._endpoint_tokenizer = None

    def config(self) -> dict:
        return {
            **self.llm_config(),
            "max_length": self.max_length,
            "max_words": self.max_words,
            "max_new_tokens": self.max_new_tokens,
            "length_cap": self._length_cap_description(),
            "unparseable": self.unparseable,
            "prompt": "Stanford-AIMI/GREEN make_prompt (trained prompt), official chat rendering",
            "decoding": "greedy",
        }

    def _length_cap_description(self) -> str:
        if self.settings.backend == "transformers" or self.tokenizer_path:
            return f"prompt + completion <= {self.max_length} tokens (official)"
        return f"completion <= {self.max_new_tokens or FALLBACK_MAX_TOKENS} tokens (no local tokenizer to count the prompt)"

    # -- requests ---------------------------------------------------------------------
    def _requests(self, predictions: list[str], references: list[str]) -> list[LLMRequest]:
        texts = [render_model_input(make_prompt(r, p, self.max_words)) for p, r in zip(predictions, references)]
        if self.settings.backend == "transformers":
            return [LLMRequest.completion(t, max_length=self.max_length, max_tokens=self.max_new_tokens) for t in texts]
        out = []
        for text in texts:
            if self.tokenizer_path:
                # exact official cap: 2048 minus the prompt's own tokens (BOS included)
                room = self.max_length - len(self._tokenizer()(text, add_special_tokens=True)["input_ids"])
                max_tokens = min(room, self.max_new_tokens) if self.max_new_tokens else room
            else:
                max_tokens = self.max_new_tokens or FALLBACK_MAX_TOKENS
            out.append(LLMRequest.completion(text, temperature=0.0, max_tokens=max(max_tokens, 1), seed=self.settings.seed))
        return out

    def _tokenizer(self):
        if self._endpoint_tokenizer is None:
            from transformers import AutoTokenizer

            self._endpoint_tokenizer = AutoTokenizer.from_pretrained(self.tokenizer_path)
        return self._endpoint_tokenizer

    # -- scoring ----------------------------------------------------------------------
    def _score(self, predictions: list[str], references: list[str]) -> MetricResult:
        runner = self.new_run()
        responses = runner.run(self._requests(predictions, references), desc="GREEN")
        n = len(predictions)
        cols = {k: np.full(n, math.nan) for k in ("green", "green_matched_findings", "green_significant_errors", "green_insignificant_errors")}
        subs = {f"green_sig_{k}": np.full(n, math.nan) for k in SUB_KEYS}
        failures: dict[int, str] = {}
        unparseable: list[int] = []
        completions: list[str | None] = []
        for i, response in enumerate(responses):
            if not response.ok:
                failures[i] = f"LLM call failed: {response.error}"
                completions.append(None)
                continue
            completion = clean_completion(response.text or "")
            completions.append(completion)
            parsed = score_completion(completion)
            if not parsed.complete:
                unparseable.append(i)
                if self.unparseable == "fail":
                    reason = "no [Matched Findings] section in the completion"
                    if response.finish_reason == "length":
                        reason += " (generation hit the length cap)"
                    failures[i] = reason
                    continue
            cols["green"][i] = parsed.score
            cols["green_matched_findings"][i] = parsed.matched
            cols["green_significant_errors"][i] = sum(parsed.significant)
            cols["green_insignificant_errors"][i] = sum(parsed.insignificant)
            for key, count in zip(SUB_KEYS, parsed.significant):
                subs[f"green_sig_{key}"][i] = count
        columns = {**cols, **subs}
        result = self._result_from_columns(columns)
        scored = ~np.isnan(cols["green"])
        # official summary: population std, and per sub-category the share of reports with no such error
        result.corpus["green_std"] = float(np.std(cols["green"][scored])) if scored.any() else math.nan
        for key in SUB_KEYS:
            values = subs[f"green_sig_{key}"][scored]
            result.corpus[f"green_zero_error_rate_{key}"] = float(np.mean(values == 0)) if values.size else math.nan
        result.failures = failures
        result.details = {
            "n_scored": int(scored.sum()),
            **failure_report(failures),
            "n_unparseable": len(unparseable),
            "unparseable_positions": unparseable,
            "sub_categories": dict(zip(SUB_KEYS, SUB_CATEGORIES)),
            "llm_usage": runner.usage.to_dict(),
        }
        if self.keep_completions:
            result.details["completions"] = completions
        return result

