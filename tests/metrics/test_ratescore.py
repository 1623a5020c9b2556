"""RaTEScore end to end through the real loading path, with tiny models of the real
architectures (DeBERTa-v2 token classifier, MPNet encoder) built and saved here."""
from __future__ import annotations

import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from rexrank.errors import MetricError  # noqa: E402
from rexrank.metrics.registry import get_metric  # noqa: E402
from rexrank.ratescore.affinity import LONG, NEGATION_PAIRS  # noqa: E402
from support.ratescore_models import LABELS, _build_encoder, _build_tagger

# the official label set (RaTE-NER: O + B-/I- x five entity types)
# word -> label the tiny tagger predicts for it, whatever the context
@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    root = tmp_path_factory.mktemp("ratescore_models")
    return str(_build_tagger(root / "ner")), str(_build_encoder(root / "encoder"))


@pytest.fixture
def metric_factory(tiny_models, tmp_path):
    ner, encoder = tiny_models

    def make(**options):
        options.setdefault("cache_dir", str(tmp_path / "refcache"))
        return get_metric("ratescore", ner_path=ner, embedding_path=encoder, device="cpu", batch_size=3, **options)

    return make


def _oracle_embeddings(encoder_dir, strings):
    """Each entity string encoded alone (no batching), [CLS] of the last layer."""
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(encoder_dir)
    model = AutoModel.from_pretrained(encoder_dir).eval()
    out = []
    with torch.no_grad():
        for s in strings:
            enc = tokenizer([s], truncation=True, max_length=30, return_tensors="pt")
            out.append(model(**enc).last_hidden_state[0, 0].double().numpy())
    return out


def _oracle_score(pred_entities, ref_entities, encoder_dir):
    """RaTEScore written out from the reference description, entity by entity."""
    if not pred_entities or not ref_entities:
        return 0.5
    strings = list(dict.fromkeys(e for e, _ in pred_entities + ref_entities))
    vectors = dict(zip(strings, _oracle_embeddings(encoder_dir, strings)))

    def cos(u, v):
        return float(u @ v / (np.linalg.norm(u) * np.linalg.norm(v)))

    def direction(a_side, b_side):
        num = den = 0.0
        for a_text, a_type in a_side:
            sims = [cos(vectors[a_text], vectors[b_text]) for b_text, _ in b_side]
            j = int(np.argmax(sims))
            b_type = b_side[j][1]
            w = LONG.weights[(a_type, b_type)]
            num += sims[j] * w * (LONG.neg_weight if (a_type, b_type) in NEGATION_PAIRS else 1.0)
            den += w
        return num / den if den else 0.0

    p, r = direction(ref_entities, pred_entities), direction(pred_entities, ref_entities)
    return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def test_entities_are_decoded_from_the_tagger(metric_factory):
    metric = metric_factory()
    tagger, _ = metric._models()
    got = tagger(["No pleural effusion or pneumothorax.", "Mild cardiomegaly. Left lung opacity"])
    assert got[0] == [("pleural effusion", "NON-DISEASE"), ("pneumothorax", "NON-DISEASE")]
    # "Left lung opacity" ends the text: ANATOMY span closed by the B that follows it,
    # "opacity" closed by the [SEP] look-ahead
    assert got[1] == [("Mild cardiomegaly", "DISEASE"), ("Left lung", "ANATOMY"), ("opacity", "ABNORMALITY")]


PAIRS = [
    ("No pleural effusion. Heart size is normal.", "Heart size normal. No pneumothorax."),
    ("Mild cardiomegaly. Left lung opacity.", "Small atelectasis in the Left lung. No pleural effusion."),
    ("There is a pleural effusion.", "No pleural effusion."),
]
ENTITIES = {
    "No pleural effusion. Heart size is normal.": [("pleural effusion", "NON-DISEASE"), ("Heart size", "ANATOMY"), ("normal", "NON-ABNORMALITY")],
    "Heart size normal. No pneumothorax.": [("Heart size", "ANATOMY"), ("normal", "NON-ABNORMALITY"), ("pneumothorax", "NON-DISEASE")],
    "Mild cardiomegaly. Left lung opacity.": [("Mild cardiomegaly", "DISEASE"), ("Left lung", "ANATOMY"), ("opacity", "ABNORMALITY")],
    "Small atelectasis in the Left lung. No pleural effusion.": [("Small", "DISEASE"), ("atelectasis", "DISEASE"), ("Left lung", "ANATOMY"), ("pleural effusion", "NON-DISEASE")],
    "There is a pleural effusion.": [("pleural effusion", "NON-DISEASE")],
    "No pleural effusion.": [("pleural effusion", "NON-DISEASE")],
}


def test_scores_equal_an_entity_by_entity_oracle(metric_factory, tiny_models):
    metric = metric_factory()
    preds, refs = [p for p, _ in PAIRS], [r for _, r in PAIRS]
    result = metric.score(preds, refs)
    expected = [_oracle_score(ENTITIES[p], ENTITIES[r], tiny_models[1]) for p, r in PAIRS]
    np.testing.assert_allclose(result.primary, expected, rtol=1e-5, atol=1e-6)
    assert result.value == pytest.approx(float(np.mean(expected)), rel=1e-5)
    # the case is not degenerate: scores differ and none sits at a boundary
    assert all(0.05 < v < 0.999 for v in expected[:2]) and abs(expected[0] - expected[1]) > 0.01
    assert result.details["studies_without_entities"] == 0


def test_report_without_kept_sentence_does_not_shift_later_pairs(metric_factory):
    metric = metric_factory(cache=False)
    alone = metric.score([p for p, _ in PAIRS], [r for _, r in PAIRS]).primary
    # "" and "ab" yield no sentence of >= 3 characters: officially they would vanish and
    # every later pair would be scored against the wrong report
    result = metric.score(["", PAIRS[0][0], "ab", PAIRS[1][0], PAIRS[2][0]], [PAIRS[0][1], PAIRS[0][1], PAIRS[1][1], PAIRS[1][1], PAIRS[2][1]])
    assert len(result.primary) == 5
    assert result.primary[0] == 0.5 and result.primary[2] == 0.5
    np.testing.assert_allclose(result.primary[[1, 3, 4]], alone, rtol=1e-6)
    assert result.details["studies_without_entities"] == 2


def test_text_without_entities_scores_one_half(metric_factory):
    result = metric_factory(cache=False).score(["There is a", "No pleural effusion."], ["No pleural effusion.", "There is the"])
    assert list(result.primary) == [0.5, 0.5]


def test_reference_cache_skips_the_reference_side(metric_factory):
    preds, refs = [p for p, _ in PAIRS], [r for _, r in PAIRS]
    cold = metric_factory().score(preds, refs)
    assert cold.details["reference_cache"] == {"hits": 0, "misses": 3}
    warm_metric = metric_factory()
    tagger, encoder = warm_metric._models()
    seen = []
    warm_metric._tagger = lambda sentences, **kw: seen.extend(sentences) or tagger(sentences, **kw)
    warm = warm_metric.score(preds, refs)
    assert warm.details["reference_cache"] == {"hits": 3, "misses": 0}
    np.testing.assert_allclose(warm.primary, cold.primary, rtol=1e-6)
    ref_only = {s for r in refs for s in warm_metric._splitter()(r)} - {s for p in preds for s in warm_metric._splitter()(p)}
    assert seen and not (set(seen) & ref_only)


def test_batched_tagging_equals_one_sentence_at_a_time(tiny_models):
    """Padding in batches must not change any sentence's labels (official: batch_size=1)."""
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    from rexrank.ratescore.models import EntityTagger

    # random weights: labels now depend on context too
    ner_dir = tiny_models[0]
    torch.manual_seed(3)
    model = AutoModelForTokenClassification.from_pretrained(ner_dir)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.5)
    random_dir = f"{ner_dir}_random"
    model.save_pretrained(random_dir)
    AutoTokenizer.from_pretrained(ner_dir).save_pretrained(random_dir)
    sentences = [s for p, r in PAIRS for s in (p, r)] + ["No pleural effusion or pneumothorax in the Left lung today."]
    batched = EntityTagger(random_dir, "cpu", batch_size=4)(sentences)
    single = EntityTagger(random_dir, "cpu", batch_size=1)
    assert batched == [single([s])[0] for s in sentences]
    assert any(batched)


def test_missing_weights_offline_fail_fast_naming_the_checkpoint(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    metric = get_metric("ratescore", cache_dir=str(tmp_path))
    start = time.monotonic()
    with pytest.raises(MetricError, match="Angelakeke/RaTE-NER-Deberta.*ner_path="):
        metric.score(["No effusion."], ["No effusion."])
    assert time.monotonic() - start < 20


def test_bad_options_are_clear_errors(tiny_models, tmp_path):
    with pytest.raises(MetricError, match="batch_size"):
        get_metric("ratescore", batch_size=0)
    with pytest.raises(MetricError, match="sentence_splitter"):
        get_metric("ratescore", sentence_splitter="spacy")
    with pytest.raises(MetricError, match="does not exist"):
        get_metric("ratescore", ner_path=str(tmp_path / "nope")).score(["No effusion."], ["No effusion."])


def test_ner_config_with_generic_label_names_is_refused(tiny_models, tmp_path):
    """RaTE-NER-Deberta's commit 92e85ddf shipped id2label LABEL_0..LABEL_10; the official
    decoder needs B-/I- names, so such a revision must stop, not tag nothing."""
    import json
    import shutil

    ner, encoder = tiny_models
    generic = tmp_path / "ner_generic"
    shutil.copytree(ner, generic)
    config = json.loads((generic / "config.json").read_text())
    config["id2label"] = {str(i): f"LABEL_{i}" for i in range(len(LABELS))}
    config["label2id"] = {f"LABEL_{i}": i for i in range(len(LABELS))}
    (generic / "config.json").write_text(json.dumps(config))
    metric = get_metric("ratescore", ner_path=str(generic), embedding_path=encoder, cache_dir=str(tmp_path / "c"))
    with pytest.raises(MetricError, match="not IOB tags.*ner_revision="):
        metric.score(["No effusion."], ["No effusion."])


def test_evaluate_module_folder(tiny_models, tmp_path):
    import json
    from pathlib import Path

    import evaluate

    folder = Path(__file__).resolve().parents[2] / "metrics" / "ratescore"
    card = (folder / "README.md").read_text(encoding="utf-8")
    for needed in ("---", "title:", "sdk: gradio", "app_file: app.py", "## Citation", "ihtsdo-and-nlm-licences", "MIT"):
        assert needed in card
    assert "models" in (folder / "requirements.txt").read_text()
    module = evaluate.load(str(folder))
    out = module.compute(
        predictions=[PAIRS[0][0], ""], references=[PAIRS[0][1], PAIRS[1][1]], ner_path=tiny_models[0],
        embedding_path=tiny_models[1], device="cpu", cache_dir=str(tmp_path),
    )
    assert set(out) >= {"ratescore", "per_study", "config", "details"}
    assert len(out["per_study"]) == 2 and out["per_study"][1] == 0.5
    assert out["ratescore"] == pytest.approx(sum(out["per_study"]) / 2)
    assert out["config"]["name"] == "ratescore"
    assert out["config"]["config"]["embedding_model"]["path"] == tiny_models[1]
    json.dumps(out)


# ---- options, provenance and what a run reports, word for word (no model) ---------------------

def test_option_refusals_word_for_word_and_the_values_just_inside():
    from rexrank.metrics.ratescore import RaTEScore

    for bad in (0, -1, True, 2.0, "4"):
        with pytest.raises(MetricError) as error:
            RaTEScore(batch_size=bad)
        assert str(error.value) == f"ratescore: batch_size must be a positive integer, got {bad!r}"
    assert RaTEScore(batch_size=1).batch_size == 1
    with pytest.raises(MetricError) as error:
        RaTEScore(sentence_splitter="spacy")
    assert str(error.value) == "ratescore: sentence_splitter='spacy'; choose one of pyrush, regex, medspacy"


def test_the_defaults_are_the_official_models_and_splitter():
    from rexrank.catalogue import BIOLORD, RATE_NER
    from rexrank.metrics.ratescore import RaTEScore

    metric = RaTEScore()
    assert (metric.ner.repo_id, metric.ner.revision, metric.ner.path) == (RATE_NER.repo_id, RATE_NER.revision, None)
    assert (metric.embedding.repo_id, metric.embedding.revision, metric.embedding.path) == (BIOLORD.repo_id, BIOLORD.revision, None)
    assert (RATE_NER.repo_id, BIOLORD.repo_id) == ("Angelakeke/RaTE-NER-Deberta", "FremyCompany/BioLORD-2023-C")
    assert (metric.ner.licence, metric.embedding.licence) == (RATE_NER.licence, BIOLORD.licence)
    assert metric.affinity.name == "long" and metric.sentence_splitter == "pyrush"
    assert (metric.batch_size, metric.device, metric.cache_enabled, metric.cache_dir, metric.progress) == (32, None, True, None, True)
    mine = RaTEScore(ner_model="o/n", ner_revision="r1", ner_path="/n", embedding_model="o/e", embedding_revision="r2",
                     embedding_path="/e", affinity_matrix="short", sentence_splitter="regex")
    assert (mine.ner.repo_id, mine.ner.revision, mine.ner.path) == ("o/n", "r1", "/n")
    assert (mine.embedding.repo_id, mine.embedding.revision, mine.embedding.path) == ("o/e", "r2", "/e")
    assert (mine.affinity.name, mine.sentence_splitter) == ("short", "regex")


def test_config_names_the_models_the_matrix_the_splitter_and_the_official_constants():
    from rexrank.metrics.ratescore import RaTEScore

    metric = RaTEScore(sentence_splitter="regex")
    assert metric.config() == {
        "ner_model": metric.ner.provenance(),
        "embedding_model": metric.embedding.provenance(),
        "affinity_matrix": metric.affinity.provenance(),
        "sentence_splitter": "regex",
        "ner_max_length": 512,
        "entity_max_length": 30,
        "entity_embedding": "[CLS] last hidden state",
        "no_entity_score": 0.5,
    }


def test_the_reference_cache_is_named_by_both_models_and_the_splitter(tmp_path):
    from rexrank.metrics.ratescore import RaTEScore

    metric = RaTEScore(sentence_splitter="regex", cache=False, cache_dir=str(tmp_path))
    cache = metric._cache()
    assert cache.namespace == f"ratescore/1/{metric.ner.describe()}/{metric.embedding.describe()}/regex"
    assert (cache.directory, cache.enabled) == (tmp_path, False)


def test_a_splitter_that_cannot_be_imported_is_a_metric_error(monkeypatch):
    import rexrank.metrics.ratescore as ratescore

    def missing(name):
        raise ImportError(f"{name} needs medspacy: pip install medspacy")

    monkeypatch.setattr(ratescore, "get_splitter", missing)
    with pytest.raises(MetricError) as error:
        ratescore.RaTEScore(sentence_splitter="medspacy")._splitter()
    assert str(error.value) == "ratescore: medspacy needs medspacy: pip install medspacy"


def test_the_details_count_studies_without_entities_on_either_side_by_hand():
    from rexrank.metrics.base import StudyRows
    from rexrank.metrics.ratescore import RaTEScore, _mean

    rows = StudyRows({"ratescore": [0.5, 0.5, 0.8, 0.5]},
                     {"entities_prediction": [0, 2, 3, 0], "entities_reference": [1, 0, 4, 0]}, {}, {},
                     {"reference_cache": {"hits": 3, "misses": 1}})
    assert RaTEScore.aggregate(rows).details == {
        "studies_without_entities": 3,  # no prediction entity, no reference entity, neither
        "mean_entities_prediction": 1.25,
        "mean_entities_reference": 1.25,
        "reference_cache": {"hits": 3, "misses": 1},
    }
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a run of no study: NaN, without numpy's "mean of empty slice"
        assert np.isnan(_mean([]))
    assert _mean(iter([1, 2])) == 1.5


def test_the_models_load_once_by_their_keys_and_a_tagger_with_unweighed_types_is_refused(monkeypatch):
    """Both models are shared by path, fingerprint, device and batch size, built with them; a
    tagger predicting a type that the affinity matrix does not weigh stops the run."""
    from pathlib import Path

    import rexrank.metrics.ratescore as ratescore
    import rexrank.ratescore.models as models
    from support.shared_models import record_shared_loads

    built, types = [], {"ABNORMALITY", "ANATOMY"}

    class Tagger:
        def __init__(self, path, device, batch_size):
            built.append(("tagger", path, device, batch_size))

        def entity_types(self):
            return types

    class Encoder:
        def __init__(self, path, device, batch_size):
            built.append(("encoder", path, device, batch_size))

    loads = record_shared_loads(monkeypatch)
    monkeypatch.setattr(models, "EntityTagger", Tagger)
    monkeypatch.setattr(models, "EntityEncoder", Encoder)
    monkeypatch.setattr(ratescore, "resolve", lambda checkpoint, option: Path(f"/{option}"))
    monkeypatch.setattr(ratescore, "pick_device", lambda device: f"device {device}")
    metric = ratescore.RaTEScore(device="cpu", batch_size=3)
    tagger, encoder = metric._models()
    assert metric._models() == (tagger, encoder) and isinstance(encoder, Encoder)  # loaded once
    assert loads == [("rate-ner", "/ner_path", "fingerprint of /ner_path", "device cpu", 3),
                     ("rate-embedding", "/embedding_path", "fingerprint of /embedding_path", "device cpu", 3)]
    assert built == [("tagger", Path("/ner_path"), "device cpu", 3), ("encoder", Path("/embedding_path"), "device cpu", 3)]
    types = {"ABNORMALITY", "DEVICE", "DRUG"}
    other = ratescore.RaTEScore()
    with pytest.raises(MetricError) as error:
        other._models()
    assert str(error.value) == (f"ratescore: NER model {other.ner.describe()} predicts entity types ['DEVICE', 'DRUG'] "
                                "that the affinity matrix 'long' does not weigh")
    assert other._tagger is None  # nothing kept from a refused load


def test_on_a_gpu_the_models_load_while_the_texts_are_split_in_a_thread(monkeypatch):
    """Splitting is Python work: on a GPU, the first time, it runs in a thread while the models
    load; a loading error is handed back (raised only if a sentence needs the models). Once
    loaded, or off a GPU, or with no usable device, the texts are split on the caller's thread."""
    import threading

    import rexrank.metrics.ratescore as ratescore

    monkeypatch.setattr(ratescore, "pick_device", lambda device: f"picked {device}")
    monkeypatch.setattr(ratescore, "on_device", lambda device: device == "picked cuda")
    threads, loads = [], []

    def split(text):
        threads.append(threading.current_thread().name.split("_")[0])
        return [text.upper()]

    metric = ratescore.RaTEScore(device="cuda")
    metric._split = split
    monkeypatch.setattr(metric, "_models", lambda: loads.append(threading.current_thread().name))
    assert metric._split_all(["a", "b"]) == ([["A"], ["B"]], None)
    assert threads == ["rexrank-split"] * 2 and loads == ["MainThread"]
    failure = RuntimeError("no weights")

    def fail():
        raise failure

    monkeypatch.setattr(metric, "_models", fail)
    assert metric._split_all(["c"]) == ([["C"]], failure)
    threads.clear()
    metric._tagger = object()  # loaded: nothing to overlap
    assert metric._split_all(["d"]) == ([["D"]], None) and threads == ["MainThread"]
    on_cpu = ratescore.RaTEScore(device="cpu")
    on_cpu._split = split
    assert on_cpu._split_all(["e"]) == ([["E"]], None) and threads == ["MainThread"] * 2

    def no_device(device):
        raise MetricError("no such device")

    monkeypatch.setattr(ratescore, "pick_device", no_device)
    broken = ratescore.RaTEScore(device="cuda:7")
    broken._split = split
    assert broken._split_all(["f"]) == ([["F"]], None) and threads == ["MainThread"] * 3


def test_texts_without_a_kept_sentence_are_analysed_without_loading_a_model():
    """Empty, or every sentence under 3 characters: no entity, no model loaded (nothing is
    downloaded), and an empty float32 vector block, as the cache stores it."""
    from rexrank.metrics.ratescore import RaTEScore

    metric = RaTEScore(cache=False, sentence_splitter="regex")
    for analysis in metric._analyse(["", "ab", "  "], {}, {}):
        assert (analysis["entities"], analysis["types"]) == ([], [])
        assert analysis["embeddings"].shape == (0, 0) and analysis["embeddings"].dtype == np.float32
    result = metric.score(["", "ab"], ["  ", "."])
    assert result.per_study["ratescore"].tolist() == [0.5, 0.5] and metric._tagger is None
    assert result.rows.side == {"entities_prediction": [0, 0], "entities_reference": [0, 0]}


def test_each_distinct_sentence_and_entity_goes_once_to_the_models_with_the_metrics_progress():
    from rexrank.metrics.ratescore import RaTEScore

    calls = []

    class Tagger:
        def __call__(self, sentences, *, progress):
            calls.append(("tag", list(sentences), progress))
            return [[(s.split()[0].lower(), "ABNORMALITY")] for s in sentences]

    class Encoder:
        dim = 2

        def __call__(self, strings, *, progress):
            calls.append(("embed", list(strings), progress))
            return [np.array([1.0, len(s)]) for s in strings]

    for progress in (False, True):
        calls.clear()
        metric = RaTEScore(progress=progress, device="cpu")
        metric._split = lambda text: [s for s in text.split("|") if s]
        metric._tagger, metric._encoder = Tagger(), Encoder()
        known = {"edema": np.array([5.0, 5.0])}
        out = metric._analyse(["Effusion left|Effusion left|Edema", "", "Effusion right"], known, {})
        assert calls == [("tag", ["Effusion left", "Edema", "Effusion right"], progress), ("embed", ["effusion"], progress)]
        assert out[0]["entities"] == ["effusion", "effusion", "edema"] and out[0]["types"] == ["ABNORMALITY"] * 3
        assert out[0]["embeddings"].tolist() == [[1.0, 8.0], [1.0, 8.0], [5.0, 5.0]] and out[0]["embeddings"].dtype == np.float32
        assert out[1]["entities"] == [] and out[1]["embeddings"].shape == (0, 2) and out[1]["embeddings"].dtype == np.float32
        assert out[2]["entities"] == ["effusion"]
