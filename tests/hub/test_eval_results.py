"""Results on Hub model pages (issue 21.4): `rexrank export eval-results` writes the Hub's
Eval Results files and the public test-set repos carry `eval.yaml`, both checked against
schemas written here from the Hub's documentation (https://huggingface.co/docs/hub/eval-results,
https://github.com/huggingface/hub-docs/blob/main/eval_results.yaml), not from our code."""
from __future__ import annotations

import dataclasses
import datetime

import pytest
import yaml

from rexrank.cli.main import main
from rexrank.store import open_store
from support.eval_results import BENCHMARK, check

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


# ---- Eval Results: a mean of exactly 0 is a value ------------------------------------------
def test_eval_results_export_keeps_a_column_whose_mean_is_zero():
    from rexrank.hub.eval_results import eval_results_file

    record = {"id": "rexrank/iu_xray/findings/zero", "test_set": "iu_xray", "track": "findings", "date": "2026-11-01",
              "source": "rexrank",
              "values": {"bleu2": {"mean": 0.0, "ci95": 0.0, "n": 590}, "radcliq_v1_inv": {"mean": 0.5, "ci95": None, "n": None}}}
    entries = eval_results_file(record, org="rexrank").entries
    by_task = {e["dataset"]["task_id"]: e for e in entries}
    assert set(by_task) == {"findings_bleu2", "findings_radcliq_v1_inv"}
    assert by_task["findings_bleu2"]["value"] == 0.0
    assert "n = 590 studies" in by_task["findings_bleu2"]["notes"]
    assert "95% CI ± 0" in by_task["findings_bleu2"]["notes"]


# ---- Eval Results: entries and notes, written out by hand ----------------------------------------
def test_eval_results_entries_and_notes_by_hand():
    from rexrank.hub.eval_results import EvalResultsFile, eval_results_file

    record = {"id": "rexrank/iu_xray/findings_impression/m1", "test_set": "iu_xray", "track": "findings_impression",
              "date": "2026-11-02", "source": "rexrank",
              "values": {"bleu2": {"mean": 0.25, "ci95": 0.012345, "n": 590},
                         "radcliq_v1_inv": {"mean": 0.8, "ci95": None, "n": None},
                         "rouge": {"mean": 0.4, "ci95": None, "n": None},  # optional: not a task of the benchmark
                         "green": {"mean": None}}}
    out = eval_results_file(record, org="acme", endpoint="https://hub.example/")
    assert isinstance(out, EvalResultsFile)
    assert out.path == ".eval_results/rexrank_iu_xray_findings_impression.yaml"
    source = {"url": "https://hub.example/spaces/acme/leaderboard", "name": "ReXrank leaderboard", "user": "acme"}
    assert out.entries == [
        {"dataset": {"id": "acme/iu_xray", "task_id": "findings_impression_radcliq_v1_inv"}, "value": 0.8,
         "date": "2026-11-02", "source": source,
         "notes": "ReXrank 1/RadCliQ-v1, findings + impression; result rexrank/iu_xray/findings_impression/m1"},
        {"dataset": {"id": "acme/iu_xray", "task_id": "findings_impression_bleu2"}, "value": 0.25,
         "date": "2026-11-02", "source": source,
         "notes": "ReXrank BLEU, findings + impression; n = 590 studies; 95% CI ± 0.01235; "
                  "result rexrank/iu_xray/findings_impression/m1"},
    ]
    assert yaml.safe_load(out.text()) == out.entries
    assert list(out.entries[0]) == ["dataset", "value", "date", "source", "notes"]


def test_eval_results_of_a_published_figure_dated_by_year():
    from rexrank.hub.eval_results import eval_results_file

    record = {"id": "published/iu_xray/findings/x", "test_set": "iu_xray", "track": "findings", "date": "2024",
              "source": "published", "values": {"bleu2": {"mean": 0.2, "ci95": None, "n": None}}}
    [entry] = eval_results_file(record, org="rexrank").entries
    assert "date" not in entry  # a bare year is no ISO-8601 date
    assert entry["source"] == {"url": "https://huggingface.co/spaces/rexrank/leaderboard",
                               "name": "ReXrank leaderboard (figures published by ReXrank)", "user": "rexrank"}
    assert entry["notes"] == "ReXrank BLEU, findings section; dated 2024; result published/iu_xray/findings/x"
    timed = eval_results_file({**record, "date": "2026-11-02T10:00:00Z"}, org="rexrank").entries[0]
    assert timed["date"] == "2026-11-02T10:00:00Z" and "dated" not in timed["notes"]
    undated = eval_results_file({**record, "date": None}, org="rexrank").entries[0]
    assert "date" not in undated and undated["notes"] == "ReXrank BLEU, findings section; result published/iu_xray/findings/x"


def test_eval_results_refusals_say_why():
    from rexrank.hub.eval_results import ExportError, eval_results_file, exportable

    assert exportable({"test_set": "iu_xray"}) is None
    assert exportable({"test_set": "nope"}) == "unknown test set 'nope'"
    assert exportable({"test_set": "mimic_cxr"}) == ("MIMIC-CXR (test) is not published on the Hub (dua access), so there "
                                                    "is no benchmark dataset for the Hub to link the result to")
    with pytest.raises(ExportError, match=r"^result 'r9': unknown test set 'nope'$"):
        eval_results_file({"id": "r9", "test_set": "nope"}, org="o")
    with pytest.raises(ExportError, match=r"^result 'r8' has no leaderboard value to export$"):
        eval_results_file({"id": "r8", "test_set": "iu_xray", "track": "findings", "values": {}}, org="o")
    with pytest.raises(ExportError, match=r"^result 'r7' has no leaderboard value to export$"):
        eval_results_file({"id": "r7", "test_set": "iu_xray", "track": "findings"}, org="o")


def test_benchmark_definition_by_hand():
    from rexrank.hub.eval_results import benchmark_definition, benchmark_yaml, data_split, task_id
    from rexrank.testsets.registry import TEST_SETS

    spec = TEST_SETS["iu_xray"]
    definition = benchmark_definition(spec)
    assert definition["name"] == "ReXrank IU-Xray (test)"
    assert definition["evaluation_framework"] == "rexrank"
    assert "`rexrank score --dataset iu_xray`" in definition["description"]
    assert definition["description"].startswith("The IU-Xray (test) set of ReXrank, the chest X-ray report generation")
    first8 = ["radcliq_v1_inv", "bleu2", "bertscore", "sembscore", "radgraph", "ratescore", "green", "fineradscore_inv"]
    assert [t["id"] for t in definition["tasks"]] == [f"{track}_{k}" for track in ("findings", "findings_impression")
                                                      for k in first8]
    assert {(t["config"], t["split"]) for t in definition["tasks"]} == {("default", "test")}
    assert yaml.safe_load(benchmark_yaml(spec).decode()) == definition
    assert list(definition) == ["name", "description", "evaluation_framework", "tasks"]
    assert data_split(TEST_SETS["chexpert_plus"]) == "validation" and data_split(spec) == "test"
    assert task_id("findings", "bleu2") == "findings_bleu2"


# ---- Eval Results: the benchmark's yaml as written -------------------------------------------
def test_the_benchmark_and_eval_results_yaml_as_written():
    """The files as the Hub reads them: keys in the documented order (not sorted), "±"
    written as itself, lines folded at 100 characters (PyYAML's default is 80)."""
    from rexrank.hub.eval_results import benchmark_definition, benchmark_yaml, eval_results_file
    from rexrank.testsets.registry import TEST_SETS

    spec = TEST_SETS["iu_xray"]
    assert benchmark_definition(spec)["description"] == (
        "The IU-Xray (test) set of ReXrank, the chest X-ray report generation benchmark (Zhang et al., 2024, "
        "arXiv:2411.15122). A model writes the findings section (track 'findings') or findings and impression "
        "(track 'findings_impression') of each study; each task is one ReXrank metric on one track, scored with "
        "rexrank (`rexrank score --dataset iu_xray`). Higher is better for every task: RadCliQ-v1 and FineRadScore "
        "are reported as 1 / mean, as on the ReXrank leaderboard.")
    text = benchmark_yaml(spec).decode()
    assert text.startswith("name: ReXrank IU-Xray (test)\ndescription: 'The IU-Xray (test) set of ReXrank")
    assert [line.split(":")[0] for line in text.splitlines() if line[:1].isalpha()] == [
        "name", "description", "evaluation_framework", "tasks"]
    assert "- id: findings_radcliq_v1_inv\n  config: default\n  split: test\n" in text
    lengths = [len(line) for line in text.splitlines()]
    assert 90 < max(lengths) <= 106
    record = {"id": "r1", "test_set": "iu_xray", "track": "findings",
              "date": "2026-11-02", "source": "rexrank", "values": {"bleu2": {"mean": 0.25, "ci95": 0.0123, "n": 590}}}
    out = eval_results_file(record, org="rexrank").text()
    assert "95% CI ± 0.0123" in out  # not escaped
    assert out.index("- dataset:") < out.index("  value:") < out.index("  date:") < out.index("  source:") < out.index("  notes:")
    assert out.index("    id: rexrank/iu_xray") < out.index("    task_id: findings_bleu2")
    assert out.index("    url:") < out.index("    name:") < out.index("    user:")
    # an 86-character line stays whole at 100 (PyYAML would fold it at 80)
    assert "  notes: ReXrank BLEU, findings section; n = 590 studies; 95% CI ± 0.0123; result r1\n" in out


def test_the_benchmark_description_folds_at_100_characters():
    from rexrank.hub.eval_results import benchmark_yaml
    from rexrank.testsets.registry import TEST_SETS

    lines = benchmark_yaml(TEST_SETS["iu_xray"]).decode().splitlines()
    # PyYAML breaks a long scalar at the first space once the line passes the width (100)
    assert lines[1] == ("description: 'The IU-Xray (test) set of ReXrank, the chest X-ray report generation benchmark "
                        "(Zhang et")
    assert lines[2] == ("  al., 2024, arXiv:2411.15122). A model writes the findings section (track ''findings'') or "
                        "findings and")


def test_eval_results_of_a_track_without_a_title_and_an_endpoint_with_a_path():
    from rexrank.hub.eval_results import eval_results_file

    record = {"id": "r2", "test_set": "iu_xray", "track": "custom_track", "date": "", "source": "rexrank",
              "values": {"bleu2": {"mean": 0.3, "ci95": None, "n": 0}}}
    [entry] = eval_results_file(record, org="o", endpoint="https://mirror.example/HX/").entries
    assert entry["notes"] == "ReXrank BLEU, custom_track; result r2"  # n = 0 is no count to state
    assert entry["dataset"]["task_id"] == "custom_track_bleu2"
    assert entry["source"]["url"] == "https://mirror.example/HX/spaces/o/leaderboard"


# ---- Eval Results: a test set titled otherwise -----------------------------------------------
def test_a_test_set_titled_otherwise_folds_at_100_and_keeps_its_letters():
    """The benchmark file of another public test set: lines folded at width 100, accented
    letters written as themselves (PyYAML escapes them unless told)."""
    from rexrank.hub.eval_results import benchmark_yaml
    from rexrank.testsets.registry import TEST_SETS

    text = benchmark_yaml(dataclasses.replace(TEST_SETS["iu_xray"], title="IU-Xray")).decode()
    # PyYAML breaks at the first space once a line passes the width: after "scored" (101
    # characters); at width 101 it would keep " with" on the line
    assert "  (track ''findings_impression'') of each study; each task is one ReXrank metric on one track, scored\n" in text
    accented = benchmark_yaml(dataclasses.replace(TEST_SETS["iu_xray"], title="Hôpital (test)")).decode()
    assert accented.startswith("name: ReXrank Hôpital (test)\n")


# ---- Eval Results: what the mutation tool found unpinned (issue 40) ---------------------------
def test_an_eval_results_note_folds_at_100_characters():
    """PyYAML breaks a plain scalar at the first space once the line passes the width: at 100 the
    note's 101st character (the "e") ends the line; at 101 " f" would stay on it."""
    from rexrank.hub.eval_results import eval_results_file

    record = {"id": "req-00042 a b c d e f", "test_set": "iu_xray", "track": "findings", "date": "2026-11-02",
              "source": "rexrank", "values": {"bleu2": {"mean": 0.25, "ci95": 0.0123, "n": 590}}}
    lines = eval_results_file(record, org="rexrank").text().splitlines()
    assert lines[-2:] == ["  notes: ReXrank BLEU, findings section; n = 590 studies; 95% CI ± 0.0123; result req-00042 a b c d e",
                          "    f"]
    assert len(lines[-2]) == 101


def test_only_the_values_that_are_no_task_are_left_out_each_with_why():
    from rexrank.hub.eval_results import left_out

    record = {"values": {"bleu2": {"mean": 0.2, "ci95": None, "n": 590},  # a task: exported, not left out
                         "rouge": {"mean": 0.3, "ci95": None, "n": 590},  # an optional column
                         "my_metric": {"mean": 0.4},  # no column of the board
                         "unscored": {"mean": None},  # no value to export
                         "note": "free text"}}  # no score
    assert left_out(record) == {"ROUGE-L": "an optional column, not one of ReXrank's eight: no task of the benchmark",
                                "my_metric": "no leaderboard column"}
    assert left_out({"values": None}) == {} and left_out({}) == {}
