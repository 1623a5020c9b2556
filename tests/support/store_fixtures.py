"""A store on a fake Hub, and stores of the earlier layout with a counter of their reads."""
from __future__ import annotations

import json

import pytest

from rexrank.store import FAILED, FINISHED
from rexrank.store import records as R
from support.fakehub import FakeHub
from support.requests import submit, variant


@pytest.fixture(scope="module")
def fake_hub():
    with FakeHub() as hub:
        yield hub


@pytest.fixture
def hub(fake_hub, monkeypatch):
    """The fake Hub, with huggingface_hub allowed online (tests run with HF_HUB_OFFLINE=1,
    which huggingface_hub reads once at import) and pointed at it."""
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_ENDPOINT", fake_hub.url)
    monkeypatch.setenv("HF_TOKEN", "hf_fake")
    return fake_hub


RESULT = {"model_name": "M", "test_set": "iu_xray", "track": "findings",
          "values": {"bleu2": {"mean": 0.2, "ci95": None, "n": 590}}, "source": "rexrank", "submitter": "alice"}


class Reads:
    """Counts what a repo lists and reads (monkeypatched onto the repo object)."""

    def __init__(self, monkeypatch, repo):
        self.paths: list[str] = []
        self.listed: list[tuple[str, ...]] = []
        self.listed_files = 0
        # both repos' read() goes through read_optional()
        monkeypatch.setattr(repo, "read_optional", self._reader(repo.read_optional))
        snapshot = repo.snapshot

        def counted_snapshot(*folders, **kw):
            snap = snapshot(*folders, **kw)
            self.listed.append(folders)
            self.listed_files += len(snap.files)
            return snap

        monkeypatch.setattr(repo, "snapshot", counted_snapshot)

    def _reader(self, original):
        def read(snap, path):
            self.paths.append(path)
            return original(snap, path)
        return read

    def clear(self) -> None:
        self.paths.clear()
        self.listed.clear()
        self.listed_files = 0

    def records(self, folder: str) -> list[str]:
        return [p for p in self.paths if p.startswith(folder)]


def settle(store, n: int, tmp_path, *, first: int = 0) -> list[dict]:
    """`n` requests submitted, scored (a result record each) and FINISHED through the store's API."""
    done = []
    for i in range(first, first + n):
        req = submit(store, variant(tmp_path, i), model_name=f"m{i}", submitter=f"team{i % 3}")
        store.claim("w", lease_seconds=60)
        store.add_result({**RESULT, "id": req["id"], "model_name": f"m{i}", "submitter": f"team{i % 3}"})
        assert store.finish(req["id"], "w", result_id=req["id"])
        done.append(req)
    return done


def earlier_layout_store(root, n: int) -> list[dict]:
    """A store as an earlier rexrank left it: every request in queue/ (settled ones too),
    result records without an index."""
    requests = []
    for i in range(n):
        ts = 1.7e9 + i * 60
        rid = R.new_request_id(ts, "old", str(i))
        status = FINISHED if i % 4 else FAILED
        req = {"id": rid, "status": status, "test_set": "example", "track": "findings", "private": False,
               "model_name": f"old-model-{i}", "submitter": f"olduser{i % 2}", "submitted_time": R.iso(ts),
               "predictions": {"path": R.predictions_path(rid), "sha256": f"{i:064x}", "n": 19},
               "failure_kind": None if status == FINISHED else "internal", "history": [{"status": status}]}
        requests.append(req)
        path = root / "requests" / "queue" / f"{rid}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(req))
        if status == FINISHED:
            rec = root / "results" / "records" / "iu_xray" / "findings" / f"{rid}.json"
            rec.parent.mkdir(parents=True, exist_ok=True)
            rec.write_text(json.dumps({**RESULT, "id": rid, "model_name": f"old-model-{i}", "submitter": f"olduser{i % 2}"}))
    return requests
