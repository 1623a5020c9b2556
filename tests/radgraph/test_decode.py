"""RadGraph's batched decoding (word vectors stitched per batch, a batch's labels read at
once with numpy, relations grouped by source) gives exactly what the per-word, per-span,
per-relation reference (rexrank.radgraph.reference, the code before it) gives: on random
labels, random hidden states (with -0.0), models whose scores tie, and whole annotations."""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from rexrank.radgraph import reference
from rexrank.radgraph.annotator import RadGraphAnnotator, _stitching
from rexrank.radgraph.decode import fetch, read, to_json
from rexrank.radgraph.fake import TINY_SETTINGS, write_archive, write_tiny_bert
from rexrank.radgraph.model import DocumentLabels
from support.tiny_report_models import CORPUS, make_tiny_radcliq_models


@pytest.fixture(scope="module")
def archives(tmp_path_factory):
    """The RadCliQ tests' tiny RadGraph (one segment per report) and the golden tests' (16-
    position segments, so words are cut across segments; large head weights)."""
    root = tmp_path_factory.mktemp("radgraph-decode")
    segmented = write_archive(root / "segmented", "radgraph", write_tiny_bert(root / "tinybert"), tarball=False, **TINY_SETTINGS)
    return {"whole": make_tiny_radcliq_models(root / "radcliq")["radgraph"], "segmented": segmented}


def _labels(rng: np.random.Generator, n_words: int, width: int, n_ner: int, n_rel: int) -> DocumentLabels:
    n_spans = sum(min(width, n_words - s) for s in range(n_words))
    k = int(rng.integers(1, n_spans + 1))
    ner = rng.integers(0, n_ner, n_spans) * (rng.random(n_spans) < rng.random())  # from none to every span tagged
    top = np.sort(rng.choice(n_spans, k, replace=False))
    relations = rng.integers(-1, n_rel, (k, k)) * (rng.random((k, k)) < rng.random()) - (rng.random((k, k)) < 0.5)
    relations = np.maximum(relations, -1)
    return DocumentLabels(n_words, torch.from_numpy(ner), torch.from_numpy(top), torch.from_numpy(relations))


def _span_table(width: int):
    def table(n: int) -> np.ndarray:
        return np.array([(s, e) for s in range(n) for e in range(s, min(s + width, n))], dtype=np.int64).reshape(-1, 2)
    return table


def test_span_table_is_every_span_by_start_then_end(archives):
    annotator = RadGraphAnnotator(model_path=str(archives["whole"]), device="cpu")
    model = annotator.model
    for width in (1, 2, 3, 8):
        model.settings.max_span_width, model._span_tables, model._device_spans = width, {}, {}
        for n in range(0, 30):
            expected = [(s, e) for s in range(n) for e in range(s, min(s + width, n))]
            host, on_device = model.span_table(n), model._spans_on(n, torch.device("cpu"))
            assert [tuple(x) for x in host.tolist()] == expected == [tuple(x) for x in on_device.tolist()]
            assert on_device.dtype == torch.long and host.shape == (len(expected), 2)


@pytest.mark.parametrize("seed", range(6))
def test_reading_a_batch_equals_reading_span_by_span(seed):
    rng = np.random.default_rng(seed)
    width = int(rng.integers(1, 9))
    docs = [_labels(rng, int(n), width, 5, 4) for n in rng.integers(1, 40, 25)] + [_labels(rng, 1, width, 5, 4)]
    ours = read(fetch(docs), _span_table(width))
    theirs = [reference.read_document(doc, width) for doc in docs]
    assert sum(len(e) + len(r) for e, r in theirs) > 100  # not vacuous
    assert ours == theirs
    assert all(type(x) is int for e, r in ours for t in e + r for x in t)  # plain ints, as the reference's


def _stitch_case(rng: random.Random, n_start: int, n_end: int, step: int):
    """per_doc, owner and the segmenting as RadGraphAnnotator._encode builds them, for random
    piece counts per word (0 = a word the tokenizer maps to nothing)."""
    per_doc = []
    for _ in range(rng.randint(1, 7)):
        offsets, cursor = [], 0
        for _ in range(rng.randint(1, 25)):
            n = rng.choice([0, 1, 1, 1, 1, 2, 3, 5])
            offsets.append((cursor, cursor + n) if n else None)
            cursor += n
        per_doc.append((list(range(cursor)), offsets))
    owner, lengths = [], []
    for d, (pieces, _) in enumerate(per_doc):
        chunks = [pieces[i : i + step] for i in range(0, len(pieces), step)] or [[]]
        for chunk in chunks:
            owner.append((d, len(chunk)))
            lengths.append(n_start + len(chunk) + n_end)
    return per_doc, owner, max(lengths)


@pytest.mark.parametrize("seed", range(8))
def test_word_vectors_equal_the_per_word_means_bit_for_bit(seed):
    rng = random.Random(seed)
    n_start, n_end = rng.choice([(1, 1), (0, 1), (2, 1)])
    per_doc, owner, width = _stitch_case(rng, n_start, n_end, step=rng.choice([3, 7, 500]))  # words cut across segments too
    hidden = torch.randn(len(owner), width, 6, generator=torch.Generator().manual_seed(seed))
    hidden[torch.rand(hidden.shape, generator=torch.Generator().manual_seed(seed + 100)) < 0.2] = -0.0
    annotator = type("A", (), {"_start_ids": [101] * n_start})()
    theirs = reference.stitch(annotator, per_doc, owner, hidden)
    ours = _stitching(per_doc, owner, width, n_start).stitch(hidden, owner, n_start)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape and torch.equal(a, b)
        assert torch.equal(torch.signbit(a), torch.signbit(b))  # -0.0 and 0.0 as the reference has them


def test_json_equals_the_reference_with_repeated_spans_and_dropped_relations():
    rng = random.Random(3)
    ner_labels, relation_labels = ["", "ANAT", "OBS"], ["located_at", "modify", "suggestive_of"]
    for _ in range(300):
        n_words = rng.randint(1, 12)
        words = [f"w{i}" for i in range(n_words)]

        def span():
            s = rng.randrange(n_words)
            return s, rng.randint(s, n_words - 1)

        entities = [(*span(), rng.randint(1, 2)) for _ in range(rng.randint(0, 8))]  # a span may repeat
        relations = [(*span(), *span(), rng.randrange(3)) for _ in range(rng.randint(0, 15))]
        relations += [(*entities[i][:2], *entities[j][:2], rng.randrange(3))
                      for i, j in zip(range(len(entities)), reversed(range(len(entities))))]
        rng.shuffle(relations)
        assert to_json(words, entities, relations, ner_labels, relation_labels) == \
            reference.to_json(words, entities, relations, ner_labels, relation_labels)


def _tie_model(annotator, mode: str):
    """Heads whose scores tie: between labels, with the null label, and between spans."""
    model = annotator.model
    with torch.no_grad():
        ner = model._ner._ner_scorers[annotator.ner_namespace][1]._module
        scorer = model._relation._relation_scorers[annotator.relation_namespace]
        pruner = model._relation._mention_pruners[annotator.relation_namespace]._scorer[1]._module
        if mode == "flat":  # every score the same: first label everywhere, arbitrary-but-shared top spans
            for layer in (ner, scorer, pruner):
                layer.weight.zero_()
                layer.bias.zero_()
            ner.bias[1] = 0.5
            scorer.bias[:] = 0.25
        elif mode == "coarse":  # weights rounded so that many scores coincide exactly
            for p in model.parameters():
                p.copy_(torch.round(p * 2) / 2)
        elif mode == "null":  # labels tie with the null score 0
            ner.weight.zero_()
            ner.bias.zero_()
            scorer.weight.zero_()
            scorer.bias.zero_()
            pruner.weight.zero_()
            pruner.bias.zero_()
    return annotator


TEXTS = CORPUS + [" ".join(CORPUS[i : i + 4]) for i in range(len(CORPUS) - 3)] + [
    "Effusion.", "no", "a b c d e f g h i j k l m n o p q r s t u v w x y z", "   ", "",
    "Cardiomediastinal silhouette unremarkable / stable ; left-sided effusion ( small ) ?",
]


@pytest.mark.parametrize("archive", ["whole", "segmented"])
@pytest.mark.parametrize("mode", ["random", "flat", "coarse", "null"])
def test_annotations_equal_the_reference_path(mode, archive, archives):
    annotator = _tie_model(RadGraphAnnotator(model_path=str(archives[archive]), batch_size=5, device="cpu"), mode)
    theirs = reference.annotate(annotator, TEXTS)
    ours = annotator.annotate(TEXTS, progress=False)
    assert ours == theirs
    if mode == "flat" or (archive == "segmented" and mode != "null"):  # not vacuous
        assert sum(len(a["entities"]) for a in ours) > 20
        assert sum(len(e["relations"]) for a in ours for e in a["entities"].values()) >= 5
    annotator.prefetch = True  # the GPU's schedule: batches prepared ahead, labels read behind
    assert annotator.annotate(TEXTS, progress=False) == theirs


@pytest.mark.parametrize("seed", range(4))
def test_decoding_equals_the_reference_on_random_word_vectors(seed, archives):
    """Word vectors with repeated and integer rows (ties between spans, in topk too)."""
    annotator = RadGraphAnnotator(model_path=str(archives["whole"]), device="cpu")
    if seed % 2:
        _tie_model(annotator, "coarse")
    generator = torch.Generator().manual_seed(seed)
    size = annotator.model._embedder.transformer.config.hidden_size
    docs = []
    for n in [1, 2, 3, 9, 17, 40, *torch.randint(1, 60, (10,), generator=generator).tolist()]:
        words = torch.randn(n, size, generator=generator)
        if n > 3:
            words[n // 2 :] = words[: n - n // 2].clone()  # repeated words: equal span vectors
        if seed >= 2:
            words = torch.round(words)
        docs.append(words)
    labels = [annotator.model.score(w, annotator.ner_namespace, annotator.relation_namespace) for w in docs]
    ours = annotator._read(fetch(labels), [[f"w{i}" for i in range(len(w))] for w in docs])
    theirs = []
    for w in docs:
        entities, relations = reference.decode(annotator.model, w, annotator.ner_namespace, annotator.relation_namespace)
        theirs.append(reference.to_json([f"w{i}" for i in range(len(w))], entities, relations, annotator.ner_labels,
                                        annotator.relation_labels))
    assert ours == theirs
