"""A private test set reveals nothing per study (issue 13): no ids in messages, aggregates
rounded so that one study cannot be read off a mean, and failed validation uses quota."""
from __future__ import annotations

import math

import pytest

import rexrank.store.store as store_module
from rexrank.backend.worker import Worker
from rexrank.errors import SubmissionError
from rexrank.metrics.registry import get_metric
from rexrank.store import FAILED, Quota, open_store
from support.backend_fixtures import private_set, test_metrics  # noqa: F401 (fixtures)
from support.requests import submit, write_jsonl
from support.backend_fixtures import N, NoNoise
from support.backend_fixtures import big_private_set  # noqa: F401 (fixtures)

def numbers(obj):
    if isinstance(obj, bool):
        return
    if isinstance(obj, (int, float)):
        yield float(obj)
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from numbers(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from numbers(v)


def without_timing(record: dict) -> dict:
    return {name: {k: v for k, v in s.items() if k != "seconds"} for name, s in record["summaries"].items()}


def test_one_study_cannot_be_read_off_a_private_mean(tmp_path, big_private_set, monkeypatch):
    import numpy as np

    from rexrank.backend import privacy

    # the same noise draws for both probes: what remains to hide a study is the rounding
    # (noise alone: test_private_attack.py)
    monkeypatch.setattr(privacy, "secure_rng", lambda: np.random.default_rng(20))
    data_dir, studies = big_private_set
    target = "RG0042"
    reference = studies[target]["section_findings"]
    guesses = {"close": reference.replace("unchanged", "new"), "far": "An opacity in the lower zone, unchanged."}
    store = open_store(tmp_path / "s", quota=Quota(0))
    records = {}
    for label, guess in guesses.items():
        # the probe: every prediction empty except the one study
        preds = write_jsonl(tmp_path / f"{label}.jsonl", {sid: (guess if sid == target else "") for sid in studies})
        req = submit(store, preds, test_set="rexgradient", model_name=f"probe-{label}")
        Worker(store, data_dir=data_dir, metrics="bleu2", worker_id="w").run(once=True)
        records[label] = store.get_result(req["id"])
    for label, guess in guesses.items():
        secret = get_metric("bleu2").score([guess], [reference]).value  # what the prober wants
        assert secret > 0.005
        record = records[label]
        published = record["values"]["bleu2"]
        assert published["n"] is None  # how many studies a metric scored is not published either
        assert published["mean"] * N != pytest.approx(secret, abs=1e-6)  # used to be equal, exactly
        assert all(not math.isclose(x, secret, abs_tol=1e-9) for x in numbers(record))  # no max/min/std holds it
    # the two probes publish exactly the same numbers: nothing tells the studies' scores apart
    assert [r["values"] for r in records.values()] == [records["far"]["values"]] * 2
    assert without_timing(records["close"]) == without_timing(records["far"])
    summary = records["far"]["summaries"]["bleu2"]
    assert summary["rounding_decimals"] == {"bleu2": {"mean": 2, "ci95": 2}}  # step >= 5 x (1 / N)
    assert set(summary["scores"]["bleu2"]) == {"mean", "ci95"}  # noised; no counts


# Hand-derived (docstring of rexrank.backend.privacy): decimals d = floor(log10(n / (5 × w))) for
# the mean and floor(log10(n / (5 × 1.96 × w))) for the CI, w the width of a per-study score's
# range: 1 for [0, 1] scores, 2 for [-1, 1], 4 for FineRadScore's 0-4 severity, and
# 5.0958 - (-1.4407) = 6.5365 for RadCliQ-v1 (its corners from the official coefficients:
# radgraph 0 / bertscore -1 / sembscore -1 give 0.6698 + 2.6704 + 1.7557; 1 / 1 / 1 give
# -0.5754 - 0.6313 - 0.2340). E.g. bertscore at 10,000: log10(10000 / 10) = 3, log10(10000 / 19.6) = 2.71.
EXPECTED_DECIMALS = {  # column: {n: (mean, ci95)}
    "bleu2": {590: (2, 1), 2347: (2, 2), 10_000: (3, 3), 123_456: (4, 4)},
    "bertscore": {590: (1, 1), 2347: (2, 2), 10_000: (3, 2), 123_456: (4, 3)},
    "fineradscore": {590: (1, 1), 2347: (2, 1), 10_000: (2, 2), 123_456: (3, 3)},
    "radcliq": {590: (1, 0), 2347: (1, 1), 10_000: (2, 2), 123_456: (3, 3)},
}
EXPECTED_RANGE = {"bleu2": (0, 1), "radgraph": (0, 1), "ratescore": (0, 1), "green": (0, 1), "crimson": (-1, 1),
                  "bertscore": (-1, 1), "sembscore": (-1, 1), "fineradscore": (0, 4),
                  "fineradscore_no_error": (0, 1), "fineradscore_no_actionable_error": (0, 1),
                  "fineradscore_no_significant_error": (0, 1), "radcliq": (-1.4407, 5.0958),
                  "rouge": (0, 1), "temporal_f1": (0, 1), "srr_bert": (0, 1)}


def test_the_published_precision_hides_one_study_for_any_size():
    from rexrank.backend.privacy import PER_STUDY_RANGE, rounding_for

    assert set(PER_STUDY_RANGE) == set(EXPECTED_RANGE)
    for column, (low, high) in EXPECTED_RANGE.items():
        assert PER_STUDY_RANGE[column] == pytest.approx((low, high), abs=1e-4)
    for column, by_n in EXPECTED_DECIMALS.items():
        for n, (mean, ci) in by_n.items():
            assert rounding_for(column, n) == {"mean": mean, "ci95": ci}, (column, n)
    for n in (590, 2347, 10_000, 123_456):
        for column, (low, high) in EXPECTED_RANGE.items():
            rule = rounding_for(column, n)
            width = high - low
            # one study moves the mean by <= width / n and the CI by <= ~1.96 width / n: the step is 5 times that
            assert 10 ** -rule["mean"] >= 5 * width / n * (1 - 1e-4)
            assert 10 ** -rule["ci95"] >= 5 * 1.96 * width / n * (1 - 1e-4)
            # and no coarser than needed (the next finer step would be too fine)
            assert 10 ** -(rule["mean"] + 1) < 5 * width / n
            assert 10 ** -(rule["ci95"] + 1) < 5 * 1.96 * width / n
    assert rounding_for("bertscore_precision", 10_000) is None  # no declared range: not published
    assert rounding_for("bleu2", 1) is None


@pytest.mark.parametrize("column, n_studies, raw, published", [
    # bleu2 at 590 studies: mean 2 decimals, CI 1 (log10(590 / 9.8) = 1.78)
    ("bleu2", 590, (0.123456, 0.0768), (0.12, 0.1)),
    # bertscore at 10,000 studies (ReXGradient's size): mean 3 decimals, CI 2
    ("bertscore", 10_000, (0.56789, 0.0166), (0.568, 0.02)),
])
def test_a_private_ci_is_rounded_with_its_own_decimals(column, n_studies, raw, published):
    """The CI's step comes from the CI's one-study change (1.96 × the mean's), so it can be
    coarser than the mean's; rounding it with the mean's decimals would publish a digit that
    one study can move. (Kept apart from any noise added before rounding: these are the
    decimals alone.)"""
    from rexrank.backend.privacy import private_results

    mean, ci = raw
    results = {"test_set": {"n_studies": n_studies}, "predictions": {"n": n_studies},
               "metrics": {column: {"scores": {column: {"n": n_studies, "n_missing": 0, "mean": mean, "ci95": ci,
                                                        "std": 0.3, "max": 1.0}},
                                    "higher_is_better": True}}}
    scores = private_results(results, rng=NoNoise())["metrics"][column]["scores"][column]
    assert scores == {"mean": published[0], "ci95": published[1]}  # no counts


def test_failed_validation_on_a_private_set_uses_the_quota(tmp_path, big_private_set, monkeypatch):
    data_dir, studies = big_private_set
    store = open_store(tmp_path / "s", quota=Quota(1, 7))
    probe = write_jsonl(tmp_path / "probe.jsonl", {"RG0001": "x", "NOT-AN-ID": "y"})
    first = submit(store, probe, test_set="rexgradient")
    Worker(store, data_dir=data_dir, metrics="bleu2", worker_id="w").run(once=True)
    failed = store.get_request(first["id"])
    assert failed["status"] == FAILED and failed["failure_kind"] == "validation"
    assert f"{N - 1} of {N} studies have no prediction" in failed["error"] and "RG0" not in failed["error"]
    next_probe = write_jsonl(tmp_path / "probe2.jsonl", {"RG0002": "x"})
    with pytest.raises(SubmissionError, match="already has 1 submission"):  # the next probe waits a week
        submit(store, next_probe, test_set="rexgradient", model_name="model-b")
    with monkeypatch.context() as m:  # and a client that skips the check gains nothing
        m.setattr(store_module, "check_policy", lambda *a, **k: None)
        sneaked = submit(store, next_probe, test_set="rexgradient", model_name="model-b")
    Worker(store, data_dir=data_dir, metrics="bleu2", worker_id="w").run(once=True)
    refused = store.get_request(sneaked["id"])
    assert refused["status"] == FAILED and "already has 1 submission" in refused["error"]


def test_a_filing_holding_the_private_set_still_checks_structure_only(tmp_path, big_private_set):
    # issue 19.3: the public service never consults the private set, whatever its data dir
    # holds; the backend checks membership, answers in counts and counts the attempt
    data_dir, _ = big_private_set
    store = open_store(tmp_path / "s", quota=Quota(1, 7))
    probe = write_jsonl(tmp_path / "probe.jsonl", {"RG0001": "x", "RG0002": "y", "GUESS-1": "z"})
    filed = submit(store, probe, test_set="rexgradient", data_dir=data_dir / "rexgradient")
    assert filed["predictions"]["ids_checked"] is False
    Worker(store, data_dir=data_dir, metrics="bleu2", worker_id="w").run(once=True)
    message = store.get_request(filed["id"])["error"]
    assert f"{N - 2} of {N} studies have no prediction" in message and "1 submitted study ids are not in" in message
    assert "RG0" not in message and "GUESS" not in message
    with pytest.raises(SubmissionError, match="already has 1 submission"):
        submit(store, write_jsonl(tmp_path / "probe2.jsonl", {"RG0003": "x"}), test_set="rexgradient",
               data_dir=data_dir / "rexgradient", model_name="model-b")


def test_a_coverage_failure_on_a_private_set_names_no_study(tmp_path, private_set, monkeypatch):
    from rexrank.backend import public_door
    from support.backend_fixtures import PRIVATE_SENTENCES

    data_dir, preds = private_set
    store = open_store(tmp_path / "s")
    req = submit(store, preds, test_set="rexgradient")
    # `leaky` fails one study with a reason that quotes its reference; on 6 studies the noisy
    # threshold's margin lets 5 of 6 pass, so the margin is taken away here
    monkeypatch.setattr(public_door.P, "COVERAGE_MARGIN", -1e6)
    Worker(store, data_dir=data_dir, metrics="leaky", worker_id="w").run(once=True)
    failed = store.get_request(req["id"])
    assert failed["status"] == FAILED and failed["failure_kind"] == "coverage"
    assert failed["error"] == public_door.PRIVATE_COVERAGE_FAILED  # the fixed vocabulary: no metric, no count
    assert not any(s[:20] in failed["error"] for s in PRIVATE_SENTENCES) and "RG0" not in failed["error"]
    assert store.list_results() == []
