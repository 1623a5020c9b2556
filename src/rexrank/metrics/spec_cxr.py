"""SPEC-CXR-style entity-level evaluation (Lee et al., MICCAI 2025), rexrank's own version.

Per study one LLM call returns, per entity of the set mentioned in either report, presence
(TP/FP/TN/FN), location and severity (aligned / not aligned / not available) and
comparison (adding unmentioned / missing mentioned / other). Scores:
- per-study `spec_cxr` = report-level error count = FP + FN + location not aligned +
  severity not aligned + adding-unmentioned + missing-mentioned comparisons (lower better);
- presence F1 per entity, per category and overall (pooled TP/FP/FN over all studies);
- location / severity accuracy over TP cases with an assessable attribute
  (aligned / (aligned + not aligned)); comparison accuracy over TP cases ("other" = right).
The entity set is data: the default is ours (the paper's list is not public); pass
`entity_set=PATH` for another.
"""
from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from rexrank.metrics.base import MetricResult, StudyRows
from rexrank.metrics.llm_common import LLMMetric, ask_with_reasks, failure_report, usage_report, usage_rows
from rexrank.metrics.spec_cxr_text import (
    REASK_TEMPLATE,
    USER_TEMPLATE,
    answer_model,
    load_entity_set,
    parse_answer,
    response_format,
    system_prompt,
)

PROMPT_VERSION = "rexrank-spec-cxr-v1"


def study_errors(judgements: list[dict]) -> int:
    return sum(
        (j["presence"] in ("FP", "FN"))
        + (j["location"] == "not_aligned")
        + (j["severity"] == "not_aligned")
        + (j["comparison"] in ("adding_unmentioned", "missing_mentioned"))
        for j in judgements
    )


def _ratio(num: float, den: float) -> float:
    return num / den if den else math.nan


def pooled_scores(counts: dict) -> dict:
    tp, fp, fn = counts["TP"], counts["FP"], counts["FN"]
    return {
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": counts["TN"],
        "presence_f1": _ratio(2 * tp, 2 * tp + fp + fn),
        "location_accuracy": _ratio(counts["loc_ok"], counts["loc_ok"] + counts["loc_bad"]),
        "severity_accuracy": _ratio(counts["sev_ok"], counts["sev_ok"] + counts["sev_bad"]),
        "comparison_accuracy": _ratio(counts["cmp_ok"], tp),
    }


def tally(per_study: list[list[dict]]) -> dict[str, dict]:
    """entity -> counts pooled over studies."""
    table: dict[str, dict] = defaultdict(lambda: defaultdict(int))
    for judgements in per_study:
        for j in judgements:
            c = table[j["entity"]]
            c[j["presence"]] += 1
            if j["presence"] == "TP":
                c["loc_ok"] += j["location"] == "aligned"
                c["loc_bad"] += j["location"] == "not_aligned"
                c["sev_ok"] += j["severity"] == "aligned"
                c["sev_bad"] += j["severity"] == "not_aligned"
                c["cmp_ok"] += j["comparison"] == "other"
    return table


def _sum_counts(items) -> dict:
    total: dict = defaultdict(int)
    for c in items:
        for k, v in c.items():
            total[k] += v
    return total


class SpecCxr(LLMMetric):
    name = "spec_cxr"
    version = "1"
    description = (
        "SPEC-CXR-style entity-level evaluation: an LLM judges presence, location, severity and comparison per "
        "entity of a curated set; per study the number of entity-level errors (lower is better), plus presence F1 "
        "and attribute accuracies per entity, category and overall."
    )
    citation = (
        "@inproceedings{lee2025speccxr, title={SPEC-CXR: Safety-centered Performance Evaluation in Clinical Report "
        "for Chest X-Ray}, author={Lee, Kyungsu and Cho, Kyungjin and Kim, Yeji and others}, booktitle={MICCAI}, year={2025}}"
    )
    higher_is_better = False

    def __init__(self, *, entity_set: str | None = None, structured_output: str = "json_schema", max_reasks: int = 2, max_tokens: int = 4096, **llm_options):
        super().__init__(**llm_options)
        from rexrank.errors import MetricError

        if structured_output not in ("json_schema", "json_object", "none"):
            raise MetricError(f"spec_cxr: structured_output must be json_schema, json_object or none, got {structured_output!r}")
        self.entity_set = load_entity_set(entity_set)
        self.model = answer_model(self.entity_set)
        self.structured_output = structured_output
        self.max_reasks = max_reasks
        self.max_tokens = max_tokens

    def config(self) -> dict:
        return {
            **self.llm_config(),
            "prompt": PROMPT_VERSION,
            "entity_set": self.entity_set.name,
            "entity_set_source": self.entity_set.source,
            "n_entities": len(self.entity_set.entities),
            "structured_output": self.structured_output,
            "max_reasks": self.max_reasks,
            "temperature": 0.0,
        }

    def _params(self) -> dict:
        params = {"temperature": 0.0, "seed": self.settings.seed, "max_tokens": self.max_tokens}
        if self.settings.backend == "openai" and self.structured_output == "json_schema":
            params["response_format"] = response_format(self.entity_set)
        elif self.settings.backend == "openai" and self.structured_output == "json_object":
            params["response_format"] = {"type": "json_object"}
        return params

    def _score(self, predictions: list[str], references: list[str]) -> StudyRows:
        runner = self.new_run()
        system = system_prompt(self.entity_set)
        conversations = [
            [{"role": "system", "content": system}, {"role": "user", "content": USER_TEMPLATE.format(reference=r, candidate=p)}]
            for p, r in zip(predictions, references)
        ]
        parsed, problems, reasks = ask_with_reasks(
            runner,
            conversations,
            self._params(),
            lambda i, text: parse_answer(text, self.model),
            lambda i, problem: REASK_TEMPLATE.format(problem=problem),
            max_reasks=self.max_reasks,
            desc="SPEC-CXR",
        )
        n = len(predictions)
        columns = {k: np.full(n, math.nan) for k in ("spec_cxr", "spec_cxr_tp", "spec_cxr_fp", "spec_cxr_fn")}
        for i, judgements in parsed.items():
            columns["spec_cxr"][i] = study_errors(judgements)
            for label in ("TP", "FP", "FN"):
                columns[f"spec_cxr_{label.lower()}"][i] = sum(j["presence"] == label for j in judgements)
        failures = {i: problems[i] for i in range(n) if i not in parsed}
        tallies, settings = usage_rows(runner)
        categories = {category: list(members) for category, members in self.entity_set.categories.items()}
        return self._rows(columns, side={"judgements": [parsed.get(i) for i in range(n)]}, failures=failures,
                          tallies={"reasks": reasks, **tallies}, settings={"categories": categories, **settings})

    @classmethod
    def aggregate(cls, rows: StudyRows) -> MetricResult:
        """Means of the per-study counts; presence F1 and attribute accuracies pooled over
        every judged study, per entity, per category and overall."""
        result = super().aggregate(rows)
        categories = rows.settings["categories"]
        table = tally([j for j in rows.side["judgements"] if j is not None])
        entities = [
            {"entity": e, "category": category, **pooled_scores(_sum_counts([table[e]]) if e in table else defaultdict(int))}
            for category, members in categories.items() for e in members
        ]
        per_category = {
            category: pooled_scores(_sum_counts(table[e] for e in members if e in table))
            for category, members in categories.items()
        }
        overall = pooled_scores(_sum_counts(table.values()))
        for key in ("presence_f1", "location_accuracy", "severity_accuracy", "comparison_accuracy"):
            result.corpus[f"spec_cxr_{key}"] = overall[key]
        result.details = {
            **failure_report(rows.failures),
            "overall": overall,
            "per_category": per_category,
            "per_entity": entities,
            "reasks": rows.tallies["reasks"],
            "llm_usage": usage_report(rows),
        }
        return result
