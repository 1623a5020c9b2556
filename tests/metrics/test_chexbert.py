"""SembScore and CheXbert: a scaled-down chexbert.pth with the official key names, checked
against plain transformers one text at a time; CheXbert F1 against
sklearn.metrics.classification_report (public API) as the oracle."""
from __future__ import annotations

import math
import time

import numpy as np
import pytest

from rexrank.errors import MetricError
from rexrank.metrics.chexbert import FIVE, FIVE_INDEX, binarize_rrg, chexbert_f1, classification_report
from rexrank.metrics.sembscore import SembScore
from rexrank.models.chexbert import CONDITIONS
from support.tiny_report_models import CORPUS, make_tiny_bert_tokenizer, make_tiny_chexbert, reference_cls_and_labels

PREDS = [
    "The lungs are clear.\n\nNo pleural effusion   or pneumothorax.",
    "Mild cardiomegaly with small bilateral pleural effusions.",
    "",
    "Heart size is normal.",
    "Heart size is normal.",
]
REFS = [
    "The lungs are clear. No pleural effusion or pneumothorax.",
    "Increased mild pulmonary edema and left basal atelectasis.",
    "No acute cardiopulmonary process.",
    "Heart size is normal.",
    "Support devices are unchanged.",
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("chexbert")
    tok = make_tiny_bert_tokenizer(root / "tokenizer")
    vocab_size = len((tok / "vocab.txt").read_text().split())
    ckpt = make_tiny_chexbert(root / "chexbert.pth", vocab_size)
    return {"root": root, "tokenizer": tok, "checkpoint": ckpt, "vocab_size": vocab_size}


def _metric(tiny, tmp_path, **kw):
    return SembScore(checkpoint_path=str(tiny["checkpoint"]), tokenizer=str(tiny["tokenizer"]), cache_dir=str(tmp_path), **kw)


def test_sembscore_and_labels_match_plain_transformers(tiny, tmp_path):
    out = _metric(tiny, tmp_path).score(PREDS, REFS)
    oracle_p = reference_cls_and_labels(tiny["checkpoint"], tiny["tokenizer"], PREDS)
    oracle_r = reference_cls_and_labels(tiny["checkpoint"], tiny["tokenizer"], REFS)
    expected = [float(p @ r / (np.linalg.norm(p) * np.linalg.norm(r))) for (p, _), (r, _) in zip(oracle_p, oracle_r)]
    np.testing.assert_allclose(out.per_study["sembscore"], expected, atol=1e-5)
    assert out.per_study["sembscore"][3] == pytest.approx(1.0, abs=1e-6)
    labels = out.details["chexbert_labels"]
    assert labels["predictions"] == [lab for _, lab in oracle_p]
    assert labels["references"] == [lab for _, lab in oracle_r]
    assert labels["conditions"] == list(CONDITIONS)
    # the F1 figures in details are those of these labels
    again = chexbert_f1(np.array(labels["predictions"]), np.array(labels["references"]))
    assert out.details["chexbert_5_micro_f1"] == again["summary"]["chexbert_5_micro_f1"]


def test_whitespace_and_truncation_as_official(tiny, tmp_path):
    metric = _metric(tiny, tmp_path)
    long = " ".join(CORPUS * 40)  # far over 512 word pieces
    ids = metric.model.token_ids([long, "a\n\n b   c"])
    tok = metric.model.tokenizer
    assert len(ids[0]) == 512 and ids[0][-1] == tok.sep_token_id and ids[0][0] == tok.cls_token_id
    assert ids[1] == tok("a b c")["input_ids"]
    out = metric.score([long, "The lungs\nare clear."], [long + " extra words beyond the cut", "The lungs are clear."])
    np.testing.assert_allclose(out.per_study["sembscore"], [1.0, 1.0], atol=1e-6)


def test_checkpoint_loading_is_strict(tiny, tmp_path):
    broken = make_tiny_chexbert(tmp_path / "broken.pth", tiny["vocab_size"], drop="module.linear_heads.13.bias")
    with pytest.raises(MetricError, match="linear_heads.13.bias"):
        SembScore(checkpoint_path=str(broken), tokenizer=str(tiny["tokenizer"]), cache_dir=str(tmp_path)).score(["a"], ["b"])
    plain = make_tiny_chexbert(tmp_path / "no_position_ids.pth", tiny["vocab_size"], position_ids=False)
    out = SembScore(checkpoint_path=str(plain), tokenizer=str(tiny["tokenizer"]), cache_dir=str(tmp_path)).score(["a"], ["a"])
    assert out.value == pytest.approx(1.0, abs=1e-6)


def test_reference_side_cache(tiny, tmp_path):
    a = _metric(tiny, tmp_path).score(PREDS, REFS)
    metric = _metric(tiny, tmp_path)
    seen = []
    encode = metric.model.encode
    metric.model.encode = lambda texts, **kw: seen.append(list(texts)) or encode(texts, **kw)
    b = metric.score(PREDS, REFS)
    np.testing.assert_array_equal(a.per_study["sembscore"], b.per_study["sembscore"])
    # the predictions that are not references (those come from the cache), each distinct text once
    assert seen == [[p for p in dict.fromkeys(PREDS) if p not in REFS]]


def test_offline_failure_is_fast_and_names_the_checkpoint():
    start = time.time()
    with pytest.raises(MetricError, match="chexbert.pth") as err:
        SembScore().score(["No effusion."], ["No effusion."])
    assert time.time() - start < 10
    assert "StanfordAIMI/RRG_scorers" in str(err.value) and "checkpoint_path=" in str(err.value)


# ---- CheXbert F1 against sklearn's public classification_report --------------------------

def _sklearn_report(y_true, y_pred, names):
    metrics = pytest.importorskip("sklearn.metrics")
    return metrics.classification_report(y_true, y_pred, target_names=list(names), output_dict=True, zero_division=0)


@pytest.mark.parametrize("seed", range(4))
def test_f1_matches_sklearn_classification_report(seed):
    rng = np.random.default_rng(seed)
    n = [1, 7, 60, 200][seed]
    pred = rng.integers(0, 4, size=(n, 14))
    ref = rng.integers(0, 4, size=(n, 14))
    pred[:, 13] = rng.integers(0, 2, size=n)  # "No Finding" head has 2 classes
    ref[:, 13] = rng.integers(0, 2, size=n)
    ref[:, 2] = 0  # a label never present in the references (zero support)
    pred[:, 3] = 2  # a label never predicted
    ours = chexbert_f1(pred, ref)
    y_true, y_pred = binarize_rrg(ref), binarize_rrg(pred)
    for scope, report, cols, names in (("all", ours["report_all"], list(range(14)), CONDITIONS), ("5", ours["report_5"], list(FIVE_INDEX), FIVE)):
        oracle = _sklearn_report(y_true[:, cols], y_pred[:, cols], names)
        for key in [*names, "micro avg", "macro avg", "weighted avg"]:
            for field in ("precision", "recall", "f1-score", "support"):
                assert report[key][field] == pytest.approx(oracle[key][field], abs=1e-12), (scope, key, field)
        for avg in ("micro", "macro", "weighted"):
            assert ours["summary"][f"chexbert_{scope}_{avg}_f1"] == pytest.approx(oracle[f"{avg} avg"]["f1-score"], abs=1e-12)
    accuracy = pytest.importorskip("sklearn.metrics").accuracy_score(y_true[:, list(FIVE_INDEX)], y_pred[:, list(FIVE_INDEX)])
    assert ours["summary"]["chexbert_5_accuracy"] == pytest.approx(accuracy)


def test_f1_edge_cases_match_sklearn():
    zeros = np.zeros((5, 14), dtype=int)
    ones = np.ones((5, 14), dtype=int)
    for y_true, y_pred in ((zeros, zeros), (zeros, ones), (ones, zeros), (ones, ones)):
        ours = classification_report(y_true, y_pred, CONDITIONS)
        oracle = _sklearn_report(y_true, y_pred, CONDITIONS)
        for key in ("micro avg", "macro avg", "weighted avg"):
            for field in ("precision", "recall", "f1-score"):
                assert ours[key][field] == pytest.approx(oracle[key][field], abs=1e-12), (key, field)


def test_rrg_mode_counts_uncertain_as_positive():
    assert binarize_rrg(np.array([[0, 1, 2, 3]])).tolist() == [[0, 1, 0, 1]]


def test_no_study_gives_zero_f1_and_no_accuracy_without_a_warning():
    """Empty label matrices: sklearn's zero-division F1 of 0 and an exact-match accuracy of NaN
    (not numpy's mean of nothing, which warns); the figures say how labels were binarised."""
    import warnings

    from rexrank.metrics.chexbert import chexbert_f1

    none = np.zeros((0, 14), dtype=int)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = chexbert_f1(none, none)
    assert math.isnan(out["summary"].pop("chexbert_5_accuracy"))
    assert set(out["summary"].values()) == {0.0} and len(out["summary"]) == 6
    assert out["mode"] == "rrg (positive and uncertain -> 1)"


def test_the_report_takes_indicators_of_any_type_and_refuses_other_shapes():
    """0/1 indicators as floats give the report of the same booleans; matrices of other shapes
    are refused before anything is counted."""
    names = ("a", "b")
    y_true = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    y_pred = np.array([[1.0, 1.0], [0.0, 1.0], [0.0, 0.0]])
    assert classification_report(y_true, y_pred, names) == classification_report(y_true == 1, y_pred == 1, names)
    # a: tp 1 of 2 true, 1 predicted; b: tp 1 of 1 true, 2 predicted
    report = classification_report(y_true, y_pred, names)
    assert (report["a"]["precision"], report["a"]["recall"], report["b"]["precision"], report["b"]["recall"]) == (
        1.0, 0.5, 0.5, 1.0)
    shapes = ((np.zeros((2, 2)), np.zeros((3, 2))), (np.zeros((2, 3)), np.zeros((2, 3))), (np.zeros(2), np.zeros(2)))
    for true, pred in shapes:
        with pytest.raises(ValueError) as error:
            classification_report(true, pred, names)
        assert str(error.value) == f"label matrices must both be [n, 2], got {true.shape} and {pred.shape}"
