"""FineRadScore: line splitting, answer validation, re-asking, rates, strata, leaderboard value."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from support.llm_fake_server import FakeOpenAIServer, Reply, chat_body
from rexrank.errors import MetricError
from rexrank.metrics.fineradscore import error_rates, rates_by_stratum
from rexrank.metrics.fineradscore_text import (
    SYSTEM_PROMPT,
    AnswerError,
    build_messages,
    parse_answer,
    severities,
    split_lines,
)
from rexrank.metrics.registry import get_metric
from rexrank.results_schema import leaderboard_values


def test_line_splitting_as_the_official_runner():
    assert split_lines("No effusion. Heart size 2.5 cm. Lungs clear.") == ["No effusion.", "Heart size 2.5 cm.", "Lungs clear."]
    # a '.' after a digit does not split; quotes go; the final '.' is not doubled
    assert split_lines('Tube 3. cm above "carina". Stable.') == ["Tube 3. cm above carina.", "Stable."]
    assert split_lines("") == []
    assert split_lines("No acute process") == ["No acute process."]


def test_a_blank_piece_is_dropped_as_the_official_runner_drops_it():
    # "A.  . B." splits into "A", " " and "B.": the official runner removes the first " " piece
    assert split_lines("A.  . B.") == ["A.", "B."]


def test_the_judge_gets_the_rubric_and_the_numbered_candidate_beside_the_reference():
    messages, n_lines = build_messages("No effusion. Lungs clear.", "Small left effusion.")
    assert n_lines == 2
    assert messages == [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "CANDIDATE (numbered lines):\n[0] No effusion. [1] Lungs clear.\n\n"
                                    "REFERENCE:\nSmall left effusion."},
    ]


def answer(*corrections):
    return json.dumps({"corrections": list(corrections)})


def fix(line, severity, action="edit"):
    return {"line": line, "action": action, "corrected_text": "x", "severity": severity, "error_categories": ["false finding"], "comment": ""}


def test_answer_validation():
    assert severities(parse_answer(answer(), 2)) == []
    got = parse_answer("```json\n" + answer(fix(0, "Urgent error"), fix(None, "Not actionable", "insert")) + "\n```", 2)
    assert severities(got) == [3, 1]
    for bad, why in [
        ("{not json", "not valid JSON"),
        (answer(fix(5, "urgent")), "line id 0..1"),
        (answer(fix(2, "urgent")), "line id 0..1"),  # one past the last line
        (answer(fix(None, "urgent", "insert"), fix(5, "urgent")), "line id 0..1"),  # checked after an insert too
        (answer(fix(0, "catastrophic")), "severity"),
        (json.dumps({"0": {"corrections": "x"}}), "corrections"),
    ]:
        with pytest.raises(AnswerError, match=why):
            parse_answer(bad, 2)


def test_error_rates_on_constructed_severities():
    m = [0, 1, 2, 3, 4, 1, math.nan, 2]
    r = error_rates(m)
    kept = np.array([0, 1, 2, 3, 4, 1, 2])
    assert r["n"] == 7 and r["n_failed"] == 1
    assert r["fineradscore"] == pytest.approx(kept.mean()) and r["fineradscore_inv"] == pytest.approx(1 / kept.mean())
    assert r["no_error_rate"] == pytest.approx(1 / 7)
    assert r["no_actionable_error_rate"] == pytest.approx(3 / 7)  # max <= 1
    assert r["no_significant_error_rate"] == pytest.approx(5 / 7)  # max <= 2
    assert error_rates(m, no_significant_max=1)["no_significant_error_rate"] == pytest.approx(3 / 7)
    assert error_rates([0, 0])["fineradscore_inv"] == math.inf
    strata = rates_by_stratum([0, 3, 1, 4], ["a", "b", "a", "b"])
    assert strata["a"]["no_actionable_error_rate"] == 1.0 and strata["b"]["no_significant_error_rate"] == 0.0
    with pytest.raises(MetricError, match="one label per study"):
        rates_by_stratum([0, 1], ["a"])


def scripted(answers_by_candidate):
    """answers_by_candidate: candidate first line -> list of answers, one per attempt."""
    calls = {}

    def script(path, body):
        assert path == "/v1/chat/completions"
        assert body["temperature"] == 0.0 and body["response_format"] == {"type": "json_object"}
        user = body["messages"][1]["content"]
        key = next(k for k in answers_by_candidate if f"[0] {k}" in user)
        attempt = (len(body["messages"]) - 2) // 2  # re-asks append (assistant, user)
        calls[key] = calls.get(key, 0) + 1
        reply = answers_by_candidate[key][min(attempt, len(answers_by_candidate[key]) - 1)]
        if reply == "500":
            return Reply(500, {"error": {"message": "down"}})
        return Reply(body=chat_body(reply, prompt_tokens=100, completion_tokens=20))

    return script, calls


def test_metric_end_to_end_with_reasks_and_failures(tmp_path):
    script, calls = scripted(
        {
            "Perfect.": [answer()],
            "One urgent.": [answer(fix(0, "urgent"), fix(None, "not actionable", "insert"))],
            "Fixed on reask.": ["Sure! Here it is: {oops", answer(fix(0, "actionable nonurgent"))],
            "Never valid.": ["nope"],
            "Server down.": ["500"],
            "Emergent.": [answer(fix(0, "Emergent error"), fix(0, "not actionable"))],
        }
    )
    preds = ["Perfect.", "One urgent.", "Fixed on reask.", "Never valid.", "Server down.", "Emergent. Second line."]
    refs = ["ref"] * len(preds)
    with FakeOpenAIServer(script) as server:
        opts = dict(model="judge", base_url=server.base_url, backoff=0.01, max_retries=0, cache_dir=str(tmp_path / "c"), progress=False)
        metric = get_metric("fineradscore", max_reasks=2, strata=["x", "x", "y", "y", "y", "x"], **opts)
        result = metric.score(preds, refs)
        expected = [0, 3, 2, math.nan, math.nan, 4]
        np.testing.assert_array_equal(result.primary, expected)
        np.testing.assert_array_equal(result.per_study["fineradscore_sum"], [0, 4, 2, math.nan, math.nan, 5])
        assert set(result.failures) == {3, 4}
        assert "invalid answer after 3 attempt(s)" in result.failures[3] and "HTTP 500" in result.failures[4]
        assert result.details["n_failed"] == 2
        assert calls["Fixed on reask."] == 2 and calls["Never valid."] == 3
        kept = np.array([0, 3, 2, 4])
        assert result.value == pytest.approx(kept.mean())
        assert result.corpus["fineradscore_inv"] == pytest.approx(1 / kept.mean())
        assert result.corpus["fineradscore_no_actionable_error"] == pytest.approx(1 / 4)
        assert result.corpus["fineradscore_no_significant_error"] == pytest.approx(2 / 4)
        assert result.details["strata"]["x"]["n"] == 3 and result.details["strata"]["y"]["n_failed"] == 2
        assert result.details["llm_usage"]["prompt_tokens"] > 0
        before = server.count()
        get_metric("fineradscore", **opts).score(preds[:3], refs[:3])
        assert server.count() == before  # every successful answer (and re-ask) came from the cache


def test_leaderboard_reads_one_over_mean_max_severity(tmp_path):
    """Through the real scoring engine: the leaderboard's 1/FineRadScore = 1 / mean(max severity)."""
    from rexrank.scoring import score_predictions
    from rexrank.submissions import Predictions

    sev = {"A.": 0, "B.": 3, "C.": 2, "D.": 4, "E.": 1}
    script, _ = scripted({k: [answer(fix(0, ["no error", "not actionable", "actionable nonurgent", "urgent", "emergent"][v]))] for k, v in sev.items()})
    with FakeOpenAIServer(script) as server:
        preds = Predictions(ids=list("abcde"), texts=list(sev), source="test", n_empty=0)
        run = score_predictions(
            preds,
            ["ref"] * 5,
            metrics="fineradscore",
            metric_options={"fineradscore": dict(model="judge", base_url=server.base_url, cache_dir=str(tmp_path), progress=False)},
            progress=False,
        )
    values = leaderboard_values(run.results)["fineradscore_inv"]
    assert values["mean"] == pytest.approx(1 / np.mean(list(sev.values())))
    assert values["n"] == 5
    np.testing.assert_array_equal(run.per_study["fineradscore"], list(sev.values()))


def test_bad_options():
    with pytest.raises(MetricError, match="severity 0-4"):
        get_metric("fineradscore", model="m", base_url="http://127.0.0.1:9/v1", no_actionable_max=7)
    with pytest.raises(MetricError, match="strata"):
        get_metric("fineradscore", model="m", base_url="http://127.0.0.1:9/v1", strata=["a"]).score(["x", "y"], ["x", "y"])


@pytest.mark.parametrize("label, score", [("no error", 0), ("not actionable", 1), ("actionable nonurgent", 2),
                                          ("urgent", 3), ("emergent", 4)])
def test_each_severity_in_each_spelling_a_judge_writes_gives_its_score(label, score):
    # the README's 0-4 scale; a judge writes "Urgent error", "ACTIONABLE-NONURGENT", extra spaces
    spellings = {label, label.upper(), label.replace(" ", "-"), f" {label.title()}  "}
    if label != "no error":
        spellings.add(f"{label.capitalize()} error")
    for spelling in spellings:
        assert severities(parse_answer(answer(fix(0, spelling)), 1)) == [score], spelling
    assert severities(parse_answer(answer(fix(None, label, "insert"), fix(0, label, "delete")), 1)) == [score, score]
