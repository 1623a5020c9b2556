"""A tiny SRR-BERT of the real architecture (BertForSequenceClassification with 163 outputs,
the official state-dict layout; 2 layers of width 32) with random weights from a fixed seed,
and a small WordPiece tokenizer. Shared by tests/metrics/test_srr_bert.py and
tests/data/srr_bert/generate_golden.py, which runs RadEval's own pipeline on the same model."""
from __future__ import annotations

import re
from pathlib import Path

NUM_LABELS = 163
SEED = 0
INIT_RANGE = 0.5  # BERT's 0.02 makes every sentence's [CLS] nearly the same: labels would not vary


def stand_in_sent_tokenize(text: str, language: str = "english") -> list[str]:
    """NLTK's Punkt algorithm without the English parameters (punkt_tab cannot be fetched
    where the tests run); replaces nltk.sent_tokenize for both pipelines."""
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    return PunktSentenceTokenizer().tokenize(text)


def build(folder: Path) -> tuple[Path, Path]:
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    words = sorted(set(re.findall(r"[a-z]+", " ".join(_VOCAB_TEXT).lower())))
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *list("abcdefghijklmnopqrstuvwxyz0123456789.,;:()-"),
             *[w for w in words if len(w) > 1], *[f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz"]]
    vocab = list(dict.fromkeys(vocab))
    tokenizer_dir, model_dir = folder / "tokenizer", folder / "model"
    tokenizer_dir.mkdir(parents=True, exist_ok=True)
    (tokenizer_dir / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizer(str(tokenizer_dir / "vocab.txt"), do_lower_case=True).save_pretrained(str(tokenizer_dir))
    torch.manual_seed(SEED)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=512, num_labels=NUM_LABELS,
                        initializer_range=INIT_RANGE)
    model = BertForSequenceClassification(config).eval()
    tokenizer = BertTokenizer.from_pretrained(str(tokenizer_dir))
    with torch.no_grad():  # shift each label so that about one vocabulary sentence in ten has it
        logits = model(**tokenizer(_VOCAB_TEXT, padding=True, return_tensors="pt")).logits
        model.classifier.bias.sub_(logits.quantile(0.9, dim=0))
    model.save_pretrained(str(model_dir))
    return model_dir, tokenizer_dir


_VOCAB_TEXT = [
    "no acute cardiopulmonary process abnormality disease pleural effusion pneumothorax consolidation",
    "heart size normal the lungs are clear mediastinal contours within limits focal airspace opacity",
    "mild moderate small large left right bilateral lower upper lobe base atelectasis edema pulmonary",
    "stable unchanged new increased decreased cardiomegaly silhouette enlarged there is of and or with",
    "degenerative changes spine thoracic osseous structures intact bony calcified granuloma nodule",
]
