"""Temporal F1 equals RadEval's own code (radeval 2.2.1 f1temporal) per study: on 590 IU-Xray
predictions and on strings where the clean-up and the NER disagree, with the same stand-in
NER fed to both (tests/data/temporal_f1/generate_golden.py), and without NER."""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from support.paths import shared_path
from rexrank.errors import MetricError
from rexrank.metrics import temporal_f1 as T
from rexrank.metrics.temporal_f1 import TemporalF1, keyword_entities
from support.temporal_fake_ner import ADVERSARIAL, FakeNER
from support.radeval_texts import RADEVAL_HYPS, RADEVAL_REFS

GOLDEN = json.loads((Path(__file__).parents[1] / "data" / "temporal_f1" / "official.json").read_text())


@pytest.fixture
def fake_stanza(monkeypatch):
    import rexrank.models.stanza_ner as S

    monkeypatch.setattr(S, "load_pipeline", lambda path=None: FakeNER())


def _iu_xray():
    preds = pd.read_csv(shared_path("validation", "moerad_iu", "preds.csv"))
    gts = pd.read_csv(shared_path("validation", "moerad_iu", "gts.csv"))
    assert preds.study_id.tolist() == GOLDEN["study_ids"]
    return preds.report.fillna("nan").tolist(), gts.report.fillna("nan").tolist()


def test_per_study_equals_radeval_with_ner_on_iu_xray(fake_stanza):
    preds, refs = _iu_xray()
    ours = TemporalF1(progress=False).score(preds, refs).primary
    np.testing.assert_array_equal(ours, GOLDEN["fake_ner"]["iu_xray"])


def test_per_study_equals_radeval_where_cleanup_and_ner_disagree(fake_stanza):
    ours = TemporalF1().score([p for p, _ in ADVERSARIAL], [r for _, r in ADVERSARIAL]).primary
    np.testing.assert_array_equal(ours, GOLDEN["fake_ner"]["adversarial"])


def test_keywords_only_equals_radeval_without_ner():
    preds, refs = _iu_xray()
    np.testing.assert_array_equal(TemporalF1(ner="keywords").score(preds, refs).primary, GOLDEN["no_ner"]["iu_xray"])
    ours = TemporalF1(ner="keywords").score([p for p, _ in ADVERSARIAL], [r for _, r in ADVERSARIAL]).primary
    np.testing.assert_array_equal(ours, GOLDEN["no_ner"]["adversarial"])


def test_radeval_regression_value():
    # RadEval tests/test_basics.py asserts temporal_f1 = 0.500000000075 (with Stanza) on its six pairs
    assert TemporalF1(ner="keywords").score(RADEVAL_HYPS, RADEVAL_REFS).value == pytest.approx(0.500000000075, rel=1e-12)


def test_cleanup_joins_words_across_deleted_characters():
    assert keyword_entities("New/increased effusion") == set()  # "newincreased"
    assert keyword_entities("new-onset, WORSENED_edema") == {"new", "worsened"}


def test_each_distinct_text_is_analysed_once(monkeypatch):
    calls = []
    original = T.keyword_entities
    monkeypatch.setattr(T, "keyword_entities", lambda text: calls.append(text) or original(text))
    TemporalF1(ner="keywords").score(["new", "new", "stable"], ["stable", "new", "new"])
    assert sorted(calls) == ["new", "stable"]


def test_missing_stanza_model_fails_fast_with_the_fix(tmp_path, monkeypatch):
    import sys
    import types

    monkeypatch.setitem(sys.modules, "stanza", types.SimpleNamespace(__version__="1.10.1"))
    start = time.monotonic()
    with pytest.raises(MetricError) as err:
        TemporalF1(stanza_dir=str(tmp_path)).score(["new"], ["new"])
    assert time.monotonic() - start < 3
    assert "rexrank weights download temporal_f1" in str(err.value) and "ner='keywords'" in str(err.value)
    assert str(tmp_path) in str(err.value)


def test_bad_option():
    with pytest.raises(MetricError, match="ner must be one of"):
        TemporalF1(ner="spacy")


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
