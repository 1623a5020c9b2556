"""One scoring run asks each model for each text once: RadCliQ takes the per-study values of
its components scored earlier in the run, and a component scored inside RadCliQ lends its
model outputs to the same metric later in the run. Every per-study value equals the one of
the metric run alone, exactly (the shared outputs are those of the same computation)."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

pytest.importorskip("torch")

from rexrank.metrics.registry import get_metric  # noqa: E402
from rexrank.metrics.run_context import RunContext  # noqa: E402
from rexrank.models import shared  # noqa: E402
from rexrank.scoring import score_predictions  # noqa: E402
from rexrank.submissions import Predictions  # noqa: E402
from support.tiny_report_models import CORPUS, make_tiny_radcliq_models  # noqa: E402

# a repeated prediction, an empty one, a prediction that is also a reference
PREDICTIONS = CORPUS[:5] + ["", CORPUS[0], CORPUS[2]]
REFERENCES = CORPUS[2:7] + [CORPUS[1], CORPUS[0], CORPUS[3]]
COMPONENTS = ["radgraph", "bertscore", "sembscore", "bleu2"]  # radcliq's, in its order


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return make_tiny_radcliq_models(tmp_path_factory.mktemp("run_sharing_models"))


@pytest.fixture(autouse=True)
def _fresh_models():
    shared.clear()
    yield
    shared.clear()


def options(m, cache_dir, **bertscore_extra) -> dict[str, dict]:
    bertscore = {"model": str(m["roberta"]), "num_layers": 2, "baseline": (0.8, 0.81, 0.805), **bertscore_extra}
    sembscore = {"checkpoint_path": str(m["chexbert"]), "tokenizer": str(m["tokenizer"])}
    radgraph = {"model_path": str(m["radgraph"])}
    common = {"cache_dir": str(cache_dir), "progress": False}
    return {
        "bertscore": {**common, **bertscore},
        "sembscore": {**common, **sembscore},
        "radgraph": {**common, **radgraph},
        "radcliq": {**common, "bertscore_options": bertscore, "sembscore_options": sembscore, "radgraph_options": radgraph},
        "bleu2": {},
    }


@pytest.fixture
def model_calls(monkeypatch):
    """How many texts each model class is asked for, over all its calls."""
    from rexrank.models.chexbert import CheXbert
    from rexrank.models.token_embeddings import TokenEmbedder
    from rexrank.radgraph.annotator import RadGraphAnnotator

    texts = Counter()
    for cls, method in ((TokenEmbedder, "embed"), (CheXbert, "encode"), (RadGraphAnnotator, "annotate")):
        original = getattr(cls, method)

        def counting(self, batch, *args, _original=original, _name=cls.__name__, **kwargs):
            texts[_name] += len(batch)
            return _original(self, batch, *args, **kwargs)

        monkeypatch.setattr(cls, method, counting)
    return texts


def run(names, opts):
    predictions = Predictions([f"S{i}" for i in range(len(PREDICTIONS))], list(PREDICTIONS), "test", 1)
    return score_predictions(predictions, REFERENCES, metrics=names, metric_options=opts, progress=False)


def alone(name, opts):
    return get_metric(name, **opts[name]).score(PREDICTIONS, REFERENCES)


@pytest.mark.parametrize("names", [
    ["bleu2", "bertscore", "sembscore", "radgraph", "radcliq"],  # components first: radcliq reuses their values
    ["radcliq", "radgraph", "sembscore", "bertscore", "bleu2"],  # radcliq first: it lends its model outputs
])
def test_each_model_runs_once_per_text_and_every_value_is_the_one_alone(models, model_calls, tmp_path, names):
    scored = run(names, options(models, tmp_path / "run"))
    in_run, counts_alone = dict(model_calls), {}
    for name in names:
        model_calls.clear()
        result = alone(name, options(models, tmp_path / f"alone-{name}"))
        counts_alone[name] = dict(model_calls)
        for column, values in result.per_study.items():
            assert np.array_equal(scored.per_study[column].to_numpy(), values, equal_nan=True), column
    # the whole run asked each model for as many texts as radcliq alone does (which needs all
    # three): the standalone metrics beside it added nothing
    assert in_run == counts_alone["radcliq"] and set(in_run) == {"TokenEmbedder", "CheXbert", "RadGraphAnnotator"}
    details = scored.results["metrics"]["radcliq"]["details"]
    assert details.get("components_from_the_run", []) == (COMPONENTS if names[-1] == "radcliq" else [])
    # provenance names the metric that produced the values, loaded (RadGraph's weights hash)
    config = scored.results["metrics"]["radcliq"]["provenance"]["config"]["components"]["radgraph"]["config"]
    assert "weights_sha256" in config


MODEL_METHOD = {"bertscore": ("rexrank.models.token_embeddings", "TokenEmbedder", "embed"),
                "sembscore": ("rexrank.models.chexbert", "CheXbert", "encode"),
                "radgraph": ("rexrank.radgraph.annotator", "RadGraphAnnotator", "annotate")}


@pytest.mark.parametrize("name", sorted(MODEL_METHOD))
def test_both_sides_go_through_the_model_in_one_pass(models, monkeypatch, tmp_path, name):
    """A cold run asks the model once, for every distinct text of references and predictions
    together (one length-sorted set of batches, as bert_score embeds them); a warm run, for the
    predictions that are not cached references. Values agree to float rounding: a text's
    batch mates change the padded width (official bert_score runs have the same property)."""
    import importlib

    module, cls, method = MODEL_METHOD[name]
    owner = getattr(importlib.import_module(module), cls)
    original, calls = getattr(owner, method), []

    def recording(self, texts, *args, **kwargs):
        calls.append(list(texts))
        return original(self, texts, *args, **kwargs)

    monkeypatch.setattr(owner, method, recording)
    opts = options(models, tmp_path / "cache")
    cold = alone(name, opts)
    assert calls == [list(dict.fromkeys(REFERENCES + PREDICTIONS))]
    calls.clear()
    warm = alone(name, opts)
    assert calls == [[p for p in dict.fromkeys(PREDICTIONS) if p not in REFERENCES]]
    np.testing.assert_allclose(warm.primary, cold.primary, rtol=0, atol=1e-6)


def test_a_component_with_other_settings_is_scored_again_from_the_shared_outputs(models, model_calls, tmp_path):
    """bertscore with idf is not radcliq's BERTScore: radcliq scores its own, but from the
    embeddings the standalone metric computed."""
    opts = options(models, tmp_path / "run", idf=True)
    opts["radcliq"]["bertscore_options"].pop("idf")
    scored = run(["bertscore", "radcliq"], opts)
    embedded = model_calls["TokenEmbedder"]
    assert "components_from_the_run" not in scored.results["metrics"]["radcliq"]["details"]
    for name in ("bertscore", "radcliq"):
        model_calls.clear()
        result = alone(name, options(models, tmp_path / f"alone-{name}", **({"idf": True} if name == "bertscore" else {})))
        for column, values in result.per_study.items():
            assert np.array_equal(scored.per_study[column].to_numpy(), values, equal_nan=True), column
        assert model_calls["TokenEmbedder"] == embedded  # the run embedded as much as one of them alone


def test_other_batching_is_not_shared(models, model_calls, tmp_path):
    """Another batch size pads and rounds differently: neither outputs nor values are shared,
    and radcliq's values stay those it has alone. (No reference cache here: on disk it is
    shared across batch sizes, within the float rounding of the encoder.)"""
    opts = options(models, tmp_path / "run")
    for name in ("bertscore", "radcliq"):
        opts[name]["cache"] = False
    opts["bertscore"]["batch_size"] = 2
    scored = run(["bertscore", "radcliq"], opts)
    embedded = model_calls["TokenEmbedder"]
    assert "components_from_the_run" not in scored.results["metrics"]["radcliq"]["details"]
    model_calls.clear()
    result = alone("radcliq", {"radcliq": {**opts["radcliq"]}})
    assert np.array_equal(scored.per_study["radcliq"].to_numpy(), result.per_study["radcliq"])
    assert embedded == 2 * model_calls["TokenEmbedder"]


def test_outputs_are_kept_only_while_a_metric_that_can_use_them_is_to_come():
    context = RunContext(["radcliq", "bertscore", "ratescore"])
    calls = []

    def compute(texts):
        calls.append(texts)
        return [len(t) for t in texts]

    class Fake:
        def __init__(self, name, inner=None):
            self.name, self.inner = name, inner

        def run_key(self):
            return self.name

        def score(self, predictions, references):
            if self.inner:  # radcliq asks for bertscore's model, as its component does
                context.outputs("bertscore", "model", "direct", predictions, compute)
            return self.name

    context.score(Fake("radcliq", inner=True), ["a", "bb"], ["c", "d"])
    assert context.outputs("bertscore", "model", "direct", ["a", "bb"], compute) == [1, 2]
    assert calls == [["a", "bb"]] and context.reused_outputs == 1
    result, producer = context.result_like(Fake("radcliq"), ["a", "bb"], ["c", "d"])
    assert (result, producer.name, producer.inner) == ("radcliq", "radcliq", True)
    assert context.result_like(Fake("radcliq"), ["a", "other"], ["c", "d"]) is None
    context.score(Fake("bertscore"), ["a", "bb"], ["c", "d"])
    assert context._outputs == {}  # no one left to ask (ratescore uses other models)
