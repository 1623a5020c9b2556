"""`rexrank analyze`: tables, figures and an HTML report for several systems scored on one
test set (per-study tables from `rexrank score --per-study`)."""
from __future__ import annotations

import argparse
import os

from rexrank.cli.flags import add_data_dir, add_progress_flag


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "analyze",
        help="compare systems: CIs, paired tests, rank intervals, strata, sites, figures",
        description=(
            "Analyse per-study score tables (rexrank score --per-study) of several systems on the same test "
            "set. RUN is PATH (system name = file stem) or NAME=PATH."
        ),
    )
    p.add_argument("runs", nargs="+", metavar="RUN", help="per-study table (.parquet/.csv), optionally NAME=PATH")
    p.add_argument("--out", required=True, help="output folder (tables/, figures/, report.html)")
    p.add_argument("--dataset", help="test set the runs were scored on, for study attributes such as site, is_abnormal "
                   "(default: the one the per-study files name)")
    add_data_dir(p, "; default also: the folder the per-study files were scored with on this machine")
    p.add_argument("--attributes", help="CSV of study attributes: id + one column per attribute (overrides the test set's)")
    p.add_argument("--strata", default="", help="comma-separated attributes to stratify every table by (e.g. sex,race)")
    p.add_argument("--normal-abnormal", action="store_true",
                   help="stratify normal vs abnormal (test set's is_abnormal, else CheXbert 'No Finding' on the reference)")
    p.add_argument("--chexbert-checkpoint", help="local chexbert.pth for deriving normal vs abnormal from the references")
    p.add_argument("--sites", nargs="?", const="site", default=None, metavar="COLUMN",
                   help="per-site ranking and heatmap by this attribute (default column: site)")
    p.add_argument("--top-sites", type=int, default=10, help="number of sites (by study count) in the site table (default 10)")
    p.add_argument("--site-metric", help="per-study column ranked per site (default: radcliq_v1 if present, ...)")
    p.add_argument("--severity-column", default="fineradscore",
                   help="per-study FineRadScore max-severity column for error rates (default fineradscore)")
    p.add_argument("--lower-is-better", default="", help="comma-separated extra per-study columns where lower is better")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap / randomisation resamples (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="seed for all resampling (default 0)")
    p.add_argument("--rexval", metavar="DIR", help="folder with the ReXVal CSV files (PhysioNet rexval-dataset 1.0.0)")
    p.add_argument("--rexval-scores", help="per-pair scores of the ReXVal candidates (id = '<study_number>_<candidate_type>')")
    p.add_argument("--rexval-metrics", help="or: comma-separated rexrank metrics to score the ReXVal pairs with")
    p.add_argument("--name", help="test set name shown in the report (default: the one the per-study files name, or --dataset)")
    add_progress_flag(p, default=True)
    p.set_defaults(run=run)


def _split(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _dataset(given: str | None, told: dict | None) -> str | None:
    """--dataset, else the test set the per-study files name; the two must agree."""
    from rexrank.errors import RexrankError

    named = (told or {}).get("name")
    if given and named and given != named:
        raise RexrankError(f"--dataset {given} but the per-study files were scored on {named}")
    return given or named


def _label(told: dict | None) -> str | None:
    """'IU-Xray (test), findings track' from the files' provenance."""
    if not told or not (told.get("title") or told.get("name")):
        return None
    track = f", {told['track']} track" if told.get("track") else ""
    return f"{told.get('title') or told['name']}{track}"


def scored_with(told: dict | None):
    """The test-set file a run was scored with on this machine (rexrank.testsets.loading.Located):
    the remembered, unchanged file whose track references have the fingerprint the per-study
    files record (None if none has); and the remembered files passed over."""
    from rexrank.errors import TestSetError
    from rexrank.scoring import texts_fingerprint
    from rexrank.testsets.loading import Located, track_studies
    from rexrank.testsets.locations import usable

    passed_over: list[Located] = []
    if not told or not told.get("name") or not told.get("track") or not told.get("references_sha256"):
        return None, passed_over
    for entry in usable(told["name"]):
        located = Located(entry.path, "remembered", entry.when)
        try:
            studies = track_studies(told["name"], told["track"], data_dir=located)
        except TestSetError:
            passed_over.append(located)
            continue
        if texts_fingerprint(studies.references) == told["references_sha256"]:
            return located, passed_over
        passed_over.append(located)
    return None, passed_over


def run(args: argparse.Namespace) -> int:
    from rexrank.analysis.io import attributes_from_test_set, load_runs, read_attributes, read_per_study
    from rexrank.analysis.pipeline import analyze
    from rexrank.analysis.report import write_report
    from rexrank.errors import RexrankError, TestSetError
    from rexrank.testsets.loading import DATA_DIR_ENV, locate
    from rexrank.testsets.registry import get_spec

    if args.bootstrap < 0:
        raise RexrankError(f"--bootstrap must be >= 0, got {args.bootstrap}")
    runs = load_runs(args.runs, lower_is_better=_split(args.lower_is_better))
    dataset = _dataset(args.dataset, runs.test_set)
    attrs = references = None
    if dataset:
        data_dir, passed_over = args.data_dir, []
        if data_dir is None and not os.environ.get(DATA_DIR_ENV):
            data_dir, passed_over = scored_with(runs.test_set)
        if passed_over and data_dir is None:  # none has the references the files record: none is used
            print(f"study attributes: {get_spec(dataset).title}: no file remembered on this machine has the "
                  f"references the per-study files were scored with ({len(passed_over)} passed over), so none is "
                  "used; pass --data-dir with the test set they were scored with", flush=True)
        try:
            located = locate(get_spec(dataset), data_dir, remembered=not passed_over)
            print(f"study attributes: {get_spec(dataset).title}, {located.describe()}", flush=True)
            attrs, references = attributes_from_test_set(dataset, data_dir=located)
        except TestSetError as exc:
            if args.dataset:
                raise
            # named by the files, not asked for: the analyses that need attributes say so themselves
            runs.notes.append(f"study attributes of {dataset} (named by the per-study files) were not loaded: {exc}")
    if args.attributes:
        user = read_attributes(args.attributes)
        attrs = user if attrs is None else user.join(attrs.drop(columns=[c for c in user.columns if c in attrs.columns]), how="left")
    rexval_scores = None
    if args.rexval_scores:
        rexval_scores = read_per_study(args.rexval_scores)
    if (args.rexval_scores or args.rexval_metrics) and not args.rexval:
        raise RexrankError("--rexval-scores / --rexval-metrics need --rexval DIR")
    labeller = None
    if args.chexbert_checkpoint:
        from rexrank.analysis.strata import chexbert_no_finding_labeller

        labeller = chexbert_no_finding_labeller(checkpoint_path=args.chexbert_checkpoint)
    analysis = analyze(
        runs,
        attrs=attrs,
        references=references,
        strata=_split(args.strata),
        normal_vs_abnormal=args.normal_abnormal,
        labeller=labeller,
        site_column=args.sites,
        top_n_sites=args.top_sites,
        site_metric=args.site_metric,
        severity_column=args.severity_column,
        resamples=args.bootstrap,
        seed=args.seed,
        rexval_dir=args.rexval,
        rexval_scores=rexval_scores,
        rexval_metrics=args.rexval_metrics,
        test_set=args.name or _label(runs.test_set) or dataset,
        progress=args.progress,
    )
    written = write_report(analysis, args.out, progress=args.progress)
    for note in analysis.notes:
        print(f"note: {note}")
    print(f"{len(analysis.tables)} tables, {len(analysis.figures)} figures written to {args.out}")
    print(f"report: {written['report'][-1]}")
    return 0
