"""Who is submitting: the Hub account that owns the token sent with the call, as the Hub's
whoami says. The token is used for that question (and, by the caller, to read the
submitter's dataset) and is never stored, logged or put in a message."""
from __future__ import annotations

import os

from rexrank.errors import SubmissionError

NO_TOKEN = ("no Hugging Face token was sent: sign in with Hugging Face (the button above), or from the command "
            "line set HF_TOKEN or run `hf auth login`; the submitter is the account that owns the token")
REFUSED = ("the Hugging Face token sent was refused by the Hub (invalid or expired): sign in again, or create a "
           "token at https://huggingface.co/settings/tokens and set HF_TOKEN (or run `hf auth login`)")


def verified_user(token: str | None, *, endpoint: str | None = None) -> str:
    """The user name of `token`'s account; a SubmissionError (one line) for a missing,
    invalid or expired token, or when the Hub cannot be asked."""
    return verified_accounts(token, endpoint=endpoint)[0]


def verified_accounts(token: str | None, *, endpoint: str | None = None) -> tuple[str, ...]:
    """The user name of `token`'s account, then its organisations' (whoami's `orgs`): the
    namespaces whose predictions datasets that user may file."""
    if not token or not isinstance(token, str):
        raise SubmissionError(NO_TOKEN)
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    endpoint = endpoint or os.environ.get("HF_ENDPOINT") or None
    try:
        info = HfApi(endpoint=endpoint).whoami(token=token)
    except OfflineModeIsEnabled:
        raise SubmissionError("cannot check the token: this server runs with HF_HUB_OFFLINE set") from None
    except HfHubHTTPError as exc:
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status in (401, 403):
            raise SubmissionError(REFUSED) from None
        raise SubmissionError(f"cannot check the token with the Hub (HTTP {status}); try again later") from None
    except Exception as exc:  # connection errors of the HTTP client
        raise SubmissionError(f"cannot reach the Hub to check the token ({type(exc).__name__}); try again later") from None
    if info.get("type") != "user" or not info.get("name"):
        raise SubmissionError("the token sent is not a user's token: submit with your own account's token")
    orgs = [org.get("name") for org in info.get("orgs") or [] if isinstance(org, dict)]
    return (str(info["name"]), *(str(name) for name in orgs if name))
