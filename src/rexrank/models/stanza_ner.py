"""Stanza's radiology NER pipeline, as RadEval's Temporal F1 builds it:
`stanza.Pipeline(lang="en", package="radiology", processors={"tokenize": "default",
"ner": "radiology"})` (Stanza, Apache-2.0; its models come from the Hub repo
stanfordnlp/stanza-en, at the version of the installed stanza).

Stanza keeps its models in its own resources folder ($STANZA_RESOURCES_DIR, else
~/stanza_resources), not in the Hugging Face cache. Loading never downloads: a missing model
fails at once with the one command that fetches it (`rexrank weights download temporal_f1`).
"""
from __future__ import annotations

import os
from pathlib import Path

from rexrank.errors import MetricError

LANG = "en"
PACKAGE = "radiology"
PROCESSORS = {"tokenize": "default", "ner": "radiology"}
FIX = "fetch it where the network is reachable with `rexrank weights download temporal_f1`, or pass ner='keywords'"


def resources_dir(path: str | None = None) -> Path:
    if path:
        return Path(path).expanduser()
    return Path(os.environ.get("STANZA_RESOURCES_DIR") or Path.home() / "stanza_resources")


def _stanza(purpose: str):
    try:
        import stanza
    except ImportError:
        raise MetricError(f"temporal_f1: {purpose} needs the stanza package (pip install stanza); or pass "
                          "ner='keywords'") from None
    return stanza


def installed_version() -> str | None:
    try:
        import stanza
    except ImportError:
        return None
    return stanza.__version__


def pipeline_config(path: str | None = None) -> dict:
    return {"stanza": installed_version(), "lang": LANG, "package": PACKAGE, "processors": PROCESSORS,
            "resources": str(resources_dir(path))}


def is_cached(path: str | None = None) -> bool:
    """The radiology NER model and the resources index are in the resources folder."""
    folder = resources_dir(path)
    return (folder / "resources.json").is_file() and (folder / LANG / "ner" / f"{PACKAGE}.pt").is_file()


def load_pipeline(path: str | None = None):
    """The pipeline, from the local resources folder only."""
    stanza = _stanza("ner='stanza' (the official default)")
    folder = resources_dir(path)
    if not is_cached(path):
        raise MetricError(f"temporal_f1: Stanza's radiology NER model is not in {folder}; {FIX}")
    try:
        return stanza.Pipeline(lang=LANG, package=PACKAGE, processors=PROCESSORS, dir=str(folder),
                               download_method=None, logging_level="ERROR", verbose=False)
    except Exception as exc:  # stanza's own error types for missing or unreadable model files
        raise MetricError(f"temporal_f1: Stanza's radiology pipeline cannot be loaded from {folder} "
                          f"({type(exc).__name__}: {exc}); {FIX}") from None


def download(path: str | None = None) -> Path:
    """Fetch the models (Stanza's own downloader, from its Hub repository)."""
    stanza = _stanza("the Stanza radiology model")
    folder = resources_dir(path)
    stanza.download(LANG, model_dir=str(folder), package=PACKAGE, processors=PROCESSORS, verbose=False)
    return folder


def download_command() -> str:
    return (f'python -c "import stanza; stanza.download({LANG!r}, package={PACKAGE!r}, '
            f'processors={PROCESSORS!r})"')
