"""CRIMSON's prompt, the repairs its answer reader makes, and the score of a parsed answer.

Facts from crimson-score 0.2.0 (PyPI wheel = github rajpurkarlab/CRIMSON 07e3331; MIT),
written anew here; the prompt text itself is recorded as data in
`rexrank/data/crimson_prompt_parts.json` (what the checkpoint was trained on):
- the prompt's sections are joined by a blank line, in a fixed order; the significance
  examples, the attribute-severity guidelines and (with a patient context) the context
  guidelines are left out for the fine-tuned MedGemma judge ("trained without them");
- the answer is read as JSON (a repeated key keeps its first value) after three text
  fixes (curly quotes escaped, `["":[` -> `[`, a key's missing opening quote restored); if
  that fails: orphan strings inside objects removed, invalid backslash escapes doubled,
  and unescaped quotes inside strings escaped one at a time; else the answer is unusable;
- the score weighs findings by clinical significance and matched findings with attribute
  errors by partial credit (see `score_evaluation`).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

SIGNIFICANCE_WEIGHTS = {"urgent": 1.0, "actionable_not_urgent": 0.5, "not_actionable_not_urgent": 0.25, "benign_expected": 0.0}
ATTRIBUTE_WEIGHTS = {"significant": 0.5, "negligible": 0.0}
UNKNOWN_WEIGHT = 0.25  # a significance or severity label outside the lists
ATTRIBUTE_TYPES = ("location", "severity", "descriptor", "measurement", "certainty", "unspecific", "overinterpretation", "temporal")


@lru_cache(maxsize=1)
def _parts() -> dict:
    return json.loads(resources.files("rexrank.data").joinpath("crimson_prompt_parts.json").read_text(encoding="utf-8"))


def system_message() -> str:
    return _parts()["system"]


def build_prompt(reference: str, candidate: str, context: dict | None = None, *, guidelines: bool = True) -> str:
    """The user message. `context` (e.g. {"Age": 71, "Indication": "dyspnea"}) adds a
    "Patient Context:" block, and with `guidelines` the context guidelines."""
    s = _parts()["sections"]
    block = "".join(f"    {key}: {value}\n" for key, value in context.items()) if context else ""
    order = [
        s["objective"],
        "Patient Context:\n" + block if context else "",
        "Reference Findings (Ground Truth):\n" + reference,
        "Predicted Findings (Candidate):\n" + candidate,
        s["task_steps"],
        s["clinical_significance_levels"],
        s["significance_examples"] if guidelines else "",
        s["significance_application"],
        s["attribute_severity_levels"],
        s["error_categories"],
        s["matching_criteria"],
        s["attribute_error_instructions"],
        s["attribute_severity_guidelines"] if guidelines else "",
        s["context_guidelines"] if guidelines and context else "",
        s["output_format"],
        s["important_notes"],
    ]
    return "\n\n".join(part for part in order if part)


def messages(reference: str, candidate: str, context: dict | None = None, *, guidelines: bool = True) -> list[dict]:
    return [{"role": "system", "content": system_message()},
            {"role": "user", "content": build_prompt(reference, candidate, context, guidelines=guidelines)}]


# -- reading the answer -----------------------------------------------------------------

_CURLY = {"\u201c": '\\"', "\u201d": '\\"', "\u2018": "\\'", "\u2019": "\\'"}
_ARRAY_AS_OBJECT = re.compile(r'\[""\s*:\s*\[')  # ["":["R1"]  ->  ["R1"]
_KEY_WITHOUT_OPEN_QUOTE = re.compile(r'([\]}"0-9]\s*,\s*|{\s*)([a-zA-Z_][a-zA-Z0-9_]*")')
_ORPHAN_AFTER_COMMA = re.compile(r',\s*"[^"]*"\s*(?=\s*[,}])(?!\s*:)')
_ORPHAN_FIRST = re.compile(r'(?<=\{)\s*"[^"]*"\s*,\s*(?=")')
_BAD_ESCAPE = re.compile(r'\\(?!["\\\//bfnrtu])')
MAX_QUOTE_FIXES = 50


class UnreadableAnswer(ValueError):
    """The answer is not JSON even after the official repairs."""


def _first_key_wins(pairs):
    out = {}
    for key, value in pairs:
        out.setdefault(key, value)
    return out


def _json(text: str):
    return json.loads(text, object_pairs_hook=_first_key_wins)


def _quote_is_structural(text: str, i: int) -> bool:
    """Whether the quote at i delimits a key or value (rather than being prose in a string)."""
    prev = text[i - 1] if i > 0 else ""
    nxt = text[i + 1] if i + 1 < len(text) else ""
    if prev in (":", "[", "{") or nxt in (":", "]", "}"):
        return True
    if prev == ",":
        two_back = text[i - 2] if i >= 2 else ""
        return two_back in ('"', "]", "}") or two_back.isdigit()
    if nxt == ",":
        two_on = text[i + 2] if i + 2 < len(text) else ""
        return two_on in ('"', "[", "{") or two_on.isdigit()
    return False


def _escape_stray_quotes(text: str):
    """Parse, escaping at each failure the nearest non-structural quote at or up to 5
    characters before the error position; gives up after MAX_QUOTE_FIXES tries."""
    for _ in range(MAX_QUOTE_FIXES):
        try:
            return _json(text)
        except json.JSONDecodeError as exc:
            where = None
            for i in range(exc.pos, max(0, exc.pos - 5) - 1, -1):
                if i < len(text) and text[i] == '"' and (i == 0 or text[i - 1] != "\\") and not _quote_is_structural(text, i):
                    where = i
                    break
            if where is None:
                raise
            text = text[:where] + '\\"' + text[where + 1:]
    raise json.JSONDecodeError("too many quote fixes", text, 0)


def read_answer(answer: str) -> Any:
    """The JSON value of a judge's answer, repaired as the official reader repairs it.
    Raises UnreadableAnswer when every repair fails."""
    text = answer
    for curly, escaped in _CURLY.items():
        text = text.replace(curly, escaped)
    text = _ARRAY_AS_OBJECT.sub("[", text)
    text = _KEY_WITHOUT_OPEN_QUOTE.sub(r'\1"\2', text)
    escaped = _BAD_ESCAPE.sub(r"\\\\", text)
    attempts = (
        lambda: _json(text),
        lambda: _json(_ORPHAN_FIRST.sub("", _ORPHAN_AFTER_COMMA.sub("", text))),
        lambda: _json(escaped),
        lambda: _escape_stray_quotes(text),
        lambda: _escape_stray_quotes(escaped),
    )
    for attempt in attempts:
        try:
            return attempt()
        except (json.JSONDecodeError, ValueError):
            continue
    raise UnreadableAnswer(f"not JSON even after the official repairs ({len(answer)} characters)")


# -- the score ------------------------------------------------------------------------

@dataclass
class CrimsonParts:
    score: float
    n_false: int
    n_missing: int
    n_attribute: int
    attribute_counts: dict[str, int]
    weighted_false: float
    weighted_missing: float
    weighted_attribute: float
    n_g: float
    correct: float
    s: float


def _weight(table: dict, item, key: str) -> float:
    return table.get(item.get(key, ""), UNKNOWN_WEIGHT)


def score_evaluation(evaluation: Any) -> CrimsonParts:
    """CRIMSON of a parsed answer. A structure the official scorer cannot read (a list where
    an object belongs, an entry without its id, an unhashable label, ...) raises, as there;
    the caller counts it as a failed study.

    Weights w: significance (urgent 1, actionable 0.5, not actionable 0.25, benign 0;
    otherwise 0.25) of each reference (R) and predicted (P) finding by id, the last entry of
    an id winning. E_false = sum w(P) over false findings, E_miss = sum w(R) over missing
    ones, N_G = sum w(R) (with no reference findings listed: matches + E_miss). Each matched
    R counts once: w, or w*w/(w + sum of its attribute errors' severities: significant 0.5,
    negligible 0, otherwise 0.25). S = (correct - E_false) / N_G; when N_G = 0, S = 1 if
    E_false = E_miss = 0 else -(E_false + E_miss + 1). CRIMSON = S if S >= 0, else
    -d/(1+d) with d = E_false - correct when d > 0, else 0; rounded to 4 decimals."""
    errors = evaluation.get("errors", {})
    matched = evaluation.get("matched_findings", [])
    refs = evaluation.get("reference_findings", [])
    preds = evaluation.get("predicted_findings", [])
    ref_w = {item["id"]: _weight(SIGNIFICANCE_WEIGHTS, item, "clinical_significance") for item in refs}
    pred_w = {item["id"]: _weight(SIGNIFICANCE_WEIGHTS, item, "clinical_significance") for item in preds}
    false_ids = errors.get("false_findings", [])
    missing_ids = errors.get("missing_findings", [])
    e_false = sum(pred_w.get(i, 0.0) for i in false_ids)
    e_miss = sum(ref_w.get(i, 0.0) for i in missing_ids)
    attribute_errors = errors.get("attribute_errors", [])
    type_counts = {t: sum(1 for e in attribute_errors if t in e.get("error_types", [])) for t in ATTRIBUTE_TYPES}
    by_ref: dict = {}
    for e in attribute_errors:
        by_ref.setdefault(e["ref_id"], []).append(e)
    n_g = sum(_weight(SIGNIFICANCE_WEIGHTS, item, "clinical_significance") for item in refs)
    if n_g == 0 and not refs:
        n_g = len(matched) + e_miss
    seen = set()
    correct = 0.0
    for pair in matched:
        ref_id = pair["ref_id"]
        if ref_id in seen:
            continue
        seen.add(ref_id)
        base = ref_w.get(ref_id, 0.0)
        found = by_ref.get(ref_id, [])
        if found:
            penalty = sum(_weight(ATTRIBUTE_WEIGHTS, e, "severity") for e in found)
            share = base / (base + penalty) if base + penalty > 0 else 0.0
            correct += base * share
        else:
            correct += base
    excess = e_false - correct
    if n_g == 0:
        s = 1.0 if e_false == 0 and e_miss == 0 else -(e_false + e_miss + 1)
    else:
        s = (correct - e_false) / n_g
    if s >= 0:
        value = s
    else:
        value = -1 * excess / (1 + excess) if excess > 0 else 0
    return CrimsonParts(
        score=round(value, 4),
        n_false=len(false_ids),
        n_missing=len(missing_ids),
        n_attribute=len(attribute_errors),
        attribute_counts=type_counts,
        weighted_false=e_false,
        weighted_missing=e_miss,
        weighted_attribute=sum(_weight(ATTRIBUTE_WEIGHTS, e, "severity") for e in attribute_errors),
        n_g=n_g,
        correct=correct,
        s=s,
    )
