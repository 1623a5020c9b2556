"""Whether pip can reach a package index (or a warm cache / find-links folder holds what it
needs): the `fresh_venv` tests build and install, so without one they skip with the reason
instead of failing half-way."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

# the build backend `python -m build` installs first (pyproject.toml [build-system]): a small wheel
PROBE_REQUIREMENT = "setuptools>=77"
PROBE_TIMEOUT_S = 5  # per connection; pip tries each configured index once (--retries 0)


def no_index_reason(env: dict | None = None) -> str | None:
    """None when `pip download PROBE_REQUIREMENT` succeeds with pip's configuration, else why not."""
    with tempfile.TemporaryDirectory(prefix="rexrank-pip-probe-") as dest:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
               "--dest", dest, "--timeout", str(PROBE_TIMEOUT_S), "--retries", "0", PROBE_REQUIREMENT]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                                  env=os.environ.copy() if env is None else env)
        except subprocess.TimeoutExpired:
            return f"no package index answered: `pip download {PROBE_REQUIREMENT}` took over 60 s"
    if proc.returncode == 0:
        return None
    last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
    return f"no package index reachable: `pip download {PROBE_REQUIREMENT}` failed ({last})"
