"""Issue 28 items 1-2: the private test set behind one door, with a privacy ledger.

Through the Space's own `/submit` and `/status` (`rexrank.submit`, `rexrank.submission_status`)
against the fake Hub of tests/support/fakehub.py, with the backend worker scoring from a stand-in
for ReXGradient (private access) that only the worker reads:

- GREEN's length failures: with a tiny GREEN-architecture judge (a random Llama), a study
  fails when template + reference + prediction leaves no room under the length cap, and its
  batch of 8 with it. The prober chooses the prediction's length, so "did the target score?"
  answers "is its reference longer than T tokens?"; a probe whose every study fails used
  to publish the prompt lengths.
- The findings track: leaving out study X used to fail validation if X has findings and
  finish (publishing n_not_in_track) if it has none.
- The ledger: probes beyond an account's budget are refused; what the probes the budget
  allows can learn is bounded by ε (a statistical check with a fixed seed).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from pathlib import Path

import numpy as np
import pytest

from support.fakehub import Account
from support.hubhelpers import online_fake_hub, space_process
from support.requests import write_jsonl
from support.backend_fixtures import stand_in

BOT = "hf_bot"
PROBERS = {f"hf_prober{i}": Account(f"prober{i}") for i in range(6)}
ACCOUNTS = {BOT: Account("rexrank-bot", ("rexrank",)), **PROBERS}
SHORT_REF = "Small left pleural effusion."
LONG_REF = "Small left pleural effusion with adjacent atelectasis in the left lower lobe, unchanged. " * 3
SHORT_PRED = "No pneumothorax."
N_GREEN = 16  # two batches of 8


@pytest.fixture(scope="module")
def fake():
    with online_fake_hub(ACCOUNTS) as (hub, mp):
        mp.delenv("REXRANK_QUOTA", raising=False)
        yield hub


@pytest.fixture(scope="module")
def space(fake, tmp_path_factory):
    """The leaderboard Space (`rexrank leaderboard --store hf://rexrank`) in its own process,
    with the organisers' bot token and without the private data."""
    with space_process(fake.url, BOT, tmp_path_factory.mktemp("space")) as (url, _):
        yield url


@pytest.fixture
def private_spec(monkeypatch):
    """The worker's registry entry for ReXGradient without its size (the stand-ins are small)."""
    from rexrank.testsets import registry

    spec = registry.TEST_SETS["rexgradient"]
    monkeypatch.setitem(registry.TEST_SETS, "rexgradient", dataclasses.replace(spec, n_studies=None))
    return spec


def file_probe(url: str, token: str, rows: dict[str, str], tmp_path: Path, name: str) -> str:
    """One submission through the Space's /submit, as the account of `token`; its id."""
    import rexrank

    old = os.environ.get("HF_TOKEN")
    os.environ["HF_TOKEN"] = token
    try:
        filed = rexrank.submit(leaderboard=url, predictions=str(write_jsonl(tmp_path / f"{name}.jsonl", rows)),
                               dataset="rexgradient", track="findings", model_name=name)
    finally:
        if old is None:
            os.environ.pop("HF_TOKEN", None)
        else:
            os.environ["HF_TOKEN"] = old
    return filed["id"]


def status(url: str, rid: str) -> dict:
    import rexrank

    return rexrank.submission_status(rid, leaderboard=url)


def worker(data_dir: Path, metrics: str, **options):
    from rexrank.backend.worker import Worker
    from rexrank.store import Quota, open_store

    # no weekly quota here: the ledger alone bounds the probes
    store = open_store("hf://rexrank", token=BOT, create=False, quota=Quota(0))
    return Worker(store, data_dir=data_dir, metrics=metrics, metric_options=options, worker_id="backend")


def run_all(w) -> None:
    while w.run(once=True):
        pass


def public_text(answer: dict) -> str:
    return json.dumps(answer, sort_keys=True)


# ---- (a) GREEN's length failures --------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_green(tmp_path_factory):
    from support.llm_tiny_models import build_tiny_llama
    from rexrank.metrics.green_text import prompt_template

    corpus = [prompt_template()] * 3 + [f"{SHORT_REF} {SHORT_PRED} Mild cardiomegaly."] * 3
    return build_tiny_llama(tmp_path_factory.mktemp("tiny_green"), corpus=corpus)


def prompt_length(judge: Path, reference: str, prediction: str) -> int:
    from transformers import AutoTokenizer

    from rexrank.metrics.green_text import make_prompt, render_model_input

    return len(AutoTokenizer.from_pretrained(judge)(render_model_input(make_prompt(reference, prediction)))["input_ids"])


def test_green_length_failures_do_not_answer_questions_about_a_private_reference(space, private_spec, tiny_green,
                                                                                 tmp_path):
    """The target's study fails (with its batch) exactly when its reference is long. The two
    probes, one per target, are answered alike; the probe where every study fails publishes
    no prompt length (it used to say "prompt is N tokens ... (16x)")."""
    findings = {f"RG{i:02d}": SHORT_REF for i in range(N_GREEN)}
    findings["RG00"] = LONG_REF  # the secret: RG00's reference is long, RG01's short
    data_dir = stand_in(tmp_path / "data", findings)
    probe = "Right basilar opacity, possibly atelectasis. " * 4
    short_len, long_len = prompt_length(tiny_green, SHORT_REF, probe), prompt_length(tiny_green, LONG_REF, probe)
    cap = (short_len + long_len) // 2  # the official 2,048 scaled to the tiny tokenizer
    assert prompt_length(tiny_green, SHORT_REF, SHORT_PRED) < short_len < cap <= long_len
    green = dict(model_path=str(tiny_green), max_length=cap, max_new_tokens=1, dtype="float32", cache=False,
                 progress=False)
    asked = {target: file_probe(space, PROBERS_TOKENS[0], {sid: (probe if sid == target else SHORT_PRED)
                                                           for sid in findings}, tmp_path, f"length-{target}")
             for target in ("RG00", "RG01")}
    everything_fails = file_probe(space, PROBERS_TOKENS[0], {sid: LONG_REF + probe for sid in findings}, tmp_path,
                                  "length-all")
    run_all(worker(data_dir, "green", green=green))
    answers = {target: status(space, rid) for target, rid in asked.items()}
    # today: RG00's probe FAILED "green scored 8 of 16 studies", RG01's FINISHED
    assert answers["RG00"]["request"]["status"] == answers["RG01"]["request"]["status"]
    everything = status(space, everything_fails)
    for answer in (*answers.values(), everything):
        text = public_text(answer)
        assert not re.search(r"\d+ tokens|scored \d+|of \d+ studies|\(\d+x\)", text), text
        for entry in (answer["results"] or {}).values():
            assert entry["n"] is None  # how many studies scored is not published
    assert everything["request"]["status"] in ("FINISHED", "FAILED")
    assert str(long_len) not in (everything["request"]["error"] or "")


# ---- (b) the findings track -----------------------------------------------------------------------

def test_leaving_out_a_study_does_not_say_whether_it_has_findings(space, private_spec, tmp_path, capsys):
    """RG03 has findings, RG05 has none. Leaving either out fails validation alike (against
    the set's full id list), and a complete probe publishes no count of studies outside the track."""
    from rexrank.store import open_store

    findings = {f"RG{i:02d}": f"Private finding {i}: an opacity in zone {i}, confidential." for i in range(10)}
    findings["RG05"] = findings["RG06"] = None
    data_dir = stand_in(tmp_path / "data", findings)
    everyone = {sid: "An opacity in the lower zone." for sid in findings}
    probes = {left_out: file_probe(space, token, {k: v for k, v in everyone.items() if k != left_out}, tmp_path,
                                   f"findings-{left_out}")
              for left_out, token in (("RG03", PROBERS_TOKENS[1]), ("RG05", PROBERS_TOKENS[2]))}
    complete = file_probe(space, PROBERS_TOKENS[3], everyone, tmp_path, "findings-complete")
    run_all(worker(data_dir, "bleu2"))
    with_findings, without = status(space, probes["RG03"]), status(space, probes["RG05"])
    # today: RG03's probe FAILED ("1 of 8 studies have no prediction"), RG05's FINISHED
    assert with_findings["request"]["status"] == without["request"]["status"] == "FAILED"
    assert with_findings["request"]["error"] == without["request"]["error"]
    assert "1 of 10 studies have no prediction" in without["request"]["error"]
    assert status(space, complete)["request"]["status"] == "FINISHED"
    from rexrank.cli.main import main

    assert main(["status", complete, "--leaderboard", space]) == 0
    printed = capsys.readouterr().out
    assert "bleu2" in printed and "(n=" not in printed  # no count of scored studies, not even "n=None"
    record = open_store("hf://rexrank", token=BOT, create=False).get_result(complete, test_set="rexgradient",
                                                                              track="findings")
    assert "n_not_in_track" not in record["provenance"]["predictions"]
    assert record["provenance"]["predictions"]["n"] == 10  # the submitter's own rows, not the track's 8
    assert "n_studies" not in record["provenance"]["test_set"]
    assert "n_studies_outside_track" not in record["provenance"]["test_set"]


# ---- (c) the ledger ------------------------------------------------------------------------------

def set_budget(total: float | None) -> None:
    from rexrank.store import open_store
    from rexrank.store import records as R
    from rexrank.store.repo import transact

    store = open_store("hf://rexrank", token=BOT, create=False)

    def decide(snap):
        data = store.requests.read_optional(snap, R.CONFIG_FILE)
        config = json.loads(data) if data else {}
        for key in ("privacy_budget", "metrics", "llm_metrics"):
            config.pop(key, None)
        if total is not None:  # and the metric set the filing check prices requests with
            config.update(privacy_budget={"rexgradient": total}, metrics=["bleu2"], llm_metrics=[])
        return {R.CONFIG_FILE: json.dumps(config).encode()}, "privacy budget", None

    transact(store.requests, decide)


def test_the_ledger_refuses_probes_beyond_the_budget(space, private_spec, tmp_path):
    """bleu2 alone: 2 numbers and the coverage decision, ε 1.5 a request. A budget of 4.5
    pays for three probes; the fourth is refused before scoring, saying only the budget's
    figures; another account has its own budget."""
    findings = {f"RG{i:02d}": f"Private finding {i}: an opacity in zone {i}, confidential." for i in range(10)}
    data_dir = stand_in(tmp_path / "data", findings)
    set_budget(4.5)
    try:
        ids = [file_probe(space, PROBERS_TOKENS[4], {sid: f"Opacity {k}." for sid in findings}, tmp_path, f"budget-{k}")
               for k in range(4)]
        other = file_probe(space, PROBERS_TOKENS[5], {sid: "Opacity." for sid in findings}, tmp_path, "budget-other")
        run_all(worker(data_dir, "bleu2"))
    finally:
        set_budget(None)
    answers = [status(space, rid)["request"] for rid in ids]
    assert [a["status"] for a in answers] == ["FINISHED"] * 3 + ["FAILED"]  # today: four FINISHED
    assert answers[3]["error"].startswith("refused: this request would spend ε 1.5 on rexgradient, and prober4 has "
                                          "spent 4.5 of its 4.5 in the last 365 days")
    assert status(space, other)["request"]["status"] == "FINISHED"


def _coverage_results(scored: int, n: int) -> dict:
    return {"test_set": {"n_studies": n}, "predictions": {"n": n},
            "metrics": {"green": {"n_studies": n, "n_scored": scored, "n_failed": n - scored, "failures": {},
                                  "provenance": {"config": {"length_cap": "2048 - padded width of the study's batch "
                                                                          "of 8 in input order (official)"}}}}}


def coverage_fails(worker, scored: int, n: int) -> bool:
    """The public outcome of a private request whose GREEN scored `scored` of `n` studies."""
    from rexrank.backend.worker import CoverageError

    try:
        worker.check_coverage(_coverage_results(scored, n), private=True)
    except CoverageError:
        return True
    return False


TRIALS = 1500  # per world


def test_the_length_probe_learns_no_more_than_epsilon_allows(tmp_path, monkeypatch):
    """The outcome of a private request, FINISHED or FAILED, is the length probe's only
    answer. At ReXGradient's size the prober puts the request where the coverage rule is a
    coin toss; the target's long reference fails its batch of 8. Over TRIALS requests in
    each world the prober, guessing "long" when FAILED, must be right no more often than
    e^ε / (1 + e^ε) with ε = EPSILON_DECISION (today's exact rule: every time)."""
    from scipy.stats import binom

    from rexrank.backend import privacy
    from rexrank.backend.worker import Worker
    from rexrank.store import open_store

    rng = np.random.default_rng(2028)  # the test's own seed; the worker's draws are secure
    monkeypatch.setattr(privacy, "secure_rng", lambda: rng)
    w = Worker(open_store(tmp_path / "s"), metrics="bleu2", worker_id="w")
    w.metrics = ["green"]
    n = 10_000
    # where the noisy rule passes half of the time (today: exactly at 99 %)
    short = math.ceil(0.99 * n - getattr(privacy, "COVERAGE_MARGIN", 0) * 8)
    right = (sum(not coverage_fails(w, short, n) for _ in range(TRIALS))
             + sum(coverage_fails(w, short - 8, n) for _ in range(TRIALS)))
    bound = math.exp(privacy.EPSILON) / (1 + math.exp(privacy.EPSILON))
    p_value = binom.sf(right - 1, 2 * TRIALS, bound)  # P(X >= right) under the bound
    assert p_value > 1e-3, f"the probe was right {right} of {2 * TRIALS} times; the bound is {bound:.3f}"
    assert right > TRIALS  # and the rule is not a coin that ignores coverage


PROBERS_TOKENS = list(PROBERS)


def test_the_probes_the_ledger_allows_learn_no_more_than_their_epsilon(tmp_path, monkeypatch):
    """As many length probes as the ledger pays for (a budget of 4.5 at ε 1.5 a request: 3),
    each answered by the worker's coverage rule at its coin-toss point; the prober takes the
    majority of the answers. Any test on three answers of ε 0.5 each is right with
    probability at most e^1.5 / (1 + e^1.5) ≈ 0.82; checked over TRIALS runs per world."""
    from scipy.stats import binom

    from rexrank.backend import privacy
    from rexrank.backend.worker import Worker
    from rexrank.store import ledger, open_store

    rng = np.random.default_rng(2029)
    monkeypatch.setattr(privacy, "secure_rng", lambda: rng)
    store = open_store(tmp_path / "s")
    w = Worker(store, metrics="bleu2", worker_id="w")
    w.metrics = ["green"]
    limit = ledger.Budget(4.5, 365)
    allowed = 0
    while ledger.charge(store, {"id": f"20260101T000000.000000-{allowed:010d}", "submitter": "prober",
                                "test_set": "rexgradient"}, cost=1.5, numbers=2, decisions=1, limit=limit) is None:
        allowed += 1
    assert allowed == 3
    n = 10_000
    short = math.ceil(0.99 * n - getattr(privacy, "COVERAGE_MARGIN", 0) * 8)

    def says_long(scored: int) -> bool:
        return sum(coverage_fails(w, scored, n) for _ in range(allowed)) * 2 > allowed

    trials = 600
    right = sum(not says_long(short) for _ in range(trials)) + sum(says_long(short - 8) for _ in range(trials))
    bound = math.exp(allowed * privacy.EPSILON) / (1 + math.exp(allowed * privacy.EPSILON))
    assert binom.sf(right - 1, 2 * trials, bound) > 1e-3, f"right {right} of {2 * trials}; the bound is {bound:.3f}"
    print(f"{allowed} probes, majority right {right / (2 * trials):.3f} (bound {bound:.3f})")


@pytest.mark.parametrize("damage", [b"{not json", b"[1, 2]", b'{"charges": [1]}'])
def test_a_damaged_ledger_stops_the_charge_and_says_how_to_restore_it(tmp_path, damage):
    from rexrank.store import ledger, open_store
    from rexrank.store.repo import StoreError

    store = open_store(tmp_path / "s")
    request = {"id": "20260101T000000.000000-0000000001", "submitter": "alice", "test_set": "rexgradient"}
    assert ledger.charge(store, request, cost=1.5, numbers=2, decisions=1, limit=ledger.Budget(10, 365)) is None
    [written] = [p for p in (tmp_path / "s").rglob("*.json") if p.as_posix().endswith(ledger.ledger_path("alice", "rexgradient"))]
    written.write_bytes(damage)
    with pytest.raises(StoreError, match=r"ledger file .* is damaged; the backend refuses to score on it until it is restored"):
        ledger.charges(store, "alice", "rexgradient")
