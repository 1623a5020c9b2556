"""Cold and warm time of RadEval's metrics in rexrank (ROUGE, Temporal F1, SRR-BERT) on
synthetic report pairs (default 200).

- cold: a fresh metric instance, nothing loaded (SRR-BERT: its model is read from disk, its
  reference cache is empty);
- warm: a second `score` of the same instance on new predictions (model loaded, SRR-BERT's
  references from its reference cache: what the next submission on a loaded worker costs);
- SRR-BERT bare: loading the same model and one batched forward pass over the distinct
  sentences (batches of 32, tokenisation included), nothing else: the floor.
SRR-BERT runs a random-weight model of the real architecture (bert-base BertConfig,
163 outputs, a WordPiece vocabulary trained on the texts; as benchmarks/model_metrics.py
builds CheXbert), and NLTK's Punkt without its English parameters stands in for punkt_tab
where that is not installed (the split costs the same). Temporal F1 is timed with
ner="keywords" (Stanza's radiology model is not fetched here); with ner="stanza" add
Stanza's NER per distinct text.
With rouge_score importable (`--official-rouge`), it is timed on the same pairs too.

Usage: python benchmarks/radeval_metrics.py [--pairs 200] [--rounds 3] [--threads N] [--official-rouge]
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

from rexrank.metrics.registry import get_metric
from synthetic_reports import synthetic_reports


def build_srr_bert(root: Path, texts: list[str]) -> tuple[Path, Path]:
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    tok_dir, model_dir = root / "cxr-bert-tokenizer", root / "srr-bert-random"
    tok_dir.mkdir()
    wp = BertWordPieceTokenizer(lowercase=True)
    wp.train_from_iterator(texts, vocab_size=8000, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    wp.save_model(str(tok_dir))
    BertTokenizer(vocab_file=str(tok_dir / "vocab.txt"), model_max_length=512).save_pretrained(str(tok_dir))
    BertForSequenceClassification(BertConfig(num_labels=163)).save_pretrained(str(model_dir))
    return model_dir, tok_dir


def srr_bert_bare(model_dir: Path, tok_dir: Path, sentences: list[str]) -> float:
    from transformers import BertForSequenceClassification, BertTokenizer

    t0 = time.perf_counter()
    model = BertForSequenceClassification.from_pretrained(str(model_dir), num_labels=163).eval()
    tokenizer = BertTokenizer.from_pretrained(str(tok_dir))
    with torch.inference_mode():
        for start in range(0, len(sentences), 32):
            enc = tokenizer(sentences[start:start + 32], max_length=512, padding=True, truncation=True, return_tensors="pt")
            (torch.sigmoid(model(**enc).logits) > 0.5).numpy()
    return time.perf_counter() - t0


def timed(metric, predictions, references) -> float:
    t0 = time.perf_counter()
    metric.score(predictions, references)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--official-rouge", action="store_true")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    import nltk

    from rexrank.models import shared, srr_bert

    if not srr_bert.punkt_available():
        from nltk.tokenize.punkt import PunktSentenceTokenizer

        nltk.sent_tokenize = lambda text, language="english": PunktSentenceTokenizer().tokenize(text)
        srr_bert.punkt_available = lambda: True
        print("punkt_tab not installed: NLTK's Punkt without English parameters stands in")
    refs = synthetic_reports(args.pairs, seed=1)
    preds, preds2 = synthetic_reports(args.pairs, seed=2), synthetic_reports(args.pairs, seed=3)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir, tok_dir = build_srr_bert(Path(tmp), refs + preds + preds2)
        sentences = list(dict.fromkeys(s for t in refs + preds for s in srr_bert.sentences(t)))
        options = {"rouge": {}, "temporal_f1": {"ner": "keywords", "progress": False},
                   # the figures in README.md are of the distinct-sentence option (the default since
                                   # issue 30 classifies every sentence in RadEval's batches of 4, uncached)
                   "srr_bert": {"model_path": str(model_dir), "tokenizer_path": str(tok_dir), "device": "cpu",
                                "batching": "distinct", "progress": False}}
        rows: dict[str, list[tuple[float, float]]] = {name: [] for name in options}
        bare = []
        for r in range(args.rounds):
            options["srr_bert"]["cache_dir"] = str(Path(tmp) / f"cache-{r}")  # empty for each cold run
            for name, opts in options.items():
                shared.clear()
                metric = get_metric(name, **opts)
                cold = timed(metric, preds, refs)
                warm = timed(metric, preds2, refs)
                rows[name].append((cold, warm))
                print(f"round {r + 1} {name:12s} cold {cold:7.3f} s  warm {warm:7.3f} s")
            bare.append(srr_bert_bare(model_dir, tok_dir, sentences))
            print(f"round {r + 1} srr_bert bare {bare[-1]:7.3f} s ({len(sentences)} distinct sentences)")
        print(f"\nmedian of {args.rounds} rounds, {args.pairs} pairs, torch threads {torch.get_num_threads()}:")
        for name, values in rows.items():
            cold, warm = statistics.median(v[0] for v in values), statistics.median(v[1] for v in values)
            print(f"{name:12s} cold {cold:7.3f} s  warm {warm:7.3f} s")
        print(f"srr_bert     bare {statistics.median(bare):7.3f} s  cold/bare = "
              f"{statistics.median(v[0] for v in rows['srr_bert']) / statistics.median(bare):.2f}")
        if args.official_rouge:
            from rouge_score import rouge_scorer

            scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
            t0 = time.perf_counter()
            [scorer.score(r, p) for r, p in zip(refs, preds)]
            print(f"rouge_score (official) {time.perf_counter() - t0:7.3f} s")


if __name__ == "__main__":
    main()
