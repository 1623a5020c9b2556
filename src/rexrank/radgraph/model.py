"""DyGIE++ as used by RadGraph, inference only, in plain torch + transformers.

Module and parameter names mirror the AllenNLP DyGIE model (dwadden/dygiepp, MIT; the copy
vendored in radgraph 0.1.18, MIT; AllenNLP, Apache-2.0), so `weights.th` loads with
`load_state_dict(strict=True)`. Written from reading that code; nothing is copied.

Pipeline for one document (one "sentence" = the whole report, as RadGraph feeds it):
1. words -> wordpieces, each word tokenised on its own; [CLS] ... [SEP]; when the config has
   `max_length`, the wordpieces are cut into segments of max_length - 2, each wrapped in
   [CLS]/[SEP] and encoded independently (AllenNLP long-sequence folding);
2. word vector = mean of its wordpiece vectors (last layer); a word with no wordpiece -> 0;
3. spans: every (start, end) with end - start < max_span_width, ordered by start then end;
   span vector = [h_start, h_end, width_embedding(end - start)];
4. NER: FeedForward + Linear per span, null label 0 gets a fixed score 0, argmax;
5. relations: a mention scorer keeps the top ceil(n_words * spans_per_word) spans (kept in
   document order), pair vector [e_i, e_j, e_i * e_j] -> FeedForward -> Linear, plus both
   mention scores; null label 0 gets a fixed score 0, argmax.
Steps 3-5 run per document, as officially (the same shapes give the same floats); the labels
stay on the device until rexrank.radgraph.decode reads a whole batch's at once.
Coreference and event modules are built only so that the state dict matches; RadGraph's
configs give them loss weight 0 and they never run.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from rexrank.errors import MetricError

if TYPE_CHECKING:
    import numpy as np


class FeedForward(nn.Module):
    """AllenNLP FeedForward: Linear + activation (+ dropout, inactive at inference) per layer,
    the activation applied after every layer including the last."""

    def __init__(self, input_dim: int, num_layers: int, hidden_dims, activation: nn.Module | None = None):
        super().__init__()
        dims = hidden_dims if isinstance(hidden_dims, list) else [hidden_dims] * num_layers
        if len(dims) != num_layers:
            raise MetricError(f"feedforward_params: {num_layers} layers but hidden_dims {hidden_dims}")
        inputs = [input_dim] + dims[:-1]
        self._linear_layers = nn.ModuleList(nn.Linear(i, o) for i, o in zip(inputs, dims))
        self._activation = activation or nn.ReLU()
        self.input_dim = input_dim
        self.output_dim = dims[-1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self._linear_layers:
            x = self._activation(layer(x))
        return x


class TimeDistributed(nn.Module):
    """Only the parameter prefix `_module` matters: Linear/FeedForward already act on the
    last dimension of any-rank input."""

    def __init__(self, module: nn.Module):
        super().__init__()
        self._module = module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._module(x)


class Pruner(nn.Module):
    def __init__(self, feedforward: FeedForward):
        super().__init__()
        self._scorer = nn.Sequential(TimeDistributed(feedforward), TimeDistributed(nn.Linear(feedforward.output_dim, 1)))


class SpanExtractor(nn.Module):
    """EndpointSpanExtractor(combination="x,y", span width embedding, no bucketing)."""

    def __init__(self, max_span_width: int, feature_size: int):
        super().__init__()
        self._span_width_embedding = nn.Embedding(max_span_width, feature_size)

    def forward(self, words: torch.Tensor, spans: torch.Tensor) -> torch.Tensor:
        starts, ends = spans[:, 0], spans[:, 1]
        return torch.cat([words[starts], words[ends], self._span_width_embedding(ends - starts)], dim=-1)


class MatchedEmbedder(nn.Module):
    def __init__(self, transformer: nn.Module):
        super().__init__()
        self.transformer_model = transformer


class MismatchedEmbedder(nn.Module):
    def __init__(self, transformer: nn.Module):
        super().__init__()
        self._matched_embedder = MatchedEmbedder(transformer)


class TextFieldEmbedder(nn.Module):
    def __init__(self, transformer: nn.Module):
        super().__init__()
        self.token_embedder_bert = MismatchedEmbedder(transformer)

    @property
    def transformer(self) -> nn.Module:
        return self.token_embedder_bert._matched_embedder.transformer_model


class NERTagger(nn.Module):
    def __init__(self, namespaces: dict[str, int], make_ff, span_dim: int):
        super().__init__()
        self._ner_scorers = nn.ModuleDict()
        for namespace, n_labels in namespaces.items():
            ff = make_ff(span_dim)
            # the null label (index 0) is not scored: it gets a constant 0
            self._ner_scorers[namespace] = nn.Sequential(TimeDistributed(ff), TimeDistributed(nn.Linear(ff.output_dim, n_labels - 1)))


class RelationExtractor(nn.Module):
    def __init__(self, namespaces: dict[str, int], make_ff, span_dim: int, spans_per_word: float):
        super().__init__()
        self._mention_pruners = nn.ModuleDict()
        self._relation_feedforwards = nn.ModuleDict()
        self._relation_scorers = nn.ModuleDict()
        for namespace, n_labels in namespaces.items():
            self._mention_pruners[namespace] = Pruner(make_ff(span_dim))
            ff = make_ff(3 * span_dim)
            self._relation_feedforwards[namespace] = ff
            # relation vocabularies have no null entry: the null score is prepended at run time
            self._relation_scorers[namespace] = nn.Linear(ff.output_dim, n_labels)
        self.spans_per_word = spans_per_word


class CorefResolver(nn.Module):
    """Parameters only (never run for RadGraph)."""

    def __init__(self, make_ff, span_dim: int, feature_size: int):
        super().__init__()
        self._distance_embedding = nn.Embedding(10, feature_size)
        antecedent_ff = make_ff(3 * span_dim + feature_size)
        self._antecedent_feedforward = TimeDistributed(antecedent_ff)
        self._mention_pruner = Pruner(make_ff(span_dim))
        self._antecedent_scorer = TimeDistributed(nn.Linear(antecedent_ff.output_dim, 1))
        self._f_network = FeedForward(2 * span_dim, 1, span_dim, nn.Sigmoid())


class EventExtractor(nn.Module):
    """Parameters only (never run for RadGraph, whose vocabulary has no event namespaces)."""

    def __init__(self, feature_size: int):
        super().__init__()
        self._distance_embedding = nn.Embedding(10, feature_size)


@dataclass
class DygieSettings:
    max_span_width: int
    feature_size: int
    ff_layers: int
    ff_hidden: Any
    spans_per_word: float
    ner_namespaces: dict[str, int]
    relation_namespaces: dict[str, int]

    @classmethod
    def from_archive(cls, model_config: dict, vocabulary: dict[str, list[str]], source: str) -> "DygieSettings":
        try:
            ff = model_config["feedforward_params"]
            modules = model_config["modules"]
            loss_weights = model_config["loss_weights"]
            settings = cls(
                max_span_width=int(model_config["max_span_width"]),
                feature_size=int(model_config["feature_size"]),
                ff_layers=int(ff["num_layers"]),
                ff_hidden=ff["hidden_dims"],
                spans_per_word=float(modules["relation"]["spans_per_word"]),
                ner_namespaces={k: len(v) for k, v in vocabulary.items() if "ner_labels" in k},
                relation_namespaces={k: len(v) for k, v in vocabulary.items() if "relation_labels" in k},
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise MetricError(f"{source}: config.json lacks a DyGIE setting ({exc!r})") from None
        if modules.get("coref", {}).get("coref_prop", 0):
            raise MetricError(f"{source}: coref_prop > 0 (coreference propagation) is not supported")
        if not (loss_weights.get("ner", 0) > 0 and loss_weights.get("relation", 0) > 0):
            raise MetricError(f"{source}: loss_weights must enable both ner and relation, got {loss_weights}")
        events = [k for k in vocabulary if "trigger_labels" in k or "argument_labels" in k]
        if events:
            raise MetricError(f"{source}: event namespaces {events} are not supported (not a RadGraph model)")
        for namespace in settings.ner_namespaces:
            if vocabulary[namespace][0] != "":
                raise MetricError(f"{source}: vocabulary {namespace} must start with the null label '' (index 0)")
        return settings


@dataclass
class DocumentLabels:
    """One document's predictions as the heads leave them (tensors on the model's device):
    a NER label per span of `span_table(n_words)` (0 = none), the kept spans' indices into
    that table (document order), and a relation label per ordered pair of kept spans
    (-1 = none)."""

    n_words: int
    ner: torch.Tensor
    top: torch.Tensor
    relations: torch.Tensor


class DyGIE(nn.Module):
    """Same attribute names as dygie.models.dygie.DyGIE, so state dicts match one to one."""

    def __init__(self, transformer: nn.Module, hidden_size: int, settings: DygieSettings):
        super().__init__()
        self.settings = settings

        def make_ff(input_dim: int) -> FeedForward:
            return FeedForward(input_dim, settings.ff_layers, settings.ff_hidden)

        span_dim = 2 * hidden_size + settings.feature_size
        self._endpoint_span_extractor = SpanExtractor(settings.max_span_width, settings.feature_size)
        self._embedder = TextFieldEmbedder(transformer)
        self._ner = NERTagger(settings.ner_namespaces, make_ff, span_dim)
        self._coref = CorefResolver(make_ff, span_dim, settings.feature_size)
        self._relation = RelationExtractor(settings.relation_namespaces, make_ff, span_dim, settings.spans_per_word)
        self._events = EventExtractor(settings.feature_size)
        self._span_tables: dict = {}
        self._device_spans: dict = {}

    def load_weights(self, state: dict[str, torch.Tensor], source: str) -> None:
        # Checkpoints saved with transformers < 4.31 carry the persistent buffer
        # embeddings.position_ids (always arange); newer transformers no longer store it.
        state = {k: v for k, v in state.items() if not k.endswith("embeddings.position_ids")}
        try:
            self.load_state_dict(state, strict=True)
        except RuntimeError as exc:
            raise MetricError(f"{source}: weights.th does not match the DyGIE model built from config.json: {exc}") from None

    def span_table(self, n_words: int) -> "np.ndarray":
        """Every (start, end) with end - start < max_span_width, ordered by start then end,
        as numpy (n_spans, 2): the spans the NER labels refer to. Built once per length."""
        table = self._span_tables.get(n_words)
        if table is None:
            import numpy as np

            starts = np.repeat(np.arange(n_words), self.settings.max_span_width)
            ends = starts + np.tile(np.arange(self.settings.max_span_width), n_words)
            table = self._span_tables[n_words] = np.stack([starts, ends], axis=1)[ends < n_words]
        return table

    def _spans_on(self, n_words: int, device: torch.device) -> torch.Tensor:
        key = (n_words, device)
        spans = self._device_spans.get(key)
        if spans is None:
            spans = self._device_spans[key] = torch.from_numpy(self.span_table(n_words)).to(device)
        return spans

    @torch.no_grad()
    def score(self, words: torch.Tensor, ner_namespace: str, relation_namespace: str) -> DocumentLabels:
        """Word vectors (n_words, hidden) of one document -> its labels, left on the device
        (nothing here waits for the device: rexrank.radgraph.decode reads a batch's labels
        with one transfer)."""
        n_words = words.size(0)
        spans = self._spans_on(n_words, words.device)
        span_emb = self._endpoint_span_extractor(words, spans)

        ner_scores = self._ner._ner_scorers[ner_namespace](span_emb)
        ner_scores = torch.cat([ner_scores.new_zeros(ner_scores.size(0), 1), ner_scores], dim=-1)
        ner_labels = ner_scores.argmax(dim=-1)  # first maximum on ties, as torch.max

        relation = self._relation
        keep = max(math.ceil(n_words * relation.spans_per_word), 1)
        mention = relation._mention_pruners[relation_namespace]._scorer(span_emb.unsqueeze(0))  # (1, n_spans, 1)
        _, top = mention.topk(keep, dim=1)
        top, _ = torch.sort(top.squeeze(-1), dim=1)  # document order
        top = top[0]
        top_emb = span_emb[top]
        top_scores = mention[0, top, 0]
        k = top.size(0)
        feedforward = relation._relation_feedforwards[relation_namespace]
        scorer = relation._relation_scorers[relation_namespace]
        # rows of the k x k pair matrix in blocks: a long report would otherwise build a
        # k^2 x 3*span_dim tensor of several hundred MB at once
        block = max(1, (1 << 24) // max(1, k * 3 * top_emb.size(1)))
        chunks = []
        for start in range(0, k, block):
            rows = top_emb[start : start + block]
            r = rows.size(0)
            pairs = torch.cat(
                [rows.unsqueeze(1).expand(r, k, -1), top_emb.unsqueeze(0).expand(r, k, -1), rows.unsqueeze(1) * top_emb.unsqueeze(0)],
                dim=-1,
            )
            chunks.append(scorer(feedforward(pairs)))
        scores = torch.cat(chunks, dim=0)
        scores = scores + top_scores.view(k, 1, 1) + top_scores.view(1, k, 1)
        scores = torch.cat([scores.new_zeros(k, k, 1), scores], dim=-1)
        relation_labels = scores.argmax(dim=-1) - 1  # null -> -1
        return DocumentLabels(n_words, ner_labels, top, relation_labels)
