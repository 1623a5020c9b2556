"""Test sets are loaded once per process and per content of their file (issue 15), and
`datasets` is imported only where a builder runs."""
from __future__ import annotations

import json
import subprocess
import sys

import rexrank.testsets.loading as loading
from rexrank.data import data_path
from rexrank.scoring import score_submission
from support.requests import EXAMPLE_PREDS


def counting_builder(monkeypatch) -> list[str]:
    """The test sets read through the builder (every load of a file goes through `_read_studies`)."""
    calls = []
    real = loading._read_studies

    def read_studies(name, *args, **kwargs):
        calls.append(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(loading, "_read_studies", read_studies)
    return calls


def test_scoring_loads_a_test_set_once_per_content_of_its_file(tmp_path, monkeypatch):
    calls = counting_builder(monkeypatch)
    data = tmp_path / "data"
    data.mkdir()
    doc = json.loads(data_path("example_test.json").read_text())
    sid = next(iter(doc))
    doc[sid]["section_findings"] = f"A reference of this test only ({tmp_path.name})."  # no other test has this file
    (data / "example_test.json").write_text(json.dumps(doc))
    first = score_submission("example", "findings", EXAMPLE_PREDS, data_dir=data, metrics="bleu2", progress=False)
    again = score_submission("example", "findings", EXAMPLE_PREDS, data_dir=data, metrics="bleu2", progress=False)
    assert calls == ["example"]  # the second run used the cached test set
    assert again.results["metrics"] == {**first.results["metrics"], "bleu2": {
        **first.results["metrics"]["bleu2"], "seconds": again.results["metrics"]["bleu2"]["seconds"]}}
    doc[sid]["section_findings"] = "An edited reference."
    (data / "example_test.json").write_text(json.dumps(doc))
    edited = score_submission("example", "findings", EXAMPLE_PREDS, data_dir=data, metrics="bleu2", progress=False)
    assert calls == ["example", "example"]  # new content, new SHA-256: loaded again
    assert edited.results["test_set"]["references_sha256"] != first.results["test_set"]["references_sha256"]


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def test_importing_rexrank_and_its_store_and_cli_does_not_import_datasets():
    proc = run_python(
        "import sys, rexrank, rexrank.testsets.loading, rexrank.store, rexrank.store.predictions, "
        "rexrank.backend.worker, rexrank.scoring, rexrank.cli.main\n"
        "rexrank.cli.main.build_parser()\n"
        "print('datasets' in sys.modules)"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


def test_submitting_to_a_private_test_set_without_its_data_does_not_import_datasets(tmp_path):
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps({"id": f"s{i}", "prediction": "No acute findings."}) + "\n" for i in range(5)))
    proc = run_python(
        "import sys\nfrom rexrank.cli.main import main\n"
        f"code = main(['submit', '--store', {str(tmp_path / 's')!r}, '--dataset', 'rexgradient', '--predictions', "
        f"{str(preds)!r}, '--model-name', 'm', '--submitter', 'alice', '--json'])\n"
        "print(code, 'datasets' in sys.modules)"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "0 False"
