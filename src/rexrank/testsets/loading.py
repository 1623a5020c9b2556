"""`load_test_set`: a ReXrank test set for one track, as a `datasets.Dataset`; and
`track_studies`: the ids and references that scoring needs, cached per process.

`datasets` is imported where a builder runs, not when this module is imported: commands
that never load a test set through the builder (status, a submission to a private test
set, a backend scoring a test set it has already loaded) do not pay for it.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rexrank.errors import TestSetError
from rexrank.testsets.registry import TestSetSpec, check_track, get_spec

if TYPE_CHECKING:
    import datasets

REFERENCE_COLUMN = "reference"


def resolve_file(spec: TestSetSpec, data_dir: str | Path | None, *, download_url: str | None = None) -> Path:
    """Where the test set's JSON is: inside `data_dir` (or `data_dir` itself if it is a
    file), the embedded copy, or the pinned public download."""
    if data_dir is not None:
        data_dir = Path(data_dir)
        if data_dir.is_file():
            return data_dir
        if not data_dir.is_dir():
            raise TestSetError(f"--data-dir {data_dir} does not exist")
        for name in spec.filenames:
            candidate = data_dir / name
            if candidate.is_file():
                return candidate
        raise TestSetError(
            f"{spec.title}: none of {', '.join(spec.filenames)} found in {data_dir}. {spec.how_to_get}"
        )
    if spec.embedded:
        from rexrank.data import data_path

        return data_path(spec.embedded)
    if spec.download:
        from rexrank.testsets.download import fetch_pinned

        return fetch_pinned(spec.download, url=download_url)
    raise TestSetError(f"{spec.title} is not public, so pass --data-dir. {spec.how_to_get}")


def load_all_studies(
    name: str, *, data_dir: str | Path | None = None, cache_dir: str | Path | None = None, download_url: str | None = None
) -> "datasets.Dataset":
    """Every study of the test set, whatever sections it has (no track applied)."""
    import datasets
    from rexrank_datasets import ReXrankTestSet

    spec = get_spec(name)
    path = resolve_file(spec, data_dir, download_url=download_url)
    builder = ReXrankTestSet(
        config_name=name,
        data_files={"test": str(path.resolve())},
        cache_dir=str(cache_dir) if cache_dir else None,
    )
    try:
        builder.download_and_prepare()
    except datasets.exceptions.DatasetGenerationError as exc:
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, TestSetError):
            raise cause from None
        raise
    return builder.as_dataset(split="test")


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
    if track == "findings":
        kept = studies.filter(lambda s: s["section_findings"] is not None)
        return kept.add_column(REFERENCE_COLUMN, kept["section_findings"])
    return studies.add_column(REFERENCE_COLUMN, studies["findings_impression"])


@dataclass(frozen=True)
class TrackStudies:
    """One test set's studies for one track, as scoring uses them: ids and references in
    test-set order (the reference as `apply_track` defines it), and the ids of the test
    set's other studies, which the track does not score."""

    name: str
    track: str
    file_sha256: str  # of the test set's file: the cache key
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
    path = resolve_file(get_spec(name), data_dir, download_url=download_url)
    key = (name, track, sha256_of(path))
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    studies = load_all_studies(name, data_dir=path)
    test = apply_track(studies, track)
    ids = tuple(test["id"])
    loaded = TrackStudies(name, track, key[2], ids, tuple(test[REFERENCE_COLUMN]), frozenset(studies["id"]) - set(ids))
    with _cache_lock:
        _cache[key] = loaded
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return loaded
