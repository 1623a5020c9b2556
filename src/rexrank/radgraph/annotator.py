"""RadGraph annotation of reports: load a RRG_scorers model and turn texts into entity graphs.

Output per report, in radgraph 0.1.18's format (`utils.get_entity`), so annotations can be
compared with the official package's JSON:

    {"text": "<words joined by spaces>",
     "entities": {"1": {"tokens": "pleural effusion", "label": "OBS-DP", "start_ix": 3,
                        "end_ix": 4, "relations": [["located_at", "2"], ...]}, ...}}

Entities are numbered from 1 in span order; a relation is listed under its source entity
and names its target by entity number; a relation whose source or target span is not a
predicted entity is dropped (as officially).

A report with no words (empty or whitespace only) gets no entities without running the
model: CXR-Report-Metric skips such (NaN) reports, which gives the same empty sets.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Sequence

from rexrank.errors import MetricError
from rexrank.models.building import MODEL_BUILD_LOCK
from rexrank.models.checkpoints import Checkpoint, pick_device
from rexrank.models.prefetch import ahead, behind, on_device
from rexrank.radgraph.preprocess import MODEL_TYPES, reader_word, words_for
from rexrank.catalogue import radgraph_encoder_revision
from rexrank.radgraph.tarball import DEFAULT_REVISION, RadGraphArchive, checkpoint_for, load_archive

# Bump when anything that changes annotations for the same weights changes.
ANNOTATION_VERSION = "1"

logger = logging.getLogger(__name__)


def _transformer_folder(name: str, *, path: str | None, revision: str) -> Path:
    """Folder with the config and tokenizer of the encoder named in config.json: only its
    architecture and vocabulary are needed; its weights come from weights.th."""
    from rexrank.models.encoders import fetch_files

    if path or Path(name).is_dir():
        source = path or name
        if not Path(source).is_dir():
            raise MetricError(f"transformer_path={source!r} is not a folder")
        return Path(source)
    return fetch_files(Checkpoint(name, revision), option="transformer_path", weights=False)


def _load_transformer_parts(folder: Path):
    """(config, tokenizer) of the encoder from its folder."""
    from transformers import AutoConfig, AutoTokenizer

    try:
        return AutoConfig.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    except (OSError, ValueError) as exc:
        raise MetricError(f"cannot load the encoder config/tokenizer from {folder}: {exc}") from None


class RadGraphAnnotator:
    """Loads a RadGraph model (`model_type` in radgraph / radgraph-xl) and annotates texts.

    model_path: a local `<type>.tar.gz` or an extracted folder; default: the Hub file
        StanfordAIMI/RRG_scorers/<type>.tar.gz at `revision`.
    transformer_path: a local folder with the encoder's config + tokenizer (config.json
        names a Hub id such as PubMedBERT); default: that Hub id at `transformer_revision`
        (default: the commit pinned for it in rexrank.catalogue, else main).
    batch_size: reports encoded together (the encoder pass is batched; span heads run per
        report, as officially).
    """

    def __init__(
        self,
        model_type: str = "radgraph",
        *,
        model_path: str | None = None,
        revision: str = DEFAULT_REVISION,
        transformer_path: str | None = None,
        transformer_revision: str | None = None,
        batch_size: int = 16,
        device: str | None = None,
    ):
        if model_type not in MODEL_TYPES:
            raise MetricError(f"radgraph: model_type={model_type!r} is not supported; choose one of {', '.join(MODEL_TYPES)}")
        if batch_size < 1:
            raise MetricError(f"radgraph: batch_size must be >= 1, got {batch_size}")
        self.model_type = model_type
        self.batch_size = batch_size
        self.checkpoint: Checkpoint = checkpoint_for(model_type, path=model_path, revision=revision)
        archive: RadGraphArchive = load_archive(self.checkpoint, option="model_path")
        self.archive = archive
        source = str(archive.directory)
        self.transformer_name = archive.transformer_name()
        transformer_revision = transformer_revision or radgraph_encoder_revision(self.transformer_name)
        self.transformer_revision = transformer_revision
        # every file is here before the heavy imports: missing weights fail at once
        encoder_folder = _transformer_folder(self.transformer_name, path=transformer_path, revision=transformer_revision)
        self.device = pick_device(device)
        self.prefetch = on_device(self.device)  # next batch prepared during this one's pass (GPU only)

        import torch
        from transformers import AutoModel

        from rexrank.radgraph.model import DyGIE, DygieSettings

        settings = DygieSettings.from_archive(archive.model_config(), archive.vocabulary, source)
        # radgraph 0.1.18 names the label namespaces after the model type ("dataset" field)
        self.ner_namespace = f"{model_type}__ner_labels"
        self.relation_namespace = f"{model_type}__relation_labels"
        for ns in (self.ner_namespace, self.relation_namespace):
            if ns not in archive.vocabulary:
                raise MetricError(
                    f"{source}: vocabulary has no namespace {ns!r} (has {sorted(archive.vocabulary)}); "
                    f"is model_type={model_type!r} the right type for this model?"
                )
        self.ner_labels = archive.vocabulary[self.ner_namespace]
        self.relation_labels = archive.vocabulary[self.relation_namespace]

        config, self.tokenizer = _load_transformer_parts(encoder_folder)
        with MODEL_BUILD_LOCK:
            transformer = AutoModel.from_config(config)
        self.model = DyGIE(transformer, config.hidden_size, settings)
        state = torch.load(archive.weights_path, map_location="cpu", weights_only=True)
        self.model.load_weights(state, source)
        self.model.to(device=self.device, dtype=torch.float32).eval()

        self.max_length = archive.max_length()
        self._start_ids, self._end_ids = self._special_tokens()
        max_positions = getattr(config, "max_position_embeddings", None)
        if self.max_length is None and max_positions is None:
            raise MetricError(f"{source}: neither max_length in config.json nor max_position_embeddings in the encoder config")
        self._max_positions = max_positions

    # -- identity (for caches and provenance) ------------------------------------------
    @property
    def cache_namespace(self) -> str:
        return f"radgraph/{self.model_type}/{self.archive.fingerprint}/{self.transformer_name}/v{ANNOTATION_VERSION}"

    def provenance(self) -> dict[str, Any]:
        return {
            "model_type": self.model_type,
            "checkpoint": self.checkpoint.provenance(),
            "weights_sha256": self.archive.fingerprint,
            "transformer": self.transformer_name,
            "transformer_revision": self.transformer_revision,
            "max_length": self.max_length,
            "annotation_version": ANNOTATION_VERSION,
        }

    # -- encoding ----------------------------------------------------------------------
    def _special_tokens(self) -> tuple[list[int], list[int]]:
        """Tokens the encoder puts before and after a single sequence (e.g. [CLS] / [SEP]),
        found by comparing encodings with and without special tokens."""
        plain = self.tokenizer("a", add_special_tokens=False)["input_ids"]
        full = self.tokenizer("a", add_special_tokens=True)["input_ids"]
        for i in range(len(full) - len(plain) + 1):
            if full[i : i + len(plain)] == plain:
                return full[:i], full[i + len(plain) :]
        raise MetricError(f"cannot locate the special tokens of tokenizer {self.transformer_name}")

    def _segments(self, pieces: list[int]) -> list[list[int]]:
        n_special = len(self._start_ids) + len(self._end_ids)
        if self.max_length is None:
            if len(pieces) + n_special > self._max_positions:
                raise MetricError(
                    f"radgraph: a report has {len(pieces)} wordpieces, more than the encoder's {self._max_positions} positions"
                )
            chunks = [pieces]
        else:
            step = self.max_length - n_special
            chunks = [pieces[i : i + step] for i in range(0, len(pieces), step)] or [[]]
        return chunks

    def _word_vectors(self, docs: list[list[str]]):
        """Mean last-layer wordpiece vector per word, for a batch of word lists."""
        return self._vectors(self._encode(docs))

    def _encode(self, docs: list[list[str]]) -> "Encoded":
        """The CPU side of a batch: word pieces, segments, padded ids and mask, and where
        each word's pieces sit in the encoder's output."""
        import torch

        per_doc = []  # (wordpiece ids, word offsets)
        for words in docs:
            encoded = self.tokenizer([reader_word(w) for w in words], add_special_tokens=False)["input_ids"]
            pieces, offsets, cursor = [], [], 0
            for ids in encoded:
                offsets.append((cursor, cursor + len(ids)) if ids else None)
                pieces.extend(ids)
                cursor += len(ids)
            per_doc.append((pieces, offsets))

        segments, owner = [], []
        for d, (pieces, _) in enumerate(per_doc):
            for chunk in self._segments(pieces):
                segments.append(self._start_ids + chunk + self._end_ids)
                owner.append((d, len(chunk)))
        width = max(len(s) for s in segments)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        ids = torch.full((len(segments), width), pad, dtype=torch.long)
        mask = torch.zeros((len(segments), width), dtype=torch.long)
        for i, seg in enumerate(segments):
            ids[i, : len(seg)] = torch.tensor(seg, dtype=torch.long)
            mask[i, : len(seg)] = 1
        return Encoded(per_doc, owner, ids, mask, _stitching(per_doc, owner, width, len(self._start_ids)))

    def _vectors(self, encoded: "Encoded"):
        """The model side of a batch `_encode` prepared: word vectors per document (views
        into one batch tensor)."""
        transformer = self.model._embedder.transformer
        ids, mask = (t.to(self.device, non_blocking=True) for t in (encoded.ids, encoded.mask))
        hidden = transformer(input_ids=ids, attention_mask=mask).last_hidden_state
        return encoded.plan.stitch(hidden, encoded.owner, len(self._start_ids))

    def _labels(self, encoded: "Encoded"):
        """Encoder and heads over a batch, the labels' copy to the host started (nothing
        waits for the device here)."""
        from rexrank.radgraph.decode import fetch

        return fetch([self.model.score(vec, self.ner_namespace, self.relation_namespace) for vec in self._vectors(encoded)])

    def _read(self, fetched, batch_words: list[list[str]]) -> list[dict]:
        """The JSON annotations of a batch whose labels `_labels` fetched."""
        from rexrank.radgraph.decode import read, to_json

        decoded = read(fetched, self.model.span_table)
        return [to_json(w, e, r, self.ner_labels, self.relation_labels) for w, (e, r) in zip(batch_words, decoded)]

    # -- annotation --------------------------------------------------------------------
    def words(self, text: str) -> list[str]:
        return words_for(text, self.model_type)

    def annotate(self, texts: Sequence[str], progress: bool = True) -> list[dict]:
        """One annotation dict per text (input order); each distinct text is run once."""
        import torch
        from tqdm.auto import tqdm

        distinct = list(dict.fromkeys(texts))
        words = {t: self.words(t) for t in distinct}
        out: dict[str, dict] = {t: {"text": "", "entities": {}} for t in distinct if not words[t]}
        todo = sorted((t for t in distinct if words[t]), key=lambda t: len(words[t]))  # similar lengths batch well
        bar = tqdm(total=len(todo), desc=f"RadGraph ({self.model_type})", unit="report", disable=not progress or not todo)
        batches = [todo[start : start + self.batch_size] for start in range(0, len(todo), self.batch_size)]
        # on a GPU the next batch's word pieces are cut while this one runs (rexrank.models.prefetch)
        prepared = ahead(batches, lambda batch: self._encode([words[t] for t in batch]), enabled=self.prefetch)

        def finish(batch: list[str], fetched) -> None:
            out.update(zip(batch, self._read(fetched, [words[t] for t in batch])))
            bar.update(len(batch))

        # on a GPU a batch's labels are read into JSON while the next batch runs
        with torch.inference_mode(), behind(enabled=self.prefetch) as submit:
            for batch, encoded in prepared:
                submit(finish, batch, self._labels(encoded))
        bar.close()
        return [out[t] for t in texts]


class Stitching:
    """Where each word's vector comes from in the encoder's output (built on the CPU with the
    batch). A one-piece word's vector is its piece's row; a longer word's is the mean of its
    pieces taken, as before, over the document's stitched pieces (the same op on the same
    shape, so the same float on any device); a word with no piece is 0."""

    def __init__(self, sizes: list[int], single_dst, single_src, multi: dict):
        self.sizes = sizes  # words per document
        self.single_dst, self.single_src = single_dst, single_src  # batch word row <- flat hidden row (tensors)
        self.multi = multi  # document -> ([(first piece, end piece)], tensor of batch word rows)

    def stitch(self, hidden, owner, n_start: int):
        import torch

        def to_device(index):  # from pageable memory: no wait for the device's queued work
            return index.to(hidden.device, non_blocking=True)

        size = hidden.size(-1)
        words = hidden.new_zeros(sum(self.sizes), size)
        if self.single_dst.numel():
            rows = hidden.reshape(-1, size).index_select(0, to_device(self.single_src))
            # + 0.0 as a mean over one row gives it: -0.0 becomes 0.0, all else is unchanged
            words.index_copy_(0, to_device(self.single_dst), rows + 0.0)
        for d, (spans, dst) in self.multi.items():
            doc_hidden = torch.cat([hidden[i, n_start : n_start + n] for i, (of, n) in enumerate(owner) if of == d], dim=0)
            means = torch.stack([doc_hidden[a:b].mean(dim=0) for a, b in spans])
            words.index_copy_(0, to_device(dst), means)
        return list(words.split(self.sizes))


def _stitching(per_doc, owner, width: int, n_start: int) -> Stitching:
    """The Stitching of a batch: `owner` lists each segment's (document, content length),
    in order; a segment is one row of the encoder's output, `width` positions long."""
    import torch

    segment_rows: list[list[tuple[int, int]]] = [[] for _ in per_doc]  # per document: (row, content length)
    for row, (d, n) in enumerate(owner):
        segment_rows[d].append((row, n))
    sizes, single_dst, single_src, multi = [], [], [], {}
    base = 0
    for d, (_, offsets) in enumerate(per_doc):
        position = []  # flat hidden row of each of the document's pieces
        for row, n in segment_rows[d]:
            position.extend(range(row * width + n_start, row * width + n_start + n))
        for w, span in enumerate(offsets):
            if span is None:
                continue
            if span[1] - span[0] == 1:
                single_dst.append(base + w)
                single_src.append(position[span[0]])
            else:
                multi.setdefault(d, []).append((base + w, span))
        sizes.append(len(offsets))
        base += len(offsets)

    def index(values):
        return torch.tensor(values, dtype=torch.long)

    multi = {d: ([span for _, span in rows], index([w for w, _ in rows])) for d, rows in multi.items()}
    return Stitching(sizes, index(single_dst), index(single_src), multi)


class Encoded:
    """A batch as `_encode` prepares it on the CPU."""

    def __init__(self, per_doc, owner, ids, mask, plan: Stitching):
        self.per_doc, self.owner, self.ids, self.mask, self.plan = per_doc, owner, ids, mask, plan
