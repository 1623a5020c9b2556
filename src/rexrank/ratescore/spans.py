"""IOB label sequence -> entity spans, following RaTEScore's `post_process` rule by rule.

The official decoder (RaTEScore 0.6.0 `utils.post_process`, MIT; reference
metrics_nonllm.md §6 step 3) is not a textbook IOB decoder, and its quirks change which
entities exist, so they are kept:
- it looks one label ahead and acts on (current, next) pairs;
- a B followed by B is emitted as a one-token span and `start` is re-set to the same
  token (the same token may later open a longer span only via I -> B);
- an I followed by B closes the open span (if any) and opens a new one at the I token,
  typed by that I label;
- `end` is not cleared after a B -> B emission, so a span still open at the end of the
  sentence is only emitted when `end` is unset.
Special tokens ([CLS]/[SEP]) are skipped but still count as positions: the label predicted
at [SEP] is the look-ahead of the last word token.
"""
from __future__ import annotations

from typing import Sequence

SPECIAL_TOKENS = ("[CLS]", "[SEP]")

Span = tuple[int, int, str]  # first token, last token (inclusive), entity type


def decode_spans(tokens: Sequence[str], labels: Sequence[str], special: Sequence[str] = SPECIAL_TOKENS) -> list[Span]:
    """Spans over `tokens` (which include the special tokens) from one label per token."""
    spans: list[Span] = []
    start: int | None = None
    end: int | None = None
    kind: str | None = None
    last = len(labels) - 1
    for i, (token, label) in enumerate(zip(tokens, labels)):
        if token in special or label == "O" or i >= last:
            continue
        ahead = labels[i + 1]
        if label.startswith("B-"):
            if ahead.startswith("I-"):
                start, kind = i, label[2:]
            elif ahead.startswith("B-"):
                spans.append((i, i, label[2:]))
                start, end, kind = i, i, label[2:]
            elif ahead.startswith("O"):
                spans.append((i, i, label[2:]))
                start = end = kind = None
        elif label.startswith("I-"):
            if ahead.startswith("B-"):
                end = i
                if start is not None:
                    spans.append((start, end, kind))
                start, kind = i, label[2:]
            elif ahead.startswith("O"):
                end = i
                if start is not None:
                    spans.append((start, end, kind))
                start = end = kind = None
    if start is not None and end is None:
        spans.append((start, len(tokens) - 2, kind))
    return spans
