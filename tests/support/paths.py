"""Where the tests find the project and ../shared (the read-only data beside the checkout)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest


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
PROJECT_ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("REXRANK_SHARED", PROJECT_ROOT.parent / "shared"))


def shared_path(*parts: str) -> Path:
    """A file in ../shared, or skip the test with the reason when ../shared is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"../shared is not beside the checkout ({path} missing)")
    return path
