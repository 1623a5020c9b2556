"""Strata (normal vs abnormal, any study attribute) and the summary table per stratum, its
means and intervals by hand and its bootstrap figures by their definition."""
from __future__ import annotations

import math
import sys

import numpy as np
import pandas as pd
import pytest
from scipy.stats import rankdata

from rexrank.analysis.io import AnalysisError, join_runs
from rexrank.analysis.strata import chexbert_no_finding_labeller, normal_abnormal, stratum_labels, summary_table
from rexrank.analysis.uncertainty import bootstrap_means

NAN = math.nan
Z = 1.96  # the papers' normal interval: mean ± 1.96 × SD / √n


# ---- normal vs abnormal ------------------------------------------------------------------

def test_is_abnormal_is_read_in_each_spelling_of_true_and_false():
    spellings = [True, False, np.bool_(True), 1, 0, np.int64(0), " Yes ", "NO", "1", "0", "TRUE", "false"]
    ids = pd.Index([f"s{i}" for i in range(len(spellings))], name="id")
    series, how = normal_abnormal(pd.DataFrame({"is_abnormal": pd.Series(spellings, index=ids, dtype=object)}))
    assert series.tolist() == ["abnormal", "normal", "abnormal", "abnormal", "normal", "normal",
                               "abnormal", "normal", "abnormal", "normal", "abnormal", "normal"]
    assert series.name == "normal_abnormal" and series.index.equals(ids)
    assert how == "test set label `is_abnormal`"


@pytest.mark.parametrize("value, shown", [(2, "2"), (np.int64(-1), "np.int64(-1)"), (1.0, "1.0"), ("maybe", "'maybe'"),
                                          ("", "''")])
def test_an_is_abnormal_that_is_no_true_or_false_is_refused_with_its_value(value, shown):
    attrs = pd.DataFrame({"is_abnormal": pd.Series([True, value], index=["x", "y"], dtype=object)})
    with pytest.raises(AnalysisError) as refused:
        normal_abnormal(attrs)
    assert str(refused.value) == f"is_abnormal: cannot read {shown} as true/false"


def test_a_missing_is_abnormal_is_refused_with_the_count_and_five_studies():
    flags = [True, None, False, None, None, None, None, None]  # 6 missing: s1 and s3-s7
    attrs = pd.DataFrame({"is_abnormal": flags}, index=[f"s{i}" for i in range(8)])
    with pytest.raises(AnalysisError) as refused:
        normal_abnormal(attrs, pd.Series(["clear"] * 8, index=attrs.index), labeller=lambda texts: [True] * len(texts))
    assert str(refused.value) == "is_abnormal is missing for 6 studies (e.g. ['s1', 's3', 's4', 's5', 's6'])"


def test_without_the_label_the_labellers_no_finding_says_normal():
    ids = pd.Index(["x", "y", "z", "w"], name="id")
    references = pd.Series(["Lungs clear.", None, 7, "Effusion."], index=ids)
    seen = []

    def labeller(texts):
        seen.append(texts)
        return [1, np.bool_(False), "", True]  # what a labeller returns is read as true or false

    series, how = normal_abnormal(pd.DataFrame({"sex": ["F"] * 4}, index=ids), references, labeller=labeller)
    assert seen == [["Lungs clear.", "", "7", "Effusion."]]  # a missing report is empty text, any other is text
    assert series.tolist() == ["normal", "abnormal", "abnormal", "normal"]
    assert series.name == "normal_abnormal" and series.index.equals(ids)
    assert how == 'derived from the reference report: CheXbert "No Finding" positive = normal (approximation)'
    assert normal_abnormal(None, references, labeller=labeller)[0].tolist() == series.tolist()


def test_normal_abnormal_refuses_without_reports_or_with_a_label_count_that_differs():
    with pytest.raises(AnalysisError, match=r"^normal vs abnormal: no `is_abnormal` attribute and no reference texts "
                                            r"to label$"):
        normal_abnormal(pd.DataFrame({"sex": ["F"]}), labeller=lambda texts: [True])
    references = pd.Series(["a", "b", "c"])
    with pytest.raises(AnalysisError, match=r"^labeller returned 2 labels for 3 reports$"):
        normal_abnormal(None, references, labeller=lambda texts: [True, False])


def test_the_default_labeller_is_chexberts_no_finding_head_positive(monkeypatch):
    import rexrank.models.chexbert as chexbert_model

    no_finding = chexbert_model.CONDITIONS.index("No Finding")
    made, calls = [], []

    class StandInCheXbert:  # the checkpoint cannot be downloaded in tests
        def __init__(self, **options):
            made.append(options)

        def encode(self, texts, *, progress=False):
            calls.append((texts, progress))
            out = []
            for head in (1, 0, 2, 3):  # CheXbert's classes: blank, positive, negative, uncertain
                labels = np.ones(len(chexbert_model.CONDITIONS), dtype=np.int8)  # every other condition positive
                labels[no_finding] = head
                out.append((np.zeros(4, dtype=np.float32), labels))
            return out

    monkeypatch.setattr(chexbert_model, "CheXbert", StandInCheXbert)
    labeller = chexbert_no_finding_labeller(checkpoint_path="/x/chexbert.pth", device="cpu")
    assert made == []  # the model loads on the first call, not before
    texts = ("a", "b", "c", "d")
    assert labeller(texts) == [True, False, False, False]  # only "positive" (class 1) is No Finding
    assert made == [{"checkpoint_path": "/x/chexbert.pth", "device": "cpu"}]
    assert calls == [(["a", "b", "c", "d"], True)]  # a list, with a progress bar
    series, _ = normal_abnormal(None, pd.Series(["a", "b", "c", "d"]))
    assert series.tolist() == ["normal", "abnormal", "abnormal", "abnormal"]


def test_without_the_model_package_the_labeller_says_how_to_get_a_label(monkeypatch):
    monkeypatch.setitem(sys.modules, "rexrank.models.chexbert", None)  # the import fails
    with pytest.raises(AnalysisError) as refused:
        chexbert_no_finding_labeller()(["Lungs clear."])
    message = str(refused.value)
    assert message.startswith("normal vs abnormal: the test set has no `is_abnormal` label and the CheXbert labeller "
                              "is not available (")
    assert "rexrank.models.chexbert" in message  # the import error's own words, in the brackets
    assert message.endswith("); install rexrank[models] or give an attributes CSV with an `is_abnormal` column")
    assert isinstance(refused.value.__cause__, ImportError)


# ---- strata of an attribute ----------------------------------------------------------------

def test_stratum_labels_are_text_with_missing_values_named():
    attrs = pd.DataFrame({"sex": ["F", None, "M"], "site": [3.0, NAN, 12.0], "age": [40, 50, 60]})
    assert stratum_labels(attrs, "sex").tolist() == ["F", "(missing)", "M"]
    assert stratum_labels(attrs, "site").tolist() == ["3.0", "(missing)", "12.0"]
    assert stratum_labels(attrs, "age").tolist() == ["40", "50", "60"]
    with pytest.raises(AnalysisError,
                       match=r"^no study attribute 'sexx' \(did you mean sex\?\); available: sex, site, age$"):
        stratum_labels(attrs, "sexx")
    with pytest.raises(AnalysisError, match=r"^no study attribute 'zzz'; available: sex, site, age$"):
        stratum_labels(attrs, "zzz")


# ---- the summary table --------------------------------------------------------------------

def _boot_interval(values, resamples, seed):
    """The percentile bootstrap interval: 2.5th and 97.5th percentiles of the resampled means
    (bootstrap_means being checked against scipy in test_uncertainty)."""
    return tuple(np.quantile(bootstrap_means(np.asarray(values, dtype=float), resamples=resamples, seed=seed)[:, 0],
                             [0.025, 0.975]))


def _rank_ranges(values: dict, resamples, seed, higher_is_better=True):
    """Each system's lowest and highest rank over the resamples (1 = best, ties share the best):
    with at most 40 resamples the 95 % interval's outer percentiles are the extremes."""
    means = bootstrap_means(np.column_stack(list(values.values())), resamples=resamples, seed=seed)
    ranks = rankdata(-means if higher_is_better else means, method="min", axis=1)
    return {s: (int(ranks[:, i].min()), int(ranks[:, i].max())) for i, s in enumerate(values)}


def _row(stratum, metric, system, values, *, boot=None, rank=None, ranks=None, n_ranked=2):
    kept = [v for v in values if not math.isnan(v)]
    n, mean = len(kept), sum(kept) / len(kept)
    half = Z * math.sqrt(sum((v - mean) ** 2 for v in kept) / (n - 1) / n) if n > 1 else NAN
    row = {"stratum": stratum, "metric": metric, "system": system, "n": n, "n_missing": len(values) - n, "mean": mean,
           "ci95": half, "ci_low": mean - half, "ci_high": mean + half,
           "boot_low": boot[0] if boot else None, "boot_high": boot[1] if boot else None}
    if rank is not None:
        row.update(rank=rank, rank_low=ranks[0], rank_high=ranks[1], n_ranked=n_ranked)
    return row


def _assert_table(got, rows):
    pd.testing.assert_frame_equal(got, pd.DataFrame(rows), check_dtype=False, rtol=1e-12)


def test_summary_per_stratum_with_normal_and_bootstrap_intervals_and_rank_ranges():
    ids = [f"s{i}" for i in range(6)]
    a, b = [1, 2, 3, 4, 6, 5], [0, 0, 4, 1, 1, 9]
    runs = join_runs({"a": pd.DataFrame({"id": ids, "m": a, "radcliq_v1": a}),
                      "b": pd.DataFrame({"id": ids, "m": b, "radcliq_v1": b})})
    # strata 2 (s0-s2), 1 (s3-s4), 3 (s5), given in another order and with a study not in the runs
    strata = pd.Series([3, 2, 2, 2, 1, 1, 3][::-1], index=(["zz"] + ids)[::-1])
    got = summary_table(runs, strata=strata, resamples=5, seed=1)
    # by hand: stratum 1, a 4 and 6: mean 5, SD √2, half-width 1.96; b 1 and 1: SD 0
    #          stratum 2, a 1, 2, 3: mean 2, SD 1; b 0, 0, 4: mean 4/3, SD 4/√3
    assert got.loc[0, ["mean", "ci95"]].tolist() == pytest.approx([5.0, Z])
    assert got.loc[5, ["mean", "ci95"]].tolist() == pytest.approx([4 / 3, Z * 4 / 3])
    rows = []
    for stratum, where in (("1", slice(3, 5)), ("2", slice(0, 3)), ("3", None)):
        for metric, higher in (("m", True), ("radcliq_v1", False)):
            if where is None:  # stratum 3 has one study: no SD, nothing to resample, nothing to rank
                rows += [_row("3", metric, "a", [5]), _row("3", metric, "b", [9])]
                continue
            scores = {"a": a[where], "b": b[where]}
            ranges = _rank_ranges(scores, 5, 1, higher)
            best = "a" if higher else "b"  # a has the higher mean in both strata
            rows += [_row(stratum, metric, s, scores[s], boot=_boot_interval(scores[s], 5, 1), rank=1 if s == best else 2,
                          ranks=ranges[s]) for s in ("a", "b")]
    _assert_table(got, rows)
    assert _rank_ranges({"a": a[0:3], "b": b[0:3]}, 5, 1) != _rank_ranges({"a": a[0:3], "b": b[0:3]}, 5, 0)  # seeded
    unsettled = got.loc[(got.stratum == "2") & (got.metric == "m"), ["rank_low", "rank_high"]]
    assert unsettled.values.tolist() == [[1, 2], [1, 2]]
    # the ranks are over the resamples asked for: seed 3's five never put b above a in stratum 2
    # (a thousand would, b's mean being above a's when 2 of the 3 studies drawn are s2)
    settled = summary_table(runs, strata=strata, resamples=5, seed=3)
    assert _rank_ranges({"a": a[0:3], "b": b[0:3]}, 5, 3) == {"a": (1, 1), "b": (2, 2)}
    assert settled.loc[(settled.stratum == "2") & (settled.metric == "m"), ["rank_low", "rank_high"]].values.tolist() == [
        [1, 1], [2, 2]]


def test_summary_with_unscored_studies_resamples_each_system_on_its_own_and_ranks_on_complete_ones():
    # stratum x: s0-s1, b unscored on s1; stratum y: s2-s5, b unscored on s2 and s3
    ids = [f"s{i}" for i in range(6)]
    a, b = [1, 3, 1, 2, 3, 4], [2, NAN, NAN, NAN, 5, 7]
    runs = join_runs({"a": pd.DataFrame({"id": ids, "m": a}), "b": pd.DataFrame({"id": ids, "m": b})})
    got = summary_table(runs, strata=pd.Series(["x", "x", "y", "y", "y", "y"], index=ids), resamples=7, seed=1)
    _assert_table(got, [
        # x: one complete study, nothing ranked; b's one score is not resampled
        _row("x", "m", "a", [1, 3], boot=_boot_interval([1, 3], 7, 1)), _row("x", "m", "b", [2, NAN]),
        # y: each system resampled on its own scores, ranked on the two complete studies (b above a in each)
        _row("y", "m", "a", [1, 2, 3, 4], boot=_boot_interval([1, 2, 3, 4], 7, 1), rank=2, ranks=(2, 2)),
        _row("y", "m", "b", [NAN, NAN, 5, 7], boot=_boot_interval([5, 7], 7, 1), rank=1, ranks=(1, 1))])
    assert got.loc[3, ["mean", "ci95", "n_missing"]].tolist() == pytest.approx([6.0, Z, 2])  # 5 and 7: SD √2


def test_summary_without_resamples_one_system_and_chosen_metrics():
    ids = ["s0", "s1", "s2"]
    runs = join_runs({"a": pd.DataFrame({"id": ids, "m": [1.0, 2.0, 6.0], "k": [0.0, 0.0, 3.0]}),
                      "b": pd.DataFrame({"id": ids, "m": [0.0, 2.0, 1.0], "k": [1.0, 1.0, 1.0]})})
    # no resamples: the normal interval only, no ranks
    _assert_table(summary_table(runs, resamples=0), [
        _row("all", "m", "a", [1, 2, 6]), _row("all", "m", "b", [0, 2, 1]),
        _row("all", "k", "a", [0, 0, 3]), _row("all", "k", "b", [1, 1, 1])])
    # the metrics asked for, in that order
    assert summary_table(runs, resamples=0, metrics=["k"])["metric"].tolist() == ["k", "k"]
    # one system: its intervals, and no rank among one
    alone = join_runs({"a": pd.DataFrame({"id": ids, "m": [1.0, 2.0, 6.0]})})
    _assert_table(summary_table(alone, resamples=4, seed=2),
                  [_row("all", "m", "a", [1, 2, 6], boot=_boot_interval([1, 2, 6], 4, 2))])
    # the defaults: 1,000 resamples, seed 0 (on 12 studies, whose intervals another seed moves)
    rng = np.random.default_rng(21)
    twelve = join_runs({s: pd.DataFrame({"id": [f"s{i:02d}" for i in range(12)], "m": rng.normal(0, 1, 12)}) for s in "ab"})
    default = summary_table(twelve)
    pd.testing.assert_frame_equal(default, summary_table(twelve, resamples=1000, seed=0))
    assert default.loc[0, "boot_low"] != summary_table(twelve, seed=1).loc[0, "boot_low"]
