"""The submission tab's one action (and the API's): validate predictions, an uploaded file or
a predictions dataset on the Hub, and file a request into the store.

On a Hub store the submitter is the Hub account that owns the token sent with the call
(the Space's sign-in, or `Client(..., oauth_token=...)` from `rexrank submit --leaderboard`),
as the Hub's whoami says, by its immutable id (rexrank.store.accounts): the quota, the
privacy ledger and approvals follow the account through renames, so it is never a typed
name. The model is filed under a namespace: the submitter's account (the default) or one
of their organisations; a linked Hub model repo must belong to one of them too (checked
with the Hub). The token reads the submitter's dataset and checks that model repo, and
nothing else: the server's own token is never used for it. That dataset must belong to
the submitter or one of their organisations (whoami's `orgs`), checked before the Hub is
asked anything about it. On a local store the submitter is a typed name, which is then the
identity. The store applies the submission rules (rexrank.store.policy) here, with this
server's quota, and the backend applies them again; predictions another account filed
first are held for the maintainers' review (rexrank.store.copies).
"""
from __future__ import annotations

import os
import re
from pathlib import Path

# what /submit and /status show of a request is built by the one door
from rexrank.backend.public_door import PUBLIC_PREDICTION_FIELDS, public_request  # noqa: F401
from rexrank.errors import RexrankError, SubmissionError, TestSetError
from rexrank.leaderboard.identity import verified_model_repo, verified_submitter
from rexrank.testsets.loading import DATA_DIR_ENV
from rexrank.store.accounts import Account, Submitter
from rexrank.store.names import display, model_title


def is_hub_store(store) -> bool:
    return store is not None and str(getattr(store, "name", "")).startswith("hf://")


def _hub_endpoint(store) -> str | None:
    """The Hub the store lives on: a token is checked, and a dataset read, there."""
    return getattr(getattr(store, "requests", None), "endpoint", None) or os.environ.get("HF_ENDPOINT") or None


def _server_tokens(store) -> set[str]:
    tokens = {os.environ.get("HF_TOKEN"), getattr(getattr(store, "requests", None), "token", None)}
    try:
        from huggingface_hub import get_token

        tokens.add(get_token())
    except ImportError:  # a local store without the Hub client
        pass
    return {t for t in tokens if t}


def file_request(
    store,
    *,
    predictions: str | None = None,
    hub_dataset: str = "",
    test_set: str,
    track: str,
    model_name: str,
    institution: str = "",
    model_url: str = "",
    trained_on=(),
    token: str | None = None,
    typed_name: str = "",
    namespace: str = "",
    model_repo: str = "",
) -> dict:
    """Validate and file; returns the request record. Raises RexrankError with a message
    for the submitter. `predictions`: an uploaded file; `hub_dataset`: USER/REPO[@REVISION]
    (or hf://...); exactly one of them. `token`: the submitter's Hub token. `namespace`:
    the account to file the model under (default the submitter's own); `model_repo`: a Hub
    model repo of the submitter's to link the row to."""
    if store is None:
        raise SubmissionError("this leaderboard is not connected to a store: submissions are off")
    hub_dataset = (hub_dataset or "").strip()
    if predictions and hub_dataset:
        raise SubmissionError(f"both a file and a dataset on the Hub ({hub_dataset}) were given: submit one of them")
    if not predictions and not hub_dataset:
        raise SubmissionError("no predictions: upload a file or name a predictions dataset on the Hub (USER/REPO)")
    endpoint = _hub_endpoint(store)
    if token and token in _server_tokens(store):
        # gradio mocks the sign-in outside a Space with the server's own login: never a submitter
        raise SubmissionError("the token sent is this server's own: submit with your own token (HF_TOKEN or "
                              "`hf auth login` on your machine, then `rexrank submit --leaderboard`)")
    typed = (typed_name or "").strip()
    if is_hub_store(store) or (token and not typed):
        who = verified_submitter(token, endpoint=endpoint)
    elif typed:  # a local store: the typed name is the identity
        who = Submitter(Account(typed))
    else:
        raise SubmissionError("enter your name (or your organisation's) as submitter")
    home = who.namespace(namespace)
    from rexrank.backend.public_door import filing_budget_problem

    over_budget = filing_budget_problem(store, submitter=who.user, test_set=test_set)
    if over_budget:  # the backend would refuse it before scoring: say so now
        raise SubmissionError(over_budget.removeprefix("refused: "))
    if model_url and not model_url.strip().startswith(("http://", "https://")):
        raise SubmissionError(f"model URL must start with http:// or https:// (got {model_url.strip()!r})")
    if (model_repo or "").strip():
        if who.user.id is None:
            raise SubmissionError("a Hub model repo can be linked only on a leaderboard whose store is on the Hub "
                                  "(it is checked with your sign-in)")
        model_repo = verified_model_repo(model_repo, who, token=token, endpoint=endpoint)
        model_url = (model_url or "").strip() or f"{(endpoint or 'https://huggingface.co').rstrip('/')}/{model_repo}"
    if hub_dataset:
        from rexrank.store.hub_predictions import parse_spec

        repo_id, revision = parse_spec(hub_dataset)  # USER/REPO, hf://..., or the repo page's address
        source, label = f"hf://{repo_id}" + (f"@{revision}" if revision else ""), None
        # whose datasets this submitter may file: their own and their organisations' (whoami)
        owners = tuple(a.name for a in who.accounts)
    else:
        source, label, owners = predictions, Path(predictions).name, None
    return store.submit(
        test_set=test_set,
        track=track,
        predictions=source,
        model_name=model_name,
        submitter=who.user.name,
        submitter_id=who.user.id,
        namespace=home.name,
        namespace_id=home.id,
        model_repo=(model_repo or "").strip(),
        institution=institution,
        model_url=model_url,
        trained_on=list(trained_on or ()),
        data_dir=os.environ.get("REXRANK_DATA_DIR") or None,
        source_label=label,
        hub_endpoint=endpoint,
        hub_token=token or False,  # the submitter's access only: never the server's HF_TOKEN
        dataset_owners=owners,
    )


def describe_request(request: dict) -> str:
    p = request.get("predictions", {})
    checked = "ids checked against the test set" if p.get("ids_checked") else (
        "file structure checked; the study ids are checked by the backend (private test set)"
    )
    from rexrank.leaderboard.model_page import model_link
    from rexrank.leaderboard.tables import md_escape

    title = display(model_title(request.get("namespace") or "", request["model_name"]))
    held = request["status"] == "HELD"
    return (
        f"✅ Request **{request['id']}** filed: {md_escape(title)} on {request['test_set']} / "
        f"{request['track']}, status {request['status']}"
        + (f" ({md_escape(request.get('error') or '')})" if held else "") + ".  \n"
        f"{p.get('n', '?')} predictions ({p.get('n_empty', 0)} empty); {checked}."
        + (f"  \nRead from the dataset {md_escape(p['repo'])} at commit `{p['revision']}`: later pushes change nothing."
           if p.get("repo") else "")
        + ("" if held else f"  \nOnce scored, your result is {where_ranked(request)}on [{md_escape(title)}'s page "
                           f"on this leaderboard]({model_link(title)}).")
    )


def where_ranked(request: dict) -> str:
    """"[ranked on the IU-Xray table](?tab=iu_xray&model=NAME) and " where the test set has a
    table (the link opens it on the model's row, ranked by a metric it has), else ""."""
    from rexrank.leaderboard.model_page import model_link
    from rexrank.leaderboard.records import LEADERBOARD_TEST_SETS, TEST_SET_LABELS

    if request["test_set"] not in LEADERBOARD_TEST_SETS:
        return ""
    title = model_title(request.get("namespace") or "", request["model_name"])  # as the board names it
    link = model_link(title, test_set=request["test_set"], track=request["track"])
    return f"[ranked on the {TEST_SET_LABELS[request['test_set']]} table]({link}) and "


def error_text(exc: Exception, *, upload: str | None = None) -> str:
    """What the submitter reads, as plain text: no server paths; the uploaded file (`upload`,
    a temporary path on the server) is named by its own file name."""
    from rexrank.backend.privacy import public_message

    text = str(exc) if isinstance(exc, RexrankError) else f"unexpected error {type(exc).__name__}: {exc}"
    if upload:
        for form in sorted({str(upload), os.path.realpath(upload)}, key=len, reverse=True):
            text = text.replace(form, Path(upload).name)
    return display(public_message(text))


def describe_error(exc: Exception, *, upload: str | None = None) -> str:
    text = error_text(exc, upload=upload)
    advice = ""
    if isinstance(exc, TestSetError) and DATA_DIR_ADVICE.search(text):
        # the command-line advice ("pass its folder with --data-dir") is for whoever runs this
        # server, not for the submitter
        text = DATA_DIR_ADVICE.sub("", text).rstrip(" ;,.")
        advice = (f"  \nThis leaderboard's server cannot read that test set. Whoever runs it can start it with "
                  f"`rexrank leaderboard --data-dir FOLDER` (a folder holding the test sets, or this test set's folder) "
                  f"or set `${DATA_DIR_ENV}`.")
    text = COLUMN_ADVICE.sub("rename the column", text)
    return f"❌ Not filed: {markdown_with_links(text)}{advice}"


DATA_DIR_ADVICE = re.compile(r"[;.,]?\s*(?:download it yourself and |and )?pass its folder with --data-dir(?: \(Python: data_dir=\))?",
                             re.IGNORECASE)
# the validator's advice on columns of other names: options of `rexrank score` and Python, not of this page
COLUMN_ADVICE = re.compile(r"name yours with --(?:id|prediction)-column NAME \(Python: \w+=NAME\), or rename the column")
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
