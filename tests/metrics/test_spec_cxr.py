"""SPEC-CXR: entity set as data, generated schema, duplicate votes, pooled scores, end to end."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from support.llm_fake_server import FakeOpenAIServer, Reply, chat_body
from rexrank.errors import MetricError
from rexrank.metrics.registry import get_metric
from rexrank.metrics.spec_cxr_text import (
    EntitySet,
    answer_model,
    load_entity_set,
    parse_answer,
    resolve_duplicates,
    response_format,
    system_prompt,
)

CHEXPERT14 = [
    "no finding", "enlarged cardiomediastinum", "cardiomegaly", "lung lesion", "lung opacity", "edema", "consolidation",
    "pneumonia", "atelectasis", "pneumothorax", "pleural effusion", "pleural other", "fracture", "support devices",
]


def test_default_entity_set_has_the_papers_structure():
    es = load_entity_set()
    assert set(CHEXPERT14) <= set(es.entities)
    assert {"exam quality", "differential diagnoses"} <= set(es.categories)
    assert len(es.entities) == len(set(es.entities))


def test_user_entity_set_and_errors(tmp_path):
    good = tmp_path / "set.json"
    good.write_text(json.dumps({"name": "mine", "categories": {"pleura": ["Pleural Effusion", "pneumothorax"]}}))
    es = load_entity_set(good)
    assert es.name == "mine" and es.entities == ["pleural effusion", "pneumothorax"]
    dup = tmp_path / "dup.yaml"
    dup.write_text("categories:\n  a: [x]\n  b: [x]\n")
    with pytest.raises(MetricError, match="both 'a' and 'b'"):
        load_entity_set(dup)
    with pytest.raises(MetricError, match="does not exist"):
        load_entity_set(tmp_path / "missing.yaml")
    empty = tmp_path / "empty.yaml"
    empty.write_text("categories:\n  a: []\n")
    with pytest.raises(MetricError, match="non-empty list"):
        load_entity_set(empty)


def j(entity, presence, location="not_available", severity="not_available", comparison="other"):
    return {"entity": entity, "presence": presence, "location": location, "severity": severity, "comparison": comparison}


def test_schema_rejects_unknown_entities_and_labels():
    model = answer_model(load_entity_set())
    assert parse_answer(json.dumps({"entities": [j("Pleural  Effusion", "TP")]}), model)[0]["entity"] == "pleural effusion"
    with pytest.raises(ValueError, match="entity"):
        parse_answer(json.dumps({"entities": [j("unicorn", "TP")]}), model)
    with pytest.raises(ValueError, match="presence"):
        parse_answer(json.dumps({"entities": [j("edema", "maybe")]}), model)
    with pytest.raises(ValueError, match="JSON"):
        parse_answer("{", model)


SMALL_SET = EntitySet("small", {"pleura": ("pleural effusion", "pneumothorax"), "heart": ("cardiomegaly",)}, "test")


def test_an_entitys_category_and_an_unknown_entity():
    assert [SMALL_SET.category_of(e) for e in SMALL_SET.entities] == ["pleura", "pleura", "heart"]
    with pytest.raises(KeyError, match="fracture"):
        SMALL_SET.category_of("fracture")


def test_the_judge_is_asked_for_the_schema_and_shown_the_entities_written_out():
    def label(title, values, default=None):
        return {**({"default": default} if default else {}), "enum": list(values), "title": title, "type": "string"}

    alignment = ("aligned", "not_aligned", "not_available")
    judgement = {"properties": {
        "entity": label("Entity", SMALL_SET.entities), "presence": label("Presence", ("TP", "FP", "TN", "FN")),
        "location": label("Location", alignment, "not_available"), "severity": label("Severity", alignment, "not_available"),
        "comparison": label("Comparison", ("adding_unmentioned", "missing_mentioned", "other"), "other")},
        "required": ["entity", "presence"], "title": "EntityJudgement", "type": "object"}
    assert response_format(SMALL_SET) == {"type": "json_schema", "json_schema": {"name": "spec_cxr_answer", "schema": {
        "$defs": {"EntityJudgement": judgement},
        "properties": {"entities": {"items": {"$ref": "#/$defs/EntityJudgement"}, "title": "Entities", "type": "array"}},
        "required": ["entities"], "title": "SpecCxrAnswer", "type": "object"}}}
    assert "names; the group is given for orientation):\n- pleura: pleural effusion, pneumothorax\n- heart: cardiomegaly\n\n" \
        in system_prompt(SMALL_SET)
    # fields the schema does not name are ignored, as the judge may add a comment
    extra = {"entities": [{**j("cardiomegaly", "TP"), "comment": "enlarged"}], "note": "x"}
    assert parse_answer(json.dumps(extra), answer_model(SMALL_SET)) == [j("cardiomegaly", "TP")]


def test_duplicates_majority_vote_ties_first_occurrence():
    out = resolve_duplicates(
        [j("edema", "FP", "aligned"), j("edema", "TP", "not_aligned"), j("edema", "TP", "aligned"), j("cardiomegaly", "TN")]
    )
    assert out == [j("edema", "TP", "aligned"), j("cardiomegaly", "TN")]  # TP 2:1; location tie 2 aligned vs 1 -> aligned
    out = resolve_duplicates([j("edema", "FN"), j("edema", "FP")])
    assert out[0]["presence"] == "FN"  # 1:1 tie -> first


def test_metric_end_to_end(tmp_path):
    answers = {
        "cand0": {"entities": [
            j("pleural effusion", "TP", "aligned", "not_aligned"),
            j("cardiomegaly", "FP"),
            j("pneumothorax", "TN"),
        ]},
        "cand1": {"entities": [
            j("pleural effusion", "TP", "not_aligned", "aligned", "missing_mentioned"),
            j("edema", "FN"),
        ]},
        "cand2": "not json",
    }

    def script(path, body):
        assert body["response_format"]["type"] == "json_schema"
        user = body["messages"][1]["content"]
        key = user.split("CANDIDATE:\n")[1].strip()
        reply = answers[key]
        return Reply(body=chat_body(reply if isinstance(reply, str) else json.dumps(reply)))

    with FakeOpenAIServer(script) as server:
        # a short backoff: a request the script refuses (a wrong response_format) fails in seconds
        metric = get_metric("spec_cxr", model="judge", base_url=server.base_url, max_reasks=1, backoff=0.01,
                            cache_dir=str(tmp_path), progress=False)
        result = metric.score(["cand0", "cand1", "cand2"], ["r0", "r1", "r2"])
    # errors: cand0 = severity not aligned + FP = 2; cand1 = location + comparison + FN = 3
    np.testing.assert_array_equal(result.primary[:2], [2, 3])
    assert math.isnan(result.primary[2]) and "invalid answer after 2 attempt(s)" in result.failures[2]
    # presence counts per study: cand0 TP, FP (and a TN); cand1 TP, FN; cand2 unscored
    for label, counts in (("tp", [1, 1]), ("fp", [1, 0]), ("fn", [0, 1])):
        assert result.per_study[f"spec_cxr_{label}"][:2].tolist() == counts and math.isnan(result.per_study[f"spec_cxr_{label}"][2])
    overall = result.details["overall"]
    assert (overall["tp"], overall["fp"], overall["fn"], overall["tn"]) == (2, 1, 1, 1)
    assert result.corpus["spec_cxr_presence_f1"] == pytest.approx(4 / 6)
    assert result.corpus["spec_cxr_location_accuracy"] == pytest.approx(0.5)
    assert result.corpus["spec_cxr_severity_accuracy"] == pytest.approx(0.5)
    assert result.corpus["spec_cxr_comparison_accuracy"] == pytest.approx(0.5)
    effusion = next(e for e in result.details["per_entity"] if e["entity"] == "pleural effusion")
    assert effusion["presence_f1"] == 1.0 and effusion["category"] == "pleura"
    assert result.details["per_category"]["pleura"]["tn"] == 1
    assert math.isnan(next(e for e in result.details["per_entity"] if e["entity"] == "fracture")["presence_f1"])


def test_each_kind_of_error_counts_one_in_a_studys_errors():
    """A presence FP or FN, a location or severity not aligned, a comparison added or missed:
    one error each; aligned, not available, TP, TN and other comparisons none."""
    from rexrank.metrics.spec_cxr import study_errors

    assert study_errors([j("a", "TP", "aligned", "aligned", "adding_unmentioned")]) == 1
    assert study_errors([j("a", "TN", comparison="missing_mentioned")]) == 1
    assert study_errors([j("a", "FP", "not_aligned", "not_aligned", "adding_unmentioned"),
                         j("b", "FN", "not_aligned", "aligned", "missing_mentioned")]) == 7
    assert study_errors([j("a", "TP", "aligned", "aligned"), j("b", "TN")]) == 0


def test_attributes_are_tallied_over_studies_for_true_positives_only():
    """Five studies judge the effusion present in both reports (TP) with each attribute
    aligned, not aligned or not available; a false positive's attributes are not counted.
    Counted by hand: location 1 aligned and 2 not; severity 2 and 1; comparison 3 "other"."""
    from rexrank.metrics.spec_cxr import pooled_scores, tally

    effusion = [("aligned", "not_aligned", "other"), ("not_aligned", "aligned", "adding_unmentioned"),
                ("not_aligned", "aligned", "other"), ("not_available", "not_available", "missing_mentioned"),
                ("not_available", "not_available", "other")]
    studies = [[j("pleural effusion", "TP", *attributes)] for attributes in effusion]
    studies[0].append(j("edema", "FP", "aligned", "aligned", "other"))
    table = tally(studies)
    assert dict(table["pleural effusion"]) == {"TP": 5, "loc_ok": 1, "loc_bad": 2, "sev_ok": 2, "sev_bad": 1, "cmp_ok": 3}
    assert dict(table["edema"]) == {"FP": 1}
    scores = pooled_scores(table["pleural effusion"])
    assert (scores["tp"], scores["fp"], scores["fn"], scores["tn"], scores["presence_f1"]) == (5, 0, 0, 0, 1.0)
    assert scores["location_accuracy"] == pytest.approx(1 / 3) and scores["severity_accuracy"] == pytest.approx(2 / 3)
    assert scores["comparison_accuracy"] == pytest.approx(3 / 5)


@pytest.mark.parametrize("backend, structured_output, response_format", [
    ("openai", "json_schema", "schema"), ("openai", "json_object", {"type": "json_object"}), ("openai", "none", None),
    ("transformers", "json_schema", None), ("transformers", "json_object", None)])
def test_the_request_asks_for_the_answer_format_only_of_an_openai_server(backend, structured_output, response_format):
    """Greedy decoding with the run's seed and token cap; a response_format (the entities'
    JSON schema, or any JSON object) only where the backend is an OpenAI-compatible server."""
    from rexrank.metrics.spec_cxr_text import response_format as schema_format

    server = {"base_url": "http://127.0.0.1:9/v1"} if backend == "openai" else {}
    metric = get_metric("spec_cxr", backend=backend, model="judge", structured_output=structured_output, seed=5,
                        max_tokens=77, progress=False, **server)
    expected = {"temperature": 0.0, "seed": 5, "max_tokens": 77}
    if response_format is not None:
        expected["response_format"] = schema_format(metric.entity_set) if response_format == "schema" else response_format
    assert metric._params() == expected


def test_counts_are_summed_key_by_key():
    from rexrank.metrics.spec_cxr import _sum_counts

    assert dict(_sum_counts([{"TP": 1, "loc_ok": 1}, {"TP": 2, "FP": 1}, {}])) == {"TP": 3, "loc_ok": 1, "FP": 1}


def test_the_defaults_a_users_entity_set_and_a_bad_answer_format(tmp_path):
    from rexrank.metrics.spec_cxr import SpecCxr

    served = {"model": "judge", "base_url": "http://127.0.0.1:9/v1", "progress": False}
    metric = SpecCxr(**served)
    assert (metric.max_reasks, metric.max_tokens, metric.structured_output) == (2, 4096, "json_schema")
    assert metric.entity_set.name == "rexrank-default-v1"
    mine = tmp_path / "set.json"
    mine.write_text(json.dumps({"name": "mine", "categories": {"pleura": ["pneumothorax"]}}))
    assert SpecCxr(entity_set=str(mine), **served).entity_set.entities == ["pneumothorax"]
    with pytest.raises(MetricError) as error:
        SpecCxr(structured_output="xml", **served)
    assert str(error.value) == "spec_cxr: structured_output must be json_schema, json_object or none, got 'xml'"


def test_the_config_records_what_changes_the_numbers():
    """The provenance of a run: the judge's settings, the prompt's version, the entity set (its
    name, where it came from, its size), the answer format, the re-asks and the temperature."""
    metric = get_metric("spec_cxr", model="judge", base_url="http://127.0.0.1:9/v1", max_reasks=3,
                        structured_output="json_object", progress=False)
    entities = load_entity_set()
    assert metric.config() == {
        **metric.settings.provenance(), "prompt": "rexrank-spec-cxr-v1", "entity_set": "rexrank-default-v1",
        "entity_set_source": "rexrank.data/spec_cxr_entities.yaml", "n_entities": len(entities.entities),
        "structured_output": "json_object", "max_reasks": 3, "temperature": 0.0}
    assert metric.config()["model"] == "judge" and metric.config()["base_url"] == "http://127.0.0.1:9/v1"


def test_the_judge_is_sent_the_system_prompt_the_pair_and_a_reask_naming_the_problem(tmp_path, capsys):
    """The messages as sent: the system prompt of the entity set, the reference and the
    candidate in the user message, and after an unusable answer that answer and a re-ask that
    names the problem; the bar is SPEC-CXR's."""
    from rexrank.metrics.json_answers import AnswerError
    from rexrank.metrics.llm_common import usage_report
    from rexrank.metrics.spec_cxr_text import REASK_TEMPLATE, USER_TEMPLATE

    bodies = []
    good = json.dumps({"entities": [j("edema", "FN")]})

    def script(path, body):
        bodies.append(body)
        return Reply(body=chat_body("not json" if len(bodies) == 1 else good))

    with FakeOpenAIServer(script) as server:
        metric = get_metric("spec_cxr", model="judge", base_url=server.base_url, max_reasks=1, backoff=0.01,
                            cache_dir=str(tmp_path), progress=True)
        result = metric.score(["the candidate"], ["the reference"])
    assert result.primary.tolist() == [1.0]
    assert result.details["reasks"] == 1 and result.details["llm_usage"] == usage_report(result.rows)
    asked = [{"role": "system", "content": system_prompt(metric.entity_set)},
             {"role": "user", "content": USER_TEMPLATE.format(reference="the reference", candidate="the candidate")}]
    assert asked[1]["content"] == "REFERENCE:\nthe reference\n\nCANDIDATE:\nthe candidate"
    assert bodies[0]["messages"] == asked
    with pytest.raises(AnswerError) as problem:
        parse_answer("not json", metric.model)
    assert bodies[1]["messages"] == [*asked, {"role": "assistant", "content": "not json"},
                                     {"role": "user", "content": REASK_TEMPLATE.format(problem=problem.value)}]
    assert bodies[1]["messages"][3]["content"].startswith("Your answer could not be used: ") and "None" not in \
        bodies[1]["messages"][3]["content"]
    assert "SPEC-CXR: 100%" in capsys.readouterr().err  # the bar's own name, as GREEN's


def test_an_entity_set_records_where_it_came_from_and_its_name():
    assert load_entity_set().source == "rexrank.data/spec_cxr_entities.yaml"


def test_a_user_entity_set_file_is_read_by_its_kind_and_refused_naming_what_is_wrong(tmp_path):
    def entity_set(name, text):
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    unnamed = entity_set("chest.yaml", "categories:\n  heart: [cardiomegaly]\n")
    assert (load_entity_set(unnamed).name, load_entity_set(unnamed).source) == ("chest", str(unnamed))
    # a .json file is read as JSON: its syntax error is JSON's
    with pytest.raises(MetricError, match=r"cannot read entity set .*broken\.json: Expecting ',' delimiter"):
        load_entity_set(entity_set("broken.json", '{"categories": {"a": ["x"] "b": ["y"]}}'))
    for name, text in [("list.yaml", "[1, 2]\n"), ("text.yaml", "categories: x\n"), ("none.yaml", "categories: {}\n")]:
        with pytest.raises(MetricError, match=r"must hold a mapping 'categories': \{category: \[entity, \.\.\.\]\}"):
            load_entity_set(entity_set(name, text))
    with pytest.raises(MetricError, match="category 'a' must be a non-empty list of entity names"):
        load_entity_set(entity_set("blank.yaml", "categories:\n  a: ['  ']\n"))
    missing = tmp_path / "missing.yaml"
    with pytest.raises(MetricError, match=f"entity set file '{missing}' does not exist"):
        load_entity_set(missing)


def test_an_answer_that_is_no_object_or_holds_no_objects_is_refused_for_a_reask():
    model = answer_model(SMALL_SET)
    for text in ("[1]", '{"entities": ["cardiomegaly"]}'):
        with pytest.raises(ValueError, match="^field "):
            parse_answer(text, model)
