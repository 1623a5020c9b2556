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
from support.backend_fixtures import PRIVATE_SENTENCES, private_set, test_metrics  # noqa: F401 (fixtures)
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
