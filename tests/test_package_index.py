"""The `fresh_venv` tests skip with a reason where no package index is reachable
(tests/support/package_index.py), quickly: a closed port stands for an unreachable index."""
from __future__ import annotations

import os
import socket
import time

from support.package_index import no_index_reason


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: connections are refused


def test_an_unreachable_index_is_a_reason_to_skip_said_in_seconds(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL=f"http://127.0.0.1:{closed_port()}/simple",
               PIP_NO_CACHE_DIR="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    start = time.monotonic()
    why = no_index_reason(env)
    assert why is not None and why.startswith("no package index reachable: `pip download setuptools>=77` failed")
    assert time.monotonic() - start < 30
