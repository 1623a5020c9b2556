"""`--device` reaches every model metric, and a device this machine cannot use is a clear
error before any work. (CUDA itself is measured with benchmarks/suite.py --device cuda.)"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from rexrank.errors import MetricError  # noqa: E402
from rexrank.metrics.options import device_options, merge_options  # noqa: E402
from rexrank.models import shared  # noqa: E402
from rexrank.models.checkpoints import pick_device  # noqa: E402
from support.commands import EXAMPLE_PREDICTIONS, rexrank  # noqa: E402
from support.tiny_report_models import CORPUS, make_tiny_radcliq_models  # noqa: E402

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")


@no_cuda
@pytest.mark.parametrize("device", ["cuda", "cuda:1"])
def test_cuda_without_a_cuda_device_is_an_error_that_says_so(device):
    with pytest.raises(MetricError, match=f"device='{device}', but torch sees no CUDA device"):
        pick_device(device)


def test_unknown_device_is_an_error():
    with pytest.raises(MetricError, match="device='gpu0' is not a torch device"):
        pick_device("gpu0")


def test_device_option_goes_to_every_metric_that_runs_a_model():
    names = ["bleu2", "bertscore", "sembscore", "radgraph", "radcliq", "ratescore", "green"]
    assert device_options(names, "cpu") == {name: {"device": "cpu"} for name in names if name != "bleu2"}
    assert device_options(names, None) == {} and device_options(["bleu2"], "cuda") == {}  # no model: nothing to check
    # an explicit --metric-option wins over --device
    assert merge_options(device_options(["bertscore"], "cpu"), {"bertscore": {"device": "cuda:1"}}) == {"bertscore": {"device": "cuda:1"}}


@no_cuda
@pytest.mark.parametrize("command", [
    ["score", "--dataset", "example", "--predictions", EXAMPLE_PREDICTIONS, "--metrics", "bleu2,bertscore"],
    ["backend", "--once", "--metrics", "bertscore"],
])
def test_cli_device_cuda_without_one_fails_before_any_work(command, tmp_path):
    out = rexrank(*command, "--device", "cuda", cwd=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "error: device='cuda', but torch sees no CUDA device" in out.stderr
    assert "bleu2" not in out.stdout and not any(tmp_path.iterdir())  # nothing scored, no store created


def test_the_device_reaches_every_loaded_model(tmp_path):
    """cpu:0 is a device string no default produces: every model of the run must carry it."""
    from rexrank.scoring import score_predictions
    from rexrank.submissions import Predictions

    m = make_tiny_radcliq_models(tmp_path)
    bertscore = {"model": str(m["roberta"]), "num_layers": 2, "baseline": (0.8, 0.81, 0.805)}
    sembscore = {"checkpoint_path": str(m["chexbert"]), "tokenizer": str(m["tokenizer"])}
    radgraph = {"model_path": str(m["radgraph"])}
    names = ["bertscore", "sembscore", "radgraph", "radcliq"]
    paths = {"bertscore": bertscore, "sembscore": sembscore, "radgraph": radgraph,
             "radcliq": {"bertscore_options": bertscore, "sembscore_options": sembscore, "radgraph_options": radgraph}}
    shared.clear()
    try:
        predictions = Predictions(["a", "b", "c"], CORPUS[:3], "test", 0)
        run = score_predictions(predictions, CORPUS[2:5], metrics=names, progress=False,
                                metric_options=merge_options(device_options(names, "cpu:0"), paths))
        loaded = list(shared._LOADED.values())
        devices = {type(obj).__name__: getattr(obj, "device", None) or obj.encoder.device for obj in loaded}
        assert devices == {"TokenEmbedder": "cpu:0", "CheXbert": "cpu:0", "RadGraphAnnotator": "cpu:0"}
        assert run.results["metrics"]["radcliq"]["details"]["components_from_the_run"] == ["radgraph", "bertscore", "sembscore"]
    finally:
        shared.clear()
