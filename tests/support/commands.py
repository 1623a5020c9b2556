"""The command line as the tests run it: in a child process, or in this one with its one error line."""
from __future__ import annotations

import os
import subprocess
import sys

from rexrank.data import data_path
from rexrank.cli.main import main


EXAMPLE_PREDICTIONS = str(data_path("example_predictions.json"))


def rexrank(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "rexrank.cli.main", *args],
        capture_output=True, text=True, cwd=cwd, env=os.environ.copy(), timeout=300,
    )


def one_error_line(capsys, command: str, path, tmp_path) -> str:
    if command == "score":
        args = ["score", "--dataset", "example", "--predictions", str(path), "--no-progress"]
    else:
        args = ["submit", "--store", str(tmp_path / "s"), "--dataset", "example", "--predictions", str(path),
                "--model-name", "m", "--submitter", "alice"]
    code = main(args)
    _, err = capsys.readouterr()
    assert code == 1 and "Traceback" not in err
    [line] = [x for x in err.splitlines() if x.startswith("rexrank ")]
    assert line.startswith(f"rexrank {command}: error: ")
    return line
