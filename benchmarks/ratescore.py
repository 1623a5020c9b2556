"""RaTEScore speed with random-weight models of the real architectures.

Models are built from config, not downloaded: a DeBERTa-v3-base token classifier
(RaTE-NER-Deberta's architecture: 12 layers, 768 hidden, 11 labels) and an MPNet-base
encoder (BioLORD-2023-C's architecture). Random weights tag many more entities than the
real NER model would, so absolute times are pessimistic; the ratios are what matter.

Timed: a cold run (empty reference cache), a warm run (references cached, only the
prediction side is computed), and a bare batched forward pass of both models over the
same distinct sentences and entity strings (the floor any implementation pays). The
sentence splitters are timed on their own over the same distinct texts: the default
"pyrush" (the official sentences) against the earlier "regex" one, as a share of the runs.

Usage: python benchmarks/ratescore.py [--pairs 1000] [--layers 12] [--batch-size 32]
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from rexrank.metrics.registry import get_metric
from rexrank.ratescore.sentences import DEFAULT_SPLITTER, get_splitter
from synthetic_reports import synthetic_reports

def build_models(root: Path, texts: list[str], layers: int) -> tuple[str, str]:
    from transformers import (DebertaV2Config, DebertaV2ForTokenClassification, DebertaV2Tokenizer, MPNetConfig,
                              MPNetModel, MPNetTokenizer)

    words = sorted({w.strip(".,") for t in texts for w in t.split()} - {""})
    chars = sorted(set("".join(words)) | set(".,"))
    labels = ["O"] + [f"{p}-{t}" for t in ("ABNORMALITY", "ANATOMY", "DISEASE", "NON-ABNORMALITY", "NON-DISEASE") for p in "BI"]
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = [(s, 0.0) for s in specials] + [(f"\u2581{w}", -1.0) for w in words] + [("\u2581", -8.0)] + [(c, -10.0) for c in chars]
    ner = DebertaV2ForTokenClassification(DebertaV2Config(
        vocab_size=128100, hidden_size=768, num_hidden_layers=layers, num_attention_heads=12, intermediate_size=3072,
        max_position_embeddings=512, relative_attention=True, max_relative_positions=-1, position_buckets=256,
        pos_att_type=["p2c", "c2p"], norm_rel_ebd="layer_norm", share_att_key=True, position_biased_input=False,
        type_vocab_size=0, pad_token_id=0, id2label=dict(enumerate(labels)), label2id={l: i for i, l in enumerate(labels)},
    ))
    ner.save_pretrained(root / "ner")
    DebertaV2Tokenizer(vocab=vocab).save_pretrained(root / "ner")
    lower = sorted({w.lower() for w in words} | {c.lower() for c in chars})
    mpnet_vocab = {w: i for i, w in enumerate(["<s>", "<pad>", "</s>", "<unk>", "<mask>", "[UNK]"] + lower)}
    MPNetModel(MPNetConfig(vocab_size=30527, hidden_size=768, num_hidden_layers=layers, num_attention_heads=12,
                           intermediate_size=3072, max_position_embeddings=514)).save_pretrained(root / "encoder")
    MPNetTokenizer(vocab=mpnet_vocab).save_pretrained(root / "encoder")
    return str(root / "ner"), str(root / "encoder")


def bare_forward(metric, texts: list[str]) -> float:
    """Both models over the distinct sentences and entity strings, nothing else."""
    tagger, encoder = metric._models()
    split = get_splitter(DEFAULT_SPLITTER)
    sentences = list(dict.fromkeys(s for t in texts for s in split(t)))
    entities = list(dict.fromkeys(e for row in tagger(sentences) for e, _ in row))
    bs = metric.batch_size
    start = time.perf_counter()
    with torch.inference_mode():
        order = sorted(sentences, key=len)
        for i in range(0, len(order), bs):
            enc = tagger.tokenizer(order[i : i + bs], padding=True, truncation=True, max_length=512, return_tensors="pt")
            tagger.model(**enc).logits.argmax(-1)
        order = sorted(entities, key=len)
        for i in range(0, len(order), bs):
            enc = encoder.tokenizer(order[i : i + bs], padding=True, truncation=True, max_length=30, return_tensors="pt")
            encoder.model(**enc).last_hidden_state[:, 0]
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--layers", type=int, default=12, help="transformer layers (12 = the real models)")
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    torch.manual_seed(0)
    preds, refs = synthetic_reports(args.pairs, seed=2), synthetic_reports(args.pairs, seed=1)
    split = get_splitter(DEFAULT_SPLITTER)
    n_sent = len({s for t in preds + refs for s in split(t)})
    print(f"{args.pairs} pairs, {len(set(preds + refs))} distinct reports, {n_sent} distinct sentences; "
          f"{args.layers}-layer DeBERTa-v2 + MPNet, random weights, {torch.get_num_threads()} threads")
    with tempfile.TemporaryDirectory() as tmp:
        ner, encoder = build_models(Path(tmp), preds + refs, args.layers)

        def metric():
            return get_metric("ratescore", ner_path=ner, embedding_path=encoder, device="cpu",
                              batch_size=args.batch_size, cache_dir=str(Path(tmp) / "cache"))

        m = metric()
        m._models()  # model loading is not timed
        t0 = time.perf_counter()
        cold = m.score(preds, refs)
        t_cold = time.perf_counter() - t0
        m2 = metric()
        m2._models()
        t0 = time.perf_counter()
        warm = m2.score(preds, refs)
        t_warm = time.perf_counter() - t0
        assert warm.details["reference_cache"]["misses"] == 0
        assert abs(cold.value - warm.value) < 1e-5
        t_bare = bare_forward(metric(), preds + refs)
    print(f"cold  {t_cold:8.1f} s  {args.pairs / t_cold:7.1f} pairs/s  (mean ratescore {cold.value:.4f}, "
          f"{cold.details['mean_entities_reference']:.1f} entities/reference)")
    print(f"warm  {t_warm:8.1f} s  {args.pairs / t_warm:7.1f} pairs/s  warm/cold = {t_warm / t_cold:.2f} (goal <= 0.55)")
    print(f"bare forward pass over the same distinct texts {t_bare:8.1f} s; cold/bare = {t_cold / t_bare:.2f} (goal <= 1.3)")
    distinct, distinct_preds = list(dict.fromkeys(preds + refs)), list(dict.fromkeys(preds))
    t_split = {name: split_time(name, distinct) for name in ("pyrush", "regex")}
    extra_cold = t_split["pyrush"] - t_split["regex"]
    extra_warm = split_time("pyrush", distinct_preds) - split_time("regex", distinct_preds)
    print(f"sentence splitting of the {len(distinct)} distinct texts: pyrush {t_split['pyrush']:.2f} s, regex "
          f"{t_split['regex']:.2f} s; pyrush costs {100 * extra_cold / (t_cold - extra_cold):+.1f} % on the cold run, "
          f"{100 * extra_warm / (t_warm - extra_warm):+.1f} % on the warm run (goal <= +10 %)")


def split_time(name: str, texts: list[str]) -> float:
    split = get_splitter(name)
    split(texts[0])  # rules loaded, not timed
    start = time.perf_counter()
    for text in texts:
        split(text)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
