"""Tiny RaTEScore models (an entity tagger and an encoder) of the real architectures, built in a folder."""
from __future__ import annotations

import torch


LABELS = ["O"] + [f"{p}-{t}" for t in ("ABNORMALITY", "ANATOMY", "DISEASE", "NON-ABNORMALITY", "NON-DISEASE") for p in "BI"]


WORD_LABELS = {
    "No": "O",
    "There": "O",
    "is": "O",
    "a": "O",
    "the": "O",
    "in": "O",
    "pleural": "B-NON-DISEASE",
    "effusion": "I-NON-DISEASE",
    "pneumothorax": "B-NON-DISEASE",
    "Heart": "B-ANATOMY",
    "size": "I-ANATOMY",
    "normal": "B-NON-ABNORMALITY",
    "Left": "B-ANATOMY",
    "lung": "I-ANATOMY",
    "opacity": "B-ABNORMALITY",
    "Mild": "B-DISEASE",
    "cardiomegaly": "I-DISEASE",
    "Small": "B-DISEASE",
    "atelectasis": "B-DISEASE",
}


CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.,:;0123456789-"


def _build_tagger(path):
    from transformers import DebertaV2Config, DebertaV2ForTokenClassification, DebertaV2Tokenizer

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    words = [f"\u2581{w}" for w in WORD_LABELS]
    vocab = [(t, 0.0) for t in specials] + [(w, -1.0) for w in words] + [("\u2581", -8.0)]
    vocab += [(c, -10.0) for c in CHARS]
    tokenizer = DebertaV2Tokenizer(vocab=vocab)
    # deberta-v3-base layout (the RaTE-NER architecture), scaled down
    config = DebertaV2Config(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=512,
        relative_attention=True,
        max_relative_positions=-1,
        position_buckets=256,
        pos_att_type=["p2c", "c2p"],
        norm_rel_ebd="layer_norm",
        share_att_key=True,
        position_biased_input=False,
        type_vocab_size=0,
        pad_token_id=0,
        id2label=dict(enumerate(LABELS)),
        label2id={l: i for i, l in enumerate(LABELS)},
    )
    torch.manual_seed(0)
    model = DebertaV2ForTokenClassification(config).eval()
    # Make the prediction a function of the token alone: the layer's output projections
    # are zeroed, so the hidden state is LayerNorm(word embedding), whose largest
    # coordinate survives LayerNorm; the classifier reads coordinates 0..10.
    with torch.no_grad():
        layer = model.deberta.encoder.layer[0]
        for linear in (layer.attention.output.dense, layer.output.dense):
            linear.weight.zero_()
            linear.bias.zero_()
        for norm in (model.deberta.embeddings.LayerNorm, layer.attention.output.LayerNorm, layer.output.LayerNorm):
            norm.weight.fill_(1.0)
            norm.bias.zero_()
        emb = model.deberta.embeddings.word_embeddings.weight
        emb.zero_()
        vocab_ids = tokenizer.get_vocab()
        for token, index in vocab_ids.items():
            label = WORD_LABELS.get(token.lstrip("\u2581"), "O") if token.startswith("\u2581") else "O"
            emb[index, LABELS.index(label)] = 5.0
        model.classifier.weight.zero_()
        model.classifier.bias.zero_()
        for k in range(len(LABELS)):
            model.classifier.weight[k, k] = 1.0
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _build_encoder(path):
    from transformers import MPNetConfig, MPNetModel, MPNetTokenizer

    words = ["<s>", "<pad>", "</s>", "<unk>", "<mask>", "[UNK]"] + sorted({w.lower() for w in WORD_LABELS})
    words += sorted(set(CHARS.lower()))
    tokenizer = MPNetTokenizer(vocab={w: i for i, w in enumerate(words)})
    config = MPNetConfig(
        vocab_size=len(words), hidden_size=24, num_hidden_layers=2, num_attention_heads=2, intermediate_size=48,
        max_position_embeddings=64, pad_token_id=1, initializer_range=0.6,  # spread the random [CLS] vectors
    )
    torch.manual_seed(1)
    MPNetModel(config).eval().save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
