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
    assert "completions" not in summary["details"]  # the judge's answers are kept only when asked


def test_crimsons_options_are_checked_and_answers_are_kept_only_when_asked():
    with pytest.raises(MetricError, match=r"^crimson: guidelines must be true, false or unset \(official choice\), got 'yes'$"):
        get_metric("crimson", model_path="/x", guidelines="yes", progress=False)
    with pytest.raises(MetricError, match=r"^crimson: max_new_tokens must be >= 1, got 0$"):
        get_metric("crimson", model_path="/x", max_new_tokens=0, progress=False)
    assert get_metric("crimson", model_path="/x", max_new_tokens=1, progress=False).max_new_tokens == 1
    assert get_metric("crimson", model_path="/x", progress=False).keep_completions is False
    with pytest.raises(MetricError) as err:
        get_metric("crimson", model_path="/x", patient_context="test_set", progress=False)
    assert str(err.value) == ("crimson: patient_context='test_set' takes the context from the test set, which only "
                              "`rexrank score` and the backend have; in Python give one dict (or None) per study")
    with pytest.raises(MetricError) as err:
        get_metric("crimson", model_path="/x", patient_context=[None, "age 71"], progress=False)
    assert str(err.value) == ("crimson: patient_context[1] is str; give a dict such as "
                              "{'Age': 71, 'Indication': 'dyspnea'} or None per study")


def test_each_studys_columns_failures_completions_and_the_details(tmp_path):
    """Seven studies: the answer above (an urgent finding matched with a significant location
    and severity error: 1/1.5); prose cut at the length cap; a failed call; the finding matched
    without error (1.0); prose that ended of itself; an empty answer; JSON that is no object.
    The corpus std is numpy's population std of the two scores."""
    from rexrank.metrics.llm_common import usage_report

    clean = json.loads(PERFECT)
    clean["errors"]["attribute_errors"] = []
    capped = chat_body("The reports agree.")
    capped["choices"][0]["finish_reason"] = "length"
    answers = {"ok": Reply(body=chat_body(PERFECT)), "capped": Reply(body=capped),
               "down": Reply(503, {"error": {"message": "overloaded"}}),
               "clean": Reply(body=chat_body(json.dumps(clean))), "prose": Reply(body=chat_body("The reports agree.")),
               "empty": Reply(body=chat_body("")), "list": Reply(body=chat_body("[]"))}

    def script(path, body):
        return answers[next(k for k in answers if f"candidate-{k}" in body["messages"][1]["content"])]

    with FakeOpenAIServer(script) as server:
        metric = get_metric("crimson", base_url=server.base_url, model="judge", backoff=0.01, max_retries=0,
                            keep_completions=True, cache_dir=str(tmp_path), progress=False)
        result = metric.score([f"candidate-{k}" for k in answers], [f"r{i}" for i in range(7)])
    per_study = {k: v.tolist() for k, v in result.per_study.items()}
    assert per_study["crimson"][0] == round(1 / 1.5, 4) and per_study["crimson"][3] == 1.0
    for column, values in (("crimson_attribute_errors", [1, 0]), ("crimson_weighted_attribute_errors", [0.5, 0]),
                           ("crimson_location_errors", [1, 0]), ("crimson_severity_errors", [1, 0]),
                           ("crimson_descriptor_errors", [0, 0]), ("crimson_false_findings", [0, 0]),
                           ("crimson_weighted_missing_findings", [0, 0])):
        assert [per_study[column][0], per_study[column][3]] == values, column
        assert all(math.isnan(per_study[column][i]) for i in (1, 2, 4, 5, 6)), column
    assert math.isnan(per_study["crimson"][1]) and math.isnan(per_study["crimson"][2])
    assert result.failures[1].startswith("unusable answer: ") and result.failures[1].endswith(
        " (generation hit the length cap)")
    assert result.failures[2].startswith("LLM call failed: ") and "503" in result.failures[2]
    assert result.failures[4] == "unusable answer: not JSON even after the official repairs (18 characters)"
    assert result.failures[5] == "unusable answer: not JSON even after the official repairs (0 characters)"
    assert result.failures[6] == ("unusable answer: JSON the scorer cannot read (AttributeError: 'list' object has no "
                                  "attribute 'get')")  # read, but not an object
    assert result.corpus["crimson_std"] == pytest.approx(abs(1.0 - round(1 / 1.5, 4)) / 2)
    details = result.details
    assert (details["n_scored"], details["n_unparseable"], details["unparseable_positions"]) == (2, 4, [1, 4, 5, 6])
    assert details["completions"] == [PERFECT, "The reports agree.", None, json.dumps(clean), "The reports agree.", "", "[]"]
    assert details["llm_usage"] == usage_report(result.rows)
    assert result.rows.side["unparseable"] == [False, True, False, False, True, True, True]


def test_a_run_that_scored_nothing_has_no_std_and_no_warning(tmp_path):
    import warnings

    from rexrank.metrics.crimson import Crimson

    with FakeOpenAIServer(lambda path, body: Reply(503, {"error": {"message": "down"}})) as server:
        metric = get_metric("crimson", base_url=server.base_url, model="judge", backoff=0.01, max_retries=0,
                            cache_dir=str(tmp_path), progress=False)
        rows = metric.score(["candidate"], ["reference"]).rows
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's std of nothing warns
        result = Crimson.aggregate(rows)
    assert math.isnan(result.corpus["crimson_std"]) and result.details["n_scored"] == 0


def test_the_judges_bar_is_crimsons(tmp_path, capsys):
    with FakeOpenAIServer(lambda path, body: Reply(body=chat_body(PERFECT))) as server:
        metric = get_metric("crimson", base_url=server.base_url, model="judge", cache_dir=str(tmp_path), progress=True)
        assert metric.score(["candidate"], ["reference"]).primary.tolist() == [round(1 / 1.5, 4)]
    assert "CRIMSON: 100%" in capsys.readouterr().err  # the bar's own name, as GREEN's


def test_patient_context_and_guidelines_change_the_prompt_as_officially():
    plain = build_prompt("Effusion.", "No effusion.", guidelines=False)
    assert "Patient Context" not in plain and "Context guidelines" not in plain and "Examples of typical" not in plain
    context = build_prompt("Effusion.", "No effusion.", {"Age": 71, "Indication": "dyspnea"}, guidelines=True)
    assert "Patient Context:\n    Age: 71\n    Indication: dyspnea\n\n\nReference Findings" in context
    assert "Context guidelines:" in context and "Examples of typical classifications" in context
    assert "Context guidelines:" not in build_prompt("a", "b", guidelines=True)  # only with a context
    metric = get_metric("crimson", model_path="/x", patient_context=[None], progress=False)
    with pytest.raises(MetricError, match="1 patient contexts for 2 studies"):
        metric.requests(["a", "b"], ["c", "d"])


def test_the_config_names_the_prompt_the_generation_and_the_answer_reader():
    """What changes the numbers: a served judge other than the fine-tuned one gets the
    guidelines unless told not to, greedy decoding with seed 42 and a JSON object; the
    fine-tuned judge run locally, no guidelines, 8,192 new tokens in batches of one."""
    reader = "crimson-score 0.2.0 parse_json_response repairs"
    served = {"model": "judge", "base_url": "http://127.0.0.1:9/v1", "progress": False}
    for options, guidelines in (({}, "with"), ({"guidelines": False}, "without"), ({"guidelines": True}, "with")):
        metric = get_metric("crimson", **served, **options)
        assert metric.config() == {
            **metric.settings.provenance(), "prompt": f"crimson-score 0.2.0 build_prompt {guidelines} guidelines",
            "patient_context": False, "batch_size": None, "answer_reader": reader,
            "generation": {"temperature": 0.0, "seed": 42, "response_format": {"type": "json_object"}}}, options
    other = get_metric("crimson", backend="transformers", model="someone/judge", progress=False)
    assert other.config()["generation"] == {"temperature": 0.0, "max_tokens": 8192}  # local: greedy, capped
    assert other.config()["prompt"] == "crimson-score 0.2.0 build_prompt with guidelines"
    local = get_metric("crimson", model_path="/x", patient_context=[None], progress=False)
    assert local.config() == {
        **local.settings.provenance(), "prompt": "crimson-score 0.2.0 build_prompt without guidelines",
        "patient_context": True, "batch_size": 1, "answer_reader": reader,
        "generation": {"temperature": 0.0, "max_tokens": 8192}}


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


# ---- each field the official scorer reads changes the score (hand-computed) -------------------
# BASE by hand: reference weights R1 urgent 1, R2 actionable 0.5 -> N_G = 1.5; R1 matched with
# no attribute error -> correct = 1; P2 (not actionable, 0.25) false -> E_false = 0.25;
# S = (1 - 0.25) / 1.5 = 0.5. Each case below changes one field the official scorer reads.
def _crimson_base() -> dict:
    return {
        "reference_findings": [{"id": "R1", "finding": "effusion", "clinical_significance": "urgent"},
                               {"id": "R2", "finding": "cardiomegaly", "clinical_significance": "actionable_not_urgent"}],
        "predicted_findings": [{"id": "P1", "finding": "effusion", "clinical_significance": "urgent"},
                               {"id": "P2", "finding": "nodule", "clinical_significance": "not_actionable_not_urgent"}],
        "matched_findings": [{"ref_id": "R1", "pred_id": "P1"}],
        "errors": {"false_findings": ["P2"], "missing_findings": ["R2"], "attribute_errors": []},
    }


def _ref(e, k):
    return e["reference_findings"][k]


def _pred(e, k):
    return e["predicted_findings"][k]


def _attribute(e, **fields):
    e["errors"]["attribute_errors"].append({"ref_id": "R1", "pred_id": "P1", **fields})


_FIELD_CASES = [
    # reference_findings[].clinical_significance: N_G = 1 + 1 = 2, S = 0.75 / 2
    ("reference significance urgent", lambda e: _ref(e, 1).update(clinical_significance="urgent"), 0.375),
    # benign weighs 0: N_G = 1, S = 0.75
    ("reference significance benign", lambda e: _ref(e, 1).update(clinical_significance="benign_expected"), 0.75),
    # a label outside the list, or none, weighs 0.25: N_G = 1.25, S = 0.75 / 1.25
    ("reference significance unknown", lambda e: _ref(e, 1).update(clinical_significance="moderate"), 0.6),
    ("reference significance absent", lambda e: _ref(e, 1).pop("clinical_significance"), 0.6),
    # reference_findings[].id: the matched R1 has no weight -> correct 0, S < 0, d = 0.25 -> -0.25 / 1.25
    ("reference id", lambda e: _ref(e, 0).update(id="R7"), -0.2),
    # the last entry of an id gives its weight (benign: correct 0), N_G sums every entry (1 + 0.5 + 0)
    ("reference id repeated", lambda e: e["reference_findings"].append(
        {"id": "R1", "clinical_significance": "benign_expected"}), -0.2),
    # predicted_findings[].clinical_significance: E_false = 0.5, S = 0.5 / 1.5
    ("predicted significance actionable", lambda e: _pred(e, 1).update(clinical_significance="actionable_not_urgent"), 0.3333),
    # E_false = 1: S = 0
    ("predicted significance urgent", lambda e: _pred(e, 1).update(clinical_significance="urgent"), 0.0),
    # E_false = 0: S = 1 / 1.5
    ("predicted significance benign", lambda e: _pred(e, 1).update(clinical_significance="benign_expected"), 0.6667),
    # predicted_findings[].id: the false P2 is not listed -> weight 0, S = 1 / 1.5
    ("predicted id", lambda e: _pred(e, 1).update(id="P8"), 0.6667),
    # matched_findings[].ref_id: R2 (0.5) matched instead of R1: S = (0.5 - 0.25) / 1.5
    ("matched ref_id", lambda e: e["matched_findings"][0].update(ref_id="R2"), 0.1667),
    # a second match of R1 counts once; a match of R2 adds 0.5: S = (1.5 - 0.25) / 1.5
    ("matched twice", lambda e: e["matched_findings"].append({"ref_id": "R1", "pred_id": "P2"}), 0.5),
    ("matched another", lambda e: e["matched_findings"].append({"ref_id": "R2", "pred_id": "P2"}), 0.8333),
    # errors.false_findings: none -> S = 1 / 1.5; P1 and P2 -> E_false = 1.25, d = 0.25 -> -0.2
    ("no false finding", lambda e: e["errors"].update(false_findings=[]), 0.6667),
    ("two false findings", lambda e: e["errors"]["false_findings"].append("P1"), -0.2),
    # errors.attribute_errors[].severity on R1: significant 0.5 -> correct = 1 x 1 / 1.5,
    # S = (2/3 - 0.25) / 1.5 = 0.27778
    ("attribute significant", lambda e: _attribute(e, severity="significant"), 0.2778),
    # negligible weighs 0: correct = 1 x 1 / 1 = 1, unchanged
    ("attribute negligible", lambda e: _attribute(e, severity="negligible"), 0.5),
    # unknown or absent severity weighs 0.25: correct = 1 / 1.25 = 0.8, S = 0.55 / 1.5 = 0.36667
    ("attribute unknown severity", lambda e: _attribute(e, severity="moderate"), 0.3667),
    ("attribute without severity", lambda e: _attribute(e), 0.3667),
    # two significant errors: correct = 1 x 1 / 2, S = 0.25 / 1.5
    ("two attribute errors", lambda e: (_attribute(e, severity="significant"), _attribute(e, severity="significant")), 0.1667),
    # errors.attribute_errors[].ref_id: an error of the unmatched R2 takes no credit
    ("attribute of an unmatched reference", lambda e: _attribute(e, severity="significant", ref_id="R2"), 0.5),
    # the first of a repeated top-level key wins: errors without P2 -> S = 1 / 1.5 (see the reader test)
]


@pytest.mark.parametrize("label, change, expected", _FIELD_CASES, ids=[c[0] for c in _FIELD_CASES])
def test_crimson_each_field_the_official_scorer_reads_changes_the_score(label, change, expected):
    from rexrank.metrics.crimson_text import score_evaluation

    assert score_evaluation(_crimson_base()).score == 0.5
    evaluation = _crimson_base()
    change(evaluation)
    assert score_evaluation(evaluation).score == expected


def test_crimson_missing_findings_and_error_types_count_but_never_move_the_score():
    """E_miss enters S only when N_G = 0, where every reference weighs 0 (none listed, or all
    benign), so missing findings change the counts, never the score; error types only count.
    Base: E_miss = 0.5 (R2 actionable); with R1 also missing 1.5."""
    from rexrank.metrics.crimson_text import ATTRIBUTE_TYPES, score_evaluation

    base = score_evaluation(_crimson_base())
    assert (base.n_missing, base.weighted_missing, base.n_false, base.weighted_false) == (1, 0.5, 1, 0.25)
    evaluation = _crimson_base()
    evaluation["errors"]["missing_findings"] = ["R2", "R1", "R9"]  # R9 is not listed: weighs 0
    parts = score_evaluation(evaluation)
    assert (parts.n_missing, parts.weighted_missing, parts.score) == (3, 1.5, 0.5)
    evaluation = _crimson_base()
    _attribute(evaluation, severity="negligible", error_types=["location", "temporal"])
    _attribute(evaluation, severity="significant", error_types=["location", "unknown"])
    parts = score_evaluation(evaluation)
    assert parts.attribute_counts == {t: {"location": 2, "temporal": 1}.get(t, 0) for t in ATTRIBUTE_TYPES}
    assert (parts.n_attribute, parts.weighted_attribute) == (2, 0.5)
    # correct = 1 x 1 / (1 + 0 + 0.5) = 2/3 -> S = (2/3 - 0.25) / 1.5, as one significant error
    assert parts.score == 0.2778 and parts.correct == pytest.approx(2 / 3, abs=1e-15)


_EMPTY_REFERENCE_CASES = [
    # N_G = 0 with no reference finding and nothing wrong: S = 1
    ("nothing found, nothing expected", [], [], [], [], 1.0, 1.0),
    # N_G = 0, E_false = 1: S = -(1 + 0 + 1) = -2; d = 1 - 0 -> -1 / 2
    ("one urgent false finding", [], [("P1", "urgent")], [], ["P1"], -0.5, -2),
    # no reference listed but one match: N_G = matches + E_miss = 1, correct 0 (no weight): S = 0
    ("a match of an unlisted reference", [], [("P1", "urgent")], [("R1", "P1")], [], 0.0, 0.0),
    # ... and with the P1 false: S = -1 / 1, d = 1 -> -0.5
    ("a match and a false finding", [], [("P1", "urgent")], [("R1", "P1")], ["P1"], -0.5, -1.0),
    # references listed but all benign: N_G stays 0 (not the count of matches); nothing false: S = 1
    ("benign references only", [("R1", "benign_expected")], [("P1", "benign_expected")], [("R1", "P1")], [], 1.0, 1.0),
    # ... with an actionable false finding: S = -(0.5 + 0 + 1), d = 0.5 -> -0.5 / 1.5
    ("benign references and a false finding", [("R1", "benign_expected")], [("P2", "actionable_not_urgent")],
     [("R1", "P1")], ["P2"], -0.3333, -1.5),
]


@pytest.mark.parametrize("label, refs, preds, matched, false, expected, s", _EMPTY_REFERENCE_CASES,
                         ids=[c[0] for c in _EMPTY_REFERENCE_CASES])
def test_crimson_without_weighted_reference_findings_by_the_official_rule(label, refs, preds, matched, false, expected, s):
    from rexrank.metrics.crimson_text import score_evaluation

    parts = score_evaluation({
        "reference_findings": [{"id": i, "clinical_significance": w} for i, w in refs],
        "predicted_findings": [{"id": i, "clinical_significance": w} for i, w in preds],
        "matched_findings": [{"ref_id": r, "pred_id": p} for r, p in matched],
        "errors": {"false_findings": false, "missing_findings": [], "attribute_errors": []}})
    assert (parts.score, parts.s) == (expected, s)
    assert parts.n_g == (len(matched) if not refs else 0)


def test_crimson_a_matched_benign_finding_with_a_negligible_error_takes_no_credit():
    """w = 0 and the errors' severities sum to 0: the official credit factor is 0 (no division).
    R1 benign matched, R2 urgent missing: N_G = 1, correct = 0, S = 0."""
    from rexrank.metrics.crimson_text import score_evaluation

    parts = score_evaluation({
        "reference_findings": [{"id": "R1", "clinical_significance": "benign_expected"},
                               {"id": "R2", "clinical_significance": "urgent"}],
        "predicted_findings": [{"id": "P1", "clinical_significance": "benign_expected"}],
        "matched_findings": [{"ref_id": "R1", "pred_id": "P1"}],
        "errors": {"false_findings": [], "missing_findings": ["R2"],
                   "attribute_errors": [{"ref_id": "R1", "pred_id": "P1", "severity": "negligible"}]}})
    assert (parts.score, parts.correct, parts.n_g, parts.weighted_missing) == (0.0, 0.0, 1.0, 1.0)


def test_crimson_a_missing_section_reads_as_empty():
    """Without `errors`, nothing is false: S = correct / N_G = 1 / 1.5; without
    `matched_findings`, nothing is correct: S = -0.25 / 1.5 < 0, d = 0.25 -> -0.2; without
    `reference_findings`, N_G = matches + E_miss = 1 and R1 has no weight: S = -0.25, d = 0.25."""
    from rexrank.metrics.crimson_text import score_evaluation

    for section, expected in (("errors", 0.6667), ("matched_findings", -0.2), ("reference_findings", -0.2)):
        evaluation = _crimson_base()
        del evaluation[section]
        assert score_evaluation(evaluation).score == expected, section
    evaluation = _crimson_base()
    del evaluation["predicted_findings"]  # P2 has no weight: E_false = 0
    assert score_evaluation(evaluation).score == 0.6667
    # with R1's significant error (correct 2/3): without false findings S = (2/3) / 1.5 = 0.4444;
    # without the attribute errors (none then): the base 0.5; missing findings never move it: 0.2778
    for key, expected in (("false_findings", 0.4444), ("attribute_errors", 0.5), ("missing_findings", 0.2778)):
        evaluation = _crimson_base()
        _attribute(evaluation, severity="significant")
        del evaluation["errors"][key]
        assert score_evaluation(evaluation).score == expected, key


# ---- each repair of the official reader, on an answer it changes the score of ------------------
def _base_text() -> str:
    return json.dumps(_crimson_base())


_REPAIRS = [
    # curly double quotes in prose become escaped quotes
    ("curly double quotes", lambda t: t.replace('"finding": "nodule"', '"finding": "a \u201csmall\u201d nodule"'),
     ("predicted_findings", 1, "finding"), 'a "small" nodule', 0.5),
    # curly single quotes become \' (no JSON escape): the invalid-escape fix doubles its backslash
    ("curly single quotes", lambda t: t.replace('"finding": "nodule"', '"finding": "a \u2018small\u2019 nodule"'),
     ("predicted_findings", 1, "finding"), "a \\'small\\' nodule", 0.5),
    # ["": ["P2"]  ->  ["P2"]
    ("array written as an object", lambda t: t.replace('"false_findings": ["P2"]', '"false_findings": ["": ["P2"]'),
     ("errors", "false_findings", 0), "P2", 0.5),
    # a key's opening quote restored after "<comma>: R2's significance read as urgent -> 0.375
    ("key without its opening quote after a string",
     lambda t: t.replace('"cardiomegaly", "clinical_significance": "actionable_not_urgent"',
                         '"cardiomegaly", clinical_significance": "urgent"'),
     ("reference_findings", 1, "clinical_significance"), "urgent", 0.375),
    # ... after ]<comma>: no false finding -> 1 / 1.5
    ("key without its opening quote after an array",
     lambda t: t.replace('"false_findings": ["P2"], "missing_findings"', '"false_findings": [], missing_findings"'),
     ("errors", "missing_findings", 0), "R2", 0.6667),
    # ... after }<comma>: R2 matched too -> (1.5 - 0.25) / 1.5
    ("key without its opening quote after an object",
     lambda t: t.replace('"pred_id": "P1"}]', '"pred_id": "P1"}, {"ref_id": "R2", "pred_id": "P2"}], "n": {}, x_y9": 0'),
     ("matched_findings", 1, "ref_id"), "R2", 0.8333),
    # ... after a digit<comma>
    ("key without its opening quote after a number", lambda t: t.replace('{"false_findings"', '{"n": 1, false_findings"'),
     ("errors", "false_findings", 0), "P2", 0.5),
    # ... right after {: P2 renamed -> no weight for the false finding -> 1 / 1.5
    ("key without its opening quote after a brace",
     lambda t: t.replace('{"id": "P2"', '{ id": "P9"'), ("predicted_findings", 1, "id"), "P9", 0.6667),
    # a bare string inside an object after a comma is dropped
    ("orphan string after a comma", lambda t: t.replace('"pred_id": "P1"}', '"pred_id": "P1", "pred_old"}'),
     ("matched_findings", 0, "pred_id"), "P1", 0.5),
    # ... and as an object's first item
    ("orphan string first in an object", lambda t: t.replace('{"ref_id": "R1"', '{"orphan", "ref_id": "R1"'),
     ("matched_findings", 0, "ref_id"), "R1", 0.5),
    # an invalid backslash escape is doubled
    ("invalid escape", lambda t: t.replace('"finding": "nodule"', '"finding": "no\\_dule"'),
     ("predicted_findings", 1, "finding"), "no\\_dule", 0.5),
    # a quote inside prose is escaped
    ("quote inside a string", lambda t: t.replace('"finding": "nodule"', '"finding": "a "so-called" nodule"'),
     ("predicted_findings", 1, "finding"), 'a "so-called" nodule', 0.5),
    # an invalid escape and a quote inside prose: the quotes are fixed on the escape-fixed text
    ("invalid escape and a quote inside a string",
     lambda t: t.replace('"finding": "nodule"', '"finding": "a\\_b "so-called" nodule"'),
     ("predicted_findings", 1, "finding"), 'a\\_b "so-called" nodule', 0.5),
    # a repeated key keeps its first value: errors with no false finding -> 1 / 1.5
    ("repeated key", lambda t: '{"errors": {"false_findings": []}, ' + t[1:],
     ("errors", "false_findings"), [], 0.6667),
]


@pytest.mark.parametrize("label, fault, where, value, expected", _REPAIRS, ids=[r[0] for r in _REPAIRS])
def test_crimson_each_repair_of_the_official_reader_reads_the_answer_it_scores(label, fault, where, value, expected):
    """Each answer is no JSON as written, or JSON that plain json reads otherwise (curly quotes
    kept, a repeated key's last value): the repair gives the value at `where` and the score
    computed by hand (0.5 unchanged where only prose was repaired)."""
    from rexrank.metrics.crimson_text import read_answer, score_evaluation

    text = fault(_base_text())
    try:
        plain = json.loads(text)
    except json.JSONDecodeError:
        plain = None
    parsed = read_answer(text)
    assert parsed != plain
    got = parsed
    for key in where:
        got = got[key]
    assert got == value
    assert score_evaluation(parsed).score == expected


def test_crimson_orphan_removal_also_drops_the_middle_of_a_three_item_list():
    """The official orphan fix (tried when plain JSON fails) removes any `, "x"` followed by a
    comma, in lists too: with an orphan in the answer, false findings ["P2", "P1", "P3"] read
    as ["P2", "P3"] -> E_false = 0.25 + 0 (P3 not listed), S = 0.5 (not -0.2 with P1 false)."""
    from rexrank.metrics.crimson_text import read_answer, score_evaluation

    text = _base_text().replace('"pred_id": "P1"}', '"pred_id": "P1", "pred_old"}').replace(
        '"false_findings": ["P2"]', '"false_findings": ["P2", "P1", "P3"]')
    parsed = read_answer(text)
    assert parsed["errors"]["false_findings"] == ["P2", "P3"]
    assert score_evaluation(parsed).score == 0.5


def test_crimson_an_orphan_with_an_invalid_escape_is_unreadable():
    """The official fixes are tried one at a time on the repaired text (orphans, then escapes,
    then quotes on the raw and on the escape-fixed text), never orphans and escapes together."""
    from rexrank.metrics.crimson_text import UnreadableAnswer, read_answer

    text = _base_text().replace('"pred_id": "P1"}', '"pred_id": "P1", "pred_old"}').replace('"nodule"', '"no\\_dule"')
    with pytest.raises(UnreadableAnswer):
        read_answer(text)
