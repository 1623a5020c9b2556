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


# The engine's parts called directly, on test metrics (support.backendhelpers, support.scoring_metrics):
# fast, every expected value by hand.

import hashlib  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
from datetime import datetime  # noqa: E402
from types import SimpleNamespace  # noqa: E402

import numpy as np  # noqa: E402

import rexrank  # noqa: E402
from rexrank.errors import RexrankError, SubmissionError  # noqa: E402
from rexrank.metrics.base import MetricResult  # noqa: E402
from rexrank.scoring import (RequestPart, _select, _with_test_set_context, failure_record, metric_summary,  # noqa: E402
                             run_header, score_predictions, score_resolved, texts_fingerprint)
from rexrank.scoring import test_set_info as describe_test_set  # noqa: E402 (not a test)
from rexrank.submissions import Predictions  # noqa: E402


@pytest.fixture
def registered_metrics(monkeypatch):
    import rexrank.metrics.registry as registry
    from support.backendhelpers import TEST_METRICS
    from support.scoring_metrics import SCORING_METRICS, Optioned

    for name, target in {**TEST_METRICS, **SCORING_METRICS}.items():
        monkeypatch.setitem(registry.METRICS, name, target)
    monkeypatch.setattr(Optioned, "made", [])
    monkeypatch.setattr(Optioned, "parts", [])
    return Optioned


def _predictions(texts=("a b", "c", "d e f"), ids=None, **kwargs):
    ids = ids or [f"S{i}" for i in range(len(texts))]
    return Predictions(list(ids), list(texts), "p.csv", kwargs.pop("n_empty", 0), **kwargs)


def test_the_texts_fingerprint_is_sha256_of_each_text_in_utf8_ended_by_a_zero_byte():
    assert texts_fingerprint(["a", "é"]) == hashlib.sha256(b"a\x00\xc3\xa9\x00").hexdigest()
    assert texts_fingerprint([]) == hashlib.sha256(b"").hexdigest()
    assert texts_fingerprint(["ab"]) != texts_fingerprint(["a", "b"])


def _result(per_study, failures=None, **kwargs):
    return MetricResult("m", {k: np.asarray(v, dtype=float) for k, v in per_study.items()}, kwargs.pop("corpus", {}),
                        kwargs.pop("details", {}), failures or {})


def test_a_metric_summary_counts_the_scored_studies_by_its_primary_column_and_names_failures_by_id():
    result = _result({"m": [1.0, math.nan, 3.0], "m_part": [0.5, math.nan, 0.5]}, {1: "timeout"}, corpus={"m": 2.0},
                     details={"worst_positions": [2, 0], "note": "x", "positions": [1], "odd_positions": "2"})
    summary = metric_summary(result, ["A", "B", "C"], provenance={"name": "m"}, higher_is_better=False,
                             seconds=1.23456, bootstrap=0, seed=0)
    assert summary["provenance"] == {"name": "m"} and summary["higher_is_better"] is False
    assert summary["corpus"] == {"m": 2.0}
    assert (summary["n_studies"], summary["n_scored"], summary["n_failed"]) == (3, 2, 1)
    assert summary["failures"] == {"B": "timeout"} and summary["seconds"] == 1.235
    # a metric's study positions are named by study id too; other details as they are
    assert summary["details"] == {"worst_positions": [2, 0], "worst_ids": ["C", "A"], "note": "x", "positions": [1],
                                  "odd_positions": "2"}
    # each column: mean of the scored studies, the failed one counted as missing; 1.96 x SEM
    m = summary["scores"]["m"]
    assert (m["n"], m["mean"], m["n_missing"]) == (2, 2.0, 1)
    assert m["std"] == pytest.approx(math.sqrt(2)) and m["ci95"] == pytest.approx(1.96 * math.sqrt(2) / math.sqrt(2))
    assert "bootstrap_low" not in m
    assert summary["scores"]["m_part"]["mean"] == 0.5
    # scored means a primary score: a NaN there is a study not scored, even one the metric did not list as failed
    unlisted = _result({"m": [1.0, math.nan, math.nan]}, {1: "timeout"})
    assert metric_summary(unlisted, ["A", "B", "C"], provenance={}, higher_is_better=True, seconds=0, bootstrap=0,
                          seed=0)["n_scored"] == 1
    # a column given as a plain list, None for the study not scored, is read as the statistics read it (NaN)
    listed = MetricResult("m", {"m": [2.0, None, 4.0]}, {}, {}, {1: "timeout"})
    plain = metric_summary(listed, ["A", "B", "C"], provenance={}, higher_is_better=True, seconds=0, bootstrap=0, seed=0)
    assert (plain["n_scored"], plain["n_failed"], plain["scores"]["m"]["mean"]) == (2, 1, 3.0)
    booted = metric_summary(result, ["A", "B", "C"], provenance={}, higher_is_better=True, seconds=0, bootstrap=20,
                            seed=3)["scores"]["m"]
    assert (booted["bootstrap_resamples"], booted["bootstrap_seed"]) == (20, 3)
    assert 1.0 <= booted["bootstrap_low"] <= booted["bootstrap_high"] <= 3.0


def test_without_a_primary_column_every_study_not_failed_counts_as_scored():
    summary = metric_summary(_result({"m_other": [1.0, 2.0, 4.0]}, {2: "no answer"}), ["A", "B", "C"], provenance={},
                             higher_is_better=True, seconds=0, bootstrap=0, seed=0)
    assert (summary["n_scored"], summary["n_failed"]) == (2, 1)
    # NaN in a column is refused unless the metric lists failures
    with pytest.raises(ValueError, match="m: 1 per-study scores are NaN"):
        metric_summary(_result({"m": [1.0, math.nan]}), ["A", "B"], provenance={}, higher_is_better=True, seconds=0,
                       bootstrap=0, seed=0)


def test_a_metric_that_scored_no_study_names_its_three_commonest_reasons():
    failures = {0: "HTTP 400", 1: "timeout", 2: "HTTP 400", 3: "bad JSON", 4: "refused", 5: "timeout", 6: "HTTP 400"}
    result = _result({"m": [math.nan] * 7}, failures)
    ids = [f"S{i}" for i in range(7)]
    with pytest.raises(MetricError) as err:
        metric_summary(result, ids, provenance={}, higher_is_better=True, seconds=0, bootstrap=0, seed=0)
    # by count, ties in the order first seen; the fourth reason left out
    assert str(err.value) == "none of the 7 studies could be scored: HTTP 400 (3x); timeout (2x); bad JSON (1x)"
    kept = metric_summary(result, ids, provenance={}, higher_is_better=True, seconds=0, bootstrap=0, seed=0,
                          nothing_scored_is_error=False)
    assert (kept["n_scored"], kept["n_failed"]) == (0, 7) and math.isnan(kept["scores"]["m"]["mean"])
    # one study scored: a result, however few
    one = _result({"m": [math.nan] * 6 + [1.0]}, {i: "timeout" for i in range(6)})
    assert metric_summary(one, ids, provenance={}, higher_is_better=True, seconds=0, bootstrap=0, seed=0)["n_scored"] == 1


def test_a_failure_record_gives_reason_advice_type_and_seconds():
    from rexrank.models.advice import AdvisedError

    class Advised(AdvisedError):
        subject = "checkpoint x"

        def advice(self, terms=None):
            return "download it"

    assert failure_record(Advised("is missing"), 0.12345) == {"reason": "checkpoint x is missing", "advice": "download it",
                                                             "error_type": "Advised", "seconds": 0.123}
    assert failure_record(MetricError("bad option"), 2) == {"reason": "bad option", "advice": "",
                                                            "error_type": "MetricError", "seconds": 2}
    assert failure_record(RexrankError("plain"), 0)["reason"] == "plain"
    assert failure_record(MemoryError("out of memory"), 1.0006) == {
        "reason": "MemoryError: out of memory", "advice": "", "error_type": "MemoryError", "seconds": 1.001}


def test_a_run_keeps_going_past_a_failed_metric_and_reports_each_step(registered_metrics):
    references = ["r0", "r1", "r2"]
    steps = []

    def on_update(run, name):
        steps.append((name, list(run.results["pending"]), run.results["complete"], sorted(run.results["metrics"]),
                      sorted(run.failed)))

    run = score_predictions(_predictions(), references, metrics="optioned,crashing,counting", keep_going=True,
                            on_update=on_update, progress=False)
    assert steps == [("optioned", ["crashing", "counting"], False, ["optioned"], []),
                     ("crashing", ["counting"], False, ["optioned"], ["crashing"]),
                     ("counting", [], False, ["counting", "optioned"], ["crashing"])]
    failed = run.failed["crashing"]
    assert failed["reason"] == "ValueError: cannot handle reference: r2" and failed["error_type"] == "ValueError"
    assert isinstance(run.errors["crashing"], ValueError) and run.complete is False
    assert list(run.per_study.columns) == ["id", "optioned", "optioned_length", "counting"]
    assert run.per_study["optioned"].tolist() == [2.0, 1.0, 3.0]  # words of "a b", "c", "d e f"
    assert run.per_study["counting"].tolist() == [0.03, 0.01, 0.05]  # characters / 100
    assert run.metric_results["optioned"].corpus["optioned"] == 2.0 and "crashing" not in run.metric_results
    assert run.results["metrics"]["counting"]["corpus"]["counting"] == pytest.approx(0.03)
    assert run.results["seconds"] >= 0 and run.results["pending"] == []
    summary = run.results["metrics"]["optioned"]
    assert 0 <= summary["seconds"] <= run.results["seconds"] < 60 and summary["higher_is_better"] is True
    with pytest.raises(ValueError, match="cannot handle reference: r2"):
        score_predictions(_predictions(), references, metrics="optioned,crashing,counting", progress=False)


def test_a_complete_run_says_so_and_its_provenance_is_the_per_study_files(registered_metrics, tmp_path):
    from rexrank.per_study_file import read_provenance

    run = score_predictions(_predictions(), ["r0", "r1", "r2"], metrics=["optioned"], progress=False,
                            test_set_info={"name": "t"})
    assert run.complete is True and run.results["complete"] is True and run.failed == {}
    provenance = run.provenance()
    assert provenance == {"rexrank_version": rexrank.__version__, "created": run.results["created"],
                          "test_set": {"name": "t", "references_sha256": texts_fingerprint(["r0", "r1", "r2"])},
                          "predictions": {"source": "p.csv", "sha256": texts_fingerprint(["a b", "c", "d e f"])},
                          "metrics": {"optioned": {"name": "optioned", "version": "1", "config": {"scale": 1.0}}},
                          "failed": [], "pending": [], "complete": True}
    run.write_per_study(tmp_path / "s.parquet")
    written = read_provenance(tmp_path / "s.parquet")
    assert {k: v for k, v in written.items() if k != "format"} == json.loads(json.dumps(provenance))
    assert pd.read_parquet(tmp_path / "s.parquet")["optioned"].tolist() == [2.0, 1.0, 3.0]
    partial = score_predictions(_predictions(), ["r0", "r1", "r2"], metrics="crashing,optioned", progress=False,
                                keep_going=True)
    assert partial.provenance()["failed"] == ["crashing"] and partial.provenance()["complete"] is False


def test_the_run_gives_a_metric_progress_and_the_run_context_where_it_takes_them_and_options_win(registered_metrics):
    from rexrank.metrics.run_context import RunContext

    score_predictions(_predictions(), ["r0", "r1", "r2"], metrics="optioned,counting", progress=False)
    score_predictions(_predictions(), ["r0", "r1", "r2"], metrics="optioned", progress=True)
    score_predictions(_predictions(), ["r0", "r1", "r2"], metrics="optioned", progress=False,
                      metric_options={"optioned": {"progress": True, "scale": 2.0}})
    made = registered_metrics.made
    assert [m["progress"] for m in made] == [False, True, True] and made[2]["scale"] == 2.0
    assert all(isinstance(m["run_context"], RunContext) for m in made)
    # Counting takes neither option: built without them (it would refuse an unknown one)


def test_the_results_header_describes_the_predictions_the_references_and_the_statistics(registered_metrics):
    predictions = _predictions(("a", " ", ""), n_empty=2, empty_ids=["S1", "S2"], not_in_track_ids=["X9"])
    run = score_predictions(predictions, ["r0", "r1", "r2"], metrics="optioned", progress=False, bootstrap=0, seed=4)
    header = run.results
    assert header["rexrank_version"] == rexrank.__version__ and header["python"] == platform.python_version()
    created = datetime.fromisoformat(header["created"])
    assert created.utcoffset().total_seconds() == 0 and created.microsecond == 0 and header["created"].endswith("+00:00")
    assert header["test_set"] == {"references_sha256": texts_fingerprint(["r0", "r1", "r2"])}
    assert header["predictions"] == {"source": "p.csv", "n": 3, "n_empty": 2, "empty_ids": ["S1", "S2"],
                                     "n_not_in_track": 1, "not_in_track_ids": ["X9"],
                                     "sha256": texts_fingerprint(["a", " ", ""])}
    assert header["statistics"] == {"ci": "normal approximation: mean ± 1.96 × SEM (sample std, ddof=1), as the "
                                          "ReXrank papers", "bootstrap": None}
    booted = score_predictions(predictions, ["r0", "r1", "r2"], metrics="optioned", progress=False, bootstrap=7, seed=4)
    assert booted.results["statistics"]["bootstrap"] == {"resamples": 7, "seed": 4, "method": "percentile"}
    booted_scores = booted.results["metrics"]["optioned"]["scores"]["optioned"]
    assert (booted_scores["bootstrap_resamples"], booted_scores["bootstrap_seed"]) == (7, 4)
    # by default: no bootstrap, seed 0, progress shown
    plain = score_predictions(predictions, ["r0", "r1", "r2"], metrics="optioned")
    assert plain.results["statistics"]["bootstrap"] is None and registered_metrics.made[-1]["progress"] is True
    unseeded = score_predictions(predictions, ["r0", "r1", "r2"], metrics="optioned", progress=False, bootstrap=3)
    assert unseeded.results["statistics"]["bootstrap"]["seed"] == 0


def test_a_metric_that_scored_nothing_fails_the_run_unless_told_otherwise(registered_metrics, monkeypatch):
    everything_fails = {"patchy": {"fail_references": ["r0", "r1", "r2"]}}
    with pytest.raises(MetricError, match="none of the 3 studies could be scored: the judge gave no answer \\(3x\\)"):
        score_predictions(_predictions(), ["r0", "r1", "r2"], metrics="patchy", metric_options=everything_fails,
                          progress=False)
    run = score_predictions(_predictions(), ["r0", "r1", "r2"], metrics="patchy", metric_options=everything_fails,
                            progress=False, nothing_scored_is_error=False)
    assert run.results["metrics"]["patchy"]["n_scored"] == 0


def test_a_selection_is_its_studies_references_and_per_study_options_cut_alike():
    predictions = _predictions(("a", "", "c", " "), n_empty=2, empty_ids=["S1", "S3"], not_in_track_ids=["X"])
    options = {"m": {"contexts": ["c0", "c1", "c2", "c3"], "short": ["x", "y"], "scale": 2}}
    part, references, cut, request = _select(predictions, ["r0", "r1", "r2", "r3"], options, 1, 3)
    assert (part.ids, part.texts, part.source) == (["S1", "S2"], ["", "c"], "p.csv")
    assert (part.n_empty, part.empty_ids, part.not_in_track_ids) == (1, ["S1"], [])
    assert references == ["r1", "r2"]
    assert cut == {"m": {"contexts": ["c1", "c2"], "short": ["x", "y"], "scale": 2}}
    assert request == RequestPart(["a", "", "c", " "], ["r0", "r1", "r2", "r3"], 1, 3)
    assert _select(predictions, ["r0", "r1", "r2", "r3"], None, 0, 4)[2] == {}
    for start, stop in ((-1, 2), (2, 2), (3, 2), (0, 5)):
        with pytest.raises(ValueError) as err:
            _select(predictions, ["r0", "r1", "r2", "r3"], options, start, stop)
        assert str(err.value) == f"shard [{start}, {stop}) is outside the 4 studies"


def _test_set(ids, references, outside=()):
    spec = SimpleNamespace(name="tiny", title="Tiny", split="test", access="public")
    return SimpleNamespace(spec=spec, track="findings",
                           studies=SimpleNamespace(ids=list(ids), references=list(references), outside_ids=list(outside)))


def test_a_resolved_test_set_is_described_and_its_header_is_the_runs():
    test = _test_set(["S0", "S1"], ["r0", "r1"], outside=["X"])
    assert describe_test_set(test) == {"name": "tiny", "title": "Tiny", "split": "test", "track": "findings",
                                   "n_studies": 2, "n_studies_outside_track": 1, "access": "public"}
    assert run_header(test, _predictions(("a", "b")), ["optioned"])["statistics"]["bootstrap"] is None
    header = run_header(test, _predictions(("a", "b")), ["optioned"], bootstrap=3, seed=9)
    assert header["statistics"]["bootstrap"] == {"resamples": 3, "seed": 9, "method": "percentile"}
    assert run_header(test, _predictions(("a", "b")), ["optioned"], bootstrap=3)["statistics"]["bootstrap"]["seed"] == 0
    assert header["test_set"] == {**describe_test_set(test), "references_sha256": texts_fingerprint(["r0", "r1"])}
    assert header["pending"] == ["optioned"] and header["statistics"]["bootstrap"]["resamples"] == 3
    assert header["metrics"] == {} and header["failed"] == {} and header["complete"] is False
    assert header["seconds"] == 0.0
    options = {"optioned": {"scale": 1}}
    assert _with_test_set_context(options, ["optioned"], test) is options
    assert _with_test_set_context({"crimson": {"patient_context": "none"}}, ["crimson"], test) == \
        {"crimson": {"patient_context": "none"}}


def test_score_resolved_validates_the_whole_file_and_scores_the_selection_only(registered_metrics, tmp_path):
    test = _test_set(["S0", "S1", "S2"], ["r0", "r1", "r2"], outside=["X"])
    (tmp_path / "p.csv").write_text("key,text\nS2,e f g\nS0,a\nS1,c d\nX,x\n")
    run = score_resolved(test, tmp_path / "p.csv", metrics="optioned", progress=False, id_column="key",
                         prediction_column="text")
    assert run.per_study["optioned"].tolist() == [1.0, 2.0, 3.0]
    assert run.results["test_set"]["title"] == "Tiny" and run.results["predictions"]["not_in_track_ids"] == ["X"]
    assert run.results["statistics"]["bootstrap"] is None  # no bootstrap unless asked
    # by default: progress shown, a metric that raises or scores nothing stops the run
    score_resolved(test, tmp_path / "p.csv", metrics="optioned", id_column="key", prediction_column="text")
    assert registered_metrics.made[-1]["progress"] is True
    with pytest.raises(ValueError, match="cannot handle reference: r2"):
        score_resolved(test, tmp_path / "p.csv", metrics="crashing", id_column="key", prediction_column="text")
    with pytest.raises(MetricError, match="none of the 3 studies could be scored"):
        score_resolved(test, tmp_path / "p.csv", metrics="patchy", progress=False, id_column="key",
                       prediction_column="text", metric_options={"patchy": {"fail_references": ["r0", "r1", "r2"]}})
    booted = score_resolved(test, tmp_path / "p.csv", metrics="optioned", progress=False, id_column="key",
                            prediction_column="text", bootstrap=4)
    assert booted.results["statistics"]["bootstrap"] == {"resamples": 4, "seed": 0, "method": "percentile"}
    seeded = score_resolved(test, tmp_path / "p.csv", metrics="optioned", progress=False, id_column="key",
                            prediction_column="text", bootstrap=4, seed=7)
    assert seeded.results["statistics"]["bootstrap"]["seed"] == 7
    assert registered_metrics.made[-1]["progress"] is False
    updates = []
    score_resolved(test, tmp_path / "p.csv", metrics="optioned,counting", progress=False, id_column="key",
                   prediction_column="text", on_update=lambda run, name: updates.append(name))
    assert updates == ["optioned", "counting"]
    kept = score_resolved(test, tmp_path / "p.csv", metrics="crashing,optioned", progress=False, id_column="key",
                          prediction_column="text", keep_going=True)
    assert list(kept.failed) == ["crashing"] and "optioned" in kept.results["metrics"]
    # a shard of studies whose judge answers nothing is no failure of its own (the merge decides)
    shard = score_resolved(test, tmp_path / "p.csv", metrics="patchy", progress=False, id_column="key",
                           prediction_column="text", select=(1, 3),
                           metric_options={"patchy": {"fail_references": ["r1", "r2"]}})
    assert shard.per_study["id"].tolist() == ["S1", "S2"]
    assert shard.results["metrics"]["patchy"]["n_scored"] == 0
    assert shard.results["predictions"]["n"] == 2
    # the shard's metric scores its studies as part of all the request's pairs
    score_resolved(test, tmp_path / "p.csv", metrics="optioned", progress=False, id_column="key",
                   prediction_column="text", select=(1, 3))
    assert registered_metrics.parts[-1] == (3, 1, 3)
    with pytest.raises(SubmissionError, match="Tiny, findings track have no prediction: 'S2'"):
        (tmp_path / "q.csv").write_text("id,prediction\nS0,a\nS1,b\n")
        score_resolved(test, tmp_path / "q.csv", metrics="optioned", progress=False)


def test_crimsons_context_from_the_test_set_is_one_per_study_in_test_set_order(monkeypatch):
    import rexrank.testsets.loading as loading

    class Rows(list):  # as a datasets.Dataset: rows by position, a column by name
        def __getitem__(self, key):
            return [row["id"] for row in self] if key == "id" else list.__getitem__(self, key)

    rows = Rows([{"id": "S1", "age": 40.0, "section_clinical_history": "chest  pain"}, {"id": "S0"}])
    test = _test_set(["S0", "S1"], ["r0", "r1"])
    monkeypatch.setattr(loading, "track_rows", lambda of: rows if of is test else Rows())
    options = {"crimson": {"patient_context": "test_set", "batch_size": 2}, "optioned": {"scale": 1}}
    assert _with_test_set_context(options, ["optioned", "crimson"], test) == {
        "crimson": {"patient_context": [None, {"Age": 40, "Indication": "chest pain"}], "batch_size": 2},
        "optioned": {"scale": 1}}
    assert _with_test_set_context(options, ["optioned"], test) is options  # crimson not run: nothing read
    assert _with_test_set_context(None, ["crimson"], test) is None


def test_score_resolved_gives_crimson_its_patient_context_from_this_test_set(registered_metrics, monkeypatch, tmp_path):
    import rexrank.metrics.registry as registry
    import rexrank.testsets.loading as loading

    test = _test_set(["S0", "S1"], ["r0", "r1"])
    rows = [{"id": "S0", "age": 61}, {"id": "S1", "section_clinical_history": "fever"}]

    class Rows(list):
        def __getitem__(self, key):
            return [row["id"] for row in self] if key == "id" else list.__getitem__(self, key)

    monkeypatch.setattr(loading, "track_rows", lambda of: Rows(rows) if of is test else Rows())
    monkeypatch.setitem(registry.METRICS, "crimson", registry.METRICS["optioned"])  # a stand-in judge under its name
    (tmp_path / "p.csv").write_text("id,prediction\nS0,a\nS1,b\n")
    score_resolved(test, tmp_path / "p.csv", metrics="crimson", progress=False,
                   metric_options={"crimson": {"patient_context": "test_set"}})
    assert registered_metrics.made[-1]["patient_context"] == [{"Age": 61}, {"Indication": "fever"}]


def test_score_submission_refuses_a_bad_metric_name_before_looking_the_test_set_up(registered_metrics):
    with pytest.raises(MetricError, match="unknown metric"):
        score_submission("no-such-set", "findings", "/nowhere.csv", metrics="optioned,no_such_metric")
    run = score_submission("example", "findings", EXAMPLE_PREDICTIONS, metrics="optioned", progress=False)
    assert run.results["test_set"]["name"] == "example" and run.results["test_set"]["track"] == "findings"
    assert run.results["metrics"]["optioned"]["n_studies"] == 19


def test_score_submission_looks_the_test_set_up_in_the_folder_given_and_passes_the_options_on(registered_metrics,
                                                                                             monkeypatch, tmp_path):
    import rexrank.testsets.loading as loading

    asked = []

    def resolve(dataset, track, *, data_dir=None):
        asked.append((dataset, track, data_dir))
        return _test_set(["S0"], ["r0"])

    monkeypatch.setattr(loading, "resolve_test_set", resolve)
    (tmp_path / "p.csv").write_text("id,prediction\nS0,a b\n")
    run = score_submission("tiny", "findings", tmp_path / "p.csv", data_dir=tmp_path / "sets", metrics="optioned",
                           progress=False, bootstrap=2, seed=5)
    assert asked == [("tiny", "findings", tmp_path / "sets")]
    assert run.results["statistics"]["bootstrap"] == {"resamples": 2, "seed": 5, "method": "percentile"}


def test_the_run_shows_a_bar_of_metrics_naming_each_only_when_asked(registered_metrics, capsys):
    score_predictions(_predictions(), ["r0", "r1", "r2"], metrics="optioned,counting", progress=True)
    shown = capsys.readouterr().err
    assert "scoring: 100%" in shown and "2/2" in shown and "metric/s" in shown
    assert ", optioned]" in shown and ", counting]" in shown  # the metric being scored, after the rate
    score_predictions(_predictions(), ["r0", "r1", "r2"], metrics="optioned,counting", progress=False)
    assert capsys.readouterr().err == ""


def test_a_runs_seconds_and_a_failed_metrics_seconds_are_time_spent(registered_metrics, monkeypatch):
    import itertools

    import rexrank.scoring as scoring

    clock = itertools.count(1_000_000_000.0, 2.0)  # a clock that moves 2 s each time it is read
    monkeypatch.setattr(scoring, "time", SimpleNamespace(time=lambda: next(clock)))
    run = score_predictions(_predictions(), ["r0", "r1", "r2"], metrics="crashing,optioned", progress=False,
                            keep_going=True)
    assert 0 < run.failed["crashing"]["seconds"] < 100 and 0 < run.results["metrics"]["optioned"]["seconds"] < 100
    assert run.failed["crashing"]["seconds"] < run.results["seconds"] < 100
    # to the millisecond: with a clock read every 0.2503 s, the run took a whole number of reads
    fine = itertools.count(1000.0, 0.2503)
    monkeypatch.setattr(scoring, "time", SimpleNamespace(time=lambda: next(fine)))
    seconds = score_predictions(_predictions(), ["r0", "r1", "r2"], metrics="optioned", progress=False).results["seconds"]
    reads = round(seconds / 0.2503)
    assert seconds == round(reads * 0.2503, 3) and seconds != round(seconds)
    assert sorted(run.results) == ["complete", "created", "failed", "metrics", "pending", "predictions", "python",
                                   "rexrank_version", "seconds", "statistics", "test_set"]
