"""SPEC-CXR's entity set, answer schema, prompt and duplicate resolution.

The official code (lunit-io/spec-cxr) is not available to us; this follows the paper's
description (MICCAI 2025): per entity of a curated set, presence TP/FP/TN/FN, location and
severity aligned / not aligned / not available, comparison adding-unmentioned /
missing-mentioned / other. Entity set, prompt and schema are rexrank's own.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, create_model

from rexrank.errors import MetricError
from rexrank.metrics.json_answers import load_json, validate

PRESENCE = ("TP", "FP", "TN", "FN")
ALIGNMENT = ("aligned", "not_aligned", "not_available")
COMPARISON = ("adding_unmentioned", "missing_mentioned", "other")
FIELDS = ("presence", "location", "severity", "comparison")


@dataclass(frozen=True)
class EntitySet:
    name: str
    categories: dict[str, tuple[str, ...]]
    source: str

    @property
    def entities(self) -> list[str]:
        return [e for members in self.categories.values() for e in members]

    def category_of(self, entity: str) -> str:
        for category, members in self.categories.items():
            if entity in members:
                return category
        raise KeyError(entity)


def load_entity_set(path: str | Path | None = None) -> EntitySet:
    """The default set shipped in rexrank.data, or a user's YAML/JSON file with
    {"name": ..., "categories": {category: [entity, ...]}}."""
    if path is None:
        text = resources.files("rexrank.data").joinpath("spec_cxr_entities.yaml").read_text(encoding="utf-8")
        source = "rexrank.data/spec_cxr_entities.yaml"
    else:
        p = Path(path)
        if not p.is_file():
            raise MetricError(f"spec_cxr: entity set file {str(p)!r} does not exist")
        text, source = p.read_text(encoding="utf-8"), str(p)
    try:
        data = json.loads(text) if source.endswith(".json") else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise MetricError(f"spec_cxr: cannot read entity set {source}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("categories"), dict) or not data["categories"]:
        raise MetricError(f"spec_cxr: {source} must hold a mapping 'categories': {{category: [entity, ...]}}")
    categories: dict[str, tuple[str, ...]] = {}
    seen: dict[str, str] = {}
    for category, members in data["categories"].items():
        if not isinstance(members, list) or not members or not all(isinstance(m, str) and m.strip() for m in members):
            raise MetricError(f"spec_cxr: {source}: category {category!r} must be a non-empty list of entity names")
        names = tuple(" ".join(m.lower().split()) for m in members)
        for entity in names:
            if entity in seen:
                raise MetricError(f"spec_cxr: {source}: entity {entity!r} is listed in both {seen[entity]!r} and {category!r}")
            seen[entity] = str(category)
        categories[str(category)] = names
    return EntitySet(str(data.get("name") or Path(source).stem), categories, source)


def answer_model(entity_set: EntitySet) -> type[BaseModel]:
    """A pydantic model generated from the set: the entity name must be one of the set (other
    fields of an answer are ignored, pydantic's default)."""
    judgement = create_model(
        "EntityJudgement",
        entity=(Literal[tuple(entity_set.entities)], ...),  # type: ignore[valid-type]
        presence=(Literal[PRESENCE], ...),  # type: ignore[valid-type]
        location=(Literal[ALIGNMENT], "not_available"),  # type: ignore[valid-type]
        severity=(Literal[ALIGNMENT], "not_available"),  # type: ignore[valid-type]
        comparison=(Literal[COMPARISON], "other"),  # type: ignore[valid-type]
    )
    return create_model("SpecCxrAnswer", entities=(list[judgement], ...))


def response_format(entity_set: EntitySet) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "spec_cxr_answer", "schema": answer_model(entity_set).model_json_schema()}}


SYSTEM_TEMPLATE = """You compare a machine-written chest X-ray report (CANDIDATE) with the radiologist's report of the same study (REFERENCE), entity by entity.

Entities (use these exact names; the group is given for orientation):
{entity_list}

For every entity that either report mentions (positively or negatively), return one judgement:
- "presence": "TP" both reports say it is present; "FP" only the candidate says present; "FN" only the reference says present; "TN" both say or imply it is absent.
- "location": for a TP, "aligned" if the candidate puts it where the reference does, "not_aligned" if not, "not_available" if either report gives no location; "not_available" for anything but TP.
- "severity": the same for size, extent, grade or severity.
- "comparison": "adding_unmentioned" if the candidate describes a change from a prior study that the reference does not; "missing_mentioned" if the reference describes a change from a prior study that the candidate omits; otherwise "other".
Map synonyms to the closest listed entity (e.g. "effusion" -> "pleural effusion"); ignore findings that match no entity.

Answer with one JSON object and nothing else:
{{"entities": [{{"entity": "...", "presence": "...", "location": "...", "severity": "...", "comparison": "..."}}]}}"""

USER_TEMPLATE = "REFERENCE:\n{reference}\n\nCANDIDATE:\n{candidate}"
REASK_TEMPLATE = 'Your answer could not be used: {problem}\nReply again with only the JSON object {{"entities": [...]}}, using only the listed entity names and labels.'


def system_prompt(entity_set: EntitySet) -> str:
    lines = [f"- {category}: {', '.join(members)}" for category, members in entity_set.categories.items()]
    return SYSTEM_TEMPLATE.format(entity_list="\n".join(lines))


def parse_answer(text: str, model: type[BaseModel]) -> list[dict]:
    data = load_json(text)
    if isinstance(data, dict) and isinstance(data.get("entities"), list):
        for item in data["entities"]:
            if isinstance(item, dict) and isinstance(item.get("entity"), str):
                item["entity"] = " ".join(item["entity"].lower().split())
    answer = validate(data, model)
    return resolve_duplicates([j.model_dump() for j in answer.entities])


def resolve_duplicates(judgements: list[dict]) -> list[dict]:
    """One judgement per entity: each field by majority vote over the entity's duplicates,
    ties broken by the value that occurs first."""
    groups: dict[str, list[dict]] = {}
    for j in judgements:
        groups.setdefault(j["entity"], []).append(j)
    out = []
    for entity, group in groups.items():
        merged = {"entity": entity}
        for field in FIELDS:
            values = [j[field] for j in group]
            counts = Counter(values)
            top = max(counts.values())
            merged[field] = next(v for v in values if counts[v] == top)  # first occurrence among the tied
        out.append(merged)
    return out
