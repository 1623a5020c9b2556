"""RadGraph's decoding as it was written first: one word, one span and one relation at a
time. Kept as the reference that the batched decoding (model.DyGIE.score + decode.py) is
tested and benchmarked against (tests/radgraph/test_decode.py, benchmarks/decode.py);
nothing in the scoring path calls it.

On a GPU this path reads every document's labels back with its own transfers and every
relation label with a transfer of its own, so the device waits on Python after each
document. The heads (DyGIE.score) are shared: only the stitching of word vectors and the
reading of labels into entities, relations and JSON differ.
"""
from __future__ import annotations

from typing import Any

import torch


def word_vectors(annotator, encoded) -> list[torch.Tensor]:
    """Mean last-layer wordpiece vector per word (the encoder run on `annotator._encode`'s batch)."""
    transformer = annotator.model._embedder.transformer
    hidden = transformer(input_ids=encoded.ids.to(annotator.device), attention_mask=encoded.mask.to(annotator.device)).last_hidden_state
    return stitch(annotator, encoded.per_doc, encoded.owner, hidden)


def stitch(annotator, per_doc, owner, hidden: torch.Tensor) -> list[torch.Tensor]:
    content: list[list] = [[] for _ in per_doc]
    n_start = len(annotator._start_ids)
    for i, (d, n) in enumerate(owner):
        content[d].append(hidden[i, n_start : n_start + n])
    vectors = []
    for d, (pieces, offsets) in enumerate(per_doc):
        doc_hidden = torch.cat(content[d], dim=0) if pieces else hidden.new_zeros(0, hidden.size(-1))
        words = hidden.new_zeros(len(offsets), hidden.size(-1))
        for w, span in enumerate(offsets):
            if span is not None:
                words[w] = doc_hidden[span[0] : span[1]].mean(dim=0)
        vectors.append(words)
    return vectors


@torch.no_grad()
def decode(model, words: torch.Tensor, ner_namespace: str, relation_namespace: str):
    """(entities [(start, end, label)], relations [(start1, end1, start2, end2, label)])."""
    return read_document(model.score(words, ner_namespace, relation_namespace), model.settings.max_span_width)


def read_document(labels, max_span_width: int):
    """One document's labels (model.DocumentLabels) read one span and one relation at a time."""
    n_words = labels.n_words
    pairs = [(s, e) for s in range(n_words) for e in range(s, min(s + max_span_width, n_words))]
    spans = torch.tensor(pairs, dtype=torch.long, device=labels.ner.device).reshape(-1, 2)
    entities = [(int(s), int(e), int(l)) for (s, e), l in zip(spans.tolist(), labels.ner.tolist()) if l != 0]
    top_spans = spans[labels.top].tolist()
    relations = []
    for i, j in (labels.relations >= 0).nonzero().tolist():
        (s1, e1), (s2, e2) = top_spans[i], top_spans[j]
        relations.append((s1, e1, s2, e2, int(labels.relations[i, j])))
    return entities, relations


def to_json(words: list[str], entities, relations, ner_labels: list[str], relation_labels: list[str]) -> dict:
    index = {}
    for n, (s, e, _) in enumerate(entities, start=1):
        index.setdefault((s, e), n)
    result: dict[str, Any] = {}
    for n, (s, e, label) in enumerate(entities, start=1):
        rels = []
        for s1, e1, s2, e2, rel in relations:
            if (s1, e1) == (s, e) and (s2, e2) in index:
                rels.append([relation_labels[rel], str(index[(s2, e2)])])
        result[str(n)] = {
            "tokens": " ".join(words[s : e + 1]),
            "label": ner_labels[label],
            "start_ix": s,
            "end_ix": e,
            "relations": rels,
        }
    return {"text": " ".join(words), "entities": result}


def annotate(annotator, texts: list[str]) -> list[dict]:
    """annotator.annotate's output through the reference path (every text run; same batches)."""
    words = {t: annotator.words(t) for t in dict.fromkeys(texts)}
    out = {t: {"text": "", "entities": {}} for t in words if not words[t]}
    todo = sorted((t for t in words if words[t]), key=lambda t: len(words[t]))
    size = annotator.batch_size
    with torch.inference_mode():
        for start in range(0, len(todo), size):
            batch = todo[start : start + size]
            for text, vec in zip(batch, word_vectors(annotator, annotator._encode([words[t] for t in batch]))):
                entities, relations = decode(annotator.model, vec, annotator.ner_namespace, annotator.relation_namespace)
                out[text] = to_json(words[text], entities, relations, annotator.ner_labels, annotator.relation_labels)
    return [out[t] for t in texts]
