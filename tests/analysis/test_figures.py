"""Every analysis figure renders from small inputs, with labelled axes, without pyplot."""
from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from support.paths import shared_path
from rexrank.analysis import figures as F
from rexrank.analysis.error_rates import error_rates
from rexrank.analysis.io import join_runs, read_system_table
from rexrank.analysis.sites import site_ranking
from rexrank.analysis.strata import summary_table
from rexrank.analysis.uncertainty import rank_intervals


@pytest.fixture
def runs():
    rng = np.random.default_rng(0)
    ids = [f"s{i}" for i in range(30)]
    return join_runs({
        s: pd.DataFrame({"id": ids, "bleu2": rng.uniform(0, 1, 30), "bertscore": rng.uniform(0, 1, 30),
                         "fineradscore": rng.integers(0, 5, 30).astype(float)})
        for s in ("a", "b", "c", "d")
    })


def rendered(fig: Figure) -> Figure:
    assert isinstance(fig, Figure)
    for fmt in ("png", "svg"):
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt)
        assert buf.tell() > 1000
    visible = [ax for ax in fig.axes if ax.get_visible() and ax.get_label() != "<colorbar>"]
    assert visible
    for ax in visible:
        assert ax.get_xlabel() or ax.get_xticklabels(), "x axis unlabelled"
    assert any(ax.get_ylabel() for ax in fig.axes) or fig.get_supylabel(), "no y label"
    return fig


def text_boxes(fig: Figure) -> dict[str, object]:
    """Window extents of the titles, axis labels and legends, once drawn."""
    from matplotlib.legend import Legend
    from matplotlib.text import Text

    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    boxes = {}
    for artist in fig.findobj(lambda a: isinstance(a, (Text, Legend)) and a.get_visible()):
        if isinstance(artist, Text) and not artist.get_text():
            continue
        name = artist.get_text() if isinstance(artist, Text) else f"legend {id(artist)}"
        boxes[name] = artist.get_window_extent(renderer)
    return boxes


def test_rank_interval_legend_does_not_cover_the_axis_label(runs):
    ranks = rank_intervals(runs.matrix("bleu2"), higher_is_better=True, resamples=50, seed=0)
    fig = F.fig_rank_intervals(ranks, metric="bleu2")
    boxes = text_boxes(fig)
    label = boxes[fig.axes[0].get_xlabel()]
    legends = [box for name, box in boxes.items() if name.startswith("legend")]
    assert legends and not any(box.overlaps(label) for box in legends)


@pytest.mark.parametrize("metrics", [["bleu2"], ["bleu2", "bertscore"], ["bleu2", "bertscore", "fineradscore"]])
def test_boxplot_text_stays_inside_the_figure(runs, metrics):
    """The report's box plot: title, labels and legend are drawn inside the figure, not cut at its edge."""
    fig = F.fig_metric_boxplots({"Embedded example (synthetic, written for rexrank), findings track": runs},
                                metrics=metrics)
    area = fig.bbox
    for name, box in text_boxes(fig).items():
        assert area.x0 - 1 <= box.x0 and box.x1 <= area.x1 + 1 and area.y0 - 1 <= box.y0 and box.y1 <= area.y1 + 1, name


def test_correlation_figure_from_runs_and_system_table(runs):
    rendered(F.fig_metric_correlation(runs))
    table = pd.DataFrame({"bleu2": [0.1, 0.2, 0.3], "green": [0.3, 0.2, 0.5]}, index=list("xyz"))
    fig = rendered(F.fig_metric_correlation(table, method="kendall"))
    assert "Kendall" in fig.axes[0].get_title()


def test_boxplots_from_several_tables(runs):
    table = pd.DataFrame({"bleu2": [0.1, 0.2, 0.3], "radcliq_v1_inv": [0.8, 0.9, 1.1]}, index=list("xyz"))
    fig = rendered(F.fig_metric_boxplots({"iu_xray": table, "example": runs}))
    assert {ax.get_title() for ax in fig.axes if ax.get_visible()} >= {"BLEU", "1/RadCliQ-v1"}


def test_published_tables_render():
    base = shared_path("data", "published", "current")
    tables = {p.stem: read_system_table(p) for p in sorted(base.glob("findings_result_*.csv"))}
    rendered(F.fig_metric_correlation(tables["findings_result_mimiccxr"]))
    rendered(F.fig_metric_boxplots(tables))


def test_site_heatmap(runs):
    sites = pd.Series(["p"] * 12 + ["q"] * 10 + ["r"] * 8, index=runs.ids)
    rendered(F.fig_site_heatmap(site_ranking(runs, sites, "bleu2", top_n=2)))


def test_error_rates_figure(runs):
    strata = pd.Series(["normal", "abnormal"] * 15, index=runs.ids)
    rendered(F.fig_error_rates(error_rates(runs, strata=strata)))


def test_rank_interval_and_stratum_figures(runs):
    rendered(F.fig_rank_intervals(rank_intervals(runs.matrix("bleu2"), resamples=50), metric="bleu2"))
    strata = pd.Series(["F", "M", "M"] * 10, index=runs.ids)
    rendered(F.fig_stratum_means(summary_table(runs, strata=strata, resamples=0), "bertscore"))


def test_human_alignment_figure():
    table = pd.DataFrame({"metric": ["bleu2", "green"], "target": "total_errors", "tau_b": [0.45, 0.63],
                          "ci_low": [0.37, 0.56], "ci_high": [0.53, 0.69], "n": 200})
    rendered(F.fig_human_alignment(table))


def test_no_pyplot_state_leaks(runs):
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    F.fig_metric_correlation(runs)
    F.fig_rank_intervals(rank_intervals(runs.matrix("bleu2"), resamples=20))
    assert plt.get_fignums() == before
