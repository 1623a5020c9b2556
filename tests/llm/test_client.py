"""The LLM client layer against a real OpenAI-compatible HTTP server on 127.0.0.1."""
from __future__ import annotations

import threading

import pytest

from support.llm_fake_server import FakeOpenAIServer, Reply, chat_body, completion_body
from rexrank.errors import MetricError
from rexrank.llm import LLMRequest, LLMRunner, LLMSettings, build_backend


def make_runner(server, tmp_path, **kw):
    opts = dict(base_url=server.base_url, model="fake-model", backoff=0.01, cache_dir=str(tmp_path / "cache"))
    opts.update(kw)
    settings = LLMSettings(**opts).resolved(default_backend="openai")
    return LLMRunner(build_backend(settings), settings, progress=False)


def echo(path, body):
    if path.endswith("/chat/completions"):
        return Reply(body=chat_body("echo: " + body["messages"][-1]["content"]))
    return Reply(body=completion_body("echo: " + body["prompt"]))


def test_chat_and_completion_round_trip_with_parameters(tmp_path):
    with FakeOpenAIServer(echo) as server:
        runner = make_runner(server, tmp_path)
        out = runner.run(
            [LLMRequest.chat([{"role": "user", "content": "hi"}], temperature=0.0, seed=0), LLMRequest.completion("abc", temperature=0.0, max_tokens=5)]
        )
        assert [r.text for r in out] == ["echo: hi", "echo: abc"]
        (p1, b1), (p2, b2) = sorted(server.requests, key=lambda x: x[0])
        assert p1 == "/v1/chat/completions" and b1["temperature"] == 0.0 and b1["seed"] == 0 and b1["model"] == "fake-model"
        assert p2 == "/v1/completions" and b2["max_tokens"] == 5 and b2["prompt"] == "abc"
        assert runner.usage.prompt_tokens == 11 + 13 and runner.usage.completion_tokens == 7 + 5


def test_cache_makes_a_rerun_issue_zero_requests(tmp_path):
    with FakeOpenAIServer(echo) as server:
        requests = [LLMRequest.chat([{"role": "user", "content": f"q{i}"}], temperature=0.0) for i in range(5)]
        first = make_runner(server, tmp_path).run(requests)
        assert server.count() == 5
        second_runner = make_runner(server, tmp_path)
        second = second_runner.run(requests)
        assert server.count() == 5  # nothing new was sent
        assert [r.text for r in second] == [r.text for r in first]
        assert all(r.cached for r in second)
        assert second_runner.usage.requests == 0 and second_runner.usage.cache_hits == 5
        assert second_runner.usage.prompt_tokens == 0 and second_runner.usage.cached_prompt_tokens == 55
        # any change in parameters or model is a different key
        make_runner(server, tmp_path).run([LLMRequest.chat([{"role": "user", "content": "q0"}], temperature=0.5)])
        make_runner(server, tmp_path, model="other").run(requests[:1])
        assert server.count() == 7


def test_identical_requests_are_sent_once(tmp_path):
    with FakeOpenAIServer(echo) as server:
        req = LLMRequest.completion("same")
        out = make_runner(server, tmp_path, cache=False).run([req, req, req])
        assert server.count() == 1 and [r.text for r in out] == ["echo: same"] * 3


def test_429_then_success_is_retried_and_counted(tmp_path):
    seen = {"n": 0}

    def script(path, body):
        seen["n"] += 1
        if seen["n"] == 1:
            return Reply(429, {"error": {"message": "slow down"}}, headers={"retry-after": "0.01"})
        if seen["n"] == 2:
            return Reply(503, {"error": {"message": "overloaded"}})
        return Reply(body=completion_body("fine"))

    with FakeOpenAIServer(script) as server:
        runner = make_runner(server, tmp_path)
        (resp,) = runner.run([LLMRequest.completion("x")])
        assert resp.ok and resp.text == "fine" and resp.retries == 2
        assert server.count() == 3 and runner.usage.retries == 2 and runner.usage.failed == 0


def test_exhausted_retries_hard_failures_and_garbage_are_reported_not_raised(tmp_path):
    def script(path, body):
        prompt = body["prompt"]
        if prompt == "always500":
            return Reply(500, {"error": {"message": "boom"}})
        if prompt == "bad-request":
            return Reply(400, {"error": {"message": "model does not exist"}})
        if prompt == "garbage":
            return Reply(200, "this is not json {")
        return Reply(body=completion_body("ok"))

    with FakeOpenAIServer(script) as server:
        runner = make_runner(server, tmp_path, max_retries=2)
        out = runner.run([LLMRequest.completion(p) for p in ("always500", "bad-request", "garbage", "fine")])
        assert not out[0].ok and "HTTP 500" in out[0].error and "3 attempts" in out[0].error
        assert not out[1].ok and "HTTP 400" in out[1].error and out[1].retries == 0  # 4xx: no retry
        assert not out[2].ok and "malformed" in out[2].error
        assert out[3].ok
        assert runner.usage.failed == 3
        per_prompt = {}
        for _, body in server.requests:
            per_prompt[body["prompt"]] = per_prompt.get(body["prompt"], 0) + 1
        assert per_prompt == {"always500": 3, "bad-request": 1, "garbage": 3, "fine": 1}
        # failures are not cached: a rerun tries them again
        make_runner(server, tmp_path, max_retries=0).run([LLMRequest.completion("fine"), LLMRequest.completion("always500")])
        assert per_prompt["fine"] == 1 and server.count() == 9


def test_timeout_is_retried_then_reported(tmp_path):
    def script(path, body):
        return Reply(body=completion_body("late"), delay=1.0)

    with FakeOpenAIServer(script) as server:
        runner = make_runner(server, tmp_path, timeout=0.2, max_retries=1)
        (resp,) = runner.run([LLMRequest.completion("x")])
        assert not resp.ok and "timeout" in resp.error and resp.retries == 1
        assert server.count() == 2


def test_concurrency_limit_is_respected_and_order_kept(tmp_path):
    active = {"now": 0, "peak": 0}
    lock = threading.Lock()

    def script(path, body):
        with lock:
            active["now"] += 1
            active["peak"] = max(active["peak"], active["now"])
        import time

        time.sleep(0.05)
        with lock:
            active["now"] -= 1
        return Reply(body=completion_body(body["prompt"].upper()))

    with FakeOpenAIServer(script) as server:
        runner = make_runner(server, tmp_path, max_concurrency=3, cache=False)
        prompts = [f"p{i}" for i in range(12)]
        out = runner.run([LLMRequest.completion(p) for p in prompts])
        assert [r.text for r in out] == [p.upper() for p in prompts]
        assert 1 < active["peak"] <= 3


def test_cost_accounting(tmp_path):
    with FakeOpenAIServer(echo) as server:
        runner = make_runner(server, tmp_path, price_input_per_mtok=2.0, price_output_per_mtok=8.0)
        runner.run([LLMRequest.completion("a"), LLMRequest.completion("b")])
        usage = runner.usage.to_dict()
        assert usage["cost_usd"] == pytest.approx((26 * 2.0 + 10 * 8.0) / 1e6)
        assert make_runner(server, tmp_path).usage.to_dict()["cost_usd"] is None  # no prices: unknown, not 0


def test_settings_from_environment_and_errors(monkeypatch):
    monkeypatch.setenv("REXRANK_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("REXRANK_LLM_MODEL", "served")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    s = LLMSettings().resolved(default_backend="transformers")
    assert (s.backend, s.model, s.base_url, s.api_key) == ("openai", "served", "http://127.0.0.1:9/v1", "EMPTY")
    assert LLMSettings(model="x", base_url="http://h/v1").resolved(default_backend="openai").model == "x"
    monkeypatch.delenv("REXRANK_LLM_BASE_URL")
    monkeypatch.delenv("REXRANK_LLM_MODEL")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(MetricError, match="no LLM model"):
        LLMSettings().resolved(default_backend="openai")
    with pytest.raises(MetricError, match="API key"):
        LLMSettings(model="gpt-4o").resolved(default_backend="openai")
    with pytest.raises(MetricError, match="unknown LLM backend"):
        LLMSettings(backend="claude", model="m").resolved(default_backend="openai")
    with pytest.raises(MetricError, match="max_concurrency"):
        LLMSettings(max_concurrency=0)
