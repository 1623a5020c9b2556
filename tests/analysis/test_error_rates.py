"""Error-free rates from per-study maximum FineRadScore severities, counted and their Wilson
intervals computed by hand (the Wilson score interval's closed form, z from the normal quantile)."""
from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pandas as pd
import pytest

from rexrank.analysis.error_rates import error_rates
from rexrank.analysis.io import AnalysisError, join_runs

NAN = math.nan


def _runs(column: str = "fineradscore", **severities) -> object:
    """A run per system whose only per-study column `column` holds the given severities."""
    ids = [f"s{i}" for i in range(len(next(iter(severities.values()))))]
    return join_runs({system: pd.DataFrame({"id": ids, column: values}) for system, values in severities.items()})


def _wilson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson (1927): centre (p + z²/2n) / (1 + z²/n), half-width z / (1 + z²/n) · √(p(1−p)/n + z²/4n²)."""
    z = NormalDist().inv_cdf(1 - (1 - level) / 2)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def _row(stratum, system, measure, max_severity, k, n, n_missing, level=0.95):
    low, high = _wilson(k, n, level) if n else (NAN, NAN)
    return {"stratum": stratum, "system": system, "measure": measure, "max_severity": max_severity, "k": k, "n": n,
            "n_missing": n_missing, "rate": k / n if n else NAN, "ci_low": low, "ci_high": high}


def _assert_table(got: pd.DataFrame, expected: list[dict]) -> None:
    pd.testing.assert_frame_equal(got, pd.DataFrame(expected), check_dtype=False, rtol=1e-9)


def test_the_default_measures_count_studies_at_or_below_severity_1_and_2_with_95_percent_wilson_intervals():
    # a: severities 0, 1 ≤ 1 (2 of 5 scored), 0, 1, 2 ≤ 2 (3 of 5); its 6th study is unscored
    # b: 1, 0 ≤ 1 (2 of 6); 2, 2, 1, 0 ≤ 2 (4 of 6)
    runs = _runs(a=[0, 1, 2, 3, 4, NAN], b=[2, 2, 1, 0, 4, 3])
    _assert_table(error_rates(runs), [
        _row("all", "a", "no actionable error", 1, 2, 5, 1), _row("all", "a", "no significant error", 2, 3, 5, 1),
        _row("all", "b", "no actionable error", 1, 2, 6, 0), _row("all", "b", "no significant error", 2, 4, 6, 0)])
    # the interval at 2 of 5 written out: z = 1.959964, centre 0.4 + z²/10 over 1 + z²/5
    low, high = error_rates(runs).loc[0, ["ci_low", "ci_high"]]
    assert (low, high) == pytest.approx((0.1176, 0.7693), abs=1e-4)


def test_strata_in_order_of_first_study_own_thresholds_column_and_level():
    # studies s0..s5 lie in strata 2, 1, 2, 1, 2, 2 (read as text); b has no score in stratum 1
    runs = _runs("max_severity", a=[0, 3, 1, 0, 4, 0], b=[1, NAN, 0, NAN, 0, 2])
    strata = pd.Series([2, 1, 2, 1, 2, 2], index=[f"s{i}" for i in range(6)])
    got = error_rates(runs, strata=strata.iloc[::-1], column="max_severity", thresholds={"error free": 0}, level=0.8)
    _assert_table(got, [
        _row("2", "a", "error free", 0, 2, 4, 0, 0.8),  # 0, 1, 4, 0
        _row("2", "b", "error free", 0, 2, 4, 0, 0.8),  # 1, 0, 0, 2
        _row("1", "a", "error free", 0, 1, 2, 0, 0.8),  # 3, 0
        _row("1", "b", "error free", 0, 0, 0, 2, 0.8)])  # unscored: no rate, no interval


def test_a_column_that_holds_no_severities_is_refused_naming_its_first_five_wrong_values():
    # b's column is valid (0 and 4 are the scale's ends, 1e-9 a float within rounding of 0); a's
    # wrong values are named in study order, first five only
    runs = _runs(a=[-1, 0, 5, 4, 0.5, 3.25, 7, NAN, 9], b=[0, 4, 1e-9, 2, 3, 1, 0, 4, NAN])
    with pytest.raises(AnalysisError) as refused:
        error_rates(runs)
    assert str(refused.value) == ("column 'fineradscore' does not hold per-study maximum FineRadScore severities "
                                  "(integers 0–4): found [-1.0, 5.0, 0.5, 3.25, 7.0]; pass the max-severity column")
    with pytest.raises(AnalysisError, match=r"^column 'sev' .*found \[0.5\]; pass the max-severity column$"):
        error_rates(_runs("sev", a=[0, 0.5]), column="sev")
    for wrong in (-1, 5, 0.5):  # each rule on its own: below 0, above 4, not a whole number
        with pytest.raises(AnalysisError, match=rf"found \[{float(wrong)}\]"):
            error_rates(_runs(a=[0, wrong, 4]))
    assert list(error_rates(_runs(a=[0, 4, 1e-9, NAN]))["k"]) == [2, 2]  # 0 and 1e-9 ≤ 1; 4 is not
    unscored = error_rates(_runs(a=[NAN, NAN]))  # nothing scored, nothing to refuse
    assert list(unscored["n"]) == [0, 0] and list(unscored["n_missing"]) == [2, 2]
    # no rate and no interval, as numbers (NaN) like every other rate's
    assert all(unscored[c].dtype == np.float64 and unscored[c].isna().all() for c in ("rate", "ci_low", "ci_high"))
