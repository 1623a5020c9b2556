"""Per-site rankings (the challenge paper's Figure 2) on studies whose means and ranks are
written out by hand."""
from __future__ import annotations

import math

import pandas as pd
import pytest
from scipy.stats import rankdata

from rexrank.analysis.io import AnalysisError, join_runs
from rexrank.analysis.sites import rank_matrix, site_ranking, top_sites
from rexrank.analysis.uncertainty import bootstrap_means

NAN = math.nan
IDS = [f"s{i}" for i in range(9)]
# site 20: s0-s3 (c unscored on s3), site 3: s4-s5, site 7: s6-s7, site 9: s8
SITES = pd.Series([20, 20, 20, 20, 3, 3, 7, 7, 9], index=IDS)
SCORES = {"a": [2, 2, 2, 2, 3, 3, 0, 0, 0],
          "b": [1, 1, 1, 1, 0, 0, 6, 6, 0],
          "c": [0, 0, 0, NAN, 4, 4, 2, 2, 0]}


def _runs(systems=("a", "b", "c"), lower_is_better=()):
    return join_runs({s: pd.DataFrame({"id": IDS, "score": SCORES[s]}) for s in systems}, lower_is_better=lower_is_better)


def test_top_sites_are_the_most_studies_ties_by_name_as_text():
    sites = pd.Series(["q", "p", 10, "q", "p", 9, "r", 10, 9, "z"])  # p, q, 9, 10 twice; r, z once
    assert top_sites(sites, 4) == ["10", "9", "p", "q"]  # "10" sorts before "9" as text
    assert top_sites(sites, 1) == ["10"]
    assert top_sites(sites, 99) == ["10", "9", "p", "q", "r", "z"]
    many = pd.Series([f"site{k:02d}" for k in range(12) for _ in range(20 - k)])  # site00 20 studies ... site11 9
    assert top_sites(many) == [f"site{k:02d}" for k in range(10)]  # ten by default
    with pytest.raises(AnalysisError, match=r"^top-N sites must be >= 1, got 0$"):
        top_sites(sites, 0)


def test_site_ranking_ranks_each_top_site_on_its_complete_studies_by_hand():
    # all, without s3 (c unscored): sums a 12, b 15, c 12 over 8 studies -> b 1st, a and c share 2nd
    # site 20, s0-s2: a 2, b 1, c 0; site 3, s4-s5: c 4, a 3, b 0
    got = site_ranking(_runs(), SITES.iloc[::-1], "score", top_n=2)  # the sites' order does not matter
    rows = [("all", 8, 1, "b", 15 / 8, 1), ("all", 8, 1, "a", 12 / 8, 2), ("all", 8, 1, "c", 12 / 8, 2),
            ("20", 3, 1, "a", 2.0, 1), ("20", 3, 1, "b", 1.0, 2), ("20", 3, 1, "c", 0.0, 3),
            ("3", 2, 0, "c", 4.0, 1), ("3", 2, 0, "a", 3.0, 2), ("3", 2, 0, "b", 0.0, 3)]
    expected = pd.DataFrame([{"site": site, "n": n, "n_excluded": excluded, "system": system, "metric": "score",
                              "mean": mean, "rank": rank} for site, n, excluded, system, mean, rank in rows])
    pd.testing.assert_frame_equal(got, expected, check_dtype=False)
    # systems in overall rank order (ties by name), sites overall first then by study count
    pd.testing.assert_frame_equal(rank_matrix(got), pd.DataFrame(
        {"all": [1, 2, 2], "20": [2, 1, 3], "3": [3, 2, 1]}, index=pd.Index(["b", "a", "c"], name="system")),
        check_dtype=False, check_names=False)
    assert rank_matrix(got, "mean").loc["c"].tolist() == [12 / 8, 0.0, 4.0]


def test_a_lower_is_better_score_ranks_the_smallest_mean_first():
    got = site_ranking(_runs(lower_is_better=("score",)), SITES, "score", top_n=1)
    assert got[got.site == "20"][["system", "rank"]].values.tolist() == [["c", 1], ["b", 2], ["a", 3]]


def test_rank_intervals_are_over_the_sites_resampled_studies():
    # with at most 40 resamples the 95 % interval's ends are the lowest and highest rank over the
    # resamples of the site's complete studies, drawn by bootstrap_means with the seed (checked
    # against scipy in test_uncertainty); one resample's interval is its rank
    runs = _runs()
    complete = runs.matrix("score").dropna()
    for resamples, seed in ((1, 5), (3, 2), (3, 3)):
        got = site_ranking(runs, SITES, "score", top_n=1, resamples=resamples, seed=seed)
        ranks = rankdata(-bootstrap_means(complete.to_numpy(), resamples=resamples, seed=seed), method="min", axis=1)
        overall = got[got.site == "all"].set_index("system").loc[list(complete.columns)]
        assert overall["rank_low"].tolist() == ranks.min(axis=0).tolist()
        assert overall["rank_high"].tolist() == ranks.max(axis=0).tolist()
        site = got[got.site == "20"]  # each study of site 20 gives the same order, so every resample does
        assert site["rank_low"].tolist() == site["rank_high"].tolist() == site["rank"].tolist() == [1, 2, 3]
    # the seed is 0 unless given: its one resample ranks a 2nd (seed 1's would rank it 3rd)
    default = site_ranking(runs, SITES, "score", top_n=1, resamples=1)
    pd.testing.assert_frame_equal(default, site_ranking(runs, SITES, "score", top_n=1, resamples=1, seed=0))
    assert default.set_index(["site", "system"]).loc[("all", "a"), "rank_low"] == 2


def test_site_ranking_refusals_say_what_is_missing():
    with pytest.raises(AnalysisError, match=r"^a per-site ranking needs at least two systems$"):
        site_ranking(_runs(("a",)), SITES, "score")
    two = site_ranking(_runs(("a", "b")), SITES, "score", top_n=3, resamples=2)  # two systems, two studies suffice
    assert two[two.site == "3"][["system", "rank", "rank_low", "rank_high"]].values.tolist() == [["a", 1, 1, 1],
                                                                                                 ["b", 2, 2, 2]]
    with pytest.raises(AnalysisError, match=r"^site '9': fewer than 2 studies scored by every system on score$"):
        site_ranking(_runs(), SITES, "score", top_n=4)
    with pytest.raises(AnalysisError, match=r"^site '20': fewer than 2"):
        site_ranking(_runs(), SITES.where(SITES != 20, 9).where(~SITES.index.isin(["s2", "s3"]), 20), "score")
