"""CRIMSON speed on the transformers path with a tiny random model of MedGemma's architecture.

The model is built from config, not downloaded: a Gemma 3 vision-language model
(Gemma3ForConditionalGeneration, MedGemma-4b's class) with tiny dimensions, Gemma's special
tokens and chat template, and a small BPE tokenizer (tests/support/llm_tiny_models.py). It answers
garbage, so each study generates `--max-new-tokens` tokens and is then an unreadable answer
(NaN): the figures time what rexrank adds around the judge (prompt building and ids for a
~7,700-character prompt, batching, decoding, the answer reader, the response cache), not
the 4B model, whose time on a GPU is the generation itself.

- cold: fresh metric instance, empty response cache (weights loaded, every study generated);
- warm: the same pairs again with the cache the cold run filled (a requeue or rescoring
  costs this);
- load: loading the tiny checkpoint alone (part of cold);
- bare: the same model's `generate` on the same chat-template prompts, one study at a time,
  same token budget and stop ids, nothing else (the floor); goal cold within 1.3 x bare.

On a shared machine wall times swing with the other load; `--threads 1 --clock cpu` times
this process's CPU work instead.

Usage: python benchmarks/crimson.py [--pairs 200] [--max-new-tokens 16] [--rounds 3] [--batch-size 1]
       [--threads N] [--clock wall|cpu]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from llm_tiny_models import build_tiny_gemma3  # noqa: E402
from rexrank.metrics.crimson_text import build_prompt  # noqa: E402
from rexrank.metrics.registry import get_metric  # noqa: E402
from synthetic_reports import synthetic_reports  # noqa: E402


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock = CLOCKS["wall"]


def timed(fn):
    start = clock()
    out = fn()
    return clock() - start, out


def bare_run(folder: Path, prompts: list[list[dict]], max_new_tokens: int) -> float:
    """Load, then one greedy generate per prompt (batch 1, as the official default)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    start = clock()
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    stops = [tok.eos_token_id, *model.generation_config.eos_token_id]
    with torch.inference_mode():
        for messages in prompts:
            ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
            model.generate(**ids, max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=stops, pad_token_id=tok.pad_token_id)
    return clock() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=1, help="official: 1")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall")
    args = parser.parse_args()
    global clock
    clock = CLOCKS[args.clock]
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    preds = synthetic_reports(args.pairs, seed=0)
    refs = synthetic_reports(args.pairs, seed=1)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        corpus = [build_prompt(r, p, guidelines=False) for p, r in zip(preds[:20], refs[:20])]
        folder = build_tiny_gemma3(root / "tiny-medgemma", corpus=corpus)
        options = dict(model_path=str(folder), device="cpu", dtype="float32", batch_size=args.batch_size,
                       max_new_tokens=args.max_new_tokens, progress=False)
        from rexrank.metrics.crimson_text import messages

        chats = [messages(r, p, guidelines=False) for p, r in zip(preds, refs)]
        colds, warms, loads, bares = [], [], [], []
        for r in range(args.rounds):
            cache = root / f"cache-{r}"
            metric = get_metric("crimson", cache_dir=str(cache), **options)
            load, _ = timed(lambda: metric.runner.backend._load())
            cold, result = timed(lambda: metric.score(preds, refs))
            warm_metric = get_metric("crimson", cache_dir=str(cache), **options)
            warm, again = timed(lambda: warm_metric.score(preds, refs))
            usage = result.details["llm_usage"]
            assert again.details["llm_usage"]["cache_hits"] == args.pairs
            bare = bare_run(folder, chats, args.max_new_tokens) if args.batch_size == 1 else float("nan")
            colds.append(load + cold)
            warms.append(warm)
            loads.append(load)
            bares.append(bare)
            print(f"round {r + 1}: cold {load + cold:.2f} s (load {load:.2f} s, {usage['prompt_tokens'] / args.pairs:.0f} prompt "
                  f"tokens/study, {usage['completion_tokens']} generated), warm {warm:.2f} s, bare {bare:.2f} s: "
                  f"cold/bare {(load + cold) / bare:.3f}", flush=True)
        cold, warm, bare = statistics.median(colds), statistics.median(warms), statistics.median(bares)
        print(f"CRIMSON ({args.clock} clock, {args.threads or 'default'} threads), {args.pairs} pairs, tiny MedGemma-architecture model, batch {args.batch_size}, "
              f"{args.max_new_tokens} new tokens: cold {cold:.2f} s ({cold / args.pairs * 1000:.0f} ms/pair), "
              f"warm {warm:.2f} s ({warm / args.pairs * 1000:.1f} ms/pair), warm/cold {warm / cold:.3f}, bare {bare:.2f} s, "
              f"cold/bare {cold / bare:.3f} (median of {args.rounds})")


if __name__ == "__main__":
    main()
