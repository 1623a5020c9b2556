"""What the LLM-judged metrics share: settings from options/environment, one runner per
metric instance, and the cost/failure report that goes into MetricResult.details."""
from __future__ import annotations

from dataclasses import fields, replace
from typing import Any, ClassVar

from rexrank.llm import LLMRunner, LLMSettings, build_backend
from rexrank.metrics.base import Metric, ShardRule, StudyRows


class LLMMetric(Metric):
    default_backend: ClassVar[str] = "openai"
    default_model: ClassVar[str | None] = None
    backend_kwargs: ClassVar[dict] = {}

    def __init__(self, *, progress: bool = True, **llm_options: Any):
        # unknown option names raise TypeError here, which get_metric reports clearly
        self.settings = LLMSettings(**llm_options).resolved(
            default_backend=self.default_backend, default_model=self.default_model
        )
        self.progress = progress
        self._runner: LLMRunner | None = None

    @property
    def runner(self) -> LLMRunner:
        if self._runner is None:
            backend = build_backend(self.settings, **(self.backend_kwargs if self.settings.backend == "transformers" else {}))
            self._runner = LLMRunner(backend, self.settings, progress=self.progress)
        return self._runner

    def new_run(self) -> LLMRunner:
        """Fresh usage counters per score() call, same backend (weights stay loaded)."""
        runner = self.runner
        runner.usage = type(runner.usage)(
            price_input_per_mtok=self.settings.price_input_per_mtok,
            price_output_per_mtok=self.settings.price_output_per_mtok,
        )
        return runner

    def llm_config(self) -> dict:
        return self.settings.provenance()

    @classmethod
    def planned_settings(cls, options: dict) -> LLMSettings:
        """The LLM settings a run with these metric options takes (backend from the options or
        the environment), without the checks of a run (model, API key)."""
        import inspect

        names = {f.name for f in fields(LLMSettings)}
        defaults = {name: p.default for name, p in inspect.signature(cls.__init__).parameters.items()
                    if name in names and p.default is not inspect.Parameter.empty}
        settings = LLMSettings(**{**defaults, **{k: v for k, v in options.items() if k in names}})
        return replace(settings, backend=settings.chosen_backend(cls.default_backend))

    @classmethod
    def shard_rule(cls, options: dict) -> ShardRule:
        """An endpoint answers each study alone. A local model's batches are formed from the
        whole request (sorted by length, repeated and cached studies left out), so they
        couple studies across any cut unless each batch holds one study."""
        settings = cls.planned_settings(options)
        if settings.backend == "transformers" and settings.batch_size > 1:
            return ShardRule(refusal=f"a local model batches {settings.batch_size} studies formed from the whole "
                                     "request (batch_size=1, or an endpoint, shards)")
        return ShardRule()


def usage_rows(runner: LLMRunner) -> tuple[dict, dict]:
    """(tallies, settings) of a run's LLM usage for StudyRows: the counts, added up over
    shards, and the prices, the same in every shard."""
    usage = runner.usage
    counts = {f.name: getattr(usage, f.name) for f in fields(usage)
              if f.name not in ("price_input_per_mtok", "price_output_per_mtok", "extra")}
    prices = {"price_input_per_mtok": usage.price_input_per_mtok, "price_output_per_mtok": usage.price_output_per_mtok}
    return {"llm_usage": counts}, {"llm_prices": prices}


def usage_report(rows: StudyRows) -> dict:
    """The `llm_usage` detail of a run (or of merged shards) from its rows."""
    from rexrank.llm.types import Usage

    return Usage(**rows.tallies["llm_usage"], **rows.settings["llm_prices"]).to_dict()


def failure_report(failures: dict[int, str]) -> dict:
    """n_failed, which studies (positions) and why, for MetricResult.details."""
    return {"n_failed": len(failures), "failed_positions": sorted(failures), "failure_reasons": _tally(failures.values())}


def _tally(reasons) -> dict[str, int]:
    out: dict[str, int] = {}
    for reason in reasons:
        out[reason] = out.get(reason, 0) + 1
    return out


def ask_with_reasks(runner, conversations: list[list[dict]], params: dict, parse, reask, *, max_reasks: int, desc: str):
    """Send each conversation; an answer that `parse` rejects (raises ValueError) is re-asked
    with the problem appended (`reask(i, problem) -> user message`), up to `max_reasks` times.

    Returns (parsed: {i: value}, problems: {i: reason for studies without a parsed value}, n_reasks).
    """
    from rexrank.llm import LLMRequest

    conversations = [list(c) for c in conversations]
    parsed: dict = {}
    problems: dict[int, str] = {}
    pending = list(range(len(conversations)))
    n_reasks = 0
    for attempt in range(max_reasks + 1):
        responses = runner.run([LLMRequest.chat(conversations[i], **params) for i in pending], desc=desc)
        still = []
        for i, response in zip(pending, responses):
            if not response.ok:
                problems[i] = f"LLM call failed: {response.error}"
                continue
            try:
                parsed[i] = parse(i, response.text or "")
                problems.pop(i, None)
            except ValueError as exc:
                problems[i] = f"invalid answer after {attempt + 1} attempt(s): {exc}"
                conversations[i] += [{"role": "assistant", "content": response.text or ""}, {"role": "user", "content": reask(i, exc)}]
                still.append(i)
        if not still or attempt == max_reasks:
            break
        n_reasks += len(still)
        pending = still
    return parsed, problems, n_reasks


LLM_METRICS = ("green", "crimson", "fineradscore", "spec_cxr")


def cli_llm_options(metric_names, *, base_url: str | None = None, model: str | None = None, backend: str | None = None) -> dict[str, dict]:
    """metric_options for `rexrank score`'s --llm-* flags: given only to the LLM metrics."""
    given = {k: v for k, v in {"base_url": base_url, "model": model, "backend": backend}.items() if v}
    return {name: dict(given) for name in metric_names if name in LLM_METRICS and given}
