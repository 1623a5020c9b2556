"""Tiny random models with the architectures and file layouts of the real checkpoints behind
BERTScore (distilroberta-base: RoBERTa + byte-level BPE) and SembScore (chexbert.pth:
bert-base-uncased BertModel + 14 heads, DataParallel `module.` keys). Built here, independently
of rexrank's loaders, so loading them checks our code against the official layouts."""
from __future__ import annotations

from pathlib import Path

CORPUS = [
    "The lungs are clear. No pleural effusion or pneumothorax.",
    "Heart size is normal. The mediastinal contours are within normal limits.",
    "Mild cardiomegaly with small bilateral pleural effusions and basilar atelectasis.",
    "No acute cardiopulmonary process. No focal consolidation.",
    "Increased mild pulmonary edema and left basal atelectasis.",
    "Support devices are unchanged. There is a right-sided central venous catheter.",
    "Degenerative changes of the thoracic spine. No displaced rib fracture.",
]
ROBERTA_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]  # ids 0..4 as in RoBERTa


def make_tiny_roberta(directory: Path, *, hidden: int = 32, layers: int = 3, seed: int = 0) -> Path:
    """A RobertaModel (random weights) + byte-level BPE tokenizer trained with `tokenizers`,
    saved like a hub snapshot; model_max_length 512 as distilroberta-base."""
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizerFast

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(CORPUS * 5, vocab_size=400, min_frequency=1, special_tokens=ROBERTA_SPECIALS)
    bpe.save_model(str(directory))
    tokenizer = RobertaTokenizerFast(vocab=str(directory / "vocab.json"), merges=str(directory / "merges.txt"), model_max_length=512)
    tokenizer.save_pretrained(directory)
    torch.manual_seed(seed)
    config = RobertaConfig(
        vocab_size=bpe.get_vocab_size(),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden,
        max_position_embeddings=514,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
    )
    RobertaModel(config).save_pretrained(directory)
    return directory


def make_tiny_bert_tokenizer(directory: Path) -> Path:
    """A lower-casing WordPiece tokenizer (bert-base-uncased style) over a small vocabulary."""
    from transformers import BertTokenizer

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    words = sorted({w.strip(".,").lower() for line in CORPUS for w in line.replace("-", " - ").split()} - {""})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "-", *words, *[f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz"], *"abcdefghijklmnopqrstuvwxyz"]
    vocab = list(dict.fromkeys(vocab))
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizer(vocab=str(directory / "vocab.txt"), model_max_length=512).save_pretrained(directory)
    return directory


def make_tiny_chexbert(path: Path, vocab_size: int, *, hidden: int = 64, layers: int = 2, seed: int = 0,
                       position_ids: bool = True, drop: str | None = None) -> Path:
    """A scaled-down chexbert.pth: {'epoch', 'model_state_dict', 'optimizer_state_dict'} with
    the official key names `module.bert.*` and `module.linear_heads.{0..13}.*` (13 x 4-way and
    1 x 2-way heads), plus the `position_ids` buffer transformers 3 saved. `drop` removes one
    key (to test strict loading)."""
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=max(1, hidden // 64),
        intermediate_size=2 * hidden,
        max_position_embeddings=512,
        initializer_range=0.5,  # large random weights: [CLS] vectors and labels differ between texts
    )
    bert = BertModel(config, add_pooling_layer=True)
    state = {f"module.bert.{k}": v for k, v in bert.state_dict().items() if not k.endswith(("position_ids", "token_type_ids"))}
    if position_ids:
        state["module.bert.embeddings.position_ids"] = torch.arange(512).unsqueeze(0)
    for i, classes in enumerate([4] * 13 + [2]):
        head = torch.nn.Linear(hidden, classes)
        state[f"module.linear_heads.{i}.weight"] = head.weight.detach() * 5  # spread the argmax
        state[f"module.linear_heads.{i}.bias"] = head.bias.detach()
    if drop:
        del state[drop]
    torch.save({"epoch": 3, "model_state_dict": state, "optimizer_state_dict": {"state": {}, "param_groups": []}}, path)
    return Path(path)


def reference_cls_and_labels(checkpoint: Path, tokenizer_dir: Path, texts: list[str]):
    """Oracle: [CLS] vectors and head argmaxes with plain transformers, one text at a time,
    official preprocessing written out here (strip, \\n -> ' ', collapse \\s+, 511 + [SEP])."""
    import re

    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    state = torch.load(checkpoint, map_location="cpu", weights_only=True)["model_state_dict"]
    hidden = state["module.bert.embeddings.word_embeddings.weight"].shape[1]
    config = BertConfig(
        vocab_size=state["module.bert.embeddings.word_embeddings.weight"].shape[0],
        hidden_size=hidden,
        num_hidden_layers=len({k.split(".")[4] for k in state if k.startswith("module.bert.encoder.layer.")}),
        num_attention_heads=max(1, hidden // 64),
        intermediate_size=state["module.bert.encoder.layer.0.intermediate.dense.weight"].shape[0],
        max_position_embeddings=512,
    )
    bert = BertModel(config, add_pooling_layer=True).eval()
    bert.load_state_dict({k[len("module.bert."):]: v for k, v in state.items() if k.startswith("module.bert.") and not k.endswith("position_ids")}, strict=False)
    tok = BertTokenizer.from_pretrained(tokenizer_dir)
    out = []
    for text in texts:
        clean = re.sub(r"\s+", " ", text.strip().replace("\n", " ")).strip()
        ids = [tok.cls_token_id] + tok.convert_tokens_to_ids(tok.tokenize(clean)) + [tok.sep_token_id]
        if len(ids) > 512:
            ids = ids[:511] + [tok.sep_token_id]
        with torch.no_grad():
            cls = bert(input_ids=torch.tensor([ids])).last_hidden_state[0, 0]
        labels = [int((state[f"module.linear_heads.{i}.weight"] @ cls + state[f"module.linear_heads.{i}.bias"]).argmax()) for i in range(14)]
        out.append((cls.numpy(), labels))
    return out


def make_tiny_radcliq_models(root: Path) -> dict[str, Path]:
    """Tiny models of everything RadCliQ runs: RoBERTa (BERTScore), chexbert.pth + its
    WordPiece tokenizer (SembScore), a RadGraph archive folder whose encoder is a tiny BERT
    on the same tokenizer."""
    import torch
    from transformers import BertConfig, BertModel

    from rexrank.radgraph.fake import write_archive

    root = Path(root)
    roberta = make_tiny_roberta(root / "roberta")
    tok = make_tiny_bert_tokenizer(root / "bert")
    vocab_size = len((tok / "vocab.txt").read_text().split())
    torch.manual_seed(1)
    BertModel(BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=512)).save_pretrained(tok)
    chexbert = make_tiny_chexbert(root / "chexbert.pth", vocab_size)
    radgraph = write_archive(root / "radgraph", "radgraph", tok, tarball=False)
    return {"roberta": roberta, "tokenizer": tok, "chexbert": chexbert, "radgraph": radgraph, "cache": root / "cache"}
