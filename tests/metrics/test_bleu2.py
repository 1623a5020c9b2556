"""BLEU-2 against the official numbers (CXR-Report-Metric per-study output) and NLTK."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

from rexrank.metrics.bleu2 import Bleu2, tokenize
from support.paths import shared_path

# Golden values computed with fast_bleu 0.0.90 (the official dependency), from
# ../shared/reference/metrics_nonllm.md §1.1: (reference, hypothesis, BLEU-2)
OFFICIAL_GOLDEN = [
    ("No acute cardiopulmonary process.", "No acute cardiopulmonary process.", 1.0),
    (
        "Mild cardiomegaly with small bilateral pleural effusions and basilar atelectasis.",
        "Mildly enlarged cardiac silhouette with small pleural effusions and dependent bibasilar atelectasis.",
        0.4236592728681617,
    ),
    ("Increased mild pulmonary edema and left basal atelectasis.", "No pleural effusions or pneumothoraces.", 0.03501806396568503),
    ("No pneumothorax.", "Pneumothorax.", 0.6065306597126334),
    ("Heart size normal.", "Lungs clear.", 0.09250379442961536),
    ("There is a small left pleural effusion, unchanged.", "small effusion", 0.006752340207492941),
    ("No acute process.", "", 0.0),
    ("Lines and tubes are unchanged.\nNo pneumothorax.", "Lines and tubes unchanged. No pneumothorax.", 0.5669467095138409),
]


@pytest.mark.parametrize("reference,hypothesis,expected", OFFICIAL_GOLDEN)
def test_official_golden_values(reference, hypothesis, expected):
    got = Bleu2().score([hypothesis], [reference]).primary[0]
    assert got == pytest.approx(expected, abs=1e-12)


def test_tokenisation_keeps_official_quirks():
    assert tokenize("Effusion.\nHeart  normal, stable.") == ["effusion", ".\nheart", "normal,", "stable", "."]
    assert tokenize("") == []


def test_per_study_parity_with_official_report_scores():
    """Every one of the 590 per-study scores equals CXR-Report-Metric's output (|Δ| ≤ 1e-9)."""
    preds = pd.read_csv(shared_path("validation", "moerad_iu", "preds.csv"))
    gts = pd.read_csv(shared_path("validation", "moerad_iu", "gts.csv"))
    official = pd.read_csv(shared_path("validation", "moerad_iu", "report_scores.csv"))
    assert len(preds) == len(gts) == len(official) == 590
    assert (preds.study_id == gts.study_id).all()
    # the official code reads NaN reports as the string "nan" (str(elem))
    result = Bleu2().score(preds.report.fillna("nan").tolist(), gts.report.fillna("nan").tolist())
    diffs = (result.primary - official.bleu_score.to_numpy())
    assert abs(diffs).max() <= 1e-9
    assert result.value == pytest.approx(official.bleu_score.mean(), abs=1e-12)


def test_agrees_with_nltk_method1_on_real_report_pairs():
    """fast_bleu == NLTK sentence_bleu(weights=(.5,.5), method1) on prep_reports tokens."""
    preds = pd.read_csv(shared_path("validation", "moerad_iu", "preds.csv")).report.fillna("nan").tolist()
    gts = pd.read_csv(shared_path("validation", "moerad_iu", "gts.csv")).report.fillna("nan").tolist()
    # cross pairs too, so that low-overlap cases are covered
    pairs = list(zip(preds, gts)) + list(zip(preds[:100], gts[100:200]))
    ours = Bleu2().score([p for p, _ in pairs], [g for _, g in pairs]).primary
    smoothing = SmoothingFunction().method1
    for (p, g), got in zip(pairs, ours):
        hyp, ref = tokenize(p), tokenize(g)
        expected = 0.0 if not hyp else sentence_bleu([ref], hyp, weights=(0.5, 0.5), smoothing_function=smoothing)
        assert math.isclose(got, expected, rel_tol=1e-12, abs_tol=1e-15), (p, g, got, expected)


def test_length_mismatch_and_non_strings_are_errors():
    from rexrank.errors import MetricError

    with pytest.raises(MetricError, match="2 predictions but 1 references"):
        Bleu2().score(["a", "b"], ["a"])
    with pytest.raises(MetricError, match="prediction at position 1 is NoneType"):
        Bleu2().score(["a", None], ["a", "b"])


@pytest.mark.parametrize(
    "hypothesis,reference",
    [
        ("Épanchement  pleural droit. Pas de pneumothorax.", "épanchement pleural. pneumothorax absent."),  # non-ASCII path
        ("Pleural  effusion.  No pneumothorax. ", "  pleural effusion. no pneumothorax."),  # runs of spaces
        ("Heart\x00size normal. Lungs clear.", "Heart size normal."),  # a NUL inside the text
    ],
)
def test_tokenisation_paths_agree_with_nltk(hypothesis, reference):
    smoothing = SmoothingFunction().method1
    pairs = [(hypothesis, reference), (reference, hypothesis), ("Lungs clear.", reference)]
    ours = Bleu2().score([h for h, _ in pairs], [r for _, r in pairs]).primary
    for (h, r), got in zip(pairs, ours):
        expected = sentence_bleu([tokenize(r)], tokenize(h), weights=(0.5, 0.5), smoothing_function=smoothing)
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-15)


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
