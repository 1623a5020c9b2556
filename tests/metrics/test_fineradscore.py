"""FineRadScore: line splitting, answer validation, re-asking, rates, strata, leaderboard value."""
from __future__ import annotations

import json
import math
import re

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


def test_config_records_the_prompt_the_judges_settings_and_the_thresholds():
    default = get_metric("fineradscore", model="m", base_url="http://127.0.0.1:9/v1").config()
    assert (default["max_reasks"], default["max_tokens"], default["json_mode"]) == (2, 2048, True)
    assert (default["no_actionable_max"], default["no_significant_max"]) == (1, 2)
    metric = get_metric("fineradscore", model="m", base_url="http://127.0.0.1:9/v1", no_actionable_max=0,
                        no_significant_max=3, max_reasks=1, max_tokens=512, json_mode=False)
    assert metric.config() == {**metric.llm_config(), "prompt": "rexrank-fineradscore-v1", "temperature": 0.0,
                               "max_tokens": 512, "json_mode": False, "max_reasks": 1, "no_actionable_max": 0,
                               "no_significant_max": 3, "report_score": "max line severity"}


def test_each_stratum_takes_the_thresholds_given():
    """a: maxima 0 and 1; b: 3 and 4. No actionable error is max <= 0 here, no significant
    error max <= 3."""
    strata = rates_by_stratum([0, 3, 1, 4], ["a", "b", "a", "b"], no_actionable_max=0, no_significant_max=3)
    assert [strata[k]["no_actionable_error_rate"] for k in "ab"] == [0.5, 0.0]
    assert [strata[k]["no_significant_error_rate"] for k in "ab"] == [1.0, 0.5]


def test_aggregate_from_rows_takes_the_runs_thresholds():
    """Rows by hand: maxima 0, 1, 3 and a failure; thresholds 0 (no actionable) and 3 (no
    significant). Mean 4/3, 1/mean 3/4; no error 1 of 3, max <= 0 1 of 3, max <= 3 3 of 3."""
    from rexrank.metrics.base import StudyRows
    from rexrank.metrics.fineradscore import FineRadScore

    rows = StudyRows({"fineradscore": np.array([0.0, 1.0, 3.0, math.nan])}, {"stratum": ["a", "b", "a", "b"]},
                     {3: "LLM call failed: down"}, {"thresholds": {"no_actionable_max": 0, "no_significant_max": 3},
                                                    "llm_prices": {"price_input_per_mtok": None, "price_output_per_mtok": None}},
                     {"reasks": 2, "llm_usage": {"requests": 4}})
    result = FineRadScore.aggregate(rows)
    assert result.corpus["fineradscore"] == pytest.approx(4 / 3) and result.corpus["fineradscore_inv"] == pytest.approx(3 / 4)
    rates = result.details["rates"]
    assert (rates["n"], rates["n_failed"]) == (3, 1)
    assert (rates["no_error_rate"], rates["no_actionable_error_rate"], rates["no_significant_error_rate"]) == pytest.approx(
        (1 / 3, 1 / 3, 1.0))
    assert result.details["thresholds"] == {
        "no_actionable_max": 0, "no_significant_max": 3,
        "note": "no actionable error: max severity <= no_actionable_max; no significant error: <= no_significant_max "
                "(our reading; the Challenge paper does not define them)"}
    strata = result.details["strata"]  # a: maxima 0 and 3; b: 1 and a failure
    assert (strata["a"]["no_actionable_error_rate"], strata["a"]["no_significant_error_rate"]) == (0.5, 1.0)
    assert (strata["b"]["no_actionable_error_rate"], strata["b"]["n_failed"]) == (0.0, 1)
    assert (result.details["reasks"], result.details["n_failed"], result.details["failed_positions"]) == (2, 1, [3])
    assert result.details["llm_usage"]["requests"] == 4


@pytest.mark.parametrize("json_mode", [True, False])
def test_json_mode_asks_an_openai_endpoint_for_a_json_object_and_nothing_else_does(json_mode, tmp_path):
    bodies = []

    def script(path, body):
        bodies.append(body)
        return Reply(body=chat_body(answer()))

    with FakeOpenAIServer(script) as server:
        get_metric("fineradscore", model="judge", base_url=server.base_url, json_mode=json_mode, max_tokens=300, seed=7,
                   cache_dir=str(tmp_path), progress=False).score(["Clear."], ["Clear."])
    (body,) = bodies
    assert (body["temperature"], body["max_tokens"], body["seed"]) == (0.0, 300, 7)
    assert body.get("response_format") == ({"type": "json_object"} if json_mode else None)


def test_thresholds_are_severities_0_to_4_and_re_asks_none_or_more():
    options = dict(model="m", base_url="http://127.0.0.1:9/v1")
    for name in ("no_actionable_max", "no_significant_max"):
        for bad in (-1, 5, 2.5):
            with pytest.raises(MetricError) as err:
                get_metric("fineradscore", **options, **{name: bad})
            assert str(err.value) == f"fineradscore: {name} must be a severity 0-4, got {bad!r}"
        for good in (0, 4):
            assert get_metric("fineradscore", **options, **{name: good}).config()[name] == good
    assert get_metric("fineradscore", **options, max_reasks=0).config()["max_reasks"] == 0
    with pytest.raises(MetricError) as err:
        get_metric("fineradscore", **options, max_reasks=-1)
    assert str(err.value) == "fineradscore: max_reasks must be >= 0, got -1"


def test_the_judge_sees_the_pair_and_each_re_ask_names_the_problem_and_the_last_line_id(tmp_path, capsys):
    """Three lines (ids 0-2) and one line (id 0), each first answered with no JSON, then
    validly; a third study's call fails: its every column is NaN. The bar is labelled."""
    replies = {"A.": ["nope", answer()], "Clear.": ["nope", answer(fix(0, "not actionable"), fix(None, "not actionable", "insert"))]}
    conversations = []

    def script(path, body):
        conversations.append(body["messages"])
        user = body["messages"][1]["content"]
        if "[0] Down." in user:
            return Reply(500, {"error": {"message": "down"}})
        key = "A." if "[0] A." in user else "Clear."
        return Reply(body=chat_body(replies[key][(len(body["messages"]) - 2) // 2]))

    preds, refs = ["A. B. C.", "Clear.", "Down."], ["Effusion.", "Edema.", "Normal."]
    with FakeOpenAIServer(script) as server:
        result = get_metric("fineradscore", model="judge", base_url=server.base_url, backoff=0.01, max_retries=0,
                            cache_dir=str(tmp_path), progress=True).score(preds, refs)
    assert re.search(r"(^|\r)FineRadScore: ", capsys.readouterr().err)  # tqdm's bar, labelled
    with pytest.raises(AnswerError) as err:
        parse_answer("nope", 3)
    for pred, ref, last_id in (("A. B. C.", "Effusion.", 2), ("Clear.", "Edema.", 0)):
        first, again = [c for c in conversations if c[:2] == build_messages(pred, ref)[0]]
        assert len(first) == 2 and again[2:] == [
            {"role": "assistant", "content": "nope"},
            {"role": "user", "content": f"Your answer could not be used: {err.value}\nReply again with only the JSON object "
                                        f'{{"corrections": [...]}} in the format described, using candidate line ids '
                                        f"between 0 and {last_id}."}]
    columns = result.per_study
    # maxima 0 and 1 (two not-actionable corrections): no actionable error is max <= 1
    expected = {"fineradscore": [0, 1], "fineradscore_sum": [0, 2], "fineradscore_n_corrections": [0, 2],
                "fineradscore_no_error": [1, 0], "fineradscore_no_actionable_error": [1, 1],
                "fineradscore_no_significant_error": [1, 1]}
    for name, values in expected.items():
        assert columns[name].dtype == np.float64 and list(columns[name][:2]) == values and math.isnan(columns[name][2]), name
    assert result.details["reasks"] == 2 and list(result.failures) == [2]
    assert result.failures[2].startswith("LLM call failed: HTTP 500")


def test_error_rates_read_a_null_as_a_study_not_scored():
    """A JSON null (None) is a failed study like NaN: maxima 0 and 3 scored, mean 1.5."""
    r = error_rates([0, None, 3])
    assert (r["n"], r["n_failed"], r["fineradscore"], r["fineradscore_inv"]) == (2, 1, 1.5, pytest.approx(2 / 3))
    assert (r["no_error_rate"], r["no_actionable_error_rate"], r["no_significant_error_rate"]) == (0.5, 0.5, 0.5)


def test_error_rates_of_no_scored_study_are_nan_without_a_warning():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "Mean of empty slice" would reach the user's terminal
        r = error_rates([math.nan, math.nan])
    assert (r["n"], r["n_failed"]) == (0, 2)
    assert all(math.isnan(r[k]) for k in ("fineradscore", "fineradscore_inv", "no_error_rate", "no_actionable_error_rate",
                                            "no_significant_error_rate"))
