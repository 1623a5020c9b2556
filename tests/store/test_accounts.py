"""Who is who in a store: account keys, namespaces, names bound to ids before ids existed, and
approved lists (rexrank.store.accounts), called directly (the fake-Hub attacks that file
through the Space are in tests/leaderboard/test_identity_attacks.py).

Pinned by hand (issue 40: what the mutation tool found unpinned): every expected value comes from
the module's docstring and the Hub's rules, never from rexrank's earlier output."""
from __future__ import annotations

import json

import pytest

from rexrank.errors import SubmissionError
from rexrank.store.repo import StoreError
from rexrank.store import records
from rexrank.store.accounts import Account, Submitter

# 2026-01-01T00:00:00Z: 56 years after 1970, 14 of them leap years, so (56 * 365 + 14) days
NEW_YEAR_2026 = (56 * 365 + 14) * 86400


@pytest.fixture
def frozen_now(monkeypatch):
    monkeypatch.setattr(records, "now", lambda: float(NEW_YEAR_2026))
    return "2026-01-01T00:00:00Z"


# ---- keys: the Hub's immutable id, else the name as the Hub compares names ------------------
def test_an_account_key_is_the_name_trimmed_on_both_sides_case_aside():
    from rexrank.store.accounts import account_key

    assert account_key(" MBZUAI") == "mbzuai" and account_key("MBZUAI\t") == "mbzuai"
    assert account_key(2024) == "2024"  # a name read from JSON as a number is that name


def test_an_accounts_key_is_its_id_when_it_has_one_else_its_name():
    assert Account("Alice", "u1").key == "id:u1"
    assert Account("Bob", "u1").key == "id:u1"  # a renamed account is the same account
    assert Account(" Alice ").key == "name:alice"
    assert Account("Alice", "").key == "name:alice"  # an empty id is no id


def test_what_a_request_records_of_its_submitter_and_namespace():
    from rexrank.store.accounts import index_name, namespace_key, namespace_of, submitter_key, submitter_of

    assert submitter_of({}) == Account("", None)
    assert submitter_of({"submitter": "Bob", "submitter_id": ""}) == Account("Bob", None)
    assert submitter_of({"submitter": "Bob", "submitter_id": "u2"}) == Account("Bob", "u2")
    assert namespace_of({"submitter": "Bob", "submitter_id": "u2", "namespace": "Lab", "namespace_id": "o1"}) == \
        Account("Lab", "o1")
    assert namespace_of({"submitter": "Bob", "submitter_id": "u2", "namespace": "Lab", "namespace_id": ""}) == \
        Account("Lab", None)
    # a request recorded before namespaces files under its submitter
    assert namespace_of({"submitter": "Bob", "submitter_id": "u2", "namespace": ""}) == Account("Bob", "u2")
    assert submitter_key({"submitter": "Bob", "submitter_id": "u2", "namespace": "Lab"}) == "id:u2"
    assert namespace_key({"submitter": "Bob", "submitter_id": "u2", "namespace": "Lab"}) == "name:lab"
    # the index by submitter: the id, or the name as it always was (not lower-cased)
    assert index_name({"submitter": "Bob", "submitter_id": "u2"}) == "id:u2"
    assert index_name({"submitter": "Bob", "submitter_id": ""}) == "Bob"
    assert index_name({"submitter": "Bob"}) == "Bob"


def test_request_fields_record_ids_only_where_the_hub_gave_them():
    from rexrank.store.accounts import request_fields

    assert request_fields(Account("Bob", "u2"), Account("Lab", "o1")) == \
        {"submitter": "Bob", "namespace": "Lab", "submitter_id": "u2", "namespace_id": "o1"}
    assert request_fields(Account("Bob"), Account("Lab")) == {"submitter": "Bob", "namespace": "Lab"}
    assert request_fields(Account("Bob", "u2"), Account("Lab")) == {"submitter": "Bob", "namespace": "Lab",
                                                                    "submitter_id": "u2"}
    assert request_fields(Account("Bob"), Account("Lab", "o1")) == {"submitter": "Bob", "namespace": "Lab",
                                                                    "namespace_id": "o1"}


# ---- namespaces: the user or one of their organisations -------------------------------------
def test_a_namespace_is_the_user_or_one_of_their_organisations_by_name():
    alice = Submitter(Account("alice", "u1"), (Account("Acme", "o1"), Account("lab", "o2")))
    assert alice.accounts == (Account("alice", "u1"), Account("Acme", "o1"), Account("lab", "o2"))
    for none in (None, "", "   "):
        assert alice.namespace(none) == Account("alice", "u1")
    assert alice.namespace(" ACME ") == Account("Acme", "o1")
    assert alice.namespace("Lab") == Account("lab", "o2")
    assert alice.namespace("ALICE") == Account("alice", "u1")


def test_a_namespace_not_yours_on_the_hub_is_refused_naming_yours():
    alice = Submitter(Account("alice", "u1"), (Account("Acme", "o1"),))
    with pytest.raises(SubmissionError) as err:
        alice.namespace(" \x1b[31mmallory ")
    assert str(err.value) == ("namespace 'mallory' is not yours: file under your account or one of your "
                              "organisations (alice, Acme)")
    with pytest.raises(SubmissionError) as err:
        Submitter(Account("bob", "u2")).namespace("acme")
    assert str(err.value).endswith("organisations (bob)")


def test_on_a_local_store_any_typed_namespace_is_taken_as_typed():
    bob = Submitter(Account("bob"))
    assert bob.namespace(None) == Account("bob")
    assert bob.namespace(" Lab ") == Account("Lab", None)
    assert bob.namespace("BOB") == Account("bob")


# ---- names recorded before ids ----------------------------------------------------------------
class VersionedRepo:
    """A store repo's files at each version (what legacy_bindings reads: a file at a snapshot)."""

    name = "org/requests"

    def __init__(self, versions: dict[str, dict[str, str]]):
        self.versions = versions

    def read_optional(self, snap, path):
        return self.versions.get(snap, {}).get(path)


def test_legacy_bindings_are_accounts_legacy_json_at_the_snapshot_or_nothing():
    from rexrank.store.accounts import legacy_bindings

    binding = {"alice": {"id": "u1", "name": "alice"}}
    repo = VersionedRepo({"v1": {}, "v2": {"accounts/legacy.json": json.dumps(binding)}})
    assert legacy_bindings(repo, "v2") == binding
    assert legacy_bindings(repo, "v1") == {}
    for damaged in ("[1]", "{not json"):
        with pytest.raises(StoreError) as err:
            legacy_bindings(VersionedRepo({"v1": {"accounts/legacy.json": damaged}}), "v1")
        assert str(err.value) == "org/requests: accounts/legacy.json is damaged; restore it from the repo's history"


def test_a_name_bound_before_ids_is_its_ids_and_nothing_else_binds():
    from rexrank.store.accounts import bound_id, bound_key, legacy_names, owner

    legacy = {"alice": {"id": "u1", "name": "Alice"}, "al": {"id": "u1"}, "bob": {"id": "u2", "name": "Bob"},
              "carol": {"id": ""}, "dave": "u4", "erin": {"id": 5}}
    assert bound_id(" ALICE ", legacy) == "u1"
    assert bound_id("erin", legacy) == "5"  # an id written as a number is that id
    for unbound in ("carol", "dave", "frank"):
        assert bound_id(unbound, legacy) is None
    assert bound_key("name:alice", legacy) == "id:u1"
    assert bound_key("name:frank", legacy) == "name:frank"
    # an id is never read as a name, whatever its characters after the "name:" prefix's length
    assert bound_key("id:00alice", legacy) == "id:00alice"
    assert owner(Account("Alice"), legacy) == Account("Alice", "u1")
    assert owner(Account("frank"), legacy) == Account("frank", None)
    assert owner(Account("alice", "u9"), legacy) == Account("alice", "u9")  # an id is its own
    assert legacy_names("u1", legacy) == ["Alice", "al"]  # the name recorded, else the key
    assert legacy_names("u3", legacy) == []
    # no id owns no name, not even an entry that lost its id
    assert legacy_names(None, {"x": {"name": "X"}}) == [] and legacy_names("", {"x": {"id": "", "name": "X"}}) == []


def test_a_request_recorded_by_name_is_adopted_by_the_account_its_name_is_bound_to():
    from rexrank.store.accounts import adopt

    legacy = {"alice": {"id": "u1", "name": "alice"}}
    with_id = {"id": "r1", "submitter": "alice", "submitter_id": "u9"}
    assert adopt(with_id, legacy) is with_id  # an id recorded is kept whatever the name
    unbound = {"id": "r2", "submitter": "bob", "namespace": "bob"}
    assert adopt(unbound, legacy) is unbound
    nameless = {"id": "r3"}
    assert adopt(nameless, {"xxxx": {"id": "u1"}}) is nameless  # no name: nothing to be bound
    own = {"id": "r4", "submitter": "Alice", "namespace": "ALICE"}
    assert adopt(own, legacy) == {**own, "submitter_id": "u1", "namespace_id": "u1"}
    assert own == {"id": "r4", "submitter": "Alice", "namespace": "ALICE"}  # the request read stays as read
    org = {"id": "r5", "submitter": "alice", "namespace": "lab"}
    assert adopt(org, legacy) == {**org, "submitter_id": "u1"}  # another namespace keeps its own (no) id
    org_id = {"id": "r6", "submitter": "alice", "namespace": "alice", "namespace_id": "o7"}
    assert adopt(org_id, legacy) == {**org_id, "submitter_id": "u1"}
    before_namespaces = {"id": "r7", "submitter": "alice"}
    assert adopt(before_namespaces, legacy) == {"id": "r7", "submitter": "alice", "submitter_id": "u1"}


def test_a_legacy_binding_says_who_when_and_how(frozen_now):
    from rexrank.store.accounts import legacy_binding

    assert legacy_binding(Account("alice", "u1")) == {
        "id": "u1", "name": "alice", "time": frozen_now,
        "how": "the first filing under this name by an account with an id"}


# ---- approved lists -----------------------------------------------------------------------
def approve(approved, bindings, who):
    from rexrank.store.accounts import check_approved

    return check_approved(approved, bindings, submitter=who, test_set="rexgradient")


def test_an_approved_name_binds_to_the_first_account_that_files_under_it(frozen_now):
    assert approve([" Alice "], {}, Account("ALICE", "u1")) == \
        {"id": "u1", "name": "ALICE", "time": frozen_now, "how": "its first filing"}
    bound = {"alice": {"id": "u1", "name": "ALICE"}}
    assert approve(["alice"], bound, Account("alice", "u1")) is None  # bound already: nothing to record
    assert approve(["Alice"], bound, Account("alice-renamed", "u1")) is None
    with pytest.raises(SubmissionError) as err:
        approve(["alice"], bound, Account("\x1b[2Jalice", "u9"))  # the newcomer who took the freed name
    assert str(err.value) == ("test set rexgradient accepts submissions only from submitters approved by its organisers, "
                              "and 'alice' is not one of them; ask the organisers to be added")
    # a binding of a name that is no longer listed approves no one; a damaged entry binds no one
    with pytest.raises(SubmissionError):
        approve(["bob"], bound, Account("alice", "u1"))
    with pytest.raises(SubmissionError):
        approve(["alice"], {"alice": "u1"}, Account("alice-renamed", "u1"))


def test_on_a_local_store_the_typed_name_is_approved_or_not():
    assert approve(["Alice "], {}, Account(" alice")) is None
    assert approve(["alice"], {"alice": {"id": "u1"}}, Account("alice")) is None  # no ids to compare
    with pytest.raises(SubmissionError, match="'mallory' is not one of them"):
        approve(["alice"], {}, Account("mallory"))


def test_binding_an_approved_name_adds_it_to_its_test_sets_entries():
    from rexrank.store.accounts import bind

    content = {"rexgradient": {"bob": {"id": "u2"}}, "note": "kept out: not a test set's entries"}
    out = bind(content, "rexgradient", " Alice ", {"id": "u1"})
    assert out == {"rexgradient": {"bob": {"id": "u2"}, "alice": {"id": "u1"}}}
    assert content["rexgradient"] == {"bob": {"id": "u2"}}  # the content read stays as read
    assert bind(content, "mimic", "Alice", {"id": "u1"}) == {"rexgradient": {"bob": {"id": "u2"}},
                                                             "mimic": {"alice": {"id": "u1"}}}
