"""What a private set publishes: noise, rounding, coupling, messages and leaks (rexrank.backend.privacy).

Pinned by hand (issue 32: what the mutation tool found unpinned): every expected value comes from an
independent oracle, never from rexrank's earlier output."""
from __future__ import annotations

import json
import math

import pytest

from rexrank.errors import SubmissionError


# ---- privacy: the noise is calibrated on the studies scored --------------------------------
class RecordingRng:
    """Stands in for the numpy Generator: records each Laplace scale asked for and adds no noise."""

    def __init__(self):
        self.scales = []

    def laplace(self, loc, scale):
        self.scales.append(scale)
        return 0.0


@pytest.mark.parametrize("n_scored", [10, 400, 995])
def test_private_noise_is_calibrated_on_the_fewest_studies_a_mean_is_taken_over(n_scored):
    """The scored count of a private set is itself private, so the noise is calibrated on
    L = ⌈0.99 · n⌉ (the coverage rule's floor), and a mean over fewer studies is scaled as if
    taken over L (the missing ones at the range's low end): one study then moves it by at most
    w / L, whatever was scored. Calibrating on the scored count, or on n, gives the wrong noise."""
    from rexrank.backend.privacy import EPSILON, private_results

    results = {"test_set": {"name": "rexgradient", "n_studies": 1000},
               "metrics": {"bleu2": {"scores": {"bleu2": {"mean": 0.3, "ci95": 0.02, "n": n_scored, "n_missing": 0}}}}}
    rng = RecordingRng()
    out = private_results(results, rng=rng)
    floor = 990  # ⌈0.99 × 1000⌉
    # by hand, BLEU-2 per study in [0, 1]: Δmean = 1 / L, ΔCI = 1.96 / √(L (L − 1)), b = Δ / ε
    mean_scale = 1 / floor / EPSILON
    ci_scale = 1.96 / math.sqrt(floor * (floor - 1)) / EPSILON
    assert rng.scales == [pytest.approx(mean_scale, rel=1e-12), pytest.approx(ci_scale, rel=1e-12)]
    assert EPSILON == 0.5
    published = out["metrics"]["bleu2"]["scores"]["bleu2"]
    # no noise drawn here (RecordingRng); rounded to 0.01, the power of ten ≥ 5 × 1/1000
    expected = 0.3 if n_scored >= floor else 0.3 * n_scored / floor
    assert published["mean"] == pytest.approx(round(expected, 2), abs=1e-12)
    assert "n" not in published  # the scored count is not published


def test_a_tracks_public_size_is_the_whole_sets_studies():
    """A track's size is private (which studies lack a findings section); the whole set's, in and
    outside the track, is what the registry declares: GREEN's batches by length couple that many."""
    from rexrank.backend.privacy import private_results, public_size

    track = {"test_set": {"n_studies": 590, "n_studies_outside_track": 410}}
    assert public_size(track) == 1000  # 590 + 410
    assert public_size({"test_set": {"n_studies_outside_track": 7}, "predictions": {"n": 3}}) == 10
    assert public_size({"test_set": {"n_studies_outside_track": 7}}) == 7  # no track size said: none counted
    assert public_size({}) == 0
    one = {"mean": 0.3, "ci95": 0.02, "n": 590, "n_missing": 0}
    green = {"scores": {"green": one}, "provenance": {"config": {"length_cap": "batches of similar length"}}}
    rng = RecordingRng()
    out = private_results({**track, "metrics": {"green": green}}, rng=rng)
    assert out["metrics"]["green"]["privacy"]["study_coupling"] == 1000  # never the track's 590
    # b = k · (1 / L) / ε with k = 1000 and the noise's L = ⌈0.99 × 590⌉ = 585
    assert rng.scales[0] == pytest.approx(1000 / 585 / 0.5, rel=1e-12)


# ---- privacy: what a private set publishes, by hand (mutmut's first run over privacy.py) ------
class FixedRng:
    """Stands in for the numpy Generator: every Laplace draw is `noise` (recorded with its scale)."""

    def __init__(self, noise=0.0):
        self.noise, self.scales = noise, []

    def laplace(self, loc, scale):
        self.scales.append(scale)
        return self.noise


def test_the_radcliq_range_is_the_formulas_corners_by_hand():
    """RadCliQ-v1 is linear in its components: its extremes over the boxes [0, 1] (RadGraph,
    BLEU-2) and [-1, 1] (BERTScore, SembScore) take each term at the end its coefficient's
    sign picks. The official coefficients of RadGraph, BERTScore and SembScore are negative,
    BLEU-2's is positive."""
    from rexrank.backend import privacy
    from rexrank.metrics.radcliq_formula import V1_COEFS, V1_MEAN, V1_SCALE

    boxes = [(0.0, 1.0), (-1.0, 1.0), (-1.0, 1.0), (0.0, 1.0)]
    low = high = V1_COEFS[4]
    for (a, b), mean, scale, coef in zip(boxes, V1_MEAN, V1_SCALE, V1_COEFS[:4]):
        ends = (coef * (a - mean) / scale, coef * (b - mean) / scale)
        low, high = low + min(ends), high + max(ends)
    assert privacy._radcliq_v1_range() == pytest.approx((low, high), abs=1e-12)
    assert privacy.PER_STUDY_RANGE["radcliq"] == pytest.approx((low, high), abs=1e-12)


def test_what_a_private_request_costs_by_hand():
    from rexrank.backend.privacy import numbers_published, submission_cost

    assert numbers_published(["bleu2", "fineradscore", "unknown"]) == 2 * (1 + 4)
    assert submission_cost(["bleu2"]) == 2 * 0.5 + 0.5
    assert submission_cost([]) == 0.5  # the coverage decision alone


def test_sensitivity_and_noise_scale_by_hand():
    from rexrank.backend.privacy import noise_scale, sensitivity

    assert sensitivity("unknown", 10) is None and noise_scale("unknown", 10) is None
    assert sensitivity("bleu2", 1) is None
    assert sensitivity("bleu2", 2) == pytest.approx({"mean": 1 / 2, "ci95": 1.96 / math.sqrt(2)})
    # FineRadScore's severity lies in 0-4: w = 4
    assert sensitivity("fineradscore", 3) == pytest.approx({"mean": 4 / 3, "ci95": 1.96 * 4 / math.sqrt(6)})
    assert noise_scale("fineradscore", 3, epsilon=2.0, coupling=8) == pytest.approx(
        {"mean": 8 * 4 / 3 / 2, "ci95": 8 * 1.96 * 4 / math.sqrt(6) / 2})


def test_rounding_and_floor_by_hand():
    """Decimals d: the largest with 10^-d ≥ 5 × Δ (Δ = w / n, and 1.96 w / n for the CI)."""
    from rexrank.backend.privacy import decimals_for, floor_studies, rounding_for

    assert rounding_for("bleu2", 10_000) == {"mean": 3, "ci95": 3}  # 5e-4 -> 0.001; 9.8e-4 -> 0.001
    assert rounding_for("bertscore", 10_000) == {"mean": 3, "ci95": 2}  # 1e-3 exactly -> 0.001; 1.96e-3 -> 0.01
    assert rounding_for("fineradscore", 10_000) == {"mean": 2, "ci95": 2}  # 2e-3 -> 0.01; 3.92e-3 -> 0.01
    assert rounding_for("green", 10_000, coupling=8) == {"mean": 2, "ci95": 2}  # 4e-3, 7.84e-3 -> 0.01
    assert rounding_for("unknown", 10_000) is None and rounding_for("bleu2", 1) is None
    assert rounding_for("bleu2", 2) == {"mean": -1, "ci95": -1}  # 2.5 -> 10; 4.9 -> 10
    assert decimals_for(1.0, 5) == 0 and decimals_for(1.0, 50) == 1  # exactly 1 and 0.1
    assert decimals_for(1.0, 50, factor=1.0) == 1 and decimals_for(1.0, 5000, factor=1.0) == 3
    assert (floor_studies(0), floor_studies(1), floor_studies(2), floor_studies(3)) == (2, 2, 2, 3)
    assert floor_studies(1000) == 990 and floor_studies(1000, 0.5) == 500


def test_study_coupling_by_hand():
    from rexrank.backend.privacy import study_coupling

    def green(cap):
        return {"config": {"length_cap": cap}}

    assert study_coupling("green", green("official: a batch of 8 in input order"), 100) == 8
    assert study_coupling("green", green("a batch of 0 in input order"), 100) == 1
    assert study_coupling("green", green("batches of similar length"), 100) == 100
    assert study_coupling("green", green("batches of similar length"), 0) == 1
    assert study_coupling("green", green("none"), 100) == 1
    assert study_coupling("green", None, 100) == study_coupling("green", {}, 100) == 1
    assert study_coupling("green", {"config": None}, 100) == 1
    assert study_coupling("bleu2", green("a batch of 8 in input order"), 100) == 1


def test_published_values_are_noisy_clamped_rounded_and_never_minus_zero():
    from rexrank.backend.privacy import _published

    for value in (None, True, "0.5", math.nan, math.inf):
        assert _published(value, scale=1.0, decimals=2, rng=FixedRng()) is None
    assert _published(0.3, scale=0.1, decimals=3, rng=FixedRng(0.0123)) == 0.312  # 0.3123 rounded
    assert _published(0.3, scale=0.1, decimals=3, rng=FixedRng(5.0), low=0.0, high=1.0) == 1.0
    assert _published(0.3, scale=0.1, decimals=3, rng=FixedRng(-5.0), low=0.0, high=1.0) == 0.0
    zero = _published(-0.0001, scale=0.1, decimals=2, rng=FixedRng())
    assert zero == 0.0 and math.copysign(1.0, zero) == 1.0


def test_a_mean_over_fewer_than_the_floor_is_scaled_down_by_hand():
    """mean' = low + (mean − low) · scored / L: the missing studies at the range's low end."""
    from rexrank.backend.privacy import _floored

    assert _floored({"mean": 0.5, "ci95": 0.04, "n": 495}, -1.0, 990) == pytest.approx((-1 + 1.5 * 0.5, 0.04))
    assert _floored({"mean": 0.5, "ci95": math.nan, "n": 495}, 0.0, 990) == (0.25, 0.0)
    assert _floored({"mean": 0.5, "ci95": None, "n": 495}, 0.0, 990) == (0.25, 0.0)
    assert _floored({"mean": 0.3, "ci95": 0.1, "n": 0}, -1.0, 990) == (-1.0, 0.0)
    assert _floored({"mean": None, "ci95": 0.1, "n": 5}, 0.0, 990) == (0.0, 0.0)
    assert _floored({"mean": math.nan, "ci95": 0.1, "n": 5}, 0.0, 990) == (0.0, 0.0)
    at_floor = _floored({"mean": 0.3, "ci95": math.nan, "n": 990}, 0.0, 990)
    assert at_floor[0] == 0.3 and math.isnan(at_floor[1])  # at the floor: as scored, unchanged
    assert _floored({"mean": 0.3, "ci95": 0.1}, 0.0, 990) == (0.3, 0.1)  # no count: as scored


def _private(results, **kwargs):
    from rexrank.backend.privacy import private_results

    return private_results(results, **kwargs)["metrics"]


def test_private_results_by_hand():
    """What each metric of a private result keeps: its published columns only, the noise of
    its coupling and ε, the clamps, and a privacy note; n comes from the predictions when the
    test set does not say it."""
    one = {"mean": 0.3, "ci95": 0.02, "n": 1000}
    results = {"predictions": {"n": 1000}, "metrics": {
        "bleu2": {"scores": {"radgraph": one, "bleu2": one}, "higher_is_better": True, "n_failed": 3},
        "unknown": {"scores": {"bleu2": one}},
        "nothing": {},
    }}
    rng = FixedRng()
    out = _private(results, rng=rng, epsilon=1.0, min_coverage=0.5)
    # L = 500 (min_coverage 0.5), ε = 1: b = 1 / 500 and 1.96 / √(500 · 499)
    assert rng.scales == pytest.approx([1 / 500, 1.96 / math.sqrt(500 * 499)])
    assert out["bleu2"] == {"scores": {"bleu2": {"mean": 0.3, "ci95": 0.02}},
                            "rounding_decimals": {"bleu2": {"mean": 2, "ci95": 2}},
                            "privacy": {"mechanism": "laplace", "epsilon_per_number": 1.0, "studies_at_least": "50%"},
                            "higher_is_better": True}
    assert out["unknown"]["scores"] == {} and out["nothing"]["scores"] == {}
    assert _private({"metrics": {"bleu2": {"scores": {"bleu2": one}}}}, rng=FixedRng())["bleu2"]["scores"] == {}
    assert _private({"test_set": {"n_studies": 1}, "metrics": {"bleu2": {"scores": {"bleu2": one}}}},
                    rng=FixedRng())["bleu2"]["scores"] == {}
    assert _private({"test_set": {"n_studies": 1000}}, rng=FixedRng()) == {}
    # noise far out of range: the mean is clamped to [0, 1], the CI to ≥ 0
    for noise, mean, ci in ((5.0, 1.0, 5.02), (-5.0, 0.0, 0.0)):
        published = _private(results, rng=FixedRng(noise))["bleu2"]["scores"]["bleu2"]
        assert published == {"mean": mean, "ci95": ci}


@pytest.mark.parametrize("batch, n_studies, decimals", [(8, 10_000, 2), (2, 10_000, 3)])
def test_a_coupled_metrics_noise_and_note_by_hand(batch, n_studies, decimals):
    """GREEN's official batches of k: Δ = k · w / L, so the scale is k times larger, the
    decimals fit k · w, and the note says k."""
    one = {"mean": 0.3, "ci95": 0.02, "n": n_studies}
    provenance = {"config": {"length_cap": f"official: a batch of {batch} in input order"}}
    rng = FixedRng()
    out = _private({"test_set": {"n_studies": n_studies},
                    "metrics": {"green": {"scores": {"green": one}, "provenance": provenance}}}, rng=rng)
    floor = math.ceil(0.99 * n_studies)
    assert rng.scales == pytest.approx([batch / floor / 0.5, batch * 1.96 / math.sqrt(floor * (floor - 1)) / 0.5])
    assert out["green"]["rounding_decimals"]["green"]["mean"] == decimals
    assert out["green"]["privacy"]["study_coupling"] == batch
    similar = {"config": {"length_cap": "batches of similar length"}}
    rng = FixedRng()
    _private({"test_set": {"n_studies": 100}, "metrics": {"green": {"scores": {"green": one}, "provenance": similar}}},
             rng=rng)
    assert rng.scales[0] == pytest.approx(100 / 99 / 0.5)  # the whole set: k = n = 100, L = 99


def test_the_private_view_keeps_four_fields():
    from rexrank.backend.privacy import private_view

    summary = {"scores": 1, "rounding_decimals": 2, "privacy": 3, "higher_is_better": 4, "n": 5, "n_failed": 6}
    assert private_view(summary) == {"scores": 1, "rounding_decimals": 2, "privacy": 3, "higher_is_better": 4}


def test_a_private_validation_message_by_hand():
    from rexrank.backend.privacy import validation_message

    tail = " (a private test set's study ids are never listed)"
    details = {"missing": ["a", "b", "c"], "unknown": ["x"], "duplicates": ["d", "e"], "non_string": ["f"]}
    assert validation_message(SubmissionError("no", details=details), 10) == (
        "the predictions do not match the private test set: 3 of 10 studies have no prediction; "
        "1 submitted study ids are not in the test set; 2 study ids appear more than once; "
        "1 predictions are not strings" + tail)
    assert validation_message(SubmissionError("no", details={"missing": ["a"]}), None) == (
        "the predictions do not match the private test set: 1 studies have no prediction" + tail)
    assert validation_message(SubmissionError("no"), 10) == (
        "the predictions do not match the private test set: they could not be read as id/prediction pairs" + tail)


def test_public_messages_by_hand():
    from rexrank.backend.privacy import public_message

    # the longest known path first: a shorter one inside it must not cut it in two
    known = ["store x", "/srv/store x/y z"]
    assert public_message("at /srv/store x/y z.", known_paths=known) == "at <server path>."
    assert public_message("at /srv/store x/y z.", known_paths=list(reversed(known))) == "at <server path>."
    assert public_message("see d1 now", known_paths=["d1"]) == "see <server path> now"
    assert public_message("a/b or c", known_paths=["/", "", None, "c"]) == "a/b or c"  # one character is no path
    assert public_message("open /srv/rexrank/x.json failed") == "open <server path> failed"
    assert public_message("x" * 3000) == "x" * 2000
    assert public_message("x" * 30, limit=10) == "x" * 10


def test_leaks_are_found_in_keys_values_lists_json_and_broken_utf8():
    from rexrank.backend.privacy import find_leaks, normalise

    assert normalise("  The\tHEART\n is  ") == "the heart is"
    ref = 'The heart "size" is normal.\nNo effusion.'
    refs = [ref, "short one", "", "a" * 25, "b" * 26]
    assert find_leaks([{ref.upper(): 1}], refs) == [0]  # a key
    assert find_leaks([{"k": {"j": [ref]}}], refs) == [0]  # a nested value
    assert find_leaks([json.dumps({"k": ref}).encode()], refs) == [0]  # escaped quotes and newline
    assert find_leaks([b"\xff not json " + ref.encode(), "nothing"], refs) == [0]  # broken UTF-8
    assert find_leaks([b"not json", "x " + ref], refs) == [0]  # a later payload is read too
    assert find_leaks(["short one " + "a" * 25 + " " + "b" * 25], refs) == [3]  # 25 characters are enough
