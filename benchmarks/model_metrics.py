"""BERTScore and SembScore speed with random-weight models of the real architectures.

Models are built from config, not downloaded: distilroberta-base's RobertaConfig (6 layers,
768 hidden, vocab 50265) with a byte-level BPE trained on the benchmark texts, and
bert-base-uncased's BertConfig + 14 CheXbert heads saved as a `chexbert.pth` with the
official key names and a WordPiece vocabulary trained on the same texts.

Timed per metric, on the same report pairs:
- cold: empty reference cache (both sides computed);
- warm: references cached, new predictions (what a second submission on the same test set
  costs); goal warm <= 0.55 x cold;
- bare: a batched forward pass over the same distinct texts (length-sorted batches, same
  batch size, tokenisation included): the floor; goal cold within 1.3 x bare;
- BERTScore only: the bert-score package on the same model folder (its RoBERTa
  tokenisation differs by the prefix-space token on transformers 5; fine for timing).

Usage: python benchmarks/model_metrics.py [--pairs 1000] [--batch-size 64] [--skip-bert-score]
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from rexrank.metrics.registry import get_metric
from synthetic_reports import synthetic_reports

def build_roberta(root: Path, texts: list[str]) -> Path:
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizerFast

    folder = root / "distilroberta-random"
    folder.mkdir()
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts, vocab_size=8000, min_frequency=1, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    bpe.save_model(str(folder))
    RobertaTokenizerFast(vocab=str(folder / "vocab.json"), merges=str(folder / "merges.txt"), model_max_length=512).save_pretrained(folder)
    config = RobertaConfig(vocab_size=50265, hidden_size=768, num_hidden_layers=6, num_attention_heads=12,
                           intermediate_size=3072, max_position_embeddings=514, type_vocab_size=1, pad_token_id=1)
    RobertaModel(config).save_pretrained(folder)
    return folder


def build_chexbert(root: Path, texts: list[str]) -> tuple[Path, Path]:
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig, BertModel, BertTokenizer

    tok_dir = root / "bert-tokenizer"
    tok_dir.mkdir()
    wp = BertWordPieceTokenizer(lowercase=True)
    wp.train_from_iterator(texts, vocab_size=8000, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    wp.save_model(str(tok_dir))
    BertTokenizer(vocab=str(tok_dir / "vocab.txt"), model_max_length=512).save_pretrained(tok_dir)
    config = BertConfig()  # = bert-base-uncased
    bert = BertModel(config, add_pooling_layer=True)
    state = {f"module.bert.{k}": v for k, v in bert.state_dict().items() if not k.endswith(("position_ids", "token_type_ids"))}
    for i, k in enumerate([4] * 13 + [2]):
        head = torch.nn.Linear(768, k)
        state[f"module.linear_heads.{i}.weight"], state[f"module.linear_heads.{i}.bias"] = head.weight.detach(), head.bias.detach()
    path = root / "chexbert.pth"
    torch.save({"epoch": 0, "model_state_dict": state}, path)
    return path, tok_dir


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bare_forward(model, tokenizer, texts: list[str], batch_size: int, **tok_kwargs) -> None:
    """The floor: tokenise, sort by length, batched forward, nothing else."""
    ids = tokenizer(texts, truncation=True, max_length=512, **tok_kwargs)["input_ids"]
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
    pad = tokenizer.pad_token_id
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            batch = [ids[i] for i in order[start : start + batch_size]]
            width = max(map(len, batch))
            x = torch.tensor([b + [pad] * (width - len(b)) for b in batch])
            mask = torch.tensor([[1] * len(b) + [0] * (width - len(b)) for b in batch])
            model(input_ids=x, attention_mask=mask)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--skip-bert-score", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    n = args.pairs
    refs = synthetic_reports(n, seed=1)
    preds_a = synthetic_reports(n, seed=2)  # first submission
    preds_b = synthetic_reports(n, seed=3)  # second submission, same references
    print(f"{n} pairs; distinct texts: refs {len(set(refs))}, preds {len(set(preds_a))}; "
          f"torch threads {torch.get_num_threads()}")
    figures = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        roberta = build_roberta(root, refs + preds_a + preds_b)
        chexbert, bert_tok = build_chexbert(root, refs + preds_a + preds_b)

        # ---- BERTScore ----------------------------------------------------------------
        opts = dict(model=str(roberta), num_layers=5, baseline=(0.84732, 0.84759504, 0.8473319),
                    batch_size=args.batch_size, progress=False, cache_dir=str(root / "cache_bs"))
        metric = get_metric("bertscore", **opts)
        metric.embedder  # load outside the timings
        texts_for_warm_up = list(dict.fromkeys(preds_a + refs))[: 2 * args.batch_size]
        bare_forward(metric.embedder.encoder.model, metric.embedder.encoder.tokenizer, texts_for_warm_up, args.batch_size)
        cold = timed(lambda: metric.score(preds_a, refs))
        warm = timed(lambda: metric.score(preds_b, refs))
        texts = list(dict.fromkeys(preds_a + refs))
        bare = timed(lambda: bare_forward(metric.embedder.encoder.model, metric.embedder.encoder.tokenizer, texts, args.batch_size))
        figures["bertscore"] = {"cold_s": cold, "warm_s": warm, "bare_forward_s": bare}
        if not args.skip_bert_score:
            import bert_score

            scorer = bert_score.BERTScorer(model_type=str(roberta), num_layers=5, batch_size=args.batch_size)
            figures["bertscore"]["bert_score_package_s"] = timed(lambda: scorer.score(preds_a, refs))

        # ---- SembScore -----------------------------------------------------------------
        semb = get_metric("sembscore", checkpoint_path=str(chexbert), tokenizer=str(bert_tok), batch_size=args.batch_size,
                          progress=False, cache_dir=str(root / "cache_semb"))
        semb.model  # load outside the timings
        bare_forward(semb.model.model.bert, semb.model.tokenizer, texts_for_warm_up, args.batch_size)
        cold = timed(lambda: semb.score(preds_a, refs))
        warm = timed(lambda: semb.score(preds_b, refs))
        bare = timed(lambda: bare_forward(semb.model.model.bert, semb.model.tokenizer, texts, args.batch_size))
        figures["sembscore"] = {"cold_s": cold, "warm_s": warm, "bare_forward_s": bare}

    for name, f in figures.items():
        print(f"\n{name}:")
        print(f"  cold  {f['cold_s']:7.2f} s   {n / f['cold_s']:7.1f} pairs/s")
        print(f"  warm  {f['warm_s']:7.2f} s   {n / f['warm_s']:7.1f} pairs/s   warm/cold = {f['warm_s'] / f['cold_s']:.2f} (goal <= 0.55)")
        print(f"  bare forward over the same distinct texts {f['bare_forward_s']:7.2f} s   cold/bare = {f['cold_s'] / f['bare_forward_s']:.2f} (goal <= 1.3)")
        if "bert_score_package_s" in f:
            print(f"  bert-score package {f['bert_score_package_s']:7.2f} s   ours cold / package = {f['cold_s'] / f['bert_score_package_s']:.2f}")
    print("\n" + json.dumps({k: {kk: round(vv, 3) for kk, vv in v.items()} for k, v in figures.items()}))


if __name__ == "__main__":
    main()
