"""rexrank.store.ledger: whose file a charge goes to, what counts in a budget's window, when the
next request fits, a store's configured totals, the rounds a request is charged for, and what a
charge writes (issue 40: the mutation tool's survivors). Every expected value is worked out by
hand from the module's rules (its docstring), with whole-second times: the ledger keeps ISO
seconds."""
from __future__ import annotations

import hashlib
import json

import pytest

from rexrank.store import ledger, open_store
from rexrank.store.accounts import Account
from rexrank.store.repo import StoreError

DAY = 86400.0
T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z: 20,454 days after 1970 (56 years, 14 of them leap)
YEAR = ledger.Budget(10.0, 365)  # a window of 365 days
WINDOW = 365 * DAY
ALICE_ID = "64a1"
REQUEST = {"id": "20260101T000000.000000-00000000a1", "submitter": "alice", "test_set": "rexgradient"}


def _key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _at(day: float) -> float:
    return T0 + day * DAY


def _iso(day: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(_at(day), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _charge_at(day: float, epsilon: float) -> dict:
    return {"time": _iso(day), "epsilon": epsilon, "numbers": 2, "decisions": 1}


def _charge(store, request=REQUEST, *, cost=1.5, limit=YEAR, day=0.0, numbers=2, decisions=1):
    """`request` charged on `day` (days after T0)."""
    return ledger.charge(store, request, cost=cost, numbers=numbers, decisions=decisions, limit=limit, now=_at(day))


def _file(root, submitter, test_set="rexgradient") -> dict:
    return json.loads((root / "requests" / ledger.ledger_path(submitter, test_set)).read_text(encoding="utf-8"))


def _bind(root, name: str, account_id: str) -> None:
    """A name recorded before ids, bound to an account's id (accounts/legacy.json)."""
    path = root / "requests" / "accounts" / "legacy.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    bindings = json.loads(path.read_text()) if path.exists() else {}
    bindings[name.lower()] = {"id": account_id, "name": name}
    path.write_text(json.dumps(bindings))


# ---- whose file ------------------------------------------------------------------------------

def test_a_ledger_file_is_named_by_the_accounts_id_else_by_its_name_in_any_case():
    by_id = f"ledger/rexgradient/{_key('id:' + ALICE_ID)}.json"
    assert ledger.ledger_path(Account("alice", ALICE_ID), "rexgradient") == by_id
    assert ledger.ledger_path(Account("alice-renamed", ALICE_ID), "rexgradient") == by_id  # a rename keeps it
    by_name = f"ledger/rexgradient/{_key('alice')}.json"
    for spelt in ("alice", " ALICE ", "Alice", Account("aLiCe")):
        assert ledger.ledger_path(spelt, "rexgradient") == by_name
    assert ledger.ledger_path("alice", "rex/gradient") == f"ledger/rex_gradient/{_key('alice')}.json"  # no subfolder


# ---- the window ------------------------------------------------------------------------------

def test_only_charges_of_the_last_days_count_either_side_of_now():
    charges = {"a": _charge_at(0, 4.0), "b": _charge_at(100, 3.0)}
    assert YEAR.spent(charges, _at(0)) == 7.0  # b lies 100 days ahead (a clock skew): inside the window
    assert YEAR.spent(charges, _at(365) - 1) == 7.0  # a second before a leaves the window
    assert YEAR.spent(charges, _at(365)) == 3.0  # exactly 365 days later: a no longer counts
    assert YEAR.spent(charges, _at(-265)) == 4.0  # b lies exactly a window ahead: outside it
    assert YEAR.spent(charges, _at(465)) == 0.0
    assert ledger.Budget(10.0, 1).spent(charges, _at(0.5)) == 4.0  # a one-day window sees a only
    assert YEAR.spent({}, _at(0)) == 0.0


def test_the_next_fit_is_when_enough_of_the_oldest_charges_have_left_the_window():
    """Total 10; charges of 4 (day 0), 3 (day 10) and 2 (day 20), listed out of order, seen on
    day 30: 9 spent. A cost fits once the oldest charges that leave the window free enough."""
    charges = {"c": _charge_at(20, 2.0), "a": _charge_at(0, 4.0), "b": _charge_at(10, 3.0)}
    now = _at(30)
    assert YEAR.next_fit(charges, 5.0, now) == _iso(365)  # 9 - 4 + 5 = 10: when the charge of day 0 leaves
    assert YEAR.next_fit(charges, 6.0, now) == _iso(375)  # 5 + 6 = 11 > 10; 2 + 6 = 8: day 10's
    assert YEAR.next_fit(charges, 9.0, now) == _iso(385)  # 2 + 9 = 11 > 10; 0 + 9: day 20's
    assert YEAR.next_fit(charges, 11.0, now) == _iso(395)  # never fits: a window from now
    # a charge outside the window, a year ago or dated a year ahead, is neither spent nor waited for
    far = {**charges, "z": _charge_at(-400, 100.0), "y": _charge_at(30 + 365, 100.0)}
    assert YEAR.next_fit(far, 6.0, now) == _iso(375)


def test_totals_are_compared_with_a_float_tolerance_of_a_billionth_inclusive():
    """0.1 + 0.1 - 0.1 + 0.2 is 0.30000000000000004 in floats: a rounding error, not an
    overdraft; a sum of exactly the total plus 1e-9 still fits, in next_fit as in charge."""
    tenths = {"a": _charge_at(0, 0.1), "b": _charge_at(1, 0.1)}
    assert ledger.Budget(0.3, 365).next_fit(tenths, 0.2, _at(2)) == _iso(365)
    edge = 1.0 + 1e-9
    assert ledger.Budget(1.0, 365).next_fit({"a": _charge_at(0, 0.5)}, edge, _at(1)) == _iso(365)
    assert ledger.Budget(1.0, 365).next_fit({"a": _charge_at(0, 0.5)}, edge + 1e-9, _at(1)) == _iso(366)


# ---- the store's totals ----------------------------------------------------------------------

def _configure(root, config) -> None:
    (root / "requests" / "config.json").write_text(json.dumps(config))


def test_a_stores_totals_are_numbers_of_zero_or_more_and_a_set_without_one_gets_the_default(tmp_path):
    root = tmp_path / "s"
    store = open_store(root)
    assert ledger.budget(store, "rexgradient", default_total=138, days=365) == ledger.Budget(138, 365)  # no config
    _configure(root, {"privacy_budget": {"rexgradient": 0, "other": 7}})
    zero = ledger.budget(store, "rexgradient", default_total=138, days=30)
    assert zero == ledger.Budget(0.0, 30) and isinstance(zero.total, float)  # 0: no limit
    seven = ledger.budget(store, "other", default_total=138, days=365)
    assert seven == ledger.Budget(7.0, 365) and isinstance(seven.total, float)
    where = f"{root}/config.json: privacy_budget"
    for bad in (True, -1, "12", None):
        _configure(root, {"privacy_budget": {"rexgradient": bad}})
        with pytest.raises(StoreError) as refused:
            ledger.budget(store, "rexgradient", default_total=138, days=365.0)
        assert str(refused.value) == f"{where}['rexgradient'] must be a number >= 0 (ε per 365 days; 0 = no limit)"
    for not_a_mapping in (138, [138], "138"):
        _configure(root, {"privacy_budget": not_a_mapping})
        with pytest.raises(StoreError) as refused:
            ledger.budget(store, "rexgradient", default_total=138, days=30.5)
        assert str(refused.value) == f"{where} must be an object mapping test set names to totals (ε per 30.5 days)"


# ---- rounds ----------------------------------------------------------------------------------

def test_a_request_is_charged_once_per_round_the_maintainers_start():
    filed, requeued = {"status": "PENDING"}, {"status": "PENDING", "by": "maintainer"}
    assert ledger.starts_a_round(filed) and ledger.starts_a_round(requeued)
    for same_round in ({"status": "PENDING", "given_back": True}, {"status": "PENDING", "note": "machine lost"},
                       {"status": "PENDING", "reviewed": "released"}, {"status": "RUNNING"}, {"status": "FAILED"},
                       "PENDING", None):
        assert not ledger.starts_a_round(same_round), same_round
    rid = REQUEST["id"]
    assert ledger.charge_key({"id": rid}) == rid  # no history: its first round
    assert ledger.charge_key({"id": rid, "history": None}) == rid
    assert ledger.charge_key({"id": rid, "history": [filed, {"status": "RUNNING"}]}) == rid
    given_back = {"status": "PENDING", "given_back": True}
    assert ledger.charge_key({"id": rid, "history": [filed, given_back, filed]}) == f"{rid}#2"
    assert ledger.charge_key({"id": rid, "history": [filed, requeued, {"status": "FAILED"}, requeued]}) == f"{rid}#3"


# ---- a charge ----------------------------------------------------------------------------------

def test_a_charge_writes_its_time_cost_counts_and_owner_in_one_commit_saying_so(tmp_path):
    root = tmp_path / "s"
    store = open_store(root)
    messages = []
    commit = store.requests.commit

    def recording_commit(changes, *, message, parent):
        messages.append(message)
        return commit(changes, message=message, parent=parent)

    store.requests.commit = recording_commit
    assert _charge(store, cost=2.25, numbers=4, decisions=1, day=1 + 1 / DAY) is None
    assert _file(root, "alice") == {"submitter": "alice", "test_set": "rexgradient", "charges": {
        REQUEST["id"]: {"time": "2026-01-02T00:00:01Z", "epsilon": 2.25, "numbers": 4, "decisions": 1}}}
    assert messages == [f"ledger: {REQUEST['id']} spends ε 2.25 on rexgradient"]
    second = {**REQUEST, "id": "20260101T000000.000000-00000000a2", "submitter": "Alice", "submitter_id": ALICE_ID}
    assert _charge(store, second, cost=1.0, numbers=2, decisions=0, day=2) is None
    assert _file(root, Account("Alice", ALICE_ID)) == {
        "submitter": "Alice", "submitter_id": ALICE_ID, "test_set": "rexgradient",
        "charges": {second["id"]: {"time": "2026-01-03T00:00:00Z", "epsilon": 1.0, "numbers": 2, "decisions": 0}}}
    assert messages[-1] == f"ledger: {second['id']} spends ε 1 on rexgradient"


def test_a_charge_keeps_the_files_earlier_charges_and_never_charges_a_round_twice(tmp_path):
    root = tmp_path / "s"
    store = open_store(root)
    assert _charge(store, day=0) is None
    again = _charge(store, cost=9.0, day=1)
    assert again is None and list(_file(root, "alice")["charges"]) == [REQUEST["id"]]
    assert _file(root, "alice")["charges"][REQUEST["id"]]["epsilon"] == 1.5  # the first charge stands
    later = {**REQUEST, "id": "20260101T000000.000000-00000000a2"}
    assert _charge(store, later, day=2) is None
    assert sorted(_file(root, "alice")["charges"]) == [REQUEST["id"], later["id"]]


def test_a_charge_that_fits_exactly_is_written_and_one_over_is_refused_with_the_next_fit(tmp_path):
    root = tmp_path / "s"
    store = open_store(root)
    limit = ledger.Budget(0.3, 365)
    assert _charge(store, {**REQUEST, "id": "r1"}, cost=0.1, limit=limit, day=0) is None
    # 0.1 + 0.2 = 0.30000000000000004 in floats: a rounding error, not an overdraft
    assert _charge(store, {**REQUEST, "id": "r2"}, cost=0.2, limit=limit, day=1) is None
    refusal = _charge(store, {**REQUEST, "id": "r3"}, cost=0.1, limit=limit, day=2)
    assert (refusal.spent, refusal.total, refusal.cost) == (pytest.approx(0.3), 0.3, 0.1)
    assert refusal.next_fit == _charge_at(365, 0)["time"]  # when the 0.1 of day 0 leaves
    assert sorted(_file(root, "alice")["charges"]) == ["r1", "r2"]  # a refusal writes nothing
    # the tolerance's very edge fits (as next_fit counts it); a billionth more does not
    one = ledger.Budget(1.0, 365)
    assert _charge(store, {**REQUEST, "id": "e1", "submitter": "bob"}, cost=1.0 + 1e-9, limit=one) is None
    assert _charge(store, {**REQUEST, "id": "e2", "submitter": "carol"}, cost=1.0 + 2e-9, limit=one) is not None
    # no limit (a total of 0): charged whatever was spent
    assert _charge(store, {**REQUEST, "id": "r5"}, cost=50.0, limit=ledger.Budget(0.0, 365), day=4) is None
    assert _file(root, "alice")["charges"]["r5"]["epsilon"] == 50.0


def test_a_name_recorded_before_ids_counts_for_the_account_it_is_bound_to_and_no_other(tmp_path):
    root = tmp_path / "s"
    store = open_store(root)
    assert _charge(store, {**REQUEST, "id": "old"}, cost=4.0, day=0) is None  # filed by name, before ids
    _bind(root, "alice", ALICE_ID)
    renamed = Account("alice-renamed", ALICE_ID)
    assert list(ledger.charges(store, renamed, "rexgradient")) == ["old"]  # the bound name's charges count
    assert list(ledger.charges(store, "ALICE", "rexgradient")) == ["old"]  # the name is the account now
    new = {**REQUEST, "id": "new", "submitter": "alice-renamed", "submitter_id": ALICE_ID}
    refusal = _charge(store, new, cost=7.0, limit=ledger.Budget(10.0, 365), day=1)
    assert refusal is not None and refusal.spent == 4.0  # 4 + 7 > 10: the name's charge counts
    assert _charge(store, new, cost=6.0, limit=ledger.Budget(10.0, 365), day=1) is None
    assert list(_file(root, renamed)["charges"]) == ["new"]  # written to the id's file
    assert list(_file(root, "alice")["charges"]) == ["old"]
    assert _file(root, renamed)["submitter"] == "alice-renamed" and _file(root, renamed)["submitter_id"] == ALICE_ID
    # the name, filing without an id, is written to the bound account's file too
    assert _charge(store, {**REQUEST, "id": "by-name"}, cost=0.0, day=2) is None
    assert sorted(_file(root, renamed)["charges"]) == ["by-name", "new"]
    # whoever holds the name `alice` now, under another id, starts with nothing of the old holder's
    assert ledger.charges(store, Account("alice", "other-id"), "rexgradient") == {}


def test_an_accounts_own_name_without_a_binding_counts_its_charges_from_before_ids(tmp_path):
    """An account that files with its id, its name bound to no one (Store.bind_legacy_name
    binds it at the filing), spends what its name spent before ids."""
    root = tmp_path / "s"
    store = open_store(root)
    assert _charge(store, {**REQUEST, "submitter": "Bob", "id": "old"}, cost=3.0, day=0) is None
    assert list(ledger.charges(store, Account("bob", "b0b"), "rexgradient")) == ["old"]
    _bind(root, "bob", "someone-else")
    assert ledger.charges(store, Account("bob", "b0b"), "rexgradient") == {}


def test_a_ledger_whose_charges_are_no_object_is_damaged_and_stops_the_charge(tmp_path):
    root = tmp_path / "s"
    store = open_store(root)
    path = root / "requests" / ledger.ledger_path("alice", "rexgradient")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"charges": ["20260101T000000.000000-00000000a1"]}))
    expected = (f"{root / 'requests'}: ledger file {ledger.ledger_path('alice', 'rexgradient')} is damaged; "
                "the backend refuses to score on it until it is restored from the repo's history")
    for act in (lambda: ledger.charges(store, "alice", "rexgradient"), lambda: _charge(store)):
        with pytest.raises(StoreError) as damaged:
            act()
        assert str(damaged.value) == expected
    path.write_text(json.dumps({"submitter": "alice"}))  # no charges yet: an empty ledger
    assert ledger.charges(store, "alice", "rexgradient") == {}


class VersionedRepo:
    """A Hub repo's behaviour in memory: each commit a new version, files read at a
    snapshot's version, a commit on an old version a conflict."""

    name = "org/requests"

    def __init__(self, files: dict[str, bytes] | None = None):
        self.versions = [dict(files or {})]

    def version(self) -> str:
        return str(len(self.versions) - 1)

    def snapshot(self, *folders, at=None):
        from rexrank.store.repo import Snapshot

        return Snapshot(self.version())

    def read_optional(self, snapshot, path):
        return self.versions[int(snapshot.version)].get(path)

    def commit(self, changes, *, message, parent):
        from rexrank.store.repo import ConflictError

        if parent != self.version():
            raise ConflictError(f"{self.name}: version is {self.version()}, commit was made on {parent}")
        self.versions.append({**self.versions[-1], **changes})
        return self.version()


def test_two_workers_charging_at_once_decide_on_the_version_they_commit_on(tmp_path):
    """Worker A reads the ledger; worker B's charge lands before A's commit: A's commit
    conflicts, A reads again and sees B's charge, and the budget holds. Every file (the
    bindings, the bound name's ledger, the account's) is read at the version decided on."""
    from rexrank.store import Quota
    from rexrank.store.store import Store

    legacy = {"alice": {"id": ALICE_ID, "name": "alice"}}
    old = {"charges": {"old": _charge_at(0, 1.0)}}
    repo = VersionedRepo({"accounts/legacy.json": json.dumps(legacy).encode(),
                          ledger.ledger_path("alice", "rexgradient"): json.dumps(old).encode()})
    store = Store(repo, VersionedRepo(), name="hf://org", quota=Quota(0))
    limit = ledger.Budget(4.0, 365)
    worker_a = {**REQUEST, "id": "a", "submitter_id": ALICE_ID}
    worker_b = {**REQUEST, "id": "b", "submitter_id": ALICE_ID}
    commit = repo.commit

    def worker_b_commits_first(changes, *, message, parent):
        repo.commit = commit
        assert _charge(store, worker_b, cost=2.0, limit=limit, day=1) is None  # 1 + 2 fit in 4
        return commit(changes, message=message, parent=parent)

    repo.commit = worker_b_commits_first
    refusal = _charge(store, worker_a, cost=2.0, limit=limit, day=1)
    assert (refusal.spent, refusal.total, refusal.cost) == (3.0, 4.0, 2.0)  # read again: 1 + 2 + 2 > 4
    assert sorted(ledger.charges(store, Account("alice", ALICE_ID), "rexgradient")) == ["b", "old"]
    assert len(repo.versions) == 2  # B's commit only
