"""`rexrank analyze` end to end on small synthetic per-study tables."""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from rexrank.cli.main import main
from support.analysis_files import write_rexval
from support.analysis_files import write_runs


def test_analyze_end_to_end(tmp_path, capsys):
    paths = write_runs(tmp_path)
    write_rexval(tmp_path, n_studies=10)
    pairs = pd.read_csv(tmp_path / "50_samples_gt_and_candidates.csv")
    ids = [f"{i}_{c}" for i in range(len(pairs)) for c in ("radgraph", "bertscore", "s_emb", "bleu")]
    pd.DataFrame({"id": ids, "bleu2": np.linspace(0, 1, len(ids))}).to_csv(tmp_path / "rexval_scores.csv", index=False)
    out = tmp_path / "out"
    code = main(["analyze", str(paths[0]), str(paths[1]), f"G={paths[2]}", "--out", str(out),
                 "--attributes", str(tmp_path / "attrs.csv"), "--normal-abnormal", "--sites", "--top-sites", "2",
                 "--bootstrap", "60", "--seed", "3", "--rexval", str(tmp_path),
                 "--rexval-scores", str(tmp_path / "rexval_scores.csv")])
    assert code == 0
    printed = capsys.readouterr().out
    assert "test set label `is_abnormal`" in printed
    tables = {p.stem for p in (out / "tables").glob("*.csv")}
    assert {"summary", "strata_normal_abnormal", "ranks_bleu2", "pairwise_bleu2", "pairwise_normal_abnormal_bleu2",
            "sites_radcliq_v1", "error_rates", "correlation_pearson", "correlation_kendall", "human_alignment"} <= tables
    for name in tables:
        assert (out / "tables" / f"{name}.md").read_text().startswith(f"## {name}")
    figures = {p.stem for p in (out / "figures").glob("*.png")}
    assert figures == {p.stem for p in (out / "figures").glob("*.svg")}
    assert {"sites_radcliq_v1", "error_rates", "ranks_bleu2", "correlation_pearson", "distributions", "human_alignment"} <= figures
    assert "boxplots" not in figures  # a box over a few systems' means says nothing
    summary = pd.read_csv(out / "tables" / "summary.csv")
    assert set(summary["system"]) == {"alpha", "beta", "G"}
    beta = pd.read_parquet(paths[1])
    row = summary[(summary.system == "beta") & (summary.metric == "bleu2")].iloc[0]
    assert row["mean"] == pytest.approx(beta["bleu2"].mean()) and row["n"] == 40
    pairwise = pd.read_csv(out / "tables" / "pairwise_bleu2.csv")
    assert len(pairwise) == 3 and (pairwise["p_bootstrap_holm"] >= pairwise["p_bootstrap"]).all()
    sites = pd.read_csv(out / "tables" / "sites_radcliq_v1.csv")
    assert list(dict.fromkeys(sites["site"])) == ["all", "north", "south"]
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == len(figures)
    assert not re.search(r"""(src|href)=['"](?!data:)""", html), "report must be self-contained"
    assert "Multiple comparisons" in html


def test_analyze_mismatched_studies_is_an_error(tmp_path, capsys):
    paths = write_runs(tmp_path)
    frame = pd.read_parquet(paths[1])
    frame.iloc[:-1].to_parquet(paths[1], index=False)
    code = main(["analyze", *map(str, paths), "--out", str(tmp_path / "o"), "--bootstrap", "10"])
    assert code == 1
    err = capsys.readouterr().err
    assert "1 studies only in alpha (e.g. ['st039'])" in err


def test_analyze_real_score_output_with_test_set_attributes(tmp_path):
    """Per-study tables written by `rexrank score` on the embedded example, joined with the
    example test set's attributes."""
    from rexrank.data import data_path

    preds = json.loads(data_path("example_predictions.json").read_text())
    worse = {k: {**v, "model_prediction": " ".join(str(v.get("model_prediction", "")).split()[:4])} for k, v in preds.items()}
    (tmp_path / "worse.json").write_text(json.dumps(worse))
    runs = []
    for name, path in (("full", data_path("example_predictions.json")), ("short", tmp_path / "worse.json")):
        out = tmp_path / f"{name}.parquet"
        assert main(["score", "--dataset", "example", "--predictions", str(path), "--per-study", str(out), "--no-progress"]) == 0
        runs.append(str(out))
    out = tmp_path / "report"
    assert main(["analyze", *runs, "--dataset", "example", "--strata", "split", "--out", str(out), "--bootstrap", "50"]) == 0
    strata = pd.read_csv(out / "tables" / "strata_split.csv")
    assert set(strata["stratum"]) == {"test"} and set(strata["system"]) == {"full", "short"}
    ranks = pd.read_csv(out / "tables" / "ranks_bleu2.csv")
    assert ranks.iloc[0]["system"] == "full"


def test_pairwise_within_strata_uses_only_that_stratum(tmp_path):
    from rexrank.analysis.io import load_runs
    from rexrank.analysis.pipeline import analyze

    paths = write_runs(tmp_path)
    runs = load_runs(list(map(str, paths)))
    attrs = pd.read_csv(tmp_path / "attrs.csv", dtype={"id": str}).set_index("id")
    analysis = analyze(runs, attrs=attrs, strata=["site"], resamples=30)
    table = analysis.tables["pairwise_site_bleu2"]
    south = table[(table.stratum == "south") & (table.system_a == "alpha") & (table.system_b == "beta")].iloc[0]
    ids = attrs.index[attrs.site == "south"]
    m = runs.matrix("bleu2").loc[ids]
    assert south["n"] == 12 and south["difference"] == pytest.approx((m["alpha"] - m["beta"]).mean())
