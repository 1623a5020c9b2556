"""A batch's RadGraph labels -> entities, relations and radgraph's JSON, on the host.

The heads (model.DyGIE.score) leave each document's labels on the device; `fetch` starts
one device-to-host copy of the whole batch's labels, and `read` turns them into lists with
numpy over whole arrays. On a GPU the device therefore waits on nothing per document,
and `read` can run in another thread while the next batch's forward pass runs
(rexrank.models.prefetch.behind). Only integer labels cross over, so no number changes:
what is read is exactly what the per-span reading (reference.py) reads.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

from rexrank.radgraph.model import DocumentLabels

Entity = tuple[int, int, int]  # start word, end word (inclusive), NER label index
Relation = tuple[int, int, int, int, int]  # source start, end, target start, end, relation label index


@dataclass
class Fetched:
    """A batch's labels, flat, on their way to host memory."""

    flat: torch.Tensor
    ready: Any  # a CUDA event recorded after the copy, or None where the copy is already done
    layout: list[tuple[int, int, int]]  # per document: n_words, n_spans, n_kept


def fetch(documents: Sequence[DocumentLabels]) -> Fetched:
    """Starts copying the documents' labels to the host (one copy for the batch; no wait)."""
    parts, layout = [], []
    for doc in documents:
        parts += [doc.ner, doc.top, doc.relations.reshape(-1)]
        layout.append((doc.n_words, doc.ner.numel(), doc.top.numel()))
    flat = torch.cat(parts)
    if flat.device.type != "cuda":
        return Fetched(flat.cpu(), None, layout)
    # CUDA only (pinned memory and events need a device): out of the mutation tool's reach on
    # CPU machines; benchmarks/decode.py runs it on the device against the reference decoding
    # pragma: no mutate start
    host = torch.empty(flat.shape, dtype=flat.dtype, pin_memory=True)
    host.copy_(flat, non_blocking=True)
    ready = torch.cuda.Event()
    ready.record()
    return Fetched(host, ready, layout)
    # pragma: no mutate end


def read(fetched: Fetched, span_table) -> list[tuple[list[Entity], list[Relation]]]:
    """(entities, relations) per document, in the reference's order: entities by span
    (start, then end); relations by (source, target) position among the kept spans.
    span_table(n_words) -> numpy (n_spans, 2) of the spans the NER labels refer to."""
    if fetched.ready is not None:
        fetched.ready.synchronize()
    flat = fetched.flat.numpy()
    out, at = [], 0
    for n_words, n_spans, k in fetched.layout:
        ner = flat[at : at + n_spans]
        top = flat[at + n_spans : at + n_spans + k]
        labels = flat[at + n_spans + k : at + n_spans + k + k * k].reshape(k, k)
        at += n_spans + k + k * k
        spans = span_table(n_words)
        tagged = np.flatnonzero(ner)
        entities = list(zip(spans[tagged, 0].tolist(), spans[tagged, 1].tolist(), ner[tagged].tolist()))
        source, target = np.nonzero(labels >= 0)  # row-major, as torch's nonzero
        kept = spans[top]
        relations = list(zip(kept[source, 0].tolist(), kept[source, 1].tolist(), kept[target, 0].tolist(),
                             kept[target, 1].tolist(), labels[source, target].tolist()))
        out.append((entities, relations))
    return out


def to_json(words: list[str], entities: list[Entity], relations: list[Relation], ner_labels: Sequence[str],
            relation_labels: Sequence[str]) -> dict:
    """radgraph 0.1.18's annotation dict (see annotator.py). A relation is listed under its
    source entity, in relation order, when its target span is an entity; entities are
    numbered from 1 and a span's number is its first entity's (as list.index)."""
    index: dict[tuple[int, int], int] = {}
    for n, (s, e, _) in enumerate(entities, start=1):
        index.setdefault((s, e), n)
    outgoing: dict[tuple[int, int], list] = {}
    for s1, e1, s2, e2, rel in relations:
        target = index.get((s2, e2))
        if target is not None:
            outgoing.setdefault((s1, e1), []).append([relation_labels[rel], str(target)])
    result: dict[str, Any] = {}
    for n, (s, e, label) in enumerate(entities, start=1):
        rels = outgoing.get((s, e))
        result[str(n)] = {
            "tokens": " ".join(words[s : e + 1]),
            "label": ner_labels[label],
            "start_ix": s,
            "end_ix": e,
            # a copy per entity: two entities on one span (never from the model) get their own lists
            "relations": [list(r) for r in rels] if rels else [],
        }
    return {"text": " ".join(words), "entities": result}
