"""The `rexrank` command line, run as a user runs it."""
from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from support.paths import PROJECT_ROOT, shared_path
from support.commands import EXAMPLE_PREDICTIONS, rexrank

def test_import_is_light():
    code = "import sys, rexrank; print('torch' in sys.modules, 'datasets' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_help_lists_the_subcommands():
    out = rexrank("--help")
    assert out.returncode == 0
    for command in ("score", "list"):
        assert command in out.stdout


def test_score_example_writes_results_and_per_study(tmp_path):
    out = rexrank(
        "score", "--dataset", "example", "--track", "findings", "--predictions", EXAMPLE_PREDICTIONS,
        "--out", str(tmp_path / "r.json"), "--per-study", str(tmp_path / "s.parquet"), "--bootstrap", "100",
    )
    assert out.returncode == 0, out.stderr
    assert "bleu2" in out.stdout and "± 95% CI" in out.stdout
    assert "1 predictions are for studies this track does not score" in out.stdout
    results = json.loads((tmp_path / "r.json").read_text())
    per_study = pd.read_parquet(tmp_path / "s.parquet")
    assert list(per_study.columns) == ["id", "bleu2"] and len(per_study) == 19
    summary = results["metrics"]["bleu2"]["scores"]["bleu2"]
    assert summary["n"] == 19 and summary["mean"] == pytest.approx(per_study.bleu2.mean())
    assert summary["bootstrap_low"] < summary["mean"] < summary["bootstrap_high"]
    assert results["test_set"] == results["test_set"] | {"name": "example", "track": "findings", "n_studies": 19}
    assert results["predictions"]["n_empty"] == 1
    assert results["metrics"]["bleu2"]["provenance"]["name"] == "bleu2"
    assert results["rexrank_version"]


def test_score_iu_xray_official_mean(tmp_path):
    """MoERad on IU-Xray findings: the mean equals the official per-study mean."""
    official = pd.read_csv(shared_path("validation", "moerad_iu", "report_scores.csv"))
    out = rexrank(
        "score", "--dataset", "iu_xray", "--predictions", str(shared_path("validation", "moerad_iu", "MoERad.json")),
        "--data-dir", str(shared_path("data", "iu_xray")), "--out", str(tmp_path / "r.json"), "--no-progress",
    )
    assert out.returncode == 0, out.stderr
    mean = json.loads((tmp_path / "r.json").read_text())["metrics"]["bleu2"]["scores"]["bleu2"]["mean"]
    assert mean == pytest.approx(official.bleu_score.mean(), abs=1e-12)


@pytest.mark.parametrize(
    "args,message",
    [
        (["--dataset", "example", "--predictions", EXAMPLE_PREDICTIONS, "--metrics", "bleu9"], "unknown metric(s) 'bleu9'"),
        (["--dataset", "mimic_cxr", "--predictions", EXAMPLE_PREDICTIONS], "PhysioNet credentialed access"),
        (["--dataset", "example", "--predictions", "nope.csv"], "nope.csv: file not found"),
        (["--dataset", "example", "--track", "impression", "--predictions", EXAMPLE_PREDICTIONS], "unknown track"),
        (["--dataset", "example", "--predictions", EXAMPLE_PREDICTIONS, "--metric-option", "bleu2"], "expected METRIC.KEY=VALUE"),
        (
            ["--dataset", "example", "--predictions", EXAMPLE_PREDICTIONS, "--metric-option", "sembscore.batch_size=4"],
            "metric 'sembscore' is not among --metrics",
        ),
        (
            ["--dataset", "example", "--predictions", EXAMPLE_PREDICTIONS, "--metrics", "sembscore",
             "--metric-option", "sembscore.checkpoint_path=/nonexistent/chexbert.pth"],
            "/nonexistent/chexbert.pth",
        ),
    ],
)
def test_errors_exit_non_zero_with_a_message(args, message):
    out = rexrank("score", *args)
    assert out.returncode == 1
    assert message in out.stderr
    assert "Traceback" not in out.stderr


def test_evaluate_module_contract(tmp_path):
    import evaluate

    from rexrank.metrics.bleu2 import Bleu2

    predictions = ["No pneumothorax.", "Lungs clear.", ""]
    references = ["Pneumothorax.", "Heart size normal.", "No acute process."]
    module = evaluate.load(str(PROJECT_ROOT / "metrics" / "bleu2"))
    out = module.compute(predictions=predictions, references=references)
    direct = Bleu2().score(predictions, references)
    assert out["per_study"] == direct.primary.tolist()  # input order kept
    assert out["bleu2"] == direct.value


def test_metric_space_app_serves_compute():
    import importlib.util

    from gradio_client import Client

    spec = importlib.util.spec_from_file_location("bleu2_app", PROJECT_ROOT / "metrics" / "bleu2" / "app.py")
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    app.demo.launch(server_name="127.0.0.1", server_port=None, prevent_thread_lock=True, quiet=True)
    try:
        client = Client(app.demo.local_url, verbose=False)
        value, details = client.predict("No pneumothorax.\nLungs clear.", "Pneumothorax.\nLungs clear.", api_name="/compute")
        payload = json.loads(details)
        assert len(payload["per_study"]) == 2 and payload["per_study"][1] == 1.0
        assert value == f"{payload['bleu2']:.4f}"
    finally:
        app.demo.close()


def test_metric_options_are_parsed_as_json_or_text():
    from rexrank.metrics.options import merge_options, parse_metric_options

    got = parse_metric_options(
        ["bertscore.idf=true", "bertscore.batch_size=8", "sembscore.checkpoint_path=/data/chexbert.pth"],
        ["bertscore", "sembscore"],
    )
    assert got == {"bertscore": {"idf": True, "batch_size": 8}, "sembscore": {"checkpoint_path": "/data/chexbert.pth"}}
    assert merge_options({"a": {"x": 1, "y": 2}}, {"a": {"y": 3}}) == {"a": {"x": 1, "y": 3}}
