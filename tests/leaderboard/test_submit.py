"""The submission tab's action (rexrank.leaderboard.submit), called directly on a stand-in store:
who the submitter is (a Hub store's token, never a typed name), what is filed under which namespace,
and each refusal in the submitter's words.

Pinned by hand (issue 40: what the mutation tool found unpinned); the Space and the fake Hub run the
same action end to end in test_submit_hub.py and test_submit_attacks.py."""
from __future__ import annotations

import os

import pytest

from rexrank.errors import SubmissionError, TestSetError
from rexrank.leaderboard import submit as S
from rexrank.store.accounts import Account, Submitter

ALICE = Submitter(Account("alice", "u1"), (Account("acme", "o1"),))


class _Requests:
    def __init__(self, endpoint=None, token=None):
        self.endpoint, self.token = endpoint, token


class _Store:
    """What file_request reads of a store (its name, its requests repo's endpoint and token)
    and its submit, which returns what it was given."""

    def __init__(self, name="/srv/store", endpoint=None, token=None):
        self.name, self.requests = name, _Requests(endpoint, token)

    def submit(self, **kwargs):
        return kwargs


@pytest.fixture
def hub(monkeypatch):
    """whoami's answer for each token, the model repos the Hub has, no budget problem, and no
    server token but those a test sets."""
    import huggingface_hub

    from rexrank.backend import public_door

    asked = []

    def whoami(token, *, endpoint=None):
        asked.append((token, endpoint))
        return {"tok-alice": ALICE}[token]

    monkeypatch.setattr(S, "verified_submitter", whoami)
    monkeypatch.setattr(S, "verified_model_repo", lambda repo, who, *, token, endpoint: repo.strip().lower())
    monkeypatch.setattr(public_door, "filing_budget_problem", lambda store, *, submitter, test_set: None)
    monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)
    for name in ("HF_TOKEN", "HF_ENDPOINT", "REXRANK_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    return asked


def _file(store, **kw):
    return S.file_request(store, **{"test_set": "iu_xray", "track": "findings", "model_name": "M", **kw})


def test_on_a_hub_store_the_submitter_is_the_tokens_account_never_the_typed_name(hub):
    store = _Store("hf://datasets/org/requests", endpoint="https://hub.example/")
    filed = _file(store, hub_dataset=" acme/preds@abc ", token="tok-alice", typed_name="bob", namespace="ACME")
    assert hub == [("tok-alice", "https://hub.example/")]  # whoami asked on the store's own Hub
    assert {k: filed[k] for k in ("submitter", "submitter_id", "namespace", "namespace_id")} == {
        "submitter": "alice", "submitter_id": "u1", "namespace": "acme", "namespace_id": "o1"}
    assert filed["predictions"] == "hf://acme/preds@abc" and filed["source_label"] is None
    assert filed["dataset_owners"] == ("alice", "acme")  # whoami's accounts: the user's and their organisations'
    assert filed["hub_token"] == "tok-alice" and filed["hub_endpoint"] == "https://hub.example/"
    assert _file(store, hub_dataset="alice/preds", token="tok-alice")["predictions"] == "hf://alice/preds"
    assert _file(store, hub_dataset="alice/preds", token="tok-alice")["namespace"] == "alice"  # the user's own


def test_on_a_local_store_the_typed_name_is_the_identity_unless_a_token_is_sent(hub, monkeypatch):
    monkeypatch.setenv("REXRANK_DATA_DIR", "/data/sets")
    filed = _file(_Store(), predictions="/tmp/upload/p.jsonl", typed_name="  bob ", institution="I",
                  model_url=" https://m.example ", trained_on=("mimic_cxr",))
    assert hub == []  # nobody asked: a local store takes the typed name
    assert filed == {"test_set": "iu_xray", "track": "findings", "predictions": "/tmp/upload/p.jsonl", "model_name": "M",
                     "submitter": "bob", "submitter_id": None, "namespace": "bob", "namespace_id": None,
                     "model_repo": "", "institution": "I", "model_url": " https://m.example ",
                     "trained_on": ["mimic_cxr"], "data_dir": "/data/sets", "source_label": "p.jsonl",
                     "hub_endpoint": None, "hub_token": False, "dataset_owners": None}
    assert _file(_Store(), predictions="p.jsonl", token="tok-alice")["submitter_id"] == "u1"  # a token: its account
    assert _file(_Store(), predictions="p.jsonl", typed_name="bob", model_url="http://m.example")["model_url"] == (
        "http://m.example")
    monkeypatch.setenv("HF_ENDPOINT", "https://env.example")
    assert _file(_Store(), predictions="p.jsonl", token="tok-alice")["hub_endpoint"] == "https://env.example"
    with pytest.raises(SubmissionError) as err:
        _file(_Store(), predictions="p.jsonl", typed_name="  ")
    assert str(err.value) == "enter your name (or your organisation's) as submitter"
    assert _file(_Store(), predictions="p.jsonl", typed_name="bob")["institution"] == ""  # none typed


def test_a_store_without_a_name_or_requests_repo_is_local_and_has_no_token_of_its_own(hub, monkeypatch):
    bare = object()
    assert not S.is_hub_store(bare)
    monkeypatch.setenv("HF_TOKEN", "tok-env")
    assert S._server_tokens(bare) == {"tok-env"}


@pytest.mark.parametrize("where", ["env", "store", "login"])
def test_the_servers_own_token_never_submits(hub, monkeypatch, where):
    import huggingface_hub

    store = _Store("hf://datasets/org/requests", token="tok-store" if where == "store" else None)
    if where == "env":
        monkeypatch.setenv("HF_TOKEN", "tok-server")
    if where == "login":
        monkeypatch.setattr(huggingface_hub, "get_token", lambda: "tok-server")
    with pytest.raises(SubmissionError) as err:
        _file(store, predictions="p.jsonl", token="tok-store" if where == "store" else "tok-server")
    assert str(err.value) == ("the token sent is this server's own: submit with your own token (HF_TOKEN or "
                              "`hf auth login` on your machine, then `rexrank submit --leaderboard`)")
    assert hub == []


def test_what_is_filed_is_refused_in_the_submitters_words(hub, monkeypatch):
    from rexrank.backend import public_door

    hub_store = _Store("hf://datasets/org/requests")
    for store, kw, message in (
            (None, {"predictions": "p.jsonl"}, "this leaderboard is not connected to a store: submissions are off"),
            (_Store(), {"predictions": "p.jsonl", "hub_dataset": " a/b ", "typed_name": "bob"},
             "both a file and a dataset on the Hub (a/b) were given: submit one of them"),
            (_Store(), {"hub_dataset": "  ", "typed_name": "bob"},
             "no predictions: upload a file or name a predictions dataset on the Hub (USER/REPO)"),
            (_Store(), {"predictions": "p.jsonl", "typed_name": "bob", "model_url": " ftp://m "},
             "model URL must start with http:// or https:// (got 'ftp://m')"),
            (_Store(), {"predictions": "p.jsonl", "typed_name": "bob", "model_repo": "bob/m"},
             "a Hub model repo can be linked only on a leaderboard whose store is on the Hub (it is checked with "
             "your sign-in)"),
            (hub_store, {"predictions": "p.jsonl", "token": "tok-alice", "namespace": "evil"},
             "namespace 'evil' is not yours: file under your account or one of your organisations (alice, acme)")):
        with pytest.raises(SubmissionError) as err:
            S.file_request(store, test_set="iu_xray", track="findings", model_name="M", **kw)
        assert str(err.value) == message
    asked = []
    monkeypatch.setattr(public_door, "filing_budget_problem",
                        lambda store, *, submitter, test_set: asked.append((submitter, test_set)) or "refused: no ε left")
    with pytest.raises(SubmissionError) as err:
        _file(hub_store, predictions="p.jsonl", token="tok-alice", test_set="rexgradient")
    assert str(err.value) == "no ε left" and asked == [(ALICE.user, "rexgradient")]


def test_a_linked_model_repo_is_the_hubs_and_gives_the_model_url_unless_one_is_given(hub):
    store = _Store("hf://datasets/org/requests", endpoint="https://hub.example/")
    filed = _file(store, predictions="p.jsonl", token="tok-alice", model_repo=" Alice/M ")
    assert (filed["model_repo"], filed["model_url"]) == ("alice/m", "https://hub.example/alice/m")
    given = _file(store, predictions="p.jsonl", token="tok-alice", model_repo="alice/m", model_url=" https://x.org ")
    assert given["model_url"] == "https://x.org"
    default = _file(_Store("hf://datasets/org/requests"), predictions="p.jsonl", token="tok-alice", model_repo="alice/m")
    assert default["model_url"] == "https://huggingface.co/alice/m"


def test_the_model_repo_and_the_budget_are_checked_for_this_submitter_on_this_store(hub, monkeypatch):
    """verified_model_repo gets the submitter, their own token and the store's Hub; the
    budget is this store's. The model URL is the endpoint's address with its slashes trimmed."""
    from rexrank.backend import public_door

    checked, budgets = [], []
    monkeypatch.setattr(S, "verified_model_repo",
                        lambda repo, who, *, token, endpoint: checked.append((repo, who, token, endpoint)) or "alice/m")
    monkeypatch.setattr(public_door, "filing_budget_problem",
                        lambda store, *, submitter, test_set: budgets.append(store))
    store = _Store("hf://datasets/org/requests", endpoint="https://hub.example/HX/")
    filed = _file(store, predictions="p.jsonl", token="tok-alice", model_repo="alice/m")
    assert checked == [("alice/m", ALICE, "tok-alice", "https://hub.example/HX/")]
    assert budgets == [store]
    assert filed["model_url"] == "https://hub.example/HX/alice/m"


def test_hub_store_and_endpoint_by_hand(monkeypatch):
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    assert S.is_hub_store(_Store("hf://datasets/o/r")) and not S.is_hub_store(_Store("/srv/hf://"))
    assert not S.is_hub_store(None)
    assert S._hub_endpoint(_Store(endpoint="https://a")) == "https://a" and S._hub_endpoint(_Store()) is None
    monkeypatch.setenv("HF_ENDPOINT", "https://b")
    assert S._hub_endpoint(_Store()) == "https://b" and S._hub_endpoint(None) == "https://b"


def test_a_filed_request_is_described_with_its_checks_and_where_it_will_be_ranked():
    request = {"id": "R1", "model_name": "m_1", "namespace": "acme", "test_set": "iu_xray", "track": "findings",
               "status": "PENDING", "predictions": {"n": 3, "n_empty": 1, "ids_checked": True}}
    assert S.describe_request(request) == (
        "✅ Request **R1** filed: acme / m\\_1 on iu_xray / findings, status PENDING.  \n"
        "3 predictions (1 empty); ids checked against the test set.  \n"
        "Once scored, your result is [ranked on the IU-Xray table](?tab=iu_xray&model=acme+%2F+m_1) and on "
        "[acme / m\\_1's page on this leaderboard](?model=acme+%2F+m_1).")  # the board's title, URL-encoded
    held = {**request, "status": "HELD", "error": "held for review", "test_set": "rexval", "namespace": "",
            "predictions": {"repo": "a/b_c", "revision": "abc"}}
    assert S.describe_request(held) == (
        "✅ Request **R1** filed: m\\_1 on rexval / findings, status HELD (held for review).  \n"
        "? predictions (0 empty); file structure checked; the study ids are checked by the backend (private test "
        "set).  \nRead from the dataset a/b\\_c at commit `abc`: later pushes change nothing.")
    assert S.where_ranked({**request, "test_set": "rexval"}) == ""
    assert S.where_ranked({**request, "test_set": "mimic_cxr", "track": "findings_impression"}) == (
        "[ranked on the MIMIC-CXR table](?tab=mimic_cxr&track=findings_impression&model=acme+%2F+m_1) and ")


def test_an_error_names_the_upload_by_its_file_name_and_gives_advice_for_this_page(tmp_path):
    upload = tmp_path / "gradio" / "abc" / "preds.jsonl"
    assert S.error_text(SubmissionError(f"{upload}: line 3 is not JSON"), upload=str(upload)) == "preds.jsonl: line 3 is not JSON"
    assert S.error_text(KeyError("k")) == "unexpected error KeyError: 'k'"
    assert S.describe_error(SubmissionError("bad id_x; see https://x.org/a_b.")) == (
        "❌ Not filed: bad id\\_x; see <https://x.org/a_b>.")
    column = SubmissionError("no column 'text': name yours with --prediction-column NAME (Python: prediction_column=NAME), "
                             "or rename the column")
    assert S.describe_error(column) == "❌ Not filed: no column 'text': rename the column"
    missing = TestSetError("test set mimic_cxr needs its file; download it yourself and pass its folder with --data-dir "
                           "(Python: data_dir=).")
    assert S.describe_error(missing) == (
        "❌ Not filed: test set mimic\\_cxr needs its file  \nThis leaderboard's server cannot read that test set. "
        "Whoever runs it can start it with `rexrank leaderboard --data-dir FOLDER` (a folder holding the test sets, or "
        "this test set's folder) or set `$REXRANK_DATA_DIR`.")
    assert S.describe_error(SubmissionError(str(missing))).endswith("\\(Python: data\\_dir=\\).")  # advice for tests sets only


def test_a_request_without_its_predictions_record_namespace_or_reason_is_still_described():
    request = {"id": "R2", "model_name": "m", "test_set": "iu_xray", "track": "findings", "status": "PENDING"}
    assert S.describe_request(request) == (
        "✅ Request **R2** filed: m on iu_xray / findings, status PENDING.  \n"
        "? predictions (0 empty); file structure checked; the study ids are checked by the backend (private test "
        "set).  \nOnce scored, your result is [ranked on the IU-Xray table](?tab=iu_xray&model=m) and on "
        "[m's page on this leaderboard](?model=m).")
    held = {**request, "status": "HELD"}
    assert S.describe_request(held).startswith("✅ Request **R2** filed: m on iu_xray / findings, status HELD ().  \n")


def test_an_upload_reached_through_a_symlink_is_named_by_its_file_name_in_both_forms(tmp_path):
    """The server may name the upload by the path it was given or by its real path; the
    longer form is replaced first (here the real path holds the given one: replacing that one
    first would leave the real path's head, a server folder, in the message). The names are
    such that the longer form sorts last."""
    real = tmp_path / "a" / str(tmp_path).lstrip("/") / "z"
    real.mkdir(parents=True)
    (tmp_path / "z").symlink_to(real)
    upload = tmp_path / "z" / "preds.json"
    upload.write_text("[]")
    resolved = os.path.realpath(upload)
    assert resolved.endswith(str(upload)) and len(resolved) > len(str(upload)) and resolved < str(upload)
    exc = SubmissionError(f"{resolved}: not a list; {upload}: empty")
    assert S.error_text(exc, upload=str(upload)) == "preds.json: not a list; preds.json: empty"
    assert S.describe_error(exc, upload=str(upload)) == "❌ Not filed: preds.json: not a list; preds.json: empty"


def test_the_data_dir_advice_leaves_the_message_whole_and_every_address_a_link():
    missing = TestSetError("test set X needs its file BOX; pass its folder with --data-dir")
    assert S.describe_error(missing).startswith("❌ Not filed: test set X needs its file BOX  \n")
    assert S.markdown_with_links("see https://a.org/x_1 and https://b.org/y_2 or c_d") == (
        "see <https://a.org/x_1> and <https://b.org/y_2> or c\\_d")
