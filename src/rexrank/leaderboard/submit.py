"""The submission tab's one action: validate predictions and file a request into the store.

On a Hub store the submitter is the signed-in Hugging Face user (the quota counts per
user, so it must not be a free-text field); on a local store it is a typed name. The
store applies the submission rules (rexrank.store.policy) here, with this server's quota,
and the backend applies them again before scoring.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from rexrank.errors import RexrankError, SubmissionError, TestSetError
from rexrank.testsets.loading import DATA_DIR_ENV
from rexrank.store.names import display


def is_hub_store(store) -> bool:
    return store is not None and str(getattr(store, "name", "")).startswith("hf://")


def file_request(
    store,
    *,
    predictions: str | None,
    test_set: str,
    track: str,
    model_name: str,
    institution: str = "",
    model_url: str = "",
    trained_on=(),
    hf_username: str | None = None,
    typed_name: str = "",
) -> dict:
    """Validate and file; returns the request record. Raises RexrankError with a message
    for the submitter."""
    if store is None:
        raise SubmissionError("this leaderboard is not connected to a store: submissions are off")
    if not predictions:
        raise SubmissionError("no predictions file uploaded")
    if is_hub_store(store):
        if not hf_username:
            raise SubmissionError("sign in with Hugging Face first (the button above): submissions are counted per user")
        submitter = hf_username
    else:
        submitter = (typed_name or "").strip()
        if not submitter:
            raise SubmissionError("enter your name (or your organisation's) as submitter")
    if model_url and not model_url.strip().startswith(("http://", "https://")):
        raise SubmissionError(f"model URL must start with http:// or https:// (got {model_url.strip()!r})")
    return store.submit(
        test_set=test_set,
        track=track,
        predictions=predictions,
        model_name=model_name,
        submitter=submitter,
        institution=institution,
        model_url=model_url,
        trained_on=list(trained_on or ()),
        data_dir=os.environ.get("REXRANK_DATA_DIR") or None,
        source_label=Path(predictions).name,
    )


def describe_request(request: dict) -> str:
    p = request.get("predictions", {})
    checked = "ids checked against the test set" if p.get("ids_checked") else (
        "file structure checked; the study ids are checked by the backend (private test set)"
    )
    from rexrank.leaderboard.tables import md_escape

    return (
        f"✅ Request **{request['id']}** filed: {md_escape(display(request['model_name']))} on {request['test_set']} / "
        f"{request['track']}, status {request['status']}.  \n"
        f"{p.get('n', '?')} predictions ({p.get('n_empty', 0)} empty); {checked}."
    )


def describe_error(exc: Exception, *, upload: str | None = None) -> str:
    """What the submitter reads: no server paths; the uploaded file (`upload`, a temporary
    path on the server) is named by its own file name."""
    from rexrank.backend.privacy import public_message

    text = str(exc) if isinstance(exc, RexrankError) else f"unexpected error {type(exc).__name__}: {exc}"
    if upload:
        for form in sorted({str(upload), os.path.realpath(upload)}, key=len, reverse=True):
            text = text.replace(form, Path(upload).name)
    text = display(public_message(text))
    advice = ""
    if isinstance(exc, TestSetError) and DATA_DIR_ADVICE.search(text):
        # the command-line advice ("pass its folder with --data-dir") is for whoever runs this
        # server, not for the submitter
        text = DATA_DIR_ADVICE.sub("", text).rstrip(" ;,.")
        advice = (f"  \nThis leaderboard's server cannot read that test set. Whoever runs it can start it with "
                  f"`rexrank leaderboard --data-dir FOLDER` (a folder holding the test sets, or this test set's folder) "
                  f"or set `${DATA_DIR_ENV}`.")
    return f"❌ Not filed: {markdown_with_links(text)}{advice}"


DATA_DIR_ADVICE = re.compile(r"[;.,]?\s*(?:download it yourself and |and )?pass its folder with --data-dir", re.IGNORECASE)
_URL = re.compile(r"https?://[^\s<>()]+[^\s<>().,;:]")


def markdown_with_links(text: str) -> str:
    """`text` as markdown: escaped, except web addresses, which become links as they are
    (escaping one would break it: `iu\\_xray`)."""
    from rexrank.leaderboard.tables import md_escape

    out, last = [], 0
    for match in _URL.finditer(text):
        out += [md_escape(text[last:match.start()]), f"<{match.group(0)}>"]
        last = match.end()
    out.append(md_escape(text[last:]))
    return "".join(out)
