"""`rexrank score`: score a predictions file, print a table, write JSON (and per-study parquet).

The output files are rewritten after every metric, so a run keeps what it finished; a metric
that fails is reported with its reason and advice, the others still run, and the exit code
is 1 when any failed.
"""
from __future__ import annotations

import argparse
import math
import sys

from rexrank.cli.flags import add_data_dir, add_progress_flag, say_test_set_file


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "score",
        help="score a predictions file on a test set",
        description="Score predictions on a ReXrank test set and track; prints mean ± 95 % CI per metric.",
    )
    p.add_argument("--dataset", required=True, help="test set: iu_xray, mimic_cxr, chexpert_plus, rexgradient, example")
    p.add_argument("--track", default="findings", help="findings (default) or findings_impression")
    p.add_argument("--predictions", required=True, help="ReXrank submission JSON, CSV/JSONL (id + prediction), parquet or datasets folder")
    p.add_argument("--id-column", help="the predictions file's study id column (default: id or study_id)")
    p.add_argument("--prediction-column", help="the predictions file's text column (default: prediction or report; "
                   "in a ReXrank submission JSON: model_prediction)")
    add_data_dir(p)
    p.add_argument("--metrics", default="bleu2", help="comma-separated metric names (default: bleu2)")
    p.add_argument("--out", help="write results JSON here (rewritten as each metric finishes)")
    p.add_argument("--per-study", help="write per-study scores (id + one column per score, with the run's provenance "
                   "as parquet metadata) to this parquet file (rewritten as each metric finishes)")
    p.add_argument("--bootstrap", type=int, default=0, help="also compute a percentile bootstrap CI with this many resamples")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    add_progress_flag(p, default=True)
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
    from rexrank.results_schema import metric_label, repeated_columns

    bootstrap = bool((results.get("statistics") or {}).get("bootstrap"))
    # the key (what --metrics and --per-study name) and the label analyze and the leaderboard show
    header = ("metric", "label", "mean", "± 95% CI", *(("bootstrap 95% CI",) if bootstrap else ()), "n scored / failed")
    rows = [header]
    for summary in results["metrics"].values():
        repeated = repeated_columns(summary["scores"])  # rougeL is rouge's number: one row
        for column, s in summary["scores"].items():
            if column in repeated:
                continue
            ci = s.get("ci95", math.nan)
            n = f"{s['n']} / {s.get('n_missing', 0)}"
            boot = ()
            if bootstrap:
                low, high = s.get("bootstrap_low"), s.get("bootstrap_high")
                boot = ("n/a" if low is None else f"[{low:.4f}, {high:.4f}]",)
            rows.append((column, metric_label(column), f"{s['mean']:.4f}", "n/a" if math.isnan(ci) else f"{ci:.4f}", *boot, n))
        for key, value in summary["corpus"].items():
            if key not in summary["scores"] and key not in repeated_columns({key, *summary["scores"]}):
                rows.append((key, metric_label(key), f"{value:.4f}", "(corpus)", *(("",) if bootstrap else ()), ""))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(r, widths))) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def format_failures(results: dict) -> str:
    lines = []
    for name, failure in results["failed"].items():
        lines.append(f"FAILED {name}: {failure['reason']}")
        if failure.get("advice"):
            lines.append(f"  {failure['advice']}")
    return "\n".join(lines)


def _metric_options(args: argparse.Namespace) -> dict:
    from rexrank.metrics.llm_common import cli_llm_options
    from rexrank.metrics.options import device_options, merge_options, parse_metric_options
    from rexrank.metrics.registry import parse_metric_list

    names = parse_metric_list(args.metrics)
    llm = cli_llm_options(names, base_url=args.llm_base_url, model=args.llm_model, backend=args.llm_backend)
    return merge_options(llm, device_options(names, args.device), parse_metric_options(args.metric_option, names))


def run(args: argparse.Namespace) -> int:
    from rexrank.models.advice import cli_terms
    from rexrank.per_study_file import write_json_atomic
    from rexrank.scoring import score_submission

    def keep(run_, name: str) -> None:
        """Write what is finished after every metric; say at once when one fails."""
        if name in run_.failed:
            failure = run_.failed[name]
            print(f"{name} failed: {failure['reason']} (the other metrics go on)", file=sys.stderr, flush=True)
        if args.out:
            write_json_atomic(args.out, run_.results)
        if args.per_study:
            run_.write_per_study(args.per_study)

    with cli_terms():  # advice in --metric-option / hf download terms
        options = _metric_options(args)  # a mistyped metric is named before anything is read
        say_test_set_file(args.dataset, args.data_dir)
        run_ = score_submission(
            args.dataset,
            args.track,
            args.predictions,
            data_dir=args.data_dir,
            metrics=args.metrics,
            bootstrap=args.bootstrap,
            seed=args.seed,
            progress=args.progress,
            metric_options=options,
            keep_going=True,
            on_update=keep,
            id_column=args.id_column,
            prediction_column=args.prediction_column,
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
    if results["metrics"]:
        print(format_table(results))
    from rexrank.backend.worker import DEFAULT_MIN_COVERAGE as LEADERBOARD_MIN_COVERAGE

    for name, summary in results["metrics"].items():  # what the leaderboard's coverage rule would refuse
        n, scored = summary.get("n_studies") or pred["n"], summary.get("n_scored")
        if scored is not None and n and scored / n < LEADERBOARD_MIN_COVERAGE:
            print(f"warning: {name} scored {scored} of {n} studies ({scored / n:.1%}), {n - scored} failed: below the "
                  f"{LEADERBOARD_MIN_COVERAGE:.0%} the leaderboard requires; its mean covers only the scored studies")
    if args.out:
        print(f"results written to {args.out}")
    if args.per_study:
        print(f"per-study scores written to {args.per_study}")
    for name, exc in run_.errors.items():
        from rexrank.errors import RexrankError

        if not isinstance(exc, RexrankError):  # not a user error: the traceback is for a bug report
            import traceback

            print(f"{name}: unexpected error\n" + "".join(traceback.format_exception(exc)), file=sys.stderr)
    if run_.failed:
        print(format_failures(results), file=sys.stderr)
        done = len(results["metrics"])
        print(f"{len(run_.failed)} of {done + len(run_.failed)} metrics failed; "
              f"{'the others are kept' if done else 'nothing was scored'}", file=sys.stderr)
        return 1
    return 0
