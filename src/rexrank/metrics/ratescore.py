"""RaTEScore (Zhao et al., EMNLP 2024) as the official RaTEScore 0.6.0 computes it.

Pipeline (reference metrics_nonllm.md §6): split each report into sentences, tag medical
entities with the RaTE NER model, decode spans with the official rules, embed each entity
string with BioLORD-2023-C ([CLS], max 30 tokens), then score entity matches with the
type-affinity matrix and negation weight, harmonic mean of both directions; 0.5 when a
report has no entity. Per-study scores only; the corpus value is their mean (as RadEval
and ReXrank report it).

Sentences come from rexrank's implementation of the official medSpaCy/PyRuSH pipeline
(`sentence_splitter="pyrush"`, the default; `rexrank.ratescore.sentences`), which needs
no medSpaCy; "medspacy" runs the official pipeline where it is installed, "regex" is
rexrank's earlier splitter (a named option that differs from the official sentences).

Differences from the official code, on purpose:
- a report with no kept sentence (empty, or all sentences < 3 characters) officially
  drops out of the per-report lists and shifts every later pair (and the output is
  shorter than the input). Here it simply has no entities, so it scores 0.5;
- each distinct sentence is tagged once and each distinct entity string embedded once, in
  padded batches (equal to the official one-by-one runs up to float rounding).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from rexrank.catalogue import BIOLORD, RATE_NER
from rexrank.errors import MetricError
from rexrank.metrics.base import Metric, MetricResult, StudyRows
from rexrank.models.checkpoints import Checkpoint, pick_device, resolve
from rexrank.models.prefetch import on_device
from rexrank.ratescore.affinity import load_affinity
from rexrank.ratescore.match import NO_ENTITY_SCORE, rate_score
from rexrank.ratescore.sentences import DEFAULT_SPLITTER, SPLITTERS, get_splitter

# pins and their sources: rexrank.catalogue
NER_REPO, NER_REVISION = RATE_NER.repo_id, RATE_NER.revision
EMBEDDING_REPO, EMBEDDING_REVISION = BIOLORD.repo_id, BIOLORD.revision
NER_LICENCE, EMBEDDING_LICENCE = RATE_NER.licence, BIOLORD.licence

CACHE_VERSION = "1"  # bump when the cached analysis changes meaning


class RaTEScore(Metric):
    name = "ratescore"
    version = "1"
    description = (
        "RaTEScore: entity-level agreement between a generated and a reference radiology report. "
        "Medical entities (abnormality, non-abnormality, disease, non-disease, anatomy) are tagged "
        "with RaTE-NER, embedded with BioLORD-2023-C and matched with type-affinity and negation "
        "weights; harmonic mean of both directions, 0.5 when a report has no entity."
    )
    citation = (
        "@inproceedings{zhao2024ratescore, title={RaTEScore: A Metric for Radiology Report Generation},"
        " author={Zhao, Weike and Wu, Chaoyi and Zhang, Xiaoman and Zhang, Ya and Wang, Yanfeng and Xie, Weidi},"
        " booktitle={EMNLP}, year={2024}}"
    )
    higher_is_better = True

    def __init__(
        self,
        ner_model: str = NER_REPO,
        ner_revision: str = NER_REVISION,
        ner_path: str | None = None,
        embedding_model: str = EMBEDDING_REPO,
        embedding_revision: str = EMBEDDING_REVISION,
        embedding_path: str | None = None,
        affinity_matrix: Any = "long",
        sentence_splitter: str = DEFAULT_SPLITTER,
        batch_size: int = 32,
        device: str | None = None,
        cache: bool = True,
        cache_dir: str | None = None,
        progress: bool = True,
    ):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise MetricError(f"ratescore: batch_size must be a positive integer, got {batch_size!r}")
        if sentence_splitter not in SPLITTERS:
            raise MetricError(f"ratescore: sentence_splitter={sentence_splitter!r}; choose one of {', '.join(SPLITTERS)}")
        self.ner = Checkpoint(ner_model, ner_revision, path=ner_path, licence=NER_LICENCE)
        self.embedding = Checkpoint(embedding_model, embedding_revision, path=embedding_path, licence=EMBEDDING_LICENCE)
        self.affinity = load_affinity(affinity_matrix)
        self.sentence_splitter = sentence_splitter
        self.batch_size = batch_size
        self.device = device
        self.cache_enabled = cache
        self.cache_dir = cache_dir
        self.progress = progress
        self._split = None
        self._tagger = None
        self._encoder = None

    def config(self) -> dict:
        return {
            "ner_model": self.ner.provenance(),
            "embedding_model": self.embedding.provenance(),
            "affinity_matrix": self.affinity.provenance(),
            "sentence_splitter": self.sentence_splitter,
            "ner_max_length": 512,
            "entity_max_length": 30,
            "entity_embedding": "[CLS] last hidden state",
            "no_entity_score": NO_ENTITY_SCORE,
        }

    # -- loading -------------------------------------------------------------------
    def _splitter(self):
        if self._split is None:
            try:
                self._split = get_splitter(self.sentence_splitter)
            except ImportError as exc:
                raise MetricError(f"ratescore: {exc}") from None
        return self._split

    def _models(self):
        if self._tagger is None:
            from rexrank.models.shared import local_fingerprint, shared_model
            from rexrank.ratescore.models import EntityEncoder, EntityTagger

            ner_dir = resolve(self.ner, option="ner_path")
            emb_dir = resolve(self.embedding, option="embedding_path")
            device = pick_device(self.device)  # imports torch: after the weights are found
            tagger = shared_model(
                ("rate-ner", str(ner_dir), local_fingerprint(ner_dir), device, self.batch_size),
                lambda: EntityTagger(ner_dir, device, self.batch_size),
            )
            unknown = tagger.entity_types() - self.affinity.types()
            if unknown:
                raise MetricError(
                    f"ratescore: NER model {self.ner.describe()} predicts entity types {sorted(unknown)} "
                    f"that the affinity matrix {self.affinity.name!r} does not weigh"
                )
            self._encoder = shared_model(
                ("rate-embedding", str(emb_dir), local_fingerprint(emb_dir), device, self.batch_size),
                lambda: EntityEncoder(emb_dir, device, self.batch_size),
            )
            self._tagger = tagger
        return self._tagger, self._encoder

    def _split_all(self, texts: list[str]) -> tuple[list[list[str]], Exception | None]:
        """The sentences of each text. On a GPU, the first time, the models load meanwhile
        (splitting is Python work that would otherwise hold up the device); an error in
        loading is returned, to be raised only if a sentence needs the models, as it is
        without the overlap."""
        split = self._splitter()
        try:
            overlap = self._tagger is None and on_device(pick_device(self.device))
        except MetricError:
            overlap = False  # an unavailable device is reported when the models are needed
        if not overlap:
            return [split(text) for text in texts], None
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="rexrank-split") as pool:
            pending = pool.submit(lambda: [split(text) for text in texts])
            failed = None
            try:
                self._models()
            except Exception as exc:  # noqa: BLE001 - re-raised by the caller when the models are needed
                failed = exc
            return pending.result(), failed

    def _cache(self):
        from rexrank.refcache import ReferenceCache

        namespace = "/".join(
            ("ratescore", CACHE_VERSION, self.ner.describe(), self.embedding.describe(), self.sentence_splitter)
        )
        return ReferenceCache(namespace, self.cache_dir, enabled=self.cache_enabled)

    # -- analysis: report -> entities, types, embeddings -----------------------------
    def _analyse(self, texts: list[str], known_embeddings: dict[str, np.ndarray], known_sentences: dict) -> list[dict]:
        """Entities of each text, each distinct sentence tagged and each distinct entity
        string embedded once. `known_sentences` (sentence -> entities) and
        `known_embeddings` (entity string -> vector) are reused and extended, so the
        prediction side does not redo what the reference side did."""
        sentences_of, failed = self._split_all(texts)
        if not any(sentences_of):
            return [_analysis([], [], np.zeros((0, 0), dtype=np.float32)) for _ in texts]
        if failed is not None:
            raise failed
        tagger, encoder = self._models()
        new = list(dict.fromkeys(s for sentences in sentences_of for s in sentences if s not in known_sentences))
        if new:
            known_sentences.update(zip(new, tagger(new, progress=self.progress)))
        per_text = [[e for s in sentences for e in known_sentences[s]] for sentences in sentences_of]
        new_strings = list(dict.fromkeys(e for entities in per_text for e, _ in entities if e not in known_embeddings))
        if new_strings:
            known_embeddings.update(zip(new_strings, encoder(new_strings, progress=self.progress)))
        out = []
        for entities in per_text:
            strings = [e for e, _ in entities]
            vectors = (
                np.stack([known_embeddings[s] for s in strings]).astype(np.float32)
                if strings
                else np.zeros((0, encoder.dim), dtype=np.float32)
            )
            out.append(_analysis(strings, [t for _, t in entities], vectors))
        return out

    def _score(self, predictions: list[str], references: list[str]) -> StudyRows:
        cache = self._cache()
        known: dict[str, np.ndarray] = {}
        tagged: dict[str, list] = {}
        analyses, missing = cache.lookup(references)
        # cached reference entities seed the prediction side's embeddings
        for analysis in analyses.values():
            known.update(zip(analysis["entities"], analysis["embeddings"]))
        # uncached references and predictions in one pass: one length-sorted set of batches
        # per model, as few and as full as a bare forward pass over the same texts
        pending = list(dict.fromkeys(missing + [t for t in predictions if t not in analyses]))
        analyses.update(zip(pending, self._analyse(pending, known, tagged)))
        for text in missing:
            cache.put(text, analyses[text])

        scores = []
        for prediction, reference in zip(predictions, references):
            p, r = analyses[prediction], analyses[reference]
            scores.append(rate_score(p["embeddings"], p["types"], r["embeddings"], r["types"], self.affinity))
        side = {"entities_prediction": [len(analyses[t]["types"]) for t in predictions],
                "entities_reference": [len(analyses[t]["types"]) for t in references]}
        return self._rows({self.name: scores}, side=side,
                          tallies={"reference_cache": {"hits": cache.hits, "misses": cache.misses}})

    @classmethod
    def aggregate(cls, rows: StudyRows) -> MetricResult:
        result = super().aggregate(rows)
        pred, ref = rows.side["entities_prediction"], rows.side["entities_reference"]
        result.details = {
            "studies_without_entities": sum(1 for p, r in zip(pred, ref) if not p or not r),
            "mean_entities_prediction": _mean(pred),
            "mean_entities_reference": _mean(ref),
            "reference_cache": dict(rows.tallies["reference_cache"]),
        }
        return result


def _analysis(entities: list[str], types: list[str], embeddings: np.ndarray) -> dict:
    return {"entities": entities, "types": types, "embeddings": embeddings}


def _mean(values) -> float:
    values = list(values)
    return float(np.mean(values)) if values else float("nan")
