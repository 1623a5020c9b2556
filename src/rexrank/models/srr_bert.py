"""SRR-BERT (Delbrouck et al., ACL 2025) as RadEval runs it (radeval/metrics/SRRBert/srr_bert.py,
MIT; read, not copied): a BERT sentence classifier with 163 sigmoid outputs (finding leaves
with their status, e.g. "Edema (Present)"), `StanfordAIMI/SRR-BERT-Leaves-with-Statuses`
loaded as `BertForSequenceClassification(num_labels=163)`, with the tokenizer of
`microsoft/BiomedVLP-CXR-BERT-general` (max 512 tokens, truncated).

A report is split into sentences (`sentences`), every sentence is classified (label on
where sigmoid(logit) > 0.5), and the report's labels are the union over its sentences.
"""
from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from rexrank.catalogue import Checkpoint
from rexrank.errors import MetricError
from rexrank.models.building import MODEL_BUILD_LOCK

NUM_LABELS = 163  # RadEval's leaves_with_statuses_mapping.json: the model's output size
THRESHOLD = 0.5
MAX_TOKENS = 512
PUNKT = "tokenizers/punkt_tab/english/"  # NLTK's English Punkt parameters, which sent_tokenize reads

# RadEval's list-number clean-up, in its order: "1." at the start, "word.2.", "word2.",
# "word 2." and ". 2." lose the number (never a decimal: "3.5" stays)
_NUMBERING = (
    (re.compile(r"^\s*\d+\.(?!\d)\s*"), ""),
    (re.compile(r"(\w)\.(\d+)\.(?!\d)\s*"), r"\1. "),
    (re.compile(r"(\w)(\d+)\.(?!\d)\s*"), r"\1. "),
    (re.compile(r"(\w)\s+\d+\.(?!\d)\s*"), r"\1. "),
    (re.compile(r"([.!?])\s*\d+\.(?!\d)\s*"), r"\1 "),
)
_GLUED = re.compile(r"\.([A-Z])")  # "effusion.Heart" -> "effusion. Heart"


def sentences(text: str) -> list[str]:
    """RadEval's `srr_bert_parse_sentences`: list numbers removed, a space after a period
    glued to a capital, a final period added when the text has no final . ! ?, then NLTK's
    `sent_tokenize` (English Punkt)."""
    import nltk

    for pattern, replacement in _NUMBERING:
        text = pattern.sub(replacement, text)
    text = _GLUED.sub(r". \1", text)
    if not text.strip().endswith((".", "!", "?")):
        text = text.strip() + "."
    return nltk.sent_tokenize(text)  # looked up on the module: tests replace it for both pipelines


def punkt_available() -> bool:
    import nltk

    try:
        nltk.data.find(PUNKT)
    except LookupError:
        return False
    return True


def require_punkt() -> None:
    if not punkt_available():
        raise MetricError("srr_bert: NLTK's English sentence model (punkt_tab) is not installed here; fetch it "
                          "where the network is reachable with `rexrank weights download srr_bert` "
                          "(or python -m nltk.downloader punkt_tab)")


class SRRBertLabeler:
    """The sentence classifier: `labels(sentences)` -> (n, 163) 0/1 array."""

    def __init__(self, checkpoint: Checkpoint, tokenizer: Checkpoint, *, device: str | None = None,
                 batch_size: int = 32):
        from rexrank.models.checkpoints import pick_device
        from rexrank.models.encoders import fetch_files

        from rexrank.models.encoders import folder_fingerprint

        model_dir = fetch_files(checkpoint, option="model_path", tokenizer=False)
        tokenizer_dir = fetch_files(tokenizer, option="tokenizer_path", weights=False)
        # names the loaded files (the classifier's revision is not pinned): keys the reference cache
        self.identity = f"{folder_fingerprint(model_dir)}-{folder_fingerprint(tokenizer_dir)}"
        self.device = pick_device(device)  # imports torch: after the weights are found
        from transformers import BertForSequenceClassification, BertTokenizer

        with MODEL_BUILD_LOCK:
            self.model = BertForSequenceClassification.from_pretrained(str(model_dir), num_labels=NUM_LABELS)
        self.model.to(self.device).eval()
        self.tokenizer = BertTokenizer.from_pretrained(str(tokenizer_dir))
        self.batch_size = batch_size

    def labels(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        import torch
        from tqdm.auto import tqdm

        out = np.zeros((len(texts), NUM_LABELS), dtype=np.int8)
        starts = range(0, len(texts), self.batch_size)
        with torch.inference_mode():
            for start in tqdm(starts, desc="srr_bert", unit="batch", disable=not progress):
                batch = list(texts[start:start + self.batch_size])
                enc = self.tokenizer(batch, add_special_tokens=True, max_length=MAX_TOKENS, padding=True,
                                     truncation=True, return_attention_mask=True, return_tensors="pt")
                logits = self.model(**{k: v.to(self.device) for k, v in enc.items()}).logits
                if logits.shape[-1] != NUM_LABELS:
                    raise MetricError(f"srr_bert: the model has {logits.shape[-1]} outputs, not {NUM_LABELS}")
                out[start:start + len(batch)] = (torch.sigmoid(logits) > THRESHOLD).cpu().numpy()
        return out
