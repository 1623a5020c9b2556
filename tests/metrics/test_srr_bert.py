"""SRR-BERT equals RadEval's own pipeline (radeval 2.2.1 SRRBert.evaluate) per study and in the
corpus value, on 590 IU-Xray predictions, with a tiny random model of the real architecture
fed to both (tests/support/srr_bert_tiny.py; RadEval's outputs in tests/data/srr_bert/official.json),
and the corpus formula equals scikit-learn's classification_report."""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from support import srr_bert_tiny as tiny
from support.paths import shared_path
from rexrank.errors import MetricError
from rexrank.metrics.srr_bert import SRRBert, per_study_prf, weighted_prf
from rexrank.models import srr_bert as S

GOLDEN = json.loads((Path(__file__).parents[1] / "data" / "srr_bert" / "official.json").read_text())


@pytest.fixture
def stand_in_splitter(monkeypatch):
    import nltk

    monkeypatch.setattr(nltk, "sent_tokenize", tiny.stand_in_sent_tokenize)
    monkeypatch.setattr(S, "punkt_available", lambda: True)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return tiny.build(tmp_path_factory.mktemp("srr_bert"))


def _metric(tiny_model, **options):
    model_dir, tokenizer_dir = tiny_model
    options = {"cache": False, **options}
    return SRRBert(model_path=str(model_dir), tokenizer_path=str(tokenizer_dir), device="cpu", progress=False, **options)


def test_per_study_and_corpus_equal_radeval_on_iu_xray(tiny_model, stand_in_splitter):
    preds = pd.read_csv(shared_path("validation", "moerad_iu", "preds.csv"))
    gts = pd.read_csv(shared_path("validation", "moerad_iu", "gts.csv"))
    assert preds.study_id.tolist() == GOLDEN["study_ids"]
    result = _metric(tiny_model).score(preds.report.fillna("nan").tolist(), gts.report.fillna("nan").tolist())
    # labels are thresholded: identical labels give identical scores (batches differ: float error in
    # the logits could only flip a label within ~1e-6 of the threshold)
    np.testing.assert_array_equal(result.primary, GOLDEN["per_study"]["f1"])
    np.testing.assert_array_equal(result.per_study["srr_bert_precision"], GOLDEN["per_study"]["precision"])
    np.testing.assert_array_equal(result.per_study["srr_bert_recall"], GOLDEN["per_study"]["recall"])
    assert result.value == pytest.approx(GOLDEN["weighted"]["f1"], abs=1e-15)
    assert result.corpus["srr_bert_precision"] == pytest.approx(GOLDEN["weighted"]["precision"], abs=1e-15)
    assert result.corpus["srr_bert_recall"] == pytest.approx(GOLDEN["weighted"]["recall"], abs=1e-15)


def test_weighted_scores_equal_sklearn_classification_report():
    from sklearn.metrics import classification_report

    rng = np.random.default_rng(0)
    for density in (0.02, 0.2, 0.6):
        refs = (rng.random((40, 163)) < density).astype(int)
        hyps = (rng.random((40, 163)) < density).astype(int)
        refs[:, :5] = 0  # labels no reference has (zero support)
        hyps[:, 5:10] = 0  # labels never predicted (zero division)
        report = classification_report(refs, hyps, output_dict=True, zero_division=0)["weighted avg"]
        assert weighted_prf(refs, hyps) == pytest.approx((report["precision"], report["recall"], report["f1-score"]), abs=1e-15)
    nothing = np.zeros((3, 163), dtype=int)
    report = classification_report(nothing, nothing, output_dict=True, zero_division=0)["weighted avg"]
    assert weighted_prf(nothing, nothing) == (report["precision"], report["recall"], report["f1-score"])


def test_per_study_rule_for_reports_without_labels():
    refs = np.zeros((2, 163), dtype=int)
    hyps = np.zeros((2, 163), dtype=int)
    hyps[1, 3] = 1
    precision, recall, f1 = per_study_prf(refs, hyps)
    assert (precision.tolist(), recall.tolist(), f1.tolist()) == ([1.0, 0.0], [1.0, 0.0], [1.0, 0.0])


def test_sentence_clean_up_of_numbered_lists():
    import nltk

    seen = []
    original = nltk.sent_tokenize
    nltk.sent_tokenize = lambda text: seen.append(text) or [text]
    try:
        S.sentences("1. Cardiomegaly.2. Effusion 3. Edema.Heart size normal")
    finally:
        nltk.sent_tokenize = original
    assert seen == ["Cardiomegaly. Effusion. Edema. Heart size normal."]


def test_each_distinct_sentence_is_classified_once(tiny_model, stand_in_splitter):
    metric = _metric(tiny_model, batching="distinct")
    seen = []
    labels = metric.labeler.labels
    metric.labeler.labels = lambda texts, **kw: seen.extend(texts) or labels(texts, **kw)
    metric.score(["No effusion. Heart normal.", "No effusion."], ["Heart normal.", "No effusion. Heart normal."])
    assert sorted(seen) == ["Heart normal.", "No effusion."]


def test_distinct_sentences_labels_are_shared_through_the_scoring_runs_context(tiny_model, stand_in_splitter, monkeypatch):
    """Each distinct sentence's labels go through the run's context under this metric's name,
    its model's key and the side "sentences" (a second SRR-BERT of the run on the same model
    reads them instead of classifying again)."""
    from support.run_context import record_shared_outputs

    shared = record_shared_outputs(monkeypatch)
    context = object()
    metric = _metric(tiny_model, batching="distinct", run_context=context)
    metric.score(["No effusion. Heart normal.", "No effusion."], ["Heart normal.", "No effusion. Heart normal."])
    [(got_context, owner, model, side, texts)] = shared
    assert (got_context, owner, model, side) == (context, "srr_bert", metric._model_key(), "sentences")
    assert sorted(texts) == ["Heart normal.", "No effusion."]
    # a report's labels are 0/1 bytes, as the reference cache keeps them (163 a report)
    [labels] = metric.report_labels(["No effusion. Heart normal."]).values()
    assert labels.dtype == np.int8 and labels.shape == (S.NUM_LABELS,) and set(np.unique(labels)) <= {0, 1}


def test_references_come_from_the_reference_cache_on_a_second_submission(tiny_model, stand_in_splitter, tmp_path):
    refs = ["No effusion. Heart normal.", "Mild edema."]
    first = _metric(tiny_model, batching="distinct", cache=True, cache_dir=str(tmp_path)).score(["Heart normal.", "No edema."], refs)
    metric = _metric(tiny_model, batching="distinct", cache=True, cache_dir=str(tmp_path))
    seen = []
    labels = metric.labeler.labels
    metric.labeler.labels = lambda texts, **kw: seen.extend(texts) or labels(texts, **kw)
    again = metric.score(["Heart normal.", "No edema."], refs)
    assert seen == ["Heart normal.", "No edema."]  # the predictions' sentences only
    np.testing.assert_array_equal(again.primary, first.primary)


SENTENCES = ["No acute cardiopulmonary process.", "Heart size is normal.", "The lungs are clear.",
             "Mild pulmonary edema.", "Small left pleural effusion.", "Stable cardiomegaly.",
             "Bilateral lower lobe atelectasis.", "No pneumothorax.", "Degenerative changes of the thoracic spine.",
             "New focal airspace opacity in the right upper lobe.", "Calcified granuloma.", "Mediastinal contours within normal limits."]


def _near_threshold_studies() -> tuple[list[str], list[str]]:
    """Reports of 1-4 sentences drawn from SENTENCES, sentences repeated across studies."""
    rng = np.random.default_rng(3)
    report = lambda: " ".join(rng.choice(SENTENCES, size=rng.integers(1, 5), replace=False))  # noqa: E731
    return [report() for _ in range(40)], [report() for _ in range(40)]


@pytest.fixture(scope="module")
def near_threshold_model(tmp_path_factory):
    """The tiny model with each label's bias moved so that one sentence's logit for it is
    0 to float error (sentence j mod 12 for label j): that label's value depends on the batch."""
    import torch
    from transformers import BertForSequenceClassification, BertTokenizer

    model_dir, tokenizer_dir = tiny.build(tmp_path_factory.mktemp("srr_bert_near"))
    model = BertForSequenceClassification.from_pretrained(str(model_dir)).eval()
    tokenizer = BertTokenizer.from_pretrained(str(tokenizer_dir))
    with torch.no_grad():
        logits = torch.cat([model(**tokenizer([s], return_tensors="pt")).logits for s in SENTENCES])
        labels = torch.arange(tiny.NUM_LABELS)
        model.classifier.bias.sub_(logits[labels % len(SENTENCES), labels])
    model.save_pretrained(str(model_dir))
    return model_dir, tokenizer_dir


def _radeval_order_oracle(model_dir, tokenizer_dir, predictions, references):
    """RadEval's batching, run here on the model directly: every sentence of every study
    (reference, then prediction), batches of 4, labels where sigmoid(logit) > 0.5, each
    report's labels the union over its sentences."""
    import torch
    from transformers import BertForSequenceClassification, BertTokenizer

    model = BertForSequenceClassification.from_pretrained(str(model_dir)).eval()
    tokenizer = BertTokenizer.from_pretrained(str(tokenizer_dir))
    every, owner = [], []
    for i, (reference, prediction) in enumerate(zip(references, predictions)):
        for side, text in ((0, reference), (1, prediction)):
            parts = S.sentences(text)
            every += parts
            owner += [(i, side)] * len(parts)
    flags = []
    with torch.no_grad():
        for start in range(0, len(every), 4):
            enc = tokenizer(every[start:start + 4], add_special_tokens=True, max_length=512, padding=True,
                            truncation=True, return_attention_mask=True, return_tensors="pt")
            flags.append((torch.sigmoid(model(**enc).logits) > 0.5).numpy())
    flags = np.concatenate(flags)
    labels = np.zeros((len(predictions), 2, tiny.NUM_LABELS), dtype=bool)
    for row, (i, side) in zip(flags, owner):
        labels[i, side] |= row
    return per_study_prf(labels[:, 0], labels[:, 1])


def test_default_batches_are_radevals_on_a_near_threshold_model(near_threshold_model, stand_in_splitter):
    predictions, references = _near_threshold_studies()
    precision, recall, f1 = _radeval_order_oracle(*near_threshold_model, predictions, references)
    result = _metric(near_threshold_model).score(predictions, references)
    np.testing.assert_array_equal(result.primary, f1)
    np.testing.assert_array_equal(result.per_study["srr_bert_precision"], precision)
    np.testing.assert_array_equal(result.per_study["srr_bert_recall"], recall)
    # the model is near the threshold indeed: distinct sentences in batches of 32 (the named
    # faster option) change some studies
    fast = _metric(near_threshold_model, batching="distinct").score(predictions, references)
    assert (fast.primary != f1).sum() >= 1


def test_batching_option_is_checked():
    with pytest.raises(MetricError, match="batching must be one of 'radeval', 'distinct', got 'sorted'"):
        SRRBert(batching="sorted")


def test_missing_sentence_model_fails_fast_naming_the_fix(monkeypatch):
    monkeypatch.setattr(S, "punkt_available", lambda: False)
    start = time.monotonic()
    with pytest.raises(MetricError, match="rexrank weights download srr_bert"):
        SRRBert().score(["No effusion."], ["Effusion."])
    assert time.monotonic() - start < 3


def test_missing_weights_offline_fail_fast_naming_the_fix(monkeypatch, stand_in_splitter, tmp_path):
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.monotonic()
    with pytest.raises(MetricError) as err:
        SRRBert().score(["No effusion."], ["Effusion."])
    assert time.monotonic() - start < 5
    assert "StanfordAIMI/SRR-BERT-Leaves-with-Statuses" in str(err.value)
    assert "rexrank.models.weights.download(['srr_bert'])" in str(err.value)


def test_a_part_classifies_the_whole_runs_batches_so_shards_merge_exactly(near_threshold_model, stand_in_splitter):
    from rexrank.metrics.base import StudyRows

    predictions, references = _near_threshold_studies()
    metric = _metric(near_threshold_model)
    whole = metric.score(predictions, references)
    cuts = [(0, 13), (13, 27), (27, 40)]  # boundaries inside RadEval's batches of 4 sentences
    merged = SRRBert.aggregate(StudyRows.concat([metric.score(predictions, references, part=cut).rows for cut in cuts]))
    for column, values in whole.per_study.items():
        np.testing.assert_array_equal(merged.per_study[column], values)
    assert merged.corpus == whole.corpus
    # the parts scored alone (batches of their own sentences) differ: the model is near the threshold
    alone = np.concatenate([metric.score(predictions[a:b], references[a:b]).primary for a, b in cuts])
    assert (alone != whole.primary).any()


def test_a_part_classifies_only_the_batches_that_hold_its_sentences(tiny_model, stand_in_splitter):
    """RadEval's batches of 4 over every study's sentences, reference then prediction: a
    shard classifies the batches its own sentences fall in, and no other (at 10,000 studies
    a shard that classified from the first batch, or to the last, would cost the whole run)."""
    references = [f"Finding number {i} on the left." for i in range(10)]
    predictions = [f"Finding number {i} on the right." for i in range(10)]
    order = [text for pair in zip(references, predictions) for text in pair]  # one sentence a report
    metric = _metric(tiny_model)
    seen = []
    labels = metric.labeler.labels
    metric.labeler.labels = lambda texts, **kw: seen.append(list(texts)) or labels(texts, **kw)
    # studies 3 and 4: sentences 6-9, in the batches [4, 8) and [8, 12)
    refs, hyps = metric.radeval_labels(predictions, references, 3, 5)
    assert seen == [order[4:12]] and refs.shape == hyps.shape == (2, S.NUM_LABELS)
    assert refs.dtype == hyps.dtype == np.int8  # 0/1 bytes, as the distinct path's and the cache's
    seen.clear()
    every_refs, every_hyps = metric.radeval_labels(predictions, references)  # by default every study
    assert seen == [order] and every_refs.shape == (10, S.NUM_LABELS)
    np.testing.assert_array_equal(every_refs[3:5], refs)
    np.testing.assert_array_equal(every_hyps[3:5], hyps)
    seen.clear()
    nothing = metric.radeval_labels(predictions, references, 4, 4)  # a part of no study
    assert seen == [[]] and [part.shape for part in nothing] == [(0, S.NUM_LABELS)] * 2


# ---- SRR-BERT --------------------------------------------------------------------------------
def test_srr_bert_config_records_radevals_model_labels_and_batches():
    """RadEval's SRRBert: StanfordAIMI/SRR-BERT-Leaves-with-Statuses with CXR-BERT-general's
    tokenizer, 163 labels at threshold 0.5, 512 tokens, batches of 4 (its batch_size)."""
    from rexrank.metrics.srr_bert import SRRBert

    common = {"num_labels": 163, "threshold": 0.5, "max_tokens": 512,
              "sentences": "RadEval srr_bert_parse_sentences + nltk.sent_tokenize (punkt_tab)",
              "per_study": "multilabel_prf_per_sample (mean over the union of labels, eps 1e-8)",
              "corpus": "classification_report weighted avg"}
    official = SRRBert().config()
    assert {k: official[k] for k in common} == common
    assert official["batching"] == "RadEval's: every sentence, reference then prediction, batches of 4"
    assert (official["model"]["repo_id"], official["model"]["path"]) == ("StanfordAIMI/SRR-BERT-Leaves-with-Statuses", None)
    assert (official["tokenizer"]["repo_id"], official["tokenizer"]["path"]) == (
        "microsoft/BiomedVLP-CXR-BERT-general", None)
    local = SRRBert(batching="distinct", model_path="/models/srr", tokenizer_path="/models/tok").config()
    assert {k: local[k] for k in common} == common
    assert local["batching"] == "distinct sentences, batches of 32"
    assert (local["model"]["path"], local["tokenizer"]["path"], local["tokenizer"]["revision"]) == (
        "/models/srr", "/models/tok", "local")
    assert SRRBert(batch_size=8).config()["batching"].endswith("batches of 8")
    # a local tokenizer folder is still CXR-BERT-general's; without one, the pinned Hub commit
    from rexrank.catalogue import CXR_BERT_GENERAL

    assert local["tokenizer"]["repo_id"] == "microsoft/BiomedVLP-CXR-BERT-general"
    assert official["tokenizer"]["revision"] == CXR_BERT_GENERAL.revision != "local"
    assert SRRBert(revision="0123abcd").config()["model"]["revision"] == "0123abcd"


@pytest.fixture(scope="module")
def tiny_srr_bert(tmp_path_factory):
    from support import srr_bert_tiny

    return srr_bert_tiny.build(tmp_path_factory.mktemp("srr_bert"))


@pytest.fixture
def srr_stand_in_splitter(monkeypatch):
    import nltk

    from support import srr_bert_tiny
    from rexrank.models import srr_bert as S

    monkeypatch.setattr(nltk, "sent_tokenize", srr_bert_tiny.stand_in_sent_tokenize)
    monkeypatch.setattr(S, "punkt_available", lambda: True)


def test_srr_bert_keeps_reference_labels_in_the_cache_folder_under_its_namespace(tiny_srr_bert, srr_stand_in_splitter,
                                                                                tmp_path):
    """rexrank.refcache's file of a text is <folder>/<h[:2]>/<h>.pkl, h = sha256(namespace NUL
    text), and SRR-BERT's namespace names the labeler and NLTK's version: the references'
    files, and only theirs, are written (hashlib computes them here); with cache=False none."""
    import hashlib

    import nltk

    from rexrank.metrics.srr_bert import SRRBert

    model_dir, tokenizer_dir = tiny_srr_bert
    refs, preds = ["No effusion. Heart normal.", "Mild edema."], ["Heart normal.", "No edema."]

    def metric(cache: bool, folder):
        return SRRBert(model_path=str(model_dir), tokenizer_path=str(tokenizer_dir), device="cpu", progress=False,
                       batching="distinct", cache=cache, cache_dir=str(folder))

    on = metric(True, tmp_path / "on")
    on.score(preds, refs)
    namespace = f"srr_bert/v1/{on.labeler.identity}/nltk-{nltk.__version__}"
    digests = [hashlib.sha256(f"{namespace}\x00{text}".encode()).hexdigest() for text in refs]
    written = {p.relative_to(tmp_path / "on").as_posix() for p in (tmp_path / "on").rglob("*.pkl")}
    assert written == {f"{d[:2]}/{d}.pkl" for d in digests}
    metric(False, tmp_path / "off").score(preds, refs)
    assert not (tmp_path / "off").exists() or not any((tmp_path / "off").rglob("*"))


# ---- SRR-BERT: scores by hand, batches, progress and the model's cache -----------------------
def test_srr_bert_per_study_scores_by_hand():
    """RadEval's per-sample P, R, F1 with eps = 1e-8, means over the labels either report has:
    a label both have scores P = R = 1 / (1 + eps), F1 = 2 / (2 + eps); one only the reference
    or only the prediction has scores 0; a study where neither has a label scores 1."""
    from rexrank.metrics.srr_bert import per_study_prf

    import warnings

    eps = 1e-8
    refs = np.array([[1, 1, 0], [0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 1], [0, 0, 0]])
    hyps = np.array([[1, 0, 1], [0, 0, 0], [1, 0, 0], [0, 0, 0], [1, 1, 0], [0, 0, 1]])
    both = 1 / (1 + eps)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every denominator holds eps: no division by zero
        precision, recall, f1 = per_study_prf(refs, hyps)
    expected_pr = [both / 3, 1.0, both, 0.0, 2 * both / 3, 0.0]
    np.testing.assert_allclose(precision, expected_pr, rtol=0, atol=1e-15)
    np.testing.assert_allclose(recall, expected_pr, rtol=0, atol=1e-15)
    np.testing.assert_allclose(f1, [2 / (2 + eps) / 3, 1.0, 2 / (2 + eps), 0.0, 2 * 2 / (2 + eps) / 3, 0.0],
                               rtol=0, atol=1e-15)
    assert both != 1.0 and 2 / (2 + eps) != 1.0  # the eps is seen at this tolerance


def test_srr_bert_weighted_scores_of_labels_predicted_or_present_once_by_hand():
    """Label 0: in 2 references, predicted once, right once: P = 1, R = 1/2, F1 = 2/3; label 1:
    once each, right: 1, 1, 1; label 2 never seen (no warning for its 0/0). Weighted by
    support (2, 1, 0): P = 1, R = 2/3, F1 = 7/9, as sklearn's classification_report."""
    import warnings

    from sklearn.metrics import classification_report

    from rexrank.metrics.srr_bert import weighted_prf

    refs = np.array([[1, 0, 0], [1, 1, 0]])
    hyps = np.array([[1, 0, 0], [0, 1, 0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = weighted_prf(refs, hyps)
    assert got == pytest.approx((1.0, 2 / 3, 7 / 9), abs=1e-15)
    report = classification_report(refs, hyps, output_dict=True, zero_division=0)["weighted avg"]
    assert got == pytest.approx((report["precision"], report["recall"], report["f1-score"]), abs=1e-15)


@pytest.mark.parametrize("batching", ["radeval", "distinct"])
def test_srr_bert_distinct_and_radeval_batches_give_radevals_labels_on_iu_xray(tiny_srr_bert, srr_stand_in_splitter,
                                                                            batching):
    """RadEval's per-study outputs (tests/data/srr_bert/official.json, radeval 2.2.1 on the same tiny
    model) for the 590 IU-Xray studies: the distinct-sentence option must OR each report's sentence
    labels as RadEval does (a label per report, not one over the whole set)."""
    import json
    from pathlib import Path

    import pandas as pd

    from rexrank.metrics.srr_bert import SRRBert

    golden = json.loads((Path(__file__).parents[1] / "data" / "srr_bert" / "official.json").read_text())
    preds = pd.read_csv(shared_path("validation", "moerad_iu", "preds.csv"))
    gts = pd.read_csv(shared_path("validation", "moerad_iu", "gts.csv"))
    model_dir, tokenizer_dir = tiny_srr_bert
    metric = SRRBert(model_path=str(model_dir), tokenizer_path=str(tokenizer_dir), device="cpu", progress=False,
                     cache=False, batching=batching)
    result = metric.score(preds.report.fillna("nan").tolist(), gts.report.fillna("nan").tolist())
    np.testing.assert_array_equal(result.primary, golden["per_study"]["f1"])
    np.testing.assert_array_equal(result.per_study["srr_bert_precision"], golden["per_study"]["precision"])
    assert result.corpus["srr_bert_mean_f1"] == pytest.approx(sum(golden["per_study"]["f1"]) / 590, abs=1e-12)


@pytest.mark.parametrize("batching", ["radeval", "distinct"])
def test_srr_bert_shows_its_progress_bar_unless_told_not_to(tiny_srr_bert, srr_stand_in_splitter, capsys, batching):
    """`progress=True` (the default) shows tqdm's "srr_bert" bar on stderr for each model pass."""
    from rexrank.metrics.srr_bert import SRRBert

    model_dir, tokenizer_dir = tiny_srr_bert
    texts = ["No effusion. Heart normal.", "Small left effusion."]
    for progress in (True, False):
        SRRBert(model_path=str(model_dir), tokenizer_path=str(tokenizer_dir), device="cpu", cache=False,
                batching=batching, progress=progress).score(texts, texts[::-1])
        shown = capsys.readouterr().err
        assert ("srr_bert" in shown and "batch" in shown) is progress, shown


def test_srr_bert_of_no_study_is_empty_columns_without_loading_the_model():
    """No prediction: empty per-study columns (F1, precision, recall), and no model is read (the
    paths here do not exist)."""
    from rexrank.metrics.srr_bert import SRRBert

    result = SRRBert(model_path="/nowhere/model", tokenizer_path="/nowhere/tokenizer", cache=False,
                     progress=False).score([], [])
    assert len(result.primary) == 0
    assert {k: len(v) for k, v in result.per_study.items()} == {"srr_bert": 0, "srr_bert_precision": 0,
                                                                 "srr_bert_recall": 0}


def test_srr_bert_reloads_a_local_checkpoint_whose_files_changed(tmp_path):
    """Metrics share a loaded model within a process; a local checkpoint whose files changed on
    disk is another model (new weights) and must be loaded again, an unchanged one is reused."""
    import torch
    from transformers import BertForSequenceClassification

    from support import srr_bert_tiny
    from rexrank.metrics.srr_bert import SRRBert

    model_dir, tokenizer_dir = srr_bert_tiny.build(tmp_path)

    def metric():
        return SRRBert(model_path=str(model_dir), tokenizer_path=str(tokenizer_dir), device="cpu", cache=False,
                       progress=False)

    first = metric().labeler
    assert metric().labeler is first
    model = BertForSequenceClassification.from_pretrained(str(model_dir))
    with torch.no_grad():
        model.classifier.bias += 5.0
    model.save_pretrained(str(model_dir))
    # the same size, and maybe the same second: the model's identity is names, sizes and whole-second mtimes
    import os

    for path in model_dir.iterdir():
        os.utime(path, (path.stat().st_atime, path.stat().st_mtime + 10))
    assert metric().labeler is not first


def test_srr_bert_by_default_shows_progress_and_keeps_reference_labels(tiny_srr_bert, srr_stand_in_splitter, capsys,
                                                                        tmp_path):
    """The card's defaults: `progress=True` and `cache=True` (with the distinct-sentence option, the
    references' labels kept for the next submission on the same test set)."""
    from rexrank.metrics.srr_bert import SRRBert

    model_dir, tokenizer_dir = tiny_srr_bert
    SRRBert(model_path=str(model_dir), tokenizer_path=str(tokenizer_dir), device="cpu", batching="distinct",
            cache_dir=str(tmp_path)).score(["No effusion."], ["Small left effusion."])
    assert "srr_bert" in capsys.readouterr().err
    assert any(p.is_file() for p in tmp_path.rglob("*"))


@pytest.mark.parametrize("batch_size", [0, -1, True, 2.5, "4"])
def test_srr_bert_batch_size_must_be_a_positive_integer(batch_size):
    from rexrank.errors import MetricError
    from rexrank.metrics.srr_bert import SRRBert

    with pytest.raises(MetricError) as refused:
        SRRBert(batch_size=batch_size)
    assert str(refused.value) == f"srr_bert: batch_size must be a positive integer, got {batch_size!r}"


def test_srr_bert_takes_a_batch_size_of_one():
    from rexrank.metrics.srr_bert import SRRBert

    assert SRRBert(batch_size=1).batch_size == 1


def test_srr_bert_shards_with_radevals_batches_and_says_why_not_with_distinct_sentences():
    from rexrank.metrics.base import ShardRule

    # a shard classifies the whole run's RadEval batches that hold its sentences: any boundary will do
    assert SRRBert.shard_rule({}) == ShardRule() == SRRBert.shard_rule({"batching": "radeval"})
    assert SRRBert.shard_rule({"batching": "distinct"}) == ShardRule(
        refusal="batching='distinct' classifies the request's distinct sentences together (batching='radeval', "
                "the default, shards)")


def test_srr_bert_loads_its_labeler_on_the_device_and_batch_size_it_is_given(tiny_model, monkeypatch):
    built = []

    class Recorded:
        def __init__(self, checkpoint, tokenizer, *, device, batch_size):
            built.append((Path(checkpoint.path).name, device, batch_size))

    monkeypatch.setattr(S, "SRRBertLabeler", Recorded)
    model_dir, tokenizer_dir = tiny_model
    metric = SRRBert(model_path=str(model_dir), tokenizer_path=str(tokenizer_dir), device="cuda:1", batch_size=3,
                     cache=False, progress=False)
    assert isinstance(metric.labeler, Recorded)
    assert built == [(Path(model_dir).name, "cuda:1", 3)]
