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
    """A stand-in for the Hub's whoami endpoint answering `answer["body"]` (huggingface_hub
    allowed online: the server is on 127.0.0.1)."""
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    answer = {"body": {}}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            answer.setdefault("tokens", []).append(self.headers.get("Authorization"))
            body = json.dumps(answer["body"]).encode()
            self.send_response(answer.get("status", 200))
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
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
