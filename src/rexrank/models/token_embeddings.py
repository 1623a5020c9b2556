"""Contextual token embeddings at a given layer, as BERTScore uses them.

`hidden_states[k]` (k transformer layers applied; 0 = embedding layer) is obtained by cutting
the model's layer list to its first k layers, as bert_score does, so the unused top layers
cost nothing. Texts are sorted by length and batched with padding; padding does not change
the embeddings of real tokens (attention mask).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from rexrank.errors import MetricError
from rexrank.models.checkpoints import Checkpoint

# Where the stack of transformer layers lives, per architecture family.
_LAYER_LISTS = ("encoder.layer", "transformer.layer", "encoder.layers", "layers")


def _find_layers(model):
    for path in _LAYER_LISTS:
        owner = model
        parts = path.split(".")
        try:
            for part in parts[:-1]:
                owner = getattr(owner, part)
            layers = getattr(owner, parts[-1])
        except AttributeError:
            continue
        import torch

        if isinstance(layers, torch.nn.ModuleList):
            return owner, parts[-1], layers
    return None


class TokenEmbedder:
    def __init__(self, checkpoint: Checkpoint, *, num_layers: int, batch_size: int = 64, device: str | None = None):
        from rexrank.models.encoders import load_encoder

        self.encoder = load_encoder(checkpoint, option="model", device=device)
        self.batch_size = batch_size
        self.num_layers = num_layers
        found = _find_layers(self.encoder.model)
        self._use_hidden_states = found is None
        if found is not None:
            import torch

            owner, attr, layers = found
            if num_layers > len(layers):
                raise MetricError(f"num_layers={num_layers} but {checkpoint.describe()} has {len(layers)} layers")
            setattr(owner, attr, torch.nn.ModuleList(list(layers)[:num_layers]))
        elif num_layers > getattr(self.encoder.config, "num_hidden_layers", num_layers):
            raise MetricError(f"num_layers={num_layers} but {checkpoint.describe()} has {self.encoder.config.num_hidden_layers} layers")
        tok = self.encoder.tokenizer
        self.special_ids = {i for i in (tok.cls_token_id, tok.sep_token_id) if i is not None}
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0

    @property
    def identity(self) -> str:
        return self.encoder.identity

    @property
    def max_length(self) -> int:
        return self.encoder.max_length

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """bert_score `sent_encode` on already stripped texts: special tokens added,
        truncated to the tokenizer's maximum; an empty text is just [CLS, SEP]."""
        tok = self.encoder.tokenizer
        empty = [tok.cls_token_id, tok.sep_token_id] if None not in (tok.cls_token_id, tok.sep_token_id) else tok("")["input_ids"]
        nonempty = [t for t in texts if t]
        encoded = iter(
            tok(nonempty, add_special_tokens=True, truncation=True, max_length=self.max_length)["input_ids"] if nonempty else []
        )
        return [list(next(encoded)) if t else list(empty) for t in texts]

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> list[tuple[np.ndarray, np.ndarray]]:
        """(ids int64 [L], L2-normalised float32 embeddings [L, d]) per text, input order."""
        import torch
        from tqdm.auto import tqdm

        ids = self.token_ids(texts)
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        out: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(ids)
        model = self.encoder.model
        starts = range(0, len(order), self.batch_size)
        for start in tqdm(starts, desc="embedding", unit="batch", disable=not progress):
            batch = order[start : start + self.batch_size]
            width = max(len(ids[i]) for i in batch)
            input_ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, i in enumerate(batch):
                input_ids[row, : len(ids[i])] = torch.tensor(ids[i])
                mask[row, : len(ids[i])] = 1
            with torch.inference_mode():
                result = model(
                    input_ids=input_ids.to(self.encoder.device),
                    attention_mask=mask.to(self.encoder.device),
                    output_hidden_states=self._use_hidden_states,
                )
                hidden = result.hidden_states[self.num_layers] if self._use_hidden_states else result.last_hidden_state
                hidden = hidden / hidden.norm(dim=-1, keepdim=True)
                hidden = hidden.float().cpu().numpy()
            for row, i in enumerate(batch):
                out[i] = (np.asarray(ids[i], dtype=np.int64), np.ascontiguousarray(hidden[row, : len(ids[i])]))
        return out  # type: ignore[return-value]
