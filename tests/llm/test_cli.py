"""`rexrank score --metrics green,fineradscore,spec_cxr --llm-base-url ... --llm-model ...` end to end."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from support.llm_fake_server import FakeOpenAIServer, Reply, chat_body, completion_body
from rexrank.data import data_path
from rexrank.results_schema import leaderboard_values


def script(path, body):
    if path.endswith("/v1/completions"):
        return Reply(body=completion_body("[Explanation]:\nx\n\n[Clinically Significant Errors]:\n(a) X: 1. y\n\n[Matched Findings]:\n1. z"))
    if "Entities (use these exact names" in body["messages"][0]["content"]:
        return Reply(body=chat_body('{"entities": []}'))
    return Reply(body=chat_body('{"corrections": [{"line": 0, "action": "edit", "corrected_text": "a", "severity": "urgent"}]}'))


def test_score_cli_with_llm_flags(tmp_path):
    with FakeOpenAIServer(script) as server:
        out = subprocess.run(
            [
                sys.executable, "-m", "rexrank.cli.main", "score", "--dataset", "example", "--predictions",
                str(data_path("example_predictions.json")), "--metrics", "green,fineradscore,spec_cxr",
                "--llm-base-url", server.base_url, "--llm-model", "judge", "--out", str(tmp_path / "r.json"), "--no-progress",
            ],
            capture_output=True, text=True, env=os.environ.copy(), timeout=300,
        )
        assert out.returncode == 0, out.stderr
        models = {body["model"] for _, body in server.requests}
    assert models == {"judge"}
    results = json.loads((tmp_path / "r.json").read_text())
    green = results["metrics"]["green"]
    assert green["scores"]["green"]["mean"] == pytest.approx(0.5) and green["n_failed"] == 0
    frs = results["metrics"]["fineradscore"]
    n = results["test_set"]["n_studies"]
    # the empty prediction has no line 0 to edit: re-asked, then reported as failed (not 0)
    assert frs["n_failed"] == len(frs["failures"]) >= 1
    assert frs["scores"]["fineradscore"]["n"] == n - frs["n_failed"]
    assert leaderboard_values(results)["fineradscore_inv"]["mean"] == pytest.approx(1 / 3)
    assert "fineradscore" in out.stdout and "spec_cxr" in out.stdout
