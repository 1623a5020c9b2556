"""ReXrank results on the Hub's model pages: Eval Results files for a model repo and the
benchmark definition (`eval.yaml`) of each published test-set dataset repo.

Format: the Hub's "Evaluation Results" documentation, https://huggingface.co/docs/hub/eval-results
(source huggingface/hub-docs docs/hub/eval-results.md, read 2026-11; the page is marked "work
in progress") and its field list https://github.com/huggingface/hub-docs/blob/main/eval_results.yaml.

- A benchmark dataset has `eval.yaml` at its root: `name`, `description`,
  `evaluation_framework`, `tasks` (each `id`, `config`, `split`). The Hub shows one leaderboard
  per task, so each ReXrank track × leaderboard column is a task (all columns are
  higher-is-better: RadCliQ-v1 and FineRadScore are shown inverted, as on the board).
- A model repo holds `.eval_results/*.yaml`: a list of entries `dataset: {id, task_id}`,
  `value` (required), `date`, `source: {url, name, user}`, `notes` (optional).

Only public test sets have a dataset repo (`rexrank hub deploy --only data`), so only their
results can be exported; the others are named and skipped, never dropped silently.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import yaml

from rexrank.errors import RexrankError
from rexrank.results_schema import DEFAULT_RANK_KEY, LEADERBOARD_COLUMNS
from rexrank.testsets.registry import TEST_SETS, TRACKS, TestSetSpec, public_test_sets

BENCHMARK_FILE = "eval.yaml"
EVAL_RESULTS_DIR = ".eval_results"
FRAMEWORK = "rexrank"  # our own harness: the Hub takes any identifier here
LEADERBOARD_SPACE = "leaderboard"  # rexrank.hub.plan.LEADERBOARD_NAME
TRACK_TITLES = {"findings": "findings section", "findings_impression": "findings + impression"}
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(T[\d:.]+(Z|[+-]\d{2}:?\d{2})?)?")


class ExportError(RexrankError):
    """Results that cannot be written as Eval Results (unknown id, model or test set)."""


def task_id(track: str, column_key: str) -> str:
    return f"{track}_{column_key}"


def data_split(spec: TestSetSpec) -> str:
    """The split name of the test set's dataset repo (datasets calls "valid" "validation")."""
    return "validation" if spec.split == "valid" else spec.split


def ordered_columns():
    """The ranking column first (the one the board ranks by), then the board's order; the
    optional columns (metrics ReXrank does not publish) are not part of the benchmark."""
    return sorted((c for c in LEADERBOARD_COLUMNS if not c.optional), key=lambda c: c.key != DEFAULT_RANK_KEY)


def benchmark_definition(spec: TestSetSpec) -> dict:
    """The `eval.yaml` of a public test set's dataset repo: one task per track and column."""
    return {
        "name": f"ReXrank {spec.title}",
        "description": (
            f"The {spec.title} set of ReXrank, the chest X-ray report generation benchmark "
            "(Zhang et al., 2024, arXiv:2411.15122). A model writes the findings section (track "
            "'findings') or findings and impression (track 'findings_impression') of each study; "
            "each task is one ReXrank metric on one track, scored with rexrank "
            "(`rexrank score --dataset " + spec.name + "`). Higher is better for every task: "
            "RadCliQ-v1 and FineRadScore are reported as 1 / mean, as on the ReXrank leaderboard."
        ),
        "evaluation_framework": FRAMEWORK,
        "tasks": [{"id": task_id(track, c.key), "config": "default", "split": data_split(spec)}
                  for track in TRACKS for c in ordered_columns()],
    }


def benchmark_yaml(spec: TestSetSpec) -> bytes:
    return yaml.safe_dump(benchmark_definition(spec), sort_keys=False, allow_unicode=True, width=100).encode()


def exportable(record: dict) -> str | None:
    """None when `record` can be an Eval Result, else why not."""
    spec = TEST_SETS.get(str(record.get("test_set")))
    if spec is None:
        return f"unknown test set {record.get('test_set')!r}"
    if spec.name not in {s.name for s in public_test_sets()}:
        return (f"{spec.title} is not published on the Hub ({spec.access} access), so there is no benchmark "
                "dataset for the Hub to link the result to")
    return None


@dataclass(frozen=True)
class EvalResultsFile:
    path: str  # inside the model repo
    entries: list[dict]
    left_out: dict[str, str] = field(default_factory=dict)  # a value of the result not exported -> why

    def text(self) -> str:
        return yaml.safe_dump(self.entries, sort_keys=False, allow_unicode=True, width=100)


def eval_results_file(record: dict, *, org: str, endpoint: str = "https://huggingface.co") -> EvalResultsFile:
    """One result record (rexrank.results_schema) as `.eval_results/rexrank_<set>_<track>.yaml`:
    one entry per leaderboard column with a value."""
    why = exportable(record)
    if why is not None:
        raise ExportError(f"result {record.get('id')!r}: {why}")
    spec = TEST_SETS[record["test_set"]]
    track = record["track"]
    published = record.get("source") == "published"
    source = {
        "url": f"{endpoint.rstrip('/')}/spaces/{org}/{LEADERBOARD_SPACE}",
        "name": "ReXrank leaderboard (figures published by ReXrank)" if published else "ReXrank leaderboard",
        "user": org,
    }
    date = str(record.get("date") or "")
    entries = []
    for column in ordered_columns():
        value = (record.get("values") or {}).get(column.key) or {}
        if value.get("mean") is None:
            continue
        notes = [f"ReXrank {column.display}, {TRACK_TITLES.get(track, track)}"]
        if value.get("n"):
            notes.append(f"n = {value['n']} studies")
        if value.get("ci95") is not None:
            notes.append(f"95% CI ± {value['ci95']:.4g}")
        if date and not _ISO_DATE.fullmatch(date):
            notes.append(f"dated {date}")  # a bare year: the Hub wants an ISO-8601 date
        notes.append(f"result {record['id']}")
        entry = {"dataset": {"id": f"{org}/{spec.name}", "task_id": task_id(track, column.key)},
                 "value": float(value["mean"])}
        if _ISO_DATE.fullmatch(date):
            entry["date"] = date
        entry["source"] = source
        entry["notes"] = "; ".join(notes)
        entries.append(entry)
    if not entries:
        raise ExportError(f"result {record['id']!r} has no leaderboard value to export")
    return EvalResultsFile(f"{EVAL_RESULTS_DIR}/rexrank_{spec.name}_{track}.yaml", entries, left_out(record))


def left_out(record: dict) -> dict[str, str]:
    """The result's values that are no task of the benchmark, each with why (never dropped
    silently): a column ReXrank does not publish, or a value the board has no column for."""
    benchmark = {c.key for c in ordered_columns()}
    columns = {c.key: c for c in LEADERBOARD_COLUMNS}
    out = {}
    for key, value in (record.get("values") or {}).items():
        if key in benchmark or not isinstance(value, dict) or value.get("mean") is None:
            continue
        if key in columns:
            out[columns[key].display] = "an optional column, not one of ReXrank's eight: no task of the benchmark"
        else:
            out[key] = "no leaderboard column"
    return out
