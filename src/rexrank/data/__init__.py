"""Data files shipped with rexrank (example test set and predictions, published seed results)."""
from importlib import resources
from pathlib import Path


def data_path(name: str) -> Path:
    return Path(str(resources.files(__name__) / name))
