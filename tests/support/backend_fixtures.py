"""The backend tests' test metrics, helper command line and private test sets."""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

import rexrank.store.store as store_module
from rexrank.cli.main import main
from support import backendhelpers
from support.requests import submit, write_jsonl


HELPER = str(Path(backendhelpers.__file__))


@pytest.fixture
def test_metrics(monkeypatch):
    import rexrank.metrics.registry as registry

    monkeypatch.setattr(registry, "METRICS", {**registry.METRICS, **backendhelpers.TEST_METRICS})


def cli(*args, env=None, **kw):
    return subprocess.Popen([sys.executable, HELPER, *args], env={**os.environ, **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


PRIVATE_SENTENCES = [
    f"Private finding number {i}: a {w} opacity projects over the {side} lower zone, confidential."
    for i, (w, side) in enumerate([("reticular", "left"), ("nodular", "right"), ("patchy", "left"), ("band-like", "right"),
                                   ("hazy", "left"), ("linear", "right")])
]


@pytest.fixture
def private_set(tmp_path, monkeypatch, test_metrics):
    """A tiny stand-in for ReXGradient (same registry entry, private access) in a data dir."""
    from rexrank.testsets import registry

    spec = registry.TEST_SETS["rexgradient"]
    monkeypatch.setitem(registry.TEST_SETS, "rexgradient", dataclasses.replace(spec, n_studies=None))
    data = tmp_path / "private-data" / "rexgradient"
    data.mkdir(parents=True)
    studies = {
        f"RG{i:03d}": {"section_findings": text, "section_impression": "Private impression text, not for release.",
                       "report": f"Findings: {text} Impression: Private impression text, not for release.",
                       "image_path": [f"RG{i:03d}/0.png"], "key_image_path": f"RG{i:03d}/0.png", "context": "",
                       "site": "A", "is_abnormal": True, "frontal_lateral": ["Frontal"]}
        for i, text in enumerate(PRIVATE_SENTENCES)
    }
    (data / spec.filenames[0]).write_text(json.dumps(studies))
    preds = write_jsonl(tmp_path / "rg.jsonl", {sid: "A patchy opacity in the left lower zone." for sid in studies})
    return tmp_path / "private-data", preds


def leaks_in(root: Path) -> list[str]:
    from rexrank.backend.privacy import find_leaks

    found = []
    for path, data in all_bytes(root).items():
        if find_leaks([data], PRIVATE_SENTENCES, min_chars=10):
            found.append(path)
    return found


N = 1000  # big enough for rounding to matter; ReXGradient has 10,000


ADJECTIVES = ["reticular", "nodular", "patchy", "band-like", "hazy", "linear", "streaky", "ill-defined"]


ZONES = ["left lower", "right lower", "left upper", "right upper", "left mid", "right mid"]


@pytest.fixture
def big_private_set(tmp_path, monkeypatch):
    """A stand-in for ReXGradient (same registry entry, private access) with N studies."""
    from rexrank.testsets import registry

    spec = registry.TEST_SETS["rexgradient"]
    monkeypatch.setitem(registry.TEST_SETS, "rexgradient", dataclasses.replace(spec, n_studies=None))
    data = tmp_path / "private-data" / "rexgradient"
    data.mkdir(parents=True)
    studies = {}
    for i in range(N):
        text = (f"Confidential finding {i}: a {ADJECTIVES[i % 8]} opacity in the {ZONES[i % 6]} zone, "
                f"measuring {i % 17 + 2} mm, unchanged since study {i * 7 % 1000}.")
        studies[f"RG{i:04d}"] = {"section_findings": text, "section_impression": "Private impression.",
                                 "report": text, "image_path": [f"RG{i:04d}/0.png"], "key_image_path": "",
                                 "context": "", "site": "A", "is_abnormal": True, "frontal_lateral": ["Frontal"]}
    (data / spec.filenames[0]).write_text(json.dumps(studies))
    return tmp_path / "private-data", studies


class NoNoise:
    """A generator whose Laplace draws are 0: the decimals alone (noise: test_private_attack.py)."""

    def laplace(self, loc, scale):
        return loc


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def rogue(monkeypatch):
    """File requests as a client that skips every check (an old or modified client, or a
    hand-edited queue): only the backend stands between them and the leaderboard."""

    def file(store, *args, **kw):
        with monkeypatch.context() as m:
            m.setattr(store_module, "check_policy", lambda *a, **k: None)
            m.setattr(store_module, "check_names", lambda **k: None)
            m.setattr(store_module.Store, "judge_copies", lambda self, snap, edit, request, *_: (request, {}))
            return submit(store, *args, **kw)

    return file


def stand_in(folder: Path, findings: dict[str, str | None]) -> Path:
    """A private data folder holding a ReXGradient stand-in with these findings (None: the
    study has no findings section, so the findings track does not score it)."""
    from rexrank.testsets.registry import TEST_SETS

    data = folder / "rexgradient"
    data.mkdir(parents=True)
    studies = {sid: {"section_findings": text, "section_impression": "Private impression, not for release.",
                     "report": f"{text or ''} Private impression, not for release.", "image_path": [f"{sid}/0.png"],
                     "key_image_path": "", "context": "", "site": "A", "is_abnormal": True,
                     "frontal_lateral": ["Frontal"]}
               for sid, text in findings.items()}
    (data / TEST_SETS["rexgradient"].filenames[0]).write_text(json.dumps(studies))
    return folder


HOUR = datetime(2026, 3, 2, 11, 0, tzinfo=timezone.utc).timestamp()  # the slot after START (10:10 UTC)


def all_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}
