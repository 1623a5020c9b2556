"""Who is who in a store: accounts are the Hub's immutable ids, names are for display.

On a Hub store every filing is made by a token whose account the Hub's whoami names, with
its id (an id stays with the account across renames; huggingface.js documents whoami's
`id` as "unique ID persistent across renames"). A request records the submitter's id and
name, and the namespace it files under (the submitter or one of their organisations, with
that account's id). The quota, the privacy ledger, the approved lists, duplicates and
copies compare ids: a renamed account keeps its quota and ledger, and whoever takes a
freed name inherits nothing.

On a local store there is no Hub to ask: the typed `--submitter` name is the identity,
compared as the Hub compares account names (`account_key`).

Requests and ledger files recorded before ids existed (a name only) are keyed by that name:
on a local store that is the same key as before, so nothing changes. On a Hub store the
name is bound to the id of the first account that files under it while such entries exist
(recorded in accounts/legacy.json with that filing, and never rebound): from then on the
name's requests count in that account's quota and duplicates and its ledger charges in that
account's spend, whatever the account is called later, and a newcomer who takes the freed
name inherits none of them. (As for approved names below, the Hub cannot say which account
held a name before ids: the first filing decides; a binding made in error is undone by
deleting its entry from accounts/legacy.json.)

Approved lists (config.json "approved_submitters") name accounts; each name is bound to
an account id when first resolved (the first filing by an account of that name after it
was approved), recorded in accounts/approved.json, and stays bound to that id: the account
may rename itself and stays approved, and a newcomer taking the freed name is not. (The Hub
has no documented way to ask a name's id, so the binding waits for that filing; organisers
who approve a name should ask its account to file soon. A binding made in error is undone
by deleting its entry from accounts/approved.json.)
"""
from __future__ import annotations

from dataclasses import dataclass

from rexrank.errors import SubmissionError
from rexrank.store import records as R
from rexrank.store.names import display
from rexrank.store.repo import load_json_object

APPROVED_BINDINGS = f"{R.ACCOUNTS_DIR}approved.json"
LEGACY_BINDINGS = f"{R.ACCOUNTS_DIR}legacy.json"  # {account_key(name): {"id", "name", "time", "how"}}


def account_key(name: str) -> str:
    """A Hub user or organisation name as the Hub tells accounts apart: spelt exactly, case
    aside (the Hub resolves `MBZUAI/...` and `mbzuai/...` to one repo: huggingface_hub issue
    #1453). Never the lookalike skeleton of model names: `stanford-aiml` and `stanford-aimi`
    are two accounts."""
    return str(name).strip().lower()


@dataclass(frozen=True)
class Account:
    """A Hub user or organisation: `id` is the Hub's (None on a local store, where the
    typed name is the identity), `name` is how it is shown."""

    name: str
    id: str | None = None

    @property
    def key(self) -> str:
        return f"id:{self.id}" if self.id else f"name:{account_key(self.name)}"


@dataclass(frozen=True)
class Submitter:
    """Who files: a user and the organisations they belong to (whoami's `orgs`)."""

    user: Account
    orgs: tuple[Account, ...] = ()

    @property
    def accounts(self) -> tuple[Account, ...]:
        return (self.user, *self.orgs)

    def namespace(self, name: str | None) -> Account:
        """The namespace to file a model under: the user (no `name`) or one of their
        organisations, by name."""
        name = (name or "").strip()
        if not name:
            return self.user
        for account in self.accounts:
            if account_key(account.name) == account_key(name):
                return account
        if self.user.id is None:  # a local store: any typed namespace, nothing to check it against
            return Account(name)
        theirs = ", ".join(display(a.name) for a in self.accounts)
        raise SubmissionError(f"namespace {display(name)!r} is not yours: file under your account or one of your "
                              f"organisations ({theirs})")


def submitter_of(request: dict) -> Account:
    return Account(str(request.get("submitter") or ""), request.get("submitter_id") or None)


def namespace_of(request: dict) -> Account:
    """The namespace a request files its model under; a request recorded before namespaces
    existed files under its submitter."""
    if request.get("namespace"):
        return Account(str(request["namespace"]), request.get("namespace_id") or None)
    return submitter_of(request)


def submitter_key(request: dict) -> str:
    return submitter_of(request).key


def namespace_key(request: dict) -> str:
    return namespace_of(request).key


def index_name(request: dict) -> str:
    """What the index by submitter files a request under: its submitter's id, or for a
    request without one its name (the file it always had)."""
    return f"id:{request['submitter_id']}" if request.get("submitter_id") else str(request["submitter"])


# ---- entries recorded by name, before ids ----------------------------------------------

def legacy_bindings(repo, snap) -> dict:
    """accounts/legacy.json at `snap` ({} when no name is bound)."""
    return load_json_object(repo, snap, LEGACY_BINDINGS,
                            damaged=f"{LEGACY_BINDINGS} is damaged; restore it from the repo's history")


def bound_id(name: str, legacy: dict) -> str | None:
    """The id a name recorded before ids is bound to, or None."""
    binding = legacy.get(account_key(name))
    return str(binding["id"]) if isinstance(binding, dict) and binding.get("id") else None


def bound_key(key: str, legacy: dict) -> str:
    """An account's key (Account.key) with a name recorded before ids as the id it is bound to."""
    found = bound_id(key[len("name:"):], legacy) if key.startswith("name:") else None
    return f"id:{found}" if found else key


def owner(account: Account, legacy: dict) -> Account:
    """`account` as its entries are kept: an account without an id whose name is bound is
    the bound account."""
    if account.id:
        return account
    return Account(account.name, bound_id(account.name, legacy))


def legacy_names(account_id: str | None, legacy: dict) -> list[str]:
    """The names recorded before ids that are bound to `account_id`."""
    if not account_id:
        return []
    return [str(b.get("name") or key) for key, b in legacy.items() if isinstance(b, dict) and b.get("id") == account_id]


def adopt(request: dict, legacy: dict) -> dict:
    """A request recorded by name only, as filed by the account its name is bound to (its
    namespace too when that is its submitter); any other request unchanged."""
    if request.get("submitter_id"):
        return request
    found = bound_id(str(request.get("submitter") or ""), legacy)
    if found is None:
        return request
    adopted = {**request, "submitter_id": found}
    if request.get("namespace") and not request.get("namespace_id") and \
            account_key(request["namespace"]) == account_key(request["submitter"]):
        adopted["namespace_id"] = found
    return adopted


def legacy_binding(submitter: Account) -> dict:
    """The entry binding `submitter.name` (recorded before ids) to `submitter.id`."""
    return {"id": submitter.id, "name": submitter.name, "time": R.iso(R.now()),
            "how": "the first filing under this name by an account with an id"}


def request_fields(submitter: Account, namespace: Account) -> dict:
    """What a request records of who filed it and under which namespace."""
    fields = {"submitter": submitter.name, "namespace": namespace.name}
    if submitter.id:
        fields["submitter_id"] = submitter.id
    if namespace.id:
        fields["namespace_id"] = namespace.id
    return fields


# ---- approved lists ----------------------------------------------------------------------

def check_approved(approved: list[str] | None, bindings: dict, *, submitter: Account, test_set: str) -> dict | None:
    """`approved`: the names the organisers approved for `test_set` (None: open to all);
    `bindings`: {account_key(name): {"id", "name", ...}} for that test set. Returns the
    binding to record when this filing is the first resolution of an approved name, else
    None; a SubmissionError when the submitter is not approved."""
    if approved is None:
        return None
    listed = {account_key(name) for name in approved}
    if submitter.id is None:  # a local store: the typed name
        if account_key(submitter.name) in listed:
            return None
    else:
        bound = {key for key, b in bindings.items() if isinstance(b, dict) and b.get("id") == submitter.id}
        if bound & listed:  # approved under a name it may since have changed
            return None
        own = account_key(submitter.name)
        if own in listed and own not in bindings:
            return {"id": submitter.id, "name": submitter.name, "time": R.iso(R.now()), "how": "its first filing"}
    raise SubmissionError(
        f"test set {test_set} accepts submissions only from submitters approved by its organisers, and "
        f"{display(submitter.name)!r} is not one of them; ask the organisers to be added"
    )


def bind(content: dict, test_set: str, name: str, binding: dict) -> dict:
    """`content` (accounts/approved.json) with `name` bound on `test_set`."""
    out = {k: dict(v) for k, v in content.items() if isinstance(v, dict)}
    out.setdefault(test_set, {})[account_key(name)] = binding
    return out
