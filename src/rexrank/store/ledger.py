"""The privacy ledger: the ε each submitter has spent on each private test set (the budget
is explained in rexrank.backend.privacy).

requests repo:
    ledger/<test_set>/<key>.json    one submitter's charges on one private test set:
                                    {"submitter", "submitter_id", "test_set", "charges":
                                    {request id (#N for its Nth queueing): {"time",
                                    "epsilon", "numbers", "decisions"}}}

A submitter is its Hub account's id (rexrank.store.accounts): a renamed account keeps its
ledger, and whoever takes a freed name starts with nothing of the old holder's. On a local
store, and for requests filed before ids were recorded, the ledger is the name's (the file
it always had); on a Hub store such a name, once bound to an account's id
(accounts/legacy.json, rexrank.store.accounts), is that account's: its charges count in the
account's spend, and that account's new charges are written to its id's file.

Written by the backend (and `rexrank cancel`, which charges a cancelled request) only, in
one commit per charge (optimistic concurrency, as every
store write): a request is charged once, when a worker takes it up, whatever happens to it
afterwards: a failure, a crash or a cancel after that point is not a free question. A
request re-claimed after a crash, or given back by a worker whose machine failed
(`release`), is not charged twice: the fault was ours. One requeued by the maintainers is
(it is scored and its outcome published again). The store's config.json may set
another total per test set: "privacy_budget": {"rexgradient": 138} (0: no limit).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from rexrank.store import records as R
from rexrank.store.accounts import Account, bound_id, legacy_bindings, legacy_names, owner, submitter_of
from rexrank.store.repo import Snapshot, StoreError, load_json_object, transact

LEDGER_DIR = R.LEDGER_DIR
BUDGET_KEY = "privacy_budget"


def ledger_path(submitter: Account | str, test_set: str) -> str:
    """An account's ledger file: by its Hub id; an account without one (a local store's
    typed name, or a request filed before ids) by its name, one account whatever its case
    (the Hub's own rule)."""
    account = submitter if isinstance(submitter, Account) else Account(submitter)
    text = f"id:{account.id}" if account.id else account.name.strip().casefold()
    key = hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]
    return f"{LEDGER_DIR}{R._safe(test_set)}/{key}.json"


@dataclass(frozen=True)
class Budget:
    total: float  # ε per `days`; <= 0: no limit
    days: float

    def spent(self, charges: dict, now: float) -> float:
        window = self.days * 86400
        return sum(c["epsilon"] for c in charges.values() if abs(now - R.parse_iso(c["time"])) < window)

    def next_fit(self, charges: dict, cost: float, now: float) -> str:
        """When the oldest charges leave the window far enough for `cost` to fit."""
        window = self.days * 86400
        live = sorted((R.parse_iso(c["time"]), c["epsilon"]) for c in charges.values()
                      if abs(now - R.parse_iso(c["time"])) < window)
        spent = sum(e for _, e in live)
        for when, epsilon in live:
            spent -= epsilon
            if spent + cost <= self.total + 1e-9:
                return R.iso(when + window)
        return R.iso(now + window)


def budget(store, test_set: str, *, default_total: float, days: float) -> Budget:
    """The total for `test_set`: the store's config ("privacy_budget") or `default_total`."""
    from rexrank.store.config import read_config

    configured = read_config(store).get(BUDGET_KEY)
    if configured is None:
        return Budget(default_total, days)
    where = f"{store.name}/{R.CONFIG_FILE}: {BUDGET_KEY}"
    if not isinstance(configured, dict):
        raise StoreError(f"{where} must be an object mapping test set names to totals (ε per {days:g} days)")
    total = configured.get(test_set, default_total)
    if isinstance(total, bool) or not isinstance(total, (int, float)) or total < 0:
        raise StoreError(f"{where}[{test_set!r}] must be a number >= 0 (ε per {days:g} days; 0 = no limit)")
    return Budget(float(total), days)


@dataclass(frozen=True)
class Refusal:
    spent: float
    total: float
    cost: float
    next_fit: str


def _load(store, snap: Snapshot, path: str) -> dict:
    damaged = f"ledger file {path} is damaged; the backend refuses to score on it until it is restored from the repo's history"
    content = load_json_object(store.requests, snap, path, damaged=damaged)
    if not isinstance(content.get("charges", {}), dict):
        raise StoreError(f"{store.requests.name}: {damaged}")
    return content


def _owner_files(store, snap: Snapshot, submitter: Account | str, test_set: str) -> tuple[Account, str, dict]:
    """Whose ledger `submitter`'s is (the account a name recorded before ids is bound to),
    the file it writes, and every charge it has spent: that file's and those of its names
    recorded before ids."""
    account = submitter if isinstance(submitter, Account) else Account(submitter)
    legacy = legacy_bindings(store.requests, snap)
    account = owner(account, legacy)
    path = ledger_path(account, test_set)
    names = legacy_names(account.id, legacy)
    if account.id and bound_id(account.name, legacy) is None:  # bound to it by its filing (Store.bind_legacy_name)
        names.append(account.name)
    spent: dict = {}
    for name in names:
        spent.update(_load(store, snap, ledger_path(Account(name), test_set)).get("charges", {}))
    spent.update(_load(store, snap, path).get("charges", {}))
    return account, path, spent


def charges(store, submitter: Account | str, test_set: str) -> dict:
    """The charges recorded for `submitter` on `test_set` ({request id: charge})."""
    return _owner_files(store, store.requests.snapshot(), submitter, test_set)[2]


def starts_a_round(entry) -> bool:
    """Whether a history entry queues the request for a new round of scoring: its filing
    and each requeue by the maintainers. A worker's give-back after a fault of its machine
    (`release`; "note" in stores of earlier versions) and a release from review (the
    request was never scored) are the same round."""
    return (isinstance(entry, dict) and entry.get("status") == R.PENDING
            and not (entry.get("given_back") or entry.get("note") or entry.get("reviewed")))


def charge_key(request: dict) -> str:
    """A request's charge: once per round (a requeue by the maintainers scores and
    publishes it again, so it is charged again; a crash and re-claim, or a give-back, is
    not)."""
    rounds = sum(1 for h in request.get("history") or () if starts_a_round(h))
    return request["id"] if rounds <= 1 else f"{request['id']}#{rounds}"


def charge(store, request: dict, *, cost: float, numbers: int, decisions: int, limit: Budget,
           now: float | None = None) -> Refusal | None:
    """Charge `request` its `cost` (ε) on its submitter's ledger, unless that would take the
    last `limit.days` above `limit.total`: then nothing is written and the Refusal says
    what was spent. A request already charged (`charge_key`) is not charged again (None)."""
    ts = R.now() if now is None else now
    refused: list[Refusal] = []

    def decide(snap: Snapshot):
        account, path, spent_so_far = _owner_files(store, snap, submitter_of(request), request["test_set"])
        key = charge_key(request)
        if key in spent_so_far:
            return None
        if limit.total > 0:
            spent = limit.spent(spent_so_far, ts)
            if spent + cost > limit.total + 1e-9:
                refused.append(Refusal(spent, limit.total, cost, limit.next_fit(spent_so_far, cost, ts)))
                return None
        recorded = dict(_load(store, snap, path).get("charges", {}))
        recorded[key] = {"time": R.iso(ts), "epsilon": cost, "numbers": numbers, "decisions": decisions}
        updated = {"submitter": account.name, **({"submitter_id": account.id} if account.id else {}),
                   "test_set": request["test_set"], "charges": recorded}
        return ({path: R.dumps(updated)}, f"ledger: {request['id']} spends ε {cost:g} on {request['test_set']}", None)

    transact(store.requests, decide)
    return refused[-1] if refused else None
