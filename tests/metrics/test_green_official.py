"""GREEN computed as the official run did: prompt ids as transformers 4.x built them from a
SentencePiece-only Llama folder (the checkpoint's layout), the decoder's space clean-up,
completion budgets from batches of 8 in input order, unparseable completions scored 0 and
reported with their study ids, failed calls never scored."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from support.green_token_folders import CASES, DATA, EXTRA_ID, FOLDERS, build_folder, build_tiny_legacy_llama
from support.llm_fake_server import FakeOpenAIServer, Reply, completion_body
from rexrank.llm import LLMRequest, LLMSettings
from rexrank.llm.llama_tokenizer import LegacyLlamaTokenizer, needs_legacy_tokenizer
from rexrank.llm.transformers_backend import TransformersBackend
from rexrank.metrics.green import official_caps
from rexrank.metrics.green_text import clean_up_tokenization, make_prompt, render_model_input, score_completion
from rexrank.metrics.registry import get_metric

LEGACY_IDS = json.loads((DATA / "legacy_ids.json").read_text())


@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_prompt_ids_are_the_ids_transformers_4_built(name, tmp_path):
    folder = build_folder(tmp_path / name, name)
    assert needs_legacy_tokenizer(folder)  # no tokenizer.json, as GREEN-RadLlama2-7b
    expected = LEGACY_IDS["ids"][name]
    texts = [render_model_input(make_prompt(reference, candidate)) for reference, candidate in CASES]
    assert [LegacyLlamaTokenizer(folder)(t)["input_ids"] for t in texts] == expected
    # the backend GREEN uses builds the same ids
    backend = TransformersBackend(LLMSettings(backend="transformers", model_path=str(folder)), legacy_llama_tokenizer=True)
    assert [backend.prompt_ids(LLMRequest.completion(t)) for t in texts] == expected
    # BOS first, the three EOS of the official input, the extra special token as one id
    assert all(ids[0] == 1 and ids.count(2) >= 3 and ids[-1] == 2 for ids in expected)
    assert EXTRA_ID in expected[2]


def test_the_two_legacy_settings_differ_only_after_special_tokens():
    # sanity of the test data: "legacy" (4.x's default) puts a "▁" after each </s>
    unset, false = LEGACY_IDS["ids"]["legacy_unset"], LEGACY_IDS["ids"]["legacy_false"]
    assert LEGACY_IDS["transformers_version"].startswith("4.")
    for a, b in zip(unset, false):
        assert len(a) > len(b)


def test_decoding_cleans_up_spaces_before_parsing():
    spaced = (
        "[Explanation]: spaced out\n\n[Clinically Significant Errors]:\n(a) False report of a finding in the candidate: 2 . "
        "A; B.\n(b) Missing a finding present in the reference: 0 .\n\n[Matched Findings]:\n1 . C.\n"
    )
    cleaned = clean_up_tokenization(spaced)
    assert "candidate: 2. A" in cleaned and "\n1. C." in cleaned
    parsed = score_completion(cleaned)
    assert (parsed.matched, parsed.significant[0], parsed.score) == (1, 2, pytest.approx(1 / 3))
    assert score_completion(spaced).score == 0.0  # without the clean-up nothing parses

    def script(path, body):
        return Reply(body=completion_body(spaced))

    with FakeOpenAIServer(script) as server:
        result = get_metric("green", base_url=server.base_url, max_retries=0, cache=False, progress=False).score(["x"], ["y"])
    assert result.primary[0] == pytest.approx(1 / 3)


def test_unparseable_is_zero_with_study_ids_and_failed_calls_are_not_scored(tmp_path):
    from rexrank.scoring import score_predictions
    from rexrank.submissions import Predictions

    good = "[Explanation]: ok\n\n[Clinically Significant Errors]:\n(a) False report: 1. A.\n\n[Matched Findings]:\n3. B.\n"

    def script(path, body):
        if "candidate-down" in body["prompt"]:
            return Reply(503, {"error": {"message": "overloaded"}})
        if "candidate-garbled" in body["prompt"]:
            return Reply(body=completion_body("I cannot evaluate this.", finish_reason="length"))
        return Reply(body=completion_body(good))

    predictions = Predictions(ids=["s1", "s2", "s3"], texts=["candidate-ok", "candidate-garbled", "candidate-down"], source="test", n_empty=0)
    with FakeOpenAIServer(script) as server:
        options = {"green": dict(base_url=server.base_url, backoff=0.01, max_retries=1, cache_dir=str(tmp_path / "c"))}
        run = score_predictions(predictions, ["r1", "r2", "r3"], metrics=["green"], metric_options=options, progress=False)
    summary = run.results["metrics"]["green"]
    assert list(run.per_study["green"][:2]) == [0.75, 0.0] and math.isnan(run.per_study["green"][2])
    assert summary["scores"]["green"]["mean"] == pytest.approx(0.375)  # the 0 is counted, the failure is not
    assert summary["details"]["n_unparseable"] == 1 and summary["details"]["unparseable_ids"] == ["s2"]
    assert set(summary["failures"]) == {"s3"} and "HTTP 503" in summary["failures"]["s3"]
    assert summary["details"]["failed_ids"] == ["s3"]


def test_official_caps_are_per_batch_of_8_in_input_order():
    lengths = [100, 700, 120, 90, 80, 60, 50, 40, 900, 30]
    assert official_caps(lengths, 8, 2048) == [2048 - 700] * 8 + [2048 - 900] * 2


def _long_report(i: int) -> str:
    return " ".join(["Small left pleural effusion with adjacent atelectasis."] * (1 + 4 * (i % 5)))


def test_endpoint_gets_the_official_budget_from_a_local_tokenizer(tmp_path):
    folder = build_folder(tmp_path / "tok", "legacy_unset")
    preds = [f"candidate {i}: {_long_report(i)}" for i in range(10)]
    refs = [_long_report(i + 2) for i in range(10)]
    budgets: dict[str, int] = {}

    def script(path, body):
        budgets[json.dumps(body["prompt"])] = body["max_tokens"]  # the prompt's ids
        return Reply(body=completion_body("[Matched Findings]:\n1. A."))

    tok = LegacyLlamaTokenizer(folder)
    texts = [render_model_input(make_prompt(r, p)) for p, r in zip(preds, refs)]
    ids = [tok(t)["input_ids"] for t in texts]
    lengths = [len(i) for i in ids]
    with FakeOpenAIServer(script) as server:
        base = dict(base_url=server.base_url, max_retries=0, tokenizer_path=str(folder), cache=False, progress=False)
        get_metric("green", **base).score(preds, refs)
        official = [budgets[json.dumps(i)] for i in ids]
        get_metric("green", batching="by_length", **base).score(preds, refs)
        own = [budgets[json.dumps(i)] for i in ids]
    assert official == [2048 - max(lengths[:8])] * 8 + [2048 - max(lengths[8:])] * 2
    assert own == [2048 - n for n in lengths]  # the named fast option: each prompt's own room
    assert len(set(official)) == 2 and official != own


@pytest.fixture(scope="module")
def tiny_legacy_llama(tmp_path_factory):
    return build_tiny_legacy_llama(tmp_path_factory.mktemp("legacy_llama"))


def test_transformers_path_batches_in_input_order_with_the_official_budget(tiny_legacy_llama, tmp_path, monkeypatch):
    preds = [f"candidate {i}: {_long_report(i)}" for i in range(10)]
    refs = [_long_report(i + 2) for i in range(10)]
    batches: list[tuple[list[int], int]] = []
    original = TransformersBackend._generate_batch

    limits: list[tuple] = []  # what each batch was asked: (max_length, max_tokens, decoding's clean-up)

    def record(self, batch, params):
        batches.append(([len(ids) for ids in batch], params.get("max_tokens")))
        limits.append((params.get("max_length"), params.get("max_tokens"), params.get("clean_up_tokenization_spaces")))
        return original(self, batch, {**params, "max_tokens": 2})  # the budget is checked, not spent

    monkeypatch.setattr(TransformersBackend, "_generate_batch", record)
    metric = get_metric("green", model_path=str(tiny_legacy_llama), cache=False, progress=False)
    result = metric.score(preds, refs)
    tok = LegacyLlamaTokenizer(tiny_legacy_llama)
    lengths = [len(tok(render_model_input(make_prompt(r, p)))["input_ids"]) for p, r in zip(preds, refs)]
    assert batches == [(lengths[:8], 2048 - max(lengths[:8])), (lengths[8:], 2048 - max(lengths[8:]))]
    assert limits == [(None, 2048 - max(lengths[:8]), False), (None, 2048 - max(lengths[8:]), False)]
    assert result.details["llm_usage"]["prompt_tokens"] == sum(lengths)
    assert not result.failures and np.isfinite(result.primary).all()
    # the named fast option sorts by length and caps each batch at 2048 - its width
    batches.clear()
    get_metric("green", batching="by_length", model_path=str(tiny_legacy_llama), cache=False, progress=False).score(preds, refs)
    order = sorted(lengths)
    assert [b for b, _ in batches] == [order[:8], order[8:]]
    # each request asks for the total length, the backend caps each batch by its width; and
    # max_new_tokens, where given, caps the completion too; the text comes back without the
    # space clean-up, which the metric applies itself before parsing (as the official decode did)
    assert limits[-2:] == [(2048, None, False), (2048, None, False)]
    get_metric("green", batching="by_length", max_new_tokens=9, model_path=str(tiny_legacy_llama), cache=False,
               progress=False).score(preds, refs)
    assert limits[-2:] == [(2048, 9, False), (2048, 9, False)]


def test_resumed_run_with_duplicates_generates_the_official_batches(tiny_legacy_llama, tmp_path):
    """One study of the first batch of 8 (its longest prompt) already cached, and repeated
    studies: every generated batch is the official one (same members, same padded
    width), and every study's greedy ids are those of the official run."""
    import torch
    from transformers import LlamaForCausalLM

    preds = [f"candidate {i}: {_long_report(i)}" for i in range(11)]
    refs = [" ".join(["Small left pleural effusion."] * (1 + 2 * i)) for i in range(11)]  # lengths all differ
    preds[5], refs[5] = preds[1], refs[1]  # a duplicate inside the first batch
    preds[9], refs[9] = preds[2], refs[2]  # and one across batches
    tok = LegacyLlamaTokenizer(tiny_legacy_llama)
    prompts = [tok(render_model_input(make_prompt(r, p)))["input_ids"] for p, r in zip(preds, refs)]
    longest = max(range(8), key=lambda i: len(prompts[i]))
    assert sorted(len(p) for p in prompts[:8])[-2] < len(prompts[longest])  # the batch narrows without it
    cap = 6

    # the official run: left-padded (with EOS) batches of 8 in input order, greedy
    model = LlamaForCausalLM.from_pretrained(tiny_legacy_llama, dtype=torch.float32).eval()
    official_inputs, official_ids = [], []
    for start in range(0, len(prompts), 8):
        batch = prompts[start : start + 8]
        width = max(map(len, batch))
        inputs = [[2] * (width - len(ids)) + ids for ids in batch]
        attention = [[0] * (width - len(ids)) + [1] * len(ids) for ids in batch]
        with torch.inference_mode():
            out = model.generate(input_ids=torch.tensor(inputs), attention_mask=torch.tensor(attention),
                                 do_sample=False, max_new_tokens=cap, eos_token_id=2, pad_token_id=2)
        official_inputs.append(inputs)
        official_ids += out[:, width:].tolist()

    metric = get_metric("green", model_path=str(tiny_legacy_llama), max_new_tokens=cap, dtype="float32",
                        cache_dir=str(tmp_path / "c"), keep_completions=True, progress=False)
    backend = metric.runner.backend
    backend._load()
    calls: list[tuple[list, list]] = []
    generate = backend._model.generate

    def record(input_ids, **kwargs):
        out = generate(input_ids=input_ids, **kwargs)
        calls.append((input_ids.tolist(), out[:, input_ids.shape[1]:].tolist()))
        return out

    backend._model.generate = record
    # a crashed earlier run left the official answer of the batch's longest prompt in the cache
    requests, _ = metric._requests(preds, refs)
    row = official_ids[longest]
    text = backend._tokenizer.decode(row[: row.index(2) + 1] if 2 in row else row, skip_special_tokens=True, clean_up_tokenization_spaces=False)
    metric.runner.cache.put(metric.runner.cache_key(requests[longest]), {"text": text, "prompt_tokens": len(prompts[longest]),
                                                                         "completion_tokens": len(row), "finish_reason": "length"})
    resumed = metric.score(preds, refs)
    assert [inputs for inputs, _ in calls] == official_inputs  # whole official batches, duplicates included
    assert [ids for _, out in calls for ids in out] == official_ids  # the official greedy ids, every study
    # and a fresh run with the duplicates gives the same batches and completions
    calls.clear()
    fresh = get_metric("green", model_path=str(tiny_legacy_llama), max_new_tokens=cap, dtype="float32", cache=False, keep_completions=True, progress=False)
    fresh.runner.backend._load()
    generate = fresh.runner.backend._model.generate
    fresh.runner.backend._model.generate = record
    again = fresh.score(preds, refs)
    assert [inputs for inputs, _ in calls] == official_inputs
    assert [ids for _, out in calls for ids in out] == official_ids
    assert again.details["completions"] == resumed.details["completions"]
    # a rerun with everything cached generates nothing
    calls.clear()
    backend._model.generate = record
    assert metric.score(preds, refs).details["llm_usage"]["requests"] == 0 and not calls


@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_endpoint_receives_the_official_token_ids(name, tmp_path):
    """vLLM's completions endpoint takes the prompt as token ids: the ids sent are the local
    path's ids, which are the ids transformers 4.x built (GREEN's SentencePiece folder)."""
    folder = build_folder(tmp_path / name, name)
    preds, refs = [c for _, c in CASES], [r for r, _ in CASES]
    sent: list = []

    def script(path, body):
        sent.append(body)
        return Reply(body=completion_body("[Matched Findings]:\n1. A."))

    local = TransformersBackend(LLMSettings(backend="transformers", model_path=str(folder)), legacy_llama_tokenizer=True)
    texts = [render_model_input(make_prompt(r, p)) for p, r in zip(preds, refs)]
    with FakeOpenAIServer(script) as server:
        metric = get_metric("green", base_url=server.base_url, max_retries=0, tokenizer_path=str(folder), cache=False,
                            progress=False)
        metric.score(preds, refs)
        by_ids = sorted(b["prompt"] for b in sent)  # sent concurrently: in any order
        assert [local.prompt_ids(LLMRequest.completion(t)) for t in texts] == LEGACY_IDS["ids"][name]
        assert by_ids == sorted(LEGACY_IDS["ids"][name])
        assert metric.config()["endpoint_prompt"].startswith("token ids")
        # the named option for servers that take no ids: the text
        sent.clear()
        metric = get_metric("green", base_url=server.base_url, max_retries=0, tokenizer_path=str(folder), endpoint_prompt="text",
                            cache=False, progress=False)
        metric.score(preds, refs)
        assert sorted(b["prompt"] for b in sent) == sorted(texts) and metric.config()["endpoint_prompt"].startswith("text (")


def test_endpoint_without_the_tokenizer_sends_text_and_says_so(tmp_path, caplog, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-hub-cache"))  # GREEN's tokenizer is nowhere here
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    sent: list = []

    def script(path, body):
        sent.append(body)
        return Reply(body=completion_body("[Matched Findings]:\n1. A."))

    with FakeOpenAIServer(script) as server, caplog.at_level("WARNING", logger="rexrank.metrics.green"):
        metric = get_metric("green", base_url=server.base_url, max_retries=0, cache=False, progress=False)
        result = metric.score(["candidate"], ["reference"])
    assert sent[0]["prompt"] == render_model_input(make_prompt("reference", "candidate"))
    assert "sending the prompts as text" in caplog.text and "tokenizer_path" in caplog.text
    route = metric.config()["endpoint_prompt"]
    assert route.startswith("text: GREEN's tokenizer could not be loaded") and "HF_HUB_OFFLINE" in route
    assert result.primary[0] == 1.0


def test_endpoint_prompt_option_is_checked():
    from rexrank.errors import MetricError

    with pytest.raises(MetricError, match="endpoint_prompt must be one of 'ids', 'text', got 'tokens'"):
        get_metric("green", endpoint_prompt="tokens", base_url="http://127.0.0.1:9/v1")


def test_a_given_tokenizer_path_that_does_not_load_is_an_error(tmp_path):
    from rexrank.errors import MetricError

    def script(path, body):
        return Reply(body=completion_body("[Matched Findings]:\n1. A."))

    with FakeOpenAIServer(script) as server:
        metric = get_metric("green", base_url=server.base_url, tokenizer_path=str(tmp_path / "empty"), cache=False, progress=False)
        with pytest.raises(MetricError, match="tokenizer_path=.* does not hold GREEN's tokenizer"):
            metric.score(["candidate"], ["reference"])


def test_a_tokenizer_path_that_does_not_load_names_the_loaders_error_and_the_fix(tmp_path, monkeypatch):
    import rexrank.metrics.green as green
    from rexrank.errors import MetricError

    def refuse(folder):
        raise ValueError(f"no tokenizer files in {folder}")

    monkeypatch.setattr(green, "load_tokenizer", refuse)
    with FakeOpenAIServer(lambda path, body: Reply(body=completion_body("[Matched Findings]:\n1. A."))) as server:
        metric = get_metric("green", base_url=server.base_url, tokenizer_path="/models/green", cache=False, progress=False)
        with pytest.raises(MetricError) as caught:
            metric.score(["candidate"], ["reference"])
    assert str(caught.value) == ("green: tokenizer_path='/models/green' does not hold GREEN's tokenizer (ValueError: no "
                                 "tokenizer files in /models/green); give the checkpoint folder with its tokenizer files, "
                                 "or leave tokenizer_path out")


def test_a_tokenizer_that_cannot_be_loaded_is_said_once_without_the_machines_paths(monkeypatch, caplog):
    """Without tokenizer_path, a tokenizer that will not load sends the text: the log says so
    word for word, and the reason (in the log and the config) names no path of this machine
    (a repo id stays) and is cut at 300 characters."""
    import rexrank.metrics.green as green

    def refuse(folder):
        raise ValueError(f"no tokenizer files in {folder} for StanfordAIMI/GREEN-radllama2-7b;\n  " + "x" * 400)

    monkeypatch.setattr(green.Green, "_hub_tokenizer_folder", lambda self: "/home/me/.cache/hub/green")
    monkeypatch.setattr(green, "load_tokenizer", refuse)
    metric = get_metric("green", base_url="http://127.0.0.1:9/v1", cache=False, progress=False)
    with caplog.at_level("WARNING", logger="rexrank.metrics.green"):
        assert metric._tokenizer() is None and metric._tokenizer() is None
    problem = ("ValueError: no tokenizer files in <path> for StanfordAIMI/GREEN-radllama2-7b; " + "x" * 400)[:300]
    assert [r.getMessage() for r in caplog.records] == [
        f"green: sending the prompts as text, not as GREEN's token ids: its tokenizer could not be loaded ({problem}); "
        "pass tokenizer_path=<folder with GREEN's tokenizer files> to send the ids"]
    assert len(problem) == 300 and metric.config()["endpoint_prompt"] == f"text: GREEN's tokenizer could not be loaded ({problem})"


def test_a_prompt_with_one_token_of_room_is_sent_and_one_with_none_is_a_reported_failure(tmp_path):
    folder = build_folder(tmp_path / "tok", "legacy_unset")
    tok = LegacyLlamaTokenizer(folder)
    # the prompt without room first: the one after it is still sent
    preds, refs = ["Mild cardiomegaly with a small left pleural effusion and basal atelectasis.", "Mild cardiomegaly."], ["Normal."] * 2
    lengths = [len(tok(render_model_input(make_prompt(r, p)))["input_ids"]) for p, r in zip(preds, refs)]
    assert lengths[0] > lengths[1]
    caps: dict[str, int] = {}

    def script(path, body):
        caps[json.dumps(body["prompt"])] = body["max_tokens"]
        return Reply(body=completion_body("[Matched Findings]:\n1. A."))

    with FakeOpenAIServer(script) as server:
        result = get_metric("green", base_url=server.base_url, max_retries=0, tokenizer_path=str(folder),
                            batching="by_length", max_length=lengths[1] + 1, cache=False, progress=False).score(preds, refs)
    assert list(caps.values()) == [1]  # the second prompt has one token of room: sent, capped at 1
    assert math.isnan(result.primary[0]) and result.primary[1] == 1.0
    assert result.failures == {0: f"prompt is {lengths[0]} tokens, no room under the {lengths[1] + 1}-token limit"}


def test_without_a_tokenizer_the_completion_is_capped_at_1024_or_max_new_tokens(monkeypatch):
    import rexrank.metrics.green as green

    def unavailable(self):
        raise OSError("not in the hub cache")

    monkeypatch.setattr(green.Green, "_hub_tokenizer_folder", unavailable)
    caps: list = []

    def script(path, body):
        caps.append(body["max_tokens"])
        return Reply(body=completion_body("[Matched Findings]:\n1. A."))

    with FakeOpenAIServer(script) as server:
        for options in ({}, {"max_new_tokens": 50}):
            get_metric("green", base_url=server.base_url, max_retries=0, cache=False, progress=False,
                       **options).score(["candidate"], ["reference"])
    assert caps == [1024, 50]
