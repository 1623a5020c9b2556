"""FineRadScore's rubric as rexrank's own prompt, the official line splitting, and the
pydantic schema of the answer.

The official repository (rajpurkarlab/FineRadScore, no licence) was read for its rubric
only — correct the candidate line by line into the reference, grade each correction's
clinical severity (ICU setting) and label its error categories — and none of its text is
used. Line splitting follows its ReXVal runner (`run_rexval_experiments.py` at c678cc2).
"""
from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rexrank.metrics.json_answers import AnswerError, load_json, validate

# severity label -> score, as the ReFiSco-v0 README's 0-4 scale (0 = no error)
SEVERITY_SCORES = {"no error": 0, "not actionable": 1, "actionable nonurgent": 2, "urgent": 3, "emergent": 4}
ERROR_CATEGORIES = (
    "false finding",
    "omitted finding",
    "wrong location",
    "wrong severity",
    "comparison not in reference",
    "omitted comparison",
)

SYSTEM_PROMPT = """You are a chest radiologist reviewing a machine-written chest X-ray report (the CANDIDATE) against the radiologist's report of the same study (the REFERENCE). Assume the patient is in an intensive care unit.

Edit the candidate, line by line, until it says what the reference says clinically. Every candidate line carries an id in square brackets. For each edit you make, record:
- "line": the id of the candidate line you change or remove; null when you add a finding that the candidate lacks;
- "action": "edit" (you rewrite the line), "delete" (the line is wrong or redundant and goes) or "insert" (a new line for an omitted finding);
- "corrected_text": the rewritten or inserted text ("" for a delete);
- "severity": how much the error would matter for this patient's care, one of
    "emergent" - calls for immediate intervention and seriously threatens the patient (for example a missed or invented tension pneumothorax or free intraperitoneal air, or an endotracheal tube badly out of position);
    "urgent" - needs attention soon, not immediately, and would likely harm the patient if ignored (for example a missed pneumonia, a slightly malpositioned endotracheal tube, a pleural effusion on the wrong side);
    "actionable nonurgent" - no action needed in the short term, but left alone it could affect the patient's health (for example a lung nodule needing follow-up, emphysema);
    "not actionable" - would not change management (for example an old rib fracture, bilateral versus asymmetric edema, calling something stable or changed when there is no prior study but the finding itself is right);
- "error_categories": one or more of "false finding", "omitted finding", "wrong location", "wrong severity", "comparison not in reference", "omitted comparison";
- "comment": one short sentence on why.

Change only what matters clinically: rewording, style and order are not errors ("no effusion" and "no pleural effusion is seen" agree). Wrong sizes, counts, sides or locations are errors. A candidate line that agrees with the reference gets no edit. If the candidate has no clinically relevant error, return an empty list.

Answer with one JSON object and nothing else:
{"corrections": [{"line": <id or null>, "action": "...", "corrected_text": "...", "severity": "...", "error_categories": ["..."], "comment": "..."}]}"""

USER_TEMPLATE = "CANDIDATE (numbered lines):\n{candidate}\n\nREFERENCE:\n{reference}"

REASK_TEMPLATE = (
    "Your answer could not be used: {problem}\n"
    'Reply again with only the JSON object {{"corrections": [...]}} in the format described, '
    "using candidate line ids between 0 and {last_id}."
)


def split_lines(report: str) -> list[str]:
    """The official runner's sentence split: at ". " not preceded by a digit and not
    followed by a digit; the first empty and the first blank piece dropped; each piece
    stripped, double quotes removed, and ended with a single "."."""
    pieces = re.split(r"(?<!\d)\.(?!\d|$) ", report)
    for blank in ("", " "):
        if blank in pieces:
            pieces.remove(blank)
    return [(piece.strip().replace('"', "") + ".").replace("..", ".") for piece in pieces]


def number_lines(lines: list[str]) -> str:
    return " ".join(f"[{i}] {line}" for i, line in enumerate(lines)).strip()


def build_messages(candidate: str, reference: str) -> tuple[list[dict], int]:
    lines = split_lines(candidate)
    user = USER_TEMPLATE.format(candidate=number_lines(lines), reference=reference)
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}], len(lines)


class Correction(BaseModel):
    model_config = ConfigDict(extra="ignore")

    line: int | None = None
    action: Literal["edit", "delete", "insert"]
    corrected_text: str = ""
    severity: Literal["no error", "not actionable", "actionable nonurgent", "urgent", "emergent"]
    error_categories: list[Literal[ERROR_CATEGORIES]] = Field(default_factory=list)  # type: ignore[valid-type]
    comment: str = ""

    @field_validator("severity", "action", mode="before")
    @classmethod
    def _lower(cls, value):
        # "Urgent error", "Actionable nonurgent error" -> the label; case does not matter
        if isinstance(value, str):
            value = " ".join(value.lower().replace("-", " ").split())
            if value.endswith(" error") and value != "no error":
                value = value[: -len(" error")]
        return value

    @field_validator("error_categories", mode="before")
    @classmethod
    def _lower_list(cls, value):
        if isinstance(value, list):
            return [" ".join(v.lower().split()) if isinstance(v, str) else v for v in value]
        return value


class Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    corrections: list[Correction]


def parse_answer(text: str, n_lines: int) -> Answer:
    answer = validate(load_json(text), Answer)
    for k, c in enumerate(answer.corrections):
        if c.action == "insert":
            continue
        if c.line is None or not 0 <= c.line < n_lines:
            raise AnswerError(f"corrections.{k}.line is {c.line!r}; an {c.action} needs a candidate line id 0..{n_lines - 1}")
    return answer


def severities(answer: Answer) -> list[int]:
    return [SEVERITY_SCORES[c.severity] for c in answer.corrections]
