"""`load_test_set`: a ReXrank test set for one track, as a `datasets.Dataset`; and
`track_studies`: the ids and references that scoring needs, cached per process.

`datasets` is imported where a builder runs, not when this module is imported: commands
that never load a test set through the builder (status, a submission to a private test
set, a backend scoring a test set it has already loaded) do not pay for it.
"""
from __future__ import annotations

import os
import sys
import threading
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from rexrank.errors import TestSetError
from rexrank.testsets.registry import TestSetSpec, check_track, get_spec

if TYPE_CHECKING:
    import datasets

REFERENCE_COLUMN = "reference"


DATA_DIR_ENV = "REXRANK_DATA_DIR"

# Sub-folder names a data folder may use for a test set besides its rexrank name: those of
# the ReXrank repository's data/ (rajpurkarlab/ReXrank), so a clone of it works as it is.
REXRANK_REPO_FOLDERS = {"mimic_cxr": ("mimic-cxr",), "chexpert_plus": ("chexpert-plus",)}


def data_dir_candidates(spec: TestSetSpec, folder: Path) -> list[Path]:
    """Where a test set's JSON may be in a data folder: the folder itself (one test set's
    folder) or its sub-folder for the test set (a folder holding test sets)."""
    folders = [folder, folder / spec.name, *(folder / alias for alias in REXRANK_REPO_FOLDERS.get(spec.name, ()))]
    return [f / name for f in folders for name in spec.filenames]


# What a folder given by the caller is called: Python's keyword, or the command line's flag
# while a command runs (rexrank.cli.main). A remembered file says how it was given.
_data_dir_option = "data_dir="


@contextmanager
def data_dir_option(name: str):
    """Within: a folder given by the caller is called `name` ("--data-dir" in a command)."""
    global _data_dir_option
    before, _data_dir_option = _data_dir_option, name
    try:
        yield
    finally:
        _data_dir_option = before


@dataclass(frozen=True)
class Located:
    """Where a test set's file was found, and how (`origin`): "--data-dir" or "$REXRANK_DATA_DIR"
    (given), "remembered" (a file given before on this machine, unchanged since: `when` it last
    worked, `given_as` how it was given then), "embedded" (ships with rexrank) or "download"
    (the pinned public file)."""

    path: Path
    origin: str
    when: str = ""
    given_as: str = ""

    @property
    def given(self) -> bool:
        return self.origin in ("--data-dir", f"${DATA_DIR_ENV}")

    def describe(self) -> str:
        """"/data/iu_xray/ReXRank_IUXray_test.json (remembered from an earlier --data-dir: it worked
        on 2026-05-01 and its SHA-256 is unchanged; --data-dir names another)"."""
        earlier = f"an earlier {self.given_as}" if self.given_as else "an earlier use"
        how = {
            "remembered": f"remembered from {earlier}: it worked on {self.when} and its SHA-256 is unchanged; "
                          f"{_data_dir_option} names another",
            "embedded": "ships with rexrank",
            "download": "the pinned public file, in the cache",
        }.get(self.origin, f"from {self.origin}")
        return f"{self.path} ({how})"


_told: set[Path] = set()  # remembered files named in this process
_told_lock = threading.Lock()


def mark_told(located: Located) -> bool:
    """Note that a remembered file has been named in this process; True the first time."""
    with _told_lock:
        if located.path in _told:
            return False
        _told.add(located.path)
        return True


def locate(spec: TestSetSpec, data_dir: "str | Path | Located | None", *, download_url: str | None = None,
           remembered: bool = True, tell: bool = True) -> Located:
    """Where the test set's JSON is. `data_dir` (else $REXRANK_DATA_DIR) has one meaning in
    every command: the JSON file itself, one test set's folder, or a folder holding test sets
    in sub-folders. Without either: the file remembered from an earlier use on this machine
    while it is unchanged (rexrank.testsets.locations; not with `remembered=False`), else the
    test set's public source (the embedded copy or the pinned download, content checked); a
    non-public one is an error. A remembered file is a file nobody named: it is named on
    stderr, once per process (`tell=False`: the caller names it, and calls mark_told)."""
    from rexrank.testsets import locations

    if isinstance(data_dir, Located):  # found already (and said so) by the caller
        return data_dir
    origin = "--data-dir"
    if data_dir is None and os.environ.get(DATA_DIR_ENV):
        data_dir, origin = os.environ[DATA_DIR_ENV], f"${DATA_DIR_ENV}"
    if data_dir is not None:
        data_dir = Path(data_dir)
        if data_dir.is_file():
            return Located(data_dir, origin)
        if not data_dir.is_dir():
            raise TestSetError(f"{origin} {data_dir} does not exist")
        for candidate in data_dir_candidates(spec, data_dir):
            if candidate.is_file():
                return Located(candidate, origin)
        if not (spec.embedded or spec.download):
            raise TestSetError(
                f"{spec.title}: none of {', '.join(spec.filenames)} found in {origin} {data_dir} "
                f"or its {spec.name}/ sub-folder. {spec.how_to_get}"
            )
    pinned = spec.download.sha256 if spec.download else None  # a remembered copy must be the pinned file
    if data_dir is None and not spec.embedded and remembered:
        found = next(locations.usable(spec.name, pinned=pinned), None)
        if found:
            located = Located(found.path, "remembered", found.when, found.given_as)
            if tell and mark_told(located):
                print(f"rexrank: {spec.title} read from {located.describe()}", file=sys.stderr, flush=True)
            return located
    if spec.embedded:
        from rexrank.data import data_path

        return Located(data_path(spec.embedded), "embedded")
    not_used = "".join(f" (not used: the file remembered from an earlier use, {why}; pass its folder again "
                       "with --data-dir)" for why in locations.stale(spec.name, pinned=pinned)[:1]) if data_dir is None else ""
    if spec.download:
        from rexrank.testsets.download import fetch_pinned

        try:
            return Located(fetch_pinned(spec.download, url=download_url), "download")
        except TestSetError as exc:
            raise TestSetError(f"{exc}{not_used}") from None
    raise TestSetError(f"{spec.title} is not public, so pass --data-dir (Python: data_dir=; or set ${DATA_DIR_ENV}); "
                       f"once it has worked, this machine remembers it.{not_used} {spec.how_to_get}")


def resolve_file(spec: TestSetSpec, data_dir: str | Path | None, *, download_url: str | None = None) -> Path:
    """The path `locate` finds."""
    return locate(spec, data_dir, download_url=download_url).path


def remember_if_given(spec: TestSetSpec, located: Located) -> None:
    """A file given as --data-dir (or $REXRANK_DATA_DIR, data_dir=) that has just loaded
    is remembered on this machine, for every later command to find without it."""
    if located.given:
        from rexrank.testsets.locations import remember

        remember(spec.name, located.path, given_as=_data_dir_option if located.origin == "--data-dir" else located.origin)


@contextmanager
def datasets_quiet():
    """Without `datasets`' own bars and logging: loading a test set of a few thousand rows is
    instant, and its "Generating test split" / "Filter" bars read as the run's progress."""
    import datasets

    was_enabled = datasets.is_progress_bar_enabled()
    level = datasets.logging.get_verbosity()
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    try:
        yield
    finally:
        datasets.logging.set_verbosity(level)
        if was_enabled:
            datasets.enable_progress_bars()


def load_all_studies(
    name: str, *, data_dir: str | Path | None = None, cache_dir: str | Path | None = None, download_url: str | None = None
) -> "datasets.Dataset":
    """Every study of the test set, whatever sections it has (no track applied)."""
    spec = get_spec(name)
    located = locate(spec, data_dir, download_url=download_url)
    studies = _read_studies(name, located.path, cache_dir)
    remember_if_given(spec, located)
    return studies


def _read_studies(name: str, path: Path, cache_dir: str | Path | None = None) -> "datasets.Dataset":
    """The test set's file through its `datasets` builder (which checks it)."""
    import datasets
    from rexrank_datasets import ReXrankTestSet

    builder = ReXrankTestSet(
        config_name=name,
        data_files={"test": str(path.resolve())},
        cache_dir=str(cache_dir) if cache_dir else None,
    )
    try:
        with datasets_quiet():
            builder.download_and_prepare()
            return builder.as_dataset(split="test")
    except datasets.exceptions.DatasetGenerationError as exc:
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, TestSetError):
            raise cause from None
        raise


def load_test_set(
    name: str,
    track: str = "findings",
    *,
    data_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    download_url: str | None = None,
) -> "datasets.Dataset":
    """The test set `name` for `track`, with a `reference` column holding the track's
    ground truth.

    findings: reference = `section_findings`, verbatim; studies without findings are
        excluded (CheXpert Plus valid keeps 62 of 200).
    findings_impression: reference = `findings_impression`, "Findings: {f} Impression: {i}"
        as ReXrank's evaluation script builds it from the raw sections (a missing section
        written "None", nothing stripped; see `rexrank.testsets.schema`).
    """
    check_track(track)
    studies = load_all_studies(name, data_dir=data_dir, cache_dir=cache_dir, download_url=download_url)
    return apply_track(studies, track)


def apply_track(studies: "datasets.Dataset", track: str) -> "datasets.Dataset":
    """Keep the track's studies and add its `reference` column."""
    check_track(track)
    return _apply_track(studies, track)


def _apply_track(studies: "datasets.Dataset", track: str) -> "datasets.Dataset":
    with datasets_quiet():
        if track == "findings":
            kept = studies.filter(lambda s: s["section_findings"] is not None)
            return kept.add_column(REFERENCE_COLUMN, kept["section_findings"])
        return studies.add_column(REFERENCE_COLUMN, studies["findings_impression"])


def track_rows(test: "ResolvedTestSet") -> "datasets.Dataset":
    """The rows of a test set resolved already (`ResolvedTestSet`, or the backend's request),
    its track applied, from the very file its studies were read from (nothing is looked up
    again; the file's SHA-256 must still be the one the studies were read with)."""
    from rexrank.testsets.download import sha256_of

    studies = test.studies
    changed = TestSetError(f"{test.spec.title}: {studies.path} has changed since its studies were loaded; "
                           "score again with the file as it is now")
    if sha256_of(studies.path) != studies.file_sha256:
        raise changed
    rows = _apply_track(_read_studies(test.spec.name, studies.path), test.track)
    if tuple(rows["id"]) != studies.ids:  # changed between the check and the read
        raise changed
    return rows


@dataclass(frozen=True)
class TrackStudies:
    """One test set's studies for one track, as scoring uses them: ids and references in
    test-set order (the reference as `apply_track` defines it), and the ids of the test
    set's other studies, which the track does not score."""

    name: str
    track: str
    file_sha256: str  # of the test set's file: the cache key
    path: Path  # the file they were read from (track_rows reads its rows from it again)
    ids: tuple[str, ...]
    references: tuple[str, ...]
    outside_ids: frozenset[str]


_CACHE_SIZE = 16
_cache: OrderedDict[tuple[str, str, str], TrackStudies] = OrderedDict()
_cache_lock = threading.Lock()


def track_studies(name: str, track: str = "findings", *, data_dir: str | Path | None = None,
                  download_url: str | None = None) -> TrackStudies:
    """The test set `name` for `track`, loaded through the builder (load_all_studies and
    apply_track) once per process and per content of its file: a backend scoring request
    after request on one test set reads it once, and an edited file is loaded again."""
    from rexrank.testsets.download import sha256_of

    check_track(track)
    spec = get_spec(name)
    located = locate(spec, data_dir, download_url=download_url)
    key = (name, track, sha256_of(located.path))
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            remember_if_given(spec, located)
            return replace(_cache[key], path=located.path)  # the same content, perhaps another copy
    studies = _read_studies(name, located.path)
    remember_if_given(spec, located)
    test = apply_track(studies, track)
    ids = tuple(test["id"])
    loaded = TrackStudies(name, track, key[2], located.path, ids, tuple(test[REFERENCE_COLUMN]),
                          frozenset(studies["id"]) - set(ids))
    with _cache_lock:
        _cache[key] = loaded
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return loaded


@dataclass(frozen=True, eq=False)
class ResolvedTestSet:
    """A test set and track looked up once (what scoring reads: the spec, the track's
    studies, the data folder); the backend's rexrank.backend.resolved.ResolvedRequest has
    the same fields."""

    spec: TestSetSpec
    track: str
    studies: TrackStudies
    data_dir: Path | None = None


def resolve_test_set(name: str, track: str, *, data_dir: str | Path | None = None) -> ResolvedTestSet:
    """Look the test set and track up, and load the track's studies (cached per process)."""
    spec = get_spec(name)
    check_track(track)
    return ResolvedTestSet(spec, track, track_studies(name, track, data_dir=data_dir),
                           Path(data_dir) if data_dir else None)
