"""Per-study score tables of several systems on one test set, joined on study id.

Input tables are what `rexrank score --per-study FILE` writes: a column `id` plus one
numeric column per per-study score (`bleu2`, `bertscore`, `radcliq_v1`, ...), and in the
parquet metadata the run's provenance (test set, track, references' SHA-256). The study
sets must be identical across systems, and so must the test set, track and references
where the files say them — a paired analysis on different studies or references would
compare different things — so a mismatch is an error naming the difference.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from rexrank.errors import RexrankError
from rexrank.results_schema import COLUMNS_BY_KEY, LEADERBOARD_COLUMNS, SAME_AS, metric_label, repeated_columns


class AnalysisError(RexrankError):
    """Inputs to an analysis are inconsistent or malformed."""


# Per-study scores where lower is better (all leaderboard keys are higher-is-better: the
# site shows 1/RadCliQ-v1 and 1/FineRadScore). Anything else defaults to higher-is-better;
# callers can override with `lower_is_better=`.
LOWER_IS_BETTER = frozenset({"radcliq", "radcliq_v0", "radcliq_v1", "fineradscore", "fineradscore_sum",
                              "fineradscore_n_corrections"})




def higher_is_better(metric: str, lower_is_better: Sequence[str] = ()) -> bool:
    if metric in lower_is_better:
        return False
    if metric in COLUMNS_BY_KEY:
        return COLUMNS_BY_KEY[metric].higher_is_better
    return metric not in LOWER_IS_BETTER


@dataclass
class RunSet:
    """Several systems scored on the same studies.

    scores[metric] is a DataFrame indexed by study id (sorted), one column per system.
    NaN marks a study the metric could not score for that system.
    """

    systems: list[str]
    ids: pd.Index
    scores: dict[str, pd.DataFrame]
    sources: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    lower_is_better: tuple[str, ...] = ()
    test_set: dict | None = None  # what the files say they were scored on (name, title, track, references_sha256)

    @property
    def metrics(self) -> list[str]:
        return list(self.scores)

    def higher_is_better(self, metric: str) -> bool:
        return higher_is_better(metric, self.lower_is_better)

    def matrix(self, metric: str, ids: pd.Index | None = None) -> pd.DataFrame:
        if metric not in self.scores:
            from rexrank.suggest import did_you_mean

            raise AnalysisError(f"no per-study column {metric!r}{did_you_mean(metric, self.metrics)}; "
                                f"available: {', '.join(self.metrics)}")
        frame = self.scores[metric]
        return frame if ids is None else frame.loc[ids]

    def means(self) -> pd.DataFrame:
        """System-level table (rows = systems, columns = metrics) of per-study means,
        NaN-skipping (missing studies are counted in the summary tables)."""
        return pd.DataFrame({m: self.scores[m].mean(axis=0, skipna=True) for m in self.metrics}).loc[self.systems]


def parse_run_spec(spec: str) -> tuple[str, Path]:
    """`name=path` or `path` (name = file stem). A path that exists wins over splitting."""
    path = Path(spec)
    if "=" in spec and not path.exists():
        name, _, rest = spec.partition("=")
        if not name:
            raise AnalysisError(f"run {spec!r}: empty system name before '='")
        return name, Path(rest)
    return path.stem, path


def read_per_study(path: str | Path) -> pd.DataFrame:
    path = Path(path)
    if not path.is_file():
        raise AnalysisError(f"per-study table {path} does not exist")
    suffix = path.suffix.lower()
    try:
        if suffix == ".parquet":
            frame = pd.read_parquet(path)
        elif suffix in (".csv", ".tsv"):
            frame = pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",", dtype={"id": str})
        else:
            raise AnalysisError(f"{path}: expected a .parquet, .csv or .tsv per-study table (rexrank score --per-study)")
    except AnalysisError:
        raise
    except Exception as exc:  # pyarrow / parser errors: say which file
        raise AnalysisError(f"{path}: cannot read per-study table: {exc}") from exc
    return frame


def _clean_table(frame: pd.DataFrame, *, where: str, notes: list[str]) -> pd.DataFrame:
    if "id" not in frame.columns:
        raise AnalysisError(f"{where}: no `id` column (columns: {', '.join(map(str, frame.columns))})")
    ids = frame["id"].astype(str)
    dup = ids[ids.duplicated()].unique().tolist()
    if dup:
        raise AnalysisError(f"{where}: duplicate study ids {dup[:10]}")
    frame = frame.drop(columns="id").set_axis(pd.Index(ids, name="id"), axis=0)
    numeric = {}
    for column in frame.columns:
        values = frame[column]
        if pd.api.types.is_bool_dtype(values) or not pd.api.types.is_numeric_dtype(values):
            notes.append(f"{where}: column {column!r} is not numeric and was not analysed")
            continue
        arr = values.to_numpy(dtype=np.float64)
        if np.isinf(arr).any():
            bad = frame.index[np.isinf(arr)][:5].tolist()
            raise AnalysisError(f"{where}: column {column!r} has infinite scores for studies {bad}")
        numeric[str(column)] = arr
    return pd.DataFrame(numeric, index=frame.index)


def _describe_difference(a: set, b: set, name_a: str, name_b: str) -> str:
    only_a, only_b = sorted(a - b), sorted(b - a)
    parts = []
    if only_a:
        parts.append(f"{len(only_a)} studies only in {name_a} (e.g. {only_a[:5]})")
    if only_b:
        parts.append(f"{len(only_b)} studies only in {name_b} (e.g. {only_b[:5]})")
    return "; ".join(parts)


def join_runs(
    tables: Mapping[str, pd.DataFrame],
    *,
    sources: Mapping[str, str] | None = None,
    lower_is_better: Sequence[str] = (),
) -> RunSet:
    """Join per-study tables (system name -> DataFrame with `id` + score columns)."""
    if len(tables) < 1:
        raise AnalysisError("no runs given")
    sources = dict(sources or {name: name for name in tables})
    notes: list[str] = []
    cleaned = {name: _clean_table(t, where=sources.get(name, name), notes=notes) for name, t in tables.items()}
    systems = list(cleaned)
    first = systems[0]
    ref_ids = set(cleaned[first].index)
    for name in systems[1:]:
        ids = set(cleaned[name].index)
        if ids != ref_ids:
            raise AnalysisError(
                f"runs cover different studies: {_describe_difference(ids, ref_ids, name, first)}. "
                "Score every system on the same test set and track."
            )
    columns = [set(t.columns) for t in cleaned.values()]
    common = set.intersection(*columns)
    for name, t in cleaned.items():
        extra = sorted(set(t.columns) - common)
        if extra:
            notes.append(f"{sources.get(name, name)}: columns {extra} are not in every run and were not analysed")
    if not common:
        raise AnalysisError("the runs share no per-study score column")
    ids = pd.Index(sorted(ref_ids), name="id")
    order = [c for c in cleaned[first].columns if c in common]
    scores = {m: pd.DataFrame({s: cleaned[s][m].reindex(ids) for s in systems}, index=ids) for m in order}
    return RunSet(systems, ids, scores, sources=sources, notes=notes, lower_is_better=tuple(lower_is_better))


def load_runs(specs: Sequence[str] | Mapping[str, str | Path], *, lower_is_better: Sequence[str] = ()) -> RunSet:
    """Read per-study tables: a list of `name=path` / `path` specs, or a name -> path mapping.
    Runs whose files carry provenance must share test set, track and references."""
    from rexrank.per_study_file import read_provenance

    pairs = list(specs.items()) if isinstance(specs, Mapping) else [parse_run_spec(s) for s in specs]
    tables, sources, provenance = {}, {}, {}
    for name, path in pairs:
        if name in tables:
            raise AnalysisError(f"system name {name!r} given twice ({sources[name]} and {path}); name them with name=path")
        tables[name] = read_per_study(path)
        sources[name] = str(path)
        try:
            provenance[name] = read_provenance(path)
        except Exception as exc:  # pyarrow errors: say which file
            raise AnalysisError(f"{path}: cannot read its metadata: {exc}") from exc
    test_set, notes = check_same_origin(provenance, sources)
    runs = join_runs(tables, sources=sources, lower_is_better=lower_is_better)
    for column in sorted(repeated_columns(runs.scores)):  # one row, one figure per number
        same = SAME_AS[column]
        if runs.scores[column].equals(runs.scores[same]):
            del runs.scores[column]
            notes.append(f"{column} is {same}'s number ({metric_label(same)}): shown once, as {same}")
    runs.test_set = test_set
    runs.notes[:0] = notes
    return runs


ORIGIN_FIELDS = ("name", "track", "references_sha256")


def _origin(test_set: dict) -> str:
    title = test_set.get("title") or test_set.get("name") or "an unnamed test set"
    name = f" ({test_set['name']})" if test_set.get("name") and test_set.get("title") else ""
    track = f", {test_set['track']} track" if test_set.get("track") else ""
    sha = test_set.get("references_sha256") or ""
    return f"{title}{name}{track}, references SHA-256 {sha[:12]}…"


def check_same_origin(provenance: Mapping[str, dict | None], sources: Mapping[str, str]) -> tuple[dict | None, list[str]]:
    """The test set the runs agree on (None when no file says), and notes on files that say
    nothing or were written by an unfinished run. Disagreement is an error naming each run."""
    notes = []
    told = {}
    for name, prov in provenance.items():
        if prov is None or not isinstance(prov.get("test_set"), dict):
            notes.append(f"{sources[name]} carries no provenance (a CSV, or written before rexrank recorded it): "
                         "its test set, track and references could not be checked against the other runs")
            continue
        told[name] = prov["test_set"]
        if not prov.get("complete", True):
            missing = [*prov.get("failed", []), *prov.get("pending", [])]
            notes.append(f"{sources[name]}: its run did not finish every metric (missing: {', '.join(missing)})")
    origins = {name: tuple(ts.get(f) for f in ORIGIN_FIELDS) for name, ts in told.items()}
    if len(set(origins.values())) > 1:
        listed = "; ".join(f"{sources[name]}: {_origin(told[name])}" for name in told)
        different = [f for i, f in enumerate(ORIGIN_FIELDS) if len({o[i] for o in origins.values()}) > 1]
        what = {"name": "test sets", "track": "tracks", "references_sha256": "references"}
        raise AnalysisError(
            f"the runs were scored on different {' and '.join(what[f] for f in different)}: {listed}. "
            "Compare systems scored on the same test set, track and references."
        )
    return (next(iter(told.values())) if told else None), notes


# --- study attributes -------------------------------------------------------------------

# Test-set columns that are text or image lists, not attributes to stratify by.
_NOT_ATTRIBUTES = {"image_path", "frontal_lateral", "key_image_path", "context", "section_findings",
                   "section_impression", "report", "findings_impression", "section_clinical_history"}


def attributes_from_test_set(name: str, *, data_dir: str | Path | None = None) -> tuple[pd.DataFrame, pd.Series]:
    """Study attributes (site, is_abnormal, sex, ...) and the references texts
    (findings, else the full report) of a test set, indexed by study id."""
    from rexrank.testsets.loading import load_all_studies

    studies = load_all_studies(name, data_dir=data_dir).to_pandas()
    studies["id"] = studies["id"].astype(str)
    studies = studies.set_index("id")
    attrs = studies[[c for c in studies.columns if c not in _NOT_ATTRIBUTES]]
    references = studies["section_findings"].where(studies["section_findings"].notna(), studies["report"])
    return attrs, references


def read_attributes(path: str | Path) -> pd.DataFrame:
    """A user CSV of study attributes: an `id` column plus one column per attribute."""
    path = Path(path)
    if not path.is_file():
        raise AnalysisError(f"attributes file {path} does not exist")
    frame = pd.read_csv(path, dtype={"id": str})
    if "id" not in frame.columns:
        raise AnalysisError(f"{path}: attributes CSV needs an `id` column (has {', '.join(frame.columns)})")
    dup = frame["id"][frame["id"].duplicated()].unique().tolist()
    if dup:
        raise AnalysisError(f"{path}: duplicate study ids {dup[:10]}")
    return frame.set_index("id")


def check_attributes(runs: RunSet, attrs: pd.DataFrame, *, where: str = "study attributes") -> pd.DataFrame:
    """Attributes restricted to the runs' studies; every run study must have a row."""
    missing = sorted(set(runs.ids) - set(attrs.index.astype(str)))
    if missing:
        raise AnalysisError(f"{where}: {len(missing)} studies of the runs have no attributes (e.g. {missing[:5]})")
    attrs = attrs.copy()
    attrs.index = attrs.index.astype(str)
    return attrs.loc[runs.ids]


# --- system-level tables (published leaderboard) ----------------------------------------

_DISPLAY_TO_KEY = {c.display: c.key for c in LEADERBOARD_COLUMNS}


def system_table(frame: pd.DataFrame, *, name_column: str | None = None) -> pd.DataFrame:
    """Normalise a system-level table to rows = systems, columns = leaderboard keys.

    Accepts published ReXrank CSVs (display headers "BLEU", "1/RadCliQ-v1", ... and a
    "Model Name" column) or a frame already keyed by leaderboard keys."""
    frame = frame.rename(columns=_DISPLAY_TO_KEY)
    name_column = name_column or ("Model Name" if "Model Name" in frame.columns else None)
    if name_column:
        names = frame[name_column].astype(str)
        dup = names[names.duplicated()].unique().tolist()
        if dup:
            raise AnalysisError(f"system table: duplicate system names {dup[:5]}")
        frame = frame.set_index(names)
    keys = [c for c in frame.columns if c in COLUMNS_BY_KEY]
    if not keys:
        raise AnalysisError(f"system table has no leaderboard metric column (columns: {', '.join(map(str, frame.columns))})")
    return frame[keys].apply(pd.to_numeric, errors="raise")


def read_system_table(path: str | Path) -> pd.DataFrame:
    path = Path(path)
    if not path.is_file():
        raise AnalysisError(f"system table {path} does not exist")
    return system_table(pd.read_csv(path))


def as_system_table(table: "pd.DataFrame | RunSet") -> pd.DataFrame:
    """Rows = systems, columns = metrics, from a RunSet (per-study means) or a table."""
    if isinstance(table, RunSet):
        return table.means()
    if not isinstance(table, pd.DataFrame):
        raise AnalysisError(f"expected a RunSet or a pandas DataFrame, got {type(table).__name__}")
    return table.select_dtypes(include="number")
