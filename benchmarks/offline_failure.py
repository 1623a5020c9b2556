"""How fast every model metric fails when its weights are not cached and the Hub cannot be
used, and every LLM metric when its endpoint does not answer: goal <= 3 s per metric, with
advice in the command line's terms (`--metric-option ...`).

Each case runs `rexrank score --dataset example --metrics M --out F` in a fresh process with
an empty Hugging Face cache, and reads the metric's own failure time from F (the time from
the metric's start to its failure; the process's start-up and the test set's loading are
shown apart as "wall").

Modes:
  offline     HF_HUB_OFFLINE=1
  no-network  HF_HUB_OFFLINE unset; the Hub's name does not resolve (as on the development machine)
  hung        HF_HUB_OFFLINE unset; HF_ENDPOINT is a local server that accepts connections and never
              answers (the development machine's network answers every address, so a packet-dropping
              address cannot be had; a silent server exercises the same timeout)
LLM endpoints: a closed port on 127.0.0.1 (refused) and the same silent server.

The same failures met from Python (`get_metric(M).score(...)`) are timed too, and their
messages checked for Python keyword terms.

Run from this folder: python offline_failure.py [--modes offline,no-network,hung]
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PREDICTIONS = ROOT / "src" / "rexrank" / "data" / "example_predictions.json"
MODEL_METRICS = ("bertscore", "sembscore", "radgraph", "radcliq", "ratescore", "green", "crimson")
GOAL_S = 3.0


def silent_server() -> str:
    """http://127.0.0.1:PORT that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held = []

    def accept_forever():
        while True:
            conn, _ = listener.accept()
            held.append(conn)  # kept open, never read or answered

    threading.Thread(target=accept_forever, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}"


def run_case(metric: str, env_extra: dict, extra_args: list[str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="rexrank-offline-") as tmp:
        env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_ENDPOINT")}
        env.update(HF_HOME=str(Path(tmp) / "hf"), REXRANK_CACHE=str(Path(tmp) / "rexrank"), HF_HUB_DISABLE_TELEMETRY="1",
                   **env_extra)
        out = Path(tmp) / "results.json"
        cmd = [sys.executable, "-m", "rexrank.cli.main", "score", "--dataset", "example", "--predictions", str(PREDICTIONS),
               "--metrics", metric, "--out", str(out), "--no-progress", *extra_args]
        started = time.monotonic()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        wall = time.monotonic() - started
        results = json.loads(out.read_text()) if out.exists() else {}
    failure = results.get("failed", {}).get(metric, {})
    return {
        "metric": metric,
        "exit": proc.returncode,
        "wall_s": wall,
        "metric_s": failure.get("seconds"),
        "cli_terms": "--metric-option" in failure.get("advice", "") or "--llm-base-url" in failure.get("advice", ""),
        "reason": failure.get("reason", proc.stderr.strip().splitlines()[-1:] or ""),
    }


PY_CASE = """
import json, sys, time
from rexrank.metrics.registry import get_metric
t0 = time.monotonic()
try:
    get_metric(sys.argv[1], progress=False, **json.loads(sys.argv[2])).score(["No effusion."], ["No effusion."])
    message = ""
except Exception as exc:
    message = str(exc)
print(json.dumps({"seconds": time.monotonic() - t0, "message": message}))
"""


def run_python_case(metric: str, env_extra: dict, options: dict) -> dict:
    """The same failure met from Python (get_metric(...).score): time inside the process."""
    with tempfile.TemporaryDirectory(prefix="rexrank-offline-") as tmp:
        env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_ENDPOINT")}
        env.update(HF_HOME=str(Path(tmp) / "hf"), REXRANK_CACHE=str(Path(tmp) / "rexrank"), HF_HUB_DISABLE_TELEMETRY="1",
                   **env_extra)
        proc = subprocess.run([sys.executable, "-c", PY_CASE, metric, json.dumps(options)], env=env, capture_output=True,
                              text=True, timeout=600)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    message = out["message"]
    keywords = "--metric-option" not in message and any(k in message for k in ('="', '_options={"'))
    return {"metric": metric, "metric_s": out["seconds"], "python_terms": keywords, "reason": message}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--modes", default="offline,no-network,hung")
    args = parser.parse_args()
    silent = silent_server()
    modes = {
        "offline": {"HF_HUB_OFFLINE": "1"},
        "no-network": {},
        "hung": {"HF_ENDPOINT": silent},
    }
    cases = []
    for mode in args.modes.split(","):
        for metric in MODEL_METRICS:
            cases.append((mode, metric, modes[mode], []))
    for label, url in (("endpoint refused", "http://127.0.0.1:9/v1"), ("endpoint hung", f"{silent}/v1")):
        for metric in ("green", "crimson", "fineradscore", "spec_cxr"):
            cases.append((label, metric, {"HF_HUB_OFFLINE": "1"}, ["--llm-base-url", url, "--llm-model", "served"]))
    print(f"{'mode':<20}{'metric':<14}{'metric s':>9}{'wall s':>8}  exit  CLI terms  reason")
    worst = 0.0
    for mode, metric, env, extra in cases:
        r = run_case(metric, env, extra)
        worst = max(worst, r["metric_s"] or float("inf"))
        shown = "-" if r["metric_s"] is None else f"{r['metric_s']:.2f}"
        print(f"{mode:<20}{metric:<14}{shown:>9}{r['wall_s']:>8.2f}  {r['exit']:>4}  {str(r['cli_terms']):<9}  {str(r['reason'])[:90]}",
              flush=True)
    print("\nfrom Python: get_metric(M).score(...) in a fresh process, time of that call")
    print(f"{'mode':<20}{'metric':<14}{'metric s':>9}  Python terms  reason")
    py_cases = [(mode, metric, modes[mode], {}) for mode in args.modes.split(",") for metric in MODEL_METRICS]
    py_cases += [("endpoint refused", m, {"HF_HUB_OFFLINE": "1"}, {"base_url": "http://127.0.0.1:9/v1", "model": "served"})
                 for m in ("green", "crimson", "fineradscore", "spec_cxr")]
    for mode, metric, env, options in py_cases:
        r = run_python_case(metric, env, options)
        worst = max(worst, r["metric_s"])
        print(f"{mode:<20}{metric:<14}{r['metric_s']:>9.2f}  {str(r['python_terms']):<12}  {r['reason'][:90]}", flush=True)
    print(f"slowest metric failure: {worst:.2f} s (goal <= {GOAL_S:.0f} s): {'met' if worst <= GOAL_S else 'NOT met'}")


if __name__ == "__main__":
    main()
