"""rexrank.backend.public_door: every public field of a private request has a decision
(PUBLIC_FIELDS), the fixed vocabulary of outcomes, and the privacy ledger (issue 28.1-2)."""
from __future__ import annotations

import json

import pytest

from rexrank.backend import privacy
from rexrank.backend import public_door as door
from rexrank.backend.worker import Worker
from rexrank.errors import MetricError, SubmissionError
from rexrank.store import FAILED, FINISHED, Quota, open_store
from rexrank.store import ledger
from rexrank.store.accounts import Account
from support.backend_fixtures import PRIVATE_SENTENCES, private_set, test_metrics  # noqa: F401 (fixtures)
from support.fixed_noise import FixedNoise
from support.requests import submit, write_jsonl


def walk_fields(record: dict, answer: dict) -> dict[str, set[str]]:
    """The field names of a result record and a /status answer, by the places PUBLIC_FIELDS names."""
    found: dict[str, set[str]] = {k: set() for k in door.PUBLIC_FIELDS}
    found["record"] |= set(record)
    for summary in record["summaries"].values():
        found["summary"] |= set(summary)
        for scores in summary["scores"].values():
            found["summary.scores"] |= set(scores)
        found["summary.privacy"] |= set(summary["privacy"])
    for value in record["values"].values():
        found["values"] |= set(value)
    found["provenance"] |= set(record["provenance"])
    found["provenance.test_set"] |= set(record["provenance"]["test_set"])
    found["provenance.predictions"] |= set(record["provenance"]["predictions"])
    found["status"] |= set(answer)
    found["request"] |= set(answer["request"])
    found["request.predictions"] |= set(answer["request"]["predictions"])
    for value in (answer["results"] or {}).values():
        found["values"] |= set(value)
    return found


def test_every_public_field_of_a_private_request_has_a_decision(tmp_path, private_set):
    """A field the door emits that PUBLIC_FIELDS does not list fails this test: add it there
    with the reason it may be public, or keep it out."""
    from rexrank.hub.eval_results import exportable

    data_dir, preds = private_set
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store, preds, test_set="rexgradient")
    Worker(store, data_dir=data_dir, metrics="bleu2,leaky", worker_id="w", min_coverage=0.5).run(once=True)
    request = store.get_request(req["id"])
    assert request["status"] == FINISHED
    [record] = store.list_results()
    found = walk_fields(record, door.status_answer(request, record))
    undecided = {place: sorted(names - door.PUBLIC_FIELDS[place]) for place, names in found.items()
                 if names - door.PUBLIC_FIELDS[place]}
    assert undecided == {}
    assert found["summary.scores"] == {"mean", "ci95"}  # and no counts, failures or timings
    assert "attempt" not in record["provenance"]  # how often scoring was interrupted: a crash can count the track
    assert all(v["n"] is None for v in record["values"].values())
    assert exportable(record) is not None  # a private set's results are not exported as Eval Results
    # a GREEN summary says how many studies its batches couple
    results = {"test_set": {"n_studies": 1000}, "predictions": {"n": 1000}, "metrics": {"green": {
        "scores": {"green": {"n": 1000, "n_missing": 0, "mean": 0.3, "ci95": 0.01}}, "higher_is_better": True,
        "provenance": {"config": {"length_cap": "2048 - padded width of the study's batch of 8 in input order "
                                                "(official)"}}}}}
    green = privacy.private_results(results)["metrics"]["green"]
    assert set(green["privacy"]) <= door.PUBLIC_FIELDS["summary.privacy"] and green["privacy"]["study_coupling"] == 8
    assert green["rounding_decimals"]["green"] == {"mean": 1, "ci95": 1}  # 5 × 8 / 1000 = 0.04: one decimal


def test_a_private_failure_says_one_of_a_fixed_vocabulary(tmp_path, private_set):
    request = {"id": "r", "test_set": "rexgradient", "track": "findings"}
    for exc in (door.CoverageError("green scored 8 of 16 studies", without_causes="green scored 8 of 16"),
                MetricError("none of the 16 studies could be scored: prompt is 2473 tokens (16x)"),
                RuntimeError(f"cannot handle reference: {PRIVATE_SENTENCES[0]}")):
        message, _ = door.failure(request, exc)
        assert message in door.PRIVATE_OUTCOMES
    message, kind = door.failure(request, SubmissionError("x", details={"missing": ["RG001"], "n_expected": 6}))
    assert kind == "validation" and message == ("the predictions do not match the private test set: 1 of 6 studies "
                                                "have no prediction (a private test set's study ids are never listed)")


def test_a_private_coverage_failure_uses_the_quota(tmp_path, private_set, monkeypatch):
    """A coverage failure on a private set was a free probe: it counts like a finished request."""
    data_dir, preds = private_set
    store = open_store(tmp_path / "s", quota=Quota(1, 7))
    req = submit(store, preds, test_set="rexgradient")
    monkeypatch.setattr(privacy, "COVERAGE_MARGIN", -1e6)  # the noisy rule fails whatever the coverage
    Worker(store, data_dir=data_dir, metrics="bleu2", worker_id="w").run(once=True)
    assert store.get_request(req["id"])["failure_kind"] == "coverage"
    with pytest.raises(SubmissionError, match="already has 1 submission"):
        submit(store, write_jsonl(tmp_path / "again.jsonl", {"RG000": "x"}), test_set="rexgradient", model_name="m-2")


def test_the_ledger_charges_each_request_once_within_its_window(tmp_path):
    store = open_store(tmp_path / "s")
    limit = ledger.Budget(3.0, 365)
    request = {"id": "20260101T000000.000000-0000000001", "submitter": "Alice", "test_set": "rexgradient"}
    day = 86400.0
    assert ledger.charge(store, request, cost=1.5, numbers=2, decisions=1, limit=limit, now=0.0) is None
    assert ledger.charge(store, request, cost=1.5, numbers=2, decisions=1, limit=limit, now=day) is None  # once
    second = {**request, "id": "20260101T000000.000000-0000000002", "submitter": "alice"}  # the same account
    assert ledger.charge(store, second, cost=1.5, numbers=2, decisions=1, limit=limit, now=2 * day) is None
    third = {**request, "id": "20260101T000000.000000-0000000003"}
    refusal = ledger.charge(store, third, cost=1.5, numbers=2, decisions=1, limit=limit, now=3 * day)
    assert refusal == ledger.Refusal(spent=3.0, total=3.0, cost=1.5, next_fit="1971-01-01T00:00:00Z")
    assert sorted(ledger.charges(store, "alice", "rexgradient")) == [request["id"], second["id"]]
    requeued = {**request, "history": [{"status": "PENDING"}, {"status": "FAILED"}, {"status": "PENDING"}]}
    assert ledger.charge_key(requeued) == request["id"] + "#2"  # scored and published again: charged again
    # a year after the first charge, it no longer counts
    assert ledger.charge(store, third, cost=1.5, numbers=2, decisions=1, limit=limit, now=365 * day + 1) is None
    assert json.loads((tmp_path / "s" / "requests" / ledger.ledger_path("ALICE", "rexgradient")).read_text())[
        "charges"][third["id"]]["epsilon"] == 1.5


def test_the_default_budget_fits_a_year_of_rexranks_full_metric_set():
    from rexrank.store.config import REXRANK_SET

    assert privacy.numbers_published(REXRANK_SET.all) == 22
    assert privacy.submission_cost(REXRANK_SET.all) == 11.5
    assert privacy.LEDGER_TOTAL == 12 * privacy.submission_cost(REXRANK_SET.all)
    n = 10_000
    floor = privacy.floor_studies(n)
    for column in ("bleu2", "bertscore", "sembscore", "radgraph", "ratescore"):
        assert privacy.noise_scale(column, floor)["mean"] < 1e-3  # below the board's third decimal


def test_a_budget_in_the_stores_config_is_checked(tmp_path):
    store = open_store(tmp_path / "s")
    config = tmp_path / "s" / "requests" / "config.json"
    config.write_text(json.dumps({"privacy_budget": {"rexgradient": 20}}))
    assert ledger.budget(store, "rexgradient", default_total=138, days=365) == ledger.Budget(20.0, 365)
    assert ledger.budget(store, "other", default_total=138, days=365) == ledger.Budget(138, 365)
    config.write_text(json.dumps({"privacy_budget": {"rexgradient": "lots"}}))
    with pytest.raises(Exception, match=r"privacy_budget\['rexgradient'\] must be a number >= 0"):
        ledger.budget(store, "rexgradient", default_total=138, days=365)


def test_the_worker_refuses_a_private_request_over_budget_before_scoring(tmp_path, private_set):
    data_dir, preds = private_set
    store = open_store(tmp_path / "s", quota=Quota(0))
    (tmp_path / "s" / "requests" / "config.json").write_text(json.dumps({"privacy_budget": {"rexgradient": 1.5}}))
    first = submit(store, preds, test_set="rexgradient", model_name="m-1")
    second = submit(store, write_jsonl(tmp_path / "p2.jsonl", {f"RG{i:03d}": "y" for i in range(6)}),
                    test_set="rexgradient", model_name="m-2")
    public = submit(store, model_name="m-public")  # public test sets have no ledger
    for _ in range(3):
        Worker(store, data_dir=data_dir, metrics="bleu2", worker_id="w").run(once=True)
    assert store.get_request(first["id"])["status"] == FINISHED
    refused = store.get_request(second["id"])
    assert refused["status"] == FAILED and refused["failure_kind"] == "refused"
    assert "privacy budget" in refused["error"] and "RG0" not in refused["error"]
    assert store.get_request(public["id"])["status"] == FINISHED


def test_the_leaderboard_refuses_a_filing_the_ledger_cannot_pay_for(tmp_path, private_set):
    """A courtesy at filing (the backend decides): the store's metric set costs more than is left."""
    from rexrank.leaderboard.submit import file_request

    data_dir, preds = private_set
    store = open_store(tmp_path / "s", quota=Quota(0))
    (tmp_path / "s" / "requests" / "config.json").write_text(json.dumps({"privacy_budget": {"rexgradient": 14}}))
    common = dict(test_set="rexgradient", track="findings", typed_name="mallory")
    first = file_request(store, predictions=str(preds), model_name="m-1", **common)  # ReXrank's set: ε 11.5
    Worker(store, data_dir=data_dir, metrics="bleu2", worker_id="w").run(once=True)  # charged ε 1.5
    assert store.get_request(first["id"])["status"] == FINISHED
    assert file_request(store, predictions=str(preds), model_name="m-2", **common)  # 1.5 spent + 11.5 fits in 14
    Worker(store, data_dir=data_dir, metrics="bleu2", worker_id="w").run(once=True)
    with pytest.raises(SubmissionError, match=r"^this request would spend ε 11.5 on rexgradient, and mallory has spent "
                                              r"3 of its 14 in the last 365 days"):
        file_request(store, predictions=str(preds), model_name="m-3", **common)


def test_a_cancelled_private_request_is_charged_once(tmp_path, private_set, capsys):
    from rexrank.cli.main import main

    data_dir, preds = private_set
    store = open_store(tmp_path / "s", quota=Quota(0))
    pending = submit(store, preds, test_set="rexgradient", model_name="m-1")
    assert main(["cancel", pending["id"], "--store", str(tmp_path / "s")]) == 0
    assert ledger.charges(store, "alice", "rexgradient")[pending["id"]]["epsilon"] == 11.5  # ReXrank's set
    public = submit(store, model_name="m-public")
    assert main(["cancel", public["id"], "--store", str(tmp_path / "s")]) == 0
    assert list(ledger.charges(store, "alice", "rexgradient")) == [pending["id"]]  # public sets have no ledger


# ---- what each failure says, by hand (mutation survivors: the door's words were unpinned) --------

def test_each_failure_kind_and_its_public_words_by_hand():
    from rexrank.errors import ReaderKilled

    public = {"id": "r", "test_set": "example", "track": "findings"}
    details = {"missing": ["a", "b"], "n_expected": 5}
    assert door.failure(public, SubmissionError("2 studies have no prediction", details=details)) == (
        "the predictions do not match the test set: 2 studies have no prediction", "validation")
    # the reader stopped by this machine is no fault of the file: an internal error
    assert door.failure(public, ReaderKilled("reader stopped after 60 s")) == (
        "internal error while scoring (ReaderKilled: reader stopped after 60 s)", "internal")
    coverage = door.CoverageError("bleu2 scored 1 of 5 studies; cause: x", without_causes="bleu2 scored 1 of 5")
    assert door.failure(public, coverage) == ("bleu2 scored 1 of 5 studies; cause: x", "coverage")
    assert door.failure(public, MetricError("no weights for green")) == (
        "a metric of this backend's set could not run, so it scored none of the studies: no weights for green. "
        "Nothing was published; the maintainers can requeue this request once the cause is fixed.", "coverage")
    assert door.failure(public, RuntimeError("boom")) == ("internal error while scoring (RuntimeError: boom)",
                                                          "internal")
    # the server's paths never reach the submitter: the known ones, then anything absolute
    assert door.failure(public, OSError("cannot read /srv/rexrank/cache/x.json"), known_paths=["d1"]) == (
        "internal error while scoring (OSError: cannot read <server path>)", "internal")
    assert door.failure(public, RuntimeError("in d1 now"), known_paths=["d1"])[0] == (
        "internal error while scoring (RuntimeError: in <server path> now)")
    # the set's access from the registry; an unknown set is public (its words are the file's own)
    assert door.failure({"test_set": "no-such-set"}, RuntimeError("boom"))[0] == (
        "internal error while scoring (RuntimeError: boom)")
    private = {"id": "r", "test_set": "rexgradient", "track": "findings"}
    assert door.failure(private, SubmissionError("x", details=details)) == (
        "the predictions do not match the private test set: 2 of 5 studies have no prediction (a private test "
        "set's study ids are never listed)", "validation")
    assert door.failure(private, coverage) == (door.PRIVATE_COVERAGE_FAILED, "coverage")
    assert door.failure(private, MetricError("no weights")) == (door.PRIVATE_COVERAGE_FAILED, "coverage")
    assert door.failure(private, ReaderKilled("stopped")) == (door.PRIVATE_INTERNAL_ERROR, "internal")
    # a caller that resolved the access already is believed, whatever the name says
    assert door.failure(public, RuntimeError("boom"), private=True) == (door.PRIVATE_INTERNAL_ERROR, "internal")
    assert door.failure(private, RuntimeError("boom"), private=False)[0] == (
        "internal error while scoring (RuntimeError: boom)")


def test_a_budget_refusal_says_the_figures_and_when_a_request_fits_by_hand():
    request = {"test_set": "rexgradient", "submitter": "alice"}
    fits_later = ledger.Refusal(spent=9.5, total=10.0, cost=1.25, next_fit="2027-03-01")
    head = ("refused: this request would spend ε 1.25 on rexgradient, and alice has spent 9.5 of its 10 in the last "
            "365 days (the privacy budget of a private test set)")
    assert door.budget_refusal(request, fits_later) == head + "; the next request of this size fits after 2027-03-01"
    assert door.budget_refusal(request, ledger.Refusal(0.0, 1.0, 1.0, "now")).endswith("fits after now")  # cost = total
    never = ledger.Refusal(spent=0.0, total=1.0, cost=1.5, next_fit="never")
    assert door.budget_refusal(request, never) == (
        "refused: this request would spend ε 1.5 on rexgradient, and alice has spent 0 of its 1 in the last 365 days "
        "(the privacy budget of a private test set); no request of this size fits: ask the organisers for a smaller "
        "metric set or a larger budget")
    assert door.policy_refusal("one submission a week") == "refused: one submission a week"
    assert door.notes({"green": "no GPU", "crimson": "no key"}) == ["green was not scored: no GPU",
                                                                    "crimson was not scored: no key"]


_REQUEST = {"id": "20260101T000000.1-abc", "status": "FAILED", "model_name": "m", "test_set": "rexgradient",
            "track": "findings", "submitter": "alice", "submitted_time": "2026-01-01T00:00:00Z", "worker": "w",
            "lease_until": 5.0, "error": "cannot open /srv/data/x.json",
            "predictions": {"source": "hf://alice/preds@abc", "repo": "alice/preds", "revision": "abc", "n": 3,
                            "n_empty": 1, "ids_checked": True, "path": "/srv/store/preds.jsonl", "sha256": "f00"}}


def test_what_anyone_reads_of_a_request_by_hand():
    answer = door.public_request(_REQUEST)
    assert answer == {"id": _REQUEST["id"], "status": "FAILED", "model_name": "m", "test_set": "rexgradient",
                      "track": "findings", "submitter": "alice", "namespace": "alice",
                      "submitted_time": "2026-01-01T00:00:00Z",
                      "predictions": {"revision": "abc", "n": 3, "n_empty": 1, "ids_checked": True},
                      "error": "cannot open <server path>"}
    # the submitter who just filed it reads its dataset's name too; a namespace of its own is kept
    own = door.public_request({**_REQUEST, "namespace": "lab", "error": None}, own=True)
    assert own["predictions"] == {"source": "hf://alice/preds@abc", "repo": "alice/preds", "revision": "abc", "n": 3,
                                  "n_empty": 1, "ids_checked": True}
    assert own["namespace"] == "lab" and own["error"] is None
    bare = door.public_request({k: v for k, v in _REQUEST.items() if k not in ("predictions", "error")})
    assert bare["predictions"] == {} and bare["error"] is None
    assert door.status_answer(_REQUEST, {"values": {"bleu2": {"mean": 0.3}}}) == {
        "found": True, "error": None, "request": answer, "results": {"bleu2": {"mean": 0.3}}, "notes": []}
    with_notes = door.status_answer({**_REQUEST, "notes": ("green was not scored: no GPU",)}, None)
    assert with_notes["results"] is None and with_notes["notes"] == ["green was not scored: no GPU"]


def test_how_a_result_names_the_predictions_it_scored_by_hand():
    results = {"predictions": {"n": 3, "n_empty": 1, "n_not_in_track": 2, "empty_ids": ["s2"]}}
    filed = {"source": "hf://alice/preds@abc", "revision": "abc", "sha256": "f00", "n": 5, "n_empty": 0}
    # a dataset not said public when it was filed is named by its commit; on a private set only the
    # submitter's own file's counts
    assert door.predictions_provenance({"predictions": filed}, results, private=True) == {
        "sha256": "f00", "source": "a private dataset at commit abc", "n": 5, "n_empty": 0}
    assert door.predictions_provenance({"predictions": {**filed, "public": True}}, results, private=False) == {
        "sha256": "f00", "source": "hf://alice/preds@abc", "n": 3, "n_empty": 1, "n_not_in_track": 2,
        "empty_ids": ["s2"]}
    assert door.predictions_provenance({"predictions": {"source": "x.jsonl", "sha256": "e"}}, results,
                                       private=True) == {"sha256": "e", "source": "x.jsonl", "n": None, "n_empty": None}


class _TenthNoise:
    """Every Laplace draw is +0.1: the record is noised with the generator it is given."""

    def laplace(self, loc, scale):
        return 0.1


def _scored_results() -> dict:
    bleu2 = {"scores": {"bleu2": {"mean": 0.3, "ci95": 0.02, "n": 590, "n_missing": 0}}, "higher_is_better": True,
             "n_failed": 0, "provenance": {"checkpoint": "/srv/models/bleu.bin", "hub": "org/model"}}
    return {"test_set": {"name": "rexgradient", "title": "ReXGradient", "split": "test", "track": "findings",
                         "access": "private", "n_studies": 590, "n_studies_outside_track": 410, "sha256": "refs"},
            "predictions": {"n": 590, "n_empty": 0, "n_not_in_track": 0, "empty_ids": []},
            "metrics": {"bleu2": bleu2}, "created": "2026-01-02T03:04:05Z", "python": "3.11.9",
            "statistics": {"bootstrap": 1000}}


def test_a_result_record_by_hand_public_and_private():
    request = {"id": "r1", "model_name": "m", "submitter": "alice", "submitted_time": "2026-01-01T09:00:00Z",
               "test_set": "rexgradient", "track": "findings", "attempts": 2,
               "predictions": {"source": "preds.jsonl", "sha256": "f00", "n": 1000, "n_empty": 3}}
    public = door.result_record(request, _scored_results(), private=False, worker_id="w1", not_scored={},
                                version="9.9")
    assert public == {
        "id": "r1", "request_id": "r1", "model_name": "m", "institution": "", "model_url": "", "submitter": "alice",
        "namespace": "alice", "date": "2026-01-01", "test_set": "rexgradient", "track": "findings",
        "source": "rexrank", "trained_on": [], "per_study_available": False,
        "values": {"bleu2": {"mean": 0.3, "ci95": 0.02, "n": 590}},
        "summaries": {"bleu2": {"scores": {"bleu2": {"mean": 0.3, "ci95": 0.02, "n": 590, "n_missing": 0}},
                                "higher_is_better": True, "n_failed": 0}},
        "provenance": {"rexrank_version": "9.9", "scored_time": "2026-01-02T03:04:05Z", "python": "3.11.9",
                       "worker": "w1", "attempt": 2,
                       "metrics": {"bleu2": {"checkpoint": "bleu.bin", "hub": "org/model"}},  # no server folders
                       "test_set": _scored_results()["test_set"],
                       "predictions": {"sha256": "f00", "source": "preds.jsonl", "n": 590, "n_empty": 0,
                                       "n_not_in_track": 0, "empty_ids": []},
                       "statistics": {"bootstrap": 1000}}}
    linked = {**request, "institution": "Lab", "model_url": "https://x", "namespace": "lab", "model_repo": "lab/m",
              "trained_on": ["mimic"]}
    extra = door.result_record(linked, _scored_results(), private=False, worker_id="w1",
                               not_scored={"green": "no GPU"}, version="9.9")
    assert {k: extra[k] for k in ("institution", "model_url", "namespace", "model_repo", "trained_on", "not_scored")} \
        == {"institution": "Lab", "model_url": "https://x", "namespace": "lab", "model_repo": "lab/m",
            "trained_on": ["mimic"], "not_scored": {"green": "no GPU"}}
    private = door.result_record(request, _scored_results(), private=True, worker_id="w1", not_scored={},
                                 version="9.9", min_coverage=0.5, rng=_TenthNoise())
    # noised (0.3 + 0.1, 0.02 + 0.1) and rounded for the whole set's 1000 studies: two decimals, since a
    # hundredth is at least 5 / 1000 and 5 × 1.96 / 1000 (the track's 590 would give the CI one); no
    # counts, no scoring time or attempts, the track's size and references' hash left out
    assert private["values"] == {"bleu2": {"mean": 0.4, "ci95": 0.12, "n": None}}
    assert private["summaries"] == {"bleu2": {
        "scores": {"bleu2": {"mean": 0.4, "ci95": 0.12}}, "rounding_decimals": {"bleu2": {"mean": 2, "ci95": 2}},
        "privacy": {"mechanism": "laplace", "epsilon_per_number": 0.5, "studies_at_least": "50%"},
        "higher_is_better": True}}
    assert private["provenance"] == {
        "rexrank_version": "9.9", "python": "3.11.9", "worker": "w1",
        "metrics": {"bleu2": {"checkpoint": "bleu.bin", "hub": "org/model"}},
        "test_set": {"name": "rexgradient", "title": "ReXGradient", "split": "test", "track": "findings",
                     "access": "private"},
        "predictions": {"sha256": "f00", "source": "preds.jsonl", "n": 1000, "n_empty": 3},
        "statistics": {"bootstrap": 1000}}


# ---- the coverage rule, by hand ------------------------------------------------------------------

def test_the_public_coverage_rule_names_each_short_metric_and_its_causes_by_hand():
    failures = {"s1": "timeout", "s2": "timeout", "s3": "bad  json\n here", "s4": "x" * 300}
    results = {"predictions": {"n": 10}, "metrics": {
        "bleu2": {"n_scored": 9, "n_failed": 5},  # n_scored wins over n_failed: 9 of 10 is the 90 % asked
        "green": {"n_failed": 4, "failures": failures},  # 6 of 10
        "rouge": {"n_studies": 20, "n_scored": 17}}}  # its own count of studies: 17 of 20
    error = door.coverage_failure(results, ["bleu2", "green", "radgraph"], min_coverage=0.9, private=False)
    head = "below the coverage rule (each metric must score at least 90% of the studies): "
    assert str(error) == (head + "radgraph scored 0 studies; cause: it did not run; "
                          "green scored 6 of 10 studies (60.0%); cause: 2 × timeout, 1 × bad json here, 1 × "
                          + "x" * 200 + "; rouge scored 17 of 20 studies (85.0%); cause: no per-study reasons were "
                          "recorded" + door.COVERAGE_TAIL)
    assert error.without_causes == (head + "radgraph scored 0 studies; green scored 6 of 10 studies (60.0%); "
                                    "rouge scored 17 of 20 studies (85.0%)" + door.COVERAGE_TAIL)
    assert door.coverage_failure(results, ["bleu2"], min_coverage=0.85, private=False) is not None  # green
    assert door.coverage_failure({"predictions": {"n": 10}, "metrics": {"bleu2": {"n_failed": 1}}}, ["bleu2"],
                                 min_coverage=0.9, private=False) is None  # 9 of 10
    assert door.coverage_failure({"predictions": {"n": 0}, "metrics": {"bleu2": {"n_scored": 0}}}, ["bleu2"],
                                 min_coverage=0.9, private=False) is None  # no studies: none to fall short of
    # a summary that counts neither scored nor failed studies scored none
    missing = door.coverage_failure({"predictions": {"n": 4}, "metrics": {"bleu2": {}}}, [], min_coverage=0.5,
                                    private=False)
    assert "bleu2 scored 0 of 4 studies (0.0%)" in str(missing)
    # more than three reasons: the three most common, then how many others
    many = {f"s{i}": why for i, why in enumerate(["a", "a", "a", "b", "b", "c", "d", "e"])}
    short = door.coverage_failure({"predictions": {"n": 8}, "metrics": {"m": {"n_failed": 8, "failures": many}}},
                                  [], min_coverage=0.5, private=False)
    assert "cause: 3 × a, 2 × b, 1 × c and 2 other reason(s)" in str(short)


def test_the_private_coverage_rule_is_a_noisy_threshold_with_a_margin_by_hand():
    import math

    # L = 0.99 × 1000 = 990 studies asked of the set's 1000 (never of the submitter's 600 rows); the
    # margin ln(1 / (2 · 1e-6)) / 0.5 = 26.245 studies
    margin = math.log(1 / (2 * 1e-6)) / 0.5
    assert privacy.COVERAGE_MARGIN == pytest.approx(margin, rel=1e-12)

    def decided(metrics, noise, asked=("bleu2",), counts=None):
        rng = FixedNoise(noise)
        results = {**(counts or {"test_set": {"n_studies": 1000}, "predictions": {"n": 600}}), "metrics": metrics}
        error = door.coverage_failure(results, asked, min_coverage=0.99, private=True, rng=rng)
        return error, rng.asked

    short_by_20 = {"bleu2": {"n_scored": 970}}
    assert decided(short_by_20, 0.0) == (None, [(0.0, 2.0)])  # the noise's scale: 1 / ε = 2
    assert decided(short_by_20, -6.2)[0] is None  # -26.2 is within the margin
    error, _ = decided(short_by_20, -6.3)  # -26.3 is not
    assert str(error) == error.without_causes == door.PRIVATE_COVERAGE_FAILED
    assert decided({"bleu2": {"n_scored": 990}}, -margin)[0] is None  # exactly at the margin passes
    assert decided({"bleu2": {"n_failed": 30}}, -6.3)[0] is not None  # 970 scored of the set's 1000
    assert decided(short_by_20, -6.3, counts={"predictions": {"n": 1000}})[0] is not None  # n from the rows
    assert decided({"bleu2": {"n_scored": 1000}}, -36.2)[0] is None  # 10 over: -26.2 still passes
    # GREEN in official batches of 8: one reference moves 8 studies, so the gap counts in batches
    green = {"n_scored": 800, "provenance": {"config": {"length_cap": "official: a batch of 8 in input order"}}}
    assert decided({"green": green}, 0.0, asked=("green",))[0] is None  # (800 - 990) / 8 = -23.75
    assert decided({"green": green}, -2.6, asked=("green",))[0] is not None  # -26.35
    # batches by length couple the whole set's 1000: even none scored is a gap of 0.99 of one
    by_length = {"n_scored": 0, "provenance": {"config": {"length_cap": "batches of similar length"}}}
    assert decided({"green": by_length}, 0.0, asked=("green",))[0] is None
    # a metric asked for that did not run scored none; the worst metric decides
    assert decided({}, 963.7)[0] is not None  # -990 + 963.7 = -26.3
    assert decided({"bleu2": {"n_scored": 990}, "rouge": {"n_scored": 950}}, 0.0)[0] is not None  # -40
    assert decided({}, 0.0, asked=()) == (None, [])  # no metric: nothing decided, no noise drawn
    # without a generator, the secure one: 10 studies over passes and none scored fails but by a
    # Laplace(2) draw beyond 36 or 963 (a chance of e^-18 at most)
    ample = {"test_set": {"n_studies": 1000}, "predictions": {"n": 1000}}
    assert door.coverage_failure({**ample, "metrics": {"bleu2": {"n_scored": 1000}}}, ["bleu2"], min_coverage=0.99,
                                 private=True) is None
    assert door.coverage_failure({**ample, "metrics": {}}, ["bleu2"], min_coverage=0.99, private=True) is not None


# ---- the ledger at filing and at a cancel, by hand -----------------------------------------------

def test_a_filing_is_refused_when_the_ledger_cannot_pay_for_the_stores_set_by_hand(tmp_path):
    store = open_store(tmp_path / "s")
    config = tmp_path / "s" / "requests" / "config.json"
    config.write_text(json.dumps({"privacy_budget": {"rexgradient": 23}}))
    day = 86400.0

    def charged(number: int, cost: float):
        request = {"id": f"20260101T000000.000000-000000000{number}", "submitter": "alice", "test_set": "rexgradient"}
        assert ledger.charge(store, request, cost=cost, numbers=2, decisions=1, limit=ledger.Budget(0.0, 365),
                             now=0.0) is None

    def problem(test_set="rexgradient", **when):
        return door.filing_budget_problem(store, submitter="alice", test_set=test_set, **when)

    charged(1, 11.500000001)
    # 11.500000001 spent + ReXrank's set's 11.5 is the budget of 23 within its tolerance of 1e-9 exactly
    assert problem(now=day) is None
    charged(2, 0.5)
    assert problem(now=day) == (
        "refused: this request would spend ε 11.5 on rexgradient, and alice has spent 12 of its 23 in the last 365 "
        "days (the privacy budget of a private test set); the next request of this size fits after "
        "1971-01-01T00:00:00Z")  # when the charges of 1970-01-01 leave the year
    # a Hub account is named as it is shown
    said = door.filing_budget_problem(store, submitter=Account("alice"), test_set="rexgradient", now=day)
    assert said.startswith("refused: this request would spend ε 11.5 on rexgradient, and alice has spent 12 of its 23")
    assert problem() is None  # today: those charges are decades old
    assert problem(test_set="example", now=day) is None  # a public set has no ledger
    config.write_text(json.dumps({"privacy_budget": {"rexgradient": 1}}))  # less than one request costs
    assert problem(now=day).endswith("in the last 365 days (the privacy budget of a private test set); no request of "
                                     "this size fits: ask the organisers for a smaller metric set or a larger budget")
    config.write_text(json.dumps({"privacy_budget": {"rexgradient": 0}}))
    assert problem(now=day) is None  # a budget of 0: no limit
    config.write_text(json.dumps({}))  # the default budget, 138: 12 requests of ReXrank's set
    charged(3, 114.9)
    assert "alice has spent 126.9 of its 138 in the last 365 days" in problem(now=day)  # 126.9 + 11.5 > 138


def test_a_cancelled_private_request_is_charged_the_stores_set_by_hand(tmp_path):
    store = open_store(tmp_path / "s")
    private = {"id": "20260101T000000.000000-0000000001", "submitter": "alice", "test_set": "rexgradient"}
    door.charge_cancelled(store, private)
    [(key, entry)] = ledger.charges(store, "alice", "rexgradient").items()
    # ReXrank's set: 22 numbers at ε 0.5 and the coverage decision's 0.5
    assert key == private["id"] and (entry["epsilon"], entry["numbers"], entry["decisions"]) == (11.5, 22, 1)
    door.charge_cancelled(store, {**private, "id": "20260101T000000.000000-0000000002", "test_set": "example"})
    assert list(ledger.charges(store, "alice", "example")) == []  # a public set has no ledger
    assert door.request_cost(["bleu2", "bertscore"]) == (2 * 2 * 0.5 + 0.5, 4)  # a mean and a CI each


def test_a_private_sets_predictions_are_checked_against_every_track_s_ids(tmp_path):
    from types import SimpleNamespace

    track = SimpleNamespace(ids=["RG2", "RG1"], outside_ids=["RG3"])  # RG3: no findings section
    every = write_jsonl(tmp_path / "every.jsonl", {"RG1": "x", "RG2": "y", "RG3": "z"})
    door.check_private_ids(every, track, title="ReXGradient (private test)")  # the track's and the rest: all there
    only_track = write_jsonl(tmp_path / "track.jsonl", {"RG1": "x", "RG2": "y"})
    with pytest.raises(SubmissionError) as caught:
        door.check_private_ids(only_track, track, title="ReXGradient (private test)")
    assert str(caught.value) == f"{only_track}: 1 of 3 studies of ReXGradient (private test) have no prediction: 'RG3'"
    assert caught.value.details["missing"] == ["RG3"]
    assert door.is_private("rexgradient") and not door.is_private("example")  # the registry's word
