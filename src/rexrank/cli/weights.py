"""`rexrank weights status|download [METRIC...]`: the checkpoints each metric needs, what is
in the local cache, and fetching them at their pinned revisions."""
from __future__ import annotations

import argparse

from rexrank.catalogue import WEIGHTS_OR_ENDPOINT
from rexrank.cli.flags import add_progress_flag


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "weights",
        help="show or fetch the model weights the metrics need",
        description="Every checkpoint a metric loads, at its pinned revision: whether it is in the local Hugging Face "
        "cache with the official bytes, its size and licence, and the --metric-option that points at a local copy.",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    status = actions.add_parser("status", help="what is cached (no network)", description="What is in the local cache (no network).")
    status.add_argument("metrics", nargs="*", metavar="METRIC", help="metrics to show (default: all)")
    status.add_argument("--verify", action="store_true", help="re-hash the cached files instead of trusting the cache's names (slow for big models)")
    add_progress_flag(status, default=True)
    status.set_defaults(run=run_status)
    download = actions.add_parser(
        "download", help="fetch the weights at their pinned revisions and check their hashes",
        description="Fetch every checkpoint the metrics need into the Hugging Face cache at its pinned revision, then "
        "check each by its bytes (a cached copy with wrong bytes is fetched again).",
    )
    download.add_argument("metrics", nargs="*", metavar="METRIC",
                          help="metrics to fetch for (default: all, GREEN's 7B model included)")
    download.add_argument("--radgraph-xl", action="store_true",
                          help="also RadGraph-XL (radgraph model_type=radgraph-xl) and its encoder, as the `weights` tests use")
    download.set_defaults(run=run_download)


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return ""  # unreachable


def _check_names(names: list[str]) -> list[str]:
    from rexrank.metrics.registry import parse_metric_list

    return parse_metric_list(names) if names else []


def _served(metric: str) -> bool:
    """Whether the environment sends `metric` to an endpoint instead of its local weights."""
    from rexrank.llm.settings import LLMSettings

    return metric in WEIGHTS_OR_ENDPOINT and LLMSettings().chosen_backend("transformers") == "openai"


def format_status(statuses) -> str:
    """Per metric: one block per checkpoint (state, name, size, licence, how to point at a local copy)."""
    from rexrank.models.weights import CACHED, UNKNOWN

    by_metric: dict[str, list] = {}
    for s in statuses:
        by_metric.setdefault(s.metric, []).append(s)
    lines = []
    for metric in by_metric:
        items = by_metric[metric]
        ready = all(s.state == CACHED for s in items)
        if not ready and _served(metric):
            lines.append(f"{metric}: ready (judged by the LLM endpoint REXRANK_LLM_BASE_URL names; "
                         "for the local judge, its weights:)")
        elif not ready and metric in WEIGHTS_OR_ENDPOINT:
            lines.append(f"{metric}: NOT ready (no local weights and no LLM endpoint: fetch them, or set "
                         "REXRANK_LLM_BASE_URL / pass --llm-base-url to rexrank score)")
        else:
            lines.append(f"{metric}: {'ready' if ready else 'NOT ready'}")
        for s in items:
            lines.append(f"  {s.state:<10} {s.need.label()}  [{s.need.role}]")
            if s.state == UNKNOWN:
                continue
            info = [f"size {_size(s.size)}"]
            if s.need.checkpoint is not None:
                info.append(f"licence: {s.need.checkpoint.licence or 'see the model card'}")
            if s.detail:
                info.append(s.detail)
            lines.append("             " + "; ".join(info))
            option = s.local_option(terms='cli')  # '' where no option points at a copy (NLTK data)
            if s.state == CACHED:
                if option:
                    lines.append(f"             local copy: {option}")
            else:
                lines.append(f"             or fetch elsewhere: {s.download_command(terms='cli')}")
                if option:
                    lines.append(f"             then: {option}")
    return "\n".join(lines)


def llm_endpoint_configured() -> bool:
    """Whether an LLM endpoint is set in the environment (the CLI's --llm-base-url is per command)."""
    import os

    return bool(os.environ.get("REXRANK_LLM_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
                or os.environ.get("REXRANK_LLM_API_KEY") or os.environ.get("OPENAI_API_KEY"))


def _no_weights_lines(names: list[str]) -> tuple[list[str], list[str]]:
    """Lines for the metrics that load no checkpoint, and those of them not ready: an
    endpoint-judged metric is ready only where an LLM endpoint is configured."""
    from rexrank.metrics.registry import available_metrics
    from rexrank.models.weights import LLM_ENDPOINT_METRICS, default_needs

    out, not_ready = [], []
    for metric in names or available_metrics():
        if default_needs(metric):
            continue
        if metric not in LLM_ENDPOINT_METRICS:
            out.append(f"{metric}: ready (needs no model)")
        elif llm_endpoint_configured():
            out.append(f"{metric}: ready (judged by the LLM endpoint in REXRANK_LLM_BASE_URL / OPENAI_BASE_URL)")
        else:
            not_ready.append(metric)
            out.append(f"{metric}: NOT ready (judged by an LLM endpoint, and none is configured: set "
                       "REXRANK_LLM_BASE_URL, or pass --llm-base-url to rexrank score)")
    return out, not_ready


def _missing(statuses) -> list[str]:
    from rexrank.models.weights import ready

    return [m for m, ok in ready(statuses).items() if not ok and not _served(m)]


def _summary(statuses) -> str:
    from rexrank.models.weights import ready

    missing = _missing(statuses)
    served = [m for m, ok in ready(statuses).items() if not ok and _served(m)]
    if not missing:
        if served:
            return f"every listed metric can run here ({', '.join(served)} through the LLM endpoint, without local weights)"
        return "every listed metric that loads weights has them"
    return f"{len(missing)} metric(s) lack weights: {', '.join(missing)}; fetch them with: rexrank weights download {' '.join(missing)}"


def run_status(args: argparse.Namespace) -> int:
    """Exit 0 only when every listed metric can run here (scripts check readiness with it)."""
    from rexrank.models.weights import status

    names = _check_names(args.metrics)
    with _bar(args.progress) as bar:
        statuses = status(names or None, verify=args.verify, on_start=bar.start)
    lines, no_endpoint = _no_weights_lines(names)
    for line in lines:
        print(line)
    if statuses:
        print(format_status(statuses))
        print(_summary(statuses))
    if no_endpoint:
        print(f"{len(no_endpoint)} metric(s) need an LLM endpoint: {', '.join(no_endpoint)}")
    return 0 if not (_missing(statuses) or no_endpoint) else 1


class _bar:
    """A progress bar over the checkpoints `weights status` checks (on stderr; the listing
    follows on stdout): reading a checkpoint's files, or hashing them (--verify), takes seconds."""

    def __init__(self, shown: bool):
        self.shown, self.tqdm = shown, None

    def start(self, pairs):
        from tqdm.auto import tqdm

        self.tqdm = tqdm(total=len(pairs), desc="checking weights", unit="checkpoint", disable=not self.shown)
        return lambda done: (self.tqdm.set_postfix_str(done.metric, refresh=False), self.tqdm.update(1))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.tqdm is not None:
            self.tqdm.close()


def run_download(args: argparse.Namespace) -> int:
    from rexrank.models.weights import CACHED, download

    names = _check_names(args.metrics)
    statuses = download(names or None, radgraph_xl=args.radgraph_xl,
                        on_done=lambda s: print(f"{s.metric}: {s.need.label()}: {s.state}", flush=True))
    print(format_status(statuses))
    print(_summary(statuses))
    return 0 if all(s.state == CACHED for s in statuses) else 1
