"""CRIMSON (Baharoon et al., arXiv 2603.06183) as crimson-score 0.2.0 computes it.

Reference: shared metrics_llm.md §4; PyPI crimson-score 0.2.0 = github rajpurkarlab/CRIMSON
07e3331 (MIT). An LLM judge lists the abnormal findings of reference and candidate with a
clinical significance each, matches them and names false, missing and attribute errors;
the score (rexrank.metrics.crimson_text.score_evaluation) lies in (-1, 1].

Two paths, one prompt: the local `transformers` checkpoint (default, the fine-tuned
rajpurkarlab/medgemma-4b-it-crimson) or an OpenAI-compatible endpoint (a vLLM server of
that checkpoint, or a general model such as gpt-5.2).

Official by default:
- the system message and prompt of crimson-score; for the fine-tuned judge (local or
  served) without the guideline sections it was trained without, for any other model with
  them (`guidelines=True/False` forces either);
- local: the checkpoint's chat template, bfloat16, one study per batch, greedy, up to
  8,192 new tokens, stopping at the generation config's end-of-turn ids; endpoint serving
  the fine-tuned judge: temperature 0, max_tokens 8,192 (the official vLLM path); any other
  endpoint model: temperature 0, seed 42, JSON mode (the official OpenAI path);
- an answer that is not JSON even after the official repairs, or that the official scorer
  cannot read, is NaN and listed (officially that study's result is None), as is a failed
  call; empty reports are sent to the judge like any other (no special case officially);
- no patient context. `patient_context` (one dict per study, e.g. {"Age": 71,
  "Indication": "dyspnea"}) adds it as the official prompt does.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from rexrank.errors import MetricError
from rexrank.llm import LLMRequest
from rexrank.catalogue import CRIMSON
from rexrank.metrics.base import MetricResult, StudyRows
from rexrank.metrics.crimson_text import ATTRIBUTE_TYPES, UnreadableAnswer, messages, read_answer, score_evaluation
from rexrank.metrics.llm_common import LLMMetric, failure_report, usage_report, usage_rows

DEFAULT_MODEL = CRIMSON.repo_id
DEFAULT_REVISION = CRIMSON.revision
LICENCE = CRIMSON.licence
MAX_NEW_TOKENS = 8192
OPENAI_SEED = 42
COUNT_COLUMNS = ("false_findings", "missing_findings", "attribute_errors")


class Crimson(LLMMetric):
    name = "crimson"
    version = "1"
    description = (
        "CRIMSON: an LLM judge extracts the abnormal findings of both reports with their clinical significance, "
        "matches them and names false, missing and attribute errors; significance-weighted score in (-1, 1]."
    )
    citation = (
        "@article{baharoon2026crimson, title={CRIMSON: A Clinically-Grounded LLM-Based Metric for Generative Radiology "
        "Report Evaluation}, author={Baharoon, Mohammed and Heintz, Thibault and Raissi, Siavash and others and "
        "Rajpurkar, Pranav}, journal={arXiv preprint arXiv:2603.06183}, year={2026}}"
    )
    higher_is_better = True
    default_backend = "transformers"
    default_model = DEFAULT_MODEL
    backend_kwargs = {"licence": LICENCE, "sort_by_length": False, "generation_config_eos": True}

    def __init__(
        self,
        *,
        guidelines: bool | None = None,
        patient_context: Sequence[dict | None] | None = None,
        max_new_tokens: int = MAX_NEW_TOKENS,
        keep_completions: bool = False,
        dtype: str | None = "bfloat16",
        batch_size: int = 1,
        seed: int | None = OPENAI_SEED,
        **llm_options,
    ):
        # the official run's settings: bfloat16, batches of one, seed 42 (OpenAI path)
        super().__init__(dtype=dtype, batch_size=batch_size, seed=seed, **llm_options)
        if guidelines not in (None, True, False):
            raise MetricError(f"crimson: guidelines must be true, false or unset (official choice), got {guidelines!r}")
        if max_new_tokens < 1:
            raise MetricError(f"crimson: max_new_tokens must be >= 1, got {max_new_tokens}")
        if isinstance(patient_context, str):
            raise MetricError(f"crimson: patient_context={patient_context!r} takes the context from the test set, which only "
                              "`rexrank score` and the backend have; in Python give one dict (or None) per study")
        self.guidelines = guidelines
        self.patient_context = list(patient_context) if patient_context is not None else None
        for i, context in enumerate(self.patient_context or ()):
            if context is not None and not isinstance(context, dict):
                raise MetricError(f"crimson: patient_context[{i}] is {type(context).__name__}; give a dict such as "
                                  "{'Age': 71, 'Indication': 'dyspnea'} or None per study")
        self.max_new_tokens = max_new_tokens
        self.keep_completions = keep_completions

    @property
    def fine_tuned_judge(self) -> bool:
        return self.settings.model == DEFAULT_MODEL

    def use_guidelines(self) -> bool:
        return (not self.fine_tuned_judge) if self.guidelines is None else self.guidelines

    def config(self) -> dict:
        return {
            **self.llm_config(),
            "prompt": "crimson-score 0.2.0 build_prompt" + (" with" if self.use_guidelines() else " without") + " guidelines",
            "patient_context": self.patient_context is not None,
            "generation": self.params(),
            "batch_size": self.settings.batch_size if self.settings.backend == "transformers" else None,
            "answer_reader": "crimson-score 0.2.0 parse_json_response repairs",
        }

    def params(self) -> dict:
        """Generation parameters of the official path this run corresponds to."""
        if self.settings.backend == "transformers" or self.fine_tuned_judge:
            return {"temperature": 0.0, "max_tokens": self.max_new_tokens}
        return {"temperature": 0.0, "seed": self.settings.seed, "response_format": {"type": "json_object"}}

    def requests(self, predictions: list[str], references: list[str]) -> list[LLMRequest]:
        contexts = self.patient_context or [None] * len(predictions)
        if len(contexts) != len(predictions):
            raise MetricError(f"crimson: {len(contexts)} patient contexts for {len(predictions)} studies; give one per study")
        guidelines = self.use_guidelines()
        params = self.params()
        if self.settings.backend == "transformers":
            params = {"max_tokens": self.max_new_tokens}  # greedy in the backend
        return [LLMRequest.chat(messages(r, p, c, guidelines=guidelines), **params)
                for p, r, c in zip(predictions, references, contexts)]

    def _score(self, predictions: list[str], references: list[str]) -> StudyRows:
        runner = self.new_run()
        responses = runner.run(self.requests(predictions, references), desc="CRIMSON")
        n = len(predictions)
        columns = {"crimson": np.full(n, math.nan)}
        for key in COUNT_COLUMNS:
            columns[f"crimson_{key}"] = np.full(n, math.nan)
            columns[f"crimson_weighted_{key}"] = np.full(n, math.nan)
        for kind in ATTRIBUTE_TYPES:
            columns[f"crimson_{kind}_errors"] = np.full(n, math.nan)
        failures: dict[int, str] = {}
        unreadable: list[int] = []
        completions: list[str | None] = []
        for i, response in enumerate(responses):
            completions.append(response.text if response.ok else None)
            if not response.ok:
                failures[i] = f"LLM call failed: {response.error}"
                continue
            try:
                parts = score_evaluation(read_answer(response.text or ""))
            except UnreadableAnswer as exc:
                unreadable.append(i)
                failures[i] = f"unusable answer: {exc}" + (" (generation hit the length cap)" if response.finish_reason == "length" else "")
                continue
            except Exception as exc:  # the official scorer fails on the same structures (result None)
                unreadable.append(i)
                failures[i] = f"unusable answer: JSON the scorer cannot read ({type(exc).__name__}: {exc})"
                continue
            columns["crimson"][i] = parts.score
            for key, count, weighted in zip(COUNT_COLUMNS, (parts.n_false, parts.n_missing, parts.n_attribute),
                                            (parts.weighted_false, parts.weighted_missing, parts.weighted_attribute)):
                columns[f"crimson_{key}"][i] = count
                columns[f"crimson_weighted_{key}"][i] = weighted
            for kind, count in parts.attribute_counts.items():
                columns[f"crimson_{kind}_errors"][i] = count
        flagged = set(unreadable)
        side: dict = {"unparseable": [i in flagged for i in range(n)]}
        if self.keep_completions:
            side["completion"] = completions
        tallies, settings = usage_rows(runner)
        return self._rows(columns, side=side, failures=failures, tallies=tallies, settings=settings)

    @classmethod
    def aggregate(cls, rows: StudyRows) -> MetricResult:
        result = super().aggregate(rows)
        crimson = rows.columns["crimson"]
        scored = ~np.isnan(crimson)
        result.corpus["crimson_std"] = float(np.std(crimson[scored])) if scored.any() else math.nan
        unreadable = [i for i, flag in enumerate(rows.side["unparseable"]) if flag]
        result.details = {
            "n_scored": int(scored.sum()),
            **failure_report(rows.failures),
            "n_unparseable": len(unreadable),
            "unparseable_positions": unreadable,
            "llm_usage": usage_report(rows),
        }
        if "completion" in rows.side:
            result.details["completions"] = list(rows.side["completion"])
        return result
