"""The evaluate modules of the LLM metrics load offline and follow the bleu2 output contract."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.llm_fake_server import FakeOpenAIServer, Reply, chat_body, completion_body

ROOT = Path(__file__).resolve().parents[2]


def script(path, body):
    if path.endswith("/completions") and "prompt" in body:
        return Reply(body=completion_body("[Explanation]:\nok\n\n[Clinically Significant Errors]:\n(a) X: 1. y\n\n[Matched Findings]:\n3. a; b; c"))
    system = body["messages"][0]["content"]
    if system.startswith("You are an expert radiology evaluator"):  # CRIMSON: 1 of 2 urgent findings matched
        findings = [{"id": "R1", "clinical_significance": "urgent"}, {"id": "R2", "clinical_significance": "urgent"}]
        return Reply(body=chat_body(json.dumps({"reference_findings": findings, "predicted_findings": [{"id": "P1"}],
                                                "matched_findings": [{"ref_id": "R1", "pred_id": "P1"}],
                                                "errors": {"missing_findings": ["R2"]}})))
    if "Entities (use these exact names" in system:
        return Reply(body=chat_body(json.dumps({"entities": [{"entity": "pneumothorax", "presence": "FP"}]})))
    return Reply(body=chat_body(json.dumps({"corrections": [{"line": 0, "action": "delete", "severity": "urgent"}]})))


@pytest.mark.parametrize("name, expected", [("green", 0.75), ("crimson", 0.5), ("fineradscore", 3.0), ("spec_cxr", 1.0)])
def test_module_contract(name, expected, tmp_path):
    import evaluate

    for card_line in ("---", "title:", "sdk: gradio", "app_file: app.py"):
        assert card_line in (ROOT / "metrics" / name / "README.md").read_text()
    module = evaluate.load(str(ROOT / "metrics" / name))
    with FakeOpenAIServer(script) as server:
        out = module.compute(
            predictions=["No pneumothorax."],
            references=["Small pneumothorax."],
            base_url=server.base_url,
            model="judge",
            cache_dir=str(tmp_path),
            progress=False,
        )
    assert out[name] == pytest.approx(expected) and out["per_study"] == [pytest.approx(expected)]
    assert out["config"]["name"] == name and "api_key" not in json.dumps(out["config"])
    assert out["details"]["llm_usage"]["requests"] == 1
