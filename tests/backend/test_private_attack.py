"""The boundary attack on a private test set's published means (issue 20.2).

Predictions empty except the first k: a binary search on k puts the published (rounded)
mean on a rounding boundary; one more submission with a guess for one chosen study then
says whether that study's score crosses the threshold, i.e. whether the guess matches its
reference. With rounding alone this answers with certainty; with the Laplace noise of
rexrank.backend.privacy it may do no better than ε allows: right with probability at
most e^ε / (1 + e^ε) per published number it reads.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from rexrank.backend import privacy
from rexrank.backend.worker import Worker
from rexrank.metrics.registry import get_metric
from rexrank.stats import aggregate
from rexrank.store import Quota, open_store
from support.backend_fixtures import private_set, test_metrics  # noqa: F401 (fixtures)
from support.backend_fixtures import N, NoNoise, big_private_set  # noqa: F401 (fixture)
from support.requests import submit, write_jsonl

FILLER = "An opacity in the lower zone, unchanged since the last study."  # scores > 0 on every study
WRONG = "Heart size is normal. No pleural effusion or pneumothorax."


class Oracle:
    """What a private test set publishes for one submission: the predictions are FILLER for
    the first k studies, `guess` for the target (the last study) and empty elsewhere."""

    def __init__(self, studies: dict, guesses: dict[str, str]):
        self.ids = sorted(studies)
        self.target = self.ids[-1]
        refs = [studies[sid]["section_findings"] for sid in self.ids]
        bleu = get_metric("bleu2")
        self.filler = np.array(bleu.score([FILLER] * len(refs), refs).per_study["bleu2"])
        self.empty = np.array(bleu.score([""] * len(refs), refs).per_study["bleu2"])
        self.guess = {label: bleu.score([text], refs[-1:]).per_study["bleu2"][0] for label, text in guesses.items()}
        self.guesses = guesses

    def predictions(self, k: int, guess: str | None) -> dict[str, str]:
        preds = {sid: (FILLER if i < k else "") for i, sid in enumerate(self.ids)}
        if guess is not None:
            preds[self.target] = self.guesses[guess]
        return preds

    def per_study(self, k: int, guess: str | None) -> np.ndarray:
        scores = np.where(np.arange(len(self.ids)) < k, self.filler, self.empty)
        if guess is not None:
            scores[-1] = self.guess[guess]
        return scores

    def publish(self, k: int, guess: str | None, rng) -> float:
        """The worker's publication of these scores (rexrank.scoring's summary, then privacy)."""
        summary = aggregate(self.per_study(k, guess)).to_dict()
        results = {"test_set": {"n_studies": len(self.ids)}, "predictions": {"n": len(self.ids)},
                   "metrics": {"bleu2": {"scores": {"bleu2": summary}, "higher_is_better": True}}}
        return privacy.private_results(results, rng=rng)["metrics"]["bleu2"]["scores"]["bleu2"]["mean"]


def boundary_attack(ask, n: int) -> bool:
    """The attacker: True = "my guess matches the target's reference". `ask(k, guess)` is
    one submission's published mean."""
    base = ask(0, None)
    low, high = 0, n - 1  # smallest k whose published mean is above the base
    while low < high:
        mid = (low + high) // 2
        if ask(mid, None) > base:
            high = mid
        else:
            low = mid + 1
    return ask(max(low - 1, 0), "guess") > base


def binomial_tail(successes: int, trials: int, p: float) -> float:
    """P(X >= successes) for X ~ Binomial(trials, p)."""
    return sum(math.comb(trials, i) * p**i * (1 - p) ** (trials - i) for i in range(successes, trials + 1))


@pytest.fixture
def oracle(big_private_set):
    _, studies = big_private_set
    target_ref = studies[sorted(studies)[-1]]["section_findings"]
    return Oracle(studies, {"right": target_ref, "wrong": WRONG})


def test_the_oracle_is_what_the_worker_publishes(tmp_path, big_private_set, oracle, monkeypatch):
    """The fast oracle below publishes exactly what the backend does for the same
    predictions and the same noise draws (one submission through a store without quota)."""
    data_dir, _ = big_private_set
    store = open_store(tmp_path / "s", quota=Quota(0))
    for seed, (k, guess) in enumerate([(0, None), (400, "right"), (999, "wrong")]):
        monkeypatch.setattr(privacy, "secure_rng", lambda seed=seed: np.random.default_rng(seed))
        req = submit(store, write_jsonl(tmp_path / f"{seed}.jsonl", oracle.predictions(k, guess)),
                     test_set="rexgradient", model_name=f"probe-{seed}")
        Worker(store, data_dir=data_dir, metrics="bleu2", worker_id="w").run(once=True)
        published = store.get_result(req["id"])["values"]["bleu2"]["mean"]
        assert published == oracle.publish(k, guess, np.random.default_rng(seed))


def test_rounding_alone_answers_the_attack_with_certainty(tmp_path, big_private_set, oracle, monkeypatch):
    """The attack, through the store and the worker, with the noise taken out: it learns
    whether each guess is right, every time (what the trial found: 12 of 12 facts)."""
    data_dir, _ = big_private_set
    monkeypatch.setattr(privacy, "secure_rng", NoNoise)
    store = open_store(tmp_path / "s", quota=Quota(0))
    asked = []

    def ask(k, guess, label):
        req = submit(store, write_jsonl(tmp_path / "p.jsonl", oracle.predictions(k, guess and label)),
                     test_set="rexgradient", model_name=f"probe-{len(asked)}")
        asked.append(req["id"])
        Worker(store, data_dir=data_dir, metrics="bleu2", worker_id="w").run(once=True)
        return store.get_result(req["id"])["values"]["bleu2"]["mean"]

    assert boundary_attack(lambda k, g: ask(k, g, "right"), N) is True
    assert boundary_attack(lambda k, g: ask(k, g, "wrong"), N) is False
    assert len(asked) <= 2 * 12  # a dozen submissions a fact


TRIALS = 300  # per world


def test_the_boundary_attack_does_no_better_than_epsilon_allows(oracle):
    """The same attack against the noisy publication, TRIALS times in each world (the guess
    right, the guess wrong). The attacker reads one published mean about the target, so
    no strategy is right with probability above p = e^ε / (1 + e^ε) (≈ 0.62 at ε = 0.5).
    The test fails if the observed successes would have probability below 1e-3 under p:
    today's rounding alone is right 600 times of 600 (probability ~1e-125)."""
    rng = np.random.default_rng(2026)  # seeded here so the test is repeatable; the worker's is secure
    right = sum(boundary_attack(lambda k, g: oracle.publish(k, g and "right", rng), N) for _ in range(TRIALS))
    wrong = sum(not boundary_attack(lambda k, g: oracle.publish(k, g and "wrong", rng), N) for _ in range(TRIALS))
    bound = math.exp(privacy.EPSILON) / (1 + math.exp(privacy.EPSILON))
    p_value = binomial_tail(right + wrong, 2 * TRIALS, bound)
    assert p_value > 1e-3, f"attack right {right + wrong} of {2 * TRIALS}; the bound is {bound:.3f}"
    assert oracle.guess["right"] == 1.0 and oracle.guess["wrong"] < 0.1  # the two worlds differ by ~1 / N


def test_the_noise_is_calibrated_and_unpredictable(monkeypatch):
    # b = Δ / ε: Δ = 1 / n for a [0, 1] mean and 1.96 / √(n (n − 1)) for its CI (hand-derived)
    assert privacy.noise_scale("bleu2", 10_000) == pytest.approx({"mean": 1e-4 / 0.5, "ci95": 1.96 / math.sqrt(10_000 * 9_999) / 0.5})
    assert privacy.noise_scale("bertscore", 590)["mean"] == pytest.approx(2 / 590 / 0.5)
    for column in ("bleu2", "bertscore", "sembscore", "radgraph", "ratescore", "green"):
        assert privacy.noise_scale(column, 10_000)["mean"] < 1e-3  # below ReXrank's 3 displayed decimals
    seeds = []
    privacy.secure_rng()  # a first call may import what draws its own bits (mutmut's switch does): not counted
    real = privacy.secrets.randbits
    monkeypatch.setattr(privacy.secrets, "randbits", lambda k: seeds.append(k) or real(k))
    draws = {privacy.secure_rng().laplace(0, 1) for _ in range(5)}
    assert seeds == [128] * 5 and len(draws) == 5  # a fresh 128-bit seed from `secrets` each time
    # the published numbers differ from one identical submission to the next
    results = {"test_set": {"n_studies": 590}, "predictions": {"n": 590},
               "metrics": {"bleu2": {"scores": {"bleu2": {"n": 590, "n_missing": 0, "mean": 0.2, "ci95": 0.02}}}}}
    published = {tuple(privacy.private_results(results)["metrics"]["bleu2"]["scores"]["bleu2"].values())
                 for _ in range(40)}
    assert len(published) > 1


def test_organisers_can_restrict_a_private_set_to_approved_submitters(tmp_path, private_set, monkeypatch):
    """As ReXrank's own process: a list in the store's config; the client refuses others when
    filing, and the backend again before scoring (a client that skips the check gains nothing)."""
    import json

    import rexrank.store.store as store_module
    from rexrank.errors import SubmissionError
    from rexrank.store import FINISHED
    from rexrank.store.records import REFUSED

    data_dir, preds = private_set
    store = open_store(tmp_path / "s", quota=Quota(0))
    config = tmp_path / "s" / "requests" / "config.json"
    config.write_text(json.dumps({"approved_submitters": {"rexgradient": ["Stanford-AIMI", "alice"]}}))
    with pytest.raises(SubmissionError) as caught:
        submit(store, preds, test_set="rexgradient", submitter="mallory")
    assert str(caught.value) == ("test set rexgradient accepts submissions only from submitters approved by its "
                                 "organisers, and 'mallory' is not one of them; ask the organisers to be added")
    assert submit(store, model_name="other", submitter="mallory")  # other test sets stay open
    with monkeypatch.context() as m:
        m.setattr(store_module.Store, "check_approval", lambda *a, **k: None)
        sneaked = submit(store, preds, test_set="rexgradient", submitter="mallory", model_name="m-sneak")
    ids = [json.loads(line)["id"] for line in preds.read_text().splitlines()]
    own = write_jsonl(tmp_path / "own.jsonl", dict.fromkeys(ids, "Their own prediction."))  # not mallory's copy
    approved = submit(store, own, test_set="rexgradient", submitter="stanford-aimi", model_name="m-ok")
    for _ in range(3):
        Worker(store, data_dir=data_dir, metrics="bleu2", worker_id="w").run(once=True)
    refused = store.get_request(sneaked["id"])
    assert refused["failure_kind"] == REFUSED and "'mallory' is not one of them" in refused["error"]
    assert store.get_request(approved["id"])["status"] == FINISHED
    config.write_text(json.dumps({"approved_submitters": ["alice"]}))
    with pytest.raises(Exception, match="approved_submitters must be an object mapping test set names"):
        submit(store, preds, test_set="rexgradient", submitter="alice", model_name="m-2")
