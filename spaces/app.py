"""ReXrank backend Space: runs the scoring worker in the background and shows the queue
and the worker's log.

Configuration (Space secrets / variables):
  HF_TOKEN               secret; write access to ORG/requests and ORG/results
  REXRANK_STORE          hf://ORG (or a folder, for local runs)
  REXRANK_DATA_DIR       local folder with the test sets' JSON (one sub-folder per test set)
  REXRANK_PRIVATE_DATA_REPO  optional private Hub dataset holding that folder (e.g. the
                         ReXGradient references); downloaded at start into REXRANK_DATA_DIR
  REXRANK_METRICS        comma-separated metrics (default: the store's metric set, ReXrank's)
  REXRANK_METRIC_OPTIONS JSON {metric: {option: value}}, e.g. LLM endpoint settings
  OPENAI_BASE_URL / OPENAI_API_KEY  LLM endpoint for the LLM-judged metrics (secret)
  REXRANK_POLL_SECONDS   seconds between polls of an empty queue (default 60)
  REXRANK_LEASE_SECONDS  request lease, renewed while scoring (default 600)
  REXRANK_MIN_COVERAGE   percent of studies each metric must score to be published (default 99)
  REXRANK_QUOTA          N/DAYS submissions per submitter, test set and track, enforced here (default 1/7)

With "dispatch" settings in the store's config.json (e.g. {"mode": "hf-jobs", "flavor":
"a10g-large", "max_jobs": 8, "gpu_hours_ceiling": 20}) the worker runs as a dispatcher: each
request is split into shards scored by Hugging Face Jobs (rexrank.backend.dispatch).
"""
from __future__ import annotations

import collections
import json
import logging
import os
import threading

import gradio as gr

from rexrank.models.huge_pages import prefer_huge_pages

prefer_huge_pages()  # before the worker's models create a tensor

LOG_LINES = 500


class RingHandler(logging.Handler):
    """Keeps the last log lines for the view (the Space has no other log reader)."""

    def __init__(self, size: int = LOG_LINES):
        super().__init__()
        self.lines: collections.deque[str] = collections.deque(maxlen=size)
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        from rexrank.store.names import display

        self.lines.append(display(self.format(record), keep_newlines=True))


def fetch_private_data(data_dir: str | None) -> str | None:
    repo = os.environ.get("REXRANK_PRIVATE_DATA_REPO")
    if not repo:
        return data_dir
    from huggingface_hub import snapshot_download

    target = data_dir or "/tmp/rexrank-private-data"
    snapshot_download(repo, repo_type="dataset", local_dir=target, token=os.environ.get("HF_TOKEN"))
    return target


def make_worker(store=None):
    from rexrank.backend.worker import Worker, min_coverage_from
    from rexrank.store import open_store

    options = json.loads(os.environ.get("REXRANK_METRIC_OPTIONS") or "{}")
    return Worker(
        store or open_store(os.environ.get("REXRANK_STORE")),
        data_dir=fetch_private_data(os.environ.get("REXRANK_DATA_DIR")),
        metrics=os.environ.get("REXRANK_METRICS") or None,
        metric_options=options,
        lease_seconds=float(os.environ.get("REXRANK_LEASE_SECONDS", "600")),
        min_coverage=min_coverage_from(None),
    )


def queue_table(store) -> list[list[str]]:
    from rexrank.store.names import display

    rows = []
    for r in store.queue_view():  # open requests and the latest settled ones, newest first
        rows.append([display(c) for c in (r["id"], r["status"], r["model_name"], f"{r['test_set']}/{r['track']}",
                                          r["submitted_time"], r.get("worker") or "", r.get("error") or "")])
    for problem in store.quarantined("requests"):  # unreadable queue files: named, never blocking
        rows.append(["", "UNREADABLE", "", "", "", "", display(problem)])
    return rows


def build(worker, handler: RingHandler) -> gr.Blocks:
    headers = ["id", "status", "model", "test set/track", "submitted", "worker", "error"]
    with gr.Blocks(title="ReXrank backend") as demo:
        gr.Markdown(f"# ReXrank backend\nWorker `{worker.worker_id}` on `{worker.store.name}`, metrics: "
                    f"{', '.join(worker.metrics)}")
        queue = gr.Dataframe(headers=headers, value=lambda: queue_table(worker.store), label="Queue", interactive=False)
        logs = gr.Textbox(label="Worker log", lines=20, max_lines=20, value=lambda: "\n".join(handler.lines))
        refresh = gr.Button("Refresh")
        timer = gr.Timer(10)

        def update():
            return queue_table(worker.store), "\n".join(handler.lines)

        refresh.click(update, outputs=[queue, logs], api_name="refresh")
        timer.tick(update, outputs=[queue, logs])
    return demo


def start(worker, poll: float) -> threading.Event:
    stop = threading.Event()

    def work() -> None:
        from rexrank.backend.dispatch import dispatcher_for

        try:
            dispatcher = dispatcher_for(worker)  # the store's config.json may ask for Jobs
            if dispatcher is not None:
                dispatcher.run(stop=stop)
            else:
                worker.run(poll=poll, stop=stop)
        except Exception as exc:  # e.g. a test set it cannot load: the request stays PENDING
            logging.getLogger("rexrank.backend").error("the worker stopped: %s", exc)

    threading.Thread(target=work, daemon=True, name="rexrank-worker").start()
    return stop


def main() -> None:
    handler = RingHandler()
    logging.basicConfig(level=logging.INFO, handlers=[logging.StreamHandler(), handler])
    worker = make_worker()
    start(worker, float(os.environ.get("REXRANK_POLL_SECONDS", "60")))
    build(worker, handler).launch()


if __name__ == "__main__":
    main()
