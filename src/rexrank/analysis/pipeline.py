"""`analyze`: every table and figure for several systems scored on one test set."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd

from rexrank.analysis import figures as F
from rexrank.analysis.alignment import human_alignment, read_rexval, score_rexval
from rexrank.analysis.correlation import metric_correlation
from rexrank.analysis.error_rates import SEVERITY_COLUMN, error_rates
from rexrank.analysis.io import AnalysisError, RunSet, check_attributes
from rexrank.analysis.report import Analysis
from rexrank.analysis.sites import DEFAULT_TOP_N, site_ranking
from rexrank.analysis.strata import ABNORMAL_ATTRIBUTE, NoFindingLabeller, normal_abnormal, stratum_labels, summary_table
from rexrank.analysis.uncertainty import STATISTICAL_NOTES, complete_cases, pairwise_tests, rank_intervals
from rexrank.results_schema import metric_label

RANK_METRIC_PREFERENCE = ("radcliq_v1", "radcliq", "green", "ratescore", "bertscore", "bleu2")


def default_rank_metric(runs: RunSet) -> str:
    for metric in RANK_METRIC_PREFERENCE:
        if metric in runs.metrics:
            return metric
    return runs.metrics[0]


def analyze(
    runs: RunSet,
    *,
    attrs: pd.DataFrame | None = None,
    references: pd.Series | None = None,
    strata: Sequence[str] = (),
    normal_vs_abnormal: bool = False,
    labeller: NoFindingLabeller | None = None,
    site_column: str | None = None,
    top_n_sites: int = DEFAULT_TOP_N,
    site_metric: str | None = None,
    severity_column: str = SEVERITY_COLUMN,
    resamples: int = 1000,
    seed: int = 0,
    rexval_dir: str | Path | None = None,
    rexval_scores: pd.DataFrame | None = None,
    rexval_metrics: Sequence[str] | str | None = None,
    test_set: str | None = None,
    progress: bool = True,
) -> Analysis:
    """`test_set`: its name as shown (None: not known, and not claimed). `progress`: a bar over
    the steps (the ranks and paired tests of each metric take seconds each)."""
    ranks_per_metric = len(runs.systems) > 1 and resamples
    stratified = dict.fromkeys([*([ABNORMAL_ATTRIBUTE] if normal_vs_abnormal else []), *strata])
    steps = _Steps(progress, total=1 + bool(normal_vs_abnormal) + len(stratified) + (len(runs.metrics) if ranks_per_metric else 0)
                   + bool(site_column) + (severity_column in runs.metrics) + 1 + (rexval_dir is not None))
    try:
        return _analyze(runs, steps, attrs=attrs, references=references, strata=strata, normal_vs_abnormal=normal_vs_abnormal,
                        labeller=labeller, site_column=site_column, top_n_sites=top_n_sites, site_metric=site_metric,
                        severity_column=severity_column, resamples=resamples, seed=seed, rexval_dir=rexval_dir,
                        rexval_scores=rexval_scores, rexval_metrics=rexval_metrics, test_set=test_set, progress=progress)
    finally:
        steps.close()


class _Steps:
    """The analysis's progress bar, one step per table group (tqdm, on stderr)."""

    def __init__(self, shown: bool, total: int):
        from tqdm.auto import tqdm

        self.bar = tqdm(total=total, desc="analysis", unit="step", disable=not shown)

    def start(self, what: str) -> None:
        self.bar.set_postfix_str(what, refresh=True)

    def done(self) -> None:
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


def _analyze(runs: RunSet, steps: _Steps, *, attrs, references, strata, normal_vs_abnormal, labeller, site_column,
             top_n_sites, site_metric, severity_column, resamples, seed, rexval_dir, rexval_scores, rexval_metrics,
             test_set, progress) -> Analysis:
    where = f" on {test_set}" if test_set else ""
    analysis = Analysis(title=f"ReXrank analysis — {len(runs.systems)} systems{where} ({len(runs.ids)} studies)")
    analysis.notes += runs.notes
    analysis.statistical_notes = STATISTICAL_NOTES
    analysis.notes.append(f"bootstrap: {resamples} resamples, seed {seed}; per-study columns: {', '.join(runs.metrics)}")
    if attrs is not None:
        attrs = check_attributes(runs, attrs)

    # overall summary and one table per stratifying attribute
    steps.start("summary")
    analysis.tables["summary"] = summary_table(runs, resamples=resamples, seed=seed)
    steps.done()
    analysis.table_captions["summary"] = ("mean, normal 95 % CI (papers), bootstrap CI, rank and bootstrap rank interval; "
                                          "metric: the per-study column's key (as in file names), label: its name, as in the figures")
    labels: dict[str, pd.Series] = {}
    if normal_vs_abnormal:
        steps.start("normal vs abnormal")
        series, how = normal_abnormal(attrs, references.loc[runs.ids] if references is not None else None, labeller=labeller)
        labels[ABNORMAL_ATTRIBUTE] = series
        analysis.notes.append(f"normal vs abnormal: {how}")
        steps.done()
    for by in strata:
        if attrs is None:
            raise AnalysisError(f"stratifying by {by!r} needs study attributes (a test set or an attributes CSV)")
        labels[by] = stratum_labels(attrs, by)
    for by, series in labels.items():
        name = f"strata_{by}"
        steps.start(f"strata: {by}")
        analysis.tables[name] = summary_table(runs, strata=series, resamples=resamples, seed=seed)
        analysis.table_captions[name] = f"per {by} stratum"
        for metric in runs.metrics:
            analysis.figures[f"strata_{by}_{metric}"] = F.fig_stratum_means(analysis.tables[name], metric)
            analysis.figure_captions[f"strata_{by}_{metric}"] = f"{F.label(metric)} by {by}"
        steps.done()

    # ranks and paired tests per metric
    if len(runs.systems) > 1 and resamples:
        for metric in runs.metrics:
            steps.start(f"ranks and paired tests: {metric}")
            frame, n_excluded = complete_cases(runs.matrix(metric))
            if n_excluded:
                analysis.notes.append(f"{metric}: {n_excluded} studies unscored by some system are left out of ranks and tests")
            ranks = rank_intervals(frame, higher_is_better=runs.higher_is_better(metric), resamples=resamples, seed=seed)
            analysis.tables[f"ranks_{metric}"] = ranks
            analysis.table_captions[f"ranks_{metric}"] = f"bootstrap rank intervals on {F.label(metric)}"
            analysis.figures[f"ranks_{metric}"] = F.fig_rank_intervals(ranks, metric=metric)
            analysis.figure_captions[f"ranks_{metric}"] = f"rank uncertainty on {F.label(metric)}"
            boot = pairwise_tests(frame, method="bootstrap", resamples=resamples, seed=seed)
            ar = pairwise_tests(frame, method="randomisation", resamples=resamples, seed=seed)
            boot["p_randomisation"] = ar["p_value"].to_numpy()
            boot["p_randomisation_holm"] = ar["p_holm"].to_numpy()
            boot = boot.rename(columns={"p_value": "p_bootstrap", "p_holm": "p_bootstrap_holm"}).drop(columns=["method"])
            analysis.tables[f"pairwise_{metric}"] = boot
            analysis.table_captions[f"pairwise_{metric}"] = (
                f"paired tests on {F.label(metric)}: difference = mean(a) − mean(b), bootstrap 95 % CI, Cohen's d_z, "
                "Holm-adjusted over the pairs of this table")
            for by, series in labels.items():
                analysis.tables[f"pairwise_{by}_{metric}"] = _pairwise_by_stratum(frame, series, resamples, seed)
                analysis.table_captions[f"pairwise_{by}_{metric}"] = (
                    f"paired tests on {F.label(metric)} within each {by} stratum (Holm within a stratum)")
            steps.done()

    # sites
    if site_column:
        steps.start("sites")
        if attrs is None or site_column not in attrs.columns:
            raise AnalysisError(f"per-site ranking needs a {site_column!r} study attribute")
        metric = site_metric or default_rank_metric(runs)
        table = site_ranking(runs, stratum_labels(attrs, site_column), metric, top_n=top_n_sites,
                             resamples=resamples, seed=seed)
        analysis.tables[f"sites_{metric}"] = table
        analysis.table_captions[f"sites_{metric}"] = f"rank per site (top {top_n_sites} by study count) on {F.label(metric)}"
        analysis.figures[f"sites_{metric}"] = F.fig_site_heatmap(table)
        analysis.figure_captions[f"sites_{metric}"] = f"rank by site on {F.label(metric)}"
        steps.done()

    # FineRadScore error-free rates, overall and per stratum
    if severity_column in runs.metrics:
        steps.start("error rates")
        rates = [error_rates(runs, column=severity_column)]
        rates += [error_rates(runs, strata=series, column=severity_column) for series in labels.values()]
        table = pd.concat(rates, ignore_index=True)
        analysis.tables["error_rates"] = table
        analysis.table_captions["error_rates"] = "share of reports without actionable (max severity ≤ 1) / significant (≤ 2) error"
        analysis.figures["error_rates"] = F.fig_error_rates(table)
        analysis.figure_captions["error_rates"] = "reports without actionable / significant error (FineRadScore)"
        steps.done()

    # metrics against each other across systems
    steps.start("correlations and distributions")
    if len(runs.systems) >= 3 and len(runs.metrics) >= 2:
        for method in ("pearson", "kendall"):
            corr = metric_correlation(runs, method)
            analysis.tables[f"correlation_{method}"] = corr.reset_index(names="metric")
            analysis.table_captions[f"correlation_{method}"] = f"{method} correlation of metric means across systems"
            analysis.figures[f"correlation_{method}"] = F.fig_metric_correlation(runs, method)
            analysis.figure_captions[f"correlation_{method}"] = f"{method} correlation between metrics across systems"
    else:
        analysis.notes.append("metric correlations need at least 3 systems and 2 metrics; skipped")
    analysis.tables["system_means"] = runs.means().reset_index(names="system")
    analysis.table_captions["system_means"] = "system-level means (input of the correlations)"
    # per-study scores, one distribution per system: a box over a few systems' means says nothing
    analysis.figures["distributions"] = F.fig_score_distributions(runs)
    analysis.figure_captions["distributions"] = "per-study scores of each system, per metric"
    steps.done()

    # metrics against radiologists
    if rexval_dir is not None:
        steps.start("ReXVal alignment")
        pairs = read_rexval(rexval_dir)
        if rexval_scores is None:
            if not rexval_metrics:
                raise AnalysisError("ReXVal: give precomputed scores or the metrics to score the pairs with")
            rexval_scores = score_rexval(pairs, rexval_metrics, progress=progress).per_study
        table = human_alignment(pairs, rexval_scores, resamples=resamples, seed=seed, lower_is_better=runs.lower_is_better)
        analysis.tables["human_alignment"] = table
        analysis.table_captions["human_alignment"] = (
            "Kendall τ-b between metric badness and radiologists' total errors on ReXVal, bootstrap CI over pairs")
        analysis.figures["human_alignment"] = F.fig_human_alignment(table)
        analysis.figure_captions["human_alignment"] = "alignment with radiologists (ReXVal)"
        steps.done()
    for name, table in analysis.tables.items():
        analysis.tables[name] = with_labels(table)
    return analysis


def with_labels(table: pd.DataFrame) -> pd.DataFrame:
    """A table with a `metric` column (the per-study column's key, as in the file names and
    `--site-metric`) gets the metric's label beside it, the name the figures and captions use."""
    if "metric" not in table.columns or "label" in table.columns:
        return table
    table = table.copy()
    table.insert(table.columns.get_loc("metric") + 1, "label", table["metric"].map(metric_label))
    return table


def _pairwise_by_stratum(frame: pd.DataFrame, labels: pd.Series, resamples: int, seed: int) -> pd.DataFrame:
    """Paired bootstrap tests within each stratum (strata with < 2 studies are skipped and
    listed with n = their size and no p-value)."""
    parts = []
    labels = labels.loc[frame.index]
    for stratum in dict.fromkeys(labels):
        sub = frame[labels == stratum]
        if len(sub) < 2:
            parts.append(pd.DataFrame([{"stratum": stratum, "n": len(sub)}]))
            continue
        table = pairwise_tests(sub, method="bootstrap", resamples=resamples, seed=seed)
        table = table.rename(columns={"p_value": "p_bootstrap", "p_holm": "p_bootstrap_holm"}).drop(columns=["method"])
        parts.append(table.assign(stratum=stratum)[["stratum", *table.columns]])
    return pd.concat(parts, ignore_index=True)
