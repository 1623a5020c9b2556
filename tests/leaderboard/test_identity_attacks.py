"""The fourth adversarial trial's attacks on who is who (issue 37, attacks 2-6 and 10), each
through the leaderboard Space's own filing code (`rexrank.leaderboard.submit.file_request`,
what its /submit calls) on the fake Hub of tests/support/fakehub.py, with the organisers' store on
that Hub, ReXrank's quota (1 per submitter, test set and track in 7 days) and the backend
scoring: copies front-run, a requeue stolen, the copy rule as an oracle and its evasion, a
model name squatted, an identity that is a name changing hands, and a give-back charged
twice. Each failed on the code before issue 37."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from support.fakehub import Account, FakeHub
from rexrank.errors import SubmissionError
from rexrank.store import FAILED, FINISHED, PENDING, open_store
from support.backend_fixtures import private_set, test_metrics  # noqa: F401 (fixtures)
from support.requests import example_rows, write_jsonl

BOT = "hf_bot"


def accounts_of(**extra) -> dict[str, Account]:
    return {BOT: Account("rexrank-bot", ("rexrank",)), "hf_vic": Account("victor", id="id-victor"),
            "hf_mal": Account("mallory", id="id-mallory"), "hf_eve": Account("eve", id="id-eve"),
            "hf_aimi": Account("stanford-aimi", ("aimi-lab",), id="id-aimi"), **extra}


@pytest.fixture
def hub(monkeypatch):
    import huggingface_hub.constants as constants

    with FakeHub(accounts=accounts_of(hf_alice=Account("alice", id="id-alice"))) as fake:
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # tests run offline; this Hub is on 127.0.0.1
        monkeypatch.setenv("HF_ENDPOINT", fake.url)
        monkeypatch.setenv("HF_TOKEN", BOT)  # the Space's own token: the organisers' bot
        monkeypatch.delenv("REXRANK_QUOTA", raising=False)  # a Hub store's quota: ReXrank's 1/7
        yield fake


def store():
    return open_store("hf://rexrank", token=BOT)


def file(token: str, predictions=None, *, model_name: str, test_set: str = "example", track: str = "findings",
         **kw) -> dict:
    """/submit's filing as the account of `token`: a local file (an upload) or hf://USER/REPO."""
    from rexrank.leaderboard.submit import file_request

    source = str(predictions)
    where = {"hub_dataset": source} if source.startswith("hf://") else {"predictions": source}
    return file_request(store(), test_set=test_set, track=track, model_name=model_name, token=token, **where, **kw)


def refusal(token: str, predictions, **kw) -> str:
    with pytest.raises(SubmissionError) as caught:
        file(token, predictions, **kw)
    return str(caught.value)


def rows(tag: str) -> dict[str, str]:
    return {sid: f"{text} {tag}." for sid, text in example_rows().items()}


def push(repo: str, token: str, path: Path, *, private: bool) -> str:
    from huggingface_hub import HfApi

    api = HfApi(endpoint=os.environ["HF_ENDPOINT"], token=token)
    api.create_repo(repo, repo_type="dataset", private=private, exist_ok=True)
    return api.upload_file(path_or_fileobj=str(path), path_in_repo=f"predictions{path.suffix}", repo_id=repo,
                           repo_type="dataset").oid


def score_all(**worker) -> None:
    from rexrank.backend.worker import Worker

    while Worker(store(), metrics="bleu2", worker_id="bot-worker", **worker).run(once=True):
        pass


def status(request_id: str) -> dict:
    """What anyone may read of a request (the Space's /status)."""
    from rexrank.backend.public_door import status_answer

    return status_answer(store().get_request(request_id), None)


def results() -> dict[str, dict]:
    return {r["id"]: r for r in store().list_results()}


def cli(*args: str) -> tuple[int, str]:
    import contextlib
    import io

    from rexrank.cli.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(args))
    return code, out.getvalue()


# ---- 2: copy front-run -----------------------------------------------------------------------

def test_a_copy_filed_first_is_held_and_the_original_is_scored(hub, tmp_path):
    theirs = write_jsonl(tmp_path / "victor.jsonl", rows("victor's model"))
    push("victor/preds", "hf_vic", theirs, private=False)  # public: anyone can read and re-upload it
    push("mallory/preds", "hf_mal", write_jsonl(tmp_path / "copy.jsonl", rows("victor's model")), private=True)
    copy = file("hf_mal", "hf://mallory/preds", model_name="MalNet")  # filed first
    assert copy["status"] == PENDING
    original = file("hf_vic", "hf://victor/preds", model_name="VicNet")  # was refused for ever
    assert original["status"] == PENDING
    assert store().get_request(copy["id"])["status"] == "HELD"  # its content reached the Hub later
    score_all()
    assert store().get_request(original["id"])["status"] == FINISHED
    assert list(results()) == [original["id"]] and results()[original["id"]]["namespace"] == "victor"
    held = store().get_request(copy["id"])
    assert held["status"] == "HELD" and [m["request_id"] for m in held["review"]["matches"]] == [original["id"]]
    # the maintainers' review: listed with what it matches and when each reached the Hub
    code, listing = cli("review", "--store", "hf://rexrank")
    assert code == 0 and copy["id"] in listing and original["id"] in listing
    assert "100.0% of studies the same as" in listing and "(commit)" in listing
    code, out = cli("review", "--store", "hf://rexrank", "--reject", copy["id"], "--reason", "a copy of VicNet")
    rejected = store().get_request(copy["id"])
    assert rejected["status"] == FAILED and rejected["failure_kind"] == "rejected"
    assert rejected["error"].endswith(": a copy of VicNet")


def test_a_copy_scored_before_its_original_was_filed_is_listed_and_withdrawn_on_rejection(hub, tmp_path):
    push("victor/preds", "hf_vic", write_jsonl(tmp_path / "v.jsonl", rows("victor's")), private=False)
    copy = file("hf_mal", write_jsonl(tmp_path / "copy.jsonl", rows("victor's")), model_name="MalNet")  # an upload
    score_all()
    assert list(results()) == [copy["id"]]  # published before anyone else filed
    original = file("hf_vic", "hf://victor/preds", model_name="VicNet")
    assert original["status"] == PENDING  # the original is not refused, nor held
    assert copy["id"] in store().published_copies()
    code, listing = cli("review", "--store", "hf://rexrank", "--json")
    assert [e["id"] for e in json.loads(listing)["published"]] == [copy["id"]]
    cli("review", "--store", "hf://rexrank", "--reject", copy["id"])
    score_all()
    assert list(results()) == [original["id"]]  # the copy's result withdrawn, the original's published
    assert store().get_request(copy["id"])["failure_kind"] == "rejected" and not store().published_copies()


# ---- 3: requeue theft --------------------------------------------------------------------------

def test_a_failed_originals_requeue_is_not_refused_as_a_copy_of_its_copy(hub, tmp_path):
    mine = rows("victor's model")
    original = file("hf_vic", write_jsonl(tmp_path / "v.jsonl", mine), model_name="VicNet")
    s = store()
    s.claim("w", lease_seconds=60)
    s.fail(original["id"], "w", error="an LLM outage", kind="coverage")  # fails in an outage
    copy = file("hf_mal", write_jsonl(tmp_path / "copy.jsonl", mine), model_name="MalNet")
    assert copy["status"] == "HELD"  # a failed request still had them first
    score_all()
    assert cli("requeue", original["id"], "--store", "hf://rexrank")[0] == 0  # the maintainers' requeue
    score_all()
    assert store().get_request(original["id"])["status"] == FINISHED  # its own requeue never counts against it
    assert list(results()) == [original["id"]] and store().get_request(copy["id"])["status"] == "HELD"


# ---- 4: the copy rule is no oracle, and whitespace does not evade it -----------------------------

def test_a_copy_filed_over_quota_hears_only_of_its_quota(hub, tmp_path):
    secret = rows("victor's unreleased model")
    file("hf_vic", write_jsonl(tmp_path / "v.jsonl", secret), model_name="VicNet")  # pending
    file("hf_mal", write_jsonl(tmp_path / "own.jsonl", rows("mallory's")), model_name="MalNet")  # her quota used
    message = refusal("hf_mal", write_jsonl(tmp_path / "probe.jsonl", secret), model_name="Probe")
    assert message.startswith("submitter 'mallory' already has 1 submission(s) on example/findings")
    assert not [word for word in ("identical", "another", "copy", "held", "victor") if word in message.lower()]


def test_a_held_copy_says_the_same_whatever_the_other_filing_is(hub, tmp_path):
    secret = rows("victor's model")
    original = file("hf_vic", write_jsonl(tmp_path / "v.jsonl", secret), model_name="VicNet")
    while_pending = file("hf_mal", write_jsonl(tmp_path / "a.jsonl", secret), model_name="MalNet")
    score_all()
    assert store().get_request(original["id"])["status"] == FINISHED
    once_scored = file("hf_eve", write_jsonl(tmp_path / "b.jsonl", secret), model_name="EveNet")
    from rexrank.store.review import HELD_MESSAGE

    answers = [status(r["id"])["request"] for r in (while_pending, once_scored)]
    assert [a["status"] for a in answers] == ["HELD", "HELD"] and {a["error"] for a in answers} == {HELD_MESSAGE}
    assert {tuple(sorted(a)) for a in answers} == {tuple(sorted(answers[0]))}  # the same fields, nothing more
    for answer in answers:
        text = json.dumps(answer)
        assert not [leak for leak in ("victor", "VicNet", original["id"], '"review"', "match", "another", "account",
                                      "copy", "copies") if leak in text.lower()]
    # it says what it waits for and what comes next
    assert all(words in HELD_MESSAGE for words in ("review by the maintainers", "scored", "published", "reject"))


def test_whitespace_or_one_study_in_a_hundred_does_not_evade_the_copy_rule(hub, tmp_path):
    secret = rows("victor's model")
    file("hf_vic", write_jsonl(tmp_path / "v.jsonl", secret), model_name="VicNet")
    spaced = {sid: text + (" " if i == 0 else "") for i, (sid, text) in enumerate(secret.items())}
    spaced[next(iter(spaced))] = "  " + spaced[next(iter(spaced))].replace(" ", "\t ", 2)
    assert file("hf_mal", write_jsonl(tmp_path / "spaced.jsonl", spaced), model_name="MalNet")["status"] == "HELD"
    # 99 % of the studies the same (a private set: ids are not checked at filing, so 200 of them)
    big = {f"RG{i:05d}": f"Finding number {i}: no acute cardiopulmonary process, variant {i * 7}." for i in range(200)}
    file("hf_vic", write_jsonl(tmp_path / "big.jsonl", big), model_name="VicNet", test_set="rexgradient")
    two_changed = {**big, "RG00003": "changed", "RG00150": "changed too"}  # 99.0 % the same
    assert file("hf_eve", write_jsonl(tmp_path / "b1.jsonl", two_changed), model_name="EveNet",
                test_set="rexgradient")["status"] == "HELD"
    three_changed = {**big, "RG00010": "mine", "RG00011": "mine too", "RG00012": "mine again"}  # 98.5 %: its own
    assert file("hf_mal", write_jsonl(tmp_path / "b2.jsonl", three_changed), model_name="MalNet",
                test_set="rexgradient")["status"] == PENDING


# ---- 5: a model name belongs to its namespace ----------------------------------------------------

def test_a_squatted_model_name_is_the_squatters_own_and_the_owner_keeps_theirs(hub, tmp_path):
    from huggingface_hub import HfApi

    from rexrank.leaderboard.records import records_frame
    from rexrank.leaderboard.tables import ranked

    junk = file("hf_mal", write_jsonl(tmp_path / "junk.jsonl", rows("junk")), model_name="CheXagent-3")
    real = file("hf_aimi", write_jsonl(tmp_path / "real.jsonl", rows("the real one")), model_name="CheXagent-3")
    assert (real["namespace"], real["namespace_id"]) == ("stanford-aimi", "id-aimi")  # was refused: "belongs to another"
    HfApi(endpoint=hub.url, token="hf_aimi").create_repo("stanford-aimi/CheXagent-3", exist_ok=True)
    linked = file("hf_aimi", write_jsonl(tmp_path / "linked.jsonl", rows("the real one, linked")),
                  model_name="CheXagent-3", model_repo="stanford-aimi/CheXagent-3", track="findings_impression")
    assert linked["model_repo"] == "stanford-aimi/CheXagent-3"
    lab = file("hf_mal", write_jsonl(tmp_path / "lab.jsonl", rows("mallory's lab")), model_name="CheXagent-3",
               track="findings_impression")  # the squatter's own, beside it on that track too
    assert "namespace 'stanford-aimi' is not yours" in refusal(
        "hf_eve", write_jsonl(tmp_path / "e.jsonl", rows("eve")), model_name="CheXagent-3", namespace="stanford-aimi")
    assert "the model repo stanford-aimi/CheXagent-3 belongs to 'stanford-aimi', not to 'eve'" in refusal(
        "hf_eve", write_jsonl(tmp_path / "e2.jsonl", rows("eve")), model_name="Eve", model_repo="stanford-aimi/CheXagent-3")
    assert "no model repo stanford-aimi/absent" in refusal(
        "hf_aimi", write_jsonl(tmp_path / "x.jsonl", rows("x")), model_name="X", model_repo="stanford-aimi/absent",
        track="findings_impression")
    score_all()
    for track in ("findings", "findings_impression"):
        table = ranked(records_frame(store().list_results()), "example", track, "bleu2")
        shown = {r["model_name"]: r for r in table.to_dict("records")}
        assert set(shown) == {"mallory / CheXagent-3", "stanford-aimi / CheXagent-3"}
        assert not any(r["lookalike"] for r in shown.values())  # one name in two namespaces: no lookalike
    assert shown["stanford-aimi / CheXagent-3"]["model_url"] == f"{hub.url}/stanford-aimi/CheXagent-3"
    assert results()[junk["id"]]["namespace"] == "mallory" and results()[lab["id"]]["namespace"] == "mallory"
    # one of the submitter's organisations, by its id (whoami's orgs): filed on the private set, not scored here
    in_org = file("hf_aimi", write_jsonl(tmp_path / "org.jsonl", {"RG00001": "x"}), model_name="CheXagent-3",
                  namespace="AIMI-lab", test_set="rexgradient")
    assert (in_org["namespace"], in_org["namespace_id"]) == ("aimi-lab", hub.org_id("aimi-lab"))


# ---- 6: identity is the account's id, never its name ---------------------------------------------

def _private_budget_of_one_request(hub) -> float:
    """The store's config: a private set whose budget pays for one request of the store's metric
    set; returns that cost."""
    from huggingface_hub import HfApi

    from rexrank.backend.public_door import _store_request_cost

    cost, _ = _store_request_cost(store())
    config = {"privacy_budget": {"rexgradient": cost}, "approved_submitters": {"rexgradient": ["alice"]}}
    HfApi(endpoint=hub.url, token=BOT).upload_file(path_or_fileobj=json.dumps(config).encode(), path_in_repo="config.json",
                                                   repo_id="rexrank/requests", repo_type="dataset")
    return cost


def _spend_the_budget(tmp_path) -> dict:
    """alice files on the private set and the maintainers cancel it (`rexrank cancel` charges it)."""
    filed = file("hf_alice", write_jsonl(tmp_path / "p.jsonl", {"RG00001": "x"}), model_name="Probe",
                 test_set="rexgradient")
    assert cli("cancel", filed["id"], "--store", "hf://rexrank")[0] == 0
    return filed


def test_a_renamed_account_keeps_its_quota_its_ledger_and_its_approval(hub, tmp_path):
    _private_budget_of_one_request(hub)
    first = file("hf_alice", write_jsonl(tmp_path / "a.jsonl", rows("alice")), model_name="AliceNet")
    _spend_the_budget(tmp_path)
    hub.rename("hf_alice", "alice-renamed")  # the same token, the same account
    message = refusal("hf_alice", write_jsonl(tmp_path / "b.jsonl", rows("alice again")), model_name="AliceNet2")
    assert message.startswith("submitter 'alice-renamed' already has 1 submission(s) on example/findings")
    assert "--quota or the store's config.json key \"quota\"" in message  # says where the quota is set (issue 39)
    message = refusal("hf_alice", write_jsonl(tmp_path / "c.jsonl", {"RG00002": "y"}), model_name="Probe2",
                      test_set="rexgradient", track="findings_impression")
    assert "alice-renamed has spent" in message and "privacy budget" in message  # approved still, its ledger kept
    assert store().get_request(first["id"])["submitter_id"] == "id-alice"


def test_a_newcomer_who_takes_a_freed_name_inherits_nothing(hub, tmp_path):
    from huggingface_hub import HfApi

    cost = _private_budget_of_one_request(hub)
    file("hf_alice", write_jsonl(tmp_path / "a.jsonl", rows("alice")), model_name="AliceNet")
    _spend_the_budget(tmp_path)  # approved as "alice": bound to alice's id at this first filing
    hub.rename("hf_alice", "alice-renamed")
    hub.accounts["hf_newcomer"] = Account("alice", id="id-newcomer")  # the freed name, taken
    # not the approved account, whatever its name
    assert "'alice' is not one of them" in refusal(
        "hf_newcomer", write_jsonl(tmp_path / "n.jsonl", {"RG00001": "z"}), model_name="N", test_set="rexgradient")
    # nor alice's quota or ledger: once the organisers open the set, the newcomer starts afresh
    HfApi(endpoint=hub.url, token=BOT).upload_file(
        path_or_fileobj=json.dumps({"privacy_budget": {"rexgradient": cost}}).encode(), path_in_repo="config.json",
        repo_id="rexrank/requests", repo_type="dataset")
    assert file("hf_newcomer", write_jsonl(tmp_path / "n2.jsonl", rows("newcomer")), model_name="NewNet")
    assert file("hf_newcomer", write_jsonl(tmp_path / "n3.jsonl", {"RG00003": "w"}), model_name="NewProbe",
                test_set="rexgradient")["status"] == PENDING
    from rexrank.store import accounts, ledger

    s = store()
    assert ledger.charges(s, accounts.Account("alice", "id-newcomer"), "rexgradient") == {}
    assert len(ledger.charges(s, accounts.Account("alice-renamed", "id-alice"), "rexgradient")) == 1


def test_requests_recorded_by_name_load_and_bind_to_the_first_id_filing_under_that_name(hub, tmp_path):
    """A store filed before ids (the organisers' route records a name only): it loads; the
    name's requests and ledger charges are bound to the first account with an id that files
    under it, which keeps them after a rename, and a newcomer who takes the freed name
    inherits none of them."""
    from huggingface_hub import HfApi

    from rexrank.store import accounts, ledger

    cost = _private_budget_of_one_request(hub)
    legacy = store().submit(test_set="example", track="findings", predictions=str(write_jsonl(tmp_path / "l.jsonl",
                            rows("legacy"))), model_name="Legacy", submitter="alice")
    probe = store().submit(test_set="rexgradient", track="findings", model_name="OldProbe", submitter="alice",
                           predictions=str(write_jsonl(tmp_path / "lp.jsonl", {"RG00001": "x"})))
    assert "submitter_id" not in legacy and "submitter_id" not in probe
    assert cli("cancel", probe["id"], "--store", "hf://rexrank")[0] == 0  # charged to the name's ledger
    # alice's own filings by name count in her quota and her spend
    message = refusal("hf_alice", write_jsonl(tmp_path / "a.jsonl", rows("alice")), model_name="AliceNet")
    assert message.startswith("submitter 'alice' already has 1 submission(s) on example/findings")
    message = refusal("hf_alice", write_jsonl(tmp_path / "p.jsonl", {"RG00002": "y"}), model_name="Probe",
                      test_set="rexgradient")
    assert "alice has spent" in message and "privacy budget" in message
    filed = file("hf_alice", write_jsonl(tmp_path / "b.jsonl", rows("alice")), model_name="AliceNet",
                 track="findings_impression")  # her first filing: the name is bound to her id
    assert filed["status"] == PENDING
    bindings = json.loads(hub.files("rexrank/requests")[accounts.LEGACY_BINDINGS])
    assert {key: b["id"] for key, b in bindings.items()} == {"alice": "id-alice"}

    hub.rename("hf_alice", "alice-renamed")
    hub.accounts["hf_newcomer"] = Account("alice", id="id-newcomer")  # the freed name, taken
    HfApi(endpoint=hub.url, token=BOT).upload_file(  # the private set opened to all: the ledger alone decides
        path_or_fileobj=json.dumps({"privacy_budget": {"rexgradient": cost}}).encode(), path_in_repo="config.json",
        repo_id="rexrank/requests", repo_type="dataset")
    assert file("hf_newcomer", write_jsonl(tmp_path / "n.jsonl", rows("newcomer")), model_name="NewNet")["status"] \
        == PENDING
    assert file("hf_newcomer", write_jsonl(tmp_path / "n2.jsonl", {"RG00003": "w"}), model_name="NewProbe",
                test_set="rexgradient")["status"] == PENDING
    # the original owner keeps both after the binding, under her new name
    message = refusal("hf_alice", write_jsonl(tmp_path / "c.jsonl", rows("alice again")), model_name="AliceNet2")
    assert message.startswith("submitter 'alice-renamed' already has 1 submission(s) on example/findings")
    message = refusal("hf_alice", write_jsonl(tmp_path / "p2.jsonl", {"RG00004": "v"}), model_name="Probe2",
                      test_set="rexgradient")
    assert "alice-renamed has spent" in message
    s = store()
    assert ledger.charges(s, accounts.Account("alice", "id-newcomer"), "rexgradient") == {}
    assert list(ledger.charges(s, accounts.Account("alice-renamed", "id-alice"), "rexgradient")) == [probe["id"]]
    assert json.loads(hub.files("rexrank/requests")[accounts.LEGACY_BINDINGS]) == bindings  # bound once, for good
    # the backend's own check reads the binding alike: the name's request was alice's first
    assert store().policy_problem(store().get_request(legacy["id"])) is None
    assert "already has 1 submission(s)" in store().policy_problem(dict(store().get_request(filed["id"]),
                                                                        track="findings"))


def test_a_name_bound_to_an_id_owns_the_predictions_it_filed_by_name(hub, tmp_path):
    """The copy rule reads the binding too: the first id filing under a name is that name's
    party, so filing again what it filed by name is no copy; a newcomer with the freed name is
    another party."""
    from huggingface_hub import HfApi

    predictions = write_jsonl(tmp_path / "l.jsonl", rows("legacy"))
    store().submit(test_set="example", track="findings", predictions=str(predictions), model_name="Legacy",
                   submitter="alice")
    HfApi(endpoint=hub.url, token=BOT).upload_file(  # no quota: the copy rule alone decides
        path_or_fileobj=json.dumps({"quota": "0"}).encode(), path_in_repo="config.json", repo_id="rexrank/requests",
        repo_type="dataset")
    assert file("hf_alice", predictions, model_name="AliceNet")["status"] == PENDING  # hers: bound at this filing
    hub.rename("hf_alice", "alice-renamed")
    assert file("hf_alice", predictions, model_name="AliceNet2")["status"] == PENDING
    hub.accounts["hf_newcomer"] = Account("alice", id="id-newcomer")
    assert file("hf_newcomer", predictions, model_name="NewNet")["status"] == "HELD"


# ---- 10: a give-back after a machine fault is the same round ---------------------------------------

def _ledger_charges(hub, test_set: str) -> dict:
    """Every charge in the store's ledger on `test_set` (whoever's), read from the Hub's files."""
    folder = f"ledger/{test_set}/"
    return {key: charge for path, data in hub.files("rexrank/requests").items() if path.startswith(folder)
            for key, charge in json.loads(data)["charges"].items()}


def test_a_request_given_back_after_a_machine_fault_is_charged_once(hub, tmp_path, private_set):
    from rexrank.backend.public_door import request_cost
    from rexrank.backend.worker import BackendStop, Worker

    data_dir, preds = private_set
    filed = file("hf_vic", preds, model_name="VicNet", test_set="rexgradient")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BackendStop, match="is PENDING again"):  # a worker without the data: gives it back
        Worker(store(), metrics="bleu2", worker_id="w1", data_dir=tmp_path / "empty").run(once=True)
    assert store().get_request(filed["id"])["status"] == PENDING
    score_all(data_dir=data_dir)
    assert store().get_request(filed["id"])["status"] == FINISHED
    charges = _ledger_charges(hub, "rexgradient")
    cost, _ = request_cost(["bleu2"])
    assert list(charges) == [filed["id"]] and sum(c["epsilon"] for c in charges.values()) == cost
