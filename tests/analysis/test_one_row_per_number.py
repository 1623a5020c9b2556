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


def test_each_metric_has_one_label_beside_its_key_in_score_analyze_report_and_figures(runs, capsys):
    """The key (`--metrics`, per-study columns, file names) with its one label beside it:
    `score` and `analyze`'s tables print the label the captions and figures use."""
    import pandas as pd

    from rexrank.analysis import figures as F

    labels = {"bleu2": "BLEU", "rouge": "ROUGE-L", "rouge1": "ROUGE-1", "rouge2": "ROUGE-2"}
    assert main(["score", "--dataset", "example", "--predictions", PREDICTIONS, "--metrics", "bleu2,rouge",
                 "--no-progress"]) == 0
    printed = {line.split()[0]: line.split()[1] for line in capsys.readouterr().out.splitlines()
               if line.split() and line.split()[0] in labels}
    assert printed == labels
    out = runs / "labels"
    assert main(["analyze", f"a={runs / 'a.parquet'}", f"b={runs / 'b.parquet'}", "--out", str(out),
                 "--bootstrap", "20", "--no-progress"]) == 0
    summary = pd.read_csv(out / "tables" / "summary.csv")
    assert list(summary.columns[:3]) == ["stratum", "metric", "label"]
    assert dict(zip(summary["metric"], summary["label"])) == labels
    assert {m: F.label(m) for m in labels} == labels  # the figures' axes and captions
    html = (out / "report.html").read_text()
    assert all(f"rank uncertainty on {label}" in html for label in labels.values())
