"""The coverage rule (issue 13): a metric that scored too few studies is never published as
complete. With the LLM judge failing ~90 % of calls, FineRadScore used to end FINISHED on
the few studies it scored and take rank 1."""
from __future__ import annotations

import json

import pytest

from support.llm_fake_server import FakeOpenAIServer
from rexrank.backend.worker import Worker
from rexrank.cli.main import main
from rexrank.leaderboard.records import records_frame
from rexrank.store import FAILED, FINISHED, Quota, open_store
from support.fixed_noise import FixedNoise
from support.requests import EXAMPLE_PREDS, submit
from support.llm_judges import judge, llm_options

def test_partial_llm_scores_fail_the_request_and_publish_nothing(tmp_path):
    state = {"broken": True}
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    n = req["predictions"]["n"]
    with FakeOpenAIServer(judge(state)) as server:
        worker = Worker(store, metrics="fineradscore", metric_options=llm_options(server, tmp_path), worker_id="w")
        worker.run(once=True)
        failed = store.get_request(req["id"])
        assert failed["status"] == FAILED and failed["failure_kind"] == "coverage"
        scored = int(failed["error"].split("fineradscore scored ")[1].split(" of ")[0])
        assert 0 < scored < 0.5 * n  # the outage really left most studies unscored
        assert f"fineradscore scored {scored} of {n} studies ({scored / n:.1%})" in failed["error"]
        assert f"{n - scored} × LLM call failed: HTTP 500" in failed["error"]
        assert "at least 99%" in failed["error"] and "Nothing was published" in failed["error"]
        assert store.list_results() == []  # nothing partial reaches the results repo (nor the leaderboard)

        # the outage ends; the maintainers requeue: the answers already paid for come from the cache
        state["broken"] = False
        before = state["calls"]
        store.requeue(req["id"])
        worker.run(once=True)
        assert store.get_request(req["id"])["status"] == FINISHED
        assert state["calls"] - before == n - scored
    [record] = store.list_results()
    assert record["values"]["fineradscore_inv"]["n"] == n
    assert record["summaries"]["fineradscore"]["n_scored"] == n and record["summaries"]["fineradscore"]["n_failed"] == 0


def test_the_coverage_share_is_configurable(tmp_path, capsys):
    state = {"broken": True}
    store = open_store(tmp_path / "s")
    req = submit(store)
    with FakeOpenAIServer(judge(state)) as server:
        Worker(store, metrics="fineradscore", metric_options=llm_options(server, tmp_path), worker_id="w",
               min_coverage=0.01).run(once=True)
    assert store.get_request(req["id"])["status"] == FINISHED  # a maintainer's explicit, low bar
    code = main(["backend", "--store", str(tmp_path / "s"), "--once", "--min-coverage", "0"])
    _, err = capsys.readouterr()
    assert code == 1 and "expected a percentage in (0, 100]" in err


def test_score_prints_n_scored_and_failed_for_every_metric(tmp_path, capsys):
    state = {"broken": True}
    with FakeOpenAIServer(judge(state)) as server:
        code = main(["score", "--dataset", "example", "--predictions", str(EXAMPLE_PREDS), "--metrics", "bleu2,fineradscore",
                     "--llm-base-url", server.base_url, "--llm-model", "judge", "--no-progress",
                     "--metric-option", "fineradscore.max_retries=0", "--metric-option",
                     f"fineradscore.cache_dir={tmp_path / 'c'}", "--out", str(tmp_path / "r.json")])
    out, _ = capsys.readouterr()
    assert code == 0
    results = json.loads((tmp_path / "r.json").read_text())
    frs, n = results["metrics"]["fineradscore"], results["test_set"]["n_studies"]
    assert frs["n_studies"] == n and frs["n_scored"] + frs["n_failed"] == n and frs["n_failed"] > n / 2
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("metric "))
    assert "n scored / failed" in header
    bleu_row = next(line for line in lines if line.startswith("bleu2 "))
    frs_row = next(line for line in lines if line.startswith("fineradscore "))
    assert bleu_row.endswith(f"{n} / 0") and frs_row.endswith(f"{frs['n_scored']} / {frs['n_failed']}")
    assert (f"warning: fineradscore scored {frs['n_scored']} of {n} studies" in out
            and "below the 99% the leaderboard requires" in out)


def test_the_leaderboard_shows_n_where_it_is_below_the_test_set_size():
    from rexrank.leaderboard.records import coverage_notes

    def record(rid, n):
        return {"id": rid, "model_name": rid, "test_set": "iu_xray", "track": "findings", "source": "rexrank",
                "values": {"bleu2": {"mean": 0.2, "ci95": 0.01, "n": 590}, "green": {"mean": 0.3, "ci95": 0.01, "n": n}},
                "provenance": {"test_set": {"n_studies": 590}}}

    frame = records_frame([record("Complete", 590), record("Short", 586)])
    assert list(frame["green_n"]) == [590, 586] and list(frame["n_studies"]) == [590, 590]
    assert coverage_notes(frame) == ["Short on IU-Xray / Findings: GREEN n = 586 of 590 studies"]


def test_the_leaderboard_page_lists_results_below_the_test_set_size(tmp_path):
    from rexrank.leaderboard.app import _status
    from rexrank.leaderboard.source import LeaderboardSource

    rec = {"id": "r", "model_name": "Short", "test_set": "iu_xray", "track": "findings", "source": "rexrank",
           "values": {"green": {"mean": 0.3, "ci95": 0.01, "n": 586}}, "provenance": {"test_set": {"n_studies": 590}}}
    status = _status(LeaderboardSource.from_records([rec]))
    assert "GREEN n = 586 of 590 studies" in status


@pytest.mark.parametrize("value, share", [("99", 0.99), ("95.5", 0.955), ("100%", 1.0)])
def test_min_coverage_from_the_environment(monkeypatch, value, share):
    from rexrank.backend.worker import min_coverage_from

    monkeypatch.setenv("REXRANK_MIN_COVERAGE", value)
    assert min_coverage_from(None) == pytest.approx(share)
    assert min_coverage_from(90) == pytest.approx(0.9)


# ---- the rule itself, on hand-built results (worker.check_coverage) -----------------------

def coverage_results(**scored: int | None) -> dict:
    """A scoring run's results for 100 studies where metric `name` scored `scored[name]` of them
    (None: the metric is absent from the results, i.e. it did not run)."""
    metrics = {name: {"n_studies": 100, "n_scored": k, "n_failed": 100 - k, "failures": {"LLM call failed": 100 - k}}
               for name, k in scored.items() if k is not None}
    return {"metrics": metrics, "predictions": {"n": 100}}


@pytest.mark.parametrize("percent, scored", [(99, 99), (99, 100), (100, 100), (50, 50)])
def test_a_metric_exactly_at_the_coverage_share_passes(tmp_path, percent, scored):
    """'at least 99 %': 99 of 100 passes; --min-coverage 100 with every study scored passes."""
    from rexrank.backend.worker import min_coverage_from

    worker = Worker(open_store(tmp_path / "s"), metrics="bleu2", worker_id="w", min_coverage=min_coverage_from(percent))
    worker.check_coverage(coverage_results(bleu2=scored), private=False)  # no CoverageError


@pytest.mark.parametrize("percent, scored", [(99, 98), (100, 99)])
def test_a_metric_one_study_below_the_coverage_share_fails(tmp_path, percent, scored):
    from rexrank.backend.worker import CoverageError, min_coverage_from

    worker = Worker(open_store(tmp_path / "s"), metrics="bleu2", worker_id="w", min_coverage=min_coverage_from(percent))
    with pytest.raises(CoverageError, match=rf"bleu2 scored {scored} of 100 studies \({scored}\.0%\)"):
        worker.check_coverage(coverage_results(bleu2=scored), private=False)


def test_a_metric_of_the_set_that_did_not_run_fails_the_coverage_rule(tmp_path):
    """The worker's set is bleu2 and radgraph; a results JSON without radgraph (it never ran)
    is no pass, even though every metric that did run scored every study."""
    from rexrank.backend.worker import CoverageError

    worker = Worker(open_store(tmp_path / "s"), metrics="bleu2", worker_id="w")
    worker.metrics = ["bleu2", "radgraph"]  # as a worker with both would hold them (radgraph needs its model to set up)
    with pytest.raises(CoverageError, match=r"radgraph scored 0 studies; cause: it did not run") as caught:
        worker.check_coverage(coverage_results(bleu2=100, radgraph=None), private=False)
    assert "bleu2" not in str(caught.value)  # bleu2 itself passed


# ---- the worker's coverage rule, by hand -------------------------------------------------------
def _coverage(metrics, results, *, share=0.99, private=False):
    from types import SimpleNamespace

    from rexrank.backend.worker import Worker

    Worker.check_coverage(SimpleNamespace(metrics=metrics, min_coverage=share), results, private=private)


TAIL = (". Nothing was published. The answers already received are kept in the cache: the maintainers can requeue this "
        "request once the cause is fixed, and only the missing studies are scored again.")


def test_the_coverage_rule_by_hand():
    from rexrank.backend.worker import CoverageError

    ok = {"predictions": {"n": 100}, "metrics": {"bleu2": {"n_studies": 100, "n_scored": 99}}}
    _coverage(["bleu2"], ok)  # 99 of 100 is the share asked for
    _coverage(["bleu2"], {"predictions": {"n": 100}, "metrics": {"bleu2": {"n_scored": 99}}})  # n from the predictions
    _coverage(["bleu2"], {"predictions": {"n": 0}, "metrics": {"bleu2": {"n_scored": 0}}})  # nothing to score
    # a metric's own study count (e.g. the studies that have findings) comes before the predictions'
    _coverage(["bleu2"], {"predictions": {"n": 100}, "metrics": {"bleu2": {"n_studies": 50, "n_scored": 50}}})
    _coverage(["bleu2"], {"predictions": {"n": 100}, "metrics": {"bleu2": {"n_failed": 1}}})  # 100 - 1 scored
    short = {"predictions": {"n": 100},
             "metrics": {"green": {"n_studies": 100, "n_scored": 97,
                                   "failures": {"s1": "LLM call failed: timeout", "s2": "LLM call failed: 500",
                                                "s3": "invalid answer: no JSON"}}}}
    with pytest.raises(CoverageError) as err:
        _coverage(["green", "crimson"], short)
    head = "below the coverage rule (each metric must score at least 99% of the studies): "
    assert str(err.value) == (head + "crimson scored 0 studies; cause: it did not run; green scored 97 of 100 studies "
                              "(97.0%); cause: 1 × LLM call failed: timeout, 1 × LLM call failed: 500, 1 × invalid "
                              "answer: no JSON" + TAIL)
    assert err.value.without_causes == head + "crimson scored 0 studies; green scored 97 of 100 studies (97.0%)" + TAIL
    from rexrank.backend.public_door import PRIVATE_COVERAGE_FAILED

    far_short = {"test_set": {"n_studies": 1000}, "predictions": {"n": 1000},
                 "metrics": {"green": {"n_studies": 1000, "n_scored": 0, "failures": short["metrics"]["green"]["failures"]}}}
    with pytest.raises(CoverageError) as err:  # a private set: the fixed words, no count and no reason
        _coverage(["green"], far_short, private=True)
    assert str(err.value) == PRIVATE_COVERAGE_FAILED
    with pytest.raises(CoverageError) as err:
        _coverage(["green"], {"predictions": {"n": 50}, "metrics": {"green": {"n_studies": 50}}}, share=0.9)
    assert str(err.value).startswith("below the coverage rule (each metric must score at least 90% of the studies): "
                                     "green scored 0 of 50 studies (0.0%); cause: no per-study reasons were recorded. ")
    _coverage(["green"], {"predictions": {"n": 50}, "metrics": {"green": {"n_studies": 50, "n_scored": 45}}}, share=0.9)


# ---- the coverage rule (rexrank.backend.public_door.coverage_failure) --------------------------

def _results(n: int, **scored: int) -> dict:
    return {"metrics": {name: {"n_studies": n, "n_scored": k, "n_failed": n - k} for name, k in scored.items()},
            "predictions": {"n": n}, "test_set": {"n_studies": n}}


def test_the_private_coverage_decision_draws_its_noise_from_the_generator_it_is_given():
    """On a private set the rule passes when (scored - 0.99 n) + noise >= -margin: with no
    study of 10,000 scored, -9,900 + 10^6 passes; with every study scored, 100 - 10^6 fails,
    with the fixed message. The noise is asked as Laplace(0, 1 / 0.5)."""
    from rexrank.backend.public_door import PRIVATE_COVERAGE_FAILED, coverage_failure

    lucky = FixedNoise(1e6)
    assert coverage_failure(_results(10_000, bleu2=0), ["bleu2"], min_coverage=0.99, private=True, rng=lucky) is None
    assert lucky.asked == [(0.0, 2.0)]
    unlucky = FixedNoise(-1e6)
    error = coverage_failure(_results(10_000, bleu2=10_000), ["bleu2"], min_coverage=0.99, private=True, rng=unlucky)
    assert str(error) == error.without_causes == PRIVATE_COVERAGE_FAILED
