"""The leaderboard values of a scoring run: the inverted columns (1/RadCliQ-v1,
1/FineRadScore) and their CI half-width by the delta method, checked against hand-derived
numbers and against the exact interval 1/(mean ∓ ci) they approximate."""
from __future__ import annotations

import numpy as np
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
    assert {"rouge", "temporal_f1", "srr_bert"} <= optional and DEFAULT_RANK_KEY not in optional
    assert not optional & {c.key for c in ordered_columns()}  # not part of the Hub benchmark definition
    assert not optional & {c.key for c in published._BY_DISPLAY.values()}  # ReXrank's tables never have them


def test_the_backend_accepts_a_metric_set_that_names_them():
    from rexrank.store.config import checked_set

    assert checked_set(["bleu2", "rouge", "temporal_f1", "srr_bert"], origin="test").metrics[1:] == (
        "rouge", "temporal_f1", "srr_bert")


# ---- results_schema: every metric of a run reaches its column --------------------------------
def test_every_metric_of_a_run_reaches_its_leaderboard_column():
    from rexrank.results_schema import leaderboard_values

    plain = ["bleu2", "bertscore", "sembscore", "radgraph", "ratescore", "green", "rouge", "temporal_f1", "srr_bert",
             "crimson"]
    metrics = {name: {"scores": {name: {"mean": 0.01 * (i + 1), "ci95": 0.001 * (i + 1), "n": 100 + i}}}
               for i, name in enumerate(plain)}
    metrics["radcliq"] = {"scores": {"radcliq": {"mean": 2.0, "ci95": 0.1, "n": 590}, "radcliq_v0": {"mean": 9.0}}}
    metrics["fineradscore"] = {"scores": {"fineradscore": {"mean": 0.5, "ci95": None, "n": 588}}}
    values = leaderboard_values({"metrics": metrics})
    expected = {name: {"mean": 0.01 * (i + 1), "ci95": 0.001 * (i + 1), "n": 100 + i} for i, name in enumerate(plain)}
    # by hand: 1 / 2.0 with CI 0.1 / 2.0² = 0.025; 1 / 0.5, no CI
    expected["radcliq_v1_inv"] = {"mean": 0.5, "ci95": 0.025, "n": 590}
    expected["fineradscore_inv"] = {"mean": 2.0, "ci95": None, "n": 588}
    assert values == expected
    assert list(values)[:10] == plain  # the board's order of the plain columns


def test_leaderboard_values_of_runs_that_lack_metrics_or_scores():
    from rexrank.results_schema import leaderboard_values

    assert leaderboard_values({}) == {}
    assert leaderboard_values({"metrics": {"bleu2": {}}}) == {}
    assert leaderboard_values({"metrics": {"bleu2": {"n": 3}, "rouge": {"scores": {}}}}) == {}
    assert leaderboard_values({"metrics": {"radcliq": {"scores": {"radcliq": {"mean": 0.0, "ci95": 0.1}}}}}) == {}  # no 1/0
    only = leaderboard_values({"metrics": {"green": {"scores": {"green": {"mean": 0.3}}}}})
    assert only == {"green": {"mean": 0.3, "ci95": None, "n": None}}


# ---- results_schema: the range each column's mean can take --------------------------------------
@pytest.mark.parametrize("key", ["bleu2", "radgraph", "ratescore", "green", "rouge", "temporal_f1", "srr_bert"])
def test_zero_to_one_columns(key):
    from rexrank.results_schema import value_in_range

    assert value_in_range(key, 0.0) == (True, "0 to 1") and value_in_range(key, 1.0) == (True, "0 to 1")
    assert value_in_range(key, -1e-9) == (False, "0 to 1") and value_in_range(key, 1 + 1e-9) == (False, "0 to 1")


def test_the_ranges_of_the_other_columns_by_hand():
    from rexrank.metrics.radcliq_formula import V1_COEFS, V1_MEAN, V1_SCALE
    from rexrank.results_schema import value_in_range

    assert value_in_range("crimson", 1.0) == (True, "above -1, at most 1")
    assert value_in_range("crimson", -0.999)[0] and not value_in_range("crimson", -1.0)[0]
    assert not value_in_range("crimson", 1.0001)[0]
    assert value_in_range("sembscore", -1.0) == (True, "-1 to 1") and value_in_range("sembscore", 1.0)[0]
    assert not value_in_range("sembscore", -1.001)[0] and not value_in_range("sembscore", 1.001)[0]
    # BERTScore F rescaled with distilroberta-base layer 5's baseline b = 0.8473319 (bert-score's
    # rescale file): cosine F1 >= -1 gives at least (-1 - b) / (1 - b)
    low = (-1 - 0.8473319) / (1 - 0.8473319)
    assert value_in_range("bertscore", low) == (True, "-12.10 to 1")
    assert not value_in_range("bertscore", low - 1e-6)[0] and not value_in_range("bertscore", 1.000001)[0]
    assert value_in_range("fineradscore_inv", 0.25) == (True, "at least 0.25")
    assert not value_in_range("fineradscore_inv", 0.2499)[0]
    # RadCliQ-v1 is linear in radgraph, BERTScore, SembScore, BLEU-2: each term at its own
    # lower or upper end gives the smallest and largest value
    ranges = [(0.0, 1.0), (low, 1.0), (-1.0, 1.0), (0.0, 1.0)]
    terms = [sorted(c * (x - m) / s for x in r) for c, m, s, r in zip(V1_COEFS[:4], V1_MEAN, V1_SCALE, ranges)]
    smallest = sum(t[0] for t in terms) + V1_COEFS[4]
    largest = sum(t[1] for t in terms) + V1_COEFS[4]
    ok, words = value_in_range("radcliq_v1_inv", 1 / (largest * 0.999))
    assert ok and words == f"1/x for x from {smallest:.3f} to {largest:.3f}" == "1/x for x from -1.441 to 23.421"
    assert value_in_range("radcliq_v1_inv", 1 / (smallest * 0.999))[0]
    assert not value_in_range("radcliq_v1_inv", 1 / (largest * 1.001))[0]
    assert not value_in_range("radcliq_v1_inv", 1 / (smallest * 1.001))[0]
    assert not value_in_range("radcliq_v1_inv", 0.0)[0]
    assert value_in_range("no_such_column", -99.0) == (True, "any")
    assert value_in_range("bertscore", 1.0)[0]  # the ends are values the metric can take
    # a mean whose inverse is exactly the largest RadCliQ-v1 (no double's inverse is exactly the smallest)
    candidates = [1 / largest, *(np.nextafter(1 / largest, d) for d in (-np.inf, np.inf))]
    exact = [m for m in candidates if 1.0 / m == largest]
    assert exact and value_in_range("radcliq_v1_inv", exact[0])[0]


def test_each_metric_key_is_shown_under_one_label():
    from rexrank.results_schema import metric_label

    assert [metric_label(k) for k in ("bleu2", "radcliq_v1_inv", "fineradscore_inv", "crimson")] == [
        "BLEU", "1/RadCliQ-v1", "1/FineRadScore", "CRIMSON"]
    # per-study columns that are no leaderboard column
    assert [metric_label(k) for k in ("radcliq_v1", "fineradscore", "rouge1", "rouge2")] == [
        "RadCliQ-v1", "FineRadScore", "ROUGE-1", "ROUGE-2"]
    assert metric_label("rougeL") == "ROUGE-L"  # ROUGE's own name for the rouge column's number
    assert metric_label("my_metric") == "my_metric"  # unknown: its own label


def test_a_column_that_repeats_another_is_named_only_beside_it():
    from rexrank.results_schema import repeated_columns

    assert repeated_columns(["rouge", "rougeL", "rouge1", "bleu2"]) == {"rougeL"}
    assert repeated_columns(["rougeL", "rouge1"]) == set()  # alone it is the number: kept
    assert repeated_columns(iter(["rouge", "rougeL"])) == {"rougeL"} and repeated_columns([]) == set()
