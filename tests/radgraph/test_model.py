"""RadGraph model: tiny random archives in the RRG_scorers layout, loaded through the real
loading path, compared with the official radgraph 0.1.18 package's output on the same
archives (tests/data/radgraph/official_annotations.json, see make_official_annotations.py)."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
import torch

from rexrank.errors import MetricError
from rexrank.metrics.registry import get_metric
from rexrank.radgraph.annotator import RadGraphAnnotator
from rexrank.radgraph.fake import TINY_SETTINGS, state_digest, write_archive, write_tiny_bert

from support.paths import PROJECT_ROOT, shared_path

GOLDEN = json.loads((Path(__file__).parents[1] / "data" / "radgraph" / "official_annotations.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("radgraph")
    bert = write_tiny_bert(root / "tinybert")
    archives = {t: write_archive(root, t, bert, **TINY_SETTINGS) for t in ("radgraph", "radgraph-xl")}
    return {"root": root, "bert": bert, **archives}


def test_rebuilt_archives_match_the_golden_weights(tiny):
    for model_type in ("radgraph", "radgraph-xl"):
        folder = tiny["root"] / model_type
        assert state_digest(folder / "weights.th") == GOLDEN["models"][model_type]["weights_digest"], (
            "the tiny archive no longer rebuilds bit-identically (torch RNG change?): regenerate "
            "tests/data/radgraph/official_annotations.json with make_official_annotations.py"
        )


@pytest.mark.parametrize("model_type", ["radgraph", "radgraph-xl"])
def test_annotations_equal_official_package(tiny, model_type):
    annotator = RadGraphAnnotator(model_type, model_path=str(tiny[model_type]), batch_size=4, device="cpu")
    ours = annotator.annotate(GOLDEN["texts"], progress=False)
    official = GOLDEN["models"][model_type]["annotations"]
    assert sum(len(a["entities"]) for a in official) > 50  # the comparison is not vacuous
    assert any(e["relations"] for a in official for e in a["entities"].values())
    for text, mine, theirs in zip(GOLDEN["texts"], ours, official):
        assert mine == theirs, text


def test_batching_does_not_change_annotations(tiny):
    one = RadGraphAnnotator("radgraph", model_path=str(tiny["radgraph"]), batch_size=1, device="cpu")
    many = RadGraphAnnotator("radgraph", model_path=str(tiny["radgraph"]), batch_size=8, device="cpu")
    texts = GOLDEN["texts"] * 2
    assert one.annotate(texts, progress=False) == many.annotate(texts, progress=False)


def test_extracted_folder_and_tarball_load_the_same(tiny):
    folder = RadGraphAnnotator("radgraph", model_path=str(tiny["root"] / "radgraph"), device="cpu")
    tarball = RadGraphAnnotator("radgraph", model_path=str(tiny["radgraph"]), device="cpu")
    assert folder.cache_namespace == tarball.cache_namespace
    assert folder.annotate(GOLDEN["texts"][:2], progress=False) == GOLDEN["models"]["radgraph"]["annotations"][:2]


def test_empty_and_blank_reports_have_no_entities(tiny):
    annotator = RadGraphAnnotator("radgraph", model_path=str(tiny["radgraph"]), device="cpu")
    assert annotator.annotate(["", "  \n "], progress=False) == [{"text": "", "entities": {}}] * 2


def test_metric_columns_cache_and_distinct_texts(tiny, tmp_path, monkeypatch):
    from rexrank.radgraph import f1

    texts = GOLDEN["texts"]
    official = dict(zip(texts, GOLDEN["models"]["radgraph"]["annotations"]))
    preds = [texts[0], texts[1], texts[0], "", texts[4]]
    refs = [texts[4], texts[1], texts[5], texts[0], texts[4]]
    calls: list[list[str]] = []
    original = RadGraphAnnotator.annotate

    def counting(self, batch, progress=True):
        calls.append(list(batch))
        return original(self, batch, progress=False)

    monkeypatch.setattr(RadGraphAnnotator, "annotate", counting)
    metric = get_metric("radgraph", model_path=str(tiny["radgraph"]), cache_dir=str(tmp_path), progress=False)
    result = metric.score(preds, refs)

    # each distinct text annotated once, in one pass: references, then predictions not among them
    assert calls == [[texts[4], texts[1], texts[5], texts[0], ""]]
    for i, (p, r) in enumerate(zip(preds, refs)):
        hyp = official.get(p, {"text": "", "entities": {}})
        ent, rel, comb = f1.combined(hyp, official[r])
        assert result.per_study["radgraph"][i] == comb
        assert result.per_study["radgraph_entity_f1"][i] == ent
        assert result.per_study["radgraph_relation_f1"][i] == rel
        assert (result.per_study["radgraph_simple"][i], result.per_study["radgraph_partial"][i],
                result.per_study["radgraph_complete"][i]) == f1.rewards(hyp, official[r])
    assert result.per_study["radgraph"][4] == 1.0 and result.per_study["radgraph"][3] == 0.0
    assert result.value == pytest.approx(result.per_study["radgraph"].mean())

    # warm reference cache: a new metric instance annotates only the predictions
    calls.clear()
    again = get_metric("radgraph", model_path=str(tiny["radgraph"]), cache_dir=str(tmp_path), progress=False)
    assert again.score(preds, refs).per_study["radgraph"].tolist() == result.per_study["radgraph"].tolist()
    assert calls == [[""]]
    assert "weights_sha256" in again.config()


def test_evaluate_module_contract(tiny):
    import evaluate

    module = evaluate.load(str(PROJECT_ROOT / "metrics" / "radgraph"))
    texts = GOLDEN["texts"]
    out = module.compute(predictions=texts[:2], references=texts[1:3], model_path=str(tiny["radgraph"]), progress=False)
    assert set(out) >= {"radgraph", "per_study", "per_study_columns", "config", "radgraph_simple"}
    assert len(out["per_study"]) == 2
    assert set(out["per_study_columns"]) == {"radgraph_entity_f1", "radgraph_relation_f1", "radgraph_simple",
                                             "radgraph_partial", "radgraph_complete"}


def test_state_dict_must_match_exactly(tiny, tmp_path):
    import shutil

    folder = tmp_path / "radgraph"
    shutil.copytree(tiny["root"] / "radgraph", folder)
    state = torch.load(folder / "weights.th", weights_only=True)
    state["_relation.extra_unknown.weight"] = torch.zeros(1)
    torch.save(state, folder / "weights.th")
    with pytest.raises(MetricError, match="extra_unknown"):
        RadGraphAnnotator("radgraph", model_path=str(folder), device="cpu")


def test_wrong_model_type_for_vocabulary(tiny):
    with pytest.raises(MetricError, match="no namespace 'radgraph-xl__ner_labels'"):
        RadGraphAnnotator("radgraph-xl", model_path=str(tiny["radgraph"]), device="cpu")


def test_bad_options():
    with pytest.raises(MetricError, match="model_type='echograph' is not supported"):
        get_metric("radgraph", model_type="echograph")
    with pytest.raises(MetricError, match="batch_size"):
        get_metric("radgraph", batch_size=0)
    with pytest.raises(MetricError, match="does not exist"):
        RadGraphAnnotator("radgraph", model_path="/nonexistent/radgraph.tar.gz")


def test_offline_hub_fails_fast_with_instructions():
    started = time.monotonic()
    with pytest.raises(MetricError) as info:
        RadGraphAnnotator("radgraph")
    assert time.monotonic() - started < 10
    message = str(info.value)
    assert "StanfordAIMI/RRG_scorers/radgraph.tar.gz" in message and "model_path=" in message


def test_offline_encoder_fails_fast_with_instructions(tiny, tmp_path):
    import shutil

    folder = tmp_path / "radgraph"
    shutil.copytree(tiny["root"] / "radgraph", folder)
    config = json.loads((folder / "config.json").read_text())
    config["model"]["embedder"]["token_embedders"]["bert"]["model_name"] = "microsoft/not-cached-encoder"
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(MetricError, match="microsoft/not-cached-encoder.*transformer_path="):
        RadGraphAnnotator("radgraph", model_path=str(folder), device="cpu")
    # supplying the encoder folder explicitly works
    annotator = RadGraphAnnotator("radgraph", model_path=str(folder), transformer_path=str(tiny["bert"]), device="cpu")
    assert annotator.annotate(GOLDEN["texts"][:1], progress=False) == GOLDEN["models"]["radgraph"]["annotations"][:1]



@pytest.mark.parametrize("encoder, revision", [
    ("microsoft/BiomedNLP-PubMedBERT-base-uncased-abstract-fulltext", "e1354b7a3a09615f6aba48dfad4b7a613eef7062"),
    ("microsoft/BiomedVLP-CXR-BERT-general", "93af83cefc6d3f7d0ef9a0b78b0d579452c6a546"),
    ("microsoft/some-other-encoder", "main"),
])
def test_the_encoder_named_in_the_archive_loads_at_its_pinned_commit(tiny, tmp_path, encoder, revision):
    import shutil

    folder = tmp_path / "radgraph"
    shutil.copytree(tiny["root"] / "radgraph", folder)
    config = json.loads((folder / "config.json").read_text())
    config["model"]["embedder"]["token_embedders"]["bert"]["model_name"] = encoder
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(MetricError, match=f"checkpoint {re.escape(encoder)}@{revision} is not in the local cache.*transformer_path="):
        RadGraphAnnotator("radgraph", model_path=str(folder), device="cpu")

# --- real checkpoints ----------------------------------------------------------------

UPSTREAM_REFS = [
    "no acute cardiopulmonary abnormality",
    "et tube terminates 2 cm above the carina retraction by several centimeters is recommended for more optimal placement bibasilar consolidations better assessed on concurrent chest ct",
    "there is no significant change since the previous exam the feeding tube and nasogastric tube have been removed",
    "unchanged mild pulmonary edema no radiographic evidence pneumonia",
    "no evidence of acute pulmonary process moderately large size hiatal hernia",
    "no acute intrathoracic process",
]
UPSTREAM_HYPS = [
    "no acute cardiopulmonary abnormality",
    "endotracheal tube terminates 2 5 cm above the carina bibasilar opacities likely represent atelectasis or aspiration",
    "there is no significant change since the previous exam",
    "unchanged mild pulmonary edema and moderate cardiomegaly",
    "no evidence of acute cardiopulmonary process moderate hiatal hernia",
    "no acute cardiopulmonary process",
]


def _real_metric(model_type: str):
    """The real checkpoint from the user's HF cache (tests/conftest.py keeps it for `weights`
    tests), or from $REXRANK_RADGRAPH_DIR/<type>.tar.gz."""
    import os

    folder = os.environ.get("REXRANK_RADGRAPH_DIR")
    path = str(Path(folder) / f"{model_type}.tar.gz") if folder else None
    try:
        metric = get_metric("radgraph", model_type=model_type, model_path=path, progress=False, cache=False)
        metric.annotator  # loads now
    except MetricError as exc:
        pytest.skip(f"real RadGraph checkpoint not available (`rexrank weights download radgraph --radgraph-xl` "
                    f"where the Hub is reachable, or set REXRANK_RADGRAPH_DIR): {exc}")
    return metric


@pytest.mark.weights
def test_real_radgraph_matches_upstream_golden():
    """radgraph 0.1.18 tests/radgraph_test.py expectations (reference §4.2)."""
    metric = _real_metric("radgraph")
    (annotation,) = metric.annotate(["no evidence of acute cardiopulmonary process moderate hiatal hernia"])
    assert [(e["tokens"], e["label"], e["relations"]) for e in annotation["entities"].values()] == [
        ("acute", "OBS-DA", []), ("cardiopulmonary", "ANAT-DP", []), ("process", "OBS-DA", [["located_at", "2"]]),
        ("moderate", "OBS-DP", []), ("hiatal", "ANAT-DP", []), ("hernia", "OBS-DP", []),
    ]
    result = metric.score(UPSTREAM_HYPS, UPSTREAM_REFS)
    assert result.per_study["radgraph_simple"].tolist() == pytest.approx([1.0, 0.4, 0.5714285714285715, 0.8, 0.5714285714285715, 0.4])
    assert result.per_study["radgraph_partial"].tolist() == pytest.approx([1.0, 0.26666666666666666, 0.5714285714285715, 0.4, 0.42857142857142855, 0.4])
    assert result.per_study["radgraph_complete"].tolist() == pytest.approx([1.0, 0.23529411764705885, 0.5714285714285715, 0.4, 0.4, 0.4])


@pytest.mark.weights
def test_real_radgraph_xl_matches_upstream_golden():
    """radgraph 0.1.18 tests/radgraph-xl_test.py test_1 annotation."""
    metric = _real_metric("radgraph-xl")
    (annotation,) = metric.annotate(["no acute cardiopulmonary abnormality"])
    assert [(e["tokens"], e["label"], e["relations"]) for e in annotation["entities"].values()] == [
        ("acute", "Observation::definitely absent", []),
        ("cardiopulmonary", "Anatomy::definitely present", []),
        ("abnormality", "Observation::definitely absent", [["located_at", "2"]]),
    ]


@pytest.mark.weights
def test_real_radgraph_parity_with_cxr_report_metric():
    """Per-study radgraph_combined of the official CXR-Report-Metric run on 590 IU-Xray predictions."""
    import numpy as np
    import pandas as pd

    preds = pd.read_csv(shared_path("validation", "moerad_iu", "preds.csv"))
    gts = pd.read_csv(shared_path("validation", "moerad_iu", "gts.csv"))
    official = pd.read_csv(shared_path("validation", "moerad_iu", "report_scores.csv"))["radgraph_combined"].to_numpy()
    metric = _real_metric("radgraph")
    ours = metric.score(preds["report"].tolist(), gts["report"].tolist()).per_study["radgraph"]
    close = np.abs(ours - official) <= 1e-6
    # float differences (batched fp32 vs allennlp 1.1 / transformers 3) may flip a rare argmax
    assert close.mean() >= 0.99, f"{(~close).sum()} of {len(close)} studies differ; max |Δ| {np.abs(ours - official).max()}"
    assert abs(ours.mean() - official.mean()) < 1e-3
