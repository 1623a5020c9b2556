"""Carry out a plan on the Hub: one commit per repo that changed, none for one that did not.

Order: check the token and the org (whoami); read every repo and refuse the whole run if
any holds foreign content (nothing written); then per repo: create it if missing, set its
visibility and Space variables, and commit the changed files on top of the version read.
A failure stops the run with a message naming the repo and listing what was published and
what was not; every step is idempotent, so running the same command again finishes the job.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from rexrank.hub.errors import DeployError
from rexrank.hub.plan import Plan, RepoPlan, settings_to_set
from rexrank.hub.remote import RemoteState, changes, foreign_files, read_state


def _network_errors() -> tuple[type[BaseException], ...]:
    """Transport errors of the HTTP client huggingface_hub uses (httpx2 in 2.x, httpx in 1.x)."""
    errors: list[type[BaseException]] = [OSError, TimeoutError]
    for module in ("httpx2", "httpx"):
        try:
            errors.append(__import__(module).TransportError)
        except (ImportError, AttributeError):
            pass
    return tuple(errors)


def hub_call(repo_id: str, action: str, fn: Callable):
    """fn(), with Hub and network failures turned into a DeployError naming the repo."""
    from huggingface_hub.errors import HfHubHTTPError

    try:
        return fn()
    except HfHubHTTPError as exc:
        status = getattr(exc.response, "status_code", None)
        org = repo_id.split("/")[0]
        if status == 401:
            why = "the Hub rejected the token (401): log in again or set a valid HF_TOKEN"
        elif status == 403:
            why = (f"no write access (403): the token is read-only or may not write to {org}'s repos "
                   "(a fine-grained token needs write access to them)")
        elif status == 404:
            why = f"not found (404): does the organisation {org!r} exist, and may this token see it?"
        elif status in (409, 412):
            why = f"the repo changed while deploying ({status}); run the command again"
        else:
            why = f"HTTP {status}: {exc}"
        raise DeployError(f"{repo_id}: {action} failed: {why}") from None
    except ValueError as exc:  # huggingface_hub's own checks, e.g. "Invalid metadata in README.md"
        raise DeployError(f"{repo_id}: {action} failed: {exc}") from None
    except _network_errors() as exc:
        raise DeployError(f"{repo_id}: network error while trying to {action} ({type(exc).__name__}: {exc}); "
                          "if it was the commit, it may or may not have landed") from None


def check_account(api, org: str) -> str:
    """The account name; refuses a missing or read-only token and an org the account is not in."""
    from huggingface_hub import get_token

    if not (api.token or get_token()):
        raise DeployError("no Hugging Face token: set HF_TOKEN or run `hf auth login` (a write token)")
    me = hub_call(org, "check the token (whoami)", lambda: api.whoami())
    name = me.get("name", "?")
    orgs = [o.get("name") for o in me.get("orgs") or []]
    if org != name and org not in orgs:
        raise DeployError(f"--org {org}: the token belongs to {name!r}, which is neither {org!r} nor a member of an "
                          f"organisation of that name (member of: {', '.join(orgs) or 'none'}); create the "
                          "organisation on the Hub first, or pick one of those")
    role = ((me.get("auth") or {}).get("accessToken") or {}).get("role")
    if role == "read":
        raise DeployError(f"the token of {name!r} is read-only: use a write token (or a fine-grained token "
                          f"with write access to {org}'s repos)")
    return name


@dataclass
class Outcome:
    repo_id: str
    created: bool = False
    committed: int = 0  # files added or replaced
    deleted: int = 0
    commit_url: str | None = None
    settings: tuple[str, ...] = ()

    def describe(self) -> str:
        what = []
        if self.created:
            what.append("created")
        if self.committed or self.deleted:
            what.append(f"{self.committed} files written, {self.deleted} deleted in one commit ({self.commit_url})")
        what += self.settings
        return f"{self.repo_id}: {', '.join(what) if what else 'unchanged'}"


def apply_repo(api, repo: RepoPlan, state: RemoteState, version: str) -> Outcome:
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    rid, rtype = repo.repo_id, repo.repo_type
    out = Outcome(rid)
    if not state.exists:
        hub_call(rid, "create the repo", lambda: api.create_repo(
            rid, repo_type=rtype, private=repo.private, space_sdk=repo.sdk, exist_ok=True))
        state = hub_call(rid, "read the new repo", lambda: read_state(api, repo))
        out.created = True
    settings = []
    if state.private is not None and state.private != repo.private:
        hub_call(rid, "change its visibility", lambda: api.update_repo_settings(rid, repo_type=rtype, private=repo.private))
        settings.append(f"visibility → {'private' if repo.private else 'public'}")
    if repo.variables:
        current = hub_call(rid, "read its variables", lambda: api.get_space_variables(rid))
        for key, value in repo.variables.items():
            if key not in current or current[key].value != value:
                hub_call(rid, f"set the variable {key}", lambda: api.add_space_variable(rid, key, value))
                settings.append(f"variable {key}={value}")
    out.settings = tuple(settings)
    adds, deletes = changes(repo, state)
    if adds or deletes:
        ops = [CommitOperationAdd(path_in_repo=p, path_or_fileobj=d) for p, d in sorted(adds.items())]
        ops += [CommitOperationDelete(path_in_repo=p) for p in deletes]
        message = f"rexrank hub deploy: rexrank {version} ({len(adds)} files written, {len(deletes)} deleted)"
        info = hub_call(rid, "commit the files", lambda: api.create_commit(
            rid, ops, commit_message=message, repo_type=rtype, parent_commit=state.sha))
        out.committed, out.deleted, out.commit_url = len(adds), len(deletes), info.commit_url
    return out


def deploy(plan: Plan, api, *, out: Callable[[str], None] = print) -> list[Outcome]:
    from huggingface_hub import constants

    if constants.is_offline_mode():
        raise DeployError("HF_HUB_OFFLINE is set: deploying needs the Hub (--dry-run shows the plan offline)")
    name = check_account(api, plan.org)
    out(f"deploying rexrank {plan.version} to {plan.org} on {plan.endpoint} as {name}")
    states = {r.repo_id: hub_call(r.repo_id, "read the repo", lambda r=r: read_state(api, r)) for r in plan.repos}
    foreign = {r.repo_id: f for r in plan.repos if (f := foreign_files(r, states[r.repo_id]))}
    if foreign:
        listing = "; ".join(f"{rid} holds {', '.join(files[:5])}{' …' if len(files) > 5 else ''}"
                            for rid, files in foreign.items())
        raise DeployError(f"nothing was written: {listing}. These repos exist and were not made by `rexrank hub "
                          "deploy` (no .rexrank-deploy.json); pick another --org, or move those repos away first")
    outcomes: list[Outcome] = []
    for i, repo in enumerate(plan.repos):
        try:
            outcomes.append(apply_repo(api, repo, states[repo.repo_id], plan.version))
        except DeployError as exc:
            done = ", ".join(o.repo_id for o in outcomes) or "none"
            left = ", ".join(r.repo_id for r in plan.repos[i + 1:]) or "none"
            raise DeployError(f"{exc}\nDeployed before it: {done}. Not attempted: {left}. The files of {repo.repo_id} "
                              "are either its previous version or the new one, never a mix. Run the same command "
                              "again to finish: what is already on the Hub is not uploaded again.") from None
        out("  " + outcomes[-1].describe())
    for line in settings_to_set(plan):
        out(line)
    return outcomes
