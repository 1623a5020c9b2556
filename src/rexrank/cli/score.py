"""`rexrank score`: score a predictions file, print a table, write JSON (and per-study parquet)."""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "score",
        help="score a predictions file on a test set",
        description="Score predictions on a ReXrank test set and track; prints mean ± 95 %% CI per metric.",
    )
    p.add_argument("--dataset", required=True, help="test set: iu_xray, mimic_cxr, chexpert_plus, rexgradient, example")
    p.add_argument("--track", default="findings", help="findings (default) or findings_impression")
    p.add_argument("--predictions", required=True, help="ReXrank submission JSON, CSV/JSONL (id + prediction), parquet or datasets folder")
    p.add_argument("--data-dir", help="folder (or file) holding the test set JSON; needed for MIMIC-CXR, CheXpert Plus, ReXGradient")
    p.add_argument("--metrics", default="bleu2", help="comma-separated metric names (default: bleu2)")
    p.add_argument("--out", help="write results JSON here")
    p.add_argument("--per-study", help="write per-study scores (id + one column per score) to this parquet file")
    p.add_argument("--bootstrap", type=int, default=0, help="also compute a percentile bootstrap CI with this many resamples")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.add_argument("--device", help="torch device of every model metric: cpu, cuda, cuda:1 (default: cuda when available); fp32 everywhere")
    p.add_argument("--llm-base-url", help="LLM metrics: OpenAI-compatible server URL (default: REXRANK_LLM_BASE_URL)")
    p.add_argument("--llm-model", help="LLM metrics: model name or checkpoint (default: REXRANK_LLM_MODEL)")
    p.add_argument("--llm-backend", choices=["openai", "transformers"], help="LLM metrics: backend (default: per metric)")
    p.add_argument(
        "--metric-option",
        action="append",
        metavar="METRIC.KEY=VALUE",
        help="an option for one metric, repeatable; e.g. sembscore.checkpoint_path=/data/chexbert.pth, bertscore.idf=true",
    )
    p.set_defaults(run=run)


def format_table(results: dict) -> str:
    rows = [("metric", "mean", "± 95% CI", "n")]
    for summary in results["metrics"].values():
        for column, s in summary["scores"].items():
            ci = s.get("ci95", math.nan)
            n = f"{s['n']}" + (f" ({s['n_missing']} failed)" if s.get("n_missing") else "")
            rows.append((column, f"{s['mean']:.4f}", "n/a" if math.isnan(ci) else f"{ci:.4f}", n))
        for key, value in summary["corpus"].items():
            if key not in summary["scores"]:
                rows.append((key, f"{value:.4f}", "(corpus)", ""))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(r, widths))) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _metric_options(args: argparse.Namespace) -> dict:
    from rexrank.metrics.llm_common import cli_llm_options
    from rexrank.metrics.options import device_options, merge_options, parse_metric_options
    from rexrank.metrics.registry import parse_metric_list

    names = parse_metric_list(args.metrics)
    llm = cli_llm_options(names, base_url=args.llm_base_url, model=args.llm_model, backend=args.llm_backend)
    return merge_options(llm, device_options(names, args.device), parse_metric_options(args.metric_option, names))


def run(args: argparse.Namespace) -> int:
    from rexrank.scoring import score_submission

    run_ = score_submission(
        args.dataset,
        args.track,
        args.predictions,
        data_dir=args.data_dir,
        metrics=args.metrics,
        bootstrap=args.bootstrap,
        seed=args.seed,
        progress=not args.no_progress,
        metric_options=_metric_options(args),
    )
    results = run_.results
    ts = results["test_set"]
    pred = results["predictions"]
    print(f"{ts['title']} — {ts['track']} track — {pred['n']} studies ({pred['n_empty']} empty predictions)")
    if pred["n_not_in_track"]:
        print(
            f"note: {pred['n_not_in_track']} predictions are for studies this track does not score "
            f"(e.g. no findings section); they were not scored"
        )
    print(format_table(results))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(results, indent=2, allow_nan=True))
        print(f"results written to {args.out}")
    if args.per_study:
        Path(args.per_study).parent.mkdir(parents=True, exist_ok=True)
        run_.per_study.to_parquet(args.per_study, index=False)
        print(f"per-study scores written to {args.per_study}")
    return 0
