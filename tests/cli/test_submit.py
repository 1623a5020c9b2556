"""`rexrank submit / backend / status` end to end on the embedded example test set."""
from __future__ import annotations

import json

from rexrank.cli.main import main
from rexrank.scoring import score_submission
from support.requests import EXAMPLE_PREDS, variant


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_submit_backend_status_end_to_end(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("REXRANK_QUOTA", raising=False)
    store = str(tmp_path / "store")
    code, out, _ = run(capsys, "submit", "--store", store, "--dataset", "example", "--predictions", str(EXAMPLE_PREDS),
                       "--model-name", "Example model", "--submitter", "alice", "--institution", "Lab", "--json")
    assert code == 0
    submitted = json.loads(out)
    assert submitted["status"] == "PENDING" and set(submitted) == {"id", "status"}

    # identical resubmission and quota are refused with a message, exit 1
    code, _, err = run(capsys, "submit", "--store", store, "--dataset", "example", "--predictions", str(EXAMPLE_PREDS),
                       "--model-name", "Example model", "--submitter", "alice")
    assert code == 1 and "identical resubmission" in err
    code, _, err = run(capsys, "submit", "--store", store, "--dataset", "example", "--predictions", str(variant(tmp_path, 1)),
                       "--model-name", "Another", "--submitter", "alice", "--quota", "1/7")  # a local store has none
    assert code == 1 and "limit 1" in err and "(the quota is set with --quota)" in err
    code, _, err = run(capsys, "submit", "--store", store, "--dataset", "example", "--predictions", str(tmp_path / "nope.json"),
                       "--model-name", "x", "--submitter", "bob")
    assert code == 1 and "file not found" in err

    code, out, _ = run(capsys, "status", "--store", store)
    assert code == 0 and submitted["id"] in out and "PENDING" in out

    code, _, _ = run(capsys, "backend", "--store", store, "--once", "--metrics", "bleu2", "--worker-id", "cli-worker")
    assert code == 0

    code, out, _ = run(capsys, "status", "--store", store, submitted["id"], "--json")
    status = json.loads(out)
    assert set(status) == {"id", "status", "error", "results"}
    assert status["status"] == "FINISHED" and status["error"] is None
    direct = score_submission("example", "findings", EXAMPLE_PREDS, metrics="bleu2", progress=False)
    s = direct.results["metrics"]["bleu2"]["scores"]["bleu2"]
    assert status["results"]["bleu2"] == {"mean": s["mean"], "ci95": s["ci95"], "n": s["n"]}

    code, out, _ = run(capsys, "status", "--store", store, submitted["id"])
    assert code == 0 and "FINISHED" in out and f"{s['mean']:.4f}" in out

    code, out, _ = run(capsys, "status", "--store", store, "--json")
    [listed] = json.loads(out)
    assert listed["id"] == submitted["id"] and listed["status"] == "FINISHED"


def test_backend_with_unknown_metric_exits_with_message(tmp_path, capsys):
    code, _, err = run(capsys, "backend", "--store", str(tmp_path / "s"), "--once", "--metrics", "bleu2,nosuch")
    assert code == 1 and "unknown metric(s) 'nosuch'" in err


def test_status_of_unknown_request(tmp_path, capsys):
    from rexrank.store import open_store

    open_store(tmp_path / "s")
    code, _, err = run(capsys, "status", "--store", str(tmp_path / "s"), "20990101T000000.000000-0123456789")
    assert code == 1 and "no request '20990101T000000.000000-0123456789'" in err


def test_status_of_a_store_that_does_not_exist_creates_nothing(tmp_path, capsys):
    code, _, err = run(capsys, "status", "--store", str(tmp_path / "typo"))
    assert code == 1 and f"store folder {tmp_path / 'typo' / 'requests'} does not exist" in err
    assert not (tmp_path / "typo").exists()
