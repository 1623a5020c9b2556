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

def _user_hub_cache() -> str:
    """The Hugging Face hub cache of the user running the tests, by huggingface_hub's own rule
    (huggingface_hub/constants.py: HF_HUB_CACHE, else HUGGINGFACE_HUB_CACHE, else HF_HOME/hub,
    HF_HOME defaulting to $XDG_CACHE_HOME/huggingface or ~/.cache/huggingface): where
    `rexrank weights download` put the real checkpoints. Not imported from huggingface_hub,
    whose constants are fixed at its first import (inside a test, under the HF_HOME below)."""
    home = os.getenv("HF_HOME", os.path.join(os.getenv("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "huggingface"))
    cache = os.getenv("HF_HUB_CACHE", os.getenv("HUGGINGFACE_HUB_CACHE", os.path.join(os.path.expanduser(home), "hub")))
    return os.path.expandvars(os.path.expanduser(cache))


USER_HUB_CACHE = _user_hub_cache()  # read before any test changes HF_HOME
PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("REXRANK_SHARED", PROJECT_ROOT.parent / "shared"))


def shared_path(*parts: str) -> Path:
    """A file in ../shared, or skip the test with the reason when ../shared is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"../shared is not beside the checkout ({path} missing)")
    return path


def grid(frame, test_set: str, track: str, rank_by: str | None = None, query: str = "", **options):
    """A test-set tab's grid as the page builds it (rexrank.leaderboard.tables.page_views;
    `options`: its filters, columns, per_study)."""
    from rexrank.leaderboard import tables
    from rexrank.results_schema import DEFAULT_RANK_KEY

    views = tables.page_views(frame, track, rank_by or DEFAULT_RANK_KEY, query, test_sets=(test_set,), **options)
    return views.tables[test_set].display


@pytest.fixture(autouse=True)
def _isolated_caches(tmp_path_factory, monkeypatch, request):
    """Keep every test's caches (rexrank, HF datasets/evaluate) out of the user's home.
    Except for `weights` tests: they read the real checkpoints from the user's hub cache, as
    `rexrank weights download` fills it (read only: HF_HUB_OFFLINE stays set)."""
    root = tmp_path_factory.getbasetemp() / "caches"
    monkeypatch.setenv("REXRANK_CACHE", str(root / "rexrank"))
    # the test-set folders an earlier test gave are not remembered in this one (they would be
    # found without --data-dir: rexrank.testsets.locations)
    (root / "rexrank" / "testset_locations.json").unlink(missing_ok=True)
    monkeypatch.setenv("HF_DATASETS_CACHE", str(root / "hf_datasets"))
    monkeypatch.setenv("HF_HOME", str(root / "hf_home"))
    if request.node.get_closest_marker("weights"):
        import huggingface_hub.constants

        # the env for code that reads it later, the constant for code that already imported it
        monkeypatch.setenv("HF_HUB_CACHE", USER_HUB_CACHE)
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", USER_HUB_CACHE)


@pytest.fixture(autouse=True)
def _no_wait_for_publication_slots(monkeypatch):
    """A worker settles a private request at its publication slot, up to an hour away on
    the machine's clock (rexrank.backend.publication_slot): tests about other things do not
    wait for it. Tests of the slot give the worker a controlled clock (tests/neighbours.py)."""
    from rexrank.backend import publication_slot

    monkeypatch.setattr(publication_slot.SystemClock, "wait_until", lambda self, when: None)
