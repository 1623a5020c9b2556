"""Statistics of rexrank.analysis against closed forms and scipy on synthetic data."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from rexrank.analysis.io import AnalysisError
from rexrank.analysis.uncertainty import (
    bootstrap_means,
    cohens_dz,
    complete_cases,
    holm,
    normal_ci,
    paired_bootstrap,
    pairwise_tests,
    percentile_ci,
    randomisation_test,
    rank_intervals,
    summary_row,
)


def test_normal_ci_is_papers_196_sem():
    x = np.random.default_rng(0).normal(3.0, 2.0, 57)
    mean, low, high = normal_ci(x)
    sem = sps.sem(x)  # ddof=1
    assert mean == pytest.approx(x.mean())
    assert high - mean == pytest.approx(1.96 * sem, rel=1e-12)
    # same as scipy's normal interval up to 1.96 vs 1.95996
    lo, hi = sps.norm.interval(0.95, loc=x.mean(), scale=sem)
    assert low == pytest.approx(lo, rel=1e-4) and high == pytest.approx(hi, rel=1e-4)


def test_bootstrap_weights_are_resamples_with_replacement():
    # every resample draws exactly n studies; each study's expected count is 1
    x = np.eye(40)  # column j = indicator of study j, so its bootstrap mean = count_j / n
    means = bootstrap_means(x, resamples=3000, seed=1)
    counts = means * 40
    assert np.allclose(counts.sum(axis=1), 40)
    assert np.allclose(counts, np.round(counts))
    assert counts.mean() == pytest.approx(1.0, abs=0.01)
    assert counts.var() == pytest.approx(1 - 1 / 40, rel=0.05)  # binomial(n, 1/n) variance


def test_bootstrap_is_seeded():
    x = np.random.default_rng(2).normal(size=(30, 3))
    assert np.array_equal(bootstrap_means(x, resamples=50, seed=7), bootstrap_means(x, resamples=50, seed=7))
    assert not np.array_equal(bootstrap_means(x, resamples=50, seed=7), bootstrap_means(x, resamples=50, seed=8))


def test_percentile_ci_matches_scipy_bootstrap():
    x = np.random.default_rng(3).gamma(2.0, 1.0, 200)
    low, high = percentile_ci(x, resamples=20000, seed=0)
    ref = sps.bootstrap((x,), np.mean, n_resamples=20000, method="percentile", random_state=0).confidence_interval
    sd = x.std(ddof=1) / math.sqrt(x.size)
    assert low[0] == pytest.approx(ref.low, abs=0.05 * sd)
    assert high[0] == pytest.approx(ref.high, abs=0.05 * sd)


def test_ci_coverage_near_95_percent():
    rng = np.random.default_rng(4)
    true_mean = 2.0  # exponential(scale 2): skewed, like many per-study scores
    draws = 400
    boot_hits = normal_hits = 0
    for i in range(draws):
        x = rng.exponential(true_mean, 80)
        low, high = percentile_ci(x, resamples=300, seed=i)
        boot_hits += low[0] <= true_mean <= high[0]
        _, nlow, nhigh = normal_ci(x)
        normal_hits += nlow <= true_mean <= nhigh
    # binomial sd of the coverage over 400 draws ~ 1.1 %; skewness costs a little coverage
    assert 0.89 <= boot_hits / draws <= 0.98
    assert 0.89 <= normal_hits / draws <= 0.98


def _null_pairs(rng, n):
    study = rng.normal(0, 1, n)  # shared per-study difficulty makes the design paired
    return study + rng.normal(0, 0.5, n), study + rng.normal(0, 0.5, n)


@pytest.mark.parametrize("test", [paired_bootstrap, randomisation_test])
def test_p_values_roughly_uniform_under_null(test):
    rng = np.random.default_rng(5)
    p = np.array([test(*_null_pairs(rng, 60), resamples=199, seed=i).p_value for i in range(300)])
    assert sps.kstest(p, "uniform").pvalue > 0.001
    assert 0.02 <= (p < 0.05).mean() <= 0.10
    assert 0.40 <= (p < 0.5).mean() <= 0.60


@pytest.mark.parametrize("test", [paired_bootstrap, randomisation_test])
def test_paired_test_detects_real_difference(test):
    rng = np.random.default_rng(6)
    b, _ = _null_pairs(rng, 200)
    a = b + 0.15 + rng.normal(0, 0.5, 200)  # true mean difference 0.15, d_z = 0.3
    t = test(a, b, resamples=2000, seed=0)
    assert t.p_value < 0.01
    assert t.ci_low < 0.15 < t.ci_high and t.ci_low > 0
    assert t.difference == pytest.approx(np.mean(a - b))
    assert t.effect_size == pytest.approx(np.mean(a - b) / np.std(a - b, ddof=1))
    assert 0.15 < t.effect_size < 0.45


def test_randomisation_matches_exact_permutation_test():
    rng = np.random.default_rng(7)
    a = rng.normal(0.5, 1, 11)
    b = rng.normal(0.0, 1, 11)
    exact = sps.permutation_test((a, b), lambda x, y: np.mean(x - y), permutation_type="samples",
                                 n_resamples=np.inf, alternative="two-sided").pvalue
    ours = randomisation_test(a, b, resamples=40000, seed=0).p_value
    assert ours == pytest.approx(exact, abs=0.01)


def test_paired_bootstrap_ci_matches_scipy():
    rng = np.random.default_rng(8)
    a, b = rng.normal(1, 1, 150), rng.normal(0.8, 1, 150)
    t = paired_bootstrap(a, b, resamples=20000, seed=0)
    ref = sps.bootstrap((a - b,), np.mean, n_resamples=20000, method="percentile", random_state=1).confidence_interval
    sem = np.std(a - b, ddof=1) / math.sqrt(150)
    assert t.ci_low == pytest.approx(ref.low, abs=0.05 * sem)
    assert t.ci_high == pytest.approx(ref.high, abs=0.05 * sem)


def test_cohens_dz_degenerate():
    assert cohens_dz(np.zeros(5)) == 0.0
    assert cohens_dz(np.ones(5)) == math.inf


def test_paired_inputs_checked():
    with pytest.raises(AnalysisError, match="equal length"):
        paired_bootstrap(np.ones(3), np.ones(4))
    with pytest.raises(AnalysisError, match="NaN"):
        paired_bootstrap(np.array([1.0, np.nan, 2.0]), np.ones(3))


def test_holm_closed_form():
    # sorted p: 0.005, 0.01, 0.03, 0.04 -> 4*0.005, 3*0.01, 2*0.03, max(1*0.04, 0.06)
    adjusted = holm([0.01, 0.04, 0.03, 0.005])
    assert np.allclose(adjusted, [0.03, 0.06, 0.06, 0.02])
    assert np.allclose(holm([0.5, 0.9]), [1.0, 1.0])
    assert holm([]).size == 0


def test_rank_intervals_separated_systems_are_certain():
    rng = np.random.default_rng(9)
    x = pd.DataFrame({f"s{i}": rng.normal(i, 0.1, 100) for i in range(5)})
    table = rank_intervals(x, resamples=300, seed=0).set_index("system")
    assert table.loc["s4", "rank"] == 1 and table.loc["s0", "rank"] == 5
    assert (table["rank_low"] == table["rank"]).all() and (table["rank_high"] == table["rank"]).all()
    assert table.loc["s4", "rank_interval"] == "rank 1 of 5"
    lower = rank_intervals(x, higher_is_better=False, resamples=50, seed=0).set_index("system")
    assert lower.loc["s0", "rank"] == 1


def test_rank_intervals_exchangeable_systems_are_wide():
    rng = np.random.default_rng(10)
    x = pd.DataFrame({f"s{i}": rng.normal(0, 1, 50) for i in range(6)})
    table = rank_intervals(x, resamples=500, seed=0)
    assert (table["rank_low"] <= table["rank"]).all() and (table["rank"] <= table["rank_high"]).all()
    assert (table["rank_high"] - table["rank_low"]).mean() >= 2
    assert table["p_rank_1"].sum() == pytest.approx(1.0, abs=0.05)  # ties share rank 1 only rarely
    assert table["rank_interval"].str.match(r"rank \d(–\d)? of 6").all()


# ---- issue 40: what the mutation tool found unpinned in rexrank.analysis.uncertainty -----------

def test_holm_by_hand_and_capped_at_one():
    # sorted 0.01, 0.03, 0.04, 0.2 times 4, 3, 2, 1 = 0.04, 0.09, 0.08, 0.2; running maximum 0.04, 0.09, 0.09, 0.2
    np.testing.assert_allclose(holm([0.01, 0.04, 0.03, 0.2]), [0.04, 0.09, 0.09, 0.2])
    np.testing.assert_array_equal(holm([0.6, 0.7]), [1.0, 1.0])  # 2 x 0.6 = 1.2 is a probability of 1
    assert holm([]).size == 0


def _rank_table_by_definition(values: pd.DataFrame, resamples: int, seed: int, level: float = 0.95) -> pd.DataFrame:
    """The rank interval as the analysis notes define it: each system's rank (1 = best, ties share
    the best rank) in every bootstrap resample of the studies (all systems resampled together,
    bootstrap_means being checked against scipy above), its percentile interval rounded outwards,
    and the share of resamples where it ranks first."""
    ranks = sps.rankdata(-bootstrap_means(values.to_numpy(), resamples=resamples, seed=seed), method="min", axis=1)
    tail = (1 - level) / 2
    return pd.DataFrame({
        "system": list(values.columns), "mean": values.mean().to_numpy(),
        "rank": sps.rankdata(-values.mean().to_numpy(), method="min").astype(int),
        "rank_low": np.quantile(ranks, tail, axis=0, method="lower").astype(int),
        "rank_high": np.quantile(ranks, 1 - tail, axis=0, method="higher").astype(int),
        "p_rank_1": (ranks == 1).mean(axis=0)})


def test_rank_intervals_follow_their_definition_with_ties_sharing_the_best_rank():
    rng = np.random.default_rng(3)
    values = pd.DataFrame({"a": rng.normal(0.50, 0.3, 40), "b": rng.normal(0.48, 0.3, 40), "c": rng.normal(0.40, 0.3, 40)})
    values["d"] = values["c"]  # a tie in every resample: both rank as the better of the two
    got = rank_intervals(values, resamples=300, seed=0)
    expected = _rank_table_by_definition(values, 300, 0).sort_values(["rank", "system"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got.drop(columns="rank_interval"), expected)
    assert got.loc[got.system == "d", "rank"].item() == got.loc[got.system == "c", "rank"].item() == 3
    assert list(got.index) == [0, 1, 2, 3]
    # a 50 % interval is no wider than the 95 % one, and the default resamples and seed are 1,000 and 0
    assert rank_intervals(values, resamples=300, seed=0, level=0.5)["rank_high"].le(got["rank_high"]).all()
    pd.testing.assert_frame_equal(rank_intervals(values), rank_intervals(values, resamples=1000, seed=0))
    labels = dict(zip(got.system, got.rank_interval))
    assert all(labels[s] == (f"rank {lo} of 4" if lo == hi else f"rank {lo}–{hi} of 4")
               for s, lo, hi in zip(got.system, got.rank_low, got.rank_high))
    assert any(lo != hi for lo, hi in zip(got.rank_low, got.rank_high))  # the case has an unsettled rank


def test_lower_is_better_ranks_the_smallest_mean_first():
    values = pd.DataFrame({"a": [0.1, 0.2, 0.1], "b": [0.9, 0.8, 0.9]})
    got = rank_intervals(values, higher_is_better=False, resamples=50)
    assert list(got.system) == ["a", "b"] and list(got["rank"]) == [1, 2] and list(got.p_rank_1) == [1.0, 0.0]


def test_complete_cases_and_pairwise_tests_by_hand():
    frame = pd.DataFrame({"a": [1.0, 2.0, np.nan, 4.0], "b": [1.0, np.nan, 3.0, 5.0], "c": [0.0, 0.0, 0.0, 1.0]})
    kept, excluded = complete_cases(frame)
    assert excluded == 2 and list(kept.index) == [0, 3]
    table = pairwise_tests(kept, method="randomisation", resamples=99, seed=5)
    assert [(r.system_a, r.system_b) for r in table.itertuples()] == [("a", "b"), ("a", "c"), ("b", "c")]
    for row in table.itertuples():
        alone = randomisation_test(kept[row.system_a].to_numpy(), kept[row.system_b].to_numpy(), resamples=99, seed=5)
        assert row.p_value == alone.p_value and row.difference == alone.difference and row.method == alone.method
    np.testing.assert_array_equal(table["p_holm"], holm(table["p_value"].to_numpy()))
    assert pairwise_tests(kept, resamples=99).iloc[0]["method"] == "paired bootstrap"
    with pytest.raises(AnalysisError, match="unknown paired test 'exact'; use one of bootstrap, randomisation"):
        pairwise_tests(kept, method="exact")
    assert pairwise_tests(kept[["a"]]).empty


def test_summary_row_is_the_papers_mean_and_interval_by_hand():
    row = summary_row(np.array([1.0, 2.0, np.nan, 3.0]), boot_low=1.1, boot_high=2.9)
    half = 1.96 * 1.0 / math.sqrt(3)  # SD of 1, 2, 3 is 1
    assert row == pytest.approx({"n": 3, "n_missing": 1, "mean": 2.0, "ci95": half, "ci_low": 2.0 - half,
                                 "ci_high": 2.0 + half, "boot_low": 1.1, "boot_high": 2.9})


# ---- issue 40, the run on this code: refusals, exact p-values and fields, seeds and chunks ---------

def test_scores_that_cannot_be_resampled_are_refused_saying_why():
    with pytest.raises(AnalysisError) as refused:
        bootstrap_means(np.zeros((2, 2, 2)))
    assert str(refused.value) == "expected studies × systems scores, got shape (2, 2, 2)"
    with pytest.raises(AnalysisError) as refused:
        bootstrap_means([1.0, None, 2.0])  # a missing score (None) reads as NaN
    assert str(refused.value) == "scores contain NaN; drop unscored studies first (complete_cases)"
    with pytest.raises(AnalysisError) as refused:
        bootstrap_means(np.ones((1, 3)))  # one study of three systems
    assert str(refused.value) == "need at least 2 studies to resample, got 1"
    with pytest.raises(AnalysisError) as refused:
        bootstrap_means(np.ones((2, 1)), resamples=0)
    assert str(refused.value) == "bootstrap resamples must be >= 1, got 0"
    for missing_in in ("a", "b"):
        scores = {"a": [1.0, 2.0, 3.0], "b": [1.0, 2.0, 3.0]}
        scores[missing_in] = [1.0, None, 3.0]
        with pytest.raises(AnalysisError, match=r"^scores contain NaN"):
            paired_bootstrap(scores["a"], scores["b"])


def test_each_resample_is_one_draw_of_the_studies():
    # studies (1, 2) and (3, 5): a resample draws both twice from one, or one of each
    for resamples in (1, 3):
        means = bootstrap_means([[1.0, 2.0], [3.0, 5.0]], resamples=resamples, seed=0)
        assert means.shape == (resamples, 2)
        assert all(row in ([1.0, 2.0], [3.0, 5.0], [2.0, 3.5]) for row in means.tolist())


def test_cohens_dz_by_hand():
    assert cohens_dz(np.array([1.0, 3.0])) == pytest.approx(math.sqrt(2))  # mean 2, SD √2
    assert cohens_dz(np.array([-2.0, -2.0])) == -math.inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one difference has no SD, and numpy is not asked for one
        assert math.isnan(cohens_dz(np.array([2.0])))


def test_complete_cases_counts_the_studies_left_out():
    kept, excluded = complete_cases(pd.DataFrame({"a": [1.0, np.nan, 3.0], "b": [1.0, 2.0, 3.0]}))
    assert list(kept.index) == [0, 2] and excluded == 1


def test_holm_of_one_p_value_is_that_value_in_a_new_array():
    p = np.array([0.3])
    adjusted = holm(p)
    assert adjusted.tolist() == [0.3] and not np.shares_memory(adjusted, p)


def test_paired_bootstrap_of_a_constant_difference_by_hand():
    # every study differs by 1: every resample's mean difference is 1, none is as far from 1 as 0
    # is, so p = (1 + 0) / (1 + 9); the SD of the differences is 0, so d_z is infinite
    got = paired_bootstrap([3.0, 5.0], [2.0, 4.0], resamples=9, seed=4).to_dict()
    assert got == {"method": "paired bootstrap", "n": 2, "mean_a": 4.0, "mean_b": 3.0, "difference": 1.0,
                   "ci_low": 1.0, "ci_high": 1.0, "p_value": 0.1, "effect_size": math.inf, "resamples": 9, "seed": 4}
    # a difference within rounding (1e-12) of none is no evidence: every resample counts, p = 1
    assert paired_bootstrap([1e-12, 1e-12], [0.0, 0.0], resamples=9).p_value == 1.0


def test_paired_bootstrap_follows_its_definition_with_the_seed_and_level_given():
    rng = np.random.default_rng(11)
    a, b = rng.normal(0.3, 1, 25), rng.normal(0, 1, 25)
    d = a - b
    boot = bootstrap_means(d, resamples=200, seed=7)[:, 0]
    got = paired_bootstrap(a, b, resamples=200, seed=7, level=0.8)
    assert (got.ci_low, got.ci_high) == pytest.approx(tuple(np.quantile(boot, [0.1, 0.9])), rel=1e-12)
    # two-sided: resamples at least as far from the observed difference as the observed is from 0
    assert got.p_value == (1 + np.sum(np.abs(boot - d.mean()) >= abs(d.mean()) - 1e-12)) / 201
    assert paired_bootstrap(a, b) == paired_bootstrap(a, b, resamples=1000, seed=0, level=0.95)


def test_randomisation_test_by_hand():
    # differences 4 and 0: any sign flip gives a mean of ±2 (a 0 flips to itself), as far from 0 as
    # observed, so every resample counts and p = 1; SD 2√2, so SEM 2 and the interval 2 ± 1.96 × 2
    got = randomisation_test([5.0, 1.0], [1.0, 1.0], resamples=9, seed=3).to_dict()
    assert got == pytest.approx({"method": "approximate randomisation", "n": 2, "mean_a": 3.0, "mean_b": 1.0,
                                 "difference": 2.0, "ci_low": 2 - 3.92, "ci_high": 2 + 3.92, "p_value": 1.0,
                                 "effect_size": 1 / math.sqrt(2), "resamples": 9, "seed": 3})
    # the differences 1e-12 flip to means of 0 and ±1e-12: within rounding of the observed, p = 1
    assert randomisation_test([1e-12, 1e-12], [0.0, 0.0], resamples=50).p_value == 1.0


def test_randomisation_test_follows_its_definition_with_the_seed_given():
    rng = np.random.default_rng(12)
    a, b = rng.normal(0.2, 1, 7), rng.normal(0, 1, 7)
    d = a - b
    # the sign flips: numpy's seeded 0/1 draws (as int8) mapped to -1/+1, one row per resample
    signs = np.random.default_rng(2).integers(0, 2, size=(50, 7), dtype=np.int8) * 2 - 1
    extreme = np.sum(np.abs((signs * d).sum(axis=1) / 7) >= abs(d.mean()) - 1e-12)
    assert randomisation_test(a, b, resamples=50, seed=2).p_value == (1 + extreme) / 51
    assert randomisation_test(a, b) == randomisation_test(a, b, resamples=1000, seed=0)


class _RecordingGenerator:
    """numpy's seeded generator, noting the shape of each draw of integers."""

    real_default_rng = staticmethod(np.random.default_rng)

    def __init__(self, seed, shapes):
        self._rng, self._shapes = self.real_default_rng(seed), shapes

    def integers(self, *args, size, **kwargs):
        self._shapes.append(size)
        return self._rng.integers(*args, size=size, **kwargs)


def test_resamples_are_drawn_in_chunks_of_at_most_the_chunk_cells_or_one_row(monkeypatch):
    import rexrank.analysis.uncertainty as uncertainty

    x = np.array([[1.0, 0.0], [2.0, 5.0], [4.0, 1.0], [0.5, 0.5]])  # 4 studies, 2 systems
    whole = bootstrap_means(x, resamples=5, seed=1)
    shapes = []
    monkeypatch.setattr(np.random, "default_rng", lambda seed=None: _RecordingGenerator(seed, shapes))
    monkeypatch.setattr(uncertainty, "_CHUNK_CELLS", 8)  # two resamples of 4 studies a chunk
    chunked = bootstrap_means(x, resamples=5, seed=1)
    assert shapes == [(2, 4), (2, 4), (1, 4)]
    np.testing.assert_array_equal(chunked, whole)  # the chunks are the same draws
    # under the null every sign flip of differences 1, -1, 2, -2 (mean 0) counts: p = 1 needs
    # exactly one flip per resample, over all chunks
    shapes.clear()
    assert randomisation_test([1.0, 0.0, 2.0, 0.0], [0.0, 1.0, 0.0, 2.0], resamples=5).p_value == 1.0
    assert shapes == [(2, 4), (2, 4), (1, 4)]
    monkeypatch.setattr(uncertainty, "_CHUNK_CELLS", 3)  # a row is more than a chunk: one row at a time
    shapes.clear()
    np.testing.assert_array_equal(bootstrap_means(x, resamples=5, seed=1), whole)
    assert randomisation_test([1.0, 0.0, 2.0, 0.0], [0.0, 1.0, 0.0, 2.0], resamples=5).p_value == 1.0
    assert shapes == [(1, 4)] * 10


def test_percentile_ci_follows_its_definition_and_the_defaults_are_1000_resamples_and_seed_0():
    x = np.random.default_rng(13).gamma(2.0, 1.0, 30)
    low, high = percentile_ci(x, resamples=200, seed=7, level=0.8)
    expected = np.quantile(bootstrap_means(x, resamples=200, seed=7)[:, 0], [0.1, 0.9])
    assert (low[0], high[0]) == pytest.approx(tuple(expected), rel=1e-12)
    np.testing.assert_array_equal(percentile_ci(x), percentile_ci(x, resamples=1000, seed=0, level=0.95))
    np.testing.assert_array_equal(bootstrap_means(x), bootstrap_means(x, resamples=1000, seed=0))
    frame = pd.DataFrame({"a": x, "b": x[::-1], "c": x * 0.9})
    pd.testing.assert_frame_equal(pairwise_tests(frame), pairwise_tests(frame, resamples=1000, seed=0))


def test_rank_intervals_with_another_seed_and_level_follow_their_definition():
    rng = np.random.default_rng(3)
    values = pd.DataFrame({"a": rng.normal(0.50, 0.3, 40), "b": rng.normal(0.48, 0.3, 40), "c": rng.normal(0.40, 0.3, 40)})
    got = rank_intervals(values, resamples=300, seed=4, level=0.5)
    expected = _rank_table_by_definition(values, 300, 4, level=0.5).sort_values(["rank", "system"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got.drop(columns="rank_interval"), expected)


def test_three_tied_systems_share_the_best_rank_of_the_tie():
    values = pd.DataFrame({"a": [3.0, 4.0], "b": [1.0, 2.0], "c": [1.0, 2.0], "d": [1.0, 2.0]})
    got = rank_intervals(values, resamples=20).set_index("system")
    assert got["rank"].to_dict() == {"a": 1, "b": 2, "c": 2, "d": 2}


def test_a_rank_interval_ends_at_ranks_the_system_had():
    # a beats the tied c and d only when a resample draws its one good study at least 3 times of 5:
    # with seed 5, in one resample of 21; in the others it ranks 3rd, behind them
    values = pd.DataFrame({"a": [1.0, 0, 0, 0, 0], "c": [0, 0.9, 0.9, 0.9, 0.9], "d": [0, 0.9, 0.9, 0.9, 0.9]})
    means = bootstrap_means(values.to_numpy(), resamples=21, seed=5)
    assert int(np.sum(means[:, 0] > means[:, 1])) == 1
    # the 2.5th percentile of 21 ranks lies between the smallest (1) and the next (3): the interval
    # takes the rank a had, 1, not 2; so does the 97.5th with the order reversed
    for higher_is_better, rank in ((True, 3), (False, 1)):
        got = rank_intervals(values, higher_is_better=higher_is_better, resamples=21, seed=5).set_index("system")
        assert got.loc["a", ["rank", "rank_low", "rank_high"]].tolist() == [rank, 1, 3]
