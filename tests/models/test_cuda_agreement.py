"""On a GPU machine: the suite's model metrics give the same per-study values on CUDA as on
the CPU (<= 1e-5), with tiny models of the real architectures. Skipped, saying so, where
torch sees no CUDA device (`pytest -m cuda` selects it)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from support.tiny_report_models import CORPUS, make_tiny_radcliq_models  # noqa: E402

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device: CPU/CUDA agreement not checked here"),
]
METRICS = ["bleu2", "bertscore", "sembscore", "radgraph", "radcliq", "ratescore"]
TOLERANCE = 1e-5
GPU = "cuda"


def _options(models: dict, ner: str, encoder: str, device: str, cache_dir) -> dict:
    bertscore = {"model": str(models["roberta"]), "num_layers": 2, "baseline": (0.8, 0.81, 0.805)}
    sembscore = {"checkpoint_path": str(models["chexbert"]), "tokenizer": str(models["tokenizer"])}
    radgraph = {"model_path": str(models["radgraph"])}
    common = {"device": device, "cache_dir": str(cache_dir)}
    return {"bertscore": {**common, **bertscore}, "sembscore": {**common, **sembscore}, "radgraph": {**common, **radgraph},
            "radcliq": {**common, "bertscore_options": bertscore, "sembscore_options": sembscore, "radgraph_options": radgraph},
            "ratescore": {**common, "ner_path": ner, "embedding_path": encoder, "batch_size": 3}}


def test_every_per_study_column_agrees_between_cpu_and_cuda(tmp_path):
    from rexrank.models import shared
    from rexrank.scoring import score_predictions
    from rexrank.submissions import Predictions
    from support.ratescore_models import _build_encoder, _build_tagger

    models = make_tiny_radcliq_models(tmp_path / "models")
    ner, encoder = str(_build_tagger(tmp_path / "ner")), str(_build_encoder(tmp_path / "encoder"))
    predictions = CORPUS + [" ".join(CORPUS[i:i + 2]) for i in range(len(CORPUS) - 1)]
    references = list(reversed(predictions))
    ids = [f"s{i}" for i in range(len(predictions))]
    runs = {}
    for device in ("cpu", GPU):
        shared.clear()  # each device loads its own models
        runs[device] = score_predictions(Predictions(ids, predictions, "test", 0), references, metrics=METRICS, progress=False,
                                         metric_options=_options(models, ner, encoder, device, tmp_path / f"cache-{device}"))
    shared.clear()
    cpu, cuda = runs["cpu"].per_study, runs[GPU].per_study
    columns = [c for c in cpu.columns if c != "id" and np.issubdtype(cpu[c].dtype, np.number)]
    assert {m for m in METRICS if m != "radcliq"} <= set(columns) and any(c.startswith("radcliq") for c in columns)
    for column in columns:
        np.testing.assert_allclose(cuda[column].to_numpy(), cpu[column].to_numpy(), rtol=0, atol=TOLERANCE,
                                   equal_nan=True, err_msg=f"{column}: CUDA differs from the CPU")
