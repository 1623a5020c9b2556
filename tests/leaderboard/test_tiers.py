"""The tiers: the paired test between neighbours and the walk down a table (rexrank.leaderboard.tiers).

Pinned by hand (issue 32: what the mutation tool found unpinned): every expected value comes from an
independent oracle, never from rexrank's earlier output."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps


# ---- tiers: the paired t-test has n - 1 degrees of freedom --------------------------------
@pytest.mark.parametrize("n", [2, 3, 5])
def test_the_tier_test_is_scipys_paired_t_test_at_small_n(n):
    from rexrank.leaderboard.tiers import paired_p

    rng = np.random.default_rng(n)
    a = rng.random(n)
    b = a - 0.1 + 0.05 * rng.standard_normal(n)
    ids = np.array([f"s{i}" for i in range(n)])
    p, used = paired_p((ids, a), (ids, b))
    assert used == n
    assert p == pytest.approx(sps.ttest_rel(a, b).pvalue, rel=1e-12)


# ---- tiers: the edge cases of the paired test and of the walk down the table --------------------
def _scores(ids, values):
    return np.asarray(ids, dtype=str), np.asarray(values, dtype=np.float64)


def test_the_tier_test_pairs_studies_by_id_over_those_both_scored():
    from rexrank.leaderboard.tiers import _aligned, paired_p

    a = pd.DataFrame({"id": ["s3", "s1", "s2", "s4"], "x": [0.9, 0.5, 0.7, np.nan]})
    b = pd.DataFrame({"id": ["s2", "s1", "s3", "s5"], "x": [0.6, 0.45, 0.7, 0.1]})
    ids_a, values_a = _aligned(a, "x")
    assert ids_a.tolist() == ["s1", "s2", "s3"] and values_a.tolist() == [0.5, 0.7, 0.9]  # sorted by id, NaN left out
    p, used = paired_p(_aligned(a, "x"), _aligned(b, "x"))
    assert used == 3  # s1, s2, s3: s4 has no score, s5 is b's only
    assert p == pytest.approx(sps.ttest_rel([0.5, 0.7, 0.9], [0.45, 0.6, 0.7]).pvalue, rel=1e-12)


def test_the_tier_test_with_too_few_studies_or_no_spread():
    from rexrank.leaderboard.tiers import paired_p

    assert paired_p(_scores(["a"], [0.5]), _scores(["a"], [0.1])) == (1.0, 1)  # one common study: no test
    assert paired_p(_scores(["a", "b"], [0.5, 0.2]), _scores(["c", "d"], [0.1, 0.3])) == (1.0, 0)
    assert paired_p(_scores(["a", "b", "c"], [0.5, 0.2, 0.4]), _scores(["a", "b", "c"], [0.5, 0.2, 0.4])) == (1.0, 3)
    # a constant shift: every difference 0.1, standard deviation 0 -> certain
    assert paired_p(_scores(["a", "b", "c"], [0.6, 0.3, 0.5]), _scores(["a", "b", "c"], [0.5, 0.2, 0.4]))[0] == pytest.approx(0.0, abs=0)


def _tier_table(ids, ranks, available):
    return pd.DataFrame({"id": ids, "rank": ranks, "per_study_available": available})


def test_table_tiers_walk_by_hand():
    """Four ranked results (one without per-study scores, one unranked): three neighbour
    tests, Holm-adjusted by hand."""
    from rexrank.leaderboard.tiers import ALPHA, table_tiers

    rng = np.random.default_rng(4)
    ids = [f"s{i}" for i in range(30)]
    base = rng.uniform(0.3, 0.7, 30)
    data = {"a": base + 0.3 + rng.normal(0, 0.05, 30), "b": base + 0.1 + rng.normal(0, 0.05, 30),
            "c": base + 0.099 + rng.normal(0, 0.05, 30), "d": base}
    frames = {k: pd.DataFrame({"id": ids, "rouge": v}) for k, v in data.items()}
    table = _tier_table(["a", "pub", "b", "c", "d", "unranked"], [1, 2, 3, 4, 5, np.nan],
                        [True, False, True, True, True, True])
    asked = []

    def per_study(rid):
        asked.append(rid)
        return frames.get(rid)

    cache = {}
    tiers = table_tiers(table, "rouge", per_study, p_cache=cache)
    raw = [sps.ttest_rel(data[u], data[d]).pvalue for u, d in (("a", "b"), ("b", "c"), ("c", "d"))]
    m = 3
    order = np.argsort(raw)
    adjusted, running = [0.0] * m, 0.0
    for step, i in enumerate(order):
        running = max(running, (m - step) * raw[i])
        adjusted[i] = min(1.0, running)
    expected, tier = {"a": 1}, 1
    for rid, q in zip("bcd", adjusted):
        tier += q < ALPHA
        expected[rid] = tier
    assert tiers == expected == {"a": 1, "b": 2, "c": 2, "d": 3}
    assert sorted(asked) == ["a", "b", "c", "d"]  # neither the published nor the unranked row is read
    assert set(cache) == {("a", "b", "rouge"), ("b", "c", "rouge"), ("c", "d", "rouge")}
    assert [cache[k] for k in (("a", "b", "rouge"), ("b", "c", "rouge"), ("c", "d", "rouge"))] == pytest.approx(raw, rel=1e-12)
    assert ALPHA == 0.05
    # the cache is used: a second walk asks for nothing to be tested again
    cache[("a", "b", "rouge")] = 0.9  # a cached p-value is taken as it is
    again = table_tiers(table, "rouge", per_study, p_cache=cache)
    assert again["b"] == 1


def test_table_tiers_without_anything_to_compare():
    from rexrank.leaderboard.tiers import table_tiers

    ids = [f"s{i}" for i in range(5)]
    frame = pd.DataFrame({"id": ids, "bleu2": [0.1, 0.2, 0.3, 0.4, 0.5]})
    assert table_tiers(_tier_table(["a"], [np.nan], [True]), "bleu2", lambda r: frame) == {}
    assert table_tiers(_tier_table(["a"], [1], [False]), "bleu2", lambda r: frame) == {}
    assert table_tiers(_tier_table(["a"], [1], [True]), "bleu2", lambda r: None) == {}
    assert table_tiers(_tier_table(["a"], [1], [True]), "bleu2", lambda r: frame.rename(columns={"id": "study"})) == {}
    assert table_tiers(_tier_table(["a"], [1], [True]), "bleu2", lambda r: frame[["id"]]) == {}
    assert table_tiers(_tier_table(["a"], [1], [True]), "not_a_column", lambda r: frame) == {}
    assert table_tiers(_tier_table(["a"], [1], [True]), "bleu2", lambda r: frame) == {"a": 1}
    # the RadCliQ-v1 column's tests read its per-study column (radcliq_v1), not the key
    both = _tier_table(["a", "b"], [1, 2], [True, True])
    pair = {"a": pd.DataFrame({"id": ids, "radcliq_v1": [1.0, 1.1, 1.2, 1.3, 1.4]}),
            "b": pd.DataFrame({"id": ids, "radcliq_v1": [2.0, 2.3, 2.1, 2.4, 2.2]})}
    assert table_tiers(both, "radcliq_v1_inv", pair.get) == {"a": 1, "b": 2}


# ---- tiers: single-precision scores ----------------------------------------------------------
def test_the_tier_test_on_single_precision_scores_is_computed_in_double():
    """A per-study file may store float32 scores: the t-test is scipy's on those values as float64."""
    from rexrank.leaderboard.tiers import _aligned, paired_p

    rng = np.random.default_rng(8)
    ids = [f"s{i:03d}" for i in range(200)]
    a = rng.uniform(0.2, 0.8, 200).astype(np.float32)
    b = (a - 0.01 + rng.normal(0, 0.05, 200)).astype(np.float32)
    fa, fb = pd.DataFrame({"id": ids, "x": a}), pd.DataFrame({"id": ids, "x": b})
    assert _aligned(fa, "x")[1].dtype == np.float64
    p, _ = paired_p(_aligned(fa, "x"), _aligned(fb, "x"))
    assert p == pytest.approx(sps.ttest_rel(a.astype(np.float64), b.astype(np.float64)).pvalue, rel=1e-12)


# ---- tiers: a p-value of exactly alpha -------------------------------------------------------
def test_a_neighbour_p_value_of_exactly_alpha_is_no_new_tier():
    from rexrank.leaderboard.tiers import table_tiers

    ids = [f"s{i}" for i in range(5)]
    frames = {"a": pd.DataFrame({"id": ids, "bleu2": [0.5, 0.6, 0.7, 0.8, 0.9]}),
              "b": pd.DataFrame({"id": ids, "bleu2": [0.1, 0.3, 0.2, 0.4, 0.3]})}
    table = _tier_table(["a", "b"], [1, 2], [True, True])
    # one test: Holm leaves a single p-value as it is; "below 0.05" starts a tier, 0.05 itself does not
    assert table_tiers(table, "bleu2", frames.get, p_cache={("a", "b", "bleu2"): 0.05}) == {"a": 1, "b": 1}
    assert table_tiers(table, "bleu2", frames.get, p_cache={("a", "b", "bleu2"): 0.0499}) == {"a": 1, "b": 2}
