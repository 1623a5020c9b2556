"""CRIMSON equal to the official crimson-score 0.2.0 on the same inputs: prompt ids of the
transformers path (a tiny random MedGemma-architecture model), the messages and request
arguments of the endpoint paths, the answer reader with its JSON repairs, and the score,
on hand-written and mutated answers. The official outputs are in
tests/data/crimson/official_golden.json (made by make_official_golden.py beside it)."""
from __future__ import annotations

import hashlib
import json
import math

import pytest

from support.crimson_cases import GOLDEN, PAIRS, TOKENIZER_CORPUS, answers
from support.llm_fake_server import FakeOpenAIServer, Reply, chat_body
from rexrank.metrics.crimson import DEFAULT_MODEL
from rexrank.metrics.crimson_text import UnreadableAnswer, messages, read_answer, score_evaluation
from rexrank.metrics.registry import get_metric

OFFICIAL = json.loads(GOLDEN.read_text(encoding="utf-8"))


def _sha(value) -> str:
    return hashlib.sha256(json.dumps(value, ensure_ascii=False, sort_keys=True).encode()).hexdigest()


def _same(a, b) -> bool:
    """Equal JSON values, NaN equal to NaN (an answer may hold NaN)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_golden_was_made_by_the_official_package_on_these_answers():
    assert OFFICIAL["crimson_score_version"] == "0.2.0"
    assert OFFICIAL["answers"] == answers()  # the inputs did not drift since the official run
    stages = {o["stage"] for o in OFFICIAL["outcomes"]}
    assert stages == {"ok", "parse", "score"}  # every branch is exercised


def _ours(answer: str) -> dict:
    try:
        parsed = read_answer(answer)
    except UnreadableAnswer:
        return {"stage": "parse"}
    try:
        parts = score_evaluation(parsed)
    except Exception:  # noqa: BLE001 - a structure the scorer cannot read
        return {"stage": "score", "parsed": parsed}
    return {"stage": "ok", "parsed": parsed, "parts": parts}


def test_answer_reader_repairs_and_refuses_as_the_official_one():
    wrong = []
    for k, (answer, official) in enumerate(zip(OFFICIAL["answers"], OFFICIAL["outcomes"])):
        ours = _ours(answer)
        if (ours["stage"] == "parse") != (official["stage"] == "parse"):
            wrong.append((k, "readable" if ours["stage"] != "parse" else "unreadable", answer[:80]))
        elif official["stage"] != "parse" and not _same(ours["parsed"], official["parsed"]):
            wrong.append((k, "other JSON", answer[:80]))
    assert not wrong, f"{len(wrong)} answers read differently from crimson-score: {wrong[:5]}"


def test_score_equals_the_official_on_every_answer():
    wrong = []
    n_ok = 0
    for k, (answer, official) in enumerate(zip(OFFICIAL["answers"], OFFICIAL["outcomes"])):
        ours = _ours(answer)
        if official["stage"] != "ok":
            if ours["stage"] == "ok":
                wrong.append((k, "scored, officially a failure", answer[:80]))
            continue
        if ours["stage"] != "ok":
            wrong.append((k, "failed, officially scored", answer[:80]))
            continue
        n_ok += 1
        r, p = official["result"], ours["parts"]
        got = {
            "crimson_score": p.score,
            "false": p.n_false, "missing": p.n_missing, "attribute": p.n_attribute,
            **{f"{t}_errors": p.attribute_counts[t] for t in p.attribute_counts},
            "w_false": p.weighted_false, "w_missing": p.weighted_missing, "w_attribute": p.weighted_attribute,
            "N_G": p.n_g, "correct": p.correct, "S": p.s,
        }
        c, w, m = r["error_counts"], r["weighted_error_counts"], r["metrics"]
        expected = {
            "crimson_score": r["crimson_score"],
            "false": c["false_findings"], "missing": c["missing_findings"], "attribute": c["attribute_errors"],
            **{k2: c[k2] for k2 in c if k2 not in ("false_findings", "missing_findings", "attribute_errors")},
            "w_false": w["false_findings"], "w_missing": w["missing_findings"], "w_attribute": w["attribute_errors"],
            "N_G": m["N_G"], "correct": m["correct"], "S": m["S"],
        }
        if got != expected:  # exact: same operations in the same order
            wrong.append((k, {key: (got[key], expected[key]) for key in got if got[key] != expected.get(key)}))
    assert n_ok >= 100
    assert not wrong, f"{len(wrong)} answers scored differently from crimson-score: {wrong[:5]}"


def test_prompt_messages_of_the_endpoint_paths_are_the_official_ones():
    # official OpenAI path: guidelines on (any model but the fine-tuned judge), context as given
    for case in OFFICIAL["openai"]:
        ref, cand, context = PAIRS[case["pair"]]
        ours = messages(ref, cand, context, guidelines=True)
        assert ours[0]["content"] == case["system"]
        assert _sha(ours) == case["messages_sha256"], f"pair {case['pair']}: prompt differs from the official OpenAI path"
    # official vLLM path serving the fine-tuned judge: no guidelines
    for case in OFFICIAL["vllm"]:
        ref, cand, context = PAIRS[case["pair"]]
        assert _sha(messages(ref, cand, context, guidelines=False)) == case["messages_sha256"], f"pair {case['pair']}"


def _capture(server_answers: list[str]):
    seen: list[dict] = []

    def script(path, body):
        seen.append(body)
        text = server_answers[len(seen) - 1]
        return Reply(body=chat_body(text))

    return seen, script


@pytest.mark.parametrize("model", ["gpt-5.2", DEFAULT_MODEL])
def test_endpoint_requests_carry_the_official_arguments(model, tmp_path):
    refs, cands, contexts = zip(*PAIRS)
    replies = [OFFICIAL["answers"][0]] * len(PAIRS)
    seen, script = _capture(replies)
    with FakeOpenAIServer(script) as server:
        metric = get_metric("crimson", base_url=server.base_url, model=model, patient_context=list(contexts),
                            cache=False, progress=False, max_concurrency=1, max_retries=0)  # a wrong request fails at once
        result = metric.score(list(cands), list(refs))
    by_user = {_sha(body["messages"]): body for body in seen}
    official = OFFICIAL["openai"] if model != DEFAULT_MODEL else OFFICIAL["vllm"]
    for case in official:
        body = by_user[case["messages_sha256"]]  # the official messages were sent
        args = {k: v for k, v in body.items() if k not in ("messages", "model")}
        if model == DEFAULT_MODEL:  # the official vLLM SamplingParams
            assert args == {"temperature": 0.0, "max_tokens": 8192}
        else:
            expected = {k: v for k, v in OFFICIAL["openai"][case["pair"]]["kwargs"].items() if k != "model"}
            assert args == expected
    official_score = OFFICIAL["outcomes"][0]["result"]["crimson_score"]
    assert list(result.primary) == [official_score] * len(PAIRS)


@pytest.fixture(scope="module")
def tiny_medgemma(tmp_path_factory):
    from support.llm_tiny_models import build_tiny_gemma3

    return build_tiny_gemma3(tmp_path_factory.mktemp("tiny_medgemma"), corpus=TOKENIZER_CORPUS)


def _scripted(monkeypatch, folder, texts):
    """Replace the model's generate as the golden script did: record ids, answer `texts`."""
    import torch
    from transformers import AutoTokenizer

    from rexrank.llm.transformers_backend import TransformersBackend

    tok = AutoTokenizer.from_pretrained(folder)
    end = tok.convert_tokens_to_ids("<end_of_turn>")
    queue, seen = list(texts), []
    original = TransformersBackend._load

    def load(self):
        original(self)

        def generate(input_ids=None, attention_mask=None, **kwargs):
            assert kwargs["eos_token_id"] == [tok.eos_token_id, end]  # stops at <end_of_turn> as the checkpoint's config says
            rows = []
            for row, mask in zip(input_ids.tolist(), attention_mask.tolist()):
                seen.append([i for i, m in zip(row, mask) if m])
                rows.append(row + tok(queue.pop(0), add_special_tokens=False)["input_ids"] + [end])
            width = max(map(len, rows))
            return torch.tensor([r + [tok.pad_token_id] * (width - len(r)) for r in rows])

        self._model.generate = generate

    monkeypatch.setattr(TransformersBackend, "_load", load)
    return seen


@pytest.mark.parametrize("official_model", [DEFAULT_MODEL, "another/local-model"])
def test_transformers_path_prompt_ids_and_scores_are_the_official_ones(official_model, tiny_medgemma, monkeypatch):
    cases = [c for c in OFFICIAL["hf"] if c["model"] == official_model]
    seen = _scripted(monkeypatch, tiny_medgemma, [c["answer"] for c in cases])
    refs, cands, contexts = zip(*PAIRS)
    # the fine-tuned judge's prompt has no guidelines; a local copy of it is named by model_path
    options = dict(model_path=str(tiny_medgemma), patient_context=list(contexts), cache=False, progress=False, device="cpu")
    if official_model == DEFAULT_MODEL:
        metric = get_metric("crimson", model=DEFAULT_MODEL, **options)
    else:
        metric = get_metric("crimson", model=official_model, **options)
    result = metric.score(list(cands), list(refs))
    assert len(seen) == len(cases)
    for ids, case in zip(seen, cases):
        if "input_ids" in case:
            assert ids == case["input_ids"]
        assert (len(ids), _sha(ids)) == (case["n_input_ids"], case["input_ids_sha256"]), f"pair {case['pair']}: prompt ids differ"
    for i, case in enumerate(cases):
        official = case["result"]
        if official is None:
            assert math.isnan(result.primary[i]) and i in result.failures
        else:
            assert result.primary[i] == official["crimson_score"]
            assert result.per_study["crimson_false_findings"][i] == official["error_counts"]["false_findings"]
    assert result.details["n_failed"] == sum(c["result"] is None for c in cases) > 0


def test_config_records_the_official_generation():
    metric = get_metric("crimson", model_path="/nonexistent", progress=False)
    assert metric.settings.dtype == "bfloat16" and metric.settings.batch_size == 1
    assert metric.params() == {"temperature": 0.0, "max_tokens": 8192}
    # a local request carries the cap alone (the backend is greedy): its cache key stays the one
    # earlier local runs wrote, and without the cap generation would run to the model's limit
    assert [r.param_dict for r in metric.requests(["a", "b"], ["c", "d"])] == [{"max_tokens": 8192}] * 2
    assert not metric.use_guidelines()  # the fine-tuned judge was trained without them
    assert get_metric("crimson", model_path="/x", guidelines=True, progress=False).use_guidelines()


@pytest.mark.parametrize("name, context, guidelines", [
    ("crimson_prompt_hf_medgemma_default.txt", None, False),
    ("crimson_prompt_openai_no_context.txt", None, True),
    ("crimson_prompt_openai_with_context.txt", {"Age": "{AGE}", "Indication": "{INDICATION}"}, True),
])
def test_prompts_equal_the_reference_prompt_files(name, context, guidelines):
    from support.paths import shared_path
    from rexrank.metrics.crimson_text import build_prompt

    expected = shared_path("reference", "prompts", name).read_text(encoding="utf-8")
    assert build_prompt("{REFERENCE_FINDINGS}", "{PREDICTED_FINDINGS}", context, guidelines=guidelines) == expected


def test_transformers_path_generates_what_the_official_pipeline_generates(tiny_medgemma):
    """Real greedy generation (bfloat16, the checkpoint's stop ids) of the random model: the
    completions equal the official pipeline's, byte for byte (decoding included)."""
    from support.llm_tiny_models import TINY_MAX_NEW_TOKENS

    refs, cands, contexts = zip(*PAIRS)
    metric = get_metric("crimson", model=DEFAULT_MODEL, model_path=str(tiny_medgemma), patient_context=list(contexts),
                        max_new_tokens=TINY_MAX_NEW_TOKENS, keep_completions=True, cache=False, progress=False, device="cpu")
    result = metric.score(list(cands), list(refs))
    assert result.details["completions"] == OFFICIAL["generated"]
    assert result.details["n_unparseable"] == len(PAIRS)  # a random model's text is no JSON: NaN and listed
