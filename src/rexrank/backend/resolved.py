"""A request resolved once: its test set's spec, track, studies and data location, built
when the request is claimed and passed down (policy check, scoring, shards, merge,
failure messages) instead of each step looking the test set up again."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path


@dataclass(frozen=True, eq=False)
class ResolvedRequest:
    request: dict
    spec: "object"  # rexrank.testsets.registry.TestSetSpec
    track: str
    data_dir: Path | None = None

    @property
    def id(self) -> str:
        return self.request["id"]

    @property
    def private(self) -> bool:
        return bool(self.spec.private)

    @cached_property
    def studies(self):
        """The track's studies (rexrank.testsets.loading.TrackStudies): ids and references in
        test-set order, loaded on first use (a refused request never loads its test set).
        Raises TestSetError when this machine cannot load it."""
        from rexrank.testsets.loading import track_studies

        return track_studies(self.spec.name, self.track, data_dir=self.data_dir)

    @property
    def references(self) -> list[str]:
        return list(self.studies.references)


def resolve_request(request: dict, data_dir: str | Path | None = None) -> ResolvedRequest:
    """Look the request's test set and track up once; a RexrankError (an unknown test set
    or track) is the submission rules' refusal."""
    from rexrank.testsets.registry import check_track, get_spec

    spec = get_spec(request["test_set"])
    check_track(request["track"])
    return ResolvedRequest(request, spec, request["track"], Path(data_dir) if data_dir else None)
