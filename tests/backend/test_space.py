"""The backend Space: worker thread + Gradio view, launched headless on 127.0.0.1."""
from __future__ import annotations

import importlib.util
import logging
import time
from pathlib import Path

from rexrank.store import FINISHED, open_store
from support.requests import submit

APP = Path(__file__).resolve().parents[2] / "spaces" / "app.py"


def load_app():
    spec = importlib.util.spec_from_file_location("backend_space_app", APP)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_space_scores_in_background_and_shows_queue_and_log(tmp_path, monkeypatch):
    from gradio_client import Client

    app = load_app()
    store = open_store(tmp_path / "s")
    req = submit(store)
    monkeypatch.setenv("REXRANK_METRICS", "bleu2")
    handler = app.RingHandler()
    logging.getLogger("rexrank.backend").addHandler(handler)
    logging.getLogger("rexrank.backend").setLevel(logging.INFO)
    worker = app.make_worker(store)
    stop = app.start(worker, poll=0.2)
    demo = app.build(worker, handler)
    try:
        deadline = time.time() + 60
        while store.get_request(req["id"])["status"] != FINISHED:
            assert time.time() < deadline, "the background worker did not finish the request"
            time.sleep(0.1)
        _, url, _ = demo.launch(server_name="127.0.0.1", server_port=None, prevent_thread_lock=True, quiet=True)
        table, logs = Client(url, verbose=False).predict(api_name="/refresh")
        assert table["data"][0][:2] == [req["id"], FINISHED]
        assert f"{req['id']} FINISHED" in logs
    finally:
        stop.set()
        demo.close()
        logging.getLogger("rexrank.backend").removeHandler(handler)
