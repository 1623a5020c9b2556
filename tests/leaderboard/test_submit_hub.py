"""Push, then submit (issue 19.1): a model builder pushes a predictions dataset to the Hub and
files it by repo id through the running leaderboard app's API, as the Hub account of their
token. Against the fake Hub of tests/support/fakehub.py on 127.0.0.1, with two accounts: a submitter
and the organisers' bot (whose token only the leaderboard and the backend hold)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from support.fakehub import Account, FakeHub
from support.hubhelpers import online_fake_hub, space_process
from rexrank.cli.main import main
from rexrank.errors import SubmissionError
from rexrank.scoring import score_submission
from rexrank.store import FINISHED, open_store
from support.requests import example_rows, write_jsonl

ALICE, BOB, BOT, ALICE_READ = "hf_alice", "hf_bob", "hf_bot", "hf_alice_read"
ACCOUNTS = {
    ALICE: Account("alice"),
    BOB: Account("bob"),
    BOT: Account("rexrank-bot", ("rexrank",)),
    ALICE_READ: Account("alice", role="read"),
}
REPO = "alice/cxr-preds"


@pytest.fixture(scope="module")
def fake():
    with online_fake_hub(ACCOUNTS) as (hub, _):
        yield hub


@pytest.fixture
def hub(fake, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # no saved login: the token is HF_TOKEN's
    monkeypatch.delenv("REXRANK_QUOTA", raising=False)
    return fake


@pytest.fixture(scope="module")
def leaderboard(fake, tmp_path_factory):
    """`rexrank leaderboard --store hf://rexrank` in its own process, as the Space runs it:
    HF_TOKEN is the organisers' bot's; the submitter's token comes with each call."""
    with space_process(fake.url, BOT, tmp_path_factory.mktemp("space")) as running:
        yield running


def cli(capsys, *args) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def push(rows: dict[str, str], tmp_path: Path, *, repo: str = REPO, token: str = ALICE, name="predictions.jsonl") -> str:
    """Upload a predictions file to a (private) dataset repo; the commit's sha."""
    from huggingface_hub import HfApi

    api = HfApi(endpoint=os.environ["HF_ENDPOINT"], token=token)
    api.create_repo(repo, repo_type="dataset", private=True, exist_ok=True)
    path = write_jsonl(tmp_path / f"{len(os.listdir(tmp_path))}.jsonl", rows)
    return api.upload_file(path_or_fileobj=str(path), path_in_repo=name, repo_id=repo, repo_type="dataset").oid


def bot_store():
    return open_store("hf://rexrank", token=BOT, create=False)


def request_files(hub: FakeHub) -> dict[str, bytes]:
    return hub.files("rexrank/requests")


# ---- the model builder's route, end to end ------------------------------------------------

def test_push_then_submit_scores_the_pinned_commit_after_a_second_push(hub, leaderboard, capsys, monkeypatch, tmp_path):
    from rexrank.backend.worker import Worker

    url, space_log = leaderboard
    first = example_rows()
    sha1 = push(first, tmp_path)
    monkeypatch.setenv("HF_TOKEN", ALICE)
    code, out, err = cli(capsys, "submit", "--leaderboard", url, "--predictions", f"hf://{REPO}", "--dataset", "example",
                         "--track", "findings", "--model-name", "Pushed model", "--json")
    assert code == 0, err
    filed = json.loads(out)
    assert filed["status"] == "PENDING" and filed["submitter"] == "alice"  # whoami's answer for the token sent
    assert filed["predictions"]["repo"] == REPO and filed["predictions"]["revision"] == sha1

    # a second push after filing: a different commit, different predictions
    second = {sid: "No acute cardiopulmonary process." for sid in first}
    sha2 = push(second, tmp_path)
    assert sha2 != sha1

    store = bot_store()
    request = store.get_request(filed["id"])
    assert request["predictions"]["source"] == f"hf://{REPO}@{sha1}" and request["predictions"]["revision"] == sha1
    assert Worker(store, metrics="bleu2", worker_id="bot-worker").run(once=True) == 1
    assert store.get_request(filed["id"])["status"] == FINISHED

    def bleu2(rows):
        scored = score_submission("example", "findings", write_jsonl(tmp_path / "direct.jsonl", rows), metrics="bleu2",
                                  progress=False)
        return scored.results["metrics"]["bleu2"]["scores"]["bleu2"]

    [record] = store.list_results()
    assert record["values"]["bleu2"]["mean"] == bleu2(first)["mean"] != bleu2(second)["mean"]

    # step 3: follow it through the Space, public fields only
    monkeypatch.delenv("HF_TOKEN")
    code, out, err = cli(capsys, "status", filed["id"], "--leaderboard", url, "--json")
    assert code == 0, err
    status = json.loads(out)
    assert status["status"] == FINISHED and status["results"]["bleu2"]["mean"] == bleu2(first)["mean"]
    public = status["request"]
    assert public["predictions"] == {"revision": sha1, "n": request["predictions"]["n"],
                                     "n_empty": request["predictions"]["n_empty"], "ids_checked": True}
    assert not {"worker", "lease_expires", "history", "attempts", "result_id"} & set(public)
    code, out, _ = cli(capsys, "status", filed["id"], "--leaderboard", url)
    assert code == 0 and f"{filed['id']}: FINISHED" in out and "by alice" in out and sha1 in out

    # the token was used, never kept: not in the store, not in the Space's output
    assert not any(ALICE.encode() in data for data in request_files(hub).values())
    assert ALICE not in space_log.read_text()


def test_a_wrong_missing_or_read_less_token_is_refused_and_nothing_is_filed(hub, leaderboard, capsys, monkeypatch,
                                                                             tmp_path):
    url, _ = leaderboard
    push(example_rows(), tmp_path, repo="alice/refused-preds")
    before = hub.commits("rexrank/requests")
    args = ("submit", "--leaderboard", url, "--predictions", "hf://alice/refused-preds", "--dataset", "example",
            "--model-name", "Refused", "--submitter", "alice")
    monkeypatch.setenv("HF_TOKEN", "hf_expired")
    code, _, err = cli(capsys, *args)
    assert code == 1 and "token sent was refused by the Hub (invalid or expired)" in err
    assert len(err.strip().splitlines()) == 1
    monkeypatch.delenv("HF_TOKEN")
    code, _, err = cli(capsys, *args)  # a typed --submitter does not stand in for a token
    assert code == 1 and "no Hugging Face token was sent" in err and len(err.strip().splitlines()) == 1
    # bob's token is a valid token, but alice's dataset is not his to file (nor to read: it is private)
    monkeypatch.setenv("HF_TOKEN", BOB)
    code, _, err = cli(capsys, *args)
    assert code == 1 and "the dataset alice/refused-preds belongs to 'alice', not to 'bob'" in err
    assert len(err.strip().splitlines()) == 1
    assert hub.commits("rexrank/requests") == before


def test_the_space_reads_a_dataset_with_the_submitters_token_never_its_own(hub, leaderboard, capsys, monkeypatch,
                                                                          tmp_path):
    """The Space's HF_TOKEN can read the organisers' private requests repo (every submission's
    predictions): a submitter naming it is refused (it is not theirs), and where the owner is
    a typed name (a local store) the read still gets only the refusal the submitter's own
    access (no token) earns."""
    url, _ = leaderboard
    before = hub.commits("rexrank/requests")
    monkeypatch.setenv("HF_TOKEN", ALICE)
    code, _, err = cli(capsys, "submit", "--leaderboard", url, "--predictions", "hf://rexrank/requests",
                       "--dataset", "example", "--model-name", "Peek")
    assert code == 1 and "the dataset rexrank/requests belongs to 'rexrank', not to 'alice'" in err
    assert hub.commits("rexrank/requests") == before
    from rexrank.leaderboard.submit import file_request

    monkeypatch.setenv("HF_TOKEN", BOT)  # this server's login; the submitter sent no token
    with pytest.raises(SubmissionError, match="rexrank/requests: no dataset repo by that name that this token can"):
        file_request(open_store(tmp_path / "store"), hub_dataset="rexrank/requests", test_set="example",
                     track="findings", model_name="Peek", typed_name="rexrank")


def test_the_servers_own_token_never_submits(hub, tmp_path, monkeypatch):
    """Outside a Space gradio mocks the sign-in with the server's login: that token files nothing."""
    push(example_rows(), tmp_path, repo="alice/own-token")
    monkeypatch.setenv("HF_TOKEN", ALICE)  # as if this server ran logged in as alice
    assert "the token sent is this server's own" in _refused(tmp_path, "alice/own-token")


def test_python_submit_uploads_a_local_file_through_the_same_api(hub, leaderboard, monkeypatch, tmp_path):
    import rexrank

    url, _ = leaderboard
    path = write_jsonl(tmp_path / "mine.jsonl", {k: f"{v} Bob." for k, v in example_rows().items()})
    monkeypatch.setenv("HF_TOKEN", BOB)
    filed = rexrank.submit(leaderboard=url, predictions=str(path), dataset="example", track="findings",
                           model_name="Bob's model", submitter="mallory")  # the typed name is not used on the Hub
    assert filed["submitter"] == "bob" and filed["predictions"]["source"] == "mine.jsonl"
    assert bot_store().get_request(filed["id"])["submitter"] == "bob"
    status = rexrank.submission_status(filed["id"], leaderboard=url)
    assert status["request"]["status"] == "PENDING"
    with pytest.raises(SubmissionError, match="no request"):
        rexrank.submission_status("20990101T000000.000000-0123456789", leaderboard=url)


def test_leaderboard_route_refuses_what_only_a_store_reads(capsys, tmp_path):
    """Nothing is sent: these are the command line's own checks."""
    code, _, err = cli(capsys, "submit", "--leaderboard", "http://127.0.0.1:9/", "--predictions", "p.csv",
                       "--dataset", "example", "--model-name", "m", "--id-column", "dicom_id")
    assert code == 1 and "--id-column: only with --store" in err
    code, _, err = cli(capsys, "status", "--leaderboard", "http://127.0.0.1:9/")
    assert code == 1 and "--leaderboard needs a request id" in err
    code, _, err = cli(capsys, "submit", "--store", str(tmp_path / "s"), "--predictions", "p.csv", "--dataset",
                       "example", "--model-name", "m")
    assert code == 1 and "--store needs --submitter" in err


# ---- bad input: a one-line message naming the repo, nothing filed -------------------------

def _file(tmp_path, spec: str, token: str = ALICE):
    from rexrank.leaderboard.submit import file_request

    store = open_store(tmp_path / "store")
    return file_request(store, hub_dataset=spec, test_set="example", track="findings", model_name="m", token=token)


def _refused(tmp_path, spec: str, token: str = ALICE) -> str:
    with pytest.raises(SubmissionError) as caught:
        _file(tmp_path, spec, token)
    assert open_store(tmp_path / "store").list_requests() == []
    message = str(caught.value)
    assert len(message.splitlines()) == 1
    return message


def test_a_revision_is_pinned_to_its_commit_and_unknown_ones_are_refused(hub, tmp_path):
    sha1 = push(example_rows(), tmp_path, repo="alice/revs")
    push({k: "Normal." for k in example_rows()}, tmp_path, repo="alice/revs")
    request = _file(tmp_path, f"alice/revs@{sha1}")
    assert request["predictions"]["revision"] == sha1 and request["predictions"]["source"] == f"hf://alice/revs@{sha1}"
    assert request["submitter"] == "alice" and request["predictions"]["files"] == ["predictions.jsonl"]
    assert "alice/nothing-here: no dataset repo by that name" in _refused(tmp_path / "a", "hf://alice/nothing-here")
    assert "alice/revs: no revision 'v9' in the dataset repo" in _refused(tmp_path / "b", "alice/revs@v9")
    assert "expected hf://USER/REPO" in _refused(tmp_path / "c", "alice")
    page = _file(tmp_path / "d", f"https://huggingface.co/datasets/alice/revs/tree/{sha1}")  # the repo page's address
    assert page["predictions"]["revision"] == sha1


def test_a_file_and_a_dataset_together_or_neither_are_refused(hub, tmp_path):
    from rexrank.leaderboard.submit import file_request

    store = open_store(tmp_path / "store")
    common = dict(test_set="example", track="findings", model_name="m", token=ALICE)
    with pytest.raises(SubmissionError, match=r"both a file and a dataset on the Hub \(alice/x\)"):
        file_request(store, predictions=str(tmp_path / "p.csv"), hub_dataset="alice/x", **common)
    with pytest.raises(SubmissionError, match="no predictions: upload a file or name a predictions dataset"):
        file_request(store, **common)
    assert store.list_requests() == []


def test_a_push_while_the_space_reads_changes_nothing(hub, tmp_path, monkeypatch):
    """The commit resolved first is the one read: a push landing between the resolution
    and the download is not mixed in."""
    import rexrank.store.hub_predictions as hub_predictions

    rows = example_rows()
    sha1 = push(rows, tmp_path, repo="alice/racing")
    resolve = hub_predictions.resolve

    def resolve_then_push(*args, **kwargs):
        found = resolve(*args, **kwargs)
        push({k: "Changed meanwhile." for k in rows}, tmp_path, repo="alice/racing")
        return found

    monkeypatch.setattr(hub_predictions, "resolve", resolve_then_push)
    request = _file(tmp_path / "a", "alice/racing")
    monkeypatch.setattr(hub_predictions, "resolve", resolve)
    direct = _file(tmp_path / "b", f"alice/racing@{sha1}")  # the first commit, read alone
    assert request["predictions"]["revision"] == sha1
    assert request["predictions"]["sha256"] == direct["predictions"]["sha256"]


def test_which_file_holds_the_predictions(hub, tmp_path):
    rows = example_rows()
    push(rows, tmp_path, repo="alice/two-files", name="a.jsonl")
    push(rows, tmp_path, repo="alice/two-files", name="b.csv")
    message = _refused(tmp_path / "a", "alice/two-files")
    assert message.startswith("hf://alice/two-files@") and "2 candidate files (a.jsonl, b.csv)" in message
    push(rows, tmp_path, repo="alice/two-files", name="predictions.jsonl")  # it names itself
    whole = _file(tmp_path / "b", "alice/two-files")
    assert whole["predictions"]["files"] == ["predictions.jsonl"]
    # parquet shards of one split, as datasets.push_to_hub writes them; a second split is ambiguous
    import pandas as pd
    from huggingface_hub import HfApi

    api = HfApi(endpoint=os.environ["HF_ENDPOINT"], token=ALICE)
    api.create_repo("alice/shards", repo_type="dataset", private=True)
    frame = pd.DataFrame({"id": list(rows), "prediction": list(rows.values())})
    for i, part in enumerate((frame[:12], frame[12:])):
        part.to_parquet(tmp_path / f"s{i}.parquet", index=False)
        api.upload_file(path_or_fileobj=str(tmp_path / f"s{i}.parquet"), path_in_repo=f"data/test-0000{i}-of-00002.parquet",
                        repo_id="alice/shards", repo_type="dataset")
    api.upload_file(path_or_fileobj=b"{}", path_in_repo="dataset_infos.json", repo_id="alice/shards",
                    repo_type="dataset")  # written by older push_to_hub: metadata, not a candidate
    request = _file(tmp_path / "c", "alice/shards")
    # the same rows as predictions.jsonl: the same fingerprint
    assert request["predictions"]["sha256"] == whole["predictions"]["sha256"] and len(request["predictions"]["files"]) == 2
    api.upload_file(path_or_fileobj=str(tmp_path / "s0.parquet"), path_in_repo="data/train-00000-of-00001.parquet",
                    repo_id="alice/shards", repo_type="dataset")
    assert "3 candidate files" in _refused(tmp_path / "d", "alice/shards")
    api.create_repo("alice/card-only", repo_type="dataset")
    api.upload_file(path_or_fileobj=b"# predictions\n", path_in_repo="README.md", repo_id="alice/card-only",
                    repo_type="dataset")
    assert "no predictions file (.parquet, .json, .jsonl, .csv)" in _refused(tmp_path / "e", "alice/card-only")


def test_sizes_are_checked_from_the_metadata_before_any_download(hub, tmp_path, monkeypatch):
    push(example_rows(), tmp_path, repo="alice/big")
    monkeypatch.setenv("REXRANK_MAX_PREDICTIONS_MB", "0.001")  # 1,048 bytes; the file has about 2 KB
    start = len(hub.requests)
    message = _refused(tmp_path, "alice/big")
    assert message.startswith("hf://alice/big@") and "over the limit of 0.00105 MB" in message
    assert not [r for r in hub.requests[start:] if "/resolve/" in r]  # nothing downloaded


def test_a_read_token_of_the_owner_reads_a_private_dataset_and_a_missing_one_gets_how_to_grant_access(hub, tmp_path):
    push(example_rows(), tmp_path, repo="alice/private-preds")
    assert _file(tmp_path / "a", "alice/private-preds", token=ALICE_READ)["submitter"] == "alice"
    message = _refused(tmp_path / "b", "bob/not-pushed-yet", token=BOB)
    assert "bob/not-pushed-yet: no dataset repo by that name that this token can read" in message
    assert "make it public (https://huggingface.co/datasets/bob/not-pushed-yet/settings)" in message


def test_the_limits_hold_for_the_shards_together_before_the_rest_is_downloaded(hub, tmp_path, monkeypatch):
    import pandas as pd
    from huggingface_hub import HfApi

    from rexrank import input_limits

    rows = example_rows()
    api = HfApi(endpoint=os.environ["HF_ENDPOINT"], token=ALICE)
    api.create_repo("alice/many-shards", repo_type="dataset", private=True)
    frame = pd.DataFrame({"id": list(rows), "prediction": list(rows.values())})
    for i, part in enumerate((frame[:8], frame[8:16], frame[16:])):
        part.to_parquet(tmp_path / f"m{i}.parquet", index=False)
        api.upload_file(path_or_fileobj=str(tmp_path / f"m{i}.parquet"), path_in_repo=f"data/test-0000{i}-of-00003.parquet",
                        repo_id="alice/many-shards", repo_type="dataset")
    monkeypatch.setattr(input_limits, "MAX_ROWS", 10)  # each shard is within it, the first two together are not
    start = len(hub.requests)
    message = _refused(tmp_path, "alice/many-shards")
    assert "more than 10 rows" in message
    downloads = [r for r in hub.requests[start:] if "/resolve/" in r and ".parquet" in r]
    assert not [r for r in downloads if "test-00002-of-00003" in r]  # refused before the third shard
