"""Untrusted files are parsed where they cannot hurt (issue 37.1): every predictions file is read
in a child process with hard limits (rexrank.sandbox), the limits count the bytes a file really
decompresses to, a file that breaks one is refused naming it, and the reading process (the
Space, the backend, the command line) does not grow by more than an ordinary submission does.

The attack: a 20 kB parquet file whose footer claims 1,000 uncompressed bytes holds 160 MiB of
zstd strings (the trial's held 320 MiB; it scales to the upload limit)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from support import forged_parquet as F
from support import sandbox_targets as T
from rexrank import sandbox
from rexrank.errors import SubmissionError
from rexrank.submissions import read_raw_predictions

ROOT = Path(__file__).resolve().parents[1]
REPORT = ("The cardiomediastinal silhouette is within normal limits. The lungs are clear without focal "
          "consolidation, pleural effusion or pneumothorax. No acute osseous abnormality. ")


def footer_bomb(path: Path, n_rows: int = 10_000, width: int = 16_000) -> Path:
    """n_rows x width bytes of one string (160 MiB by default) in zstd pages, the footer forged
    to claim 1,000 bytes a column: every value is within MAX_PREDICTION_CHARS, the metadata
    within MAX_TABLE_BYTES."""
    return F.forge_footer(F.strings_parquet(path, n_rows, "x" * width))


def ordinary_parquet(path: Path, n_rows: int = 10_000) -> Path:
    """An ordinary submission of the largest test set: 10,000 studies, ~0.9 kB a prediction."""
    pq.write_table(pa.table({"id": [f"S{i:05d}" for i in range(n_rows)],
                             "prediction": [f"{REPORT * 5} Study {i}." for i in range(n_rows)]}), path)
    return path


def datasets_folder_bomb(folder: Path, n_rows: int = 10_000, width: int = 16_000) -> Path:
    """A datasets.save_to_disk folder whose Arrow stream holds zstd-compressed record batches:
    a few kB on disk (within check_folder's MAX_TABLE_BYTES), 160 MiB once decoded."""
    import datasets

    datasets.Dataset.from_dict({"id": ["S00000"], "prediction": ["x"]}).save_to_disk(str(folder))
    [arrow] = folder.glob("*.arrow")
    table = pa.table({"id": [f"S{i:05d}" for i in range(n_rows)], "prediction": ["x" * width] * n_rows})
    with pa.ipc.new_stream(str(arrow), table.schema, options=pa.ipc.IpcWriteOptions(compression="zstd")) as writer:
        writer.write_table(table, max_chunksize=1_000)
    assert sum(f.stat().st_size for f in folder.iterdir()) < 1_000_000
    return folder


# ---- the reading process does not grow ------------------------------------------------------

GROWTH = r"""
import json, sys
from rexrank.errors import SubmissionError
from rexrank.submissions import read_raw_predictions

def peak_mib():  # this process's own peak (getrusage's ru_maxrss carries over from the parent through exec)
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:")) / 1024

with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")  # the peak starts again from here, after the imports
before = peak_mib()
try:
    outcome = f"{len(read_raw_predictions(sys.argv[1]).rows)} rows"
except SubmissionError as exc:
    outcome = str(exc)
print(json.dumps({"growth_mib": peak_mib() - before, "outcome": outcome}))
"""


def growth(path: Path) -> dict:
    """How much a fresh process's peak memory grows while it reads `path` (after its imports)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", GROWTH, str(path)], capture_output=True, text=True, env=env,
                          timeout=600, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_forged_footer_or_compressed_batches_do_not_grow_the_reading_process(tmp_path):
    """Before: the parquet bomb grew the reading process by its 160 MiB (pq.read_table decoded it
    all before any limit), the datasets folder by twice that (load_from_disk, then pandas)."""
    ordinary = growth(ordinary_parquet(tmp_path / "ordinary.parquet"))
    assert ordinary["outcome"] == "10000 rows"
    for bomb in (footer_bomb(tmp_path / "bomb.parquet"), datasets_folder_bomb(tmp_path / "bomb-folder")):
        grown = growth(bomb)
        assert grown["growth_mib"] <= ordinary["growth_mib"] + 16, (bomb.name, grown, ordinary)
        assert "(MAX_TABLE_BYTES)" in grown["outcome"], grown


# ---- the limits count what is decoded -------------------------------------------------------

def test_a_forged_footer_is_read_until_the_bytes_it_really_holds_pass_the_limit(tmp_path):
    bomb = footer_bomb(tmp_path / "bomb.parquet")
    assert bomb.stat().st_size < 100_000 and pq.ParquetFile(bomb).metadata.row_group(0).column(1).total_uncompressed_size == 1_000
    with pytest.raises(SubmissionError) as caught:
        read_raw_predictions(bomb)
    assert str(caught.value).startswith(
        f"{bomb}: its 'id' and 'prediction' columns hold more than 20.0 MiB once decompressed (counted as they are "
        "read, after 1,344 rows); the limit is 20.0 MiB (MAX_TABLE_BYTES)")


def test_a_huge_single_page_is_bounded_by_the_readers_memory_limit(tmp_path, monkeypatch):
    """One 64 MiB value in one data page (the footer forged): a page is decompressed whole, so
    only the child's address-space limit bounds it. Within it, the value is measured and
    refused; past it, the child's MemoryError is the refusal."""
    page = F.forge_footer(F.strings_parquet(tmp_path / "page.parquet", 1, "x" * (64 << 20)))
    assert page.stat().st_size < 100_000
    with pytest.raises(SubmissionError, match="column 'prediction' holds a value of 67,108,864 bytes; the limit is "
                                              "20,000 characters"):
        read_raw_predictions(page)
    monkeypatch.setattr(sandbox, "LIMITS", sandbox.Limits(memory_bytes=32 << 20))
    with pytest.raises(SubmissionError) as caught:
        read_raw_predictions(page)
    assert str(caught.value) == (
        f"{page}: reading it needs more than 32 MiB, the memory limit of the reader (RLIMIT_AS): the file expands to "
        "far more than it holds (a page, batch or value larger than any predictions file needs); write the id and "
        "prediction columns as plain text within the input limits")


def test_forged_page_headers_are_refused(tmp_path, monkeypatch):
    """A page that claims fewer bytes than it holds cannot be decompressed (a damaged file); one
    that claims 128 MiB is an allocation of 128 MiB, in the child, under its limit."""
    small = F.forge_page_headers(footer_bomb(tmp_path / "small.parquet", 2_000), 1_000)
    assert {p["uncompressed"] for p in F.page_headers(small)} == {1_000}
    with pytest.raises(SubmissionError, match=r"not a readable parquet file \(OSError: .*(?i:zstd|decompress)"):
        read_raw_predictions(small)
    large = F.forge_page_headers(footer_bomb(tmp_path / "large.parquet", 2_000), 2**27 - 1)
    monkeypatch.setattr(sandbox, "LIMITS", sandbox.Limits(memory_bytes=64 << 20))
    with pytest.raises(SubmissionError, match=r"reading it needs more than 64 MiB, the memory limit of the reader"):
        read_raw_predictions(large)


@pytest.mark.parametrize("command", ["score", "submit"])
def test_a_reader_stopped_by_a_limit_is_one_line_on_the_command_line(tmp_path, capsys, monkeypatch, command):
    from support.commands import one_error_line

    pages = F.forge_page_headers(footer_bomb(tmp_path / "pages.parquet", 2_000), 2**27 - 1)  # 128 MiB a page, claimed
    monkeypatch.setattr(sandbox, "LIMITS", sandbox.Limits(memory_bytes=64 << 20))
    assert "reading it needs more than 64 MiB, the memory limit of the reader (RLIMIT_AS)" in one_error_line(
        capsys, command, pages, tmp_path)


def test_a_datasets_folder_is_read_batch_by_batch(tmp_path):
    folder = datasets_folder_bomb(tmp_path / "bomb")
    with pytest.raises(SubmissionError, match=r"columns hold more than 20\.0 MiB once decompressed \(counted as they "
                                              r"are read, after 2,000 rows\); the limit is 20\.0 MiB \(MAX_TABLE_BYTES\)"):
        read_raw_predictions(folder)


# ---- the child's limits, each named --------------------------------------------------------

def refusal(function, *args, **limits) -> str:
    with pytest.raises(SubmissionError) as caught:
        sandbox.run(function, list(args), source="p.parquet", limits=sandbox.Limits(**limits))
    return str(caught.value)


def test_each_limit_of_the_child_is_a_refusal_that_names_it():
    assert sandbox.run(T.echo, ["a", "é ✓", ""], source="p") == [("a", "é ✓", "")]
    assert refusal(T.allocate, 256 << 20, memory_bytes=64 << 20).startswith(
        "p.parquet: reading it needs more than 64 MiB, the memory limit of the reader (RLIMIT_AS)")
    assert refusal(T.spin, cpu_seconds=1).startswith(
        "p.parquet: reading it used more than 1 s of CPU time, the CPU time limit of the reader (RLIMIT_CPU)")
    # the child's own CPU time is its cost (the kernel samples it in ticks, and under load it has
    # counted 0.83 s at SIGXCPU: the bound says it was measured, not how finely)
    assert sandbox.last_cost().cpu_seconds > 0.5
    assert refusal(T.wait_forever, wall_seconds=1).startswith(
        "p.parquet: reading it took longer than 1 s, the wall-clock limit of the reader")
    assert refusal(T.many_rows, 100, 10_000, answer_bytes=100_000).startswith(
        "p.parquet: the reader's answer is over 100,000 bytes, the answer limit of the reader")
    assert refusal(T.die_by, "SIGKILL").startswith("p.parquet: the reader was killed (SIGKILL) while reading it")
    assert refusal(T.die_by, "SIGSEGV").startswith("p.parquet: the reader stopped with SIGSEGV while reading it: the "
                                                   "file is damaged, or reading it reached the memory limit of the reader")
    assert refusal(T.not_strings) == ("p.parquet: cannot read it: TypeError: a sandboxed function returns rows of "
                                      "strings, all of one width")


def test_a_reader_stopped_by_the_machine_is_told_apart_from_one_stopped_by_the_file():
    """The wall clock (a stuck or overloaded machine) and a SIGKILL that no CPU limit explains
    (the kernel's out-of-memory killer) say nothing of the file: ReaderKilled, which the
    backend gives back; the limits a file can break stay the file's refusals."""
    from rexrank.errors import ReaderKilled

    def raised(function, *args, **limits):
        with pytest.raises(SubmissionError) as caught:
            sandbox.run(function, list(args), source="p.parquet", limits=sandbox.Limits(**limits))
        return type(caught.value)

    assert raised(T.wait_forever, wall_seconds=1) is ReaderKilled
    assert raised(T.die_by, "SIGKILL") is ReaderKilled
    assert raised(T.spin, cpu_seconds=1) is SubmissionError
    assert raised(T.allocate, 256 << 20, memory_bytes=64 << 20) is SubmissionError
    assert raised(T.die_by, "SIGSEGV") is SubmissionError


def test_the_reader_holds_none_of_the_callers_secrets(monkeypatch):
    """The children that parse hostile files see an allow-listed environment: the backend's
    store token and LLM keys stay in the caller (they used to inherit all of it)."""
    secrets = {"HF_TOKEN": "hf_store_secret", "REXRANK_LLM_API_KEY": "sk-judge", "OPENAI_API_KEY": "sk-openai",
               "AWS_SECRET_ACCESS_KEY": "aws"}
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    sandbox.stop()  # the next read starts a server with this environment
    try:
        seen = dict(sandbox.run(T.environment, [*secrets, "PATH", "LC_ALL", *sandbox.SERVER_ENV], source="p"))
    finally:
        sandbox.stop()
    assert {name: seen[name] for name in secrets} == dict.fromkeys(secrets, "<unset>")
    assert seen["PATH"] == os.environ["PATH"] and seen["LC_ALL"] == "C.UTF-8"
    assert all(seen[name] == value for name, value in sandbox.SERVER_ENV.items())


def test_the_child_works_in_the_callers_folder_and_is_not_its_child(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    [(folder, parent)] = sandbox.run(T.where_am_i, [], source="p")
    assert folder == str(tmp_path) and int(parent) != os.getpid()  # forked by the server, not by this process
    import torch  # noqa: F401 (the caller may hold torch: the server, a small interpreter of its own, never does)

    assert sandbox.run(T.loaded, ["torch"], source="p") == [("False",)]
    assert sandbox.run(T.loaded, ["pyarrow.parquet"], source="p") == [("True",)]  # imported once, before the fork
    (tmp_path / "p.csv").write_text("id,prediction\nS1,a\n")
    assert read_raw_predictions("p.csv").rows == [("S1", "a", "line 2")]  # a relative path, as given


def test_a_dead_server_is_started_again_and_reads_run_side_by_side():
    sandbox.run(T.echo, ["a"], source="p")
    old = sandbox._current.process
    old.send_signal(signal.SIGKILL)
    old.wait(timeout=30)
    assert sandbox.run(T.echo, ["b"], source="p") == [("b",)]
    assert sandbox._current.process.pid != old.pid
    answers: dict[int, list] = {}

    def read(i: int) -> None:
        answers[i] = sandbox.run(T.echo, [str(i)], source="p")

    threads = [threading.Thread(target=read, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert {i: rows[0] for i, rows in answers.items()} == {i: (str(i),) for i in range(8)}


# ---- the attack through the Space and the fake Hub ------------------------------------------

BOB, BOT = "hf_bob", "hf_bot"


@pytest.fixture(scope="module")
def space(tmp_path_factory):
    """The leaderboard Space in its own process, as on the Hub (HF_TOKEN the organisers' bot's),
    on the fake Hub of tests/support/fakehub.py; yields (its address, its process id)."""
    from support.fakehub import Account
    from support.hubhelpers import online_fake_hub, space_process

    with online_fake_hub({BOB: Account("bob"), BOT: Account("rexrank-bot", ("rexrank",))}) as (hub, _):
        with space_process(hub.url, BOT, tmp_path_factory.mktemp("space")) as (url, _log):
            yield url, serving_process(url)


def serving_process(url: str) -> int:
    """The id of the `rexrank leaderboard --port PORT` process serving `url`."""
    from urllib.parse import urlparse

    wanted = ["leaderboard", "--port", str(urlparse(url).port)]
    for entry in Path("/proc").iterdir():
        try:
            args = (entry / "cmdline").read_bytes().decode().split("\0")
        except (OSError, ValueError):
            continue
        if any(args[i:i + 3] == wanted for i in range(len(args))):
            return int(entry.name)
    raise AssertionError(f"no process serves {url}")


def peak_growth_mib(pid: int, action) -> float:
    """How far the process's peak resident memory rises above where it stands while `action` runs."""
    def status(key: str) -> float:
        text = Path(f"/proc/{pid}/status").read_text()
        return next(int(line.split()[1]) for line in text.splitlines() if line.startswith(key + ":")) / 1024

    Path(f"/proc/{pid}/clear_refs").write_text("5")  # its peak starts again from what it holds now
    start = status("VmHWM")
    action()
    return status("VmHWM") - start


def test_the_bomb_filed_through_the_space_is_refused_and_the_space_does_not_grow(space, tmp_path):
    """Before: the Space read the bomb itself and grew by ~500 MiB for each filing, upload or
    hf:// alike; a refusal costs the filer nothing (no quota)."""
    import rexrank
    from huggingface_hub import HfApi
    from support.requests import example_rows, write_jsonl

    url, pid = space

    def file(predictions: str, model_name: str) -> dict:
        return rexrank.submit(leaderboard=url, predictions=predictions, dataset="example", track="findings",
                              model_name=model_name, token=BOB)

    ordinary = peak_growth_mib(pid, lambda: file(str(write_jsonl(tmp_path / "p.jsonl", example_rows())), "Ordinary"))
    bomb = footer_bomb(tmp_path / "bomb.parquet")
    api = HfApi(endpoint=os.environ["HF_ENDPOINT"], token=BOB)
    api.create_repo("bob/bomb", repo_type="dataset", private=True)
    api.upload_file(path_or_fileobj=str(bomb), path_in_repo="predictions.parquet", repo_id="bob/bomb",
                    repo_type="dataset")
    for predictions, named in ((str(bomb), "bomb.parquet"), ("hf://bob/bomb", "hf://bob/bomb@")):
        refused: list[str] = []

        def attack() -> None:
            with pytest.raises(SubmissionError) as caught:
                file(predictions, "Bomb")
            refused.append(str(caught.value))

        grown = peak_growth_mib(pid, attack)
        assert grown <= ordinary + 16, (predictions, grown, ordinary)
        assert named in refused[0] and ("its 'id' and 'prediction' columns hold more than 20.0 MiB once decompressed "
                                        "(counted as they are read, after 1,344 rows); the limit is 20.0 MiB "
                                        "(MAX_TABLE_BYTES)") in refused[0], refused
