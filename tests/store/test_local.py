"""A local repo's commit of several files is all-or-nothing even when its writer is killed:
a request moving from queue/ to done/ must never be in both places, or in neither."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import rexrank.store.local as local
from rexrank.store.local import LocalRepo

N_FILES = 40

WRITER = f"""
import sys
from rexrank.store.local import LocalRepo
repo = LocalRepo(sys.argv[1])
k = 0
while True:
    k += 1
    changes = {{f"f/{{i:02d}}.txt": str(k).encode() * 200 for i in range({N_FILES})}}
    changes["moving/a.txt" if k % 2 else "moving/b.txt"] = str(k).encode()
    changes["moving/b.txt" if k % 2 else "moving/a.txt"] = None
    repo.commit(changes, message=str(k), parent=repo.snapshot().version)
    print(k, flush=True)
"""


def contents(root: Path) -> tuple[set[bytes], list[str]]:
    files = {(root / "f" / f"{i:02d}.txt").read_bytes() for i in range(N_FILES)}
    moving = sorted(p.name for p in (root / "moving").iterdir()) if (root / "moving").exists() else []
    return files, moving


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_writer_killed_at_any_moment_leaves_whole_commits(tmp_path, seed):
    rng = random.Random(seed)
    root = tmp_path / "repo"
    LocalRepo(root)
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(root)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "1"  # one commit made: the files exist
        time.sleep(rng.uniform(0.05, 1.5))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    LocalRepo(root)  # the next process to open the repo finishes or forgets the last commit
    files, moving = contents(root)
    assert len(files) == 1, "the files of one commit hold the contents of different commits"
    assert len(moving) == 1, f"the moving file is in {moving or 'no place'}"
    assert not [p for p in root.rglob(".tmp-*")], "temporary files were left behind"


def test_a_commit_stopped_half_way_through_is_finished_by_the_next_reader(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    repo = LocalRepo(root)
    repo.commit({"queue/x.json": b"open"}, message="submit", parent=repo.snapshot().version)
    renames = []
    real_replace = os.replace

    def stop_after_one(src, dst):
        if str(dst).endswith(("done/x.json", "index/i.json")) and renames:
            raise KeyboardInterrupt  # the writer stops between two renames of one commit
        renames.append(dst)
        return real_replace(src, dst)

    monkeypatch.setattr(local.os, "replace", stop_after_one)
    with pytest.raises(KeyboardInterrupt):
        repo.commit({"index/i.json": b"indexed", "done/x.json": b"settled", "queue/x.json": None},
                    message="settle", parent=repo.snapshot().version)
    monkeypatch.setattr(local.os, "replace", real_replace)
    assert (root / ".rexrank-journal").exists()
    snap = LocalRepo(root).snapshot("")  # a reader finds the journal and finishes the commit
    assert set(snap.files) == {"done/x.json", "index/i.json"}
    assert (root / "done" / "x.json").read_bytes() == b"settled" and snap.version == "2"


def test_a_commit_stopped_before_its_journal_never_happened(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    repo = LocalRepo(root)
    repo.commit({"queue/x.json": b"open"}, message="submit", parent=repo.snapshot().version)

    def no_journal(*args, **kwargs):
        raise KeyboardInterrupt  # stopped while the new contents were being flushed

    monkeypatch.setattr(local, "_sync_all", no_journal)
    with pytest.raises(KeyboardInterrupt):
        repo.commit({"done/x.json": b"settled", "queue/x.json": None}, message="settle", parent=repo.snapshot().version)
    monkeypatch.undo()
    reopened = LocalRepo(root)
    assert set(reopened.snapshot("").files) == {"queue/x.json"} and reopened.snapshot().version == "1"
    assert not list(root.rglob(".tmp-*"))
