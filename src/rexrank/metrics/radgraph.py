"""RadGraph-F1: ReXrank's "RadGraph" column (radgraph_combined) and the F1RadGraph rewards.

Per study:
- `radgraph` = radgraph_combined = (entity F1 + relation F1) / 2, CXR-Report-Metric rules
  (reference metrics_nonllm.md §4.1); also `radgraph_entity_f1`, `radgraph_relation_f1`;
- `radgraph_simple`, `radgraph_partial`, `radgraph_complete`: F1RadGraph reward levels,
  radgraph 0.1.18 semantics (§4.2).
The model is the DyGIE++ RadGraph checkpoint from StanfordAIMI/RRG_scorers, re-implemented
in rexrank.radgraph (the official package does not run on transformers 5).
"""
from __future__ import annotations

from typing import Any, Sequence

from rexrank.errors import MetricError
from rexrank.metrics.base import Metric, MetricResult, StudyRows
from rexrank.radgraph.preprocess import MODEL_TYPES
from rexrank.radgraph.tarball import DEFAULT_REVISION, checkpoint_for

COLUMNS = ("radgraph_entity_f1", "radgraph_relation_f1", "radgraph_simple", "radgraph_partial", "radgraph_complete")


class RadGraph(Metric):
    name = "radgraph"
    version = "1"
    description = (
        "RadGraph-F1 as in CXR-Report-Metric / ReXrank: entities and relations extracted by the RadGraph "
        "DyGIE++ model, exact-match F1 of entity and relation sets, averaged (radgraph_combined); plus the "
        "F1RadGraph reward levels simple / partial / complete (radgraph 0.1.18)."
    )
    citation = (
        "@inproceedings{jain2021radgraph, title={RadGraph: Extracting Clinical Entities and Relations from Radiology Reports},"
        " author={Jain, Saahil and Agrawal, Ashwin and Saporta, Adriel and others}, booktitle={NeurIPS Datasets and Benchmarks}, year={2021}}\n"
        "@article{yu2023evaluating, title={Evaluating progress in automatic chest X-ray radiology report generation},"
        " author={Yu, Feiyang and others}, journal={Patterns}, year={2023}}\n"
        "@inproceedings{delbrouck2022improving, title={Improving the Factual Correctness of Radiology Report Generation with Semantic Rewards},"
        " author={Delbrouck, Jean-Benoit and Chambon, Pierre and Bluethgen, Christian and others}, booktitle={Findings of EMNLP}, year={2022}}"
    )
    higher_is_better = True

    def __init__(
        self,
        model_type: str = "radgraph",
        model_path: str | None = None,
        revision: str = DEFAULT_REVISION,
        transformer_path: str | None = None,
        transformer_revision: str | None = None,
        batch_size: int = 16,
        device: str | None = None,
        cache: bool = True,
        cache_dir: str | None = None,
        progress: bool = True,
        run_context=None,
    ):
        if model_type not in MODEL_TYPES:
            raise MetricError(f"radgraph: model_type={model_type!r} is not supported; choose one of {', '.join(MODEL_TYPES)}")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise MetricError(f"radgraph: batch_size must be an integer >= 1, got {batch_size!r}")
        self.model_type = model_type
        self.checkpoint = checkpoint_for(model_type, path=model_path, revision=revision)
        self.transformer_path = transformer_path
        self.transformer_revision = transformer_revision
        self.batch_size = batch_size
        self.device = device
        self.cache = cache
        self.cache_dir = cache_dir
        self.progress = progress
        self.run_context = run_context  # a scoring run's shared outputs (metrics.run_context)
        self._annotator = None

    def config(self) -> dict[str, Any]:
        if self._annotator is not None:
            return self._annotator.provenance()
        return {
            "model_type": self.model_type,
            "checkpoint": self.checkpoint.provenance(),
            "transformer_path": self.transformer_path,
            "transformer_revision": self.transformer_revision,
        }

    @property
    def annotator(self):
        if self._annotator is None:
            from rexrank.models.shared import local_fingerprint, shared_model
            from rexrank.radgraph.annotator import RadGraphAnnotator

            key = (*self._model_key(), local_fingerprint(self.checkpoint.path), local_fingerprint(self.transformer_path))
            self._annotator = shared_model(
                key,
                lambda: RadGraphAnnotator(
                    self.model_type,
                    model_path=self.checkpoint.path,
                    revision=self.checkpoint.revision,
                    transformer_path=self.transformer_path,
                    transformer_revision=self.transformer_revision,
                    batch_size=self.batch_size,
                    device=self.device,
                ),
            )
        return self._annotator

    def _model_key(self) -> tuple:
        """Everything that shapes the annotations, float rounding (batch size, device) included;
        known before loading (config() is fuller once loaded)."""
        return ("radgraph", self.model_type, self.checkpoint, self.transformer_path, self.transformer_revision,
                self.batch_size, self.device)

    def run_key(self):
        return (self.name, self._model_key(), self.cache, self.cache_dir)

    def _reference_cache(self):
        from rexrank.refcache import ReferenceCache

        return ReferenceCache(self.annotator.cache_namespace, self.cache_dir, enabled=self.cache)

    def annotate(self, texts: Sequence[str]) -> list[dict]:
        """RadGraph annotations (radgraph's JSON format), each distinct text run once."""
        return self._run_outputs("direct", list(texts), self._annotate_texts)

    def _annotate_texts(self, texts: list[str]) -> list[dict]:
        return self.annotator.annotate(texts, progress=self.progress)

    def _run_outputs(self, side, texts: list[str], compute) -> list:
        from rexrank.metrics.run_context import shared_outputs

        return shared_outputs(self.run_context, self.name, self._model_key(), side, texts, compute)

    def _score(self, predictions: list[str], references: list[str]) -> StudyRows:
        from rexrank.metrics.run_context import shared_pairs
        from rexrank.radgraph.f1 import combined, rewards

        hyps, refs = shared_pairs(self, self._reference_cache, predictions, references, self._annotate_texts)
        columns: dict[str, list[float]] = {self.name: [], **{c: [] for c in COLUMNS}}
        for hyp, ref in zip(hyps, refs):
            ent, rel, comb = combined(hyp, ref)
            simple, partial, complete = rewards(hyp, ref)
            for column, value in zip((self.name, *COLUMNS), (comb, ent, rel, simple, partial, complete)):
                columns[column].append(value)
        side = {"entities_prediction": [len(a["entities"]) for a in hyps],
                "entities_reference": [len(a["entities"]) for a in refs]}
        return self._rows(columns, side=side)

    @classmethod
    def aggregate(cls, rows: StudyRows) -> MetricResult:
        result = super().aggregate(rows)
        result.details = {"entities_per_prediction": _mean_count(rows.side["entities_prediction"]),
                          "entities_per_reference": _mean_count(rows.side["entities_reference"])}
        return result


def _mean_count(counts) -> float:
    counts = list(counts)
    return sum(counts) / len(counts) if counts else 0.0
