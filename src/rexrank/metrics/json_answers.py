"""Reading an LLM judge's JSON answer: the problems found are worded to be sent back when
the answer is re-asked, so they name the field at fault."""
from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

Model = TypeVar("Model", bound=BaseModel)

_FENCED = re.compile(r"```(?:json)?\s*(.*?)\s*```", re.DOTALL)


class AnswerError(ValueError):
    """The model's answer is not usable; the message is sent back when re-asking."""


def load_json(text: str) -> Any:
    """The JSON in an answer, which models often wrap in a ```json fence."""
    body = text.strip()
    fenced = _FENCED.fullmatch(body)
    if fenced:
        body = fenced.group(1)
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        raise AnswerError(f"it is not valid JSON ({exc.msg} at character {exc.pos})") from None


def validate(data: Any, model: type[Model]) -> Model:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise AnswerError(f"field {where}: {first['msg']}") from None
