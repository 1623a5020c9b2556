"""Helpers for the `rexrank hub deploy` tests: a fake Hub with accounts, and running the
CLI against it."""
from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from fakehub import Account, FakeHub

ROOT = Path(__file__).resolve().parents[1]
WRITE, READ, LIMITED = "hf_write", "hf_read", "hf_fine_grained_no_write"
ACCOUNTS = {
    WRITE: Account("alice", ("rexrank",)),
    READ: Account("bob", ("rexrank",), role="read"),
    LIMITED: Account("carol", ("rexrank",), role="fineGrained"),  # passes whoami, may not write
}


def version() -> str:
    from rexrank.hub.source import source_version

    return source_version(ROOT)


def stand_in_wheel(folder: Path, marker: str = "1") -> Path:
    """A file with the name of this checkout's wheel: what deploy uploads, not what it installs
    (test_release.py installs the real one)."""
    path = folder / f"rexrank-{version()}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(zipfile.ZipInfo("rexrank/marker.txt", (1980, 1, 1, 0, 0, 0)), marker)
    return path


@pytest.fixture
def hub(monkeypatch):
    """A fresh fake Hub with accounts, huggingface_hub allowed online and pointed at it."""
    import huggingface_hub.constants as constants

    with FakeHub(accounts=ACCOUNTS) as fake:
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setenv("HF_ENDPOINT", fake.url)
        monkeypatch.setenv("HF_TOKEN", WRITE)
        yield fake


def deploy(*args: str) -> int:
    from rexrank.cli.main import main

    return main(["hub", "deploy", "--org", "rexrank", *args])


def writes(hub: FakeHub, since: int = 0) -> list[str]:
    """The calls that change something (reads and the README check are left out)."""
    return [r for r in hub.requests[since:] if r.split()[0] in ("POST", "PUT", "DELETE")
            and "/preupload/" not in r and not r.endswith("/validate-yaml") and not r.endswith("/paths-info/main")]
