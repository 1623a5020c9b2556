"""Issue 32: behaviours the mutation tool (`python benchmarks/mutation.py`) found unpinned, the
independent audit's eight gaps first. Every expected value comes from an independent oracle:
scipy, a hand computation written out here, or official outputs (IU-Xray's `report` field),
never from rexrank's own earlier output. Equivalent mutants are in
benchmarks/mutation_equivalents.txt."""
from __future__ import annotations

import dataclasses
import json
import math
import re
import threading
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats as sps

from rexrank.errors import SubmissionError


# ---- stats: the bootstrap draws every study ----------------------------------------------
def test_the_bootstrap_draws_the_last_study_too():
    """One positive study in ten: a resample's mean is Binomial(10, 0.1) / 10, so the
    percentile interval is that distribution's 2.5 % and 97.5 % quantiles (0 and 0.3:
    P(X <= 2) = 0.930 < 0.975 < P(X <= 3) = 0.987). A bootstrap that never draws the last
    study would give (0, 0)."""
    from rexrank.stats import bootstrap_ci

    for where in (0, 9):  # the positive study first, then last
        values = np.zeros(10)
        values[where] = 1.0
        low, high = bootstrap_ci(values, resamples=20_000, seed=3)
        assert (low, high) == (sps.binom.ppf(0.025, 10, 0.1) / 10, sps.binom.ppf(0.975, 10, 0.1) / 10) == (0.0, 0.3)


def test_the_bootstrap_interval_matches_scipy_on_a_small_sample():
    from rexrank.stats import aggregate

    values = np.array([0.1, 0.9, 0.35, 0.6, 0.2, 0.75, 0.05, 0.95])
    ours = aggregate(values, bootstrap=40_000, seed=1)
    theirs = sps.bootstrap((values,), np.mean, n_resamples=40_000, method="percentile", random_state=7).confidence_interval
    assert ours.bootstrap_low == pytest.approx(theirs.low, abs=0.01)
    assert ours.bootstrap_high == pytest.approx(theirs.high, abs=0.01)
    assert (ours.bootstrap_resamples, ours.bootstrap_seed) == (40_000, 1)


# ---- tiers: the paired t-test has n - 1 degrees of freedom --------------------------------
@pytest.mark.parametrize("n", [2, 3, 5])
def test_the_tier_test_is_scipys_paired_t_test_at_small_n(n):
    from rexrank.leaderboard.tiers import paired_p

    rng = np.random.default_rng(n)
    a = rng.random(n)
    b = a - 0.1 + 0.05 * rng.standard_normal(n)
    ids = np.array([f"s{i}" for i in range(n)])
    p, used = paired_p((ids, a), (ids, b))
    assert used == n
    assert p == pytest.approx(sps.ttest_rel(a, b).pvalue, rel=1e-12)


# ---- progress: best so far for a lower-is-better metric ----------------------------------
def test_progress_best_so_far_is_the_running_minimum_when_lower_is_better(monkeypatch):
    from rexrank.leaderboard import progress
    from rexrank.results_schema import COLUMNS_BY_KEY

    monkeypatch.setitem(COLUMNS_BY_KEY, "bleu2", dataclasses.replace(COLUMNS_BY_KEY["bleu2"], higher_is_better=False))
    frame = pd.DataFrame({
        "test_set": "iu_xray", "track": "findings",
        "model_name": ["A", "B", "C", "D", "E"],
        "date": ["2023", "2024-03-01", "2024-03-01", "2025", "2026-01-02"],
        "bleu2": [0.5, 0.7, 0.4, 0.6, 0.3],
    })
    points, left_out = progress.progress_points(frame, "iu_xray", "findings", "bleu2")
    assert left_out == 0
    # by hand: 0.5; then min(0.5, 0.7, 0.4) = 0.4 on 2024-03-01; 0.4 again in 2025; 0.3
    assert points["best"].tolist() == [0.5, 0.4, 0.4, 0.4, 0.3]
    higher = pd.DataFrame({**frame.to_dict("list")})
    monkeypatch.setitem(COLUMNS_BY_KEY, "bleu2", dataclasses.replace(COLUMNS_BY_KEY["bleu2"], higher_is_better=True))
    points, _ = progress.progress_points(higher, "iu_xray", "findings", "bleu2")
    assert points["best"].tolist() == [0.5, 0.7, 0.7, 0.7, 0.7]


# ---- Eval Results: a mean of exactly 0 is a value ------------------------------------------
def test_eval_results_export_keeps_a_column_whose_mean_is_zero():
    from rexrank.hub.eval_results import eval_results_file

    record = {"id": "rexrank/iu_xray/findings/zero", "test_set": "iu_xray", "track": "findings", "date": "2026-11-01",
              "source": "rexrank",
              "values": {"bleu2": {"mean": 0.0, "ci95": 0.0, "n": 590}, "radcliq_v1_inv": {"mean": 0.5, "ci95": None, "n": None}}}
    entries = eval_results_file(record, org="rexrank").entries
    by_task = {e["dataset"]["task_id"]: e for e in entries}
    assert set(by_task) == {"findings_bleu2", "findings_radcliq_v1_inv"}
    assert by_task["findings_bleu2"]["value"] == 0.0
    assert "n = 590 studies" in by_task["findings_bleu2"]["notes"]
    assert "95% CI ± 0" in by_task["findings_bleu2"]["notes"]


# ---- quota: the window is counted in days --------------------------------------------------
def _request(submitted_time: str, **extra) -> dict:
    return {"id": "r1", "submitter": "alice", "test_set": "iu_xray", "track": "findings", "status": "FINISHED",
            "model_name": "M", "submitted_time": submitted_time, "predictions": {"sha256": "x"}, **extra}


def test_the_quota_window_is_days_not_hours():
    from rexrank.store.accounts import Account
    from rexrank.store.policy import Quota, check_quota
    from rexrank.store.records import iso, parse_iso

    earlier = [_request("2026-11-01T00:00:00Z")]
    start = parse_iso("2026-11-01T00:00:00Z")
    quota = Quota(1, 7)
    for hours in (8, 24, 6 * 24 + 23):  # one submission per 7 days: all inside the window
        with pytest.raises(SubmissionError, match="next submission possible after 2026-11-08T00:00:00"):
            check_quota(earlier, submitter=Account("alice"), test_set="iu_xray", track="findings",
                        now=start + hours * 3600, quota=quota)
    # 7 days and a second later: allowed (hand computation: 7 x 86,400 s)
    check_quota(earlier, submitter=Account("alice"), test_set="iu_xray", track="findings", now=start + 7 * 86400 + 1,
                quota=quota)
    assert iso(start + 7 * 86400).startswith("2026-11-08T00:00:00")


# ---- names: runs of inner whitespace are one space ---------------------------------------
@pytest.mark.parametrize("variant", ["Med  Versa", "Med \t Versa", "Med\u00a0\u00a0Versa", " Med   Versa "])
def test_model_names_differing_in_inner_whitespace_runs_are_the_same_name(variant):
    from rexrank.store.names import name_key, same_name
    from rexrank.store.policy import check_duplicate

    assert same_name(variant, "Med Versa")
    assert name_key(variant) == name_key("med versa")
    assert not same_name("MedVersa2", "Med Versa")
    first = _request("2026-01-01T00:00:00Z", model_name="Med Versa")
    with pytest.raises(SubmissionError, match="identical resubmission"):  # one model of the namespace
        check_duplicate([first], {**first, "id": "r2", "model_name": variant})


# ---- identity: only a user's token names a submitter ---------------------------------------
@pytest.fixture
def whoami_server(monkeypatch):
    """A stand-in for the Hub's whoami endpoint answering `answer["body"]` (huggingface_hub
    allowed online: the server is on 127.0.0.1)."""
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    answer = {"body": {}}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            answer.setdefault("tokens", []).append(self.headers.get("Authorization"))
            body = json.dumps(answer["body"]).encode()
            self.send_response(answer.get("status", 200))
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", answer
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("kind", ["org", "app", "space"])
def test_an_organisation_or_app_token_is_no_submitter(whoami_server, kind):
    from rexrank.leaderboard.identity import verified_submitter

    endpoint, answer = whoami_server
    answer["body"] = {"type": kind, "name": "acme", "id": "a1"}
    with pytest.raises(SubmissionError) as err:
        verified_submitter("hf_token", endpoint=endpoint)
    assert str(err.value) == "the token sent is not a user's token: submit with your own account's token"
    answer["body"] = {"type": "user", "name": "", "id": "u1"}
    with pytest.raises(SubmissionError, match="not a user's token"):
        verified_submitter("hf_token", endpoint=endpoint)
    answer["body"] = {"type": "user", "name": "alice", "id": "u1"}
    assert verified_submitter("hf_token", endpoint=endpoint).user.name == "alice"


def test_a_submitter_is_whoamis_id_with_its_name_and_its_organisations(whoami_server):
    from rexrank.leaderboard.identity import verified_submitter
    from rexrank.store.accounts import Account

    endpoint, answer = whoami_server
    answer["body"] = {"type": "user", "name": "alice", "id": "u1",
                      "orgs": [{"type": "org", "name": "acme", "id": "o1"}, {"name": "no-id"}, "junk"]}
    who = verified_submitter("hf_token", endpoint=endpoint)
    assert who.user == Account("alice", "u1") and who.orgs == (Account("acme", "o1"),)
    assert tuple(a.name for a in who.accounts) == ("alice", "acme")
    answer["body"] = {"type": "user", "name": "alice"}  # no id: a renamed account could not be told apart
    with pytest.raises(SubmissionError) as err:
        verified_submitter("hf_token", endpoint=endpoint)
    assert str(err.value) == ("the Hub's answer about the token has no account id; this leaderboard cannot tell who "
                              "is submitting — try again later")


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


def test_the_bootstrap_is_the_percentile_bootstrap_of_numpys_generator():
    """Written out by hand: `resamples` index rows drawn uniformly from [0, n) by numpy's
    default generator seeded with `seed`, each row's mean, then the 2.5 % and 97.5 %
    quantiles (numpy's default linear interpolation). Defaults: 1000 resamples, seed 0."""
    from rexrank.stats import bootstrap_ci

    values = np.array([0.12, 0.5, 0.33, 0.91, 0.07, 0.64, 0.28])
    for resamples, seed, level in ((1000, 0, 0.95), (5, 11, 0.95), (300, 2, 0.8)):
        idx = np.random.default_rng(seed).integers(0, values.size, size=(resamples, values.size))
        means = values[idx].mean(axis=1)
        tail = (1 - level) / 2
        expected = (np.quantile(means, tail), np.quantile(means, 1 - tail))
        assert bootstrap_ci(values, resamples=resamples, seed=seed, level=level) == pytest.approx(expected, rel=1e-12)
    idx = np.random.default_rng(0).integers(0, values.size, size=(1000, values.size))
    assert bootstrap_ci(values) == pytest.approx(np.quantile(values[idx].mean(axis=1), [0.025, 0.975]), rel=1e-12)


def test_one_resample_is_allowed_and_none_is_refused():
    from rexrank.stats import bootstrap_ci

    values = np.array([0.2, 0.4, 0.9])
    idx = np.random.default_rng(5).integers(0, 3, size=(1, 3))
    only = float(values[idx].mean())
    assert bootstrap_ci(values, resamples=1, seed=5) == (only, only)
    with pytest.raises(ValueError, match=r"^bootstrap resamples must be >= 1, got 0$"):
        bootstrap_ci(values, resamples=0)


def test_aggregate_by_hand_with_none_and_nan_as_missing():
    """Three scores and two missing (None, NaN): mean, sample SD (ddof 1), SEM, 1.96 SEM by hand."""
    from rexrank.stats import aggregate

    s = aggregate([0.2, None, 0.4, math.nan, 0.9], allow_missing=True)
    mean = (0.2 + 0.4 + 0.9) / 3
    sd = math.sqrt(((0.2 - mean) ** 2 + (0.4 - mean) ** 2 + (0.9 - mean) ** 2) / 2)
    assert (s.n, s.n_missing) == (3, 2)
    assert (s.mean, s.std, s.sem, s.ci95) == pytest.approx((mean, sd, sd / math.sqrt(3), 1.96 * sd / math.sqrt(3)), rel=1e-12)
    assert s.sem == pytest.approx(sps.sem([0.2, 0.4, 0.9]), rel=1e-12)
    assert (s.ci_low, s.ci_high) == pytest.approx((mean - s.ci95, mean + s.ci95), rel=1e-12)
    # no bootstrap unless asked: its fields stay out of the summary
    assert (s.bootstrap_low, s.bootstrap_high, s.bootstrap_resamples, s.bootstrap_seed) == (None,) * 4
    assert set(s.to_dict()) == {"n", "mean", "std", "sem", "ci95", "n_missing"}


def test_aggregate_of_one_and_of_no_scored_study():
    from rexrank.stats import aggregate

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "degrees of freedom <= 0" from numpy: one study has no SD
        one = aggregate([0.7])
    assert (one.n, one.mean, one.n_missing) == (1, 0.7, 0)
    assert math.isnan(one.std) and math.isnan(one.sem) and math.isnan(one.ci95)  # no spread from one study
    two = aggregate([0.25, 0.75])
    assert (two.std, two.sem) == pytest.approx((math.sqrt(0.125), 0.25), rel=1e-12)  # n = 2 has a spread
    none = aggregate([math.nan, None], allow_missing=True)
    assert (none.n, none.n_missing) == (0, 2)
    assert all(math.isnan(v) for v in (none.mean, none.std, none.sem, none.ci95))
    assert none.to_dict()["n"] == 0 and none.to_dict()["n_missing"] == 2


def test_aggregate_with_a_bootstrap_records_its_resamples_and_seed():
    from rexrank.stats import aggregate, bootstrap_ci

    values = [0.1, 0.5, 0.2, 0.8, 0.4]
    s = aggregate(values, bootstrap=40, seed=9)
    idx = np.random.default_rng(9).integers(0, 5, size=(40, 5))
    low, high = np.quantile(np.array(values)[idx].mean(axis=1), [0.025, 0.975])
    assert (s.bootstrap_low, s.bootstrap_high) == pytest.approx((low, high), rel=1e-12)
    assert (s.bootstrap_resamples, s.bootstrap_seed) == (40, 9)
    assert s.to_dict()["bootstrap_resamples"] == 40 and s.to_dict()["bootstrap_seed"] == 9
    assert aggregate(values, bootstrap=40).bootstrap_seed == 0  # the default seed
    assert (aggregate(values, bootstrap=40).bootstrap_low,) == (bootstrap_ci(np.array(values), resamples=40, seed=0)[0],)


def test_aggregate_messages_name_the_scores_and_the_first_ten_positions():
    from rexrank.stats import aggregate

    values = [0.5] * 3 + [math.nan] * 12
    with pytest.raises(ValueError) as err:
        aggregate(values)
    assert str(err.value) == ("scores: 12 per-study scores are NaN (first positions [3, 4, 5, 6, 7, 8, 9, 10, 11, 12]); "
                              "pass allow_missing=True to report them as missing")
    with pytest.raises(ValueError, match=r"^bleu2: 1 per-study scores are NaN \(first positions \[0\]\)"):
        aggregate([math.nan, 0.1], name="bleu2")
    with pytest.raises(ValueError) as err:
        aggregate([math.inf] * 11 + [0.2, -math.inf], name="rouge")
    assert str(err.value) == "rouge: infinite per-study scores at positions [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]"
    with pytest.raises(ValueError) as err:
        aggregate([[0.1, 0.2]], name="green")
    assert str(err.value) == "green: expected a 1-D sequence of per-study scores, got shape (1, 2)"
    with pytest.raises(ValueError, match=r"^scores: infinite per-study scores at positions \[1\]$"):
        aggregate([0.1, math.inf])


# ---- results_schema: every metric of a run reaches its column --------------------------------
def test_every_metric_of_a_run_reaches_its_leaderboard_column():
    from rexrank.results_schema import leaderboard_values

    plain = ["bleu2", "bertscore", "sembscore", "radgraph", "ratescore", "green", "rouge", "temporal_f1", "srr_bert",
             "crimson"]
    metrics = {name: {"scores": {name: {"mean": 0.01 * (i + 1), "ci95": 0.001 * (i + 1), "n": 100 + i}}}
               for i, name in enumerate(plain)}
    metrics["radcliq"] = {"scores": {"radcliq": {"mean": 2.0, "ci95": 0.1, "n": 590}, "radcliq_v0": {"mean": 9.0}}}
    metrics["fineradscore"] = {"scores": {"fineradscore": {"mean": 0.5, "ci95": None, "n": 588}}}
    values = leaderboard_values({"metrics": metrics})
    expected = {name: {"mean": 0.01 * (i + 1), "ci95": 0.001 * (i + 1), "n": 100 + i} for i, name in enumerate(plain)}
    # by hand: 1 / 2.0 with CI 0.1 / 2.0² = 0.025; 1 / 0.5, no CI
    expected["radcliq_v1_inv"] = {"mean": 0.5, "ci95": 0.025, "n": 590}
    expected["fineradscore_inv"] = {"mean": 2.0, "ci95": None, "n": 588}
    assert values == expected
    assert list(values)[:10] == plain  # the board's order of the plain columns


def test_leaderboard_values_of_runs_that_lack_metrics_or_scores():
    from rexrank.results_schema import leaderboard_values

    assert leaderboard_values({}) == {}
    assert leaderboard_values({"metrics": {"bleu2": {}}}) == {}
    assert leaderboard_values({"metrics": {"bleu2": {"n": 3}, "rouge": {"scores": {}}}}) == {}
    assert leaderboard_values({"metrics": {"radcliq": {"scores": {"radcliq": {"mean": 0.0, "ci95": 0.1}}}}}) == {}  # no 1/0
    only = leaderboard_values({"metrics": {"green": {"scores": {"green": {"mean": 0.3}}}}})
    assert only == {"green": {"mean": 0.3, "ci95": None, "n": None}}


# ---- progress: dates and the points ---------------------------------------------------------
@pytest.mark.parametrize("text, day", [
    ("2024", "2024-01-01"), ("2026-11", "2026-11-01"), ("2026-11-25", "2026-11-25"), (" 2025-3-7", "2025-03-07"),
    ("2026-11-25T10:00:00Z", "2026-11-25"), (2023, "2023-01-01"),
])
def test_progress_dates_are_read_as_the_earliest_day_they_can_mean(text, day):
    from rexrank.leaderboard.progress import parse_date

    assert parse_date(text) == pd.Timestamp(day)


@pytest.mark.parametrize("text", ["", None, "soon", "24", "2026-13-01", "2026-02-30", "x2024"])
def test_progress_dates_that_are_no_date_give_none(text):
    from rexrank.leaderboard.progress import parse_date

    assert parse_date(text) is None


def test_progress_points_leave_out_and_count_results_without_date_or_value():
    from rexrank.leaderboard.progress import progress_points

    frame = pd.DataFrame({
        "test_set": ["iu_xray"] * 5 + ["mimic_cxr", "iu_xray"],
        "track": ["findings"] * 6 + ["findings_impression"],
        "model_name": ["B", "A", "NoDate", "NoValue", "C", "Other set", "Other track"],
        "date": ["2025", "2025", "", "2024", "2024-06-01", "2020", "2020"],
        "bleu2": [0.2, 0.3, 0.9, np.nan, 0.25, 0.99, 0.99],
    })
    points, left_out = progress_points(frame, "iu_xray", "findings", "bleu2")
    assert left_out == 2  # NoDate, NoValue; the other set and track are not this plot's
    assert points.columns.tolist() == ["model_name", "date", "value", "best"]
    assert points["model_name"].tolist() == ["C", "A", "B"]  # by date, then name
    assert points["date"].tolist() == [pd.Timestamp("2024-06-01"), pd.Timestamp("2025-01-01"), pd.Timestamp("2025-01-01")]
    assert points["value"].tolist() == [0.25, 0.3, 0.2]
    assert points["best"].tolist() == [0.25, 0.3, 0.3]  # 2025 best of both its results (A 0.3, B 0.2)
    assert points.index.tolist() == [0, 1, 2]


# ---- Eval Results: entries and notes, written out by hand ----------------------------------------
def test_eval_results_entries_and_notes_by_hand():
    from rexrank.hub.eval_results import EvalResultsFile, eval_results_file

    record = {"id": "rexrank/iu_xray/findings_impression/m1", "test_set": "iu_xray", "track": "findings_impression",
              "date": "2026-11-02", "source": "rexrank",
              "values": {"bleu2": {"mean": 0.25, "ci95": 0.012345, "n": 590},
                         "radcliq_v1_inv": {"mean": 0.8, "ci95": None, "n": None},
                         "rouge": {"mean": 0.4, "ci95": None, "n": None},  # optional: not a task of the benchmark
                         "green": {"mean": None}}}
    out = eval_results_file(record, org="acme", endpoint="https://hub.example/")
    assert isinstance(out, EvalResultsFile)
    assert out.path == ".eval_results/rexrank_iu_xray_findings_impression.yaml"
    source = {"url": "https://hub.example/spaces/acme/leaderboard", "name": "ReXrank leaderboard", "user": "acme"}
    assert out.entries == [
        {"dataset": {"id": "acme/iu_xray", "task_id": "findings_impression_radcliq_v1_inv"}, "value": 0.8,
         "date": "2026-11-02", "source": source,
         "notes": "ReXrank 1/RadCliQ-v1, findings + impression; result rexrank/iu_xray/findings_impression/m1"},
        {"dataset": {"id": "acme/iu_xray", "task_id": "findings_impression_bleu2"}, "value": 0.25,
         "date": "2026-11-02", "source": source,
         "notes": "ReXrank BLEU, findings + impression; n = 590 studies; 95% CI ± 0.01235; "
                  "result rexrank/iu_xray/findings_impression/m1"},
    ]
    assert yaml.safe_load(out.text()) == out.entries
    assert list(out.entries[0]) == ["dataset", "value", "date", "source", "notes"]


def test_eval_results_of_a_published_figure_dated_by_year():
    from rexrank.hub.eval_results import eval_results_file

    record = {"id": "published/iu_xray/findings/x", "test_set": "iu_xray", "track": "findings", "date": "2024",
              "source": "published", "values": {"bleu2": {"mean": 0.2, "ci95": None, "n": None}}}
    [entry] = eval_results_file(record, org="rexrank").entries
    assert "date" not in entry  # a bare year is no ISO-8601 date
    assert entry["source"] == {"url": "https://huggingface.co/spaces/rexrank/leaderboard",
                               "name": "ReXrank leaderboard (figures published by ReXrank)", "user": "rexrank"}
    assert entry["notes"] == "ReXrank BLEU, findings section; dated 2024; result published/iu_xray/findings/x"
    timed = eval_results_file({**record, "date": "2026-11-02T10:00:00Z"}, org="rexrank").entries[0]
    assert timed["date"] == "2026-11-02T10:00:00Z" and "dated" not in timed["notes"]
    undated = eval_results_file({**record, "date": None}, org="rexrank").entries[0]
    assert "date" not in undated and undated["notes"] == "ReXrank BLEU, findings section; result published/iu_xray/findings/x"


def test_eval_results_refusals_say_why():
    from rexrank.hub.eval_results import ExportError, eval_results_file, exportable

    assert exportable({"test_set": "iu_xray"}) is None
    assert exportable({"test_set": "nope"}) == "unknown test set 'nope'"
    assert exportable({"test_set": "mimic_cxr"}) == ("MIMIC-CXR (test) is not published on the Hub (dua access), so there "
                                                    "is no benchmark dataset for the Hub to link the result to")
    with pytest.raises(ExportError, match=r"^result 'r9': unknown test set 'nope'$"):
        eval_results_file({"id": "r9", "test_set": "nope"}, org="o")
    with pytest.raises(ExportError, match=r"^result 'r8' has no leaderboard value to export$"):
        eval_results_file({"id": "r8", "test_set": "iu_xray", "track": "findings", "values": {}}, org="o")
    with pytest.raises(ExportError, match=r"^result 'r7' has no leaderboard value to export$"):
        eval_results_file({"id": "r7", "test_set": "iu_xray", "track": "findings"}, org="o")


def test_benchmark_definition_by_hand():
    from rexrank.hub.eval_results import benchmark_definition, benchmark_yaml, data_split, task_id
    from rexrank.testsets.registry import TEST_SETS

    spec = TEST_SETS["iu_xray"]
    definition = benchmark_definition(spec)
    assert definition["name"] == "ReXrank IU-Xray (test)"
    assert definition["evaluation_framework"] == "rexrank"
    assert "`rexrank score --dataset iu_xray`" in definition["description"]
    assert definition["description"].startswith("The IU-Xray (test) set of ReXrank, the chest X-ray report generation")
    first8 = ["radcliq_v1_inv", "bleu2", "bertscore", "sembscore", "radgraph", "ratescore", "green", "fineradscore_inv"]
    assert [t["id"] for t in definition["tasks"]] == [f"{track}_{k}" for track in ("findings", "findings_impression")
                                                      for k in first8]
    assert {(t["config"], t["split"]) for t in definition["tasks"]} == {("default", "test")}
    assert yaml.safe_load(benchmark_yaml(spec).decode()) == definition
    assert list(definition) == ["name", "description", "evaluation_framework", "tasks"]
    assert data_split(TEST_SETS["chexpert_plus"]) == "validation" and data_split(spec) == "test"
    assert task_id("findings", "bleu2") == "findings_bleu2"


# ---- tiers: the edge cases of the paired test and of the walk down the table --------------------
def _scores(ids, values):
    return np.asarray(ids, dtype=str), np.asarray(values, dtype=np.float64)


def test_the_tier_test_pairs_studies_by_id_over_those_both_scored():
    from rexrank.leaderboard.tiers import _aligned, paired_p

    a = pd.DataFrame({"id": ["s3", "s1", "s2", "s4"], "x": [0.9, 0.5, 0.7, np.nan]})
    b = pd.DataFrame({"id": ["s2", "s1", "s3", "s5"], "x": [0.6, 0.45, 0.7, 0.1]})
    ids_a, values_a = _aligned(a, "x")
    assert ids_a.tolist() == ["s1", "s2", "s3"] and values_a.tolist() == [0.5, 0.7, 0.9]  # sorted by id, NaN left out
    p, used = paired_p(_aligned(a, "x"), _aligned(b, "x"))
    assert used == 3  # s1, s2, s3: s4 has no score, s5 is b's only
    assert p == pytest.approx(sps.ttest_rel([0.5, 0.7, 0.9], [0.45, 0.6, 0.7]).pvalue, rel=1e-12)


def test_the_tier_test_with_too_few_studies_or_no_spread():
    from rexrank.leaderboard.tiers import paired_p

    assert paired_p(_scores(["a"], [0.5]), _scores(["a"], [0.1])) == (1.0, 1)  # one common study: no test
    assert paired_p(_scores(["a", "b"], [0.5, 0.2]), _scores(["c", "d"], [0.1, 0.3])) == (1.0, 0)
    assert paired_p(_scores(["a", "b", "c"], [0.5, 0.2, 0.4]), _scores(["a", "b", "c"], [0.5, 0.2, 0.4])) == (1.0, 3)
    # a constant shift: every difference 0.1, standard deviation 0 -> certain
    assert paired_p(_scores(["a", "b", "c"], [0.6, 0.3, 0.5]), _scores(["a", "b", "c"], [0.5, 0.2, 0.4]))[0] == pytest.approx(0.0, abs=0)


def _tier_table(ids, ranks, available):
    return pd.DataFrame({"id": ids, "rank": ranks, "per_study_available": available})


def test_table_tiers_walk_by_hand():
    """Four ranked results (one without per-study scores, one unranked): three neighbour
    tests, Holm-adjusted by hand."""
    from rexrank.leaderboard.tiers import ALPHA, table_tiers

    rng = np.random.default_rng(4)
    ids = [f"s{i}" for i in range(30)]
    base = rng.uniform(0.3, 0.7, 30)
    data = {"a": base + 0.3 + rng.normal(0, 0.05, 30), "b": base + 0.1 + rng.normal(0, 0.05, 30),
            "c": base + 0.099 + rng.normal(0, 0.05, 30), "d": base}
    frames = {k: pd.DataFrame({"id": ids, "rouge": v}) for k, v in data.items()}
    table = _tier_table(["a", "pub", "b", "c", "d", "unranked"], [1, 2, 3, 4, 5, np.nan],
                        [True, False, True, True, True, True])
    asked = []

    def per_study(rid):
        asked.append(rid)
        return frames.get(rid)

    cache = {}
    tiers = table_tiers(table, "rouge", per_study, p_cache=cache)
    raw = [sps.ttest_rel(data[u], data[d]).pvalue for u, d in (("a", "b"), ("b", "c"), ("c", "d"))]
    m = 3
    order = np.argsort(raw)
    adjusted, running = [0.0] * m, 0.0
    for step, i in enumerate(order):
        running = max(running, (m - step) * raw[i])
        adjusted[i] = min(1.0, running)
    expected, tier = {"a": 1}, 1
    for rid, q in zip("bcd", adjusted):
        tier += q < ALPHA
        expected[rid] = tier
    assert tiers == expected == {"a": 1, "b": 2, "c": 2, "d": 3}
    assert sorted(asked) == ["a", "b", "c", "d"]  # neither the published nor the unranked row is read
    assert set(cache) == {("a", "b", "rouge"), ("b", "c", "rouge"), ("c", "d", "rouge")}
    assert [cache[k] for k in (("a", "b", "rouge"), ("b", "c", "rouge"), ("c", "d", "rouge"))] == pytest.approx(raw, rel=1e-12)
    assert ALPHA == 0.05
    # the cache is used: a second walk asks for nothing to be tested again
    cache[("a", "b", "rouge")] = 0.9  # a cached p-value is taken as it is
    again = table_tiers(table, "rouge", per_study, p_cache=cache)
    assert again["b"] == 1


def test_table_tiers_without_anything_to_compare():
    from rexrank.leaderboard.tiers import table_tiers

    ids = [f"s{i}" for i in range(5)]
    frame = pd.DataFrame({"id": ids, "bleu2": [0.1, 0.2, 0.3, 0.4, 0.5]})
    assert table_tiers(_tier_table(["a"], [np.nan], [True]), "bleu2", lambda r: frame) == {}
    assert table_tiers(_tier_table(["a"], [1], [False]), "bleu2", lambda r: frame) == {}
    assert table_tiers(_tier_table(["a"], [1], [True]), "bleu2", lambda r: None) == {}
    assert table_tiers(_tier_table(["a"], [1], [True]), "bleu2", lambda r: frame.rename(columns={"id": "study"})) == {}
    assert table_tiers(_tier_table(["a"], [1], [True]), "bleu2", lambda r: frame[["id"]]) == {}
    assert table_tiers(_tier_table(["a"], [1], [True]), "not_a_column", lambda r: frame) == {}
    assert table_tiers(_tier_table(["a"], [1], [True]), "bleu2", lambda r: frame) == {"a": 1}
    # the RadCliQ-v1 column's tests read its per-study column (radcliq_v1), not the key
    both = _tier_table(["a", "b"], [1, 2], [True, True])
    pair = {"a": pd.DataFrame({"id": ids, "radcliq_v1": [1.0, 1.1, 1.2, 1.3, 1.4]}),
            "b": pd.DataFrame({"id": ids, "radcliq_v1": [2.0, 2.3, 2.1, 2.4, 2.2]})}
    assert table_tiers(both, "radcliq_v1_inv", pair.get) == {"a": 1, "b": 2}


# ---- the F+I reference: the evaluation script's f-string on the raw values ------------------
def test_the_findings_impression_reference_is_iu_xrays_official_report_field():
    """IU-Xray's `report` field is the official "Findings: {f} Impression: {i}" (the two agree
    on all 590 studies there, unlike MIMIC-CXR and CheXpert Plus)."""
    from rexrank.testsets.schema import findings_impression_reference
    from tests.conftest import shared_path

    studies = json.loads(shared_path("data", "iu_xray", "ReXRank_IUXray_test.json").read_text(encoding="utf-8"))
    assert len(studies) == 590
    for study in studies.values():
        assert findings_impression_reference(study["section_findings"], study["section_impression"]) == study["report"]


@pytest.mark.parametrize("findings, impression, expected", [
    (None, "Clear.", "Findings: None Impression: Clear."),
    (math.nan, None, "Findings: None Impression: None"),
    ("Lungs clear. ", float("nan"), "Findings: Lungs clear.  Impression: None"),  # nothing stripped
    ("", "nan", "Findings:  Impression: nan"),  # written as found: only null and NaN are None
])
def test_the_findings_impression_reference_writes_missing_sections_as_the_script_does(findings, impression, expected):
    from rexrank.testsets.schema import findings_impression_reference

    assert findings_impression_reference(findings, impression) == expected


# ---- results_schema: the range each column's mean can take --------------------------------------
@pytest.mark.parametrize("key", ["bleu2", "radgraph", "ratescore", "green", "rouge", "temporal_f1", "srr_bert"])
def test_zero_to_one_columns(key):
    from rexrank.results_schema import value_in_range

    assert value_in_range(key, 0.0) == (True, "0 to 1") and value_in_range(key, 1.0) == (True, "0 to 1")
    assert value_in_range(key, -1e-9) == (False, "0 to 1") and value_in_range(key, 1 + 1e-9) == (False, "0 to 1")


def test_the_ranges_of_the_other_columns_by_hand():
    from rexrank.metrics.radcliq_formula import V1_COEFS, V1_MEAN, V1_SCALE
    from rexrank.results_schema import value_in_range

    assert value_in_range("crimson", 1.0) == (True, "above -1, at most 1")
    assert value_in_range("crimson", -0.999)[0] and not value_in_range("crimson", -1.0)[0]
    assert not value_in_range("crimson", 1.0001)[0]
    assert value_in_range("sembscore", -1.0) == (True, "-1 to 1") and value_in_range("sembscore", 1.0)[0]
    assert not value_in_range("sembscore", -1.001)[0] and not value_in_range("sembscore", 1.001)[0]
    # BERTScore F rescaled with distilroberta-base layer 5's baseline b = 0.8473319 (bert-score's
    # rescale file): cosine F1 >= -1 gives at least (-1 - b) / (1 - b)
    low = (-1 - 0.8473319) / (1 - 0.8473319)
    assert value_in_range("bertscore", low) == (True, "-12.10 to 1")
    assert not value_in_range("bertscore", low - 1e-6)[0] and not value_in_range("bertscore", 1.000001)[0]
    assert value_in_range("fineradscore_inv", 0.25) == (True, "at least 0.25")
    assert not value_in_range("fineradscore_inv", 0.2499)[0]
    # RadCliQ-v1 is linear in radgraph, BERTScore, SembScore, BLEU-2: each term at its own
    # lower or upper end gives the smallest and largest value
    ranges = [(0.0, 1.0), (low, 1.0), (-1.0, 1.0), (0.0, 1.0)]
    terms = [sorted(c * (x - m) / s for x in r) for c, m, s, r in zip(V1_COEFS[:4], V1_MEAN, V1_SCALE, ranges)]
    smallest = sum(t[0] for t in terms) + V1_COEFS[4]
    largest = sum(t[1] for t in terms) + V1_COEFS[4]
    ok, words = value_in_range("radcliq_v1_inv", 1 / (largest * 0.999))
    assert ok and words == f"1/x for x from {smallest:.3f} to {largest:.3f}" == "1/x for x from -1.441 to 23.421"
    assert value_in_range("radcliq_v1_inv", 1 / (smallest * 0.999))[0]
    assert not value_in_range("radcliq_v1_inv", 1 / (largest * 1.001))[0]
    assert not value_in_range("radcliq_v1_inv", 1 / (smallest * 1.001))[0]
    assert not value_in_range("radcliq_v1_inv", 0.0)[0]
    assert value_in_range("no_such_column", -99.0) == (True, "any")
    assert value_in_range("bertscore", 1.0)[0]  # the ends are values the metric can take
    # a mean whose inverse is exactly the largest RadCliQ-v1 (no double's inverse is exactly the smallest)
    candidates = [1 / largest, *(np.nextafter(1 / largest, d) for d in (-np.inf, np.inf))]
    exact = [m for m in candidates if 1.0 / m == largest]
    assert exact and value_in_range("radcliq_v1_inv", exact[0])[0]


# ---- names: what is refused, with which message; what is one name --------------------------------
def test_name_messages_name_the_character_and_the_position():
    from rexrank.store.names import check_name, check_one_script, check_visible

    with pytest.raises(SubmissionError) as err:
        check_visible("model name", "Med\u200bVersa")
    assert str(err.value) == ("model name contains an invisible or control character (ZERO WIDTH SPACE, U+200B) at "
                              "position 4; remove it")
    with pytest.raises(SubmissionError, match=r"\(U\+0085, U\+0085\) at position 2; remove it$"):
        check_visible("institution", "a\x85b")  # a control character without a Unicode name
    with pytest.raises(SubmissionError, match=r"\(COMBINING GRAPHEME JOINER, U\+034F\) at position 2"):
        check_visible("model name", "a\u034fb")  # default-ignorable, though a combining mark
    check_visible("model name", "Med Versa 2")  # spaces are visible
    with pytest.raises(SubmissionError) as err:
        check_name("model name", "=SUM(A1)")
    assert str(err.value) == ("model name '=SUM(A1)' begins with '=', which spreadsheets read as a formula; begin it "
                              "with a letter or digit")
    with pytest.raises(SubmissionError) as err:
        check_name("institution", "Lab#1")
    assert str(err.value) == ("institution 'Lab#1': character '#' (NUMBER SIGN, U+0023) at position 4 is not allowed; "
                              "names hold letters, digits, spaces and - _ . , ' ( ) & / + : *")
    with pytest.raises(SubmissionError, match=r"\(COMBINING ACUTE ACCENT, U\+0301\) at position 1 is not allowed"):
        check_name("model name", "\u0301A")  # a combining mark with no letter before it
    with pytest.raises(SubmissionError, match="at position 3 is not allowed"):
        check_name("model name", "A \u0301")  # nor after a space
    check_name("model name", "Me\u0301d\u0301\u0302 Versa-2 (v1.5)")  # marks after a letter or a mark; Nd digits
    with pytest.raises(SubmissionError, match=r"character '#' \(NUMBER SIGN, U\+0023\) at position 3 is not allowed"):
        check_name("model name", "e\u0301#")  # a mark after a letter allowed, and the check goes on after it
    with pytest.raises(SubmissionError) as err:
        check_name("model name", "Med\u200bVersa")  # invisible characters: check_visible's message, this label
    assert str(err.value).startswith("model name contains an invisible or control character (ZERO WIDTH SPACE")
    check_name("institution", "Université de Genève")
    with pytest.raises(SubmissionError) as err:
        check_one_script("model name", "MedV\u0435rsa \u03b1")
    assert str(err.value) == ("model name 'MedVеrsa α' mixes Cyrillic and Greek and Latin letters (they look alike); "
                              "write it in one of them")
    check_one_script("model name", "Модель 2")  # one script


def test_url_and_submitter_messages():
    from rexrank.store.names import check_submitter, check_url

    check_url("model URL", "")
    check_url("model URL", "HTTPS://example.org/m?x=1")
    check_url("model URL", "http://example.org/m")
    for url, why in (("ftp://example.org/m", "it must start with http:// or https:// and name a host"),
                     ("https:///path", "it must start with http:// or https:// and name a host"),
                     ("https://example.org/a b", "character ' ' is not allowed"),
                     ("https://example.org/<x>", "character '<' is not allowed"),
                     ("http://[::1", None)):
        with pytest.raises(SubmissionError) as err:
            check_url("model URL", url)
        if why:
            assert str(err.value) == f"model URL {url!r}: {why}"
        else:
            assert str(err.value).startswith(f"model URL {url!r} is not a URL (")
    with pytest.raises(SubmissionError, match=r"^model URL contains an invisible or control character \(ZERO WIDTH SPACE"):
        check_url("model URL", "https://example.org/\u200bm")
    check_submitter("a")
    check_submitter("Org Name.x_y-1")
    with pytest.raises(SubmissionError) as err:
        check_submitter("ali\u0441e")
    assert str(err.value) == ("submitter 'aliсe': a submitter is a Hugging Face user or organisation name (ASCII letters, "
                              "digits, spaces, '.', '_', '-'); character 'с' (CYRILLIC SMALL LETTER ES) is not allowed")
    with pytest.raises(SubmissionError, match="it must start with a letter or digit and be at most 96 characters$"):
        check_submitter("-alice")
    with pytest.raises(SubmissionError, match="it must start with a letter or digit and be at most 96 characters$"):
        check_submitter("a" * 97)
    check_submitter("a" * 96)
    with pytest.raises(SubmissionError, match=r"character '\\x00' \(U\+0000\) is not allowed$"):
        check_submitter("a\x00b")


@pytest.mark.parametrize("variant", [
    "medversa", "MEDVERSA", "Med\u200bVersa", "M\u0435dVersa", "MedVersa\ufe0f", "\x1b[31mMedVersa\x1b[0m",
    "Me\u0301dVersa", "M\u0307edVersa", "MedVersa*", "\uff2d\uff45\uff44Versa", "MedVersa\u034f", "Med\u00adVersa",
    "Med\u202eVersa", "Med\u2060Versa", " MedVersa\t", "MedVersa\n",
])
def test_lookalikes_of_a_name_are_the_same_name(variant):
    from rexrank.store.names import name_key, same_name

    assert same_name(variant, "MedVersa") and name_key(variant) == "medversa"


@pytest.mark.parametrize("a, b", [("MAIRA-2", "MAlRA\u20102"), ("MAIRA-2", "MAIRA\u20132"), ("MAIRA-2", "MAIRA\u22122"),
                                  ("MAIRA-2", "MAIRA\uff0d2"), ("l1I|", "IIII"), ("rn", "m"), ("Rn-X", "M-x"),
                                  ("ab", "a\u00adb"), ("x\u3164y", "xy")])
def test_dash_and_confusable_variants_are_one_name(a, b):
    from rexrank.store.names import same_name

    assert same_name(a, b)


@pytest.mark.parametrize("a, b", [("MedVersa", "MedVersa2"), ("MAIRA-2", "MAIRA2"), ("A-B", "A_B"), ("Med Versa", "MedVersa"),
                                  ("a.b", "ab")])
def test_different_names_stay_different(a, b):
    from rexrank.store.names import same_name

    assert not same_name(a, b)


def test_display_removes_escapes_and_invisible_characters_keeping_lines_when_asked():
    from rexrank.store.names import display

    assert display("\x1b]8;;http://x\x07link\x1b]8;;\x07") == "link"  # OSC hyperlink
    assert display("\x9b31mred") == "red"  # 8-bit CSI
    assert display("a\x1bZb") == "ab"  # two-byte escape
    assert display("x\u00ady\u034fz\ufe0f") == "xyz"
    assert display("a\u2028b\u2029c") == "abc"  # line and paragraph separators
    assert display(12) == "12"
    assert display("a\r\nb\tc", keep_newlines=True) == "a\nb\tc"


def test_the_progress_figure_as_drawn():
    import matplotlib.colors as mcolors

    from rexrank.leaderboard.progress import fig_progress

    points = pd.DataFrame({"model_name": ["A", "B", "C"], "date": pd.to_datetime(["2023-01-01", "2024-01-01", "2024-01-01"]),
                           "value": [0.5, 0.7, 0.6], "best": [0.5, 0.7, 0.7]})
    fig = fig_progress(points, "iu_xray", "findings", "bleu2")
    assert fig.get_size_inches().tolist() == [7.5, 4.2]
    ax = fig.axes[0]
    [dots] = ax.collections
    assert dots.get_sizes().tolist() == [22] and dots.get_alpha() == 0.6 and dots.get_label() == "a model's result"
    assert mcolors.to_hex(dots.get_facecolor()[0], keep_alpha=False) == mcolors.to_hex("tab:blue")
    [line] = ax.lines
    assert (line.get_color(), line.get_linewidth(), line.get_drawstyle(), line.get_label()) == (
        "tab:red", 2.0, "steps-post", "best so far")
    assert line.get_ydata().tolist() == [0.5, 0.7]  # one step per date
    # the leaders are named: A (2023), then B (2024); C never led
    assert [(t.get_text(), t.get_fontsize()) for t in ax.texts] == [("A", 8.0), ("B", 8.0)]
    assert ax.get_xlabel() == "date (a year alone: 1 January)"
    assert ax.get_ylabel() == "BLEU (higher is better)"
    assert ax.get_title() == "Best BLEU by date: IU-Xray, Findings"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a model's result", "best so far"]
    assert all(t.xyann == (4, 4) and t.anncoords == "offset points" for t in ax.texts)
    assert [t.get_fontsize() for t in ax.get_legend().get_texts()] == [8.0, 8.0]
    assert ax.xaxis.get_gridlines()[0].get_alpha() == 0.3 and ax.xaxis.get_gridlines()[0].get_visible()
    # a later result that only equals the best is not a new leader; unknown set and track names shown as given
    tied = pd.concat([points, pd.DataFrame({"model_name": ["D"], "date": [pd.Timestamp("2025-01-01")], "value": [0.7],
                                            "best": [0.7]})], ignore_index=True)
    again = fig_progress(tied, "new_set", "new_track", "bleu2").axes[0]
    assert [t.get_text() for t in again.texts] == ["A", "B"]
    assert again.get_title() == "Best BLEU by date: new_set, new_track"
    empty = fig_progress(points.iloc[:0], "mimic_cxr", "findings_impression", "radcliq_v1_inv")
    assert not empty.axes[0].lines and empty.axes[0].get_title() == "Best 1/RadCliQ-v1 by date: MIMIC-CXR, Findings + Impression"


def test_the_progress_figure_of_a_lower_is_better_metric_says_so(monkeypatch):
    from rexrank.leaderboard.progress import fig_progress
    from rexrank.results_schema import COLUMNS_BY_KEY

    monkeypatch.setitem(COLUMNS_BY_KEY, "bleu2", dataclasses.replace(COLUMNS_BY_KEY["bleu2"], higher_is_better=False))
    points = pd.DataFrame({"model_name": ["A"], "date": [pd.Timestamp("2024-01-01")], "value": [0.5], "best": [0.5]})
    assert fig_progress(points, "iu_xray", "findings", "bleu2").axes[0].get_ylabel() == "BLEU (lower is better)"


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_token_says_so_and_never_echoes_the_token(whoami_server, status):
    from rexrank.leaderboard.identity import REFUSED, verified_submitter

    endpoint, answer = whoami_server
    answer.update(status=status, body={"error": "Invalid credentials"})
    with pytest.raises(SubmissionError) as err:
        verified_submitter("hf_secret_token", endpoint=endpoint)
    assert str(err.value) == REFUSED and "hf_secret_token" not in str(err.value)
    assert REFUSED.startswith("the Hugging Face token sent was refused by the Hub (invalid or expired)")
    assert answer["tokens"] == ["Bearer hf_secret_token"]  # the token asked about is the one sent


def test_whoami_failures_other_than_a_refusal(whoami_server, monkeypatch):
    from rexrank.leaderboard.identity import verified_submitter

    endpoint, answer = whoami_server
    answer.update(status=503, body={"error": "busy"})
    with pytest.raises(SubmissionError) as err:
        verified_submitter("hf_x", endpoint=endpoint)
    assert str(err.value) == "cannot check the token with the Hub (HTTP 503); try again later"
    with pytest.raises(SubmissionError) as err:
        verified_submitter("hf_x", endpoint="http://127.0.0.1:9")  # nothing listens on the discard port
    # the message names the connection error's class (the HTTP client's), not the study or the token
    assert re.fullmatch(r"cannot reach the Hub to check the token \((?!NoneType)\w+\); try again later", str(err.value))
    answer.update(status=200, body={"type": "user", "name": "bob", "id": "u2"})
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    assert verified_submitter("hf_x").user.name == "bob"  # the endpoint from the environment


@pytest.mark.parametrize("token", [None, "", 42])
def test_no_token_is_no_submitter(token):
    from rexrank.leaderboard.identity import NO_TOKEN, verified_submitter

    with pytest.raises(SubmissionError) as err:
        verified_submitter(token)
    assert str(err.value) == NO_TOKEN
    assert NO_TOKEN.startswith("no Hugging Face token was sent: sign in with Hugging Face (the button above)")


def test_an_offline_server_cannot_check_a_token(monkeypatch):
    import huggingface_hub.constants as constants

    from rexrank.leaderboard.identity import verified_submitter

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)

    with pytest.raises(SubmissionError) as err:
        verified_submitter("hf_x", endpoint="http://127.0.0.1:9")
    assert str(err.value) == "cannot check the token: this server runs with HF_HUB_OFFLINE set"


# ---- policy: the quota's window and what counts ----------------------------------------------------
DAY = 86400


def _check(requests, now, quota, **where):
    from rexrank.store.accounts import Account
    from rexrank.store.policy import check_quota

    args = {"submitter": "alice", "test_set": "iu_xray", "track": "findings", **where}
    args["submitter"] = Account(args["submitter"], args.pop("submitter_id", None))
    check_quota(requests, now=now, quota=quota, **args)


def test_the_quota_window_reaches_both_ways_and_counts_only_this_set_track_and_submitter():
    from rexrank.store.policy import Quota
    from rexrank.store.records import parse_iso

    t0 = parse_iso("2026-11-10T00:00:00Z")
    one = [_request("2026-11-10T00:00:00Z")]
    with pytest.raises(SubmissionError) as err:
        _check(one, t0 - 6 * DAY, Quota(1, 7))  # a request dated back is still inside the window
    assert str(err.value) == ("submitter 'alice' already has 1 submission(s) on iu_xray/findings in the last 7 days "
                              "(limit 1); next submission possible after 2026-11-17T00:00:00Z (the quota is set with "
                              "--quota or the store's config.json key \"quota\")")
    # by id: a request of the account's before a rename counts, one of an earlier holder of the name does not
    by_id = [_request("2026-11-10T00:00:00Z", submitter="alice-old-name", submitter_id="u1")]
    with pytest.raises(SubmissionError, match="'alice' already has 1"):
        _check(by_id, t0 + DAY, Quota(1, 7), submitter_id="u1")
    _check(by_id, t0 + DAY, Quota(1, 7), submitter="alice-old-name", submitter_id="u2")
    _check(one, t0 + DAY, Quota(1, 7), submitter_id="u1")  # a request recorded by name only binds to no id
    _check(one, t0 - 7 * DAY, Quota(1, 7))  # exactly 7 days apart: outside (the window is open)
    _check(one, t0 + 7 * DAY, Quota(1, 7))
    _check(one, t0 + DAY, Quota(1, 7), test_set="mimic_cxr")
    _check(one, t0 + DAY, Quota(1, 7), track="findings_impression")
    _check(one, t0 + DAY, Quota(1, 7), submitter="bob")
    _check(one, t0 + DAY, Quota(2, 7))  # 2 per 7 days: the second passes
    two = one + [_request("2026-11-12T00:00:00Z")]
    with pytest.raises(SubmissionError, match=r"already has 2 submission\(s\) .* in the last 7 days \(limit 2\); "
                                              r"next submission possible after 2026-11-17T00:00:00Z \(the quota is"):
        _check(two, t0 + 3 * DAY, Quota(2, 7))
    with pytest.raises(SubmissionError, match=r"in the last 1.5 days \(limit 1\); next submission possible after "
                                              r"2026-11-13T12:00:00Z \(the quota is"):
        _check(two, t0 + 2 * DAY + 3600, Quota(1, 1.5))  # the newest one in the window decides
    _check(two, t0 + DAY, Quota(0, 7))  # no quota
    _check(two, t0 + DAY, Quota(-1, 7))


def test_what_counts_for_the_quota():
    from rexrank.store.policy import Quota, counts_for_quota
    from rexrank.store.records import parse_iso

    t0 = parse_iso("2026-11-10T00:00:00Z")
    failed = _request("2026-11-10T00:00:00Z", status="FAILED", failure_kind="internal")
    assert not counts_for_quota(failed)
    _check([failed], t0 + DAY, Quota(1, 7))  # a failed scoring run is free to retry
    assert counts_for_quota({**failed, "failure_kind": "cancelled"})  # cancelling is no free retry
    assert counts_for_quota({**failed, "failure_kind": "rejected"})  # nor filing someone else's predictions
    assert counts_for_quota({**failed, "status": "HELD"})  # held for review: a filing like any other
    assert counts_for_quota({**failed, "failure_kind": "validation", "test_set": "rexgradient"})  # a private probe
    assert not counts_for_quota({**failed, "failure_kind": "validation"})  # a public set's wrong file
    assert not counts_for_quota({**failed, "failure_kind": "refused"})
    assert counts_for_quota({**failed, "status": "PENDING"}) and counts_for_quota({**failed, "status": "RUNNING"})
    with pytest.raises(SubmissionError):
        _check([{**failed, "failure_kind": "cancelled"}], t0 + DAY, Quota(1, 7))


@pytest.mark.parametrize("text, limit, days", [("", 1, 7.0), ("  ", 1, 7.0), ("3", 3, 7.0), ("2/14", 2, 14.0),
                                               (" 1/0.5 ", 1, 0.5), ("0", 0, 7.0)])
def test_the_quota_setting(text, limit, days, monkeypatch):
    from rexrank.store.policy import Quota

    assert Quota.parse(text) == Quota(limit, days)
    monkeypatch.setenv("REXRANK_QUOTA", text)
    assert Quota.from_env() == Quota(limit, days)
    assert Quota() == Quota(1, 7.0)


@pytest.mark.parametrize("text", ["x", "1/y", "1.5/7", "/7"])
def test_a_wrong_quota_setting_says_how_to_write_it(text):
    from rexrank.store.policy import Quota

    with pytest.raises(SubmissionError) as err:
        Quota.parse(text)
    assert str(err.value) == f"REXRANK_QUOTA={text.strip()!r}: expected N/DAYS, e.g. 1/7"


def test_quota_from_an_empty_environment(monkeypatch):
    from rexrank.store.policy import Quota

    monkeypatch.delenv("REXRANK_QUOTA", raising=False)
    assert Quota.from_env() == Quota(1, 7.0)


# ---- policy: identical resubmissions, name ownership, approved submitters ----------------------------
def test_an_identical_resubmission_is_refused_unless_the_first_failed():
    from rexrank.store.policy import check_duplicate

    first = _request("2026-11-10T00:00:00Z", predictions={"sha256": "abc"}, model_name="Med Versa")
    new = {"id": "r9", "model_name": "med  versa", "predictions": {"sha256": "abc"}, "test_set": "iu_xray",
           "track": "findings", "submitter": "alice"}
    with pytest.raises(SubmissionError) as err:
        check_duplicate([first], new)
    assert str(err.value) == ("identical resubmission: request r1 (FINISHED) already has these predictions for model "
                              "'alice / Med Versa' on iu_xray/findings")
    check_duplicate([{**first, "status": "FAILED"}], new)
    check_duplicate([first], {**new, "predictions": {"sha256": "abd"}})
    check_duplicate([first], {**new, "model_name": "Other"})
    check_duplicate([first], {**new, "test_set": "mimic_cxr"})
    check_duplicate([first], {**new, "track": "findings_impression"})
    # a model is its namespace and name: another namespace's model of that name is another model
    check_duplicate([first], {**new, "namespace": "acme"})
    with pytest.raises(SubmissionError, match="for model 'acme / Med Versa'"):  # namespaces by id, names for display
        check_duplicate([{**first, "namespace": "acme", "namespace_id": "o1"}],
                        {**new, "namespace": "acme-renamed", "namespace_id": "o1"})


def test_approved_submitters():
    from rexrank.store.accounts import Account, check_approved

    assert check_approved(None, {}, submitter=Account("anyone"), test_set="rexgradient") is None
    assert check_approved(["alice", "bob"], {}, submitter=Account("BOB"), test_set="rexgradient") is None  # local: by name
    with pytest.raises(SubmissionError) as err:
        check_approved(["alice"], {}, submitter=Account("bob"), test_set="rexgradient")
    assert str(err.value) == ("test set rexgradient accepts submissions only from submitters approved by its organisers, "
                              "and 'bob' is not one of them; ask the organisers to be added")
    with pytest.raises(SubmissionError):
        check_approved([], {}, submitter=Account("bob"), test_set="rexgradient")
    # on the Hub: the first filing of an approved name binds it to that account's id ...
    binding = check_approved(["alice"], {}, submitter=Account("alice", "u1"), test_set="rexgradient")
    assert binding["id"] == "u1" and binding["name"] == "alice" and binding["how"] == "its first filing"
    bound = {"alice": binding}
    assert check_approved(["alice"], bound, submitter=Account("alice", "u1"), test_set="rexgradient") is None
    # ... which stays approved under a new name, while a newcomer who took the name is not
    assert check_approved(["alice"], bound, submitter=Account("alice-2", "u1"), test_set="rexgradient") is None
    with pytest.raises(SubmissionError, match="'alice' is not one of them"):
        check_approved(["alice"], bound, submitter=Account("alice", "u9"), test_set="rexgradient")
    with pytest.raises(SubmissionError):  # a name taken off the list approves nobody, bound or not
        check_approved(["bob"], bound, submitter=Account("alice", "u1"), test_set="rexgradient")


def test_is_private_comes_from_the_registry():
    from rexrank.store.policy import is_private

    assert is_private("rexgradient") and not is_private("iu_xray") and not is_private("no_such_set")


def test_the_tier_test_on_single_precision_scores_is_computed_in_double():
    """A per-study file may store float32 scores: the t-test is scipy's on those values as float64."""
    from rexrank.leaderboard.tiers import _aligned, paired_p

    rng = np.random.default_rng(8)
    ids = [f"s{i:03d}" for i in range(200)]
    a = rng.uniform(0.2, 0.8, 200).astype(np.float32)
    b = (a - 0.01 + rng.normal(0, 0.05, 200)).astype(np.float32)
    fa, fb = pd.DataFrame({"id": ids, "x": a}), pd.DataFrame({"id": ids, "x": b})
    assert _aligned(fa, "x")[1].dtype == np.float64
    p, _ = paired_p(_aligned(fa, "x"), _aligned(fb, "x"))
    assert p == pytest.approx(sps.ttest_rel(a.astype(np.float64), b.astype(np.float64)).pvalue, rel=1e-12)


def test_score_arrays_are_named_scores_unless_named():
    from rexrank.stats import as_score_array

    with pytest.raises(ValueError, match=r"^scores: infinite per-study scores at positions \[0\]$"):
        as_score_array([math.inf])
    with pytest.raises(ValueError, match=r"^scores: expected a 1-D sequence"):
        as_score_array(0.5)
    assert as_score_array([1, None]).tolist()[0] == 1.0 and math.isnan(as_score_array([1, None])[1])


def test_the_benchmark_and_eval_results_yaml_as_written():
    """The files as the Hub reads them: keys in the documented order (not sorted), "±"
    written as itself, lines folded at 100 characters (PyYAML's default is 80)."""
    from rexrank.hub.eval_results import benchmark_definition, benchmark_yaml, eval_results_file
    from rexrank.testsets.registry import TEST_SETS

    spec = TEST_SETS["iu_xray"]
    assert benchmark_definition(spec)["description"] == (
        "The IU-Xray (test) set of ReXrank, the chest X-ray report generation benchmark (Zhang et al., 2024, "
        "arXiv:2411.15122). A model writes the findings section (track 'findings') or findings and impression "
        "(track 'findings_impression') of each study; each task is one ReXrank metric on one track, scored with "
        "rexrank (`rexrank score --dataset iu_xray`). Higher is better for every task: RadCliQ-v1 and FineRadScore "
        "are reported as 1 / mean, as on the ReXrank leaderboard.")
    text = benchmark_yaml(spec).decode()
    assert text.startswith("name: ReXrank IU-Xray (test)\ndescription: 'The IU-Xray (test) set of ReXrank")
    assert [line.split(":")[0] for line in text.splitlines() if line[:1].isalpha()] == [
        "name", "description", "evaluation_framework", "tasks"]
    assert "- id: findings_radcliq_v1_inv\n  config: default\n  split: test\n" in text
    lengths = [len(line) for line in text.splitlines()]
    assert 90 < max(lengths) <= 106
    record = {"id": "r1", "test_set": "iu_xray", "track": "findings",
              "date": "2026-11-02", "source": "rexrank", "values": {"bleu2": {"mean": 0.25, "ci95": 0.0123, "n": 590}}}
    out = eval_results_file(record, org="rexrank").text()
    assert "95% CI ± 0.0123" in out  # not escaped
    assert out.index("- dataset:") < out.index("  value:") < out.index("  date:") < out.index("  source:") < out.index("  notes:")
    assert out.index("    id: rexrank/iu_xray") < out.index("    task_id: findings_bleu2")
    assert out.index("    url:") < out.index("    name:") < out.index("    user:")
    # an 86-character line stays whole at 100 (PyYAML would fold it at 80)
    assert "  notes: ReXrank BLEU, findings section; n = 590 studies; 95% CI ± 0.0123; result r1\n" in out


def test_the_benchmark_description_folds_at_100_characters():
    from rexrank.hub.eval_results import benchmark_yaml
    from rexrank.testsets.registry import TEST_SETS

    lines = benchmark_yaml(TEST_SETS["iu_xray"]).decode().splitlines()
    # PyYAML breaks a long scalar at the first space once the line passes the width (100)
    assert lines[1] == ("description: 'The IU-Xray (test) set of ReXrank, the chest X-ray report generation benchmark "
                        "(Zhang et")
    assert lines[2] == ("  al., 2024, arXiv:2411.15122). A model writes the findings section (track ''findings'') or "
                        "findings and")


def test_eval_results_of_a_track_without_a_title_and_an_endpoint_with_a_path():
    from rexrank.hub.eval_results import eval_results_file

    record = {"id": "r2", "test_set": "iu_xray", "track": "custom_track", "date": "", "source": "rexrank",
              "values": {"bleu2": {"mean": 0.3, "ci95": None, "n": 0}}}
    [entry] = eval_results_file(record, org="o", endpoint="https://mirror.example/HX/").entries
    assert entry["notes"] == "ReXrank BLEU, custom_track; result r2"  # n = 0 is no count to state
    assert entry["dataset"]["task_id"] == "custom_track_bleu2"
    assert entry["source"]["url"] == "https://mirror.example/HX/spaces/o/leaderboard"


# ---- the worker's coverage rule, by hand -------------------------------------------------------
def _coverage(metrics, results, *, share=0.99, private=False):
    from types import SimpleNamespace

    from rexrank.backend.worker import Worker

    Worker.check_coverage(SimpleNamespace(metrics=metrics, min_coverage=share), results, private=private)


TAIL = (". Nothing was published. The answers already received are kept in the cache: the maintainers can requeue this "
        "request once the cause is fixed, and only the missing studies are scored again.")


def test_the_coverage_rule_by_hand():
    from rexrank.backend.worker import CoverageError

    ok = {"predictions": {"n": 100}, "metrics": {"bleu2": {"n_studies": 100, "n_scored": 99}}}
    _coverage(["bleu2"], ok)  # 99 of 100 is the share asked for
    _coverage(["bleu2"], {"predictions": {"n": 100}, "metrics": {"bleu2": {"n_scored": 99}}})  # n from the predictions
    _coverage(["bleu2"], {"predictions": {"n": 0}, "metrics": {"bleu2": {"n_scored": 0}}})  # nothing to score
    # a metric's own study count (e.g. the studies that have findings) comes before the predictions'
    _coverage(["bleu2"], {"predictions": {"n": 100}, "metrics": {"bleu2": {"n_studies": 50, "n_scored": 50}}})
    _coverage(["bleu2"], {"predictions": {"n": 100}, "metrics": {"bleu2": {"n_failed": 1}}})  # 100 - 1 scored
    short = {"predictions": {"n": 100},
             "metrics": {"green": {"n_studies": 100, "n_scored": 97,
                                   "failures": {"s1": "LLM call failed: timeout", "s2": "LLM call failed: 500",
                                                "s3": "invalid answer: no JSON"}}}}
    with pytest.raises(CoverageError) as err:
        _coverage(["green", "crimson"], short)
    head = "below the coverage rule (each metric must score at least 99% of the studies): "
    assert str(err.value) == (head + "crimson scored 0 studies; cause: it did not run; green scored 97 of 100 studies "
                              "(97.0%); cause: 1 × LLM call failed: timeout, 1 × LLM call failed: 500, 1 × invalid "
                              "answer: no JSON" + TAIL)
    assert err.value.without_causes == head + "crimson scored 0 studies; green scored 97 of 100 studies (97.0%)" + TAIL
    from rexrank.backend.public_door import PRIVATE_COVERAGE_FAILED

    far_short = {"test_set": {"n_studies": 1000}, "predictions": {"n": 1000},
                 "metrics": {"green": {"n_studies": 1000, "n_scored": 0, "failures": short["metrics"]["green"]["failures"]}}}
    with pytest.raises(CoverageError) as err:  # a private set: the fixed words, no count and no reason
        _coverage(["green"], far_short, private=True)
    assert str(err.value) == PRIVATE_COVERAGE_FAILED
    with pytest.raises(CoverageError) as err:
        _coverage(["green"], {"predictions": {"n": 50}, "metrics": {"green": {"n_studies": 50}}}, share=0.9)
    assert str(err.value).startswith("below the coverage rule (each metric must score at least 90% of the studies): "
                                     "green scored 0 of 50 studies (0.0%); cause: no per-study reasons were recorded. ")
    _coverage(["green"], {"predictions": {"n": 50}, "metrics": {"green": {"n_studies": 50, "n_scored": 45}}}, share=0.9)


def test_two_scripts_are_a_mix_and_a_letter_without_a_unicode_name_is_none():
    from rexrank.store.names import check_name, check_one_script

    with pytest.raises(SubmissionError) as err:
        check_one_script("institution", "Lab \u0391")  # Latin and Greek (capital alpha)
    assert str(err.value) == "institution 'Lab Α' mixes Greek and Latin letters (they look alike); write it in one of them"
    # a Tangut ideograph is a letter (Lo) that Python's Unicode data gives no name: no script, no error
    check_name("model name", "Model \U00017000")
    check_one_script("model name", "Model \U00017000")


def test_a_neighbour_p_value_of_exactly_alpha_is_no_new_tier():
    from rexrank.leaderboard.tiers import table_tiers

    ids = [f"s{i}" for i in range(5)]
    frames = {"a": pd.DataFrame({"id": ids, "bleu2": [0.5, 0.6, 0.7, 0.8, 0.9]}),
              "b": pd.DataFrame({"id": ids, "bleu2": [0.1, 0.3, 0.2, 0.4, 0.3]})}
    table = _tier_table(["a", "b"], [1, 2], [True, True])
    # one test: Holm leaves a single p-value as it is; "below 0.05" starts a tier, 0.05 itself does not
    assert table_tiers(table, "bleu2", frames.get, p_cache={("a", "b", "bleu2"): 0.05}) == {"a": 1, "b": 1}
    assert table_tiers(table, "bleu2", frames.get, p_cache={("a", "b", "bleu2"): 0.0499}) == {"a": 1, "b": 2}


def test_a_test_set_titled_otherwise_folds_at_100_and_keeps_its_letters():
    """The benchmark file of another public test set: lines folded at width 100, accented
    letters written as themselves (PyYAML escapes them unless told)."""
    from rexrank.hub.eval_results import benchmark_yaml
    from rexrank.testsets.registry import TEST_SETS

    text = benchmark_yaml(dataclasses.replace(TEST_SETS["iu_xray"], title="IU-Xray")).decode()
    # PyYAML breaks at the first space once a line passes the width: after "scored" (101
    # characters); at width 101 it would keep " with" on the line
    assert "  (track ''findings_impression'') of each study; each task is one ReXrank metric on one track, scored\n" in text
    accented = benchmark_yaml(dataclasses.replace(TEST_SETS["iu_xray"], title="Hôpital (test)")).decode()
    assert accented.startswith("name: ReXrank Hôpital (test)\n")


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


# ---- policy: copied predictions, the dataset's owner, names, the whole rule set (mutmut over policy.py) ----
def test_accounts_are_the_hubs_spelling_case_aside():
    from rexrank.store.policy import account_key, same_submitter

    assert account_key("  MBZUAI ") == "mbzuai"
    assert same_submitter("MBZUAI", "mbzuai") and not same_submitter("stanford-aiml", "stanford-aimi")


def test_a_predictions_dataset_belongs_to_the_submitter_or_their_organisations():
    from rexrank.store.policy import check_dataset_owner

    check_dataset_owner("alice/preds", submitter="alice", owners=["alice"])
    check_dataset_owner("ALICE/preds", submitter="alice", owners=["alice"])
    check_dataset_owner("lab/preds", submitter="alice", owners=["alice", "Lab"])
    with pytest.raises(SubmissionError) as err:
        check_dataset_owner("mallory/preds", submitter="alice", owners=["alice", "lab"])
    assert str(err.value) == ("the dataset mallory/preds belongs to 'mallory', not to 'alice' or one of their "
                              "organisations: submit predictions from a dataset of your own (e.g. alice/REPO)")
    with pytest.raises(SubmissionError):
        check_dataset_owner("alice/preds", submitter="alice", owners=[])


def test_check_names_checks_each_field_it_is_given():
    from rexrank.store.policy import check_names

    check_names(model_name="M", submitter="alice")  # no institution, no URL: nothing more to check
    check_names(model_name="M", submitter="alice", institution="Lab", model_url="https://example.org/m")
    for bad, where in ((dict(submitter="al ice!"), "submitter 'al ice!'"), (dict(model_name="=M"), "model name '=M'"),
                       (dict(institution="=Lab"), "institution '=Lab'"),
                       (dict(model_url="ftp://example.org"), "model URL 'ftp://example.org'")):
        with pytest.raises(SubmissionError, match=re.escape(where)):
            check_names(**{"model_name": "M", "submitter": "alice", **bad})


def _filed(**extra) -> dict:
    return {"id": "r9", "submitter": "alice", "test_set": "iu_xray", "track": "findings", "status": "PENDING",
            "model_name": "Mine", "submitted_time": "2026-11-20T00:00:00Z", "predictions": {"sha256": "new"}, **extra}


def test_the_policy_applies_every_rule_with_its_message():
    """check_policy: the names, identical resubmissions, the quota (dated by the request), and
    one script per name, each refusing with its own message. Nobody owns a bare name, and
    copies are judged after it (rexrank.store.copies), so they are not among its rules."""
    from rexrank.store.policy import Quota, check_policy

    quota = Quota(1, 7)
    now = 1_800_000_000.0  # far from the requests below: only the quota case dates near them
    check_policy([], _filed(), now=now, quota=quota)
    # another submitter's model of the same name, and another's identical predictions: no refusal here
    check_policy([_request("2026-01-01T00:00:00Z", submitter="bob", model_name="MINE", id="r1"),
                  _request("2026-01-01T00:00:00Z", submitter="bob", id="r2", predictions={"sha256": "new"})],
                 _filed(), now=now, quota=quota)
    cases = [
        (_filed(submitter="al ice!"), [], "submitter 'al ice!'"),
        (_filed(namespace="ac me!"), [], "namespace 'ac me!'"),
        (_filed(institution="=Lab"), [], "institution '=Lab'"),
        (_filed(model_url="ftp://x.org"), [], "model URL 'ftp://x.org'"),
        (_filed(predictions={"sha256": "x"}, model_name="M"), [_request("2026-01-01T00:00:00Z")],
         "identical resubmission: request r1"),
        (_filed(model_name="Mαne"), [], "model name 'Mαne' mixes"),
        (_filed(institution="Lαb"), [], "institution 'Lαb' mixes"),
    ]
    for request, earlier, message in cases:
        with pytest.raises(SubmissionError, match=re.escape(message)):
            check_policy(earlier, request, now=now, quota=quota)
    from rexrank.store.records import parse_iso

    earlier = [_request("2026-11-18T00:00:00Z", model_name="Mine", id="r1", predictions={"sha256": "old"})]
    with pytest.raises(SubmissionError, match=r"already has 1 submission\(s\) on iu_xray/findings"):
        check_policy(earlier, _filed(), now=parse_iso("2026-11-20T00:00:00Z"), quota=quota)
    check_policy(earlier, _filed(), now=parse_iso("2026-11-20T00:00:00Z"), quota=Quota(2, 7))


def test_a_predictions_dataset_is_named_by_its_repo_ids_first_segment():
    from rexrank.store.policy import check_dataset_owner

    check_dataset_owner("alice/preds/extra", submitter="alice", owners=["alice"])


# ---- input limits: sizes, counts and messages by hand (mutmut's first run over input_limits.py) ----
def test_what_a_file_that_is_no_regular_file_is_called():
    import stat

    from rexrank.input_limits import kind_of

    assert kind_of(stat.S_IFIFO) == "a FIFO (named pipe)"
    assert kind_of(stat.S_IFLNK) == "not a regular file"


def test_a_file_of_exactly_the_cap_passes_and_one_byte_more_is_refused(tmp_path):
    from rexrank.input_limits import check_size, read_capped

    path = tmp_path / "p.jsonl"
    path.write_bytes(b"x" * 10)
    check_size(path, 10)
    assert read_capped(path, 10) == b"x" * 10
    path.write_bytes(b"x" * 11)
    with pytest.raises(SubmissionError) as err:
        check_size(path, 10)
    assert err.value.source == str(path)
    assert str(err.value) == f"{path}: file is 0.0 MiB (11 bytes); the limit is 0.0 MiB"


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/status"), reason="needs Linux's /proc")
def test_a_file_longer_than_it_said_is_refused_at_the_cap():
    """/proc files say they are 0 bytes long and hold more: the read stops at cap + 1."""
    from rexrank.input_limits import read_capped

    with pytest.raises(SubmissionError) as err:
        read_capped("/proc/self/status", 10)
    assert err.value.source == "/proc/self/status"
    assert str(err.value) == "/proc/self/status: file is more than 0.0 MiB; the limit is 0.0 MiB"


def test_json_values_are_counted_by_hand():
    """Commas, "{" and "[" count the values, and each newline in JSONL: b'{"a": [1, 2]}\\n{"b": [3]}\\n'
    holds 1 + 2 + 2 + 2 = 7; strings' commas are taken out only when that bound is over the limit."""
    from rexrank.input_limits import check_json_values

    jsonl = b'{"a": [1, 2]}\n{"b": [3]}\n'
    check_json_values(jsonl, source="s", lines=True, limit=7)
    with pytest.raises(SubmissionError):
        check_json_values(jsonl, source="s", lines=True, limit=6)
    check_json_values(b"[1,\n2]\n", source="s", limit=2)  # JSON: newlines are layout (1 + 1)
    check_json_values(b'["a,b", 1]', source="s", limit=2)  # 3 by the bound, 2 without the string's comma
    with pytest.raises(SubmissionError):
        check_json_values(b'["a,b", 1]', source="s", limit=1)
    with pytest.raises(SubmissionError) as err:
        check_json_values(b"[" + b"1," * 400_001 + b"1]", source="s")
    assert err.value.source == "s"
    assert str(err.value) == ("s: holds more than 400,000 JSON values (objects, arrays, numbers, strings); the limit is "
                              "20,000 predictions of 20 values each")


def test_jsonl_lines_by_hand():
    import itertools

    from rexrank.input_limits import MAX_LINE_BYTES, jsonl_lines

    def lines(data):  # at most 5: a reader that never ends fails here instead of hanging
        return list(itertools.islice(jsonl_lines(data, source="s"), 5))

    assert lines(b"{}\n[]") == [b"{}\n", b"[]"]
    assert lines(b"\n{}\n") == [b"\n", b"{}\n"]
    longest = b"x" * (MAX_LINE_BYTES - 1) + b"\n"
    assert lines(longest) == [longest]
    with pytest.raises(SubmissionError) as err:
        lines(b"{}\nx" + longest)
    assert err.value.source == "s"
    assert str(err.value) == ("s: line 2 is 262,145 bytes, more than a line may hold (262,144): predictions longer "
                              "than 20000 characters are refused (a report is ~1000)")


def test_row_and_character_messages_by_hand():
    from rexrank.input_limits import check_rows, check_texts

    check_rows(20_000, source="s")
    with pytest.raises(SubmissionError) as err:
        check_rows(20_001, source="s", counted=False)
    assert str(err.value) == "s: has more than 20,000 rows; the largest test set has 10,000 studies"
    ids = [f"s{i}" for i in range(12)]
    check_texts(["x" * 20_000] * 12, ids, source="f")  # exactly the limit passes
    with pytest.raises(SubmissionError) as err:
        check_texts(["x" * 20_001] * 12, ids, source="f")
    assert err.value.source == "f"
    listed = ", ".join(f"'s{i}' (20001 characters)" for i in range(10))
    assert str(err.value) == ("f: 12 predictions are longer than 20000 characters (a report is ~1000): "
                              f"{listed}, … (2 more)")
    with pytest.raises(SubmissionError) as err:
        check_texts(["x" * 20_001] * 2, ids[:2], source="f", shown=2)
    assert str(err.value).endswith("'s0' (20001 characters), 's1' (20001 characters)")
    check_texts(["x" * 20_000] * 800, list(range(800)), source="f")  # 16,000,000 characters: the limit
    with pytest.raises(SubmissionError) as err:
        check_texts(["x" * 20_000] * 800 + ["x"], list(range(801)), source="f")
    assert err.value.source == "f"
    assert str(err.value) == "f: the predictions hold 16,000,001 characters together; the limit is 16,000,000"


# ---- input limits, round two: the reading, the folder, the schema and parquet's metadata by hand ----
def test_the_id_and_prediction_columns_must_be_text_and_a_long_type_is_cut_at_80():
    """A string_view column is text (pyarrow's is_string_view). A refused type is shown whole
    up to 80 characters and cut to 77 + "..." beyond: str(struct<a...a: int8>) is
    "struct<" (7) + k + ": int8>" (7) = k + 14 characters."""
    import pyarrow as pa

    from rexrank.input_limits import check_string_columns

    assert hasattr(pa, "string_view"), "pyarrow >= 16 has string_view"
    check_string_columns(pa.schema([("id", pa.string_view()), ("text", pa.dictionary(pa.int32(), pa.large_string()))]),
                         ("id", "text"), source="p.parquet")
    at_80 = "struct<" + "a" * 66 + ": int8>"
    at_81 = "struct<" + "a" * 67 + ": int8>"
    assert (len(at_80), len(at_81)) == (80, 81)
    for k, shown in ((66, at_80), (67, at_81[:77] + "...")):
        schema = pa.schema([("id", pa.string()), ("text", pa.struct([("a" * k, pa.int8())]))])
        with pytest.raises(SubmissionError) as err:
            check_string_columns(schema, ("id", "text"), source="p.parquet")
        assert err.value.source == "p.parquet"
        assert str(err.value) == (f"p.parquet: column 'text' holds {shown}, not strings: write the study ids and the "
                                  "predictions as text (a string column each)")


def test_a_file_of_the_cap_is_read_whole_and_a_refusal_names_what_it_read(tmp_path):
    from rexrank.errors import RexrankError
    from rexrank.input_limits import read_capped

    path = tmp_path / "p.csv"
    path.write_bytes(b"0123456789")
    assert read_capped(path, 10) == b"0123456789"  # cap bytes: read whole (cap + 1 asked for)
    path.write_bytes(b"0123456789!")
    with pytest.raises(SubmissionError) as err:
        read_capped(path, 10, what="predictions file")
    assert str(err.value) == f"{path}: predictions file is 0.0 MiB (11 bytes); the limit is 0.0 MiB"
    with pytest.raises(RexrankError) as err:
        read_capped(path, 10, error=RexrankError, what="test set")
    assert type(err.value) is RexrankError
    assert str(err.value) == f"{path}: test set is 0.0 MiB (11 bytes); the limit is 0.0 MiB"


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/status"), reason="needs Linux's /proc")
def test_a_file_that_grew_past_the_cap_after_its_size_was_checked_is_refused_with_its_name():
    """/proc/self/status says 0 bytes (stat) and holds ~1 kB: the read of cap + 1 bytes finds
    more than the cap; the message says "more than" the cap (the size is not known)."""
    from rexrank.errors import RexrankError
    from rexrank.input_limits import read_capped

    with pytest.raises(SubmissionError) as err:
        read_capped("/proc/self/status", 100, what="predictions file")
    assert err.value.source == "/proc/self/status"
    assert str(err.value) == "/proc/self/status: predictions file is more than 0.0 MiB; the limit is 0.0 MiB"
    with pytest.raises(RexrankError) as err:
        read_capped("/proc/self/status", 100, error=RexrankError, what="test set")
    assert type(err.value) is RexrankError
    assert str(err.value) == "/proc/self/status: test set is more than 0.0 MiB; the limit is 0.0 MiB"


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/mem"), reason="needs Linux's /proc")
def test_a_file_that_cannot_be_opened_or_read_is_one_line():
    """/proc/self/mem is a regular file of 0 bytes whose first page (address 0) is never
    mapped: reading it is an I/O error. /proc/sys/vm/compact_memory is write-only (mode 0200),
    for root too: opening it to read is refused."""
    import os

    from rexrank.errors import RexrankError
    from rexrank.input_limits import read_capped

    with pytest.raises(SubmissionError) as err:
        read_capped("/proc/self/mem", 100)
    assert err.value.source == "/proc/self/mem"
    assert str(err.value) == "/proc/self/mem: cannot read it: Input/output error"
    with pytest.raises(RexrankError) as err:
        read_capped("/proc/self/mem", 100, error=RexrankError)
    assert type(err.value) is RexrankError and str(err.value) == "/proc/self/mem: cannot read it: Input/output error"
    write_only = "/proc/sys/vm/compact_memory"
    if os.path.exists(write_only):
        with pytest.raises(SubmissionError) as err:
            read_capped(write_only, 100)
        assert err.value.source == write_only
        assert str(err.value) == f"{write_only}: cannot read it: Permission denied"
        with pytest.raises(RexrankError) as err:
            read_capped(write_only, 100, error=RexrankError)
        assert type(err.value) is RexrankError and str(err.value) == f"{write_only}: cannot read it: Permission denied"


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="needs FIFOs")
def test_a_file_swapped_for_a_fifo_after_the_check_is_refused_without_blocking(tmp_path, monkeypatch):
    """A FIFO that replaced the file between the size check and the open: opened
    non-blocking, it is refused at once from fstat; a blocking open would wait for a writer
    forever. The check is skipped here to stand for the swap."""
    import os

    from rexrank import input_limits
    from rexrank.errors import RexrankError

    fifo = tmp_path / "p.jsonl"
    os.mkfifo(fifo)
    monkeypatch.setattr(input_limits, "check_size", lambda *args, **kwargs: None)
    for error in (SubmissionError, RexrankError):
        outcome = []

        def read():
            try:
                outcome.append(input_limits.read_capped(fifo, 100, error=error))
            except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
                outcome.append(exc)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(10)
        if reader.is_alive():  # blocked in open(): give it a writer so the thread ends
            with open(fifo, "wb"):
                pass
            reader.join(10)
            pytest.fail("read_capped blocked opening a FIFO")
        [exc] = outcome
        assert type(exc) is error
        assert str(exc) == f"{fifo}: is a FIFO (named pipe), not a regular file"
        if error is SubmissionError:
            assert exc.source == str(fifo)


def test_what_check_regular_says_of_a_missing_file_a_broken_symlink_a_folder_and_a_fifo(tmp_path):
    import os

    from rexrank.errors import RexrankError
    from rexrank.input_limits import check_regular

    missing, broken = tmp_path / "missing.csv", tmp_path / "broken.csv"
    broken.symlink_to(missing)
    for error in (SubmissionError, RexrankError):
        with pytest.raises(error) as err:
            check_regular(missing, error=error)
        assert type(err.value) is error and str(err.value) == f"{missing}: file not found"
        with pytest.raises(error) as err:
            check_regular(broken, error=error)
        assert str(err.value) == f"{broken}: file not found (a broken symlink)"
    (tmp_path / "a.csv").write_text("id,text\n")
    under_a_file = tmp_path / "a.csv" / "b.csv"  # stat: ENOTDIR, an OSError that is not FileNotFoundError
    with pytest.raises(SubmissionError) as err:
        check_regular(under_a_file)
    assert err.value.source == str(under_a_file)
    assert str(err.value) == f"{under_a_file}: cannot read it: Not a directory"
    with pytest.raises(SubmissionError) as err:
        check_regular(tmp_path)  # a folder only with allow_dir
    assert str(err.value) == f"{tmp_path}: is a folder, not a regular file"
    assert check_regular(tmp_path, allow_dir=True).st_ino == os.stat(tmp_path).st_ino
    if hasattr(os, "mkfifo"):
        fifo, link = tmp_path / "p.fifo", tmp_path / "p.jsonl"
        os.mkfifo(fifo)
        link.symlink_to(fifo)
        with pytest.raises(SubmissionError) as err:
            check_regular(fifo)
        assert str(err.value) == f"{fifo}: is a FIFO (named pipe), not a regular file"
        with pytest.raises(SubmissionError) as err:
            check_regular(link)
        assert str(err.value) == f"{link}: is a FIFO (named pipe) (a symlink to {os.path.realpath(fifo)}), not a regular file"


def test_a_datasets_folder_of_1000_files_and_20_mib_passes_and_one_more_is_refused(tmp_path):
    """rglob counts files and sub-folders: 1,000 entries pass, 1,001 do not. Sizes are the
    files' st_size (sparse files here): 20 MiB − 1 + 1 byte = 20 MiB passes, + 2 bytes does not."""
    from rexrank.input_limits import check_folder

    many = tmp_path / "many"
    many.mkdir()
    for i in range(1000):
        (many / f"{i}.arrow").touch()
    check_folder(many, source="d")
    (many / "1000.arrow").touch()
    with pytest.raises(SubmissionError) as err:
        check_folder(many, source="d")
    assert err.value.source == "d"
    assert str(err.value) == "d: holds more than 1,000 files: not a datasets folder"
    big = tmp_path / "big"
    (big / "train").mkdir(parents=True)
    with open(big / "train" / "a.arrow", "wb") as fh:
        fh.truncate(20 * 2**20 - 1)
    with open(big / "b.arrow", "wb") as fh:
        fh.truncate(1)
    check_folder(big, source="d")
    with open(big / "b.arrow", "wb") as fh:
        fh.truncate(2)
    with pytest.raises(SubmissionError) as err:
        check_folder(big, source="d")
    assert err.value.source == "d"
    assert str(err.value) == "d: the folder's files are 20.0 MiB together; the limit is 20.0 MiB"


def test_a_folder_that_cannot_be_listed_is_one_line(tmp_path, monkeypatch):
    """pathlib passes over a sub-folder it may not open (PermissionError) and raises any other
    OSError, an I/O error on a network share, say; it stands in for one here."""
    import errno
    import pathlib

    from rexrank.input_limits import check_folder

    (tmp_path / "a.arrow").touch()

    def rglob(self, pattern):
        yield tmp_path / "a.arrow"
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(pathlib.Path, "rglob", rglob)
    with pytest.raises(SubmissionError) as err:
        check_folder(tmp_path, source="d")
    assert err.value.source == "d"
    assert str(err.value) == "d: cannot read the folder: Input/output error"


def test_decoded_lengths_by_hand_for_each_text_type(monkeypatch):
    """rows_of_batches counts bytes as batches arrive: a value of 4 × 20,000 = 80,000 bytes
    passes (4 bytes the most a character takes), 80,001 does not, in a string or large_string
    column, plain or dictionary-encoded; the total is summed over both columns and every batch
    (an all-null batch adds 0) and compared with the limit, here set to the hand count."""
    import pyarrow as pa

    from rexrank import input_limits
    from rexrank.input_limits import rows_of_batches

    def batch(ids, texts):
        return pa.record_batch({"n": ids, "p": texts})

    for kind in (pa.string(), pa.large_string()):
        edge = "x" * 80_000
        assert rows_of_batches([batch(pa.array(["1"]), pa.array([edge], type=kind))], "n", "p", source="p") == [
            ("1", edge, "row 1")]
        too_long = pa.array([edge + "x"], type=kind)
        for column in (too_long, too_long.dictionary_encode()):
            with pytest.raises(SubmissionError) as err:
                rows_of_batches([batch(pa.array(["1"]), pa.array(["a"], type=kind)), batch(pa.array(["2"]), column)],
                                "n", "p", source="p")
            assert err.value.source == "p"
            assert str(err.value) == "p: column 'p' holds a value of 80,001 bytes; the limit is 20,000 characters"
    # ids "1", "2" + "abc", "de"; "3" x 3 + "fg" x 3 (a dictionary); an all-null batch: 2 + 5 + 3 + 6 + 0 = 16 bytes
    batches = [batch(pa.array(["1", "2"]), pa.array(["abc", "de"])),
               batch(pa.array(["3"] * 3), pa.array(["fg"] * 3).dictionary_encode()),
               batch(pa.array([None, None], type=pa.string()), pa.array([None, None], type=pa.string()))]
    monkeypatch.setattr(input_limits, "MAX_TABLE_BYTES", 16)
    assert [r[2] for r in rows_of_batches(batches, "n", "p", source="p")] == [f"row {i}" for i in range(1, 8)]
    monkeypatch.setattr(input_limits, "MAX_TABLE_BYTES", 15)
    with pytest.raises(SubmissionError) as err:
        rows_of_batches(batches, "n", "p", source="p")
    assert err.value.source == "p"
    assert str(err.value) == ("p: its 'n' and 'p' columns hold more than 0.0 MiB once decompressed (counted as they "
                              "are read, after 5 rows); the limit is 0.0 MiB (MAX_TABLE_BYTES): keep the id and "
                              "prediction columns only, and predictions of report length")


def test_parquet_footer_length_is_the_last_eight_bytes_by_the_format(tmp_path):
    """A parquet file ends in the metadata's length (4 bytes, little-endian) and b"PAR1"; the
    length equals the metadata's serialized size (pyarrow). Shorter than 8 bytes or another
    ending: 0."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rexrank.input_limits import _parquet_footer_length

    path = tmp_path / "p.parquet"
    pq.write_table(pa.table({"id": ["s1"], "text": ["a"]}), path)
    assert _parquet_footer_length(path) == pq.ParquetFile(path).metadata.serialized_size > 0
    for data, length in ((b"\x05\x00\x00\x00PAR1", 5), (b"\x05\x00\x00PAR1", 0), (b"", 0),
                         (b"\x05\x01\x00\x00PAR2", 0), (b"x\x05\x01\x00\x00PAR1", 261)):
        path.write_bytes(data)
        assert _parquet_footer_length(path) == length, data


def test_parquet_metadata_limits_at_and_one_past_each(tmp_path, monkeypatch):
    """Footer length, rows, row groups and columns, each at its limit and one past, with the
    message; the two columns' size is their column chunks' uncompressed (or compressed, if
    larger) sizes summed over every row group, as the format's metadata gives them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rexrank import input_limits
    from rexrank.input_limits import parquet_columns

    path = tmp_path / "p.parquet"

    def refused(source="p"):
        with pytest.raises(SubmissionError) as err:
            parquet_columns(path, ("id",), ("text",), source=source)
        assert err.value.source == source
        return str(err.value)[len(source) + 2:]

    # a footer that declares 1 MiB passes to pyarrow (which finds no such metadata); one byte more is refused
    for declared, expected in ((2**20, None), (2**20 + 1, "its metadata is 1.0 MiB; the limit is 1.0 MiB")):
        path.write_bytes(b"PAR1" + b"\0" * 16 + declared.to_bytes(4, "little") + b"PAR1")
        try:
            pq.ParquetFile(path)
        except Exception as exc:  # noqa: BLE001 - pyarrow's own words are the oracle
            theirs = f"not a readable parquet file ({type(exc).__name__}: {str(exc).strip().splitlines()[0]})"
        assert refused() == (expected or theirs)

    pq.write_table(pa.table({"id": [f"s{i}" for i in range(20_001)], "text": ["a"] * 20_001}), path)
    assert refused() == "has more than 20,000 rows (20,001); the largest test set has 10,000 studies"
    for groups in (1000, 1001):
        pq.write_table(pa.table({"id": [f"s{i}" for i in range(groups)], "text": ["a"] * groups}), path, row_group_size=1)
        assert pq.ParquetFile(path).metadata.num_row_groups == groups
        if groups == 1000:
            assert parquet_columns(path, ("id",), ("text",), source="p") == ("id", "text")
        else:
            assert refused() == "has 1,001 row groups; the limit is 1,000"
    for width in (1000, 1001):
        pq.write_table(pa.table({"id": ["s1"], "text": ["a"], **{f"c{i}": [i] for i in range(width - 2)}}), path)
        if width == 1000:
            assert parquet_columns(path, ("study_id", "id"), ("report", "text"), source="p") == ("id", "text")
        else:
            assert refused() == "has 1,001 columns; the limit is 1,000"

    pq.write_table(pa.table({"study": ["s1"], "text": ["a"]}), path)
    assert refused() == ("no id column: expected one of id, found study, text; name yours with --id-column NAME "
                         "(Python: id_column=NAME), or rename the column (the accepted shapes: CSV, JSONL or a JSON list of records with id and prediction fields; "
                         "a JSON object {id: prediction}; the ReXrank submission JSON (the test JSON with "
                         "model_prediction added to each study); a parquet file; a datasets.save_to_disk folder)")
    pq.write_table(pa.table({"id": ["s1"], "report": ["a"]}), path)
    assert refused() == ("no prediction text column: expected one of text, found id, report; name yours with "
                         "--prediction-column NAME (Python: prediction_column=NAME), or rename the column ("
                         "the accepted shapes: CSV, JSONL or a JSON list of records with id and prediction fields; "
                         "a JSON object {id: prediction}; the ReXrank submission JSON (the test JSON with "
                         "model_prediction added to each study); a parquet file; a datasets.save_to_disk folder)")
    pq.write_table(pa.table({"id": [1], "text": ["a"]}), path)
    assert refused() == ("column 'id' holds int64, not strings: write the study ids and the predictions as text "
                         "(a string column each)")

    # two row groups of three columns: only "id" and "text" count, in every row group
    pq.write_table(pa.table({"id": ["s1", "s2"], "text": ["abc", "de"], "other": ["x" * 500] * 2}), path, row_group_size=1)
    meta = pq.ParquetFile(path).metadata
    chunks = [meta.row_group(g).column(c) for g in range(2) for c in range(3)]
    size = sum(max(c.total_uncompressed_size, c.total_compressed_size) for c in chunks if c.path_in_schema != "other")
    assert len([c for c in chunks if c.path_in_schema != "other"]) == 4
    monkeypatch.setattr(input_limits, "MAX_TABLE_BYTES", size)
    assert parquet_columns(path, ("id",), ("text",), source="p") == ("id", "text")
    monkeypatch.setattr(input_limits, "MAX_TABLE_BYTES", size - 1)
    assert refused() == "its 'id' and 'text' columns decompress to 0.0 MiB; the limit is 0.0 MiB"


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/status"), reason="needs Linux's /proc")
def test_read_capped_asks_for_cap_plus_one_bytes_and_no_more(monkeypatch):
    """The bound itself: a file that grows without end (or a /proc file that says 0 bytes)
    costs at most cap + 1 bytes of reading. A spy on the opened file records what is asked."""
    import os

    from rexrank.input_limits import read_capped

    asked, fdopen = [], os.fdopen

    class Spy:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return self.fh.__exit__(*exc)

        def read(self, size=-1):
            asked.append(size)
            return self.fh.read(size)

    monkeypatch.setattr(os, "fdopen", lambda *args, **kwargs: Spy(fdopen(*args, **kwargs)))
    with pytest.raises(SubmissionError):
        read_capped("/proc/self/status", 100)
    assert asked == [101]


# ---- store.queue: the request state machine's rules, written out -------------------------
class _Clock:
    """time.monotonic for the queue module, moved by hand."""

    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def test_a_lease_expires_after_its_own_duration_on_this_processes_clock(monkeypatch):
    """The rule (LeaseClock): a lease has expired once its token (lease_token, worker,
    attempts, lease_expires) has stayed the same for its `lease_seconds`, measured from when
    this process first saw it; a duration that is not a number in (0, 86400] (a bool, a
    string, 0, negative, more than a day) is replaced by the caller's default."""
    from rexrank.store import queue as Q

    clock = _Clock()
    monkeypatch.setattr(Q.time, "monotonic", clock)
    leases = Q.LeaseClock()
    req = {"id": "r1", "lease_token": "a", "worker": "w", "attempts": 1, "lease_expires": 5.0, "lease_seconds": 10}
    assert leases.observe(req) == 0.0
    clock.t += 9.5
    assert leases.observe(req) == 9.5 and not leases.expired(req, 1000)
    clock.t += 0.5
    assert leases.expired(req, 1000)  # 10 s unchanged: expired exactly at its duration
    for field, value in (("lease_token", "b"), ("worker", "w2"), ("attempts", 2), ("lease_expires", 6.0)):
        req = {**req, field: value}  # any part of the token changed: a renewal, counted from now
        assert leases.observe(req) == 0.0
        clock.t += 10
        assert leases.observe(req) == 10.0
    # durations outside (0, 86400] or not numbers fall back to the default (here 100 s)
    for i, duration in enumerate((True, "10", 0, -5, 86400.5, None)):
        other = {"id": f"d{i}", "lease_token": "t", "lease_seconds": duration}
        leases.observe(other)
        clock.t += 99
        assert not leases.expired(other, 100), duration
        clock.t += 1
        assert leases.expired(other, 100), duration
    day = {"id": "day", "lease_token": "t", "lease_seconds": 86400}  # a day is still its own duration
    leases.observe(day)
    clock.t += 86399
    assert not leases.expired(day, 1)
    clock.t += 1
    assert leases.expired(day, 1)
    small = {"id": "small", "lease_token": "t", "lease_seconds": 0.5}
    leases.observe(small)
    clock.t += 0.5
    assert leases.expired(small, 1000)
    leases.forget({"day", "small"})  # the others are no longer RUNNING: what was seen of them goes
    assert set(leases._seen) == {"day", "small"}
    clock.t += 1
    assert leases.observe({"id": "r1", **{k: req[k] for k in ("lease_token", "worker", "attempts", "lease_expires")}}) == 0.0


def test_a_new_lease_is_a_fresh_16_hex_digit_token_and_the_duration_asked():
    from rexrank.store.queue import new_lease

    first, second = new_lease(30), new_lease(30)
    assert set(first) == {"lease_token", "lease_seconds"}
    assert re.fullmatch(r"[0-9a-f]{16}", first["lease_token"]) and first["lease_token"] != second["lease_token"]
    assert first["lease_seconds"] == 30.0 and type(first["lease_seconds"]) is float


def test_a_transition_sets_the_status_dates_a_settled_request_and_appends_its_history():
    """The rule: the new status and fields replace the old; FINISHED and FAILED get
    finished_time; the history gains {time, status} and the worker when one is given."""
    from rexrank.store.queue import transition

    ts = 1_767_225_600.0  # 2026-01-01T00:00:00Z, by hand:
    assert ts == (2026 - 1970) * 365 * 86400 + 14 * 86400  # 14 leap days between 1970 and 2026
    old = {"id": "r", "status": "PENDING", "history": [{"time": "x", "status": "PENDING"}], "keep": 1}
    running = transition(old, "RUNNING", ts, worker="w1", attempts=1)
    assert running == {"id": "r", "status": "RUNNING", "keep": 1, "worker": "w1", "attempts": 1,
                       "history": [{"time": "x", "status": "PENDING"},
                                   {"time": "2026-01-01T00:00:00Z", "status": "RUNNING", "worker": "w1"}]}
    assert old["history"] == [{"time": "x", "status": "PENDING"}]  # the old record is left as it was
    for status in ("FINISHED", "FAILED"):
        done = transition(running, status, ts + 61, worker=None)
        assert done["finished_time"] == "2026-01-01T00:01:01Z" and done["status"] == status
        assert done["history"][-1] == {"time": "2026-01-01T00:01:01Z", "status": status}  # no worker given: none named
    back = transition({"id": "r", "status": "RUNNING"}, "PENDING", ts)
    assert "finished_time" not in back and back["history"] == [{"time": "2026-01-01T00:00:00Z", "status": "PENDING"}]


def test_arrivals_are_open_queue_requests_not_yet_received_and_get_the_servers_time():
    """The rule (stamp_arrivals): an open request in queue/ without received_time is
    registered now and dated now; anything else (settled, in done/, already received)
    is returned as it is. _seen: settled, or open and registered."""
    from rexrank.store.queue import _seen, stamp_arrivals

    class Edit:
        def __init__(self):
            self.received = []

        def receive(self, rid, when):
            self.received.append((rid, when))

    edit = Edit()
    when = "2026-01-01T00:00:00Z"
    requests = [("queue/a.json", {"id": "a", "status": "PENDING", "submitted_time": "1999-01-01T00:00:00Z"}),
                ("queue/b.json", {"id": "b", "status": "RUNNING", "submitted_time": "x"}),
                ("queue/c.json", {"id": "c", "status": "PENDING", "submitted_time": "y", "received_time": "y"}),
                ("queue/d.json", {"id": "d", "status": "FAILED", "submitted_time": "z"}),
                ("done/e.json", {"id": "e", "status": "PENDING", "submitted_time": "w"})]
    out = stamp_arrivals(edit, requests, 1_767_225_600.0)
    assert edit.received == [("a", when), ("b", when)]
    assert [p for p, _ in out] == [p for p, _ in requests]
    assert out[0][1] == {"id": "a", "status": "PENDING", "submitted_time": when, "received_time": when}
    assert out[1][1]["submitted_time"] == out[1][1]["received_time"] == when
    assert [r for _, r in out[2:]] == [r for _, r in requests[2:]]
    assert [_seen(r) for _, r in requests] == [False, False, True, True, False]
    assert [_seen(r) for _, r in out] == [True, True, True, True, False]


def _store_with_request(tmp_path, **kw):
    from rexrank.data import data_path
    from rexrank.store import Quota, open_store

    store = open_store(tmp_path / "s", quota=Quota(1, 7))
    args = dict(test_set="example", track="findings", predictions=data_path("example_predictions.json"),
                model_name="model-a", submitter="alice")
    return store, store.submit(**{**args, **kw})


def test_each_queue_operation_follows_the_state_machine_written_out(tmp_path):
    """The rules, from the queue's docstrings: only the holder of a RUNNING request may
    renew, publish, dispatch, finish, fail or release it; release puts it back PENDING with
    the attempt not counted and the reason in its history; requeue takes FAILED or RUNNING
    back to PENDING with attempts 0, no error, no dispatch; cancel takes PENDING or RUNNING
    to FAILED, kind "cancelled", with "cancelled by the maintainers: <reason>"."""
    from rexrank.store import StoreError

    store, req = _store_with_request(tmp_path)
    rid = req["id"]
    claimed = store.claim("w1", lease_seconds=60)
    assert (claimed["status"], claimed["worker"], claimed["attempts"], claimed["lease_seconds"]) == ("RUNNING", "w1", 1, 60.0)
    assert claimed["history"][-1]["worker"] == "w1" and claimed["started_time"] == claimed["history"][-1]["time"]
    assert claimed["lease_expires"] - time_of(claimed["started_time"]) == pytest.approx(60, abs=1.5)
    for other in ("w2", None):  # not the holder: refused, nothing changes
        assert not store.renew_lease(rid, other, lease_seconds=60)
        assert not store.begin_publish(rid, other)
        assert not store.record_dispatch(rid, other, {"jobs": []})
        assert not store.release(rid, other, reason="r")
        assert not store.fail(rid, other, error="e")
        assert not store.finish(rid, other, result_id="x")
    assert store.get_request(rid)["history"] == claimed["history"]
    assert store.renew_lease(rid, "w1", lease_seconds=90)
    renewed = store.get_request(rid)
    assert renewed["lease_seconds"] == 90.0 and renewed["lease_token"] != claimed["lease_token"]
    assert store.record_dispatch(rid, "w1", {"jobs": ["j1"]}) and store.get_request(rid)["dispatch"] == {"jobs": ["j1"]}
    assert store.release(rid, "w1", reason="no test set here")
    back = store.get_request(rid)
    assert (back["status"], back["worker"], back["lease_expires"], back["attempts"], back["publishing"]) == ("PENDING", None, None, 0, False)
    assert back["history"][-1]["note"] == "no test set here" and back["history"][-1]["status"] == "PENDING"
    assert [h["status"] for h in back["history"]] == ["PENDING", "RUNNING", "PENDING"]
    again = store.claim("w2", lease_seconds=60)
    assert again["attempts"] == 1  # the released attempt was not counted
    assert store.fail(rid, "w2", error="boom", kind="validation")
    failed = store.get_request(rid)
    assert (failed["status"], failed["error"], failed["failure_kind"], failed["lease_expires"]) == ("FAILED", "boom", "validation", None)
    assert failed["finished_time"] == failed["history"][-1]["time"]
    with pytest.raises(StoreError, match=re.escape(f"request {rid} is FAILED; only PENDING or RUNNING requests can be cancelled")):
        store.cancel(rid)
    requeued = store.requeue(rid)
    assert {k: requeued[k] for k in ("status", "worker", "lease_expires", "error", "failure_kind", "attempts", "publishing", "dispatch")} \
        == {"status": "PENDING", "worker": None, "lease_expires": None, "error": None, "failure_kind": None,
            "attempts": 0, "publishing": False, "dispatch": None}
    assert store.get_request(rid) == requeued
    with pytest.raises(StoreError, match=re.escape(f"request {rid} is PENDING; only FAILED or RUNNING requests can be requeued")):
        store.requeue(rid)
    cancelled = store.cancel(rid, reason="withdrawn")
    assert (cancelled["status"], cancelled["failure_kind"], cancelled["error"], cancelled["worker"]) == \
        ("FAILED", "cancelled", "cancelled by the maintainers: withdrawn", None)
    assert store.get_request(rid) == cancelled


def time_of(text):
    from datetime import datetime, timezone

    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


def test_finish_keeps_notes_and_a_cancel_without_reason_says_only_who(tmp_path):
    from rexrank.store import StoreError

    store, req = _store_with_request(tmp_path)
    store.claim("w", lease_seconds=60)
    assert store.begin_publish(req["id"], "w") and store.get_request(req["id"])["publishing"] is True
    with pytest.raises(StoreError, match=re.escape(f"request {req['id']}: its result is being published; too late to cancel it")):
        store.cancel(req["id"])
    assert store.finish(req["id"], "w", result_id="res-1", notes=("metric x not run",))
    done = store.get_request(req["id"])
    assert (done["status"], done["result_id"], done["notes"], done["error"], done["lease_expires"]) == \
        ("FINISHED", "res-1", ["metric x not run"], None, None)
    with pytest.raises(StoreError, match=re.escape(f"request {req['id']} is FINISHED; only FAILED or RUNNING requests can be requeued")):
        store.requeue(req["id"])
    store2, other = _store_with_request(tmp_path / "b")
    assert store2.cancel(other["id"])["error"] == "cancelled by the maintainers"
    store3, third = _store_with_request(tmp_path / "c")
    store3.claim("w", lease_seconds=60)
    assert store3.finish(third["id"], "w", result_id="r")
    assert "notes" not in store3.get_request(third["id"])  # no notes: no field
    store4, fourth = _store_with_request(tmp_path / "d")
    store4.claim("w", lease_seconds=60)
    assert store4.requeue(fourth["id"])["status"] == "PENDING"  # a RUNNING request can be requeued too
    with pytest.raises(StoreError, match="no request '20260101T120000.000000-0123456789' in "):
        store4.renew_lease("20260101T120000.000000-0123456789", "w", lease_seconds=1)


def test_a_request_interrupted_max_attempts_times_fails_with_the_count_in_its_message(tmp_path, monkeypatch):
    """Rule: a RUNNING request whose lease expired and that was claimed max_attempts times
    is FAILED, kind internal, with the count in its message; below that it is claimed again."""
    from rexrank.store import queue as Q

    clock = _Clock()
    monkeypatch.setattr(Q.time, "monotonic", clock)
    store, req = _store_with_request(tmp_path)
    assert store.claim("w1", lease_seconds=10, max_attempts=2)["attempts"] == 1
    clock.t += 10
    assert store.claim("w2", lease_seconds=10, max_attempts=2)["attempts"] == 2
    clock.t += 9.9
    assert store.claim("w3", lease_seconds=10, max_attempts=2) is None  # 9.9 s of a 10 s lease: live
    clock.t += 0.1
    assert store.claim("w3", lease_seconds=10, max_attempts=2) is None
    failed = store.get_request(req["id"])
    assert (failed["status"], failed["failure_kind"]) == ("FAILED", "internal")
    assert failed["error"] == ("scoring was interrupted 2 times (worker stopped or timed out); this usually means it needs "
                               "more memory or time than the worker has — contact the maintainers")
    assert failed["history"][-1] == {"time": failed["finished_time"], "status": "FAILED"}


def test_a_release_gives_back_only_the_released_attempt(tmp_path, monkeypatch):
    """Rule (release): attempts becomes max(0, attempts − 1): a request claimed twice (its
    first lease expired) and then released has 1 attempt, not 0; one whose record has no
    attempts (an earlier store's) counts as 1 and goes back to 0."""
    from rexrank.store import queue as Q

    clock = _Clock()
    monkeypatch.setattr(Q.time, "monotonic", clock)
    store, req = _store_with_request(tmp_path)
    store.claim("w1", lease_seconds=10)
    clock.t += 10
    assert store.claim("w2", lease_seconds=10)["attempts"] == 2
    assert store.release(req["id"], "w2", reason="r")
    assert store.get_request(req["id"])["attempts"] == 1
    store.claim("w3", lease_seconds=10)
    path = tmp_path / "s" / "requests" / "queue" / f"{req['id']}.json"
    record = json.loads(path.read_text())
    del record["attempts"]
    path.write_text(json.dumps(record))
    assert store.release(req["id"], "w3", reason="r")
    assert store.get_request(req["id"])["attempts"] == 0
