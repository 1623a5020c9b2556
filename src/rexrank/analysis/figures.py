"""Every analysis figure as a function returning a matplotlib Figure.

Figures are built on `matplotlib.figure.Figure` with an Agg canvas — no pyplot, so no
global state leaks into the caller (the leaderboard Space calls these in a server).
Save with `fig.savefig(path)` (PNG/SVG by extension).
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from rexrank.analysis.correlation import metric_correlation
from rexrank.analysis.io import AnalysisError, RunSet, as_system_table, higher_is_better
from rexrank.analysis.sites import rank_matrix
from rexrank.results_schema import metric_label

def label(metric: str) -> str:
    """The metric's one label (`metric_label`, as in the tables), marked where lower is better."""
    name = metric_label(metric)
    return name if higher_is_better(metric) else f"{name} (lower is better)"


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig



def fig_metric_correlation(table: "pd.DataFrame | RunSet", method: str = "pearson", *, title: str | None = None) -> Figure:
    """Heatmap of metric-vs-metric correlation across systems (Challenge paper Figure 3).
    `table`: rows = systems, columns = metrics (e.g. a published leaderboard), or a RunSet."""
    corr = metric_correlation(table, method)
    n_systems = len(as_system_table(table))
    names = [label(m) for m in corr.columns]
    size = 1.2 + 0.75 * len(names)
    fig = _figure(size + 1.2, size)
    ax = fig.add_subplot()
    im = ax.imshow(corr.to_numpy(), vmin=-1, vmax=1, cmap="RdBu_r")
    ax.set_xticks(range(len(names)), names, rotation=45, ha="right")
    ax.set_yticks(range(len(names)), names)
    values = corr.to_numpy()
    for (i, j), v in np.ndenumerate(values):
        if not np.isnan(v):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=8, color="white" if abs(v) > 0.6 else "black")
    coefficient = {"pearson": "Pearson r", "kendall": "Kendall τ-b", "spearman": "Spearman ρ"}[method]
    fig.colorbar(im, ax=ax, label=f"{coefficient} (unitless, −1 to 1)")
    ax.set_title(title or f"{coefficient} between metrics across {n_systems} systems")
    return fig


def fig_score_distributions(runs: "RunSet", *, metrics: Sequence[str] | None = None, title: str | None = None) -> Figure:
    """Each metric's per-study scores, one box per system (the studies it scored), the mean
    marked: how the systems' scores spread, which two means alone do not show."""
    metrics = list(metrics or runs.metrics)
    if not metrics:
        raise AnalysisError("no metric columns to plot")
    cols = min(3, len(metrics))
    rows = int(np.ceil(len(metrics) / cols))
    fig = _figure(max(4.2 * cols, 6.0), 3.4 * rows + 0.6)
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax, metric in zip(axes.flat, metrics):
        frame = runs.matrix(metric)
        data = [frame[s].dropna().to_numpy() for s in runs.systems]
        shown = [i for i, d in enumerate(data) if d.size]
        ax.boxplot([data[i] for i in shown], positions=[i + 1 for i in shown], widths=0.6, showfliers=True,
                   showmeans=True, flierprops={"markersize": 3, "alpha": 0.5})
        ax.set_xticks(range(1, len(runs.systems) + 1), runs.systems, rotation=30 if len(runs.systems) > 3 else 0,
                      ha="right" if len(runs.systems) > 3 else "center")
        ax.set_title(label(metric))
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(metrics):]:
        ax.set_visible(False)
    fig.supylabel("per-study score (unitless)")
    fig.suptitle(title or f"Per-study scores of {len(runs.systems)} systems on {len(runs.ids)} studies "
                 "(box: quartiles; triangle: mean)", wrap=True)
    return fig


def fig_metric_boxplots(tables_by_test_set: Mapping[str, "pd.DataFrame | RunSet"], *, metrics: Sequence[str] | None = None,
                        title: str | None = None) -> Figure:
    """Each metric's distribution across systems, one box per test set (ReXrank paper
    Figure 3). Values: system-level means; points are the individual systems."""
    if not tables_by_test_set:
        raise AnalysisError("no test sets given for the box plots")
    tables = {name: as_system_table(t) for name, t in tables_by_test_set.items()}
    if metrics is None:  # the columns with a value somewhere (an optional column may have none yet)
        metrics = list(dict.fromkeys(c for t in tables.values() for c in t.columns if t[c].notna().any()))
    if not metrics:
        raise AnalysisError("no metric columns to plot")
    cols = min(4, len(metrics))
    rows = int(np.ceil(len(metrics) / cols))
    names = list(tables)
    # wide enough for the title even with one panel; panels tall enough for their tick labels
    fig = _figure(max(3.2 * cols, 6.0), 3.2 * rows + 0.6)
    axes = fig.subplots(rows, cols, squeeze=False)
    rng = np.random.default_rng(0)  # jitter only
    for ax, metric in zip(axes.flat, metrics):
        data = [tables[n][metric].dropna().to_numpy() if metric in tables[n] else np.array([]) for n in names]
        positions = [i + 1 for i, d in enumerate(data) if d.size]
        ax.boxplot([d for d in data if d.size], positions=positions, widths=0.6, showfliers=False)
        for pos, d in zip(positions, [d for d in data if d.size]):
            ax.scatter(pos + rng.uniform(-0.15, 0.15, d.size), d, s=10, alpha=0.6, color="tab:blue",
                       label="one system" if pos == positions[0] else None)
        if len(names) > 1:
            ax.set_xticks(range(1, len(names) + 1), names, rotation=30, ha="right")
        else:
            ax.set_xticks([1], [f"{len(data[0])} systems"])
        ax.set_title(label(metric))
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(metrics):]:
        ax.set_visible(False)
    # one axis label and one legend for the figure, outside the panels: nothing overlaps a panel's labels
    fig.supylabel("system mean score (unitless)")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", fontsize=8, frameon=False)
    default = "Metric distributions across systems" + (", per test set" if len(names) > 1 else f" — {names[0]}")
    fig.suptitle(title or default, wrap=True)
    return fig


def fig_site_heatmap(site_table: pd.DataFrame, *, title: str | None = None) -> Figure:
    """Rank of every system (rows, by overall rank) at each of the top-N sites (columns,
    by study count), like the Challenge paper's Figure 2. Input: `sites.site_ranking`."""
    ranks = rank_matrix(site_table)
    counts = site_table.drop_duplicates("site").set_index("site")["n"]
    metric = site_table["metric"].iloc[0]
    k = len(ranks)
    fig = _figure(1.6 + 0.7 * ranks.shape[1], 1.2 + 0.35 * k)
    ax = fig.add_subplot()
    im = ax.imshow(ranks.to_numpy(dtype=float), cmap="viridis_r", vmin=1, vmax=max(k, 2), aspect="auto")
    ax.set_xticks(range(ranks.shape[1]), [f"{s}\n(n={counts[s]})" for s in ranks.columns], rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(k), ranks.index, fontsize=8)
    for (i, j), v in np.ndenumerate(ranks.to_numpy(dtype=float)):
        ax.text(j, i, f"{int(v)}", ha="center", va="center", fontsize=7, color="white" if v > k / 2 + 0.5 else "black")
    ax.set_xlabel("site (studies)")
    ax.set_ylabel("system (ordered by overall rank)")
    fig.colorbar(im, ax=ax, label=f"rank on {label(metric)} (1 = best)")
    ax.set_title(title or f"Rank by site on {label(metric)}")
    return fig


def fig_error_rates(rates: pd.DataFrame, *, title: str | None = None) -> Figure:
    """Grouped bars: % of reports without actionable / significant error, per system,
    one panel per stratum, with 95 % Wilson intervals. Input: `error_rates.error_rates`."""
    strata = list(dict.fromkeys(rates["stratum"]))
    measures = list(dict.fromkeys(rates["measure"]))
    systems = list(dict.fromkeys(rates["system"]))
    fig = _figure(max(4.0, 0.9 * len(systems) + 2) * min(len(strata), 3), 3.6 * int(np.ceil(len(strata) / 3)))
    axes = fig.subplots(int(np.ceil(len(strata) / 3)), min(len(strata), 3), squeeze=False, sharey=True)
    width = 0.8 / len(measures)
    x = np.arange(len(systems))
    for ax, stratum in zip(axes.flat, strata):
        sub = rates[rates["stratum"] == stratum].set_index(["measure", "system"])
        for j, measure in enumerate(measures):
            part = sub.loc[measure].reindex(systems)
            rate = 100 * part["rate"].to_numpy(dtype=float)
            err = np.vstack([rate - 100 * part["ci_low"].to_numpy(dtype=float), 100 * part["ci_high"].to_numpy(dtype=float) - rate])
            ax.bar(x + (j - (len(measures) - 1) / 2) * width, rate, width, yerr=err, capsize=2, label=measure)
        n = int(sub["n"].max())
        ax.set_xticks(x, systems, rotation=40, ha="right", fontsize=8)
        ax.set_title(f"{stratum} (n = {n})")
        ax.set_ylim(0, 100)
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(strata):]:
        ax.set_visible(False)
    axes.flat[0].set_ylabel("reports (%) — 95 % Wilson CI")
    axes.flat[0].legend(fontsize=8, loc="upper left")
    fig.suptitle(title or "Reports without clinically relevant errors (FineRadScore max severity)")
    return fig


def fig_rank_intervals(ranks: pd.DataFrame, *, metric: str | None = None, title: str | None = None) -> Figure:
    """Observed rank (dot) and 95 % bootstrap rank interval (bar) per system.
    Input: `uncertainty.rank_intervals`."""
    table = ranks.sort_values(["rank", "system"]).reset_index(drop=True)
    k = len(table)
    fig = _figure(6.0, 1.4 + 0.32 * k)
    ax = fig.add_subplot()
    y = np.arange(k)
    xerr = np.vstack([table["rank"] - table["rank_low"], table["rank_high"] - table["rank"]])
    ax.errorbar(table["rank"], y, xerr=xerr, fmt="o", color="black", ecolor="tab:blue", elinewidth=3, capsize=5,
                label="observed rank, with 95 % bootstrap rank interval")
    ax.set_yticks(y, table["system"], fontsize=8)
    ax.set_ylim(k - 0.5, -0.5)  # half a row of room above the first and below the last: no dot on the frame
    ax.set_xlim(0.5, k + 0.5)
    ax.set_xticks(range(1, k + 1))
    ax.set_xlabel("rank (1 = best)")
    ax.set_ylabel("system")
    ax.grid(axis="x", alpha=0.3)
    # below the axis label, not over it: constrained layout makes room for an "outside" legend
    fig.legend(*ax.get_legend_handles_labels(), fontsize=8, loc="outside lower center", frameon=False)
    ax.set_title(title or (f"Rank uncertainty on {label(metric)}" if metric else "Rank uncertainty"))
    return fig


def fig_stratum_means(summary: pd.DataFrame, metric: str, *, title: str | None = None) -> Figure:
    """Mean ± 95 % CI (normal, papers' method) per system, one marker per stratum.
    Input: `strata.summary_table` rows."""
    sub = summary[summary["metric"] == metric]
    if sub.empty:
        raise AnalysisError(f"no summary rows for metric {metric!r}")
    systems = list(dict.fromkeys(sub["system"]))
    strata = list(dict.fromkeys(sub["stratum"]))
    fig = _figure(max(5.0, 0.8 * len(systems) + 2), 3.8)
    ax = fig.add_subplot()
    x = np.arange(len(systems))
    width = 0.8 / len(strata)
    for j, stratum in enumerate(strata):
        part = sub[sub["stratum"] == stratum].set_index("system").reindex(systems)
        n = int(part["n"].max())
        ax.errorbar(x + (j - (len(strata) - 1) / 2) * width, part["mean"], yerr=part["ci95"], fmt="o", capsize=3,
                    label=f"{stratum} (n = {n})")
    ax.set_xticks(x, systems, rotation=40, ha="right", fontsize=8)
    ax.set_ylabel(f"mean {label(metric)} ± 95 % CI (unitless)")
    ax.set_xlabel("system")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title or f"{label(metric)} by stratum")
    return fig


def fig_human_alignment(alignment: pd.DataFrame, *, title: str | None = None) -> Figure:
    """Kendall τ-b with radiologist error counts per metric, with bootstrap 95 % CI.
    Input: `alignment.human_alignment`."""
    table = alignment.sort_values("tau_b").reset_index(drop=True)
    fig = _figure(6.0, 1.2 + 0.4 * len(table))
    ax = fig.add_subplot()
    y = np.arange(len(table))
    err = np.vstack([table["tau_b"] - table["ci_low"], table["ci_high"] - table["tau_b"]])
    ax.errorbar(table["tau_b"], y, xerr=np.nan_to_num(err), fmt="o", capsize=3, label="τ-b with 95 % bootstrap CI")
    ax.set_yticks(y, [label(m) for m in table["metric"]])
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_xlabel(f"Kendall τ-b with radiologists' {table['target'].iloc[0].replace('_', ' ')} (unitless)")
    ax.set_ylabel("metric")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(title or f"Alignment with radiologists (ReXVal, n = {int(table['n'].max())} pairs)")
    return fig
