"""An LLM judge's JSON answer: fenced or bare, and the problem named by its field's path, as it
is sent back when the answer is re-asked (issue 40)."""
from __future__ import annotations

import pytest
from pydantic import BaseModel

from rexrank.metrics.json_answers import AnswerError, load_json, validate


class _Item(BaseModel):
    severity: int


class _Answer(BaseModel):
    corrections: list[_Item]


def test_an_answer_in_a_json_fence_or_bare_is_read():
    assert load_json('```json\n{"a": 1}\n```') == load_json('  {"a": 1} ') == load_json('```\n{"a": 1}```') == {"a": 1}


def test_a_problem_names_the_field_by_its_dotted_path():
    with pytest.raises(AnswerError) as refused:
        validate({"corrections": [{"severity": 1}, {"severity": "high"}]}, _Answer)
    assert str(refused.value).startswith("field corrections.1.severity: ")
    with pytest.raises(AnswerError, match=r"^it is not valid JSON \(Expecting value at character 0\)$"):
        load_json("nope")
