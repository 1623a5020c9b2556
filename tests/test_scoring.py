"""A scoring run keeps what it finished: results are written as each metric completes, a
failing metric is reported (name, reason, advice) while the others are kept, and the exit
code says that something failed."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from support.llm_fake_server import FakeOpenAIServer, Reply
from rexrank.cli.main import main
from rexrank.data import data_path
from rexrank.errors import MetricError
from rexrank.scoring import score_submission

EXAMPLE_PREDICTIONS = str(data_path("example_predictions.json"))


def score(tmp_path, metrics: str, *extra: str) -> int:
    return main(["score", "--dataset", "example", "--predictions", EXAMPLE_PREDICTIONS, "--metrics", metrics,
                 "--out", str(tmp_path / "r.json"), "--per-study", str(tmp_path / "s.parquet"), "--no-progress", *extra])


def test_failing_metrics_are_reported_and_the_finished_one_is_kept(tmp_path, capsys):
    """The issue's run: bleu2 finishes, bertscore and radcliq have no weights (offline)."""
    assert score(tmp_path, "bleu2,bertscore,radcliq") == 1
    err = capsys.readouterr().err
    results = json.loads((tmp_path / "r.json").read_text())
    alone = score_submission("example", "findings", EXAMPLE_PREDICTIONS, metrics="bleu2", progress=False)
    assert results["metrics"]["bleu2"]["scores"] == alone.results["metrics"]["bleu2"]["scores"]
    assert set(results["failed"]) == {"bertscore", "radcliq"}
    assert results["pending"] == [] and results["complete"] is False
    for name in ("bertscore", "radcliq"):
        failure = results["failed"][name]
        assert "is not in the local cache" in failure["reason"] and "--metric-option" in failure["advice"]
        assert f"FAILED {name}: {failure['reason']}" in err
    assert "2 of 3 metrics failed; the others are kept" in err
    per_study = pd.read_parquet(tmp_path / "s.parquet")
    assert list(per_study.columns) == ["id", "bleu2"]
    assert per_study["bleu2"].tolist() == alone.per_study["bleu2"].tolist()


def test_results_are_on_disk_before_the_next_metric_ends(tmp_path, monkeypatch):
    """Interrupted during the second metric (Ctrl-C, a killed job): the first one's scores are there."""
    import rexrank.metrics.bertscore as bertscore

    def interrupted(self, predictions, references, start, stop):
        raise KeyboardInterrupt

    monkeypatch.setattr(bertscore.BertScore, "_score_part", interrupted)
    assert score(tmp_path, "bleu2,bertscore") == 130
    results = json.loads((tmp_path / "r.json").read_text())
    assert list(results["metrics"]) == ["bleu2"] and results["pending"] == ["bertscore"]
    assert results["complete"] is False
    assert list(pd.read_parquet(tmp_path / "s.parquet").columns) == ["id", "bleu2"]


def test_a_complete_run_exits_zero_and_says_so(tmp_path):
    assert score(tmp_path, "bleu2") == 0
    results = json.loads((tmp_path / "r.json").read_text())
    assert results["complete"] is True and results["failed"] == {} and results["pending"] == []


def test_without_keep_going_the_error_propagates():
    """The backend's default: a metric that cannot run fails the request (nothing partial published)."""
    with pytest.raises(MetricError, match="distilbert/distilroberta-base"):
        score_submission("example", "findings", EXAMPLE_PREDICTIONS, metrics="bleu2,bertscore", progress=False)


def test_a_metric_that_scored_no_study_is_a_failed_metric(tmp_path, capsys):
    """Every LLM call refused (here: HTTP 400): not a column of NaN that reads like a result."""
    with FakeOpenAIServer(lambda path, body: Reply(400, {"error": {"message": "model not found"}})) as server:
        code = score(tmp_path, "bleu2,fineradscore", "--llm-base-url", server.base_url, "--llm-model", "judge",
                     "--metric-option", f"fineradscore.cache_dir={tmp_path / 'llm'}")
    assert code == 1
    results = json.loads((tmp_path / "r.json").read_text())
    assert "bleu2" in results["metrics"] and "fineradscore" not in results["metrics"]
    reason = results["failed"]["fineradscore"]["reason"]
    assert reason.startswith("none of the 19 studies could be scored: ") and "HTTP 400" in reason
