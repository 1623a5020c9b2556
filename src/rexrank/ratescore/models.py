"""The two RaTEScore models: the entity tagger (DeBERTa-v2 token classifier,
`Angelakeke/RaTE-NER-Deberta`) and the entity encoder (MPNet, `FremyCompany/BioLORD-2023-C`).

How the official code runs them (RaTEScore 0.6.0 `score.py`, MIT; reference
metrics_nonllm.md §6):
- tagger: one sentence at a time (batch_size=1 by default), `max_length=512`,
  truncation, argmax label per token; tokens are the sentence's own non-pad tokens;
- encoder: `max_length=30`, truncation, the last hidden state at position 0 ([CLS]).
Here sentences and entity strings are batched with padding (sorted by length); the
attention mask makes each result equal to the unbatched one up to float rounding.
Both run in fp32.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from rexrank.errors import MetricError
from rexrank.models.building import MODEL_BUILD_LOCK
from rexrank.models.prefetch import ahead, on_device
from rexrank.ratescore.spans import decode_spans

NER_MAX_LENGTH = 512
ENTITY_MAX_LENGTH = 30

Entity = tuple[str, str]  # (text, type)


def _batches(order: list[int], size: int):
    for start in range(0, len(order), size):
        yield order[start : start + size]


def _progress(total: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    # only worth a bar for long runs; tqdm also hides itself when stderr is not a terminal
    return tqdm(total=total, desc=desc, unit="text", disable=None if enabled and total > 256 else True, leave=False)


class EntityTagger:
    """Sentences -> entities (text, type), decoded with the official span rules."""

    def __init__(self, model_dir: Path, device: str, batch_size: int):
        import torch
        from transformers import AutoModelForTokenClassification, AutoTokenizer

        self.torch = torch
        self.device = device
        self.batch_size = batch_size
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.tokenizer.padding_side = "right"
        self.prefetch = on_device(device)
        with MODEL_BUILD_LOCK:
            self.model = AutoModelForTokenClassification.from_pretrained(model_dir).float().eval().to(device)
        self.id2label = {int(k): v for k, v in self.model.config.id2label.items()}
        bad = [v for v in self.id2label.values() if v != "O" and not (v.startswith(("B-", "I-")) and len(v) > 2)]
        if bad:
            raise MetricError(
                f"ratescore: NER model {model_dir} has labels that are not IOB tags: {bad}; the official code reads "
                f"B-/I- labels from config.json: pass ner_revision= a commit whose config.json has them, or ner_path="
            )
        self.special = tuple(t for t in (self.tokenizer.cls_token, self.tokenizer.sep_token) if t)

    def entity_types(self) -> set[str]:
        return {label[2:] for label in self.id2label.values() if label != "O"}

    def __call__(self, sentences: Sequence[str], *, progress: bool = True) -> list[list[Entity]]:
        if not sentences:
            return []
        encoded = self.tokenizer(list(sentences), max_length=NER_MAX_LENGTH, truncation=True)
        ids = encoded["input_ids"]
        labels: list[list[str]] = [[] for _ in sentences]
        order = sorted(range(len(sentences)), key=lambda i: len(ids[i]))
        def pad(batch: list[int]):
            return self.tokenizer.pad([{k: encoded[k][i] for k in encoded.keys()} for i in batch], padding=True,
                                      return_tensors="pt")

        # on a GPU the next batch is padded while this one runs (rexrank.models.prefetch)
        prepared = ahead(_batches(order, self.batch_size), pad, enabled=self.prefetch)
        with _progress(len(sentences), "ratescore NER", progress) as bar, self.torch.inference_mode():
            for batch, padded in prepared:
                inputs = padded.to(self.device)
                predicted = self.model(**inputs).logits.argmax(dim=-1).tolist()
                for row, i in zip(predicted, batch):
                    # the sentence's own positions only, as with the official batch_size=1
                    labels[i] = [self.id2label[label] for label in row[: len(ids[i])]]
                bar.update(len(batch))
        out = []
        for i in range(len(sentences)):
            tokens = self.tokenizer.convert_ids_to_tokens(ids[i])
            out.append(
                [
                    (self.tokenizer.convert_tokens_to_string(tokens[start : end + 1]), kind)
                    for start, end, kind in decode_spans(tokens, labels[i], self.special)
                ]
            )
        return out


class EntityEncoder:
    """Entity strings -> [CLS] embeddings (float32, one row per string)."""

    def __init__(self, model_dir: Path, device: str, batch_size: int):
        import torch
        from transformers import AutoModel, AutoTokenizer

        self.torch = torch
        self.device = device
        self.batch_size = batch_size
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.prefetch = on_device(device)
        with MODEL_BUILD_LOCK:
            self.model = AutoModel.from_pretrained(model_dir).float().eval().to(device)

    @property
    def dim(self) -> int:
        return int(self.model.config.hidden_size)

    def __call__(self, strings: Sequence[str], *, progress: bool = True) -> np.ndarray:
        out = np.zeros((len(strings), self.dim), dtype=np.float32)
        if not strings:
            return out
        order = sorted(range(len(strings)), key=lambda i: len(strings[i]))
        def tokenize(batch: list[int]):
            return self.tokenizer([strings[i] for i in batch], truncation=True, padding=True,
                                  max_length=ENTITY_MAX_LENGTH, return_tensors="pt")

        # on a GPU the next batch is tokenised while this one runs (rexrank.models.prefetch)
        prepared = ahead(_batches(order, self.batch_size), tokenize, enabled=self.prefetch)
        with _progress(len(strings), "ratescore entity embeddings", progress) as bar, self.torch.inference_mode():
            for batch, tokens in prepared:
                inputs = tokens.to(self.device)
                cls = self.model(**inputs).last_hidden_state[:, 0, :].float().cpu().numpy()
                out[batch] = cls
                bar.update(len(batch))
        return out
