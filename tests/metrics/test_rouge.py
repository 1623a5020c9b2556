"""ROUGE equals the official computation (RadEval's `rouge`: rouge_score 0.1.2, stemmer on)
per study, on IU-Xray predictions and on RadEval's own regression pairs."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from support.paths import shared_path
from rexrank.errors import MetricError
from rexrank.metrics.rouge import Rouge, lcs_length, tokenize
from support.radeval_texts import RADEVAL_HYPS, RADEVAL_REFS

GOLDEN = Path(__file__).parents[1] / "data" / "rouge" / "moerad_iu_official.json"

# RadEval tests/test_basics.py (MIT, jbdel/RadEval e0a3909): six pairs and the values RadEval
# asserts for them (metrics_nonllm.md §7)
RADEVAL_EXPECTED = {"rouge1": 0.44681719607092746, "rouge2": 0.4205128205128205, "rougeL": 0.44681719607092746}


def test_radeval_regression_values():
    result = Rouge().score(RADEVAL_HYPS, RADEVAL_REFS)
    for key, expected in RADEVAL_EXPECTED.items():
        assert result.corpus[key] == pytest.approx(expected, rel=1e-12)
    assert result.value == result.corpus["rougeL"]


def test_per_study_equals_official_rouge_score_on_iu_xray():
    golden = json.loads(GOLDEN.read_text())
    preds = pd.read_csv(shared_path("validation", "moerad_iu", "preds.csv"))
    gts = pd.read_csv(shared_path("validation", "moerad_iu", "gts.csv"))
    by_id = {row[0]: row[1:] for row in golden["rows"]}
    assert list(preds.study_id) == list(by_id) == list(gts.study_id)
    result = Rouge().score(preds.report.fillna("nan").tolist(), gts.report.fillna("nan").tolist())
    official = np.array(list(by_id.values()))
    for i, key in enumerate(("rouge1", "rouge2", "rougeL")):
        np.testing.assert_allclose(result.per_study[key], official[:, i], rtol=0, atol=1e-15, err_msg=key)


def test_tokens_are_rouge_scores():
    # non-alphanumerics split words; only words longer than 3 characters are stemmed
    assert tokenize("Effusions, RE-demonstrated; lungs/were 2.5cm") == ["effus", "re", "demonstr", "lung", "were", "2", "5cm"]
    assert tokenize("Effusion was seen, has ribs") == ["effus", "was", "seen", "has", "rib"]  # "was" is not "wa"
    assert tokenize("Effusions were", stem=False) == ["effusions", "were"]
    assert tokenize("... ---") == []


def test_lcs_matches_the_dynamic_programme():
    rng = np.random.default_rng(0)
    for _ in range(300):
        a = list(rng.choice(list("abcde"), size=rng.integers(0, 12)))
        b = list(rng.choice(list("abcde"), size=rng.integers(0, 12)))
        table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
        for i in range(1, len(a) + 1):
            for j in range(1, len(b) + 1):
                table[i][j] = table[i - 1][j - 1] + 1 if a[i - 1] == b[j - 1] else max(table[i - 1][j], table[i][j - 1])
        assert lcs_length(a, b) == table[-1][-1]


def test_empty_texts_score_zero_as_officially():
    result = Rouge().score(["", "No effusion.", ""], ["No effusion.", "", ""])
    for key in ("rouge1", "rouge2", "rougeL"):
        assert result.per_study[key].tolist() == [0.0, 0.0, 0.0]


def test_stemmer_option_is_checked():
    assert Rouge(use_stemmer=False).score(["effusions"], ["effusion"]).value == 0.0
    assert Rouge().score(["effusions"], ["effusion"]).value == 1.0
    with pytest.raises(MetricError, match="use_stemmer"):
        Rouge(use_stemmer="yes")


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
