"""Submitting to a leaderboard Space through its own API (gradio_client), as a model builder
does: `rexrank.submit(...)`, `rexrank submit --leaderboard`, and following the request with
`rexrank.submission_status(...)`, `rexrank status ID --leaderboard`.

The token sent is the caller's (`token`, else HF_TOKEN, else the one `hf auth login`
saved); the Space asks the Hub whose it is, and files the request as that account. It
travels as gradio's OAuth token, which the client sends only to endpoints that ask for one.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from rexrank.errors import SubmissionError, first_line


def _token(token: str | None) -> str | None:
    if token:
        return token
    from huggingface_hub import get_token

    return get_token()  # HF_TOKEN, then the token `hf auth login` saved



def _client(leaderboard: str, token: str | None):
    import inspect

    try:
        from gradio_client import Client
    except ImportError:
        raise SubmissionError("submitting to a leaderboard needs gradio_client: pip install 'gradio_client>=2.7'") from None
    if "oauth_token" not in inspect.signature(Client).parameters:  # how the token reaches the Space
        raise SubmissionError("submitting to a leaderboard needs gradio_client 2.7 or later: pip install -U gradio_client")

    try:
        return Client(leaderboard, oauth_token=token, verbose=False, download_files=False)
    except Exception as exc:  # a wrong Space name, a URL that does not answer, a sleeping Space
        raise SubmissionError(f"cannot reach the leaderboard: {type(exc).__name__}: {first_line(exc)}",
                              source=leaderboard) from None


def submit(
    *,
    leaderboard: str,
    predictions: str | Path,
    dataset: str,
    track: str = "findings",
    model_name: str,
    institution: str = "",
    model_url: str = "",
    trained_on: Iterable[str] | str = (),
    submitter: str = "",
    token: str | None = None,
    namespace: str = "",
    model_repo: str = "",
) -> dict:
    """File predictions with a leaderboard Space; returns the request's public fields
    (`id`, `status`, `submitter`, `predictions` with the dataset's `repo` and `revision`, ...).

    leaderboard: the Space (ORG/SPACE) or its URL. predictions: `hf://USER/REPO[@REVISION]`
    (a predictions dataset you pushed: read at the commit it resolves to now) or a local
    file (uploaded). dataset, track: the test set and track. submitter: a name, used only by
    a leaderboard on a local store (on a Hub store the submitter is the token's account).
    namespace: the account to file the model under (your own by default, or one of your
    organisations). model_repo: a Hub model repo of yours (NAMESPACE/NAME) the row links to.
    Raises SubmissionError with the Space's one-line reason when nothing was filed."""
    from gradio_client import handle_file

    spec = str(predictions)
    if spec.startswith("hf://"):
        upload, hub_dataset = None, spec
    else:
        path = Path(spec)
        if not path.exists():
            raise SubmissionError("file not found", source=spec)
        if path.is_dir():
            raise SubmissionError("a folder cannot be uploaded: push it to the Hub (`Dataset.push_to_hub`) and "
                                  "submit hf://USER/REPO", source=spec)
        upload, hub_dataset = handle_file(str(path)), ""
    if isinstance(trained_on, str):
        trained_on = [t.strip() for t in trained_on.split(",")]
    trained = [t for t in trained_on if t]
    client = _client(leaderboard, _token(token))
    try:
        _, answer, _ = client.predict(upload, hub_dataset, dataset, track, model_name, institution, model_url, trained,
                                      submitter, namespace, model_repo, api_name="/submit")
    except Exception as exc:  # the app refused the input (e.g. an unknown test set) or the call broke off
        raise SubmissionError(f"the submission was not accepted: {first_line(exc)}", source=leaderboard) from None
    if not isinstance(answer, dict) or not answer.get("filed"):
        reason = answer.get("error") if isinstance(answer, dict) else None
        raise SubmissionError(reason or "the leaderboard gave no answer", source=leaderboard)
    return answer["request"]


def status(request_id: str, *, leaderboard: str, token: str | None = None) -> dict:
    """A request's public fields (`request`) and, once scored, its leaderboard values (`results`)."""
    client = _client(leaderboard, _token(token))
    try:
        answer = client.predict(request_id, api_name="/status")
    except Exception as exc:
        raise SubmissionError(f"cannot read the request's status: {first_line(exc)}", source=leaderboard) from None
    if not answer.get("found"):
        raise SubmissionError(answer.get("error") or f"no request {request_id!r}", source=leaderboard)
    return answer
