"""ReXVal alignment (rexrank.analysis.alignment): the official notebook's aggregation of the
radiologists' error counts, Kendall tau-b against them, and its bootstrap interval."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from rexrank.analysis.alignment import (
    CANDIDATE_COLUMNS,
    CANDIDATES_FILE,
    ERRORS_FILE,
    human_alignment,
    kendall_tau_b,
    read_rexval,
    score_rexval,
)
from rexrank.analysis.io import AnalysisError
from support.analysis_files import write_rexval


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


# --- what a second mutation run found unpinned (issue 40) ----------------------------------

def test_a_significance_no_rater_used_counts_zero_errors(tmp_path):
    """The unstacked table has no column for a significance absent from the whole file: its
    errors are 0, not missing, and the total is the other significance alone."""
    for significant, present, absent in ((True, "significant_errors", "insignificant_errors"),
                                         (False, "insignificant_errors", "significant_errors")):
        _rexval_files(tmp_path, [(0, "bleu", 1, 1, significant, 2), (0, "bleu", 1, 2, significant, 1),
                                 (1, "s_emb", 2, 1, significant, 3)])
        pairs = read_rexval(tmp_path).set_index("pair_id")
        assert pairs[present].tolist() == [1.5, 3.0]
        assert pairs[absent].tolist() == [0.0, 0.0] and pairs["total_errors"].tolist() == [1.5, 3.0]


def test_a_rater_counted_twice_for_one_category_is_refused_even_with_other_numbers(tmp_path):
    _rexval_files(tmp_path, [(0, "bleu", 1, 1, True, 1), (0, "bleu", 1, 1, True, 3), (0, "bleu", 1, 1, False, 3)])
    with pytest.raises(AnalysisError) as err:
        read_rexval(tmp_path)
    assert str(err.value) == f"{tmp_path / ERRORS_FILE}: 1 duplicate rows for the same rater/category/significance"


def test_refusals_name_at_most_five_values(tmp_path):
    errors_path = tmp_path / ERRORS_FILE
    _rexval_files(tmp_path, [(0, "bleu", 1, 1, word, 1) for word in ("a", "b", "c", "d", "e", "f")])
    with pytest.raises(AnalysisError) as err:
        read_rexval(tmp_path)
    assert str(err.value) == (f"{errors_path}: clinically_significant values must be True/False, "
                              "got ['a', 'b', 'c', 'd', 'e']")
    _rexval_files(tmp_path, [(study, "bleu", 1, 1, True, 1) for study in range(2, 8)])
    with pytest.raises(AnalysisError) as err:
        read_rexval(tmp_path)
    assert str(err.value) == f"{errors_path}: study_number [2, 3, 4, 5, 6] not in {tmp_path / CANDIDATES_FILE} (rows 0–1)"
    pairs = pd.DataFrame({"pair_id": [f"p{i}" for i in range(6)], "total_errors": [0.0, 1, 2, 3, 4, 5]})
    scores = pd.DataFrame({"id": [f"q{i}" for i in range(6)], "x": [1.0] * 6})
    with pytest.raises(AnalysisError) as err:
        human_alignment(pairs, scores, resamples=0)
    assert str(err.value) == ("ReXVal scores do not match the pairs: missing ['p0', 'p1', 'p2', 'p3', 'p4'] (6), "
                              "unknown ['q0', 'q1', 'q2', 'q3', 'q4'] (6)")


def test_human_alignment_defaults_to_1000_resamples_seeded_0_and_reads_past_a_text_column():
    pairs = pd.DataFrame({"pair_id": [f"p{i}" for i in range(6)], "total_errors": [0.0, 2, 1, 3, 5, 4]})
    scores = pd.DataFrame({"id": pairs["pair_id"], "note": list("abcdef"), "radcliq_v1": [0.0, 1, 2, 3, 4, 5]})
    table = human_alignment(pairs, scores)
    assert table["metric"].tolist() == ["radcliq_v1"]
    assert (table.loc[0, "resamples"], table.loc[0, "seed"]) == (1000, 0)
    explicit = human_alignment(pairs, scores, resamples=1000, seed=0)
    assert table[["ci_low", "ci_high"]].equals(explicit[["ci_low", "ci_high"]])


def test_score_rexval_scores_each_pair_and_says_which_candidates_were_empty(tmp_path, capsys):
    """Each (candidate, reference) pair is a study of a run on the test set "rexval"; its id is
    the pair id, and an empty candidate (ReXVal leaves a few blank) is reported by id."""
    reference = "the heart is normal in size . the lungs are clear ."
    pd.DataFrame({"study_id": [7], "gt_report": [reference], "radgraph": [reference], "bertscore": [None],
                  "s_emb": ["pleural effusion on the left"], "bleu": [reference]}).to_csv(tmp_path / CANDIDATES_FILE,
                                                                                        index=False)
    pd.DataFrame([(0, kind, 1, 1, True, 0) for kind in CANDIDATE_COLUMNS],
                 columns=["study_number", "candidate_type", "error_category", "rater_index", "clinically_significant",
                          "num_errors"]).to_csv(tmp_path / ERRORS_FILE, index=False)
    pairs = read_rexval(tmp_path)
    run = score_rexval(pairs, "rouge")
    assert "scoring" in capsys.readouterr().err  # the run's bar, unless told otherwise
    assert set(run.per_study.columns) == {"id", "rouge", "rougeL", "rouge1", "rouge2"}  # the metric asked for
    scores = run.per_study.set_index("id")["rouge"]
    assert list(scores.index) == ["0_bertscore", "0_bleu", "0_radgraph", "0_s_emb"]
    assert scores[["0_bleu", "0_radgraph"]].tolist() == pytest.approx([1.0, 1.0])
    assert scores["0_s_emb"] < 0.2
    score_rexval(pairs, "rouge", progress=False)
    assert "scoring" not in capsys.readouterr().err
    header = run.results
    assert header["test_set"]["name"] == "rexval" and header["complete"]
    assert {k: header["predictions"][k] for k in ("source", "n", "n_empty", "empty_ids")} == {
        "source": "ReXVal candidates", "n": 4, "n_empty": 1, "empty_ids": ["0_bertscore"]}
