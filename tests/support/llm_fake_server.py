"""A real OpenAI-compatible HTTP server on 127.0.0.1 for the LLM tests (no client patching).

`script(path, body)` decides each answer and returns a Reply; every request is recorded.
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable


@dataclass
class Reply:
    status: int = 200
    body: object = None  # dict -> JSON; str -> sent as is (garbage)
    delay: float = 0.0
    headers: dict = field(default_factory=dict)


def chat_body(content: str, prompt_tokens: int = 11, completion_tokens: int = 7) -> dict:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": "fake",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens},
    }


def completion_body(text: str, prompt_tokens: int = 13, completion_tokens: int = 5, finish_reason: str = "stop") -> dict:
    return {
        "id": "cmpl-fake",
        "object": "text_completion",
        "created": 0,
        "model": "fake",
        "choices": [{"index": 0, "text": text, "finish_reason": finish_reason, "logprobs": None}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens},
    }


class FakeOpenAIServer:
    def __init__(self, script: Callable[[str, dict], Reply]):
        self.script = script
        self.requests: list[tuple[str, dict]] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                path = self.path.split("?")[0]
                with outer._lock:
                    outer.requests.append((path, body))
                reply = outer.script(path, body)
                if reply.delay:
                    time.sleep(reply.delay)
                payload = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
                data = payload.encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # client gave up (timeout test)
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def count(self, path_suffix: str = "") -> int:
        with self._lock:
            return sum(1 for p, _ in self.requests if p.endswith(path_suffix))

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
