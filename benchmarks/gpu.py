"""The GPU path in one run (issue 30): every figure a ratio measured in this same run.

1. suite/bare on the device: `suite.py`'s scoring run of bleu2, bertscore, sembscore,
   radgraph, radcliq and ratescore against bare forward passes of the same models
   (random weights, real architectures; goal <= 1.15), then `decode.py`'s split of
   RadGraph's pass on the same texts: decoding old (per-span reference) against new, and
   RadGraph pass / forward passes (goal <= 2).
2. GREEN in official batches: a random-weight Llama-2 7B (GREEN-RadLlama2-7b's
   architecture) in float16 built on the device, prompts of 420-700 random token ids,
   350-token answers (random weights never stop early), batches of 8 through
   `TransformersBackend`: one batch after another (the official sequential run) against the
   same batches generated at once by replicas sharing the weights (`replicas`). Printed:
   s/study of each, their ratio (goal >= 3), and the number of batches whose greedy ids
   differ between the two (must be 0).
3. Peak GPU memory (the whole device, every process: sampled from the driver) during each
   GREEN run, and its ratio.

Nothing is downloaded (HF_HUB_OFFLINE is set; every model and tokenizer is built from a
config here), so it runs where the packages were carried in as wheels. About 5 minutes on
an H100 with the defaults. `--smoke` runs the same code with tiny sizes (CPU is fine) to
check that it runs; its figures mean nothing.

Usage (from this folder): python gpu.py [--device cuda] [--pairs 600] [--rounds 1]
       [--batches 6] [--new-tokens 350] [--replicas N] [--skip-suite] [--smoke]
"""
from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before any Hugging Face import: nothing to fetch
import argparse  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import suite  # noqa: E402  (sets PyTorch's huge pages as the suite benchmark does)
import decode  # noqa: E402
import torch  # noqa: E402

LLAMA_7B = dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                num_key_value_heads=32, vocab_size=32000, max_position_embeddings=4096, rms_norm_eps=1e-5)
LLAMA_TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=1000, max_position_embeddings=4096)
BATCH = 8  # GREEN's official batch


class MemoryPeak:
    """Peak of the device's used memory (total - free, every process), sampled every 50 ms."""

    def __init__(self, device: str):
        self.device, self.peak, self._stop = device, 0, threading.Event()

    def _sample(self) -> None:
        while not self._stop.is_set():
            free, total = torch.cuda.mem_get_info(torch.device(self.device))
            self.peak = max(self.peak, total - free)
            self._stop.wait(0.05)

    def __enter__(self):
        if self.device.startswith("cuda"):
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self.device.startswith("cuda"):
            self._thread.join()


def word_tokenizer(folder: Path, vocab_size: int) -> None:
    """A word-level tokenizer over ids 0..vocab_size-1 (<unk>, <s>, </s> first, as Llama's),
    so any id decodes; the prompts are given as ids, the tokenizer only pads and decodes."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"w{i}": i for i in range(3, vocab_size)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                            pad_token="</s>").save_pretrained(folder)


def green_backend(folder: Path, shape: dict, device: str):
    """TransformersBackend holding a random-weight Llama of `shape` in float16, built on the
    device (no weights written: the replicas share this model's tensors)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from rexrank.llm import LLMSettings
    from rexrank.llm.transformers_backend import TransformersBackend

    word_tokenizer(folder, shape["vocab_size"])
    config = LlamaConfig(**shape, bos_token_id=1, eos_token_id=2, pad_token_id=2)
    config.save_pretrained(folder)
    torch.manual_seed(0)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float16)  # built in float16 at once: no float32 copy of 7 B parameters
    try:
        with torch.device(device):
            model = LlamaForCausalLM(config).eval()
    finally:
        torch.set_default_dtype(default)
    settings = LLMSettings(backend="transformers", model_path=str(folder), device=device, dtype="float16",
                           batch_size=BATCH, replicas=1, cache=False)
    backend = TransformersBackend(settings, sort_by_length=False)
    backend._load_tokenizer()
    backend._adopt(model, device, "float16")
    return backend


def green_requests(n_batches: int, lengths: tuple[int, int], vocab: int, new_tokens: int):
    from rexrank.llm import LLMRequest

    generator = torch.Generator().manual_seed(1)
    requests = []
    for _ in range(n_batches * BATCH):
        n = int(torch.randint(lengths[0], lengths[1] + 1, (1,), generator=generator))
        ids = [1] + torch.randint(3, vocab, (n - 1,), generator=generator).tolist()
        requests.append(LLMRequest.completion("", prompt_ids=ids, max_tokens=new_tokens))
    batches = [list(range(k * BATCH, (k + 1) * BATCH)) for k in range(n_batches)]
    return requests, batches


def timed_generate(backend, requests, batches, device: str):
    suite.synchronize(device)
    with MemoryPeak(device) as memory:
        start = time.perf_counter()
        responses = backend.generate(requests, batches=batches)
        seconds = time.perf_counter() - start
    failed = [r.error for r in responses if not r.ok]
    if failed:
        raise SystemExit(f"generation failed: {failed[0]}")
    return seconds, [[responses[i].completion_ids for i in batch] for batch in batches], memory.peak


def run_green(args, device: str) -> None:
    shape = LLAMA_TINY if args.smoke else LLAMA_7B
    lengths = (20, 60) if args.smoke else (420, 700)
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        backend = green_backend(Path(tmp), shape, device)
        params = sum(p.numel() for p in backend._model.parameters())
        requests, batches = green_requests(args.batches, lengths, shape["vocab_size"], args.new_tokens)
        warm, warm_batches = green_requests(1, lengths, shape["vocab_size"], 4)
        print(f"GREEN: random Llama of {params / 1e6:,.1f} M parameters, float16, on {device}, built in "
              f"{time.perf_counter() - started:.0f} s; {len(batches)} official batches of {BATCH}, prompts "
              f"{lengths[0]}-{lengths[1]} ids, {args.new_tokens} new tokens")
        backend.generate(warm, batches=warm_batches)  # kernels chosen, allocator warm
        sequential_s, sequential_ids, sequential_peak = timed_generate(backend, requests, batches, device)
        if device.startswith("cuda"):
            torch.cuda.empty_cache()  # what the sequential run cached is free for the replicas' caches
        backend.replicas = args.replicas  # None: as many as the free memory holds
        started = time.perf_counter()
        many = backend._replica_count([r.param_dict for r in requests])
        if many > 1:  # starts the replicas and warms each
            backend.generate(warm * many, batches=[[i + k * BATCH for i in range(BATCH)] for k in range(many)])
        start_up = time.perf_counter() - started
        concurrent_s, concurrent_ids, concurrent_peak = timed_generate(backend, requests, batches, device)
        backend.close()
    studies = len(requests)
    differ = sum(a != b for a, b in zip(sequential_ids, concurrent_ids))
    tokens = sum(len(ids) for batch in sequential_ids for ids in batch)
    print(f"  official sequential: {sequential_s / studies:.3f} s/study ({tokens / sequential_s:.0f} new tokens/s)")
    print(f"  {many} replicas at once: {concurrent_s / studies:.3f} s/study ({tokens / concurrent_s:.0f} new tokens/s; "
          f"replicas started in {start_up:.1f} s, not counted)")
    print(f"  sequential/concurrent = {sequential_s / concurrent_s:.2f} (goal >= 3)")
    print(f"  batches whose ids differ from the sequential run's: {differ} of {len(batches)} (must be 0)")
    if device.startswith("cuda"):
        gib = 1 << 30
        print(f"  peak GPU memory (device, every process): sequential {sequential_peak / gib:.1f} GiB, "
              f"concurrent {concurrent_peak / gib:.1f} GiB, concurrent/sequential = {concurrent_peak / sequential_peak:.2f}")
    if differ:
        raise SystemExit("the concurrent batches' ids differ from the official sequential run's")


def run_suite(args, device: str) -> None:
    """suite.py's measurement (build, warm-up, bare and suite rounds) on `device`."""
    references = suite.synthetic_reports(args.pairs, seed=1)
    predictions = suite.synthetic_reports(args.pairs, seed=2)
    texts = list(dict.fromkeys(predictions + references))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["REXRANK_CACHE"] = str(root / "rexrank-cache")
        started = time.perf_counter()
        models = suite.build(root / "models", texts)
        sentences, entities = suite.ratescore_inputs(models, texts, device)
        print(f"suite: {args.pairs} pairs on {device}, models built in {time.perf_counter() - started:.0f} s")
        suite.run_bare(models, texts[:8], sentences[:8], entities[:8], device)  # warm-up
        ratios = []
        for r in range(args.rounds):
            bare = suite.run_bare(models, texts, sentences, entities, device)
            seconds, _, own = suite.run_suite(models, predictions, references, root / f"cache{r}", device)
            ratios.append(seconds / sum(bare.values()))
            print(f"  round {r + 1}: suite {seconds:.1f} s, bare {sum(bare.values()):.1f} s "
                  f"({', '.join(f'{k} {v:.1f}' for k, v in bare.items())}); in the run: "
                  f"{', '.join(f'{k} {v:.1f}' for k, v in own.items())}")
        print(f"  suite/bare = {sorted(ratios)[len(ratios) // 2]:.3f} (goal <= 1.15)")
        print("RadGraph's pass against its forward passes (decode.py; old = the per-span reference reading):")
        decode.measure(models["radgraph"], texts, device, rounds=args.rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None, help="default: cuda (cpu with --smoke)")
    parser.add_argument("--pairs", type=int, default=None, help="suite pairs (default 600; 6 with --smoke)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--batches", type=int, default=None, help="GREEN official batches of 8 (default 6; 4 with --smoke)")
    parser.add_argument("--new-tokens", type=int, default=None, help="tokens per answer (default 350; 8 with --smoke)")
    parser.add_argument("--replicas", type=int, default=None, help="default: as many as the free GPU memory holds (2 with --smoke)")
    parser.add_argument("--skip-suite", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks that the script runs (any device)")
    args = parser.parse_args()
    smoke = args.smoke
    args.pairs = args.pairs or (6 if smoke else 600)
    args.batches = args.batches or (4 if smoke else 6)
    args.new_tokens = args.new_tokens or (8 if smoke else 350)
    args.replicas = args.replicas or (2 if smoke else None)
    device = args.device or ("cpu" if smoke else "cuda")
    from rexrank.models.checkpoints import pick_device

    pick_device(device)  # an unavailable device fails here, before any building
    started = time.perf_counter()
    if device.startswith("cuda"):
        print(f"device: {torch.cuda.get_device_name(torch.device(device))}, torch {torch.__version__}")
    if not args.skip_suite:
        run_suite(args, device)
    run_green(args, device)
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
