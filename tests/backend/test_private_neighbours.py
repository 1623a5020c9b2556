"""Issue 37 item 6: the neighbouring-dataset test, and attack 9 (rounding).

The whole public path of one private request (tests/support/neighbours.py: the Space's filing, the
backend single or dispatched, /status and every other function the Space serves, the
results repo's files and commits, the Jobs' labels and logs) runs on two private test sets
that differ in one study, with the same noise seed and a controlled clock. Every public
byte must be equal, the noised numbers masked where they are made.

The neighbours: study RG007 with or without a findings section (so in or out of the
findings track: 50 vs 49 studies there, the same 50 in the set), and RG007's reference long
or short (the same track; scoring takes longer on the long one).
"""
from __future__ import annotations

import json

import pytest

from support.neighbours import differences, run_world

N = 50
SHORT = "Small left pleural effusion."
LONG = "Small left pleural effusion with adjacent atelectasis in the left lower lobe, unchanged since the prior. " * 4


def private_findings(target: str | None) -> dict[str, str | None]:
    findings = {f"RG{i:03d}": f"Private finding {i}: an opacity in zone {i % 6}, confidential." for i in range(N)}
    findings["RG007"] = target
    return findings


NEIGHBOURS = {
    "findings present or absent": (private_findings(SHORT), private_findings(None)),
    "long or short reference": (private_findings(LONG), private_findings(SHORT)),
}


@pytest.fixture(scope="module")
def worlds(tmp_path_factory):
    """Each neighbour pair's two worlds, run once for this module: {(case, dispatched): (A, B)}."""
    done = {}

    def get(case: str, dispatched: bool, **kw):
        key = (case, dispatched, json.dumps(kw, sort_keys=True))
        if key not in done:
            tmp = tmp_path_factory.mktemp("world")
            done[key] = tuple(run_world(tmp / side, findings, dispatched=dispatched, **kw)
                              for side, findings in zip("AB", NEIGHBOURS[case]))
        return done[key]

    return get


@pytest.mark.parametrize("case, dispatched", [
    ("findings present or absent", False),
    ("findings present or absent", True),
    ("long or short reference", False),
    ("long or short reference", True),
], ids=["findings present or absent, single worker", "findings present or absent, dispatched",
        "long or short reference, single worker", "long or short reference, dispatched"])
def test_one_study_changes_no_public_byte_but_the_noised_numbers(worlds, case, dispatched):
    a, b = worlds(case, dispatched)
    assert a.status["request"]["status"] == "FINISHED", a.status  # the comparison saw a published result
    assert a.record is not None and "bleu2" in a.record["summaries"]
    assert any(key.startswith("job ") for key in a.public) == dispatched
    diff = differences(a.public, b.public)
    assert not diff, f"public bytes that depend on the private set (world A: {case.split(' or ')[0]}):\n{diff}"


def ceiling_between(n_low: int, n_high: int) -> float:
    """A GPU-hour ceiling that a plan of n_high studies exceeds and one of n_low does not
    (the plan of the world's dispatcher: its metrics on cpu-basic, 3 Jobs, the default
    start-up and Job timeout)."""
    import rexrank.metrics.registry as registry
    from rexrank.backend.dispatch_settings import DispatchSettings
    from rexrank.backend.shards import plan_shards
    from support.neighbours import METRICS, WORLD_METRICS

    defaults = DispatchSettings()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(registry, "METRICS", WORLD_METRICS(registry))
        low, high = (plan_shards(n, METRICS.split(","), flavor="cpu-basic", max_jobs=3, target_shard_hours=1e-9,
                                 startup=defaults.job_startup, job_timeout=defaults.job_timeout).gpu_hours
                     for n in (n_low, n_high))
    assert low < high
    return (low + high) / 2


def test_the_gpu_hour_ceiling_refuses_neighbours_alike(worlds):
    """Attack 8 through the whole path: a ceiling between the estimates for 49 and 50
    in-track studies refused one world and scored the other ("the estimated X GPU-hours",
    from the track's size). From the test set's size both are refused, or neither."""
    ceiling = ceiling_between(N - 1, N)
    a, b = worlds("findings present or absent", True, config={"dispatch": {"gpu_hours_ceiling": ceiling}})
    diff = differences(a.public, b.public)
    assert not diff, f"public bytes that depend on the private set:\n{diff}"
    assert a.status["request"]["status"] == b.status["request"]["status"]


def test_the_published_decimals_do_not_count_the_track(worlds):
    """Attack 9: 50 vs 49 studies in the findings track (RG007's findings present or absent)
    were published with different decimals ("rounding_decimals", and the digits of every
    number), without noise. They now come from the test set's 50 studies in both."""
    from rexrank.backend.privacy import rounding_for

    a, b = worlds("findings present or absent", False)
    decimals = [w.record["summaries"]["bleu2"]["rounding_decimals"]["bleu2"] for w in (a, b)]
    assert decimals[0] == decimals[1] == rounding_for("bleu2", N)  # used to be 1 and 0 for the mean
    assert a.status["results"] == b.status["results"]  # the masked numbers, rounded alike


def test_a_private_result_takes_its_decimals_and_stated_coupling_from_the_whole_set():
    """49 studies in the track, 1 outside it: the decimals of 50 studies (1 for a [0, 1] mean;
    49 gave 0), and GREEN batched by similar length states the set's 50 as its coupling
    (it stated the track's 49)."""
    from rexrank.backend.privacy import private_results, public_size, rounding_for
    from support.backend_fixtures import NoNoise

    info = {"n_studies": N - 1, "n_studies_outside_track": 1}
    assert public_size({"test_set": info}) == N
    summary = {"n": N - 1, "n_missing": 0, "mean": 0.3, "ci95": 0.01}
    results = {"test_set": info, "predictions": {"n": N},
               "metrics": {"bleu2": {"scores": {"bleu2": summary}},
                           "green": {"scores": {"green": summary},
                                     "provenance": {"config": {"length_cap": "2048 - padded width of the study's batch of "
                                                                         "prompts of similar length"}}}}}
    published = private_results(results, rng=NoNoise())["metrics"]
    assert published["bleu2"]["rounding_decimals"]["bleu2"] == rounding_for("bleu2", N) == {"mean": 1, "ci95": 0}
    assert published["bleu2"]["scores"]["bleu2"] == {"mean": 0.3, "ci95": 0.0}
    assert published["green"]["privacy"]["study_coupling"] == N


def test_a_request_its_workers_died_scoring_fails_alike_at_the_slot(worlds):
    """Three workers claimed the request and died scoring it, each after a time that counts
    the track's references: the backend's claim finds it out of attempts. It used to FAIL
    it there, at a time that counts them, with the queue's own message; it is now FAILED at
    the publication slot with the door's fixed sentence, alike in both worlds."""
    from rexrank.backend.public_door import PRIVATE_INTERNAL_ERROR
    from rexrank.store import records as R
    from support.backend_fixtures import HOUR

    a, b = worlds("findings present or absent", False, interrupted=3)
    diff = differences(a.public, b.public)
    assert not diff, f"public bytes that depend on the private set:\n{diff}"
    for world in (a, b):
        assert world.status["request"]["status"] == "FAILED"
        assert world.status["request"]["error"] == PRIVATE_INTERNAL_ERROR
        assert world.request["finished_time"] == R.iso(HOUR) and world.scoring_ended is None
