"""Every metric card ends with a table of where rexrank's default equals the official code,
and names only options the metric accepts."""
from __future__ import annotations

import dataclasses
import inspect
import re

import pytest

from support.paths import PROJECT_ROOT
from rexrank.llm.settings import LLMSettings
from rexrank.metrics.registry import available_metrics, metric_class

SECTION = "## Defaults and the official code"


def _accepted_options(name: str) -> set[str]:
    cls = metric_class(name)
    accepted = set()
    for klass in cls.__mro__:
        if "__init__" in vars(klass):
            accepted |= set(inspect.signature(klass.__init__).parameters) - {"self", "llm_options", "kwargs"}
    if "llm_options" in inspect.signature(cls.__init__).parameters:
        accepted |= {f.name for f in dataclasses.fields(LLMSettings)}
    return accepted


@pytest.mark.parametrize("name", available_metrics())
def test_card_states_defaults_against_the_official_code(name):
    card = (PROJECT_ROOT / "metrics" / name / "README.md").read_text(encoding="utf-8")
    assert SECTION in card, f"metrics/{name}/README.md has no '{SECTION}' section"
    section = card[card.index(SECTION) :]
    assert "\n## " not in section[len(SECTION) :], "the section must be the card's last"
    assert re.search(r"^\| *\| rexrank default \| official code \|$", section, re.M), "no default-vs-official table"
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) >= 3
    named = section[section.index("Named options") :]
    options = {m.group(1) for m in re.finditer(r"`(\w+)(?:=[^`]*)?`", named)}
    unknown = options - _accepted_options(name)
    assert not unknown, f"metrics/{name}/README.md names options {sorted(unknown)} that {name} does not accept"
