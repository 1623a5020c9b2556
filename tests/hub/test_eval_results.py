"""Results on Hub model pages (issue 21.4): `rexrank export eval-results` writes the Hub's
Eval Results files and the public test-set repos carry `eval.yaml`, both checked against
schemas written here from the Hub's documentation (https://huggingface.co/docs/hub/eval-results,
https://github.com/huggingface/hub-docs/blob/main/eval_results.yaml), not from our code."""
from __future__ import annotations

import datetime

import pytest
import yaml

from rexrank.cli.main import main
from rexrank.store import open_store

# The documented shapes: field -> (type, required). A nested dict is a sub-object.
EVAL_RESULT_ENTRY = {
    "dataset": ({"id": (str, True), "task_id": (str, True), "revision": (str, False),
                 "config": (str, False), "split": (str, False)}, True),
    "value": ((int, float), True),
    "verifyToken": (str, False),
    "date": (str, False),  # ISO-8601 date or datetime
    "source": ({"url": (str, True), "name": (str, False), "user": (str, False)}, False),
    "evaluation_framework": (str, False),
    "notes": (str, False),
}
BENCHMARK = {
    "name": (str, True),
    "description": (str, True),
    "evaluation_framework": (str, True),
    "tasks": ([{"id": (str, True), "config": (str, True), "split": (str, True)}], True),
}


def check(obj, schema, where="") -> None:
    """Raise AssertionError naming the first place where `obj` leaves `schema`."""
    if isinstance(schema, list):
        assert isinstance(obj, list) and obj, f"{where}: expected a non-empty list, got {obj!r}"
        for i, item in enumerate(obj):
            check(item, schema[0], f"{where}[{i}]")
        return
    assert isinstance(obj, dict), f"{where}: expected a mapping, got {obj!r}"
    unknown = set(obj) - set(schema)
    assert not unknown, f"{where}: fields the format does not have: {sorted(unknown)}"
    for field, (kind, required) in schema.items():
        if field not in obj:
            assert not required, f"{where}.{field} is required"
            continue
        value = obj[field]
        if isinstance(kind, (dict, list)):
            check(value, kind, f"{where}.{field}")
        else:
            assert isinstance(value, kind) and not isinstance(value, bool), f"{where}.{field}: {value!r} is not {kind}"


def test_the_schema_check_refuses_what_the_format_does_not_allow():
    good = [{"dataset": {"id": "cais/hle", "task_id": "default"}, "value": 20.9}]
    check(good, [EVAL_RESULT_ENTRY])
    for bad in ([{"dataset": {"id": "cais/hle"}, "value": 20.9}],  # task_id required
                [{"dataset": {"id": "cais/hle", "task_id": "x"}, "value": "20.9"}],  # value a number
                [{"dataset": {"id": "cais/hle", "task_id": "x"}, "value": 1, "score": 2}],  # unknown field
                [{"dataset": {"id": "cais/hle", "task_id": "x"}, "value": 1, "source": {"name": "n"}}]):  # url required
        with pytest.raises(AssertionError):
            check(bad, [EVAL_RESULT_ENTRY])


def test_the_benchmark_definition_of_a_public_test_set():
    from rexrank.hub.eval_results import benchmark_yaml
    from rexrank.testsets.registry import TEST_SETS

    doc = yaml.safe_load(benchmark_yaml(TEST_SETS["iu_xray"]))
    check(doc, BENCHMARK, "eval.yaml")
    assert doc["evaluation_framework"] == "rexrank"
    assert "IU-Xray" in doc["name"]
    ids = [t["id"] for t in doc["tasks"]]
    # 2 tracks × 8 board columns, the board's ranking column first in each track
    assert len(ids) == len(set(ids)) == 16
    assert ids[:2] == ["findings_radcliq_v1_inv", "findings_bleu2"]
    assert ids[8] == "findings_impression_radcliq_v1_inv"
    assert {"findings_fineradscore_inv", "findings_impression_green"} <= set(ids)
    assert {(t["config"], t["split"]) for t in doc["tasks"]} == {("default", "test")}  # the repo's one config and split


SUBMITTED = {
    "id": "req-0001", "model_name": "CXR-Writer", "institution": "Lab", "model_url": "https://x.org/m",
    "submitter": "alice", "date": "2026-11-20", "test_set": "iu_xray", "track": "findings", "source": "rexrank",
    "trained_on": [], "per_study_available": False,
    "values": {"bleu2": {"mean": 0.25, "ci95": 0.0125, "n": 590}, "radcliq_v1_inv": {"mean": 1.5, "ci95": 0.05, "n": 590},
               "green": {"mean": None, "ci95": None, "n": None}},
}


@pytest.fixture
def store(tmp_path):
    from rexrank.leaderboard.published import load_seed_records

    s = open_store(tmp_path / "s")
    s.add_results(load_seed_records())
    s.add_result(SUBMITTED)
    s.add_result({**SUBMITTED, "id": "req-0002", "test_set": "mimic_cxr"})
    return s


def export(tmp_path, *args):
    return main(["export", "eval-results", "--store", str(tmp_path / "s"), "--out", str(tmp_path / "out"), *args])


def test_one_result_as_eval_results(tmp_path, store, capsys):
    assert export(tmp_path, "req-0001", "--org", "rexrank") == 0
    path = tmp_path / "out" / ".eval_results" / "rexrank_iu_xray_findings.yaml"
    assert f"wrote {path} (2 scores)" in capsys.readouterr().out
    entries = yaml.safe_load(path.read_text())
    check(entries, [EVAL_RESULT_ENTRY], "eval_results")
    # the board's ranking column first; green has no value and is left out
    assert [e["dataset"] for e in entries] == [{"id": "rexrank/iu_xray", "task_id": "findings_radcliq_v1_inv"},
                                               {"id": "rexrank/iu_xray", "task_id": "findings_bleu2"}]
    assert [e["value"] for e in entries] == [1.5, 0.25]
    assert entries[1]["date"] == "2026-11-20" and datetime.date.fromisoformat(entries[1]["date"])
    assert entries[1]["source"] == {"url": "https://huggingface.co/spaces/rexrank/leaderboard",
                                    "name": "ReXrank leaderboard", "user": "rexrank"}
    assert entries[1]["notes"] == "ReXrank BLEU, findings section; n = 590 studies; 95% CI ± 0.0125; result req-0001"


def test_every_result_of_a_model_and_the_unpublished_sets_named(tmp_path, store, capsys):
    assert export(tmp_path, "--model", "medversa", "--org", "rexrank") == 0
    out, err = capsys.readouterr()
    written = sorted(p.name for p in (tmp_path / "out" / ".eval_results").iterdir())
    assert written == ["rexrank_iu_xray_findings.yaml", "rexrank_iu_xray_findings_impression.yaml"]
    # MedVersa's published rows on the other three sets are named, with why
    assert err.count("skipped published/") == 6 and "MIMIC-CXR" in err and "no benchmark dataset" in err
    entries = yaml.safe_load((tmp_path / "out" / ".eval_results" / "rexrank_iu_xray_findings.yaml").read_text())
    check(entries, [EVAL_RESULT_ENTRY], "eval_results")
    assert "date" not in entries[0]  # the published rows carry a year only: said in the notes instead
    assert "dated 20" in entries[0]["notes"] and entries[0]["source"]["name"].endswith("(figures published by ReXrank)")


def test_the_org_comes_from_the_store_or_a_stated_default(tmp_path, store, capsys, monkeypatch):
    # issue 31: README's `export eval-results --model ... --store ./rexrank-store` works as printed
    monkeypatch.delenv("REXRANK_STORE", raising=False)
    assert export(tmp_path, "req-0001") == 0
    out = capsys.readouterr().out
    # one sentence, with its verb (it was a fragment: "benchmark datasets of the Hub organisation rexrank (…)")
    assert "The scores are filed under the benchmark datasets of the Hub organisation rexrank (the default; --org ORG names another).\n" in out
    entries = yaml.safe_load((tmp_path / "out" / ".eval_results" / "rexrank_iu_xray_findings.yaml").read_text())
    assert {e["dataset"]["id"] for e in entries} == {"rexrank/iu_xray"}
    (tmp_path / "s" / "requests" / "config.json").write_text('{"org": "my-lab"}')
    assert export(tmp_path, "req-0001") == 0
    assert "Hub organisation my-lab (as the store's config says)." in capsys.readouterr().out


def test_every_value_left_out_is_named_with_why(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("REXRANK_STORE", raising=False)
    s = open_store(tmp_path / "s")
    s.add_result({**SUBMITTED, "values": {**SUBMITTED["values"], "rouge": {"mean": 0.3, "ci95": 0.01, "n": 590}}})
    assert export(tmp_path, "req-0001") == 0
    out = capsys.readouterr().out
    assert "(2 scores)" in out
    assert "left out ROUGE-L: an optional column, not one of ReXrank's eight: no task of the benchmark" in out


@pytest.mark.parametrize("args, message", [
    (["req-9999"], "no result 'req-9999'"),
    (["req-0002"], "result 'req-0002': MIMIC-CXR"),
    (["--model", "nobody"], "no result of a model named 'nobody'"),
])
def test_what_cannot_be_exported_is_said(tmp_path, store, capsys, args, message):
    assert export(tmp_path, *args, "--org", "rexrank") == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_two_results_of_a_model_on_one_track_are_not_guessed_between(tmp_path, store, capsys):
    store.add_result({**SUBMITTED, "id": "req-0003"})
    assert export(tmp_path, "--model", "CXR-Writer", "--org", "rexrank") == 1
    assert "2 results on iu_xray/findings (req-0001, req-0003)" in capsys.readouterr().err


def test_a_model_is_named_as_the_board_names_it_and_a_bare_name_only_when_it_is_one_namespaces(tmp_path, store, capsys):
    store.add_result({**SUBMITTED, "id": "req-0003", "namespace": "bob", "submitter": "bob"})
    # the board's title: bob's result only (alice's, filed before namespaces, is "alice / CXR-Writer")
    assert export(tmp_path, "--model", "bob / CXR-Writer", "--org", "rexrank") == 0
    entries = yaml.safe_load((tmp_path / "out" / ".eval_results" / "rexrank_iu_xray_findings.yaml").read_text())
    assert entries[0]["notes"].endswith("result req-0003")
    capsys.readouterr()
    # a bare name in two namespaces: which one is not guessed
    assert export(tmp_path, "--model", "cxr-writer", "--org", "rexrank") == 1
    err = capsys.readouterr().err
    assert "'cxr-writer' is a model of 2 namespaces" in err and "'alice / CXR-Writer', 'bob / CXR-Writer'" in err
    # a bare name of one namespace is that model
    assert export(tmp_path, "--model", "MedVersa", "--org", "rexrank") == 0
