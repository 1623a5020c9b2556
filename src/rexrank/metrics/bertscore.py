"""BERTScore as ReXrank computes it (CXR-Report-Metric `add_bertscore_col`, reference
metrics_nonllm.md §2), re-implemented on transformers 5 with the same checkpoint.

Official call: bert_score 0.3.11 `BERTScorer(model_type="distilroberta-base", lang="en",
rescale_with_baseline=True, idf=False, idf_sents=refs).score(cands, refs)` after collapsing
runs of spaces. What that computes, and what we reproduce:
- model distilroberta-base, output of the first 5 transformer layers (= hidden_states[5]);
- text: runs of ' ' collapsed, then strip; RoBERTa BPE *with* the leading-space token
  (add_prefix_space=True, which transformers 5 ignores in `encode`: we set it when loading
  the tokenizer, decided from config.model_type); special tokens added; truncation at the
  tokenizer's model_max_length (512);
- greedy matching on L2-normalised token embeddings; token weights 1, or idf from the
  references (ln((M+1)/(df+1)), M = number of references; always all the run's references,
  in a shard of a dispatched request too); [CLS]/[SEP] (<s>/</s>) weigh 0 but still take
  part in the similarity matrix;
- a candidate or reference that is empty after strip (only the 2 special tokens): raw P and
  R are 0, F is 0; F NaN -> 0;
- baseline rescaling of P, R and F separately: (x - b) / (1 - b), with the published
  distilroberta-base layer-5 baseline.

Batching: references and candidates are embedded together, distinct texts once, in
length-sorted batches (bert_score sorts the distinct references and candidates by word count
and batches them together too); references already in the reference cache are not
recomputed. A text's batch mates change only float rounding (~1e-7).

One deliberate difference: bert_score pads a batch of pairs and sets padded similarities to 0
before the max, so a token whose best real cosine is negative scores 0 or its true max
depending on which pairs share its batch. We take the max over real tokens only. With
contextual embeddings of real checkpoints the best match is never negative, so this does not
change ReXrank numbers.

bert_score is MIT (Tianyi Zhang et al.); the baseline numbers below come from its file
`bert_score/rescale_baseline/en/distilroberta-base.tsv` (identical in 0.3.11 and 0.3.13).
"""
from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any, Sequence

import numpy as np

from rexrank.catalogue import DISTILROBERTA
from rexrank.errors import MetricError
from rexrank.metrics.base import Metric, MetricResult, StudyRows

# Apache-2.0; pins and their sources: rexrank.catalogue
DEFAULT_MODEL, DEFAULT_REVISION = DISTILROBERTA.repo_id, DISTILROBERTA.revision
DEFAULT_NUM_LAYERS = 5  # bert_score model2layers["distilroberta-base"]
# bert_score rescale_baseline/en/distilroberta-base.tsv, row LAYER=5: (P, R, F)
DISTILROBERTA_LAYER5_BASELINE = (0.84732, 0.84759504, 0.8473319)

_SPACES = re.compile(r" +")


def preprocess(text: str) -> str:
    """CXR-Report-Metric collapses runs of spaces (only ' ', not newlines); bert_score strips."""
    return _SPACES.sub(" ", text).strip()


def rescale(value: np.ndarray, baseline: float) -> np.ndarray:
    return (value - baseline) / (1.0 - baseline)


class BertScore(Metric):
    name = "bertscore"
    version = "1"
    description = (
        "BERTScore as in CXR-Report-Metric / ReXrank: distilroberta-base, layer 5, greedy cosine "
        "matching of token embeddings, F1 rescaled with the published baseline, no idf."
    )
    citation = (
        "@inproceedings{zhang2020bertscore, title={BERTScore: Evaluating Text Generation with BERT},"
        " author={Zhang, Tianyi and Kishore, Varsha and Wu, Felix and Weinberger, Kilian Q. and Artzi, Yoav},"
        " booktitle={ICLR}, year={2020}}\n"
        "@article{yu2023evaluating, title={Evaluating progress in automatic chest X-ray radiology report generation},"
        " author={Yu, Feiyang and others}, journal={Patterns}, year={2023}}"
    )
    higher_is_better = True

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        revision: str | None = None,
        num_layers: int | None = None,
        idf: bool = False,
        rescale_with_baseline: bool = True,
        baseline: Sequence[float] | None = None,
        batch_size: int = 64,
        device: str | None = None,
        cache: bool = True,
        cache_dir: str | None = None,
        progress: bool = True,
        run_context=None,
    ):
        from rexrank.models.encoders import checkpoint_for

        if model == "distilroberta-base":  # the id the official code used, before the hub moved it
            model = DEFAULT_MODEL
        self.checkpoint = checkpoint_for(
            model, revision, default_model=DEFAULT_MODEL, default_revision=DEFAULT_REVISION, licence=DISTILROBERTA.licence
        )
        is_default = model == DEFAULT_MODEL
        if num_layers is None:
            if not is_default:
                raise MetricError(f"bertscore: give num_layers for model {model!r} (the layer is only known for {DEFAULT_MODEL})")
            num_layers = DEFAULT_NUM_LAYERS
        if not isinstance(num_layers, int) or num_layers < 0:
            raise MetricError(f"bertscore: num_layers must be an integer >= 0, got {num_layers!r}")
        if baseline is not None:
            baseline = tuple(float(b) for b in baseline)
            if len(baseline) != 3 or not all(b < 1 for b in baseline):
                raise MetricError(f"bertscore: baseline must be three numbers (P, R, F) below 1, got {baseline!r}")
        elif rescale_with_baseline:
            if not (is_default and num_layers == DEFAULT_NUM_LAYERS):
                raise MetricError(
                    f"bertscore: no published baseline known for {model!r} layer {num_layers}; pass "
                    "baseline=(P, R, F) or rescale_with_baseline=False"
                )
            baseline = DISTILROBERTA_LAYER5_BASELINE
        if batch_size < 1:
            raise MetricError(f"bertscore: batch_size must be >= 1, got {batch_size}")
        self.num_layers = num_layers
        self.idf = bool(idf)
        self.rescale_with_baseline = bool(rescale_with_baseline)
        self.baseline = baseline if self.rescale_with_baseline else None
        self.batch_size = batch_size
        self.device = device
        self.cache = cache
        self.cache_dir = cache_dir
        self.progress = progress
        self.run_context = run_context  # a scoring run's shared outputs (metrics.run_context)
        self._embedder = None

    def config(self) -> dict[str, Any]:
        return {
            "checkpoint": self.checkpoint.provenance(),
            "num_layers": self.num_layers,
            "idf": self.idf,
            "idf_source": "references" if self.idf else None,
            "rescale_with_baseline": self.rescale_with_baseline,
            "baseline": list(self.baseline) if self.baseline else None,
            "preprocessing": "collapse ' +', strip; prefix space for byte-level BPE",
        }

    def run_key(self):
        return (self.name, self._model_key(), self.idf, self.baseline, self.cache, self.cache_dir)

    def _model_key(self) -> tuple:
        """Everything that shapes the embeddings, float rounding included."""
        return ("token-embedder", self.checkpoint, self.num_layers, self.batch_size, self.device)

    @property
    def embedder(self):
        if self._embedder is None:
            from rexrank.models.shared import local_fingerprint, shared_model
            from rexrank.models.token_embeddings import TokenEmbedder

            self._embedder = shared_model(
                (*self._model_key(), local_fingerprint(self.checkpoint.path)),
                lambda: TokenEmbedder(
                    self.checkpoint,
                    num_layers=self.num_layers,
                    batch_size=self.batch_size,
                    device=self.device,
                ),
            )
        return self._embedder

    def _reference_cache(self):
        from rexrank.refcache import ReferenceCache

        namespace = f"bertscore-emb/v1/{self.embedder.identity}/layer{self.num_layers}/maxlen{self.embedder.max_length}"
        return ReferenceCache(namespace, self.cache_dir, enabled=self.cache)

    def embed(self, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """(token ids, L2-normalised embeddings) per text, each distinct text embedded once."""
        texts = [preprocess(t) for t in texts]
        distinct = list(dict.fromkeys(texts))
        by_text = dict(zip(distinct, self._run_outputs("direct", distinct, self._embed_texts)))
        return [by_text[t] for t in texts]

    def _embed_texts(self, texts: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        return self.embedder.embed(texts, progress=self.progress)

    def _run_outputs(self, side, texts: list[str], compute) -> list:
        from rexrank.metrics.run_context import shared_outputs

        return shared_outputs(self.run_context, self.name, self._model_key(), side, texts, compute)

    def _score_part(self, predictions: list[str], references: list[str], start: int, stop: int) -> StudyRows:
        """Studies [start, stop); idf counts over all the run's references (tokenised only),
        so a shard weighs its tokens as the whole run does."""
        from rexrank.metrics.run_context import shared_pairs

        specials = self.embedder.special_ids
        weight_of = self._weights(references, specials)
        predictions, references = predictions[start:stop], references[start:stop]
        # uncached references and predictions embedded together, as bert_score does
        hyps, refs = shared_pairs(self, self._reference_cache, [preprocess(t) for t in predictions],
                                  [preprocess(t) for t in references], self._embed_texts)
        n = len(predictions)
        precision = np.zeros(n)
        recall = np.zeros(n)
        empty = [False] * n
        with one_blas_thread():
            for i, ((hyp_ids, hyp_emb), (ref_ids, ref_emb)) in enumerate(zip(hyps, refs)):
                if len(hyp_ids) <= 2 or len(ref_ids) <= 2:
                    empty[i] = True  # official: raw P = R = 0 for an empty side
                    continue
                sim = hyp_emb @ ref_emb.T
                hyp_w = weight_of(hyp_ids)
                ref_w = weight_of(ref_ids)
                precision[i] = _weighted_mean(sim.max(axis=1), hyp_w)
                recall[i] = _weighted_mean(sim.max(axis=0), ref_w)
        with np.errstate(invalid="ignore", divide="ignore"):
            f1 = 2 * precision * recall / (precision + recall)
        # only NaN becomes 0, as the official masked_fill: an infinite F (P = -R) stays, and the
        # run refuses it, where np.nan_to_num would average in a finite -1.8e308
        f1[np.isnan(f1)] = 0.0
        if self.baseline is not None:
            bp, br, bf = self.baseline
            precision, recall, f1 = rescale(precision, bp), rescale(recall, br), rescale(f1, bf)
        return self._rows({self.name: f1, f"{self.name}_precision": precision, f"{self.name}_recall": recall},
                          side={"empty_pair": empty})

    @classmethod
    def aggregate(cls, rows: StudyRows) -> MetricResult:
        result = super().aggregate(rows)
        n_empty = sum(rows.side["empty_pair"])
        if n_empty:
            result.details = {"n_empty_pairs": n_empty}
        return result

    def _weights(self, references: list[str], specials: set[int]):
        """Token id -> weight function: 1 (no idf) or idf over these references; specials 0."""
        if not self.idf:
            def weight_of(ids: np.ndarray) -> np.ndarray:
                return np.where(np.isin(ids, list(specials)), 0.0, 1.0)
            return weight_of
        texts = Counter(preprocess(t) for t in references)
        n_docs = len(references)  # every reference counts, duplicates included (bert_score get_idf_dict)
        df = Counter()
        for ids, copies in zip(self.embedder.token_ids(list(texts)), texts.values()):
            for tok in set(ids):
                df[tok] += copies
        unseen = math.log(n_docs + 1)
        idf = {tok: math.log((n_docs + 1) / (count + 1)) for tok, count in df.items()}
        for tok in specials:
            idf[tok] = 0.0

        def weight_of(ids: np.ndarray) -> np.ndarray:
            return np.array([idf.get(t, unseen) for t in ids.tolist()])

        return weight_of


def one_blas_thread():
    """The per-pair similarity matrices are small (tokens x tokens): a second BLAS thread
    only adds synchronisation, which on a busy machine costs 50x the product itself. The
    numbers do not change (each entry is computed the same way on any thread count)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


def _weighted_mean(values: np.ndarray, weights: np.ndarray) -> float:
    total = weights.sum()
    if total == 0:
        return 0.0  # idf: every token appears in every reference (official: NaN, F -> 0)
    return float((values * weights).sum() / total)
