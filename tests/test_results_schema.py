"""The leaderboard values of a scoring run: the inverted columns (1/RadCliQ-v1,
1/FineRadScore) and their CI half-width by the delta method, checked against hand-derived
numbers and against the exact interval 1/(mean ∓ ci) they approximate."""
from __future__ import annotations

import pytest

from rexrank.results_schema import leaderboard_values


def run_results(**scores) -> dict:
    """A scoring run's results JSON holding `scores` = {metric: (mean, ci95, n)}."""
    return {"metrics": {name: {"scores": {name: {"mean": m, "ci95": ci, "n": n}}} for name, (m, ci, n) in scores.items()}}


def test_inverted_columns_carry_the_delta_method_ci():
    values = leaderboard_values(run_results(radcliq=(0.5, 0.01, 100), fineradscore=(2.0, 0.2, 50)))
    # d(1/x)/dx = -1/x², so ci(1/x) = ci / x²: 0.01 / 0.25 = 0.04; 0.2 / 4 = 0.05
    assert values["radcliq_v1_inv"] == {"mean": pytest.approx(2.0), "ci95": pytest.approx(0.04), "n": 100}
    assert values["fineradscore_inv"] == {"mean": pytest.approx(0.5), "ci95": pytest.approx(0.05), "n": 50}


@pytest.mark.parametrize("mean, ci", [(0.5, 0.002), (1.7, 0.01), (3.2, 0.03)])
def test_inverted_ci_matches_the_exact_interval_for_a_small_ci(mean, ci):
    """Independent oracle: the exact image of [mean - ci, mean + ci] under 1/x has
    half-width (1/(mean-ci) - 1/(mean+ci)) / 2 = ci / (mean² - ci²) ≈ ci / mean²."""
    inv = leaderboard_values(run_results(radcliq=(mean, ci, 10)))["radcliq_v1_inv"]
    exact = (1 / (mean - ci) - 1 / (mean + ci)) / 2
    assert inv["ci95"] == pytest.approx(exact, rel=1e-3)


def test_no_ci_gives_no_inverted_ci_and_a_zero_mean_no_column():
    values = leaderboard_values(run_results(radcliq=(0.5, None, 3), fineradscore=(0.0, 0.1, 3)))
    assert values["radcliq_v1_inv"]["ci95"] is None
    assert "fineradscore_inv" not in values


def test_radeval_metrics_are_optional_columns_outside_the_ranking_and_the_benchmark():
    from rexrank.hub.eval_results import ordered_columns
    from rexrank.leaderboard import published
    from rexrank.results_schema import COLUMNS_BY_KEY, DEFAULT_RANK_KEY

    results = {"metrics": {name: {"scores": {name: {"mean": 0.4, "ci95": 0.01, "n": 590}}}
                           for name in ("rouge", "temporal_f1", "srr_bert")}}
    values = leaderboard_values(results)
    assert {k: v["mean"] for k, v in values.items()} == {"rouge": 0.4, "temporal_f1": 0.4, "srr_bert": 0.4}
    optional = {k for k, c in COLUMNS_BY_KEY.items() if c.optional}
    assert optional == {"rouge", "temporal_f1", "srr_bert"} and DEFAULT_RANK_KEY not in optional
    assert not optional & {c.key for c in ordered_columns()}  # not part of the Hub benchmark definition
    assert not optional & {c.key for c in published._BY_DISPLAY.values()}  # ReXrank's tables never have them


def test_the_backend_accepts_a_metric_set_that_names_them():
    from rexrank.store.config import checked_set

    assert checked_set(["bleu2", "rouge", "temporal_f1", "srr_bert"], origin="test").metrics[1:] == (
        "rouge", "temporal_f1", "srr_bert")
