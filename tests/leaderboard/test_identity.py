"""Who a token names as submitter: the Hub's whoami, served by hand (rexrank.leaderboard.identity).

Pinned by hand (issue 32: what the mutation tool found unpinned): every expected value comes from an
independent oracle, never from rexrank's earlier output."""
from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rexrank.errors import SubmissionError


# ---- identity: only a user's token names a submitter ---------------------------------------
@pytest.fixture
def whoami_server(monkeypatch):
    """A stand-in for the Hub answering every GET (whoami, a model's info) with `answer["body"]`,
    `answer["status"]` and `answer["headers"]`, and recording each request's path and token
    (huggingface_hub allowed online: the server is on 127.0.0.1)."""
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    answer = {"body": {}}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            answer.setdefault("tokens", []).append(self.headers.get("Authorization"))
            answer.setdefault("paths", []).append(self.path.partition("?")[0])
            body = json.dumps(answer["body"]).encode()
            self.send_response(answer.get("status", 200))
            for name, value in answer.get("headers", {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # a short poll: shutdown() waits up to one poll interval (0.5 s by default) at each teardown
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", answer
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("kind", ["org", "app", "space"])
def test_an_organisation_or_app_token_is_no_submitter(whoami_server, kind):
    from rexrank.leaderboard.identity import verified_submitter

    endpoint, answer = whoami_server
    answer["body"] = {"type": kind, "name": "acme", "id": "a1"}
    with pytest.raises(SubmissionError) as err:
        verified_submitter("hf_token", endpoint=endpoint)
    assert str(err.value) == "the token sent is not a user's token: submit with your own account's token"
    answer["body"] = {"type": "user", "name": "", "id": "u1"}
    with pytest.raises(SubmissionError, match="not a user's token"):
        verified_submitter("hf_token", endpoint=endpoint)
    answer["body"] = {"type": "user", "name": "alice", "id": "u1"}
    assert verified_submitter("hf_token", endpoint=endpoint).user.name == "alice"


def test_a_submitter_is_whoamis_id_with_its_name_and_its_organisations(whoami_server):
    from rexrank.leaderboard.identity import verified_submitter
    from rexrank.store.accounts import Account

    endpoint, answer = whoami_server
    answer["body"] = {"type": "user", "name": "alice", "id": "u1",
                      "orgs": [{"type": "org", "name": "acme", "id": "o1"}, {"name": "no-id"}, "junk"]}
    who = verified_submitter("hf_token", endpoint=endpoint)
    assert who.user == Account("alice", "u1") and who.orgs == (Account("acme", "o1"),)
    assert tuple(a.name for a in who.accounts) == ("alice", "acme")
    answer["body"] = {"type": "user", "name": "alice"}  # no id: a renamed account could not be told apart
    with pytest.raises(SubmissionError) as err:
        verified_submitter("hf_token", endpoint=endpoint)
    assert str(err.value) == ("the Hub's answer about the token has no account id; this leaderboard cannot tell who "
                              "is submitting — try again later")


# ---- identity: whoami's refusals and failures ------------------------------------------------
@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_token_says_so_and_never_echoes_the_token(whoami_server, status):
    from rexrank.leaderboard.identity import REFUSED, verified_submitter

    endpoint, answer = whoami_server
    answer.update(status=status, body={"error": "Invalid credentials"})
    with pytest.raises(SubmissionError) as err:
        verified_submitter("hf_secret_token", endpoint=endpoint)
    assert str(err.value) == REFUSED and "hf_secret_token" not in str(err.value)
    assert REFUSED.startswith("the Hugging Face token sent was refused by the Hub (invalid or expired)")
    assert answer["tokens"] == ["Bearer hf_secret_token"]  # the token asked about is the one sent


def test_whoami_failures_other_than_a_refusal(whoami_server, monkeypatch):
    from rexrank.leaderboard.identity import verified_submitter

    endpoint, answer = whoami_server
    answer.update(status=503, body={"error": "busy"})
    with pytest.raises(SubmissionError) as err:
        verified_submitter("hf_x", endpoint=endpoint)
    assert str(err.value) == "cannot check the token with the Hub (HTTP 503); try again later"
    with pytest.raises(SubmissionError) as err:
        verified_submitter("hf_x", endpoint="http://127.0.0.1:9")  # nothing listens on the discard port
    # the message names the connection error's class (the HTTP client's), not the study or the token
    assert re.fullmatch(r"cannot reach the Hub to check the token \((?!NoneType)\w+\); try again later", str(err.value))
    answer.update(status=200, body={"type": "user", "name": "bob", "id": "u2"})
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    assert verified_submitter("hf_x").user.name == "bob"  # the endpoint from the environment


@pytest.mark.parametrize("token", [None, "", 42])
def test_no_token_is_no_submitter(token):
    from rexrank.leaderboard.identity import NO_TOKEN, verified_submitter

    with pytest.raises(SubmissionError) as err:
        verified_submitter(token)
    assert str(err.value) == NO_TOKEN
    assert NO_TOKEN.startswith("no Hugging Face token was sent: sign in with Hugging Face (the button above)")


def test_an_offline_server_cannot_check_a_token(monkeypatch):
    import huggingface_hub.constants as constants

    from rexrank.leaderboard.identity import verified_submitter

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)

    with pytest.raises(SubmissionError) as err:
        verified_submitter("hf_x", endpoint="http://127.0.0.1:9")
    assert str(err.value) == "cannot check the token: this server runs with HF_HUB_OFFLINE set"


# ---- identity: a linked model repo is the submitter's or their organisations' ----------------
def alice():
    """A submitter: the user alice (id u1), a member of the organisation Acme (id o1)."""
    from rexrank.store.accounts import Account, Submitter

    return Submitter(Account("alice", "u1"), (Account("Acme", "o1"),))


@pytest.mark.parametrize("typed, asked", [
    ("alice/CXR-Model", "alice/CXR-Model"), (" alice/CXR-Model/ ", "alice/CXR-Model"),
    ("https://huggingface.co/alice/CXR-Model", "alice/CXR-Model"),
    ("http://huggingface.co/alice/CXR-Model/", "alice/CXR-Model"),
    ("hf://alice/CXR-Model", "alice/CXR-Model"), ("ACME/CXR-Model", "ACME/CXR-Model"),  # an organisation's, any case
    ("alice/CheX/", "alice/CheX"),  # only the slash is trimmed
])
def test_a_model_repo_of_the_submitter_or_their_organisation_is_asked_of_the_hub_by_its_id(whoami_server, typed, asked):
    from rexrank.leaderboard.identity import verified_model_repo

    endpoint, answer = whoami_server
    answer["body"] = {"id": "Hub-Spelling/CXR-Model"}
    assert verified_model_repo(typed, alice(), token="hf_alice", endpoint=endpoint) == "Hub-Spelling/CXR-Model"
    assert answer["paths"] == [f"/api/models/{asked}"] and answer["tokens"] == ["Bearer hf_alice"]


def test_a_model_repo_the_hub_names_without_an_id_is_the_one_typed(whoami_server, monkeypatch):
    from rexrank.leaderboard.identity import verified_model_repo

    endpoint, answer = whoami_server
    answer["body"] = {"id": ""}
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    assert verified_model_repo("hf://alice/m", alice(), token="hf_alice") == "alice/m"  # the endpoint from the environment


@pytest.mark.parametrize("typed", ["alice", "alice/m/extra", "/m", "alice/", "datasets/x", "spaces/x",
                                   "https://huggingface.co/"])
def test_a_model_repo_must_be_namespace_slash_name(typed):
    from rexrank.leaderboard.identity import verified_model_repo

    with pytest.raises(SubmissionError) as err:
        verified_model_repo(typed, alice(), token="hf_alice", endpoint="http://127.0.0.1:9")
    assert str(err.value) == f"model repo {typed!r}: expected NAMESPACE/NAME of a model repo on the Hub"


def test_a_model_repo_of_someone_else_is_refused_before_the_hub_is_asked():
    from rexrank.leaderboard.identity import verified_model_repo

    with pytest.raises(SubmissionError) as err:
        verified_model_repo("https://huggingface.co/\x1b[1mmallory/m", alice(), token="hf_alice",
                            endpoint="http://127.0.0.1:9")  # nothing listens: no question was asked
    assert str(err.value) == ("the model repo mallory/m belongs to 'mallory', not to 'alice' or one of their "
                              "organisations: link a model repo of your own")


@pytest.mark.parametrize("status, headers, message", [
    (404, {"X-Error-Code": "RepoNotFound"},
     "no model repo alice/m on the Hub that this token can read: create it, or leave the model repo empty"),
    (403, {}, None),
    (503, {}, "cannot check the model repo alice/m with the Hub (HTTP 503); try again later"),
])
def test_a_model_repo_the_hub_does_not_show_says_why(whoami_server, status, headers, message):
    from rexrank.leaderboard.identity import REFUSED, verified_model_repo

    endpoint, answer = whoami_server
    answer.update(status=status, headers=headers, body={"error": "no"})
    with pytest.raises(SubmissionError) as err:
        verified_model_repo("alice/m", alice(), token="hf_alice", endpoint=endpoint)
    assert str(err.value) == (message or REFUSED)


def test_a_model_repo_cannot_be_checked_offline_or_without_the_hub(monkeypatch):
    import huggingface_hub.constants as constants

    from rexrank.leaderboard.identity import verified_model_repo

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    with pytest.raises(SubmissionError) as err:  # nothing listens on the discard port
        verified_model_repo("alice/m", alice(), token="hf_alice", endpoint="http://127.0.0.1:9")
    assert re.fullmatch(r"cannot reach the Hub to check the model repo alice/m \((?!NoneType)\w+\); try again later",
                        str(err.value))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(SubmissionError) as err:
        verified_model_repo("alice/m", alice(), token="hf_alice", endpoint="http://127.0.0.1:9")
    assert str(err.value) == "cannot check the model repo alice/m: this server runs with HF_HUB_OFFLINE set"
