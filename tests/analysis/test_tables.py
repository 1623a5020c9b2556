"""Joining, strata, sites, error rates, correlations and ReXVal alignment."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from support.paths import shared_path
from rexrank.analysis.alignment import (
    CANDIDATE_COLUMNS,
    ERRORS_FILE,
    human_alignment,
    kendall_tau_b,
    read_rexval,
)
from rexrank.analysis.correlation import metric_correlation
from rexrank.analysis.error_rates import error_rates
from rexrank.analysis.io import AnalysisError, join_runs, load_runs, parse_run_spec, read_system_table
from rexrank.analysis.sites import rank_matrix, site_ranking, top_sites
from rexrank.analysis.strata import normal_abnormal, stratum_labels, summary_table
from support.analysis_files import write_rexval


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


# --- ReXVal ----------------------------------------------------------------------------

def test_read_rexval_aggregates_like_the_official_notebook(tmp_path):
    counts = write_rexval(tmp_path, n_studies=20)
    pairs = read_rexval(tmp_path)
    assert len(pairs) == 80
    # mean over the 6 raters, summed over the 6 categories, per significance
    sig = counts[..., 0].mean(axis=3).sum(axis=2)
    insig = counts[..., 1].mean(axis=3).sum(axis=2)
    row = pairs[(pairs.study_number == 7) & (pairs.candidate_type == "s_emb")].iloc[0]
    c = CANDIDATE_COLUMNS.index("s_emb")
    assert row["significant_errors"] == pytest.approx(sig[7, c])
    assert row["insignificant_errors"] == pytest.approx(insig[7, c])
    assert row["total_errors"] == pytest.approx(sig[7, c] + insig[7, c])
    assert row["candidate"] == "s_emb candidate 7 ." and row["study_id"] == "50000007" and row["pair_id"] == "7_s_emb"


def test_read_rexval_schema_errors(tmp_path):
    write_rexval(tmp_path, n_studies=3)
    errors = pd.read_csv(tmp_path / ERRORS_FILE)
    errors.drop(columns="rater_index").to_csv(tmp_path / ERRORS_FILE, index=False)
    with pytest.raises(AnalysisError, match=r"missing columns \['rater_index'\]"):
        read_rexval(tmp_path)
    errors.assign(candidate_type="gpt").to_csv(tmp_path / ERRORS_FILE, index=False)
    with pytest.raises(AnalysisError, match="unknown candidate_type"):
        read_rexval(tmp_path)


def test_known_tau_b():
    # 6 pairs: 5 concordant, 1 discordant, no ties -> (5 - 1) / 6
    assert kendall_tau_b([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)
    # with ties: tau_b = (C - D) / sqrt((n0 - n1)(n0 - n2)); x ties (1,2), y ties (3,4)
    # pairs: (1,2) x-tie; (3,4) y-tie; others: C = 4, D = 0 -> 4 / sqrt(5 * 5)
    assert kendall_tau_b([1, 1, 2, 3], [1, 2, 3, 3]) == pytest.approx(4 / 5)


def test_human_alignment_tau_b_vs_scipy(tmp_path):
    write_rexval(tmp_path)
    pairs = read_rexval(tmp_path)
    rng = np.random.default_rng(1)
    errors = pairs["total_errors"].to_numpy()
    scores = pd.DataFrame({
        "id": pairs["pair_id"],
        "bleu2": -errors + rng.normal(0, 0.3, len(pairs)),  # higher = better: aligned
        "radcliq_v1": errors + rng.normal(0, 3, len(pairs)),  # lower = better, weakly aligned
        "noise": rng.normal(size=len(pairs)),
    }).sample(frac=1, random_state=0)  # order must not matter
    table = human_alignment(pairs, scores, resamples=300, seed=0).set_index("metric")
    by_id = scores.set_index("id").loc[pairs["pair_id"]]
    assert table.loc["bleu2", "tau_b"] == pytest.approx(sps.kendalltau(-by_id["bleu2"], errors).statistic)
    assert table.loc["radcliq_v1", "tau_b"] == pytest.approx(sps.kendalltau(by_id["radcliq_v1"], errors).statistic)
    assert table.loc["bleu2", "tau_b"] > 0.5 and table.loc["radcliq_v1", "tau_b"] > 0
    for m in table.index:
        assert table.loc[m, "ci_low"] <= table.loc[m, "tau_b"] <= table.loc[m, "ci_high"]
    assert table.loc["noise", "ci_low"] < 0 < table.loc["noise", "ci_high"]
    assert table["n"].eq(200).all()
    with pytest.raises(AnalysisError, match="do not match the pairs"):
        human_alignment(pairs, scores.iloc[1:], resamples=0)


# --- ReXVal by hand (issue 40: what the mutation tool found unpinned) --------------------

def _rexval_files(directory, error_rows, n_studies=2):
    from rexrank.analysis.alignment import CANDIDATES_FILE

    pd.DataFrame({"study_id": [101 + i for i in range(n_studies)], "gt_report": [f"ref{i}" for i in range(n_studies)],
                  "radgraph": [f"c{i}r" for i in range(n_studies)], "bertscore": [None] * n_studies,
                  "s_emb": [f"c{i}s" for i in range(n_studies)], "bleu": [f"c{i}b" for i in range(n_studies)]}
                 ).to_csv(directory / CANDIDATES_FILE, index=False)
    pd.DataFrame(error_rows, columns=["study_number", "candidate_type", "error_category", "rater_index",
                                      "clinically_significant", "num_errors"]).to_csv(directory / ERRORS_FILE, index=False)


RATED = [(0, "radgraph", 1, 1, "True", 2), (0, "radgraph", 1, 2, " true", 4),  # category 1: mean 3
         (0, "radgraph", 2, 1, "1", 1),  # category 2: one rater, 1
         (0, "radgraph", 1, 1, "FALSE", 1), (0, "radgraph", 1, 2, "0", 0),  # insignificant: mean 0.5
         (1, "bleu", 1, 3, "false", 2), (0, "bertscore", 1, 1, "False", 0)]


def test_read_rexval_means_over_raters_then_sums_over_categories_by_hand(tmp_path):
    _rexval_files(tmp_path, RATED)
    pairs = read_rexval(tmp_path)
    assert pairs.to_dict("records") == [
        {"pair_id": "0_bertscore", "study_number": 0, "study_id": "101", "candidate_type": "bertscore", "candidate": "",
         "reference": "ref0", "significant_errors": 0.0, "insignificant_errors": 0.0, "total_errors": 0.0, "n_raters": 1},
        {"pair_id": "0_radgraph", "study_number": 0, "study_id": "101", "candidate_type": "radgraph", "candidate": "c0r",
         "reference": "ref0", "significant_errors": 4.0, "insignificant_errors": 0.5, "total_errors": 4.5, "n_raters": 2},
        {"pair_id": "1_bleu", "study_number": 1, "study_id": "102", "candidate_type": "bleu", "candidate": "c1b",
         "reference": "ref1", "significant_errors": 0.0, "insignificant_errors": 2.0, "total_errors": 2.0, "n_raters": 1}]


def test_read_rexval_refuses_files_that_are_not_rexvals_saying_what_is_wrong(tmp_path):
    from rexrank.analysis.alignment import CANDIDATES_FILE

    with pytest.raises(AnalysisError) as err:
        read_rexval(tmp_path)
    assert str(err.value) == (f"ReXVal file {tmp_path / CANDIDATES_FILE} does not exist (download it from PhysioNet "
                              "rexval-dataset 1.0.0)")
    errors_path = tmp_path / ERRORS_FILE
    for rows, message in (
            ([(0, "bleu", 1, 1, "maybe", 1), (0, "bleu", 1, 2, "yes", 1), (0, "bleu", 1, 3, "maybe", 1)],
             f"{errors_path}: clinically_significant values must be True/False, got ['maybe', 'yes']"),
            ([(2, "bleu", 1, 1, True, 1)], f"{errors_path}: study_number [2] not in {tmp_path / CANDIDATES_FILE} (rows 0–1)"),
            ([(0, "bleu", 1, 1, True, -1)], f"{errors_path}: num_errors must be non-negative numbers"),
            ([(0, "bleu", 1, 1, True, None)], f"{errors_path}: num_errors must be non-negative numbers"),
            ([(0, "bleu", 1, 1, True, 1)] * 3, f"{errors_path}: 2 duplicate rows for the same rater/category/significance")):
        _rexval_files(tmp_path, rows)
        with pytest.raises(AnalysisError) as err:
            read_rexval(tmp_path)
        assert str(err.value) == message
    pd.DataFrame({"study_id": [1], "gt_report": ["r"], "radgraph": ["a"], "bertscore": ["b"], "s_emb": ["c"]}).to_csv(
        tmp_path / CANDIDATES_FILE, index=False)
    with pytest.raises(AnalysisError) as err:
        read_rexval(tmp_path)
    assert str(err.value) == (f"{tmp_path / CANDIDATES_FILE}: not the ReXVal schema, missing columns ['bleu'] (has "
                              "['study_id', 'gt_report', 'radgraph', 'bertscore', 's_emb'])")


def test_human_alignment_by_hand_on_five_pairs():
    """Badness (-score for a higher-is-better metric, the score otherwise) against the
    errors: five pairs in the same order are tau_b = 1 with scipy's exact p = 2 / 5! = 1/60;
    a missing score leaves its pair out; non-numeric and bool columns are no scores."""
    pairs = pd.DataFrame({"pair_id": [f"p{i}" for i in range(5)], "total_errors": [0.0, 1, 2, 3, 4],
                          "significant_errors": [4.0, 3, 2, 1, 0]})
    scores = pd.DataFrame({"id": [f"p{i}" for i in range(4, -1, -1)],  # order does not matter
                           "bleu2": [1.0, 2, 3, 4, 5], "radcliq_v1": [4.0, 3, 2, 1, 0], "mine": [4.0, 3, 2, 1, 0],
                           "gappy": [1.0, 2, 3, np.nan, 5], "flag": [True] * 5, "name": list("abcde")})
    table = human_alignment(pairs, scores, resamples=0, seed=7, lower_is_better=("mine",)).set_index("metric")
    assert list(table.index) == ["bleu2", "radcliq_v1", "mine", "gappy"]
    assert table["tau_b"].tolist() == pytest.approx([1.0, 1.0, 1.0, 1.0])
    assert table.loc["bleu2", "p_value"] == pytest.approx(1 / 60)
    assert table.loc["gappy", ["n", "n_missing"]].tolist() == [4, 1] and table.loc["bleu2", "n_missing"] == 0
    assert table["ci_low"].isna().all() and table["ci_high"].isna().all()  # no resamples: no interval
    assert (table["target"] == "total_errors").all() and (table["resamples"] == 0).all() and (table["seed"] == 7).all()
    by_default = human_alignment(pairs, scores[["id", "mine"]], resamples=0)  # higher is better by default
    assert by_default.loc[0, "tau_b"] == pytest.approx(-1.0)
    significant = human_alignment(pairs, scores[["id", "bleu2"]], target="significant_errors", resamples=0)
    assert significant.loc[0, "tau_b"] == pytest.approx(-1.0) and significant.loc[0, "target"] == "significant_errors"


def test_human_alignments_interval_is_the_seeded_percentile_bootstrap_over_pairs():
    """The definition (module docstring): resample the pairs with numpy's default_rng(seed),
    tau_b of each resample (a resample of one distinct pair has none and is dropped), and
    the (1 - level) / 2 and (1 + level) / 2 quantiles."""
    from scipy.stats import kendalltau

    pairs = pd.DataFrame({"pair_id": [f"p{i}" for i in range(6)], "total_errors": [0.0, 2, 1, 3, 5, 4]})
    scores = pd.DataFrame({"id": pairs["pair_id"], "radcliq_v1": [0.0, 1, 2, 3, 4, 5]})
    table = human_alignment(pairs, scores, resamples=40, seed=3, level=0.8)
    idx = np.random.default_rng(3).integers(0, 6, size=(40, 6))
    badness, errors = scores["radcliq_v1"].to_numpy(), pairs["total_errors"].to_numpy()
    taus = np.array([kendalltau(badness[i], errors[i], variant="b").statistic for i in idx])
    low, high = np.quantile(taus[~np.isnan(taus)], [0.1, 0.9])
    assert table.loc[0, "ci_low"] == pytest.approx(low) and table.loc[0, "ci_high"] == pytest.approx(high)
    assert low < high and table.loc[0, "resamples"] == 40


def test_human_alignment_says_what_it_needs():
    pairs = pd.DataFrame({"pair_id": ["p0", "p1"], "total_errors": [0.0, 1]})
    for kwargs, scores, message in (
            ({"target": "errors"}, pd.DataFrame({"id": ["p0", "p1"], "x": [1.0, 2]}),
             "unknown ReXVal target 'errors'; use one of total_errors, significant_errors, insignificant_errors"),
            ({}, pd.DataFrame({"pair": ["p0", "p1"], "x": [1.0, 2]}),
             "ReXVal scores need an `id` column holding pair ids like '0_bleu'"),
            ({}, pd.DataFrame({"id": ["p0", "q"], "x": [1.0, 2]}),
             "ReXVal scores do not match the pairs: missing ['p1'] (1), unknown ['q'] (1)"),
            ({}, pd.DataFrame({"id": ["p0", "p1"], "x": ["a", "b"]}), "ReXVal scores have no numeric score column")):
        with pytest.raises(AnalysisError) as err:
            human_alignment(pairs, scores, resamples=0, **kwargs)
        assert str(err.value) == message
