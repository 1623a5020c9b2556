"""Issue 31, item 6: each metric's primary value once, under one label, in `score`, `analyze`,
its report and figures; distributions from per-study scores; a summary that counts what it
ranks; a report that opens with the comparison."""
from __future__ import annotations

import pytest

from rexrank.cli.main import main
from rexrank.data import data_path

PREDICTIONS = str(data_path("example_predictions.json"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rouge_runs")
    for name in ("a", "b"):
        assert main(["score", "--dataset", "example", "--predictions", PREDICTIONS, "--metrics", "bleu2,rouge",
                     "--per-study", str(folder / f"{name}.parquet"), "--no-progress"]) == 0
    return folder


def test_score_prints_rouge_l_once(capsys):
    assert main(["score", "--dataset", "example", "--predictions", PREDICTIONS, "--metrics", "rouge", "--no-progress"]) == 0
    rows = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.startswith("rouge")]
    assert rows == ["rouge", "rouge1", "rouge2"]  # rougeL is rouge's number


def test_analyze_shows_each_number_once_with_distributions_and_the_comparison_first(runs, capsys):
    import pandas as pd

    out = runs / "report"
    assert main(["analyze", f"a={runs / 'a.parquet'}", f"b={runs / 'b.parquet'}", "--out", str(out),
                 "--bootstrap", "50", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "rougeL is rouge's number (ROUGE-L): shown once, as rouge" in printed
    summary = pd.read_csv(out / "tables" / "summary.csv")
    assert set(summary["metric"]) == {"bleu2", "rouge", "rouge1", "rouge2"}
    assert set(summary["n_ranked"]) == {2}  # the rank is "of 2": two systems
    figures = {p.stem for p in (out / "figures").glob("*.png")}
    assert "distributions" in figures and "boxplots" not in figures and "ranks_rougeL" not in figures
    html = (out / "report.html").read_text()
    assert "rougeL" not in html.split("<h2>Notes</h2>")[0]
    assert "rank uncertainty on ROUGE-L" in html and "bootstrap rank intervals on ROUGE-L" in html
    assert html.index("<h2>Comparison</h2>") < html.index("<h2>Figures</h2>") < html.index("<h2>Tables</h2>")
    assert "<div class='figures'>" in html  # laid out side by side, to the page's width
