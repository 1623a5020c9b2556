"""The RadGraph-F1 metric (rexrank.metrics.radgraph) around its annotator: which texts it
annotates, the per-study columns and side counts it keeps, its details, its options and
provenance. The annotations are written by hand (a stand-in annotator), so every number is
worked out here from the CXR-Report-Metric and radgraph 0.1.18 rules (rexrank.radgraph.f1);
the model itself is tested in tests/radgraph/."""
from __future__ import annotations

import pytest

from rexrank.errors import MetricError
from rexrank.metrics.radgraph import COLUMNS, RadGraph, _mean_count
from support.shared_models import record_shared_loads


def entity(tokens, label, *relations):
    return {"tokens": tokens, "label": label, "relations": [list(r) for r in relations]}


# effusion located at pleural; the same two without the relation, and edema; nothing
WITH_RELATION = {"entities": {"1": entity("effusion", "OBS-DP", ("located_at", "2")), "2": entity("pleural", "ANAT-DP")}}
THREE = {"entities": {"1": entity("effusion", "OBS-DP"), "2": entity("pleural", "ANAT-DP"), "3": entity("edema", "OBS-DP")}}
NOTHING = {"entities": {}}
GRAPHS = {"with relation": WITH_RELATION, "three": THREE, "nothing": NOTHING}


class StandInAnnotator:
    cache_namespace = "radgraph-stand-in"

    def __init__(self):
        self.calls = []

    def annotate(self, texts, *, progress):
        self.calls.append((list(texts), progress))
        return [GRAPHS[t] for t in texts]

    def provenance(self):
        return {"annotator": "stand-in"}


def metric_with_stand_in(**options):
    metric = RadGraph(cache=False, **options)
    metric._annotator = StandInAnnotator()
    return metric


def test_per_study_columns_by_hand():
    """Study 1: prediction {effusion→pleural}, reference {effusion, pleural, edema}: entities
    P 1, R 2/3, F1 0.8; relations: none in the reference, F1 0; combined 0.4. Rewards: simple
    0.8; partial and complete match pleural only (effusion carries a relation): P 1/2, R 1/3,
    F1 0.4. Study 2: an empty prediction: 0 throughout. Study 3: equal reports without
    relations: entity F1 1, relation F1 0 (two empty sets), combined 0.5, rewards 1."""
    metric = metric_with_stand_in(progress=False)
    result = metric.score(["with relation", "nothing", "three"], ["three", "with relation", "three"])
    expected = {
        "radgraph": [0.4, 0.0, 0.5],
        "radgraph_entity_f1": [0.8, 0.0, 1.0],
        "radgraph_relation_f1": [0.0, 0.0, 0.0],
        "radgraph_simple": [0.8, 0.0, 1.0],
        "radgraph_partial": [0.4, 0.0, 1.0],
        "radgraph_complete": [0.4, 0.0, 1.0],
    }
    assert list(result.per_study) == ["radgraph", *COLUMNS]
    for column, values in expected.items():
        assert result.per_study[column].tolist() == pytest.approx(values), column
    assert result.value == pytest.approx(0.3)
    assert result.rows.side == {"entities_prediction": [2, 0, 3], "entities_reference": [3, 2, 3]}
    assert result.details == {"entities_per_prediction": pytest.approx(5 / 3), "entities_per_reference": pytest.approx(8 / 3)}
    # each distinct text annotated once, references first, with the metric's progress option
    assert metric._annotator.calls == [(["three", "with relation", "nothing"], False)]


def test_annotate_runs_the_texts_through_the_annotator_with_its_progress():
    metric = metric_with_stand_in(progress=True)
    assert metric.annotate(("three", "nothing")) == [THREE, NOTHING]
    assert metric._annotator.calls == [(["three", "nothing"], True)]


def test_no_study_has_no_entities_per_report():
    result = metric_with_stand_in(progress=False).score([], [])
    assert result.details == {"entities_per_prediction": 0.0, "entities_per_reference": 0.0}
    assert _mean_count([]) == 0.0 and _mean_count(iter([1, 2])) == 1.5


def test_options_are_checked_naming_the_choices():
    with pytest.raises(MetricError) as error:
        RadGraph(model_type="radgraph-large")
    assert str(error.value) == "radgraph: model_type='radgraph-large' is not supported; choose one of radgraph, radgraph-xl"
    for bad in (0, -1, 2.0, "16"):
        with pytest.raises(MetricError) as error:
            RadGraph(batch_size=bad)
        assert str(error.value) == f"radgraph: batch_size must be an integer >= 1, got {bad!r}"
    assert RadGraph(batch_size=1).batch_size == 1


def test_config_names_the_checkpoint_until_the_annotator_is_loaded():
    metric = RadGraph(model_type="radgraph-xl", transformer_path="/models/bert", transformer_revision="r1")
    assert metric.config() == {"model_type": "radgraph-xl", "checkpoint": metric.checkpoint.provenance(),
                               "transformer_path": "/models/bert", "transformer_revision": "r1"}
    assert metric.checkpoint.filename == "radgraph-xl.tar.gz"
    metric._annotator = StandInAnnotator()
    assert metric.config() == {"annotator": "stand-in"}


def test_the_run_key_holds_what_shapes_the_annotations_and_the_cache():
    metric = RadGraph(model_type="radgraph", transformer_path="/t", transformer_revision="r", batch_size=4,
                      device="cpu", cache=False, cache_dir="/c")
    model_key = ("radgraph", "radgraph", metric.checkpoint, "/t", "r", 4, "cpu")
    assert metric._model_key() == model_key
    assert metric.run_key() == ("radgraph", model_key, False, "/c")
    assert RadGraph(batch_size=8).run_key() != RadGraph(batch_size=16).run_key()


def test_the_annotator_is_loaded_once_with_the_metrics_options(monkeypatch, tmp_path):
    """The model shared between metrics of a run is keyed by the options and by the local
    files' fingerprints; it is built with the checkpoint, the encoder and the batching asked."""
    import rexrank.radgraph.annotator as annotator_module

    built = []

    class Recorder:
        def __init__(self, model_type, **kwargs):
            built.append((model_type, kwargs))

    loads = record_shared_loads(monkeypatch)
    monkeypatch.setattr(annotator_module, "RadGraphAnnotator", Recorder)
    archive = tmp_path / "radgraph.tar.gz"
    metric = RadGraph(model_path=str(archive), revision="rev", transformer_path="/t", transformer_revision="tr",
                      batch_size=3, device="cpu")
    first = metric.annotator
    assert metric.annotator is first and isinstance(first, Recorder)  # loaded once
    assert loads == [(*metric._model_key(), f"fingerprint of {metric.checkpoint.path}", "fingerprint of /t")]
    assert built == [("radgraph", {"model_path": metric.checkpoint.path, "revision": metric.checkpoint.revision,
                                   "transformer_path": "/t", "transformer_revision": "tr", "batch_size": 3,
                                   "device": "cpu"})]
    assert metric.checkpoint.path == str(archive)


def test_the_defaults_are_the_official_batching_with_cache_and_bar():
    metric = RadGraph()
    assert (metric.model_type, metric.batch_size, metric.cache, metric.progress) == ("radgraph", 16, True, True)
    assert (metric.device, metric.cache_dir, metric.run_context) == (None, None, None)
    assert RadGraph(revision="abc123").checkpoint.revision == "abc123"


def test_references_come_from_the_cache_under_the_annotators_namespace(tmp_path):
    """A second run reads the references from the cache in cache_dir: only the predictions
    not seen as references are annotated again."""
    first = metric_with_stand_in(progress=False, cache_dir=str(tmp_path))
    first.cache = True
    first.score(["nothing"], ["three"])
    cache = first._reference_cache()
    assert (cache.namespace, cache.directory, cache.enabled) == ("radgraph-stand-in", tmp_path, True)
    second = metric_with_stand_in(progress=False, cache_dir=str(tmp_path))
    second.cache = True
    second.score(["nothing"], ["three"])
    assert second._annotator.calls == [(["nothing"], False)]
    assert metric_with_stand_in(cache_dir=str(tmp_path))._reference_cache().enabled is False


def test_outputs_are_shared_through_the_scoring_runs_context(monkeypatch):
    from support.run_context import record_shared_outputs

    shared = record_shared_outputs(monkeypatch)
    context = object()
    metric = metric_with_stand_in(progress=False, run_context=context)
    assert metric.run_context is context
    assert metric.annotate(["three"]) == [THREE]
    assert shared == [(context, "radgraph", metric._model_key(), "direct", ["three"])]
