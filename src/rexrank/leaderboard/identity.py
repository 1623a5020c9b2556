"""Who is submitting: the Hub account that owns the token sent with the call, as the Hub's
whoami says: its immutable id (what the store keys the quota, the ledger, approvals and
copies by: rexrank.store.accounts) and its name (for display), with its organisations'.
The token is used for that question (and, by the caller, to read the submitter's dataset
and check a linked model repo) and is never stored, logged or put in a message."""
from __future__ import annotations

import os

from rexrank.errors import SubmissionError
from rexrank.store.accounts import Account, Submitter, account_key
from rexrank.store.names import display

NO_TOKEN = ("no Hugging Face token was sent: sign in with Hugging Face (the button above), or from the command "
            "line set HF_TOKEN or run `hf auth login`; the submitter is the account that owns the token")
REFUSED = ("the Hugging Face token sent was refused by the Hub (invalid or expired): sign in again, or create a "
           "token at https://huggingface.co/settings/tokens and set HF_TOKEN (or run `hf auth login`)")


def _hub_errors(exc: Exception, what: str) -> SubmissionError:
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    if isinstance(exc, OfflineModeIsEnabled):
        return SubmissionError(f"cannot {what}: this server runs with HF_HUB_OFFLINE set")
    if isinstance(exc, HfHubHTTPError):
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status in (401, 403):
            return SubmissionError(REFUSED)
        return SubmissionError(f"cannot {what} with the Hub (HTTP {status}); try again later")
    return SubmissionError(f"cannot reach the Hub to {what} ({type(exc).__name__}); try again later")


def verified_submitter(token: str | None, *, endpoint: str | None = None) -> Submitter:
    """`token`'s user and organisations, each with the Hub's immutable id and its name."""
    if not token or not isinstance(token, str):
        raise SubmissionError(NO_TOKEN)
    from huggingface_hub import HfApi

    endpoint = endpoint or os.environ.get("HF_ENDPOINT") or None
    try:
        info = HfApi(endpoint=endpoint).whoami(token=token)
    except Exception as exc:  # HTTP, offline and connection errors of the client
        raise _hub_errors(exc, "check the token") from None
    if info.get("type") != "user" or not info.get("name"):
        raise SubmissionError("the token sent is not a user's token: submit with your own account's token")
    if not info.get("id"):  # every Hub answers it; a server that does not cannot tell renamed accounts apart
        raise SubmissionError("the Hub's answer about the token has no account id; this leaderboard cannot tell "
                              "who is submitting — try again later")
    orgs = tuple(Account(str(org["name"]), str(org["id"])) for org in info.get("orgs") or []
                 if isinstance(org, dict) and org.get("name") and org.get("id"))
    return Submitter(Account(str(info["name"]), str(info["id"])), orgs)


def verified_model_repo(repo_id: str, submitter: Submitter, *, token: str, endpoint: str | None = None) -> str:
    """`repo_id` (NAMESPACE/NAME, or its https://huggingface.co/ address) when the Hub says
    that model repo exists (as this token sees it) and belongs to the submitter or one of
    their organisations; else a SubmissionError saying which."""
    text = str(repo_id or "").strip().rstrip("/")
    for prefix in ("https://huggingface.co/", "http://huggingface.co/", "hf://"):
        text = text.removeprefix(prefix)
    parts = text.split("/")
    if len(parts) != 2 or not all(parts) or parts[0] in ("datasets", "spaces"):
        raise SubmissionError(f"model repo {display(repo_id)!r}: expected NAMESPACE/NAME of a model repo on the Hub")
    owner = parts[0]
    if not any(account_key(owner) == account_key(a.name) for a in submitter.accounts):
        raise SubmissionError(
            f"the model repo {display(text)} belongs to {display(owner)!r}, not to {display(submitter.user.name)!r} or "
            "one of their organisations: link a model repo of your own")
    from huggingface_hub import HfApi
    from huggingface_hub.errors import RepositoryNotFoundError

    endpoint = endpoint or os.environ.get("HF_ENDPOINT") or None
    try:
        info = HfApi(endpoint=endpoint, token=token).model_info(text)
    except RepositoryNotFoundError:
        raise SubmissionError(f"no model repo {display(text)} on the Hub that this token can read: create it, or "
                              "leave the model repo empty") from None
    except Exception as exc:
        raise _hub_errors(exc, f"check the model repo {display(text)}") from None
    return str(getattr(info, "id", None) or text)
