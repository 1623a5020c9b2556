"""The backend scores ReXrank's metric set by default, recorded in the store (issue 14):
a new entry is ranked like the published ones. An LLM-judged metric without an LLM on
the worker is neither a failure of every request nor dropped silently: each result and
request names it and says why; a required metric that cannot run fails the request with
the reason, as the coverage rule does."""
from __future__ import annotations

import json

import pytest

from support.llm_fake_server import FakeOpenAIServer
from rexrank.backend.worker import Worker
from rexrank.cli.main import main
from rexrank.errors import MetricError, RexrankError
from rexrank.store import FAILED, FINISHED, Quota, open_store
from rexrank.store.config import REXRANK_LLM_METRICS, REXRANK_METRICS
from support.llm_judges import judge, llm_options
from support.requests import submit

LLM_VARIABLES = ("REXRANK_LLM_BASE_URL", "REXRANK_LLM_MODEL", "REXRANK_LLM_BACKEND", "OPENAI_BASE_URL", "REXRANK_METRICS")


@pytest.fixture(autouse=True)
def no_llm_in_the_environment(monkeypatch):
    for name in LLM_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def config_file(root) -> dict:
    return json.loads((root / "requests" / "config.json").read_text())


def test_a_store_without_a_set_gets_rexranks_recorded_in_it(tmp_path):
    root = tmp_path / "s"
    worker = Worker(open_store(root), worker_id="w")
    # every published column: BLEU-2, BERTScore, SembScore, RadGraph, 1/RadCliQ-v1, RaTEScore, GREEN, 1/FineRadScore
    assert config_file(root) == {"metrics": ["bleu2", "bertscore", "sembscore", "radgraph", "radcliq", "ratescore"],
                                 "llm_metrics": ["green", "fineradscore"]}
    assert worker.metrics == list(REXRANK_METRICS)  # no LLM here: the LLM-judged ones are named, not scored
    assert set(worker.not_scored) == set(REXRANK_LLM_METRICS)
    assert all("no LLM is configured" in why for why in worker.not_scored.values())
    (root / "requests" / "config.json").write_text(json.dumps({"metrics": ["bleu2"], "llm_metrics": []}))
    assert Worker(open_store(root), worker_id="w2").metrics == ["bleu2"]  # the store's choice, kept
    assert Worker(open_store(root), metrics="bleu2,bertscore", worker_id="w3").metrics == ["bleu2", "bertscore"]
    assert config_file(root) == {"metrics": ["bleu2"], "llm_metrics": []}  # a worker's own list is not recorded


def test_an_llm_metric_without_an_llm_is_named_in_the_result_and_the_request(tmp_path, capsys):
    root = tmp_path / "s"
    store = open_store(root, quota=Quota(0))
    (root / "requests").mkdir(parents=True, exist_ok=True)
    (root / "requests" / "config.json").write_text(json.dumps({"metrics": ["bleu2"], "llm_metrics": ["fineradscore"]}))
    req = submit(store)
    assert Worker(store, worker_id="w").run(once=True) == 1
    final = store.get_request(req["id"])
    assert final["status"] == FINISHED
    [note] = final["notes"]
    assert note.startswith("fineradscore was not scored: no LLM is configured")
    [record] = store.list_results()
    assert set(record["values"]) == {"bleu2"} and set(record["not_scored"]) == {"fineradscore"}
    assert main(["status", "--store", str(root), req["id"]]) == 0
    assert "note: fineradscore was not scored: no LLM is configured" in capsys.readouterr().out
    assert main(["status", "--store", str(root), req["id"], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["notes"] == [note]


def test_an_llm_metric_with_an_llm_is_scored(tmp_path):
    root = tmp_path / "s"
    store = open_store(root, quota=Quota(0))
    (root / "requests").mkdir(parents=True, exist_ok=True)
    (root / "requests" / "config.json").write_text(json.dumps({"metrics": ["bleu2"], "llm_metrics": ["fineradscore"]}))
    req = submit(store)
    with FakeOpenAIServer(judge({})) as server:
        worker = Worker(store, metric_options=llm_options(server, tmp_path), worker_id="w")
        assert worker.metrics == ["bleu2", "fineradscore"] and worker.not_scored == {}
        worker.run(once=True)
    final = store.get_request(req["id"])
    assert final["status"] == FINISHED and not final.get("notes")
    [record] = store.list_results()
    assert {"bleu2", "fineradscore_inv"} <= set(record["values"]) and "not_scored" not in record


def test_radeval_metrics_named_by_the_store_are_scored_into_their_optional_columns(tmp_path):
    root = tmp_path / "s"
    store = open_store(root, quota=Quota(0))
    (root / "requests").mkdir(parents=True, exist_ok=True)
    (root / "requests" / "config.json").write_text(json.dumps({"metrics": ["bleu2", "rouge", "temporal_f1"]}))
    req = submit(store)
    worker = Worker(store, metric_options={"temporal_f1": {"ner": "keywords"}}, worker_id="w")
    assert worker.metrics == ["bleu2", "rouge", "temporal_f1"]
    worker.run(once=True)
    assert store.get_request(req["id"])["status"] == FINISHED
    [record] = store.list_results()
    assert {"bleu2", "rouge", "temporal_f1"} <= set(record["values"])
    assert 0 <= record["values"]["rouge"]["mean"] <= 1 and 0 <= record["values"]["temporal_f1"]["mean"] <= 1


def test_a_required_metric_that_cannot_run_fails_the_request_under_the_coverage_rule(tmp_path):
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    Worker(store, metrics="bleu2,sembscore", metric_options={"sembscore": {"checkpoint_path": str(tmp_path / "missing.pth")}},
           worker_id="w").run(once=True)
    final = store.get_request(req["id"])
    assert final["status"] == FAILED and final["failure_kind"] == "coverage"
    assert "could not run" in final["error"] and "checkpoint_path" in final["error"]
    assert "Nothing was published" in final["error"] and store.list_results() == []


def test_a_required_metric_that_cannot_be_set_up_stops_the_worker_at_start(tmp_path):
    root = tmp_path / "s"
    (root / "requests").mkdir(parents=True)
    (root / "requests" / "config.json").write_text(json.dumps({"metrics": ["bleu2", "fineradscore"]}))
    with pytest.raises(MetricError, match=r"fineradscore \(in the metric set recorded in .*config.json\) cannot run"):
        Worker(open_store(root), worker_id="w")


def test_the_store_set_is_recorded_from_the_command_line_and_checked(tmp_path, capsys):
    root = str(tmp_path / "s")
    code = main(["backend", "--store", root, "--once", "--store-metrics", "bleu2", "--store-llm-metrics", "fineradscore"])
    assert code == 0, capsys.readouterr().err
    assert config_file(tmp_path / "s") == {"metrics": ["bleu2"], "llm_metrics": ["fineradscore"]}
    code = main(["backend", "--store", root, "--once", "--store-metrics", "bleu2", "--store-llm-metrics", "radcliq"])
    assert code == 1 and "not LLM-judged" in capsys.readouterr().err
    (tmp_path / "s" / "requests" / "config.json").write_text(json.dumps({"metrics": ["bleu9"]}))
    with pytest.raises(RexrankError, match="unknown metric.*bleu9"):
        Worker(open_store(root), worker_id="w")
