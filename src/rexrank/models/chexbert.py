"""The CheXbert report labeler (Smit et al. 2020) on transformers 5, loading the official
`chexbert.pth` (reference metrics_nonllm.md §3.1-3.2). Written clean-room from the
architecture description; the CheXbert code itself is under a Stanford academic licence.

Architecture: bert-base-uncased `BertModel` (with its pooler, unused) + dropout 0.1 (inert in
eval) + 14 linear heads on the last-layer [CLS] vector: 13 x 4 classes (blank, positive,
negative, uncertain) and 1 x 2 classes for "No Finding" (blank, positive).

Checkpoint: a torch pickle {'epoch', 'model_state_dict', 'optimizer_state_dict'} whose
model keys are `module.bert.*` and `module.linear_heads.{0..13}.*` (DataParallel). We strip
`module.`, drop stray `position_ids` buffers, and load strictly.

Weights licence: Stanford Academic Software License (CheXbert, docket S20-295): academic,
non-commercial use only; downloaded at run time, never redistributed.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

import numpy as np

from rexrank.errors import MetricError
from rexrank.models.checkpoints import Checkpoint, pick_device, resolve
from rexrank.catalogue import BERT_BASE_UNCASED, CHEXBERT, rrg_scorers_sha256

CONDITIONS = (
    "Enlarged Cardiomediastinum",
    "Cardiomegaly",
    "Lung Opacity",
    "Lung Lesion",
    "Edema",
    "Consolidation",
    "Pneumonia",
    "Atelectasis",
    "Pneumothorax",
    "Pleural Effusion",
    "Pleural Other",
    "Fracture",
    "Support Devices",
    "No Finding",
)
CLASSES = ("blank", "positive", "negative", "uncertain")  # head output index -> meaning

# chexbert.pth in StanfordAIMI/RRG_scorers (uploaded 2022-05-13); pins and their sources: rexrank.catalogue
CHEXBERT_REPO = CHEXBERT.repo_id
CHEXBERT_REVISION = CHEXBERT.revision
CHEXBERT_FILE = CHEXBERT.filename
CHEXBERT_LICENCE = CHEXBERT.licence
# The tokenizer CheXbert was trained with (Apache-2.0).
TOKENIZER_REPO = BERT_BASE_UNCASED.repo_id
TOKENIZER_REVISION = BERT_BASE_UNCASED.revision
MAX_IDS = 512

_WS = re.compile(r"\s+")


def preprocess(text: str) -> str:
    """Official `get_impressions_from_csv`: strip, newline -> space, collapse whitespace, strip."""
    return _WS.sub(" ", text.strip().replace("\n", " ")).strip()


def truncate(ids: list[int], sep_id: int) -> list[int]:
    """Official `tokenize`: more than 512 ids -> the first 511 plus [SEP]."""
    return ids[: MAX_IDS - 1] + [sep_id] if len(ids) > MAX_IDS else ids


def bert_config_from_state(state: dict, num_attention_heads: int | None = None):
    """bert-base-uncased's BertConfig, with the sizes read off the weights (so scaled-down
    test checkpoints load too). Heads are not visible in the weights: hidden/64 (= 12 for
    bert-base) unless given."""
    from transformers import BertConfig

    try:
        vocab, hidden = state["bert.embeddings.word_embeddings.weight"].shape
        positions = state["bert.embeddings.position_embeddings.weight"].shape[0]
        token_types = state["bert.embeddings.token_type_embeddings.weight"].shape[0]
        intermediate = state["bert.encoder.layer.0.intermediate.dense.weight"].shape[0]
    except KeyError as exc:
        raise MetricError(f"chexbert checkpoint lacks {exc}: not a CheXbert state dict") from None
    layers = len({k.split(".")[3] for k in state if k.startswith("bert.encoder.layer.")})
    heads = num_attention_heads or max(1, hidden // 64)
    return BertConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=intermediate,
        max_position_embeddings=positions,
        type_vocab_size=token_types,
    )


def build_model(config):
    """The labeler module (BertModel + dropout + 14 heads) with random weights."""
    import torch
    from transformers import BertModel

    class CheXbertModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = BertModel(config, add_pooling_layer=True)
            self.dropout = torch.nn.Dropout(0.1)
            sizes = [4] * 13 + [2]
            self.linear_heads = torch.nn.ModuleList(torch.nn.Linear(config.hidden_size, k) for k in sizes)

        def forward(self, input_ids, attention_mask):
            cls = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state[:, 0, :]
            hidden = self.dropout(cls)
            return cls, [head(hidden) for head in self.linear_heads]

    return CheXbertModel()


def load_state(path: Path) -> dict:
    import torch

    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a corrupt or foreign file: say which
        raise MetricError(f"cannot read CheXbert checkpoint {path}: {exc}") from exc
    state = blob.get("model_state_dict", blob) if isinstance(blob, dict) else None
    if not isinstance(state, dict):
        raise MetricError(f"{path} holds no 'model_state_dict'")
    return {(k[len("module.") :] if k.startswith("module.") else k): v for k, v in state.items()}


class CheXbert:
    """Loaded labeler: `encode(texts)` -> [CLS] vectors and 14 labels per text."""

    def __init__(
        self,
        checkpoint_path: str | None = None,
        revision: str | None = None,
        tokenizer: str | None = None,
        num_attention_heads: int | None = None,
        batch_size: int = 32,
        device: str | None = None,
    ):
        from rexrank.models.encoders import checkpoint_identity, checkpoint_for, fetch_files

        self.checkpoint = Checkpoint(
            CHEXBERT_REPO,
            revision or CHEXBERT_REVISION,
            filename=CHEXBERT_FILE,
            path=checkpoint_path,
            licence=CHEXBERT_LICENCE,
            sha256=rrg_scorers_sha256(CHEXBERT_FILE, revision or CHEXBERT_REVISION),
        )
        path = resolve(self.checkpoint, option="checkpoint_path")
        if path.is_dir():
            path = path / CHEXBERT_FILE
        self.tokenizer_checkpoint = checkpoint_for(
            tokenizer or TOKENIZER_REPO, None, default_model=TOKENIZER_REPO, default_revision=TOKENIZER_REVISION, licence="Apache-2.0"
        )
        folder = fetch_files(self.tokenizer_checkpoint, option="tokenizer", weights=False)
        from transformers import AutoTokenizer  # after the files: missing weights fail before this slow import

        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.tokenizer_identity = checkpoint_identity(self.tokenizer_checkpoint, folder)
        state = load_state(path)
        state = {k: v for k, v in state.items() if not k.endswith("position_ids")}
        self.config = bert_config_from_state(state, num_attention_heads)
        model = build_model(self.config)
        missing, unexpected = model.load_state_dict(state, strict=False)
        missing = [k for k in missing if not k.endswith(("position_ids", "token_type_ids"))]  # buffers, not weights
        if missing or unexpected:
            raise MetricError(
                f"CheXbert checkpoint {self.checkpoint.describe()} does not match the architecture: "
                f"missing {missing[:5]}{'...' if len(missing) > 5 else ''}, unexpected {unexpected[:5]}"
            )
        self.device = pick_device(device)
        self.model = model.eval().to(self.device)
        self.batch_size = batch_size
        if self.checkpoint.path:
            stat = path.stat()
            self.identity = f"local:{path.resolve()}:{stat.st_size}:{int(stat.st_mtime)}|tok:{self.tokenizer_identity}"
        else:
            self.identity = f"{self.checkpoint.describe()}|tok:{self.tokenizer_identity}"

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        cleaned = [preprocess(t) for t in texts]
        encoded = self.tokenizer(cleaned, add_special_tokens=True, verbose=False)["input_ids"]
        return [truncate(list(ids), self.tokenizer.sep_token_id) for ids in encoded]

    def encode(self, texts: Sequence[str], *, progress: bool = False) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per text: (last-layer [CLS] float32 [hidden], labels int8 [14] in CLASSES indices)."""
        import torch
        from tqdm.auto import tqdm

        ids = self.token_ids(texts)
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        out: list = [None] * len(ids)
        starts = range(0, len(order), self.batch_size)
        for start in tqdm(starts, desc="chexbert", unit="batch", disable=not progress):
            batch = order[start : start + self.batch_size]
            width = max(len(ids[i]) for i in batch)
            input_ids = torch.zeros((len(batch), width), dtype=torch.long)  # official pad id 0
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, i in enumerate(batch):
                input_ids[row, : len(ids[i])] = torch.tensor(ids[i])
                mask[row, : len(ids[i])] = 1
            with torch.inference_mode():
                cls, logits = self.model(input_ids.to(self.device), mask.to(self.device))
                labels = torch.stack([head.argmax(dim=1) for head in logits], dim=1)
            cls = cls.float().cpu().numpy()
            labels = labels.cpu().numpy().astype(np.int8)
            for row, i in enumerate(batch):
                out[i] = (np.ascontiguousarray(cls[row]), labels[row])
        return out
