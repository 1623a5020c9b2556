"""Issue 32: behaviours of the metric modules (RadCliQ's formula, BLEU-2, ROUGE, Temporal F1,
SRR-BERT, CRIMSON's scorer) and of the coverage rule that the mutation tool
(`python benchmarks/mutation.py`) found unpinned. Every expected value comes from an
independent oracle: a hand computation written out here, official outputs in ../shared, or
the official libraries' behaviour (NLTK's BLEU, sklearn's classification report), never
from rexrank's own earlier output. Equivalent mutants are in benchmarks/mutation_equivalents.txt."""
from __future__ import annotations

import csv

import numpy as np
import pytest

from conftest import shared_path


# ---- RadCliQ's formula -----------------------------------------------------------------------
def test_radcliq_components_read_as_text_from_the_official_csv_give_its_columns():
    """The csv module reads every cell as text: the components are converted to floats, and
    the official RadCliQ-v0 and -v1 columns come out (as numbers read by pandas do)."""
    from rexrank.metrics.radcliq_formula import radcliq_from_components

    with shared_path("validation", "moerad_iu", "report_scores.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    parts = {"radgraph": [r["radgraph_combined"] for r in rows], "bertscore": [r["bertscore"] for r in rows],
             "semb": [r["semb_score"] for r in rows], "bleu2": [r["bleu_score"] for r in rows]}
    assert isinstance(parts["bleu2"][0], str)
    for version, column in (("v1", "RadCliQ-v1"), ("v0", "RadCliQ-v0")):
        got = radcliq_from_components(**parts, version=version)
        np.testing.assert_allclose(got, [float(r[column]) for r in rows], rtol=0, atol=1e-6)
    one = rows[1]
    assert radcliq_from_components(radgraph=one["radgraph_combined"], bertscore=one["bertscore"], semb=one["semb_score"],
                                   bleu2=one["bleu_score"]) == pytest.approx(float(one["RadCliQ-v1"]), abs=1e-6)


def test_radcliq_components_of_different_lengths_are_refused_naming_each_shape():
    from rexrank.metrics.radcliq_formula import radcliq_from_components

    with pytest.raises(ValueError) as err:
        radcliq_from_components(radgraph=[0.1, 0.2], bertscore=[0.3], semb=[0.4, 0.5], bleu2=0.6)
    assert str(err.value) == ("radcliq_from_components: components must be floats or 1-d sequences of one length; "
                              "got radgraph=(2,), bertscore=(1,), semb=(2,), bleu2=(1,)")


# ---- Temporal F1 -----------------------------------------------------------------------------
def test_temporal_f1_refuses_an_unknown_ner_naming_the_choices():
    from rexrank.errors import MetricError
    from rexrank.metrics.temporal_f1 import TemporalF1

    with pytest.raises(MetricError) as err:
        TemporalF1(ner="spacy")
    assert str(err.value) == "temporal_f1: ner must be one of 'stanza', 'keywords', got 'spacy'"


def test_temporal_f1_config_names_the_keywords_epsilon_and_the_ner_pipeline(tmp_path):
    """RadEval's epsilon 1e-10 and Stanza's radiology package (its f1temporal builds
    `stanza.Pipeline(lang="en", package="radiology", ...)`); the keywords-only option says so."""
    from rexrank.metrics.temporal_f1 import TemporalF1

    assert TemporalF1(ner="keywords").config() == {"keywords": "Bannur et al. 2023 (RadEval f1temporal.KEYWORDS)",
                                                  "epsilon": 1e-10, "ner": "none (keywords only)"}
    config = TemporalF1(stanza_dir=str(tmp_path)).config()
    assert config["epsilon"] == 1e-10 and config["keywords"].startswith("Bannur et al. 2023")
    assert {k: config["ner"][k] for k in ("lang", "package", "processors", "resources")} == {
        "lang": "en", "package": "radiology", "processors": {"tokenize": "default", "ner": "radiology"},
        "resources": str(tmp_path)}


def _temporal_bar(capsys, n_texts: int, **options) -> str:
    from rexrank.metrics.temporal_f1 import TemporalF1

    capsys.readouterr()
    half = n_texts // 2  # distinct predictions and references: n_texts distinct texts in all
    TemporalF1(ner="keywords", **options).score([f"new {i}" for i in range(half)],
                                                [f"stable {i}" for i in range(half, n_texts)])
    return capsys.readouterr().err


def test_temporal_f1_shows_its_progress_from_50_distinct_texts_unless_told_not_to(capsys):
    bar = _temporal_bar(capsys, 50)  # progress on by default
    assert "temporal_f1: 100%" in bar and "50/50" in bar and "text/s]" in bar
    assert _temporal_bar(capsys, 48) == ""  # fewer than 50 distinct texts: no bar
    assert _temporal_bar(capsys, 50, progress=False) == ""


# ---- ROUGE -----------------------------------------------------------------------------------
def test_rouge_n_of_a_single_ngram_side_by_hand():
    """rouge_score: precision = matches / max(1, #prediction n-grams), recall = matches /
    max(1, #reference n-grams); a side with one n-gram divides by 1."""
    from rexrank.metrics.rouge import Rouge

    # one prediction unigram of three reference unigrams: P = 1, R = 1/3, F = 2 (1/3) / (4/3) = 1/2
    short, long = ["effusion", "pleural effusion"], ["effusion is present", "small pleural effusion"]
    short_prediction = Rouge(use_stemmer=False).score(short, long)
    assert short_prediction.per_study["rouge1"][0] == pytest.approx(0.5, abs=1e-15)
    # one prediction bigram of two reference bigrams: P = 1, R = 1/2, F = 2 (1/2) / (3/2) = 2/3
    assert short_prediction.per_study["rouge2"][1] == pytest.approx(2 / 3, abs=1e-15)
    # the same, reference and prediction swapped: P and R swap, F is the same
    short_reference = Rouge(use_stemmer=False).score(long, short)
    assert short_reference.per_study["rouge1"][0] == pytest.approx(0.5, abs=1e-15)
    assert short_reference.per_study["rouge2"][1] == pytest.approx(2 / 3, abs=1e-15)


def test_rouge_config_names_the_types_the_stemmer_and_the_tokenizer():
    from rexrank.metrics.rouge import Rouge

    expected = {"rouge_types": ["rouge1", "rouge2", "rougeL"], "use_stemmer": True,
                "tokenizer": "rouge_score 0.1.2 DefaultTokenizer", "score": "F1, mean over studies"}
    assert Rouge().config() == expected
    assert Rouge(use_stemmer=False).config() == {**expected, "use_stemmer": False}


# ---- BLEU-2 ----------------------------------------------------------------------------------
def _nltk_bleu2(reference: list[str], hypothesis: list[str]) -> float:
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    return sentence_bleu([reference], hypothesis, weights=(0.5, 0.5), smoothing_function=SmoothingFunction().method1)


def test_bleu2_of_an_ascii_report_holding_a_nul_character_by_hand():
    """A NUL is a character like another to the official tokeniser (split on spaces only):
    "small \\x00 effusion" is three tokens. Against "small effusion": p1 = 2/3, no bigram
    match so p2 = 0.1 / 2, no brevity penalty: BLEU-2 = sqrt(2/3 x 0.05) = sqrt(1/30)."""
    from rexrank.metrics.bleu2 import Bleu2

    got = Bleu2().score(["small \x00 effusion"], ["small effusion"]).primary
    assert got[0] == pytest.approx((1 / 30) ** 0.5, abs=1e-15)
    assert got[0] == pytest.approx(_nltk_bleu2(["small", "effusion"], ["small", "\x00", "effusion"]), abs=1e-15)


def test_bleu2_with_an_empty_report_last_by_hand():
    """The last distinct text holds no token: every text keeps its row. "no effusion"
    against "effusion": p1 = 1/2, p2 = 0.1 / 1, no brevity penalty: sqrt(0.05); a
    prediction against an empty reference matches nothing: 0 (NLTK's 0 too)."""
    from rexrank.metrics.bleu2 import Bleu2

    got = Bleu2().score(["no effusion", "effusion"], ["effusion", ""]).primary
    np.testing.assert_allclose(got, [0.05 ** 0.5, 0.0], rtol=0, atol=1e-15)
    assert _nltk_bleu2(["effusion"], ["no", "effusion"]) == pytest.approx(0.05 ** 0.5, abs=1e-15)
    assert _nltk_bleu2([], ["effusion"]) == 0


def test_bleu2_of_a_one_token_prediction_by_hand():
    """One token, matched: p1 = 1, no bigram so p2 = 0.1 / max(1, 0): BLEU-2 = sqrt(0.1), as NLTK."""
    from rexrank.metrics.bleu2 import Bleu2

    got = Bleu2().score(["Effusion"], ["effusion"]).primary[0]
    assert got == pytest.approx(0.1 ** 0.5, abs=1e-15)
    assert got == pytest.approx(_nltk_bleu2(["effusion"], ["effusion"]), abs=1e-15)


def test_bleu2_of_a_prediction_sharing_no_word_is_zero_without_a_warning():
    import warnings

    from rexrank.metrics.bleu2 import Bleu2

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "divide by zero encountered in log" on the way to 0
        got = Bleu2().score(["no effusion", "small effusion"], ["heart normal", "small effusion"]).primary
    assert got.tolist() == [0.0, 1.0]
    assert _nltk_bleu2(["heart", "normal"], ["no", "effusion"]) == 0


def test_bleu2_config_names_the_weights_smoothing_and_tokeniser():
    from rexrank.metrics.bleu2 import Bleu2

    assert Bleu2().config() == {"weights": [0.5, 0.5], "smoothing": "method1", "epsilon": 0.1,
                                "tokenizer": "cxr-report-metric prep_reports"}


def test_bleu2_of_no_study_is_an_empty_column_with_an_undefined_mean():
    from rexrank.metrics.bleu2 import Bleu2

    result = Bleu2().score([], [])
    assert list(result.per_study) == ["bleu2"] and result.per_study["bleu2"].shape == (0,)
    assert np.isnan(result.corpus["bleu2"])  # the mean of no value


# ---- the coverage rule (rexrank.backend.public_door.coverage_failure) --------------------------
class _FixedNoise:
    """A stand-in generator whose Laplace draw is `value`; it records what it was asked."""

    def __init__(self, value: float):
        self.value, self.asked = value, []

    def laplace(self, loc, scale):
        self.asked.append((loc, scale))
        return self.value


def _results(n: int, **scored: int) -> dict:
    return {"metrics": {name: {"n_studies": n, "n_scored": k, "n_failed": n - k} for name, k in scored.items()},
            "predictions": {"n": n}, "test_set": {"n_studies": n}}


def test_the_private_coverage_decision_draws_its_noise_from_the_generator_it_is_given():
    """On a private set the rule passes when (scored - 0.99 n) + noise >= -margin: with no
    study of 10,000 scored, -9,900 + 10^6 passes; with every study scored, 100 - 10^6 fails,
    with the fixed message. The noise is asked as Laplace(0, 1 / 0.5)."""
    from rexrank.backend.public_door import PRIVATE_COVERAGE_FAILED, coverage_failure

    lucky = _FixedNoise(1e6)
    assert coverage_failure(_results(10_000, bleu2=0), ["bleu2"], min_coverage=0.99, private=True, rng=lucky) is None
    assert lucky.asked == [(0.0, 2.0)]
    unlucky = _FixedNoise(-1e6)
    error = coverage_failure(_results(10_000, bleu2=10_000), ["bleu2"], min_coverage=0.99, private=True, rng=unlucky)
    assert str(error) == error.without_causes == PRIVATE_COVERAGE_FAILED


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
    import srr_bert_tiny

    return srr_bert_tiny.build(tmp_path_factory.mktemp("srr_bert"))


@pytest.fixture
def srr_stand_in_splitter(monkeypatch):
    import nltk

    import srr_bert_tiny
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


# ---- CRIMSON's prompt, answer reader and score -------------------------------------------------
def test_crimson_prompt_and_messages_default_to_the_full_official_prompt():
    """Without `guidelines`, the prompt is the official one with its guideline sections (the
    OpenAI path's, ../shared/reference/prompts/crimson_prompt_openai_no_context.txt)."""
    from rexrank.metrics.crimson_text import build_prompt, messages

    expected = shared_path("reference", "prompts", "crimson_prompt_openai_no_context.txt").read_text(encoding="utf-8")
    assert build_prompt("{REFERENCE_FINDINGS}", "{PREDICTED_FINDINGS}") == expected
    assert messages("{REFERENCE_FINDINGS}", "{PREDICTED_FINDINGS}")[1] == {"role": "user", "content": expected}


# (text, index of a quote, whether it delimits a key or value) by the official reader's rule:
# a quote is structural after : [ { or before : ] }; after a comma, when the character before
# the comma is " ] } or a digit; before a comma, when the character after it is " [ { or a digit
_QUOTES = [
    ('{"a"', 1, True), ('["x"', 1, True), (':"x', 1, True),
    ('a"]', 1, True), ('a"}', 1, True), ('a":', 1, True),
    ('"a","b"', 4, True), ('[1],"b', 4, True), ('{},"b', 3, True), ('1,"x', 2, True),
    ('a,"b', 2, False), (',"', 1, False), ('x,"y', 2, False),
    ('b",1', 1, True), ('b","', 1, True), ('b",[', 1, True), ('b",{', 1, True),
    ('b",x', 1, False), ('b",', 1, False), ('1b",y', 2, False),
    ('"a', 0, False), ('"x:', 0, False), ('1x"y', 2, False), ('a"', 1, False), ('say "hi', 4, False),
]


@pytest.mark.parametrize("text, i, structural", _QUOTES)
def test_crimson_reader_tells_structural_quotes_from_prose_by_the_official_rule(text, i, structural):
    from rexrank.metrics.crimson_text import _quote_is_structural

    assert text[i] == '"'
    assert _quote_is_structural(text, i) is structural


def test_crimson_reader_escapes_a_stray_quote_up_to_five_characters_before_the_error():
    """json stops at the first character after a string that is no delimiter: with the stray
    quote of `"say "` followed by 4 spaces, it stops 5 characters after that quote, which is
    escaped; with 5 spaces, 6 characters after, beyond the official window: unreadable."""
    from rexrank.metrics.crimson_text import UnreadableAnswer, read_answer

    assert read_answer('{"a": "say "    hi"}') == {"a": 'say "    hi'}
    with pytest.raises(UnreadableAnswer):
        read_answer('{"a": "say "     hi"}')


def test_crimson_reader_never_escapes_a_quote_that_follows_a_backslash():
    """{"a": "\\\\""}: the string holds an escaped backslash, then a second quote stops json at
    index 10. Going back: 10 is structural (before }), 9 follows a backslash (the official
    rule skips it), 6 is escaped, which breaks the text at 6 with no quote left to escape:
    unreadable, and the message counts the answer's characters."""
    from rexrank.metrics.crimson_text import UnreadableAnswer, read_answer

    answer = '{"a": "\\\\""}'
    assert len(answer) == 12 and answer[7:9] == "\\\\"
    with pytest.raises(UnreadableAnswer) as err:
        read_answer(answer)
    assert str(err.value) == "not JSON even after the official repairs (12 characters)"


def test_crimson_attribute_error_without_error_types_counts_in_no_type():
    """One urgent finding (weight 1) matched with one significant attribute error (0.5) and no
    `error_types`: correct = 1 x 1 / (1 + 0.5) = 2/3, N_G = 1, S = 2/3; no type counted."""
    from rexrank.metrics.crimson_text import ATTRIBUTE_TYPES, score_evaluation

    parts = score_evaluation({
        "reference_findings": [{"id": "R1", "finding": "effusion", "clinical_significance": "urgent"}],
        "predicted_findings": [{"id": "P1", "finding": "effusion", "clinical_significance": "urgent"}],
        "matched_findings": [{"ref_id": "R1", "pred_id": "P1"}],
        "errors": {"false_findings": [], "missing_findings": [],
                   "attribute_errors": [{"ref_id": "R1", "pred_id": "P1", "severity": "significant"}]}})
    assert parts.score == round(2 / 3, 4) == 0.6667 and parts.correct == pytest.approx(2 / 3, abs=1e-15)
    assert parts.attribute_counts == {t: 0 for t in ATTRIBUTE_TYPES} and parts.n_attribute == 1
    assert parts.weighted_attribute == 0.5


def test_crimson_reader_escapes_a_stray_quote_after_an_escaped_one():
    """{"a": "x\\"" y"}: the string x\\" ends at the third quote (index 10), json stops at y (12);
    10 follows a quote, not a backslash, and is prose (between " and a space): escaped, the
    value is x"" y."""
    from rexrank.metrics.crimson_text import read_answer

    assert read_answer('{"a": "x\\"" y"}') == {"a": 'x"" y'}


def test_crimson_reader_makes_at_most_49_quote_fixes():
    """Each ` "x` closes the string early and costs one fix; the official loop parses 50 times,
    so 49 stray quotes are repaired and 50 leave the answer unreadable."""
    from rexrank.metrics.crimson_text import UnreadableAnswer, read_answer

    assert read_answer('{"a": "' + ' "x' * 49 + '"}') == {"a": ' "x' * 49}
    with pytest.raises(UnreadableAnswer):
        read_answer('{"a": "' + ' "x' * 50 + '"}')


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

    golden = json.loads((Path(__file__).parent / "data" / "srr_bert" / "official.json").read_text())
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

    import srr_bert_tiny
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
