"""Produce official_golden.json: what the official crimson-score computes on rexrank's
CRIMSON test inputs (tests/support/crimson_cases.py), for the parity tests in tests/metrics/test_crimson_official.py:

- prompt ids of the transformers path: the official `CRIMSONScore(api="hf")` pipeline loads a
  tiny random Gemma 3 vision-language model (MedGemma's architecture, tests/support/llm_tiny_models.py)
  and its `generate` is replaced to record the ids it is given and to answer scripted text;
- the messages and request arguments of the OpenAI and vLLM paths (fake clients);
- the completions the official transformers path generates with the random model (greedy,
  bfloat16, the generation config's stop ids and 24-token budget);
- the answer reader (`parse_json_response`) and the score (`_calculate_crimson`) on every answer
  of crimson_cases.answers(), and the end-to-end result of `evaluate_batch` on scripted answers.

Run in a side environment holding crimson-score (no Hub access needed), e.g.

    python -m venv /tmp/crimsonenv && /tmp/crimsonenv/bin/pip install crimson-score==0.2.0
    PYTHONPATH=tests /tmp/crimsonenv/bin/python tests/data/crimson/make_official_golden.py

(rexrank's run: crimson-score 0.2.0 installed --no-deps into a venv that sees rexrank's own
transformers/torch, plus accelerate 1.13.0.) Only the official package's functions compute here.
"""
from __future__ import annotations

import hashlib
import json
import tempfile
from importlib.metadata import version
from pathlib import Path

import torch
import transformers

from support.crimson_cases import GOLDEN, PAIRS, TOKENIZER_CORPUS, answers
from support.llm_tiny_models import build_tiny_gemma3

from CRIMSON.generate_score import CRIMSONScore
from CRIMSON.utils import parse_json_response

DEFAULT = CRIMSONScore.DEFAULT_HF_MODEL
GENERATOR = "PYTHONPATH=tests /tmp/crimsonenv/bin/python tests/data/crimson/make_official_golden.py"


def sha(value) -> str:
    return hashlib.sha256(json.dumps(value, ensure_ascii=False, sort_keys=True).encode()).hexdigest()


def outcome(answer: str) -> dict:
    """The official reader and score on one answer; None where evaluate_batch gives None."""
    try:
        parsed = parse_json_response(answer)
    except Exception as exc:  # noqa: BLE001 - evaluate_batch catches every exception
        return {"parsed": None, "stage": "parse", "error": type(exc).__name__, "result": None}
    try:
        result = CRIMSONScore._calculate_crimson(None, parsed)
    except Exception as exc:  # noqa: BLE001
        return {"parsed": parsed, "stage": "score", "error": type(exc).__name__, "result": None}
    result.pop("raw_evaluation")
    return {"parsed": parsed, "stage": "ok", "error": None, "result": result}


class Scripted:
    """Replaces `generate`: records the prompt ids and appends the next scripted answer."""

    def __init__(self, tokenizer, texts):
        self.tokenizer, self.texts, self.seen = tokenizer, list(texts), []
        self.end = tokenizer.convert_tokens_to_ids("<end_of_turn>")

    def __call__(self, input_ids=None, attention_mask=None, **kwargs):
        rows = []
        for row, mask in zip(input_ids.tolist(), attention_mask.tolist()):
            self.seen.append([i for i, m in zip(row, mask) if m])
            text = self.texts.pop(0)
            rows.append(row + self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.end])
        width = max(map(len, rows))
        return torch.tensor([r + [self.tokenizer.pad_token_id] * (width - len(r)) for r in rows])


def main() -> None:
    all_answers = answers()
    out = {
        "source": "crimson-score 0.2.0 (PyPI wheel = github rajpurkarlab/CRIMSON 07e3331, MIT), run by this script",
        "crimson_score_version": version("crimson-score"),
        "transformers_version": transformers.__version__,
        "generator": GENERATOR,
        "answers": all_answers,
        "outcomes": [outcome(a) for a in all_answers],
    }
    with tempfile.TemporaryDirectory() as tmp:
        folder = build_tiny_gemma3(Path(tmp) / "tiny", corpus=TOKENIZER_CORPUS)
        scorer = CRIMSONScore(api="hf", model_name=str(folder), device="cpu")
        tok = scorer.pipe.tokenizer
        # transformers path: prompt ids, for the fine-tuned judge (no guidelines) and another model
        e2e_answers = [all_answers[k] for k in range(0, len(all_answers), 9)][: 2 * len(PAIRS)]
        hf = []
        for model_name in (DEFAULT, "another/local-model"):
            scorer.model_name = model_name
            script = Scripted(tok, e2e_answers[: len(PAIRS)] if model_name == DEFAULT else e2e_answers[len(PAIRS):])
            scorer.pipe.model.generate = script
            refs, cands, contexts = zip(*PAIRS)
            results = scorer.evaluate_batch(list(refs), list(cands), patient_contexts=list(contexts), batch_size=1)
            for i, (ids, result) in enumerate(zip(script.seen, results)):
                prompt = scorer._build_evaluation_prompt(refs[i], cands[i], contexts[i])
                if result is not None:
                    result.pop("raw_evaluation")
                entry = {"pair": i, "model": model_name, "prompt_sha256": sha(prompt), "input_ids_sha256": sha(ids),
                         "n_input_ids": len(ids), "answer": script_answer(e2e_answers, model_name, i), "result": result}
                if i == 0:  # one in full, to show where ours would differ
                    entry["input_ids"] = ids
                hf.append(entry)
        out["hf"] = hf
        # real greedy generation of the random model (bfloat16, the checkpoint's generation config)
        del scorer.pipe.model.generate
        scorer.model_name = DEFAULT
        prompts = [scorer._build_evaluation_prompt(r, c, x) for r, c, x in PAIRS]
        out["generated"] = scorer._chat_completion_batch(prompts, batch_size=1)
    out["openai"] = openai_requests()
    out["vllm"] = vllm_requests()
    GOLDEN.write_text(json.dumps(out, ensure_ascii=False) + "\n")
    print(f"wrote {GOLDEN}")


def script_answer(e2e_answers, model_name, i):
    return e2e_answers[i] if model_name == DEFAULT else e2e_answers[len(PAIRS) + i]


class _Captured:
    def __init__(self):
        self.calls = []

    def create(self, **kwargs):
        self.calls.append(kwargs)
        choice = type("C", (), {"message": type("M", (), {"content": "{}"})()})()
        return type("R", (), {"choices": [choice]})()


def openai_requests() -> list[dict]:
    captured = _Captured()
    scorer = CRIMSONScore.__new__(CRIMSONScore)
    scorer.api, scorer.model_name = "openai", "gpt-5.2"
    scorer.client = type("Client", (), {"chat": type("Chat", (), {"completions": captured})()})()
    out = []
    for i, (ref, cand, context) in enumerate(PAIRS):
        scorer.evaluate(ref, cand, patient_context=context)
        call = dict(captured.calls[-1])
        messages = call.pop("messages")
        out.append({"pair": i, "messages_sha256": sha(messages), "system": messages[0]["content"],
                    "user_sha256": sha(messages[1]["content"]), "kwargs": call})
    return out


def vllm_requests() -> list[dict]:
    seen = []

    class LLM:
        def chat(self, batch, sampling_params=None, use_tqdm=False):
            seen.extend(batch)
            return [type("O", (), {"outputs": [type("T", (), {"text": "{}"})()]})() for _ in batch]

    scorer = CRIMSONScore.__new__(CRIMSONScore)
    scorer.api, scorer.model_name, scorer.llm, scorer.sampling_params = "vllm", DEFAULT, LLM(), None
    refs, cands, contexts = zip(*PAIRS)
    scorer.evaluate_batch(list(refs), list(cands), patient_contexts=list(contexts))
    return [{"pair": i, "messages_sha256": sha(m)} for i, m in enumerate(seen)]


if __name__ == "__main__":
    main()
