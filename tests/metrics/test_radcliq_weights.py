"""Parity with the official CXR-Report-Metric output (report_scores.csv) on the real
checkpoints: BERTScore (distilroberta-base) and s_emb (chexbert.pth) per study.

Needs the real weights, so it is marked `weights` and skips offline. Run
`rexrank weights download bertscore sembscore` once where the Hub is reachable, then
`pytest -m weights`: the tests read the user's hub cache (tests/conftest.py). Or point them at
local copies with REXRANK_DISTILROBERTA_DIR (a distilbert/distilroberta-base snapshot),
REXRANK_CHEXBERT_PTH (chexbert.pth) and REXRANK_BERT_BASE_UNCASED_DIR (its tokenizer)."""
from __future__ import annotations

import os

import numpy as np
import pytest

from support.paths import shared_path
from rexrank.errors import MetricError

pytestmark = pytest.mark.weights


def test_a_weights_test_reads_the_hub_cache_that_weights_download_fills():
    """`rexrank weights download` then `pytest -m weights`: the parity tests look in the user's
    hub cache (it used to be the per-test HF_HOME, always empty, so they always skipped)."""
    import huggingface_hub.constants

    from support.paths import USER_HUB_CACHE

    assert huggingface_hub.constants.HF_HUB_CACHE == USER_HUB_CACHE
    assert os.environ["HF_HUB_CACHE"] == USER_HUB_CACHE and USER_HUB_CACHE.endswith("hub")
    assert not USER_HUB_CACHE.startswith(os.environ["HF_HOME"])  # not this test's temporary HF_HOME


@pytest.fixture(scope="module")
def official():
    pd = pytest.importorskip("pandas")
    base = ("validation", "moerad_iu")
    scores = pd.read_csv(shared_path(*base, "report_scores.csv"))
    preds = pd.read_csv(shared_path(*base, "preds.csv"), keep_default_na=False)
    gts = pd.read_csv(shared_path(*base, "gts.csv"), keep_default_na=False)
    assert len(scores) == len(preds) == len(gts) == 590  # row order = preds.csv / gts.csv
    return scores, preds["report"].astype(str).tolist(), gts["report"].astype(str).tolist()


def _run_or_skip(metric, preds, refs):
    try:
        return metric.score(preds, refs)
    except MetricError as exc:
        pytest.skip(f"real checkpoint not available (or set REXRANK_DISTILROBERTA_DIR, REXRANK_CHEXBERT_PTH, REXRANK_BERT_BASE_UNCASED_DIR): {exc}")


def test_bertscore_matches_official_per_study(official, tmp_path):
    from rexrank.metrics.bertscore import DISTILROBERTA_LAYER5_BASELINE, BertScore

    scores, preds, refs = official
    model = os.environ.get("REXRANK_DISTILROBERTA_DIR")
    if model:  # a local folder is not the default id: give the official layer and baseline explicitly
        metric = BertScore(model=model, num_layers=5, baseline=DISTILROBERTA_LAYER5_BASELINE, cache_dir=str(tmp_path))
    else:
        metric = BertScore(cache_dir=str(tmp_path))
    out = _run_or_skip(metric, preds, refs)
    np.testing.assert_allclose(out.per_study["bertscore"], scores["bertscore"].to_numpy(), atol=1e-4)


def test_semb_matches_official_per_study(official, tmp_path):
    from rexrank.metrics.sembscore import SembScore

    scores, preds, refs = official
    metric = SembScore(
        checkpoint_path=os.environ.get("REXRANK_CHEXBERT_PTH"),
        tokenizer=os.environ.get("REXRANK_BERT_BASE_UNCASED_DIR"),
        cache_dir=str(tmp_path),
    )
    out = _run_or_skip(metric, preds, refs)
    np.testing.assert_allclose(out.per_study["sembscore"], scores["semb_score"].to_numpy(), atol=1e-4)
