"""Joining, strata, sites, error rates and correlations (ReXVal alignment: test_alignment.py)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from support.paths import shared_path
from rexrank.analysis.correlation import metric_correlation
from rexrank.analysis.error_rates import error_rates
from rexrank.analysis.io import AnalysisError, join_runs, load_runs, parse_run_spec, read_system_table
from rexrank.analysis.sites import rank_matrix, site_ranking, top_sites
from rexrank.analysis.strata import normal_abnormal, stratum_labels, summary_table


def make_tables(n=60, systems=("a", "b", "c"), seed=0):
    rng = np.random.default_rng(seed)
    ids = [f"s{i:03d}" for i in range(n)]
    return {
        s: pd.DataFrame({"id": ids, "bleu2": rng.uniform(0, 1, n) + 0.1 * k, "radcliq_v1": rng.normal(1 - 0.2 * k, 0.3, n),
                         "fineradscore": rng.integers(0, 5, n).astype(float)})
        for k, s in enumerate(systems)
    }


# --- io -------------------------------------------------------------------------------

def test_join_aligns_on_id_regardless_of_row_order():
    tables = make_tables()
    shuffled = tables["b"].sample(frac=1, random_state=0)
    runs = join_runs({"a": tables["a"], "b": shuffled})
    assert runs.systems == ["a", "b"] and runs.metrics == ["bleu2", "radcliq_v1", "fineradscore"]
    expected = tables["b"].set_index("id").loc["s007", "bleu2"]
    assert runs.matrix("bleu2").loc["s007", "b"] == expected


def test_mismatched_studies_name_the_difference():
    tables = make_tables()
    tables["b"] = tables["b"][tables["b"]["id"] != "s005"]
    tables["b"].loc[len(tables["b"]) + 100] = ["zz9", 0.1, 1.0, 0.0]
    with pytest.raises(AnalysisError, match=r"1 studies only in b \(e.g. \['zz9'\]\).*1 studies only in a \(e.g. \['s005'\]\)"):
        join_runs(tables)


def test_input_errors_are_clear(tmp_path):
    t = make_tables()["a"]
    with pytest.raises(AnalysisError, match="no `id` column"):
        join_runs({"a": t.drop(columns="id")})
    with pytest.raises(AnalysisError, match="duplicate study ids"):
        join_runs({"a": pd.concat([t, t.iloc[:1]])})
    path = tmp_path / "x.parquet"
    t.to_parquet(path)
    with pytest.raises(AnalysisError, match="given twice"):
        load_runs([str(path), f"x={path}"])
    with pytest.raises(AnalysisError, match="does not exist"):
        load_runs([str(tmp_path / "nope.parquet")])


def test_non_shared_and_non_numeric_columns_are_noted():
    tables = make_tables()
    tables["a"]["green"] = 0.5
    tables["b"]["label"] = "x"
    runs = join_runs(tables)
    assert "green" not in runs.metrics and "label" not in runs.metrics
    assert any("'label' is not numeric" in n for n in runs.notes)
    assert any("['green'] are not in every run" in n for n in runs.notes)


def test_run_spec_parsing(tmp_path):
    assert parse_run_spec("mine=/x/y.parquet") == ("mine", __import__("pathlib").Path("/x/y.parquet"))
    assert parse_run_spec("/x/model_a.parquet")[0] == "model_a"
    odd = tmp_path / "a=b.parquet"
    odd.write_bytes(b"")
    assert parse_run_spec(str(odd)) == ("a=b", odd)


# --- strata ----------------------------------------------------------------------------

def test_summary_table_per_stratum_matches_groupby():
    runs = join_runs(make_tables())
    attrs = pd.DataFrame({"sex": ["F", "M", None] * 20}, index=runs.ids)
    labels = stratum_labels(attrs, "sex")
    table = summary_table(runs, strata=labels, resamples=100, seed=0)
    wide = runs.matrix("bleu2").join(labels)
    oracle = wide.groupby("sex")["b"].agg(["mean", "count", "sem"])
    for stratum in ("F", "M", "(missing)"):
        row = table[(table.stratum == stratum) & (table.metric == "bleu2") & (table.system == "b")].iloc[0]
        assert row["n"] == oracle.loc[stratum, "count"] == 20
        assert row["mean"] == pytest.approx(oracle.loc[stratum, "mean"])
        assert row["ci95"] == pytest.approx(1.96 * oracle.loc[stratum, "sem"])
        assert row["boot_low"] < row["mean"] < row["boot_high"]
        assert 1 <= row["rank_low"] <= row["rank"] <= row["rank_high"] <= 3


def test_summary_counts_missing_scores():
    tables = make_tables()
    tables["a"].loc[3, "bleu2"] = np.nan
    runs = join_runs(tables)
    table = summary_table(runs, resamples=50)
    row = table[(table.metric == "bleu2") & (table.system == "a")].iloc[0]
    # n_ranked: the systems the rank is among (issue 31), not the studies
    assert row["n"] == 59 and row["n_missing"] == 1 and row["n_ranked"] == len(runs.systems)


def test_normal_abnormal_from_label_and_from_labeller(monkeypatch):
    ids = pd.Index(["x", "y", "z"])
    attrs = pd.DataFrame({"is_abnormal": [True, False, "true"]}, index=ids)
    series, how = normal_abnormal(attrs)
    assert series.tolist() == ["abnormal", "normal", "abnormal"] and "is_abnormal" in how
    refs = pd.Series(["No acute findings.", "Large effusion.", "Normal chest."], index=ids)
    calls = []

    def labeller(texts):
        calls.append(list(texts))
        return ["effusion" not in t.lower() for t in texts]

    series, how = normal_abnormal(pd.DataFrame(index=ids), refs, labeller=labeller)
    assert series.tolist() == ["normal", "abnormal", "normal"] and "CheXbert" in how and calls == [refs.tolist()]
    with pytest.raises(AnalysisError, match="cannot read"):
        normal_abnormal(pd.DataFrame({"is_abnormal": ["maybe", "no", "yes"]}, index=ids))


def test_default_labeller_reads_chexbert_no_finding_head(monkeypatch):
    import rexrank.models.chexbert as chexbert_model

    ids = pd.Index(["x", "y"])
    refs = pd.Series(["Lungs clear.", "Effusion."], index=ids)
    made = {}

    class FakeCheXbert:  # stands in for the checkpoint, which tests cannot download
        def __init__(self, **options):
            made.update(options)

        def encode(self, texts, *, progress=False):
            nf = chexbert_model.CONDITIONS.index("No Finding")
            out = []
            for t in texts:
                labels = np.zeros(14, dtype=np.int8)
                labels[nf] = 1 if "clear" in t else 0  # 1 = positive, 0 = blank
                out.append((np.zeros(4, dtype=np.float32), labels))
            return out

    monkeypatch.setattr(chexbert_model, "CheXbert", FakeCheXbert)
    from rexrank.analysis.strata import chexbert_no_finding_labeller

    series, how = normal_abnormal(None, refs, labeller=chexbert_no_finding_labeller(checkpoint_path="/x/chexbert.pth"))
    assert series.tolist() == ["normal", "abnormal"] and made["checkpoint_path"] == "/x/chexbert.pth"
    monkeypatch.setitem(__import__("sys").modules, "rexrank.models.chexbert", None)  # labeller unavailable
    with pytest.raises(AnalysisError, match="is_abnormal"):
        normal_abnormal(pd.DataFrame(index=ids), refs)


# --- sites -----------------------------------------------------------------------------

def test_site_ranking_top_n_and_ranks():
    runs = join_runs(make_tables(n=90))
    sites = pd.Series(["p"] * 40 + ["q"] * 30 + ["r"] * 12 + ["s"] * 8, index=runs.ids)
    assert top_sites(sites, 2) == ["p", "q"]
    table = site_ranking(runs, sites, "radcliq_v1", top_n=3, resamples=100)
    assert list(dict.fromkeys(table.site)) == ["all", "p", "q", "r"]
    ids = sites.index[sites == "q"]
    means = runs.matrix("radcliq_v1").loc[ids].mean()
    expected = means.rank(method="min").astype(int)  # radcliq: lower is better
    got = table[table.site == "q"].set_index("system")["rank"]
    assert got.to_dict() == expected.to_dict()
    assert table[table.site == "q"]["n"].iloc[0] == 30
    matrix = rank_matrix(table)
    assert list(matrix.columns) == ["all", "p", "q", "r"] and matrix["all"].tolist() == [1, 2, 3]


# --- error rates -----------------------------------------------------------------------

def test_error_rates_counts_and_wilson_interval():
    runs = join_runs(make_tables())
    table = error_rates(runs).set_index(["system", "measure"])
    sev = runs.matrix("fineradscore")["b"].to_numpy()
    for measure, threshold in (("no actionable error", 1), ("no significant error", 2)):
        row = table.loc[("b", measure)]
        k, n = int((sev <= threshold).sum()), sev.size
        assert (row["k"], row["n"]) == (k, n)
        # Wilson score interval, closed form
        z, p = sps.norm.ppf(0.975), k / n
        centre = (p + z**2 / (2 * n)) / (1 + z**2 / n)
        half = z / (1 + z**2 / n) * np.sqrt(p * (1 - p) / n + z**2 / (4 * n**2))
        assert row["ci_low"] == pytest.approx(centre - half) and row["ci_high"] == pytest.approx(centre + half)


def test_error_rates_reject_non_severity_column():
    runs = join_runs(make_tables())
    with pytest.raises(AnalysisError, match="maximum FineRadScore severities"):
        error_rates(runs, column="bleu2")


# --- correlations ----------------------------------------------------------------------

def test_metric_correlation_matches_scipy():
    table = pd.DataFrame({"bleu2": [0.1, 0.2, 0.25, 0.3, 0.28], "green": [0.3, 0.5, 0.4, 0.6, 0.6],
                          "radgraph": [0.2, 0.1, 0.3, 0.35, 0.3]}, index=list("abcde"))
    pearson = metric_correlation(table, "pearson")
    kendall = metric_correlation(table, "kendall")
    assert pearson.loc["bleu2", "green"] == pytest.approx(sps.pearsonr(table.bleu2, table.green).statistic)
    assert kendall.loc["green", "radgraph"] == pytest.approx(sps.kendalltau(table.green, table.radgraph).statistic)
    with pytest.raises(AnalysisError, match="at least 3 systems"):
        metric_correlation(table.iloc[:2])


def test_metric_correlations_by_hand_over_systems_having_both_metrics():
    """Pearson, Kendall's tau and Spearman of three systems, by hand: a = 1, 2, 3 against
    b = 3, 1, 2 is one concordant pair and two discordant (tau = -1/3), rank differences
    -2, 1, 1 (rho = 1 - 6 x 6 / (3 x 8) = -0.5); against c = 2, 1, 3 Pearson is
    cov 1 / sqrt(2 x 2) = 0.5. A system lacking a metric leaves only that metric's cells."""
    table = pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0], "b": [3.0, 1.0, 2.0, np.nan], "c": [2.0, 1.0, 3.0, np.nan],
                          "name": ["w", "x", "y", "z"]}, index=list("wxyz"))
    assert metric_correlation(table, "kendall").loc["a", "b"] == pytest.approx(-1 / 3)
    assert metric_correlation(table, "spearman").loc["a", "b"] == pytest.approx(-0.5)
    pearson = metric_correlation(table)  # Pearson by default; the text column is no metric
    assert list(pearson.columns) == ["a", "b", "c"] and pearson.loc["a", "c"] == pytest.approx(0.5)
    assert np.isnan(metric_correlation(table, min_systems=4).loc["a", "c"])  # 3 systems have both
    assert metric_correlation(table.iloc[:3])["a"].notna().all()  # 3 systems: enough by default


def test_metric_correlation_says_what_it_needs():
    table = pd.DataFrame({"a": [1.0, 2.0, 3.0], "b": [3.0, 1.0, 2.0]})
    with pytest.raises(AnalysisError) as err:
        metric_correlation(table, "cosine")
    assert str(err.value) == "unknown correlation method 'cosine'; use one of pearson, kendall, spearman"
    with pytest.raises(AnalysisError) as err:
        metric_correlation(table[["a"]])
    assert str(err.value) == "need at least two metrics to correlate, got ['a']"
    with pytest.raises(AnalysisError) as err:
        metric_correlation(table, min_systems=4)
    assert str(err.value) == "need at least 4 systems to correlate metrics across systems, got 3"


def test_published_table_reads_as_system_table():
    path = shared_path("data", "published", "current", "findings_result_iu_xray.csv")
    table = read_system_table(path)
    assert list(table.columns) == ["bleu2", "bertscore", "sembscore", "radgraph", "radcliq_v1_inv", "ratescore",
                                   "green", "fineradscore_inv"]
    assert len(table) == len(pd.read_csv(path))
    corr = metric_correlation(table, "kendall")
    assert corr.shape == (8, 8) and np.allclose(np.diag(corr), 1)

