"""A fake LLM judge that answers only some studies, and the options that point a metric at it."""
from __future__ import annotations

import hashlib
import json

from support.llm_fake_server import Reply, chat_body


HEALTHY_SHARE = 0.3  # of the 19 example studies, a few are answered


def judge(state: dict):
    """FineRadScore's judge: one non-actionable error per report; while `state["broken"]`, HTTP 500 for
    most studies (chosen by a hash of the candidate report, so retries fail too)."""

    def script(path, body):
        user = body["messages"][1]["content"]
        state["calls"] = state.get("calls", 0) + 1
        lucky = int(hashlib.sha256(user.encode()).hexdigest(), 16) % 100 < HEALTHY_SHARE * 100
        if state.get("broken") and not lucky:
            return Reply(500, {"error": {"message": "overloaded"}})
        corrections = [{"line": 0, "action": "edit", "corrected_text": "x", "severity": "not actionable",
                        "error_categories": ["false finding"], "comment": ""}] if "[0] " in user else []
        return Reply(body=chat_body(json.dumps({"corrections": corrections})))

    return script


def llm_options(server, tmp_path) -> dict:
    return {"fineradscore": dict(model="judge", base_url=server.base_url, backoff=0.01, max_retries=1,
                                 cache_dir=str(tmp_path / "llm-cache"), progress=False)}
