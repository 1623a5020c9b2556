"""Paid LLM answers survive a crash (issue 13): each is cached as it arrives, so a run
killed midway re-sends only what was in flight (the cache used to be written after the
whole batch: a kill after 12 answers re-sent all 12)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from support.llm_fake_server import FakeOpenAIServer, Reply, chat_body

N_REQUESTS = 30

CHILD = """
import sys
from rexrank.llm import LLMRequest, LLMRunner, LLMSettings, build_backend
base_url, cache_dir, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3])
settings = LLMSettings(backend="openai", model="judge", base_url=base_url, api_key="x", cache_dir=cache_dir,
                       max_concurrency=concurrency, max_retries=0).resolved(default_backend="openai", default_model="judge")
runner = LLMRunner(build_backend(settings), settings, progress=False)
runner.run([LLMRequest.chat([{"role": "user", "content": f"study {i}"}], temperature=0.0) for i in range(int(sys.argv[4]))])
"""


def runner_for(base_url: str, cache_dir: Path, concurrency: int):
    from rexrank.llm import LLMRunner, LLMSettings, build_backend

    settings = LLMSettings(backend="openai", model="judge", base_url=base_url, api_key="x", cache_dir=str(cache_dir),
                           max_concurrency=concurrency, max_retries=0).resolved(default_backend="openai", default_model="judge")
    return LLMRunner(build_backend(settings), settings, progress=False)


# (concurrency, kill when this call arrives). Sequential: the 13th call arrives, 12 answers
# were received. Concurrent: the first call is slow, the others are answered meanwhile
# (answers were cached in submission order, so none was kept before the slow one came back).
@pytest.mark.parametrize("concurrency, kill_at", [(1, 13), (4, 20)])
def test_a_killed_run_resends_only_what_was_in_flight(tmp_path, concurrency, kill_at):
    from rexrank.llm import LLMRequest

    state = {"calls": 0, "proc": None}
    lock = threading.Lock()
    killed = threading.Event()

    def script(path, body):
        with lock:
            state["calls"] += 1
            if state["calls"] == kill_at and state["proc"] is not None:
                os.kill(state["proc"].pid, signal.SIGKILL)  # mid-run, no clean-up
                killed.set()
        slow = concurrency > 1 and body["messages"][0]["content"] == "study 0" and not killed.is_set()
        return Reply(body=chat_body(f"answer to {body['messages'][0]['content']}"), delay=3.0 if slow else 0.0)

    with FakeOpenAIServer(script) as server:
        state["proc"] = subprocess.Popen(
            [sys.executable, "-c", CHILD, server.base_url, str(tmp_path / "cache"), str(concurrency), str(N_REQUESTS)],
            env=os.environ.copy(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        state["proc"].wait(timeout=120)
        assert killed.is_set() and state["proc"].returncode == -signal.SIGKILL
        before = state["calls"]
        runner = runner_for(server.base_url, tmp_path / "cache", concurrency)
        requests = [LLMRequest.chat([{"role": "user", "content": f"study {i}"}], temperature=0.0) for i in range(N_REQUESTS)]
        answers = runner.run(requests)
        resent = state["calls"] - before
    assert [a.text for a in answers] == [f"answer to study {i}" for i in range(N_REQUESTS)]
    received = kill_at - 1
    if concurrency == 1:
        assert resent == N_REQUESTS - received  # only the one in flight, and those never sent
    else:  # answers whose replies were still on the wire count as in flight too
        assert N_REQUESTS - received <= resent <= N_REQUESTS - received + concurrency
    assert runner.usage.cache_hits == N_REQUESTS - resent
