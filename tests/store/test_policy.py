"""The store's rules: the quota's window, identical resubmissions, names, approved submitters and
predictions datasets (rexrank.store.policy).

Pinned by hand (issue 32: what the mutation tool found unpinned): every expected value comes from an
independent oracle, never from rexrank's earlier output."""
from __future__ import annotations

import re

import pytest

from rexrank.errors import SubmissionError
from support.requests import _request


# ---- quota: the window is counted in days --------------------------------------------------
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
    assert Quota.parse(text).origin == "set with --quota"  # what a refusal names, by default
    assert Quota.parse(text, origin="set in config.json").origin == "set in config.json"
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
    # where it was set, which a refusal names (origin takes no part in ==)
    assert Quota.from_env().origin == ("ReXrank's for a public service; its organisers change it with --quota or the "
                                       "store's config.json key \"quota\"")
    monkeypatch.setenv("REXRANK_QUOTA", "2/3")
    assert Quota.from_env().origin == "set by REXRANK_QUOTA (or --quota)"


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
