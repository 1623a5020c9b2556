"""GREEN (Ostmeier et al., Findings of EMNLP 2024) as the official inference computes it.

Reference: shared metrics_llm.md §1; Stanford-AIMI/GREEN (MIT per setup.py). Two paths,
one prompt text: the local `transformers` checkpoint (default
StanfordAIMI/GREEN-radllama2-7b) or a completions endpoint serving it (vLLM). Greedy.

Official by default:
- length cap: the official `generate(max_length=2048)` runs over batches of 8 in input
  order, so a completion may use 2048 minus the padded width (longest prompt) of its
  batch; `batching="by_length"` batches by prompt length instead (faster, less padding),
  capping each completion at 2048 minus its own sorted batch's width: the same on short
  reports, possibly shorter or longer completions on long ones;
- prompt ids as transformers 4.x built them from the checkpoint's SentencePiece folder
  (`rexrank.llm.llama_tokenizer`);
- the weights in float16 on every device, CPU included (`dtype="float32"` is the named
  option);
- decoding with transformers' space clean-up ("errors: 2 . x" counts 2);
- a completion without a [Matched Findings] section scores 0 and is counted in the mean,
  as officially; it is reported (`n_unparseable`, `unparseable_positions`; `rexrank
  score` adds the study ids). `unparseable="fail"` makes it NaN and a failure instead.
A call that failed (HTTP error, timeout after retries, generation error) is never
scored: NaN, listed in `failures`.

Through a completions endpoint (vLLM) the prompt goes as the official token ids (built
locally by GREEN's tokenizer: `tokenizer_path`, else the checkpoint's tokenizer files from
the hub cache or the Hub), so the server tokenises nothing; `endpoint_prompt="text"` sends
the text instead, for servers that do not take ids. Where the tokenizer cannot be loaded
the text goes, the log says so, and the config's `endpoint_prompt` records the route.
"""
from __future__ import annotations

import logging
import math
import re
from dataclasses import replace

import numpy as np

from rexrank.catalogue import GREEN
from rexrank.errors import MetricError
from rexrank.llm import LLMRequest
from rexrank.metrics.base import MetricResult, ShardRule, StudyRows
from rexrank.metrics.green_text import (
    MAX_WORDS,
    SUB_CATEGORIES,
    SUB_KEYS,
    clean_completion,
    clean_up_tokenization,
    make_prompt,
    render_model_input,
    score_completion,
)
from rexrank.metrics.llm_common import LLMMetric, failure_report, usage_report, usage_rows

DEFAULT_MODEL = GREEN.repo_id
TOTAL_LENGTH = 2048
FALLBACK_MAX_TOKENS = 1024  # completions endpoint without a local tokenizer (see card)
# official: `from_pretrained(torch_dtype=torch.float16)` on GPU and with cpu=True alike
OFFICIAL_DTYPE = "float16"
DTYPES = ("float16", "bfloat16", "float32")
UNPARSEABLE = ("zero", "fail")
BATCHING = ("official", "by_length")
ENDPOINT_PROMPTS = ("ids", "text")
TOKENIZER_FILES = ("tokenizer.model", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json")
log = logging.getLogger(__name__)


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
    backend_kwargs = {"licence": GREEN.licence}

    def __init__(
        self,
        *,
        max_length: int = TOTAL_LENGTH,
        max_words: int = MAX_WORDS,
        max_new_tokens: int | None = None,
        tokenizer_path: str | None = None,
        unparseable: str = "zero",
        batching: str = "official",
        endpoint_prompt: str = "ids",
        keep_completions: bool = False,
        **llm_options,
    ):
        super().__init__(**llm_options)
        if endpoint_prompt not in ENDPOINT_PROMPTS:
            raise MetricError(f"green: endpoint_prompt must be one of {', '.join(map(repr, ENDPOINT_PROMPTS))}, got {endpoint_prompt!r}")
        self.endpoint_prompt = endpoint_prompt
        if unparseable not in UNPARSEABLE:
            raise MetricError(f"green: unparseable must be one of {', '.join(map(repr, UNPARSEABLE))}, got {unparseable!r}")
        if batching not in BATCHING:
            raise MetricError(f"green: batching must be one of {', '.join(map(repr, BATCHING))}, got {batching!r}")
        self.batching = batching
        if self.settings.dtype is None:
            self.settings = replace(self.settings, dtype=OFFICIAL_DTYPE)
        elif self.settings.dtype not in DTYPES:
            raise MetricError(f"green: dtype must be one of {', '.join(map(repr, DTYPES))}, got {self.settings.dtype!r}")
        # per instance: the official batches keep the input order
        self.backend_kwargs = {**type(self).backend_kwargs, "legacy_llama_tokenizer": True, "sort_by_length": batching == "by_length"}
        self.max_length = max_length
        self.max_words = max_words
        self.max_new_tokens = max_new_tokens  # extra cap on the completion; None = official (total length only)
        self.tokenizer_path = tokenizer_path
        self.unparseable = unparseable
        self.keep_completions = keep_completions
        self._endpoint_tokenizer = None
        self._tokenizer_problem: str | None = None  # why GREEN's tokenizer could not be loaded for the endpoint

    def config(self) -> dict:
        return {
            **self.llm_config(),
            "max_length": self.max_length,
            "max_words": self.max_words,
            "max_new_tokens": self.max_new_tokens,
            "length_cap": self._length_cap_description(),
            "batching": self.batching,
            "endpoint_prompt": self._prompt_route(),
            "unparseable": self.unparseable,
            "prompt": "Stanford-AIMI/GREEN make_prompt (trained prompt), official chat rendering, transformers-4 ids",
            "decoding": "greedy, transformers' space clean-up",
        }

    def _prompt_route(self) -> str | None:
        """How an endpoint receives the prompt (None on the local path)."""
        if self.settings.backend == "transformers":
            return None
        if self._tokenizer_problem:
            return f"text: GREEN's tokenizer could not be loaded ({self._tokenizer_problem})"
        if self.endpoint_prompt == "text":
            return "text (endpoint_prompt='text'; the server tokenises it)"
        return "token ids (GREEN's tokenizer, transformers-4 Llama rule)"

    def _length_cap_description(self) -> str:
        if not self._tokenizer_problem:  # (only an endpoint run looks for a tokenizer of its own)
            if self.batching == "official":
                return f"{self.max_length} - padded width of the study's batch of {self.settings.batch_size} in input order (official)"
            if self.settings.backend == "transformers":
                return f"{self.max_length} - padded width of the study's batch of prompts of similar length"
            return f"{self.max_length} - the prompt's own length"
        return f"completion <= {self.max_new_tokens or FALLBACK_MAX_TOKENS} tokens (no local tokenizer to count the prompt)"

    # -- requests ---------------------------------------------------------------------
    def _requests(self, predictions: list[str], references: list[str]) -> tuple[list[LLMRequest | None], dict[int, str]]:
        """One request per study (None where the prompt leaves no room), and those failures."""
        texts = [render_model_input(make_prompt(r, p, self.max_words)) for p, r in zip(predictions, references)]
        local = self.settings.backend == "transformers"
        if local and self.batching == "by_length":
            # the backend sorts by length and caps each batch at max_length - its width
            params = dict(max_length=self.max_length, max_tokens=self.max_new_tokens, clean_up_tokenization_spaces=False)
            return [LLMRequest.completion(t, **params) for t in texts], {}
        if not local:
            self.runner.backend.check_reachable()  # a dead endpoint fails at once, before any tokenizer lookup
        prompt_ids = self._prompt_ids(texts)
        if prompt_ids is None:  # an endpoint without GREEN's tokenizer: text, and no prompt length to budget with
            cap = self.max_new_tokens or FALLBACK_MAX_TOKENS
            return [self._endpoint_request(t, cap) for t in texts], {}
        lengths = [len(ids) for ids in prompt_ids]
        if self.batching == "official":
            caps = official_caps(lengths, self.settings.batch_size, self.max_length)
        else:  # a server batches as it likes: each prompt's own room
            caps = [self.max_length - n for n in lengths]
        requests: list[LLMRequest | None] = []
        failures: dict[int, str] = {}
        for i, (text, cap, ids) in enumerate(zip(texts, caps, prompt_ids)):
            n = len(ids)
            if self.max_new_tokens:
                cap = min(cap, self.max_new_tokens)
            if cap < 1:
                failures[i] = f"prompt is {n} tokens, no room under the {self.max_length}-token limit"
                requests.append(None)
            elif local:
                requests.append(LLMRequest.completion(text, max_tokens=cap, clean_up_tokenization_spaces=False))
            else:
                requests.append(self._endpoint_request(text, cap, ids if self.endpoint_prompt == "ids" else None))
        return requests, failures

    def _endpoint_request(self, text: str, cap: int, ids: list[int] | None = None) -> LLMRequest:
        # the text stays in the request (and its cache key) beside the ids: it names the study
        return LLMRequest.completion(text, prompt_ids=ids, temperature=0.0, max_tokens=cap, seed=self.settings.seed)

    def _prompt_ids(self, texts: list[str]) -> list[list[int]] | None:
        """The checkpoint's prompt ids (BOS included), from the local tokenizer; None for an
        endpoint where GREEN's tokenizer cannot be loaded."""
        if self.settings.backend == "transformers":
            backend = self.runner.backend
            return [backend.prompt_ids(LLMRequest.completion(t)) for t in texts]
        tokenizer = self._tokenizer()
        if tokenizer is None:
            return None
        return [tokenizer(t, add_special_tokens=True)["input_ids"] for t in texts]

    def _tokenizer(self):
        """GREEN's tokenizer for an endpoint run, or None (said in the log and the config)."""
        if self._endpoint_tokenizer is None and self._tokenizer_problem is None:
            if self.tokenizer_path:  # given: it must load
                try:
                    self._endpoint_tokenizer = load_tokenizer(self.tokenizer_path)
                except Exception as exc:
                    raise MetricError(f"green: tokenizer_path={self.tokenizer_path!r} does not hold GREEN's tokenizer "
                                      f"({type(exc).__name__}: {exc}); give the checkpoint folder with its tokenizer "
                                      "files, or leave tokenizer_path out") from None
                return self._endpoint_tokenizer
            try:
                self._endpoint_tokenizer = load_tokenizer(self._hub_tokenizer_folder())
            except Exception as exc:  # not downloaded and offline, incomplete files: the text goes
                # no machine's path in what the result records; a repo id ("StanfordAIMI/GREEN-...")
                # is not a path: a path's first slash starts a word
                self._tokenizer_problem = re.sub(r"(?<![\w.-])/[^\s'\"]+", "<path>",
                                                 " ".join(f"{type(exc).__name__}: {exc}".split()))[:300]
                log.warning("green: sending the prompts as text, not as GREEN's token ids: its tokenizer could not be "
                            "loaded (%s); pass tokenizer_path=<folder with GREEN's tokenizer files> to send the ids",
                            self._tokenizer_problem)
        return self._endpoint_tokenizer

    def _hub_tokenizer_folder(self) -> str:
        """GREEN's tokenizer files: from the local hub cache, else fetched alone (a few hundred kB)."""
        from rexrank.models.checkpoints import cached_path, hub_unavailable

        cached = cached_path(GREEN)
        if cached is not None and (cached / "tokenizer_config.json").is_file():
            return str(cached)
        why = hub_unavailable()
        if why:
            raise MetricError(f"{GREEN.repo_id}'s tokenizer is not in the local hub cache and {why}")
        from huggingface_hub import snapshot_download

        return snapshot_download(GREEN.repo_id, revision=GREEN.revision, allow_patterns=list(TOKENIZER_FILES), etag_timeout=10)

    # -- scoring ----------------------------------------------------------------------
    def _score(self, predictions: list[str], references: list[str]) -> StudyRows:
        runner = self.new_run()
        requests, failures = self._requests(predictions, references)
        sent = [i for i, request in enumerate(requests) if request is not None]
        responses: list = [None] * len(requests)
        # the official batches of 8 in input order, whole even when some answers are cached or
        # repeated: each study keeps the neighbours and padded width of an uninterrupted run
        batches = [i // self.settings.batch_size for i in sent] if self.batching == "official" else None
        for i, response in zip(sent, runner.run([requests[i] for i in sent], desc="GREEN", batches=batches)):
            responses[i] = response
        n = len(predictions)
        cols = {k: np.full(n, math.nan) for k in ("green", "green_matched_findings", "green_significant_errors", "green_insignificant_errors")}
        subs = {f"green_sig_{k}": np.full(n, math.nan) for k in SUB_KEYS}
        unparseable: list[int] = []
        completions: list[str | None] = []
        for i, response in enumerate(responses):
            if response is None:  # no room for a completion (in failures already)
                completions.append(None)
                continue
            if not response.ok:
                failures[i] = f"LLM call failed: {response.error}"
                completions.append(None)
                continue
            completion = clean_completion(clean_up_tokenization(response.text or ""))
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
        flagged = set(unparseable)
        side: dict = {"unparseable": [i in flagged for i in range(n)]}
        if self.keep_completions:
            side["completion"] = completions
        tallies, settings = usage_rows(runner)
        return self._rows({**cols, **subs}, side=side, failures=failures, tallies=tallies, settings=settings)

    @classmethod
    def aggregate(cls, rows: StudyRows) -> MetricResult:
        result = super().aggregate(rows)
        green = rows.columns["green"]
        scored = ~np.isnan(green)
        # official summary: population std, and per sub-category the share of reports with no such error
        result.corpus["green_std"] = float(np.std(green[scored])) if scored.any() else math.nan
        for key in SUB_KEYS:
            values = rows.columns[f"green_sig_{key}"][scored]
            result.corpus[f"green_zero_error_rate_{key}"] = float(np.mean(values == 0)) if values.size else math.nan
        unparseable = [i for i, flag in enumerate(rows.side["unparseable"]) if flag]
        result.details = {
            "n_scored": int(scored.sum()),
            **failure_report(rows.failures),
            "n_unparseable": len(unparseable),
            "unparseable_positions": unparseable,
            "sub_categories": dict(zip(SUB_KEYS, SUB_CATEGORIES)),
            "llm_usage": usage_report(rows),
        }
        if "completion" in rows.side:
            result.details["completions"] = list(rows.side["completion"])
        return result

    @classmethod
    def shard_rule(cls, options: dict) -> ShardRule:
        """The official batches of `batch_size` in input order (their padded width caps each
        completion) stay whole on boundaries at their multiples. Sorted by length
        (`batching="by_length"`), a local model's batches mix the whole request's studies;
        an endpoint caps each prompt by its own length."""
        settings = cls.planned_settings(options)
        if options.get("batching", "official") == "official":
            return ShardRule(align=settings.batch_size)
        if settings.backend == "transformers":
            return ShardRule(refusal="batching='by_length' batches the whole request's prompts sorted by length "
                                     "(batching='official', the default, shards)")
        return ShardRule()


def load_tokenizer(folder: str):
    """GREEN's tokenizer as the official run built its ids (the transformers-4 Llama rule for
    a SentencePiece-only folder, as GREEN-RadLlama2-7b's)."""
    from rexrank.llm.llama_tokenizer import LegacyLlamaTokenizer, needs_legacy_tokenizer

    if needs_legacy_tokenizer(folder):
        return LegacyLlamaTokenizer(folder)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder)


def official_caps(lengths: list[int], batch_size: int, max_length: int) -> list[int]:
    """Completion budget per study: `max_length` minus the longest prompt of its batch,
    batches taken in input order (the official `generate(max_length=...)` on left-padded
    batches)."""
    caps = []
    for start in range(0, len(lengths), batch_size):
        width = max(lengths[start : start + batch_size])
        caps += [max_length - width] * len(lengths[start : start + batch_size])
    return caps
