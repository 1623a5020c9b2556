"""CRIMSON as a rexrank metric: `rexrank score` columns and failures, the prompt's options,
`rexrank weights status` and `rexrank list`."""
from __future__ import annotations

import json
import math

import pytest

from rexrank.cli.main import main
from rexrank.errors import MetricError
from rexrank.metrics.crimson_text import build_prompt
from rexrank.metrics.registry import get_metric
from support.llm_fake_server import FakeOpenAIServer, Reply, chat_body
from support.paths import shared_path

PERFECT = json.dumps({"reference_findings": [{"id": "R1", "clinical_significance": "urgent"}],
                      "predicted_findings": [{"id": "P1", "clinical_significance": "urgent"}],
                      "matched_findings": [{"ref_id": "R1", "pred_id": "P1"}],
                      "errors": {"false_findings": [], "missing_findings": [], "attribute_errors": [
                          {"ref_id": "R1", "pred_id": "P1", "severity": "significant", "error_types": ["location", "severity"]}]}})


def test_per_study_columns_unreadable_answers_and_failed_calls_by_study_id(tmp_path):
    from rexrank.scoring import score_predictions
    from rexrank.submissions import Predictions

    def script(path, body):
        prompt = body["messages"][1]["content"]
        if "candidate-down" in prompt:
            return Reply(503, {"error": {"message": "overloaded"}})
        if "candidate-garbled" in prompt:
            return Reply(body=chat_body("The reports agree."))
        return Reply(body=chat_body(PERFECT))

    predictions = Predictions(ids=["s1", "s2", "s3", "s4"], texts=["candidate-ok", "candidate-garbled", "candidate-down", ""],
                              source="test", n_empty=1)
    with FakeOpenAIServer(script) as server:
        options = {"crimson": dict(base_url=server.base_url, model="judge", backoff=0.01, max_retries=1,
                                   cache_dir=str(tmp_path / "c"))}
        run = score_predictions(predictions, ["r1", "r2", "r3", "r4"], metrics=["crimson"], metric_options=options, progress=False)
    scores = run.per_study["crimson"]
    # 1 matched urgent finding with a significant attribute error: credit 1 * 1/(1 + 0.5)
    assert scores[0] == scores[3] == round(1 / 1.5, 4) and math.isnan(scores[1]) and math.isnan(scores[2])
    assert list(run.per_study["crimson_location_errors"][[0, 3]]) == [1, 1]
    assert run.per_study["crimson_weighted_attribute_errors"][0] == 0.5
    summary = run.results["metrics"]["crimson"]
    assert summary["scores"]["crimson"]["mean"] == pytest.approx(round(1 / 1.5, 4))
    assert set(summary["failures"]) == {"s2", "s3"} and "HTTP 503" in summary["failures"]["s3"]
    assert "unusable answer" in summary["failures"]["s2"]
    assert summary["details"]["unparseable_ids"] == ["s2"]


def test_patient_context_and_guidelines_change_the_prompt_as_officially():
    plain = build_prompt("Effusion.", "No effusion.", guidelines=False)
    assert "Patient Context" not in plain and "Context guidelines" not in plain and "Examples of typical" not in plain
    context = build_prompt("Effusion.", "No effusion.", {"Age": 71, "Indication": "dyspnea"}, guidelines=True)
    assert "Patient Context:\n    Age: 71\n    Indication: dyspnea\n\n\nReference Findings" in context
    assert "Context guidelines:" in context and "Examples of typical classifications" in context
    assert "Context guidelines:" not in build_prompt("a", "b", guidelines=True)  # only with a context
    with pytest.raises(MetricError, match="patient_context\\[1\\]"):
        get_metric("crimson", model_path="/x", patient_context=[None, "age 71"], progress=False)
    metric = get_metric("crimson", model_path="/x", patient_context=[None], progress=False)
    with pytest.raises(MetricError, match="1 patient contexts for 2 studies"):
        metric.requests(["a", "b"], ["c", "d"])


def test_weights_status_crimson_is_ready_with_an_endpoint_or_its_weights(monkeypatch, capsys):
    for name in ("REXRANK_LLM_BASE_URL", "OPENAI_BASE_URL", "REXRANK_LLM_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert main(["weights", "status", "crimson"]) == 1  # no weights in the test's empty cache, no endpoint
    out = capsys.readouterr().out
    assert "crimson: NOT ready" in out and "rajpurkarlab/medgemma-4b-it-crimson" in out
    assert "rexrank weights download crimson" in out
    monkeypatch.setenv("REXRANK_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    assert main(["weights", "status", "crimson"]) == 0
    assert "crimson: ready (judged by the LLM endpoint" in capsys.readouterr().out
    # GREEN has the same choice: its 7B weights or the endpoint
    assert main(["weights", "status", "green"]) == 0
    assert "green: ready (judged by the LLM endpoint" in capsys.readouterr().out
    monkeypatch.setenv("REXRANK_LLM_BACKEND", "transformers")  # the local judge asked for: its weights count
    assert main(["weights", "status", "crimson"]) == 1
    monkeypatch.delenv("REXRANK_LLM_BACKEND")
    monkeypatch.delenv("REXRANK_LLM_BASE_URL")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")  # a key alone does not move crimson off its local weights
    assert main(["weights", "status", "crimson"]) == 1


def test_list_shows_crimson(capsys):
    assert main(["list"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("crimson "))
    assert "LLM judge" in line and "MedGemma" in line


def _crimson_judge(state: dict):
    """A CRIMSON judge answering PERFECT; while `state["broken"]`, unreadable for most studies."""
    import hashlib

    def script(path, body):
        user = body["messages"][1]["content"]
        lucky = int(hashlib.sha256(user.encode()).hexdigest(), 16) % 100 < 30
        if state.get("broken") and not lucky:
            return Reply(body=chat_body("I am unable to produce JSON today."))
        return Reply(body=chat_body(PERFECT))

    return script


def test_backend_scores_crimson_when_the_store_set_names_it_with_the_llm_coverage_rule(tmp_path, monkeypatch):
    from rexrank.backend.worker import Worker
    from rexrank.leaderboard.tables import rank_choices, ranked
    from rexrank.leaderboard.records import records_frame
    from rexrank.results_schema import COLUMNS_BY_KEY, DEFAULT_RANK_KEY
    from rexrank.store import FAILED, FINISHED, Quota, open_store
    from support.requests import submit

    for name in ("REXRANK_LLM_BASE_URL", "REXRANK_LLM_MODEL", "REXRANK_LLM_BACKEND", "OPENAI_BASE_URL", "REXRANK_METRICS"):
        monkeypatch.delenv(name, raising=False)
    root = tmp_path / "s"
    store = open_store(root, quota=Quota(0))
    (root / "requests").mkdir(parents=True, exist_ok=True)
    (root / "requests" / "config.json").write_text(json.dumps({"metrics": ["bleu2"], "llm_metrics": ["crimson"]}))
    assert Worker(store, worker_id="w0").not_scored.keys() == {"crimson"}  # no LLM here: named, not scored
    state = {"broken": True}
    with FakeOpenAIServer(_crimson_judge(state)) as server:
        options = {"crimson": dict(model="judge", base_url=server.base_url, backoff=0.01, max_retries=0,
                                   cache_dir=str(tmp_path / "llm-cache"), progress=False)}
        worker = Worker(store, metric_options=options, worker_id="w")
        assert worker.metrics == ["bleu2", "crimson"]
        req = submit(store)
        worker.run(once=True)
        failed = store.get_request(req["id"])
        assert failed["status"] == FAILED and failed["failure_kind"] == "coverage" and "crimson scored" in failed["error"]
        state["broken"] = False  # readable answers are cached as they are (no re-asking, as officially): a fresh cache
        options["crimson"]["cache_dir"] = str(tmp_path / "llm-cache-2")
        req2 = submit(store, model_name="model-b")
        Worker(store, metric_options=options, worker_id="w2").run(once=True)
    assert store.get_request(req2["id"])["status"] == FINISHED
    [record] = store.list_results()
    assert record["values"]["crimson"]["mean"] == pytest.approx(round(1 / 1.5, 4))
    # on the leaderboard: an optional column one can rank by, never the default ranking
    assert COLUMNS_BY_KEY["crimson"].optional and DEFAULT_RANK_KEY != "crimson"
    assert ("CRIMSON", "crimson") in rank_choices() and rank_choices()[0][1] == DEFAULT_RANK_KEY
    table = ranked(records_frame([record]), "example", "findings", "crimson")
    assert table["crimson"].iloc[0] == pytest.approx(round(1 / 1.5, 4))


def test_patient_context_from_the_test_set_is_a_named_option(tmp_path):
    from rexrank.data import data_path
    from rexrank.metrics.crimson_context import study_context
    from rexrank.scoring import score_submission

    # CheXpert Plus records age and clinical history; IU-Xray / MIMIC-CXR an "Indication:" in `context`
    assert study_context({"age": 71.0, "section_clinical_history": " Dyspnea,\n  CHF. ", "context": "x"}) == \
        {"Age": 71, "Indication": "Dyspnea, CHF."}
    assert study_context({"context": "Indication: Chest pain, dyspnea Comparison: None."}) == {"Indication": "Chest pain, dyspnea"}
    assert study_context({"age": float("nan"), "context": "Comparison: None."}) is None
    prompts: list[str] = []

    def script(path, body):
        prompts.append(body["messages"][1]["content"])
        return Reply(body=chat_body(PERFECT))

    with FakeOpenAIServer(script) as server:
        base = dict(base_url=server.base_url, model="judge", cache_dir=str(tmp_path / "c"), progress=False)
        for context in (None, "test_set"):
            options = {"crimson": dict(base, **({"patient_context": context} if context else {}))}
            score_submission("example", "findings", data_path("example_predictions.json"), metrics=["crimson"],
                             metric_options=options, progress=False)
    n = len(prompts) // 2
    assert n > 0 and not any("Patient Context" in p for p in prompts[:n])  # official default: none
    assert all("Patient Context:\n    Indication: synthetic example.\n" in p for p in prompts[n:])
    with pytest.raises(MetricError, match="only `rexrank score` and the backend"):
        get_metric("crimson", model_path="/x", patient_context="test_set", progress=False)


def test_the_optional_column_shows_only_where_a_result_has_it():
    from rexrank.leaderboard.model_page import model_results
    from rexrank.leaderboard.records import records_frame
    from rexrank.leaderboard.tables import best_values, display_table, ranked

    def record(name, values):
        return {"id": f"rexrank/example/findings/{name}", "model_name": name, "institution": "", "model_url": "",
                "submitter": "me", "date": "2026", "test_set": "example", "track": "findings", "source": "rexrank",
                "trained_on": [], "per_study_available": False, "provenance": {},
                "values": {k: {"mean": v, "ci95": None, "n": 20} for k, v in values.items()}}

    plain = [record("a", {"bleu2": 0.2}), record("b", {"bleu2": 0.3})]
    with_crimson = plain + [record("c", {"bleu2": 0.1, "crimson": 0.42})]
    for records, shown in ((plain, False), (with_crimson, True)):
        table = ranked(records_frame(records), "example", "findings")
        headers = list(display_table(table, best_values(table)).columns)
        assert any(h.startswith("CRIMSON") for h in headers) is shown
        frame = records_frame(records)
        page = model_results(frame, frame["model_name"].iloc[-1])
        assert len(page) == 1 and ("CRIMSON" in page.columns) is shown
    frame = records_frame(with_crimson)
    page = model_results(frame, frame["model_name"].iloc[0])  # a's own results lack it
    assert len(page) == 1 and "CRIMSON" not in page.columns
    table = ranked(records_frame(plain), "example", "findings", "crimson")  # ranked by it: shown, even empty
    assert any(h.startswith("CRIMSON") for h in display_table(table, best_values(table), "crimson").columns)


# ---- CRIMSON's prompt, answer reader and score -------------------------------------------------
def test_crimson_prompt_and_messages_default_to_the_full_official_prompt():
    """Without `guidelines`, the prompt is the official one with its guideline sections (the
    OpenAI path's, ../shared/reference/prompts/crimson_prompt_openai_no_context.txt)."""
    from rexrank.metrics.crimson_text import build_prompt, messages

    expected = shared_path("reference", "prompts", "crimson_prompt_openai_no_context.txt").read_text(encoding="utf-8")
    assert build_prompt("{REFERENCE_FINDINGS}", "{PREDICTED_FINDINGS}") == expected
    assert messages("{REFERENCE_FINDINGS}", "{PREDICTED_FINDINGS}")[1] == {"role": "user", "content": expected}


# (text, index of a quote, whether it delimits a key or value) by the official reader's rule:
# a quote is structural after : [ { or before : ] }; after a comma, when the character before
# the comma is " ] } or a digit; before a comma, when the character after it is " [ { or a digit
_QUOTES = [
    ('{"a"', 1, True), ('["x"', 1, True), (':"x', 1, True),
    ('a"]', 1, True), ('a"}', 1, True), ('a":', 1, True),
    ('"a","b"', 4, True), ('[1],"b', 4, True), ('{},"b', 3, True), ('1,"x', 2, True),
    ('a,"b', 2, False), (',"', 1, False), ('x,"y', 2, False),
    ('b",1', 1, True), ('b","', 1, True), ('b",[', 1, True), ('b",{', 1, True),
    ('b",x', 1, False), ('b",', 1, False), ('1b",y', 2, False),
    ('"a', 0, False), ('"x:', 0, False), ('1x"y', 2, False), ('a"', 1, False), ('say "hi', 4, False),
]


@pytest.mark.parametrize("text, i, structural", _QUOTES)
def test_crimson_reader_tells_structural_quotes_from_prose_by_the_official_rule(text, i, structural):
    from rexrank.metrics.crimson_text import _quote_is_structural

    assert text[i] == '"'
    assert _quote_is_structural(text, i) is structural


def test_crimson_reader_escapes_a_stray_quote_up_to_five_characters_before_the_error():
    """json stops at the first character after a string that is no delimiter: with the stray
    quote of `"say "` followed by 4 spaces, it stops 5 characters after that quote, which is
    escaped; with 5 spaces, 6 characters after, beyond the official window: unreadable."""
    from rexrank.metrics.crimson_text import UnreadableAnswer, read_answer

    assert read_answer('{"a": "say "    hi"}') == {"a": 'say "    hi'}
    with pytest.raises(UnreadableAnswer):
        read_answer('{"a": "say "     hi"}')


def test_crimson_reader_never_escapes_a_quote_that_follows_a_backslash():
    """{"a": "\\\\""}: the string holds an escaped backslash, then a second quote stops json at
    index 10. Going back: 10 is structural (before }), 9 follows a backslash (the official
    rule skips it), 6 is escaped, which breaks the text at 6 with no quote left to escape:
    unreadable, and the message counts the answer's characters."""
    from rexrank.metrics.crimson_text import UnreadableAnswer, read_answer

    answer = '{"a": "\\\\""}'
    assert len(answer) == 12 and answer[7:9] == "\\\\"
    with pytest.raises(UnreadableAnswer) as err:
        read_answer(answer)
    assert str(err.value) == "not JSON even after the official repairs (12 characters)"


def test_crimson_attribute_error_without_error_types_counts_in_no_type():
    """One urgent finding (weight 1) matched with one significant attribute error (0.5) and no
    `error_types`: correct = 1 x 1 / (1 + 0.5) = 2/3, N_G = 1, S = 2/3; no type counted."""
    from rexrank.metrics.crimson_text import ATTRIBUTE_TYPES, score_evaluation

    parts = score_evaluation({
        "reference_findings": [{"id": "R1", "finding": "effusion", "clinical_significance": "urgent"}],
        "predicted_findings": [{"id": "P1", "finding": "effusion", "clinical_significance": "urgent"}],
        "matched_findings": [{"ref_id": "R1", "pred_id": "P1"}],
        "errors": {"false_findings": [], "missing_findings": [],
                   "attribute_errors": [{"ref_id": "R1", "pred_id": "P1", "severity": "significant"}]}})
    assert parts.score == round(2 / 3, 4) == 0.6667 and parts.correct == pytest.approx(2 / 3, abs=1e-15)
    assert parts.attribute_counts == {t: 0 for t in ATTRIBUTE_TYPES} and parts.n_attribute == 1
    assert parts.weighted_attribute == 0.5


def test_crimson_reader_escapes_a_stray_quote_after_an_escaped_one():
    """{"a": "x\\"" y"}: the string x\\" ends at the third quote (index 10), json stops at y (12);
    10 follows a quote, not a backslash, and is prose (between " and a space): escaped, the
    value is x"" y."""
    from rexrank.metrics.crimson_text import read_answer

    assert read_answer('{"a": "x\\"" y"}') == {"a": 'x"" y'}


def test_crimson_reader_makes_at_most_49_quote_fixes():
    """Each ` "x` closes the string early and costs one fix; the official loop parses 50 times,
    so 49 stray quotes are repaired and 50 leave the answer unreadable."""
    from rexrank.metrics.crimson_text import UnreadableAnswer, read_answer

    assert read_answer('{"a": "' + ' "x' * 49 + '"}') == {"a": ' "x' * 49}
    with pytest.raises(UnreadableAnswer):
        read_answer('{"a": "' + ' "x' * 50 + '"}')
