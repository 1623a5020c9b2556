"""ROUGE equals the official computation (RadEval's `rouge`: rouge_score 0.1.2, stemmer on)
per study, on IU-Xray predictions and on RadEval's own regression pairs."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import shared_path
from rexrank.errors import MetricError
from rexrank.metrics.rouge import Rouge, lcs_length, tokenize

GOLDEN = Path(__file__).parent / "data" / "rouge" / "moerad_iu_official.json"

# RadEval tests/test_basics.py (MIT, jbdel/RadEval e0a3909): six pairs and the values RadEval
# asserts for them (metrics_nonllm.md §7)
RADEVAL_REFS = [
    "No acute cardiopulmonary process.",
    "No radiographic findings to suggest pneumonia.",
    "1.Status post median sternotomy for CABG with stable cardiac enlargement and calcification of the aorta consistent with atherosclerosis.Relatively lower lung volumes with no focal airspace consolidation appreciated.Crowding of the pulmonary vasculature with possible minimal perihilar edema, but no overt pulmonary edema.No pleural effusions or pneumothoraces.",
    "1. Left PICC tip appears to terminate in the distal left brachiocephalic vein.2. Mild pulmonary vascular congestion.3. Interval improvement in aeration of the lung bases with residual streaky opacity likely reflective of atelectasis.Interval resolution of the left pleural effusion.",
    "No definite acute cardiopulmonary process.Enlarged cardiac silhouette could be accentuated by patient's positioning.",
    "Increased mild pulmonary edema and left basal atelectasis.",
]
RADEVAL_HYPS = [
    "No acute cardiopulmonary process.",
    "No radiographic findings to suggest pneumonia.",
    "Status post median sternotomy for CABG with stable cardiac enlargement and calcification of the aorta consistent with atherosclerosis.",
    "Relatively lower lung volumes with no focal airspace consolidation appreciated.",
    "Crowding of the pulmonary vasculature with possible minimal perihilar edema, but no overt pulmonary edema.",
    "No pleural effusions or pneumothoraces.",
]
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
