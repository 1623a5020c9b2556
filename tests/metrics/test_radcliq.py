"""RadCliQ: the formula against the official per-study columns of report_scores.csv, and the
`radcliq` metric end to end with tiny models of the real architectures."""
from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from rexrank.metrics.radcliq_formula import radcliq_from_components
from support.paths import shared_path
from support.tiny_report_models import CORPUS, make_tiny_radcliq_models


@pytest.fixture(scope="module")
def official():
    pd = pytest.importorskip("pandas")
    return pd.read_csv(shared_path("validation", "moerad_iu", "report_scores.csv"))


@pytest.mark.parametrize("version,column", [("v1", "RadCliQ-v1"), ("v0", "RadCliQ-v0")])
def test_formula_reproduces_official_columns(official, version, column):
    got = radcliq_from_components(
        radgraph=official["radgraph_combined"].tolist(),
        bertscore=official["bertscore"].tolist(),
        semb=official["semb_score"].tolist(),
        bleu2=official["bleu_score"].tolist(),
        version=version,
    )
    assert isinstance(got, np.ndarray) and got.shape == (590,)
    np.testing.assert_allclose(got, official[column].to_numpy(), rtol=0, atol=1e-6)


def test_rexrank_figure_is_one_over_mean_v1(official):
    v1 = radcliq_from_components(radgraph=official["radgraph_combined"], bertscore=official["bertscore"],
                                 semb=official["semb_score"], bleu2=official["bleu_score"])
    assert 1 / v1.mean() == pytest.approx(1 / official["RadCliQ-v1"].mean(), abs=1e-7)
    assert round(1 / v1.mean(), 3) == 2.000  # shared/README: 1/mean(RadCliQ-v1) = 2.000


def test_scalars_and_errors():
    v1 = radcliq_from_components(radgraph=1, bertscore=1, semb=1, bleu2=1)
    assert isinstance(v1, float) and v1 == pytest.approx(-1.440690, abs=1e-6)  # reference §5 sanity table
    assert radcliq_from_components(radgraph=0, bertscore=0, semb=0, bleu2=0, version="v0") == pytest.approx(5.516161, abs=1e-6)
    assert radcliq_from_components(radgraph=0.5, bertscore=0.5, semb=0.9, bleu2=0.3, version="v0") == pytest.approx(1.744877, abs=1e-6)
    with pytest.raises(ValueError, match="version"):
        radcliq_from_components(radgraph=1, bertscore=1, semb=1, bleu2=1, version="v2")
    with pytest.raises(ValueError, match="one length"):
        radcliq_from_components(radgraph=[1, 2], bertscore=[1], semb=[1, 2], bleu2=[1, 2])


def test_lazy_top_level_export():
    import rexrank

    assert rexrank.radcliq_from_components is radcliq_from_components


# ---- the metric, from texts -------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    return make_tiny_radcliq_models(tmp_path_factory.mktemp("radcliq_models"))


def _options(m):
    return dict(
        bertscore_options={"model": str(m["roberta"]), "num_layers": 2, "baseline": (0.8, 0.81, 0.805)},
        sembscore_options={"checkpoint_path": str(m["chexbert"]), "tokenizer": str(m["tokenizer"])},
        radgraph_options={"model_path": str(m["radgraph"]), "progress": False},
        cache_dir=str(m["cache"]),
    )


def test_metric_equals_formula_on_its_components(tiny_models):
    from rexrank.metrics.registry import get_metric

    preds = CORPUS[:4] + ["", CORPUS[0]]
    refs = CORPUS[3:7] + [CORPUS[1], CORPUS[0]]
    out = get_metric("radcliq", **_options(tiny_models)).score(preds, refs)
    opts = _options(tiny_models)
    parts = {
        "bleu2": get_metric("bleu2").score(preds, refs).primary,
        "bertscore": get_metric("bertscore", cache_dir=opts["cache_dir"], **opts["bertscore_options"]).score(preds, refs).primary,
        "semb": get_metric("sembscore", cache_dir=opts["cache_dir"], **opts["sembscore_options"]).score(preds, refs).primary,
        "radgraph": get_metric("radgraph", cache_dir=opts["cache_dir"], **opts["radgraph_options"]).score(preds, refs).primary,
    }
    np.testing.assert_allclose(out.per_study["radcliq"], radcliq_from_components(**parts, version="v1"), atol=1e-9)
    np.testing.assert_allclose(out.per_study["radcliq_v0"], radcliq_from_components(**parts, version="v0"), atol=1e-9)
    for column, key in (("radcliq_bleu2", "bleu2"), ("radcliq_bertscore", "bertscore"), ("radcliq_sembscore", "semb"), ("radcliq_radgraph", "radgraph")):
        np.testing.assert_allclose(out.per_study[column], parts[key], atol=1e-9)
    assert out.corpus["radcliq"] == pytest.approx(out.per_study["radcliq"].mean())
    assert out.corpus["radcliq_v1_inv"] == pytest.approx(1 / out.per_study["radcliq"].mean())
    assert out.per_study["radcliq_bleu2"][5] == 1.0 and out.per_study["radcliq_sembscore"][5] == pytest.approx(1.0, abs=1e-6)


def test_leaderboard_shows_one_over_mean_v1(tiny_models, tmp_path):
    from rexrank.results_schema import leaderboard_values
    from rexrank.scoring import score_predictions
    from rexrank.submissions import Predictions

    preds, refs = CORPUS[:3], CORPUS[2:5]
    predictions = Predictions(ids=["a", "b", "c"], texts=list(preds), source="test", n_empty=0)
    run = score_predictions(predictions, refs, metrics=["radcliq"], metric_options={"radcliq": _options(tiny_models)}, progress=False)
    values = leaderboard_values(run.results)
    mean_v1 = float(np.mean(run.per_study["radcliq"]))
    assert values["radcliq_v1_inv"]["mean"] == pytest.approx(1 / mean_v1)
    assert not math.isnan(values["radcliq_v1_inv"]["mean"])


class _Component:
    """A component standing in for a model metric: its per-study values and failures are given."""

    def __init__(self, name, values, failures=None):
        self.name, self.values, self.failures, self.calls = name, values, failures or {}, []

    def score(self, predictions, references, *, part):
        from rexrank.metrics.base import MetricResult

        self.calls.append((list(predictions), list(references), part))
        values = np.asarray(self.values[part[0]:part[1]], dtype=float)
        return MetricResult(self.name, {self.name: values}, {}, {}, dict(self.failures))

    def provenance(self):
        return {"name": self.name, "instance": id(self)}


def test_a_part_takes_each_components_values_failures_and_what_the_run_scored_before():
    """radcliq's columns, failures and reuse for studies [1, 3) of 4, each component a stand-in:
    a study that two components failed is named by the first (radgraph, then bertscore, ...)."""
    from types import SimpleNamespace

    from rexrank.metrics.registry import get_metric

    preds, refs = ["p0", "p1", "p2", "p3"], ["r0", "r1", "r2", "r3"]
    components = {
        "radgraph": _Component("radgraph", [0.0, 0.5, 0.25, 0.0], {1: "no entities"}),
        "bertscore": _Component("bertscore", [0.0, 0.25, 0.5, 0.0]),
        "sembscore": _Component("sembscore", [0.0, 0.75, 1.0, 0.0], {0: "unlabelled", 1: "too long"}),
        "bleu2": _Component("bleu2", [0.0, 0.1, 0.2, 0.0]),
    }
    earlier_bertscore = _Component("bertscore", None)
    earlier = SimpleNamespace(primary=np.array([0.3, 0.6]), failures={})
    asked = []

    def result_like(metric, predictions, references):
        asked.append((metric, list(predictions), list(references)))
        return (earlier, earlier_bertscore) if metric.name == "bertscore" else None

    radcliq = get_metric("radcliq", progress=False)
    radcliq.components = components
    radcliq.run_context = SimpleNamespace(result_like=result_like)
    assert radcliq.config()["components"] == {n: c.provenance() for n, c in components.items()}  # before: its own
    result = radcliq.score(preds, refs, part=(1, 3))
    assert asked == [(components[n], ["p1", "p2"], ["r1", "r2"]) for n in ("radgraph", "bertscore", "sembscore", "bleu2")]
    assert components["bertscore"].calls == []  # taken from the run
    for name in ("radgraph", "sembscore", "bleu2"):  # scored as a run over every pair scores the part
        assert components[name].calls == [(preds, refs, (1, 3))]
    assert list(result.per_study["radcliq_bertscore"]) == [0.3, 0.6]
    assert list(result.per_study["radcliq_radgraph"]) == [0.5, 0.25]
    assert list(result.per_study["radcliq_sembscore"]) == [0.75, 1.0]
    assert list(result.per_study["radcliq_bleu2"]) == [0.1, 0.2]
    parts = dict(radgraph=np.array([0.5, 0.25]), bertscore=np.array([0.3, 0.6]), semb=np.array([0.75, 1.0]),
                 bleu2=np.array([0.1, 0.2]))
    assert list(result.per_study["radcliq"]) == list(radcliq_from_components(**parts, version="v1"))
    assert list(result.per_study["radcliq_v0"]) == list(radcliq_from_components(**parts, version="v0"))
    assert result.failures == {1: "radgraph: no entities", 0: "sembscore: unlabelled"}
    assert result.details == {"components_from_the_run": ["bertscore"]}
    assert radcliq.config()["coefficients"] == "CXR-Report-Metric pickles (normalizer.pkl, composite_metric_model.pkl, radcliq-v1.pkl)"
    assert radcliq.config()["components"] == {"radgraph": components["radgraph"].provenance(),
                                              "bertscore": earlier_bertscore.provenance(),
                                              "sembscore": components["sembscore"].provenance(),
                                              "bleu2": components["bleu2"].provenance()}
    # without a run, every component scores and nothing is said of the run
    radcliq.run_context = None
    assert radcliq.score(preds, refs, part=(1, 3)).details == {}
    assert components["bertscore"].calls == [(preds, refs, (1, 3))]


def test_each_component_gets_the_shared_options_under_its_own():
    """device, cache, cache_dir, progress and the run go to the three model components (a
    device only when one is given: each keeps its own default); a component's own options win;
    sembscore computes no labels here (radcliq uses its vectors only); bleu2 takes none."""
    from rexrank.metrics.registry import get_metric

    context = object()
    radcliq = get_metric("radcliq", device="cpu", cache=False, cache_dir="/c", run_context=context,
                         sembscore_options={"batch_size": 4}, radgraph_options={"progress": False, "cache_dir": "/r"})
    bertscore, sembscore, radgraph = (radcliq.components[n] for n in ("bertscore", "sembscore", "radgraph"))
    assert (bertscore.device, sembscore.options["device"], radgraph.device) == ("cpu",) * 3
    assert (bertscore.cache, sembscore.cache, radgraph.cache) == (False,) * 3
    assert (bertscore.cache_dir, sembscore.cache_dir, radgraph.cache_dir) == ("/c", "/c", "/r")
    assert (bertscore.progress, sembscore.progress, radgraph.progress) == (True, True, False)
    assert (bertscore.run_context, sembscore.run_context, radgraph.run_context) == (context,) * 3
    assert sembscore.options["batch_size"] == 4 and sembscore.labels is False
    assert list(radcliq.components) == ["radgraph", "bertscore", "sembscore", "bleu2"]
    default = get_metric("radcliq")
    plain = {"bertscore": get_metric("bertscore"), "sembscore": get_metric("sembscore"), "radgraph": get_metric("radgraph")}
    assert default.components["bertscore"].device == plain["bertscore"].device
    assert default.components["sembscore"].options["device"] == plain["sembscore"].options["device"]
    assert default.components["radgraph"].device == plain["radgraph"].device
    assert all(default.components[n].run_context is None and default.components[n].progress is True for n in plain)


def test_the_inverse_of_a_mean_of_exactly_zero_is_refused():
    from rexrank.errors import MetricError
    from rexrank.metrics.base import StudyRows
    from rexrank.metrics.radcliq import RadCliQ

    def rows(v1):
        columns = {"radcliq": v1, "radcliq_v0": [0.0] * len(v1)}
        return StudyRows(columns, {}, {}, {}, {})

    with pytest.raises(MetricError) as error:
        RadCliQ.aggregate(rows([1.0, -1.0]))
    assert str(error.value) == "radcliq: mean RadCliQ-v1 is exactly 0, its inverse is undefined"
    assert RadCliQ.aggregate(rows([1.5, 0.5])).corpus["radcliq_v1_inv"] == 1.0
    assert RadCliQ.aggregate(rows([2.0, 2.0])).corpus["radcliq_v1_inv"] == 0.5


def test_no_progress_reaches_the_model_metrics_bars():
    """`rexrank score --no-progress` hides the per-batch bars of every metric that has them,
    radcliq's components included; an explicit option still wins."""
    from rexrank.metrics.registry import get_metric
    from rexrank.scoring import _run_options

    def quiet(name, options, progress=False):
        return _run_options(name, options, progress=progress, run_context=None)

    assert quiet("ratescore", {"batch_size": 4}) == {"progress": False, "batch_size": 4}
    assert quiet("ratescore", {"progress": True}) == {"progress": True}
    assert quiet("ratescore", {}, progress=True) == {}
    assert quiet("bleu2", {}) == {}  # no bars, no such option
    radcliq = get_metric("radcliq", **quiet("radcliq", {}))
    parts = radcliq.components
    assert (parts["bertscore"].progress, parts["sembscore"].progress, parts["radgraph"].progress) == (False,) * 3
    assert get_metric("ratescore", progress=False).progress is False


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
