"""Helpers for the `rexrank hub deploy` tests: a fake Hub with accounts, and running the
CLI against it."""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

from support.fakehub import Account, FakeHub

ROOT = Path(__file__).resolve().parents[2]
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def space_process(hub_url: str, token: str, folder: Path, *, quota: str = "0"):
    """`rexrank leaderboard --store hf://rexrank` in its own process, as the Space runs it:
    HF_TOKEN is the organisers' bot's (`token`), REXRANK_QUOTA=`quota`; yields (its address, its log file)."""
    port = free_port()
    log = folder / "space.log"
    env = {**os.environ, "HF_ENDPOINT": hub_url, "HF_TOKEN": token, "HF_HUB_OFFLINE": "0",
           "HF_HOME": str(folder / "hf-home"), "REXRANK_STORE": "hf://rexrank", "REXRANK_QUOTA": quota,
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "datasets_scripts")])}
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "rexrank.cli.main", "leaderboard", "--port", str(port)],
                                env=env, stdout=out, stderr=subprocess.STDOUT, cwd=folder)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.time() + 240
        while True:
            try:
                urllib.request.urlopen(url, timeout=5)
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"the leaderboard did not start:\n{log.read_text()[-3000:]}")
                time.sleep(1)
        yield url, log
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@contextlib.contextmanager
def online_fake_hub(accounts: dict):
    """A fake Hub with `accounts`, huggingface_hub allowed online and pointed at it, for a
    module's fixtures; yields (the Hub, the MonkeyPatch that set it up)."""
    import huggingface_hub.constants as constants

    with FakeHub(accounts=accounts) as fake, pytest.MonkeyPatch.context() as mp:
        mp.setattr(constants, "HF_HUB_OFFLINE", False)  # tests run offline; this Hub is on 127.0.0.1
        mp.setenv("HF_ENDPOINT", fake.url)
        yield fake, mp
