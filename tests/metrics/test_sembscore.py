"""The SembScore metric (rexrank.metrics.sembscore) around its CheXbert model: which texts it
encodes, the per-study cosine, the zero-norm refusal, the labels it keeps for CheXbert F1, its
options and provenance. The [CLS] vectors and labels come from a stand-in model, so every
cosine is worked out here by hand; the model itself is tested in tests/models/ and the F1
figures against scikit-learn in tests/metrics/test_chexbert.py."""
from __future__ import annotations

import math

import numpy as np
import pytest

from rexrank.metrics.chexbert import chexbert_f1
from rexrank.metrics.sembscore import SembScore, _label_matrix
from rexrank.models.chexbert import CLASSES, CONDITIONS
from support.shared_models import record_shared_loads


def labels(*positive):
    """14 CheXbert labels: 1 (positive) at the given conditions, 0 (blank) elsewhere."""
    row = np.zeros(14, dtype=np.int8)
    row[list(positive)] = 1
    return row


# float32 vectors, as the model gives them
OUTPUTS = {
    "three four": (np.array([3.0, 4.0, 0.0], dtype=np.float32), labels(0, 2)),
    "four three": (np.array([4.0, 3.0, 0.0], dtype=np.float32), labels(0)),
    "one": (np.array([1.0, 0.0, 0.0], dtype=np.float32), labels(2, 5)),
    "zero": (np.array([0.0, 0.0, 0.0], dtype=np.float32), labels()),
}


class StandInModel:
    identity = "chexbert-stand-in"

    def __init__(self, outputs):
        self.outputs, self.calls = outputs, []

    def encode(self, texts, *, progress=False):
        self.calls.append((list(texts), progress))
        return [self.outputs[t] for t in texts]


def metric_with_stand_in(outputs=OUTPUTS, **options):
    metric = SembScore(cache=False, **options)
    metric._model = StandInModel(outputs)
    return metric


def test_per_study_cosines_by_hand():
    """(3,4)·(4,3) = 24 over 5 x 5: 0.96; (3,4)·(1,0) = 3 over 5 x 1: 0.6; a text with itself: 1."""
    metric = metric_with_stand_in(progress=False)
    result = metric.score(["three four", "one", "four three"], ["four three", "three four", "four three"])
    assert result.per_study["sembscore"].tolist() == pytest.approx([0.96, 0.6, 1.0], abs=1e-12)
    assert result.value == pytest.approx((0.96 + 0.6 + 1.0) / 3)
    assert result.failures == {}
    # each distinct text once, references first, with the metric's progress option
    assert metric._model.calls == [(["four three", "three four", "one"], False)]


def test_the_cosine_is_taken_in_float64():
    """Vectors whose float32 dot product rounds: the score is the float64 one."""
    a = np.array([1.0000001, 3.3333333, 7.7777777], dtype=np.float32)
    b = np.array([2.2222223, 5.5555553, 0.1], dtype=np.float32)
    outputs = {"a": (a, labels()), "b": (b, labels())}
    score = metric_with_stand_in(outputs, progress=False).score(["a"], ["b"]).primary[0]
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    assert score == float(np.dot(a64, b64)) / (float(np.linalg.norm(a)) * float(np.linalg.norm(b)))
    assert float(np.dot(a, b)) != float(np.dot(a64, b64))  # the float32 product would differ


def test_a_zero_vector_is_a_named_failure_not_a_division():
    result = metric_with_stand_in(progress=False).score(["zero", "one", "one"], ["one", "zero", "one"])
    scores = result.per_study["sembscore"]
    assert math.isnan(scores[0]) and math.isnan(scores[1]) and scores[2] == 1.0
    assert result.failures == {0: "zero-norm CheXbert embedding", 1: "zero-norm CheXbert embedding"}
    assert result.value == 1.0  # the mean of the scored study


def test_labels_are_kept_per_study_and_give_the_chexbert_f1_details():
    metric = metric_with_stand_in(progress=False)
    result = metric.score(["three four", "one"], ["four three", "one"])
    predictions = [labels(0, 2).tolist(), labels(2, 5).tolist()]
    references = [labels(0).tolist(), labels(2, 5).tolist()]
    assert [row.tolist() for row in result.rows.side["chexbert_predictions"]] == predictions
    assert [row.tolist() for row in result.rows.side["chexbert_references"]] == references
    f1 = chexbert_f1(np.array(predictions), np.array(references))  # predictions first: P and R differ here
    assert f1["summary"]["chexbert_all_micro_f1"] == pytest.approx(2 * 0.75 * 1.0 / 1.75)  # 3 of 4 positives right, none missed
    assert result.details == {
        **f1["summary"],
        "chexbert_report_all": f1["report_all"],
        "chexbert_report_5": f1["report_5"],
        "chexbert_label_mode": "rrg (positive and uncertain -> 1)",
        "chexbert_labels": {"conditions": list(CONDITIONS), "classes": list(CLASSES),
                            "predictions": predictions, "references": references},
    }


def test_without_labels_there_are_no_label_columns_or_details():
    result = metric_with_stand_in(progress=False, labels=False).score(["one"], ["one"])
    assert result.rows.side == {} and result.details == {}


def test_no_study_has_an_empty_label_matrix_of_14_conditions():
    # class indices, as the model's rows are: joined to another shard's rows, an empty part keeps them integers
    assert _label_matrix([]).shape == (0, 14) and _label_matrix([]).dtype == np.int8
    assert np.concatenate([_label_matrix([]), _label_matrix([labels(1)])]).tolist() == [labels(1).tolist()]
    assert np.concatenate([_label_matrix([]), _label_matrix([labels(1)])]).dtype == np.int8
    assert _label_matrix([labels(1), labels(2)]).tolist() == [labels(1).tolist(), labels(2).tolist()]


def test_the_defaults_are_the_official_batching_with_labels_cache_and_bar():
    metric = SembScore()
    assert metric.options == {"checkpoint_path": None, "revision": None, "tokenizer": None,
                              "num_attention_heads": None, "batch_size": 32, "device": None}
    assert (metric.labels, metric.cache, metric.cache_dir, metric.progress, metric.run_context) == (True, True, None, True, None)


def test_config_names_the_checkpoint_the_tokenizer_and_the_embedding():
    from rexrank.models.chexbert import CHEXBERT_FILE, CHEXBERT_REPO, CHEXBERT_REVISION, TOKENIZER_REPO, TOKENIZER_REVISION

    assert SembScore().config() == {
        "checkpoint": {"repo_id": CHEXBERT_REPO, "filename": CHEXBERT_FILE, "revision": CHEXBERT_REVISION, "path": None},
        "tokenizer": f"{TOKENIZER_REPO}@{TOKENIZER_REVISION}",
        "embedding": "last-layer [CLS]",
        "label_mode": "rrg",
    }
    assert (CHEXBERT_REPO, CHEXBERT_FILE) == ("StanfordAIMI/RRG_scorers", "chexbert.pth")
    mine = SembScore(checkpoint_path="/w/chexbert.pth", revision="r1", tokenizer="/w/bert").config()
    assert mine["checkpoint"] == {"repo_id": CHEXBERT_REPO, "filename": CHEXBERT_FILE, "revision": "r1",
                                  "path": "/w/chexbert.pth"}
    assert mine["tokenizer"] == "/w/bert"


def test_the_run_key_holds_what_shapes_the_vectors_and_the_cache_but_not_the_labels():
    metric = SembScore(checkpoint_path="/w", batch_size=4, device="cpu", cache=False, cache_dir="/c")
    model_key = ("chexbert", tuple(sorted(metric.options.items())))
    assert metric._model_key() == model_key
    assert metric.run_key() == ("sembscore", model_key, False, "/c")
    assert SembScore(batch_size=8).run_key() != SembScore(batch_size=16).run_key()
    assert SembScore(labels=False).run_key() == SembScore().run_key()


def test_the_model_is_loaded_once_with_the_metrics_options(monkeypatch):
    import rexrank.models.chexbert as chexbert_module

    built = []

    class Recorder:
        def __init__(self, **kwargs):
            built.append(kwargs)

    loads = record_shared_loads(monkeypatch)
    monkeypatch.setattr(chexbert_module, "CheXbert", Recorder)
    metric = SembScore(checkpoint_path="/w/chexbert.pth", revision="r", tokenizer="/t", num_attention_heads=2,
                       batch_size=3, device="cpu")
    first = metric.model
    assert metric.model is first and isinstance(first, Recorder)  # loaded once
    assert loads == [(*metric._model_key(), "fingerprint of /w/chexbert.pth")]
    assert built == [{"checkpoint_path": "/w/chexbert.pth", "revision": "r", "tokenizer": "/t",
                      "num_attention_heads": 2, "batch_size": 3, "device": "cpu"}]


def test_references_come_from_the_cache_under_the_models_identity(tmp_path):
    first = metric_with_stand_in(progress=True, cache_dir=str(tmp_path))
    first.cache = True
    first.score(["one"], ["three four"])
    assert first._model.calls == [(["three four", "one"], True)]
    cache = first._reference_cache()
    assert (cache.namespace, cache.directory, cache.enabled) == ("chexbert/v1/chexbert-stand-in", tmp_path, True)
    second = metric_with_stand_in(progress=False, cache_dir=str(tmp_path))
    second.cache = True
    second.score(["one"], ["three four"])
    assert second._model.calls == [(["one"], False)]
    assert metric_with_stand_in(cache_dir=str(tmp_path))._reference_cache().enabled is False


def test_vectors_are_shared_through_the_scoring_runs_context(monkeypatch):
    from support.run_context import record_shared_outputs

    shared = record_shared_outputs(monkeypatch)
    context = object()
    metric = metric_with_stand_in(progress=False, run_context=context, cache_dir="/c")
    assert metric.run_context is context
    assert metric.score(["one"], ["three four"]).primary.tolist() == [0.6]
    assert shared == [(context, "sembscore", metric._model_key(), ("references+predictions", 1, False, "/c"),
                       ["three four", "one"])]
