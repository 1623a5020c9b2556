"""What a new user meets in the first hour of the command line (issue 21, point 5): one
meaning of --data-dir everywhere, analyze reusing the folder a run was scored with, the same
progress flags on every command, help without '%%', `rexrank list` and `weights status`
telling the truth."""
from __future__ import annotations

import json
import shutil

import pytest

import rexrank.testsets.download as download
from support.paths import shared_path
from rexrank.cli.main import build_parser, main
from rexrank.data import data_path
from rexrank.errors import TestSetError
from rexrank.testsets.loading import resolve_file
from rexrank.testsets.registry import get_spec

EXAMPLE_TEST = data_path("example_test.json")


@pytest.fixture
def no_download(monkeypatch):
    """A public test set must come from the user's folder: a download attempt fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("tried to download a test set the user's folder holds")

    monkeypatch.setattr(download, "fetch_pinned", refuse)


@pytest.fixture
def mimic_like(tmp_path):
    """A data folder laid out as the ReXrank repository's data/: mimic-cxr/ReXRank_MIMICCXR_test.json
    (the example's studies under MIMIC's file name; only where it is found is tested)."""
    folder = tmp_path / "data" / "mimic-cxr"
    folder.mkdir(parents=True)
    shutil.copy(EXAMPLE_TEST, folder / "ReXRank_MIMICCXR_test.json")
    return tmp_path / "data"


@pytest.mark.parametrize("given", ["parent", "own_folder", "file", "env_parent", "env_file"])
def test_data_dir_has_one_meaning_in_every_form(given, mimic_like, monkeypatch):
    spec = get_spec("mimic_cxr")
    expected = mimic_like / "mimic-cxr" / "ReXRank_MIMICCXR_test.json"
    value = {"parent": mimic_like, "own_folder": mimic_like / "mimic-cxr", "file": expected,
             "env_parent": None, "env_file": None}[given]
    if given.startswith("env"):
        monkeypatch.setenv("REXRANK_DATA_DIR", str(mimic_like if given == "env_parent" else expected))
    assert resolve_file(spec, value) == expected


def test_a_sub_folder_named_as_rexrank_names_the_test_set_is_found(tmp_path):
    (tmp_path / "mimic_cxr").mkdir()
    shutil.copy(EXAMPLE_TEST, tmp_path / "mimic_cxr" / "ReXRank_MIMICCXR_test.json")
    assert resolve_file(get_spec("mimic_cxr"), tmp_path) == tmp_path / "mimic_cxr" / "ReXRank_MIMICCXR_test.json"


def test_a_folder_without_a_non_public_test_set_names_where_it_looked(tmp_path, monkeypatch):
    with pytest.raises(TestSetError, match=r"none of ReXRank_MIMICCXR_test.json found in --data-dir .* or its mimic_cxr/ sub-folder"):
        resolve_file(get_spec("mimic_cxr"), tmp_path)
    monkeypatch.setenv("REXRANK_DATA_DIR", str(tmp_path))
    with pytest.raises(TestSetError, match=r"found in \$REXRANK_DATA_DIR"):
        resolve_file(get_spec("mimic_cxr"), None)


def test_analyze_reuses_the_folder_the_run_was_scored_with(tmp_path, no_download, capsys):
    iu = shared_path("data", "iu_xray")
    preds = shared_path("validation", "moerad_iu", "MoERad.json")
    runs = []
    for name in ("a", "b"):
        out = tmp_path / f"{name}.parquet"
        assert main(["score", "--dataset", "iu_xray", "--data-dir", str(iu.parent), "--predictions", str(preds),
                     "--per-study", str(out), "--no-progress"]) == 0
        runs.append(f"{name}={out}")
    capsys.readouterr()
    assert main(["analyze", *runs, "--out", str(tmp_path / "report"), "--bootstrap", "20", "--no-progress",
                 "--strata", "split"]) == 0
    printed = capsys.readouterr().out
    assert "were not loaded" not in printed  # the attributes came from the folder scoring used


def test_every_command_spells_the_progress_flag_the_same_way():
    parser = build_parser()
    defaults = {}
    for command in ("score", "analyze", "backend"):
        on = parser.parse_args([command, *REQUIRED[command], "--progress"]).progress
        off = parser.parse_args([command, *REQUIRED[command], "--no-progress"]).progress
        assert (on, off) == (True, False), command
        defaults[command] = parser.parse_args([command, *REQUIRED[command]]).progress
    assert defaults == {"score": True, "analyze": True, "backend": False}


REQUIRED = {"score": ["--dataset", "example", "--predictions", "p.json"], "analyze": ["a.parquet", "--out", "o"],
            "backend": []}


def test_help_shows_no_doubled_percent_signs(capsys):
    for command in ("score", "analyze", "backend", "submit", "leaderboard", "status", "weights", "list"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "%%" not in capsys.readouterr().out, command


def test_submit_and_leaderboard_help_describe_the_data_dir_as_score_does(capsys):
    texts = {}
    for command in ("score", "submit", "leaderboard", "backend", "analyze"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        texts[command] = " ".join(capsys.readouterr().out.split())
    for command, text in texts.items():
        assert "IU-Xray" in text and "REXRANK_DATA_DIR" in text, command


def test_scoring_prints_no_progress_bars_of_the_datasets_library(tmp_path, capfd):
    test = tmp_path / "example_test.json"
    shutil.copy(EXAMPLE_TEST, test)  # a file no other test loaded: the builder runs here
    assert main(["score", "--dataset", "example", "--data-dir", str(test),
                 "--predictions", str(data_path("example_predictions.json")), "--no-progress"]) == 0
    printed = capfd.readouterr()
    assert "Generating test split" not in printed.err + printed.out
    assert "Filter" not in printed.err + printed.out


def test_list_counts_the_example_and_says_what_each_metric_runs_on(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    n_example = len(json.loads(EXAMPLE_TEST.read_text()))
    assert f"— {n_example} studies" in out and "? studies" not in out
    green = next(line for line in out.splitlines() if line.strip().startswith("green "))
    assert "LLM judge" in green and "needs: models" not in green


def test_weights_status_fails_while_a_metric_cannot_run(monkeypatch, capsys):
    for name in ("REXRANK_LLM_BASE_URL", "OPENAI_BASE_URL", "REXRANK_LLM_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert main(["weights", "status", "bleu2"]) == 0
    assert main(["weights", "status", "fineradscore"]) == 1
    assert "fineradscore: NOT ready" in capsys.readouterr().out
    monkeypatch.setenv("REXRANK_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    assert main(["weights", "status", "fineradscore"]) == 0
    assert main(["weights", "status", "bleu2", "sembscore"]) == 1  # no CheXbert in the test's empty cache


def test_radcliq_offline_names_every_missing_checkpoint_and_one_command(capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["score", "--dataset", "example", "--predictions", str(data_path("example_predictions.json")),
                 "--metrics", "radcliq", "--no-progress"]) == 1
    captured = capsys.readouterr()
    printed = " ".join((captured.out + captured.err).split())
    for checkpoint in ("radgraph.tar.gz", "distilroberta-base", "chexbert.pth", "bert-base-uncased"):
        assert checkpoint in printed, checkpoint
    assert "`rexrank weights download radcliq`" in printed
    assert "hf download" not in printed  # advice for one file of four is not the advice
