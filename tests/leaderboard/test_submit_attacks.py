"""The third adversarial trial's attacks on submitting (issue 28, items 3-6), each through the
leaderboard Space's own `/submit` and `/status` on the fake Hub of tests/support/fakehub.py, as the
trial ran them: lookalike Hub accounts, a nested-column parquet bomb, a private predictions
repo's name in the public results, another account's predictions filed as one's own.

The Space runs as in production: HF_TOKEN is the organisers' bot's, the quota is ReXrank's
(1 per submitter, test set and track in 7 days), and the submitter is whoami's answer for
the token sent with each call."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import rexrank
from support.fakehub import Account, FakeHub
from rexrank.errors import SubmissionError
from rexrank.leaderboard.records import records_frame
from rexrank.leaderboard.tables import ranked
from rexrank.store import FINISHED, open_store
from rexrank.store.review import HELD_MESSAGE
from support.requests import example_rows, write_jsonl
from support.hubhelpers import space_process

BOT = "hf_bot"
TOKENS = {  # token -> account, as the fake Hub's whoami answers
    "hf_aimi": Account("stanford-aimi"), "hf_aiml": Account("stanford-aiml"),  # i / l
    "hf_modern": Account("modern-lab"), "hf_rnodern": Account("rnodern-lab"),  # m / rn
    "hf_chexlab": Account("chexlab"), "hf_chexiab": Account("chexIab"),  # l / I
    "hf_alice": Account("alice", ("acme",)), "hf_dave": Account("dave", ("acme",)), "hf_bob": Account("bob"),
    "hf_carol": Account("carol"), "hf_erin": Account("erin"),
    BOT: Account("rexrank-bot", ("rexrank",)),
}


@pytest.fixture(scope="module")
def fake():
    import huggingface_hub.constants as constants

    with FakeHub(accounts=TOKENS) as hub, pytest.MonkeyPatch.context() as mp:
        mp.setattr(constants, "HF_HUB_OFFLINE", False)  # tests run offline; this Hub is on 127.0.0.1
        mp.setenv("HF_ENDPOINT", hub.url)
        mp.delenv("REXRANK_QUOTA", raising=False)  # the backend's: ReXrank's 1/7, as the Space's
        yield hub


@pytest.fixture(scope="module")
def space(fake, tmp_path_factory):
    with space_process(fake.url, BOT, tmp_path_factory.mktemp("space"), quota="1/7") as (url, _log):
        yield url


def bot_store():
    return open_store("hf://rexrank", token=BOT, create=False)


def rows(tag: str) -> dict[str, str]:
    """The example set's predictions, made distinct by `tag`."""
    return {sid: f"{text} {tag}." for sid, text in example_rows().items()}


def file(space: str, token: str, predictions, *, model_name: str, dataset: str = "example",
         track: str = "findings") -> dict:
    """/submit as the account of `token`: the request's public fields, or SubmissionError."""
    return rexrank.submit(leaderboard=space, predictions=str(predictions), dataset=dataset, track=track,
                          model_name=model_name, token=token)


def refusal(space: str, token: str, predictions, **kwargs) -> str:
    with pytest.raises(SubmissionError) as caught:
        file(space, token, predictions, **kwargs)
    return str(caught.value)


def status(space: str, request_id: str) -> dict:
    return rexrank.submission_status(request_id, leaderboard=space)


def score_all() -> None:
    """The backend, scoring every open request of the public sets (those on the private set,
    which this backend does not hold, are withdrawn)."""
    from rexrank.backend.worker import Worker

    store = bot_store()
    for request in store.list_requests():
        if request["status"] == "PENDING" and request["test_set"] == "rexgradient":
            store.cancel(request["id"])
    while Worker(bot_store(), metrics="bleu2", worker_id="bot-worker").run(once=True):
        pass


def push(repo: str, token: str, path: Path, *, private: bool = True) -> str:
    """A predictions dataset on the fake Hub; the commit's sha."""
    from huggingface_hub import HfApi

    api = HfApi(endpoint=os.environ["HF_ENDPOINT"], token=token)
    api.create_repo(repo, repo_type="dataset", private=private, exist_ok=True)
    return api.upload_file(path_or_fileobj=str(path), path_in_repo=f"predictions{path.suffix}", repo_id=repo,
                           repo_type="dataset").oid


# ---- item 3: Hub accounts are compared exactly ----------------------------------------------

def test_a_lookalike_account_is_not_on_the_approved_list(fake, space, tmp_path):
    from huggingface_hub import HfApi

    config = {"approved_submitters": {"rexgradient": ["stanford-aimi"]}}
    HfApi(endpoint=fake.url, token=BOT).upload_file(
        path_or_fileobj=json.dumps(config).encode(), path_in_repo="config.json", repo_id="rexrank/requests",
        repo_type="dataset")
    preds = write_jsonl(tmp_path / "p.jsonl", rows("private set"))
    message = refusal(space, "hf_aiml", preds, model_name="Probe", dataset="rexgradient")
    assert "'stanford-aiml' is not one of them" in message
    filed = file(space, "hf_aimi", preds, model_name="AIMI Net", dataset="rexgradient")
    assert filed["submitter"] == "stanford-aimi" and status(space, filed["id"])["request"]["status"] == "PENDING"


def test_a_lookalike_account_files_under_its_own_namespace_and_is_marked(space, tmp_path):
    victim = file(space, "hf_modern", write_jsonl(tmp_path / "v.jsonl", rows("modern")), model_name="ModernNet")
    assert (victim["submitter"], victim["namespace"]) == ("modern-lab", "modern-lab")
    lookalike = file(space, "hf_rnodern", write_jsonl(tmp_path / "a.jsonl", rows("rnodern")), model_name="ModernNet")
    assert lookalike["namespace"] == "rnodern-lab"  # nobody owns a bare name (issue 37): shown under its namespace
    score_all()
    table = ranked(records_frame(bot_store().list_results()), "example", "findings", "bleu2")
    marked = dict(zip(table["model_name"], table["lookalike"]))
    assert marked["modern-lab / ModernNet"] and marked["rnodern-lab / ModernNet"]  # read alike: both marked


def test_a_lookalike_accounts_filing_does_not_use_up_the_victims_quota(space, tmp_path):
    junk = file(space, "hf_chexiab", write_jsonl(tmp_path / "junk.jsonl", rows("junk")), model_name="Junk")
    victim = file(space, "hf_chexlab", write_jsonl(tmp_path / "v.jsonl", rows("chexlab")), model_name="CheXLab Net")
    score_all()  # the backend checks the quota again, with the same rule
    assert status(space, junk["id"])["request"]["status"] == FINISHED
    assert status(space, victim["id"])["request"]["status"] == FINISHED
    # each account's own quota still holds
    assert "already has 1 submission(s) on example/findings" in refusal(
        space, "hf_chexlab", write_jsonl(tmp_path / "again.jsonl", rows("again")), model_name="CheXLab Net")


# ---- item 4: predictions are strings, checked from the parquet schema -----------------------

def nested_bomb(path: Path, n_rows: int, value: str) -> Path:
    """A `prediction` column that is a struct whose leaf `prediction.t` repeats one long value:
    dictionary-encoded, a few hundred bytes on disk whatever the value's length and row count."""
    zeros = pa.array(np.zeros(n_rows, dtype=np.int32))
    leaf = pa.DictionaryArray.from_arrays(zeros, [value])
    ids = sorted(example_rows())
    pq.write_table(pa.table({"id": [ids[i % len(ids)] for i in range(n_rows)],
                             "prediction": pa.StructArray.from_arrays([leaf], names=["t"])}), path, compression="zstd")
    return path


def test_a_nested_prediction_column_is_refused_from_the_schema_upload_and_hub(space, tmp_path):
    bomb = nested_bomb(tmp_path / "bomb.parquet", 20, "x" * 50_000)  # small here: the trial's grew the Space by ~1 GB
    assert bomb.stat().st_size < 2_000
    schema_rule = "column 'prediction' holds struct<t: dictionary<values=string"
    assert schema_rule in refusal(space, "hf_bob", bomb, model_name="Bomb")
    push("bob/bomb", "hf_bob", bomb)
    assert schema_rule in refusal(space, "hf_bob", "hf://bob/bomb", model_name="Bomb")


# ---- item 5: a private predictions repo is never named publicly -----------------------------

def test_a_private_predictions_repos_name_is_not_published(fake, space, tmp_path):
    secret = "alice/acme-unreleased-model-preds"
    sha = push(secret, "hf_alice", write_jsonl(tmp_path / "s.jsonl", rows("unreleased")))
    filed = file(space, "hf_alice", f"hf://{secret}", model_name="Acme Unreleased")
    assert filed["predictions"]["repo"] == secret  # the submitter's own answer names it
    public_sha = push("alice/open-preds", "hf_alice", write_jsonl(tmp_path / "o.jsonl", rows("open")), private=False)
    shown = file(space, "hf_alice", "hf://alice/open-preds", model_name="Acme Open", track="findings_impression")
    score_all()
    answer = status(space, filed["id"])
    assert answer["request"]["status"] == FINISHED and "acme-unreleased" not in json.dumps(answer)
    published = fake.files("rexrank/results")
    assert not [path for path, data in published.items() if b"acme-unreleased" in data]
    [record] = [r for r in bot_store().list_results() if r["id"] == filed["id"]]
    assert record["provenance"]["predictions"]["source"] == f"a private dataset at commit {sha}"
    # a repo the Hub said was public when it was filed is named, at its commit
    [record] = [r for r in bot_store().list_results() if r["id"] == shown["id"]]
    assert record["provenance"]["predictions"]["source"] == f"hf://alice/open-preds@{public_sha}"


# ---- item 6: one's own predictions only -----------------------------------------------------

def test_another_accounts_dataset_cannot_be_filed_as_ones_own(space, tmp_path):
    theirs = write_jsonl(tmp_path / "alice.jsonl", rows("alice's model"))
    push("alice/alice-preds", "hf_alice", theirs, private=False)  # public: bob's token can read it
    message = refusal(space, "hf_bob", "hf://alice/alice-preds", model_name="BobNet", track="findings_impression")
    assert "the dataset alice/alice-preds belongs to 'alice', not to 'bob'" in message
    # an organisation's (private) dataset, pushed by one member and filed by another (whoami's orgs)
    push("acme/team-preds", "hf_alice", write_jsonl(tmp_path / "team.jsonl", rows("acme team")))
    filed = file(space, "hf_dave", "hf://acme/team-preds", model_name="Acme Team")
    assert filed["submitter"] == "dave"


def test_identical_predictions_of_another_submitter_are_held_naming_nothing_of_theirs(space, tmp_path):
    mine = rows("carefully trained")
    first = file(space, "hf_carol", write_jsonl(tmp_path / "carol.jsonl", mine), model_name="Carol Careful")
    copy = write_jsonl(tmp_path / "copy.jsonl", mine)
    held = file(space, "hf_bob", copy, model_name="BobNet")
    assert held["status"] == "HELD" and held["error"] == HELD_MESSAGE  # held for review, not refused
    answer = json.dumps(status(space, held["id"]))
    # the first filing's time, unless both were filed within the same second (then it is the copy's own)
    theirs = ("carol", "Carol", first["id"], *({first["submitted_time"]} - {held["submitted_time"]}))
    assert not [leak for leak in theirs if leak in answer]
    # settled, the first filing is found through the copy index
    score_all()
    assert status(space, first["id"])["request"]["status"] == FINISHED
    assert status(space, held["id"])["request"]["status"] == "HELD"  # no worker takes it
    again = file(space, "hf_erin", copy, model_name="ErinNet")
    assert again["status"] == "HELD" and again["error"] == HELD_MESSAGE
