"""Issue 31: the README's "Use" commands work as printed, in order, on a fresh store. Run
offline: what needs the Hub or the network is replaced, each replacement named here
(REPLACED), never silently; everything else runs as the README prints it."""
from __future__ import annotations

import json
import re
import shlex

import pandas as pd
import pytest

from rexrank.cli.main import main
from support.paths import PROJECT_ROOT, shared_path

README = PROJECT_ROOT / "README.md"
# what an offline test cannot run as printed, and what it runs instead
REPLACED = {
    "weights download": "fetches checkpoints from the Hub: not run",
    "--metrics bleu2,bertscore,sembscore,radgraph,radcliq": "model metrics need checkpoints from the Hub: --metrics bleu2",
    "leaderboard": "serves until stopped: the app is built, gradio's launch returns at once",
}


def use_commands() -> list[list[str]]:
    """The README's "Use" block as argument lists (continuation lines joined, comments dropped)."""
    block = re.search(r"^## Use\n.*?```bash\n(.*?)```", README.read_text(encoding="utf-8"), re.S | re.M).group(1)
    return [shlex.split(line, comments=True) for line in block.replace("\\\n", " ").splitlines() if line.strip()]


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A working folder as the README's reader has it: the checkout's src/, IU-Xray offline
    (the pinned public file, from ../shared), a model's predictions as preds.csv and, with
    other column names, model_repo.csv."""
    iu = shared_path("data", "iu_xray")
    preds = json.loads(shared_path("validation", "moerad_iu", "MoERad.json").read_text())
    (tmp_path / "src").symlink_to(PROJECT_ROOT / "src")
    ids, texts = list(preds), [p["model_prediction"] for p in preds.values()]
    pd.DataFrame({"id": ids, "prediction": texts}).to_csv(tmp_path / "preds.csv", index=False)
    pd.DataFrame({"dicom_id": ids, "generated": texts}).to_csv(tmp_path / "model_repo.csv", index=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REXRANK_DATA_DIR", str(iu))
    monkeypatch.delenv("REXRANK_STORE", raising=False)
    import gradio

    monkeypatch.setattr(gradio.Blocks, "launch", lambda self, *a, **k: None)
    return tmp_path


def test_the_use_commands_run_in_order_on_a_fresh_store(checkout, capsys):
    commands = use_commands()
    assert commands[0][:2] == ["source", ".venv/bin/activate"]  # bare `rexrank` needs the venv's bin on PATH
    if (PROJECT_ROOT / ".venv").is_dir():  # the set-up command made it: the line names its activation script
        assert (PROJECT_ROOT / ".venv" / "bin" / "activate").is_file()
    ran = []
    for argv in commands[1:]:
        assert argv[0] == "rexrank", argv
        line = " ".join(argv[1:])
        if line.startswith("weights download"):
            continue  # REPLACED
        line = line.replace("--metrics bleu2,bertscore,sembscore,radgraph,radcliq", "--metrics bleu2")  # REPLACED
        rc = main(shlex.split(line))
        printed = capsys.readouterr()
        ran.append(argv[1])
        if line.startswith("weights status"):
            assert rc in (0, 1), printed.err  # 1: a metric's weights are missing, which it lists
            continue
        assert rc == 0, f"`rexrank {line}` exited {rc}: {printed.err[-2000:]}"
        if argv[1] == "submit":
            assert "http://127.0.0.1:7860/?tab=iu_xray&model=me+%2F+MyModel" in printed.out  # the table, on "me / MyModel"
        if argv[1] == "export":
            assert "wrote my-model-repo/.eval_results/rexrank_iu_xray_findings.yaml (1 scores)" in printed.out
    assert ran == ["list", "weights", "score", "score", "score", "analyze", "submit", "backend", "leaderboard", "export"]
    assert (checkout / "report").is_dir() and (checkout / "results.json").exists()


def test_backend_once_exits_non_zero_when_a_request_it_processed_failed(tmp_path, monkeypatch, capsys):
    from rexrank.backend.worker import Worker
    from rexrank.data import data_path

    store = str(tmp_path / "store")
    assert main(["submit", "--store", store, "--dataset", "example", "--predictions", str(data_path("example_predictions.json")),
                 "--model-name", "M", "--submitter", "me"]) == 0

    def broken(self, request, keeper):
        raise RuntimeError("a metric could not run")

    monkeypatch.setattr(Worker, "_process", broken)
    assert main(["backend", "--store", store, "--once", "--metrics", "bleu2", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "1 request(s) FAILED" in err and "--metrics bleu2" in err and "rexrank requeue" in err
