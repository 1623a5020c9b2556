"""FineRadScore (Huang et al., MLHC 2024) with rexrank's own prompt implementing its rubric.

Per study: the LLM corrects the candidate line by line into the reference and grades each
correction 1-4 (not actionable, actionable nonurgent, urgent, emergent); no correction = 0.
Report score = maximum severity (as ReXrank; the sum, the original paper's report score,
is also given). Corpus: mean of the per-report maximum and 1/mean, ReXrank's
"1/FineRadScore" column. Error rates: "no actionable error" = share of reports with
maximum severity <= 1, "no significant error" = share with maximum <= 2 — our reading of
the ReXrank Challenge paper, which does not define them; both thresholds are parameters.

An answer that is not valid JSON or fails the schema is re-asked (the problem is told to
the model); after `max_reasks` it is NaN and listed in `failures`.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from rexrank.errors import MetricError
from rexrank.metrics.base import MetricResult, StudyRows
from rexrank.metrics.fineradscore_text import REASK_TEMPLATE, build_messages, parse_answer, severities
from rexrank.metrics.llm_common import LLMMetric, ask_with_reasks, failure_report, usage_report, usage_rows

PROMPT_VERSION = "rexrank-fineradscore-v1"


def error_rates(max_severity: Sequence[float], *, no_actionable_max: int = 1, no_significant_max: int = 2) -> dict:
    """Corpus values from per-report maximum severities (NaN = not scored, left out and counted)."""
    m = np.asarray(max_severity, dtype=float)
    kept = m[~np.isnan(m)]
    mean = float(kept.mean()) if kept.size else math.nan
    return {
        "n": int(kept.size),
        "n_failed": int(m.size - kept.size),
        "fineradscore": mean,
        "fineradscore_inv": (math.inf if mean == 0 else 1.0 / mean) if kept.size else math.nan,
        "no_error_rate": float(np.mean(kept == 0)) if kept.size else math.nan,
        "no_actionable_error_rate": float(np.mean(kept <= no_actionable_max)) if kept.size else math.nan,
        "no_significant_error_rate": float(np.mean(kept <= no_significant_max)) if kept.size else math.nan,
    }


def rates_by_stratum(max_severity: Sequence[float], strata: Sequence, **thresholds) -> dict:
    m = np.asarray(max_severity, dtype=float)
    labels = list(strata)
    if len(labels) != m.size:
        raise MetricError(f"fineradscore: {len(labels)} strata labels for {m.size} studies; give one label per study")
    out = {}
    for label in dict.fromkeys(labels):
        mask = np.array([lab == label for lab in labels])
        out[str(label)] = error_rates(m[mask], **thresholds)
    return out


class FineRadScore(LLMMetric):
    name = "fineradscore"
    version = "1"
    description = (
        "FineRadScore: an LLM corrects the generated report line by line and grades each correction's clinical "
        "severity (0 none - 4 emergent); report score = maximum severity (lower is better); corpus 1/mean as ReXrank."
    )
    citation = (
        "@inproceedings{huang2024fineradscore, title={FineRadScore: A Radiology Report Line-by-Line Evaluation Technique "
        "Generating Corrections with Severity Scores}, author={Huang, Alyssa and Banerjee, Oishi and Wu, Kay and "
        "Reis, Eduardo Pontes and Rajpurkar, Pranav}, booktitle={Machine Learning for Healthcare (PMLR 252)}, year={2024}}"
    )
    higher_is_better = False  # the per-report maximum severity; 1/FineRadScore is higher-better

    def __init__(
        self,
        *,
        no_actionable_max: int = 1,
        no_significant_max: int = 2,
        max_reasks: int = 2,
        max_tokens: int = 2048,
        json_mode: bool = True,
        strata: Sequence | None = None,
        **llm_options,
    ):
        super().__init__(**llm_options)
        for label, value in (("no_actionable_max", no_actionable_max), ("no_significant_max", no_significant_max)):
            if value not in (0, 1, 2, 3, 4):
                raise MetricError(f"fineradscore: {label} must be a severity 0-4, got {value!r}")
        if max_reasks < 0:
            raise MetricError(f"fineradscore: max_reasks must be >= 0, got {max_reasks}")
        self.thresholds = {"no_actionable_max": no_actionable_max, "no_significant_max": no_significant_max}
        self.max_reasks = max_reasks
        self.max_tokens = max_tokens
        self.json_mode = json_mode
        self.strata = list(strata) if strata is not None else None

    def config(self) -> dict:
        return {
            **self.llm_config(),
            "prompt": PROMPT_VERSION,
            "temperature": 0.0,
            "max_tokens": self.max_tokens,
            "json_mode": self.json_mode,
            "max_reasks": self.max_reasks,
            **self.thresholds,
            "report_score": "max line severity",
        }

    def _params(self) -> dict:
        params = {"temperature": 0.0, "seed": self.settings.seed, "max_tokens": self.max_tokens}
        if self.json_mode and self.settings.backend == "openai":
            params["response_format"] = {"type": "json_object"}
        return params

    def _score(self, predictions: list[str], references: list[str]) -> StudyRows:
        if self.strata is not None and len(self.strata) != len(predictions):
            raise MetricError(f"fineradscore: {len(self.strata)} strata labels for {len(predictions)} studies")
        runner = self.new_run()
        n = len(predictions)
        conversations = []
        n_lines = []
        for p, r in zip(predictions, references):
            messages, k = build_messages(p, r)
            conversations.append(messages)
            n_lines.append(k)
        answers, problems, reasks = ask_with_reasks(
            runner,
            conversations,
            self._params(),
            lambda i, text: severities(parse_answer(text, n_lines[i])),
            lambda i, problem: REASK_TEMPLATE.format(problem=problem, last_id=max(n_lines[i] - 1, 0)),
            max_reasks=self.max_reasks,
            desc="FineRadScore",
        )
        maxes = np.full(n, math.nan)
        sums = np.full(n, math.nan)
        counts = np.full(n, math.nan)
        for i, sev in answers.items():
            maxes[i] = max(sev, default=0)
            sums[i] = sum(sev)
            counts[i] = len(sev)
        scored = ~np.isnan(maxes)
        t = self.thresholds

        def indicator(condition):
            return np.where(scored, condition.astype(float), math.nan)

        with np.errstate(invalid="ignore"):
            columns = {
                "fineradscore": maxes,
                "fineradscore_sum": sums,
                "fineradscore_n_corrections": counts,
                "fineradscore_no_error": indicator(maxes == 0),
                "fineradscore_no_actionable_error": indicator(maxes <= t["no_actionable_max"]),
                "fineradscore_no_significant_error": indicator(maxes <= t["no_significant_max"]),
            }
        failures = {i: problems[i] for i in range(n) if i not in answers}
        tallies, settings = usage_rows(runner)
        return self._rows(columns, side={"stratum": list(self.strata)} if self.strata is not None else {},
                          failures=failures, tallies={"reasks": reasks, **tallies},
                          settings={"thresholds": dict(self.thresholds), **settings})

    @classmethod
    def aggregate(cls, rows: StudyRows) -> MetricResult:
        result = super().aggregate(rows)
        t = rows.settings["thresholds"]
        maxes = rows.columns["fineradscore"]
        rates = error_rates(maxes, **t)
        result.corpus["fineradscore_inv"] = rates["fineradscore_inv"]
        result.details = {
            **failure_report(rows.failures),
            "rates": rates,
            "thresholds": dict(t, note="no actionable error: max severity <= no_actionable_max; no significant error: <= no_significant_max (our reading; the Challenge paper does not define them)"),
            "reasks": rows.tallies["reasks"],
            "llm_usage": usage_report(rows),
        }
        if "stratum" in rows.side:
            result.details["strata"] = rates_by_stratum(maxes, rows.side["stratum"], **t)
        return result
