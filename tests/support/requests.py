"""Requests as the tests file them: the example predictions, variants of them, and a submit with defaults."""
from __future__ import annotations

import json
from pathlib import Path

from rexrank.data import data_path


EXAMPLE_PREDS = data_path("example_predictions.json")


def example_rows() -> dict[str, str]:
    doc = json.loads(Path(EXAMPLE_PREDS).read_text())
    return {sid: study["model_prediction"] for sid, study in doc.items()}


def write_jsonl(path: Path, rows: dict[str, str]) -> Path:
    path.write_text("".join(json.dumps({"id": k, "prediction": v}) + "\n" for k, v in rows.items()), encoding="utf-8")
    return path


def variant(tmp_path: Path, n: int) -> Path:
    """The example predictions with study texts changed, so each variant is distinct."""
    rows = {k: f"{v} variant {n}." for k, v in example_rows().items()}
    return write_jsonl(tmp_path / f"variant{n}.jsonl", rows)


def submit(store, predictions=EXAMPLE_PREDS, **kw):
    args = dict(test_set="example", track="findings", predictions=predictions, model_name="model-a", submitter="alice")
    args.update(kw)
    return store.submit(**args)


def _request(submitted_time: str, **extra) -> dict:
    return {"id": "r1", "submitter": "alice", "test_set": "iu_xray", "track": "findings", "status": "FINISHED",
            "model_name": "M", "submitted_time": submitted_time, "predictions": {"sha256": "x"}, **extra}
