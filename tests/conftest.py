"""Shared test fixtures. Tests run fully offline."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

for _name, _value in {
    "HF_HUB_OFFLINE": "1",
    "HF_EVALUATE_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "GRADIO_ANALYTICS_ENABLED": "False",
}.items():
    os.environ.setdefault(_name, _value)

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("REXRANK_SHARED", PROJECT_ROOT.parent / "shared"))


def shared_path(*parts: str) -> Path:
    """A file in ../shared, or skip the test with the reason when ../shared is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"../shared is not beside the checkout ({path} missing)")
    return path


@pytest.fixture(autouse=True)
def _isolated_caches(tmp_path_factory, monkeypatch):
    """Keep every test's caches (rexrank, HF datasets/evaluate) out of the user's home."""
    root = tmp_path_factory.getbasetemp() / "caches"
    monkeypatch.setenv("REXRANK_CACHE", str(root / "rexrank"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(root / "hf_datasets"))
    monkeypatch.setenv("HF_HOME", str(root / "hf_home"))
