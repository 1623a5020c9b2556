"""Shared test fixtures. Tests run fully offline."""
from __future__ import annotations

import os

import pytest

from support.paths import USER_HUB_CACHE

for _name, _value in {
    "HF_HUB_OFFLINE": "1",
    "HF_EVALUATE_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "GRADIO_ANALYTICS_ENABLED": "False",
}.items():
    os.environ.setdefault(_name, _value)

# mutmut's stats run (benchmarks/mutation.py) records, in this process, which tests reach which
# functions; a child process (a Space, a backend) inherits MUTANT_UNDER_TEST=stats, finds no mutmut
# configuration in its own folder and fails. mutmut keeps its own copy of the name in this process,
# so the children run unmutated code for that run only; a mutant's run still reaches them.
if os.environ.get("MUTANT_UNDER_TEST") == "stats":
    del os.environ["MUTANT_UNDER_TEST"]

# README's test command runs pytest-xdist workers over every core: each worker's torch and BLAS keep
# to one thread (set before anything imports torch), else the workers' threads fight over the cores
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_name, "1")


def pytest_xdist_auto_num_workers(config):
    """`-n auto`: three workers for every two cores, as CI ran green at 892-935 s. Measured on
    2 cores (warm venv): 840 s with 2 workers, 804-864 s with 3, a difference within one run's
    spread; the cores are busy throughout either way, and with 3 the workers end together.
    4 workers on 2 cores (clean CI, 2026-11-30): 927 s of tests, both cores 100 % busy from the
    first minute (/proc/stat), so more workers only share the same CPU."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores * 3 // 2)


# Files of minutes (a fresh venv's pip installs, a browser, Job scenarios, generation), started
# first: the workers take whole files (--dist loadfile), and one of them taken last would leave the
# other workers idle at the end. The rest keep their collection order.
LONG_FILE_MARKERS = ("fresh_venv", "browser", "long")


def pytest_collection_modifyitems(items):
    rank: dict = {}
    for item in items:
        for place, marker in enumerate(LONG_FILE_MARKERS):
            if item.get_closest_marker(marker):
                rank[item.path] = min(place, rank.get(item.path, place))
    if os.environ.get("MUTANT_UNDER_TEST"):
        _fastest_first(items, rank)
    else:
        items.sort(key=lambda item: rank.get(item.path, len(LONG_FILE_MARKERS)))


def _fastest_first(items, rank: dict) -> None:
    """A mutant's run (benchmarks/mutation.py; mutmut stops at the first failure) takes its
    tests fastest first, by the durations mutmut recorded in its stats run (its working folder
    is this run's), the long files last where none is recorded: a mutant a fast test kills is
    settled in seconds, not after the model or Job scenarios."""
    import json
    from pathlib import Path

    try:
        durations = json.loads(Path("mutmut-stats.json").read_text(encoding="utf-8"))["duration_by_test"]
    except (OSError, ValueError, KeyError):
        durations = {}
    items.sort(key=lambda item: (item.path in rank, durations.get(item.nodeid, 0.0)))


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
    wait for it. Tests of the slot give the worker a controlled clock (tests/support/neighbours.py)."""
    from rexrank.backend import publication_slot

    monkeypatch.setattr(publication_slot.SystemClock, "wait_until", lambda self, when: None)
