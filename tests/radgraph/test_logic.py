"""RadGraph preprocessing and scoring rules (no model): checked against the official
regex / NLTK as oracles and against hand-computed cases."""
from __future__ import annotations

import random
import re

import pytest

from rexrank.radgraph import f1
from rexrank.radgraph.preprocess import normalize_radgraph_xl, reader_word, tokenize_radgraph, tokenize_radgraph_xl, words_for
from rexrank.errors import MetricError

# The official pattern, verbatim from radgraph 0.1.18 utils.preprocess_reports and
# CXR-Report-Metric radgraph_inference/inference.py: used here as the oracle only.
OFFICIAL_RADGRAPH_PATTERN = "(?<! )(?=[/,-,:,.,!?()])|(?<=[/,-,:,.,!?()])(?! )"


def official_radgraph_words(text: str) -> list[str]:
    return re.sub(OFFICIAL_RADGRAPH_PATTERN, r" ", text).split()


def _random_reports(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    alphabet = "ab cd-/,:.!?()%'\"\t\n\\n1 2"
    pieces = ["effusion", "no", "left-sided", "5.2", "cm", "(stable)", "2/3", "%", "\\n", "\\f", "\\u2122", '\\"', "''", ").", "%."]
    out = []
    for _ in range(n):
        out.append("".join(rng.choice(pieces + list(alphabet)) + rng.choice(["", " ", "  "]) for _ in range(rng.randint(0, 25))))
    return out


def test_radgraph_split_matches_official_regex():
    for text in _random_reports(2000) + ["No pneumothorax.Heart size normal (stable), 2/3:ok!", "a - b", "x\t.y"]:
        assert tokenize_radgraph(text) == official_radgraph_words(text), text


def test_radgraph_split_examples():
    # the hyphen is not in the official class ([/,-,:,...] has a ',-,' range)
    assert tokenize_radgraph("Well-defined opacity, left base.") == ["Well-defined", "opacity", ",", "left", "base", "."]
    assert tokenize_radgraph("1.5 cm (stable)") == ["1", ".", "5", "cm", "(", "stable", ")"]
    # no lower-casing
    assert tokenize_radgraph("No Effusion") == ["No", "Effusion"]
    assert tokenize_radgraph("") == [] and tokenize_radgraph(" \n\t") == []


def test_radgraph_xl_matches_nltk_pipeline():
    nltk_tokenize = pytest.importorskip("nltk.tokenize")

    def official(text: str) -> str:  # radgraph 0.1.18 radgraph_xl_preprocess_report, re-stated as the oracle
        text = text.replace("\\n", "  ").replace("\\f", "  ").replace("\\u2122", "      ").replace("\n", " ").replace('\\"', "``")
        out = " ".join(nltk_tokenize.wordpunct_tokenize(re.sub(r"\s+", " ", text)))
        for a, b in ((").", ") ."), ("%.", "% ."), (".'", ". '"), ("%,", "% ,"), ("%)", "% )")):
            out = out.replace(a, b)
        return out

    for text in _random_reports(2000, seed=1):
        assert normalize_radgraph_xl(text) == official(text), text


def test_radgraph_xl_examples():
    assert tokenize_radgraph_xl("Left-sided effusion (5%).") == ["Left", "-", "sided", "effusion", "(", "5", "%", ")", "."]
    assert tokenize_radgraph_xl("a\\nb") == ["a", "b"]
    assert tokenize_radgraph_xl('say \\"x\\"') == ["say", "``", "x", "``"]


def test_words_for_rejects_unknown_type():
    assert words_for("no acute process", "radgraph") == ["no", "acute", "process"]
    with pytest.raises(MetricError, match="unsupported model_type 'echograph'"):
        words_for("x", "echograph")


def test_reader_word_normalisation():
    assert [reader_word(w) for w in ["/.", "/?", "/", "a/."]] == [".", "?", "/", "a/."]


# --- scores ------------------------------------------------------------------------


def ann(*entities):
    """entities: (tokens, label, [(relation, target number), ...])"""
    return {
        "text": "",
        "entities": {
            str(i): {"tokens": t, "label": l, "start_ix": 0, "end_ix": 0, "relations": [[r, str(n)] for r, n in rels]}
            for i, (t, l, rels) in enumerate(entities, start=1)
        },
    }


HERNIA = ann(  # radgraph 0.1.18 tests/radgraph_test.py golden annotation (model_type="radgraph")
    ("acute", "OBS-DA", []),
    ("cardiopulmonary", "ANAT-DP", []),
    ("process", "OBS-DA", [("located_at", 2)]),
    ("moderate", "OBS-DP", []),
    ("hiatal", "ANAT-DP", []),
    ("hernia", "OBS-DP", []),
)


def test_sets_from_annotation():
    assert f1.entity_set(HERNIA) == {
        ("acute", "OBS-DA"), ("cardiopulmonary", "ANAT-DP"), ("process", "OBS-DA"),
        ("moderate", "OBS-DP"), ("hiatal", "ANAT-DP"), ("hernia", "OBS-DP"),
    }
    assert f1.relation_set(HERNIA) == {(("process", "OBS-DA"), ("cardiopulmonary", "ANAT-DP"), "located_at")}


def test_combined_hand_cases():
    empty = ann()
    assert f1.combined(empty, empty) == (0.0, 0.0, 0.0)  # both empty -> 0, not 1
    assert f1.combined(HERNIA, HERNIA) == (1.0, 1.0, 1.0)
    # prediction: 2 of the 6 entities plus one wrong; no relation
    pred = ann(("acute", "OBS-DA", []), ("hernia", "OBS-DP", []), ("effusion", "OBS-DP", []))
    # P = 2/3, R = 2/6 -> F1 = 2 * (2/3)(1/3) / (1) = 4/9; relation F1 = 0 (P = 0 as no predicted relations)
    ent, rel, comb = f1.combined(pred, HERNIA)
    assert ent == pytest.approx(4 / 9) and rel == 0.0 and comb == pytest.approx(2 / 9)
    # case and label both matter
    assert f1.combined(ann(("Acute", "OBS-DA", [])), ann(("acute", "OBS-DA", [])))[0] == 0.0
    assert f1.combined(ann(("acute", "OBS-DP", [])), ann(("acute", "OBS-DA", [])))[0] == 0.0
    # duplicates collapse (sets)
    assert f1.combined(ann(("acute", "OBS-DA", []), ("acute", "OBS-DA", [])), ann(("acute", "OBS-DA", [])))[0] == 1.0


def test_combined_relation_needs_both_ends_and_label():
    ref = ann(("effusion", "OBS-DP", [("located_at", 2)]), ("left", "ANAT-DP", []))
    same = ann(("left", "ANAT-DP", []), ("effusion", "OBS-DP", [("located_at", 1)]))  # numbering differs: irrelevant
    other_target = ann(("effusion", "OBS-DP", [("located_at", 2)]), ("right", "ANAT-DP", []))
    other_rel = ann(("effusion", "OBS-DP", [("modify", 2)]), ("left", "ANAT-DP", []))
    assert f1.combined(same, ref) == (1.0, 1.0, 1.0)
    assert f1.combined(other_target, ref)[1] == 0.0
    assert f1.combined(other_rel, ref) == (1.0, 0.0, 0.5)


def test_rewards_zero_when_a_side_has_no_entity():
    assert f1.rewards(ann(), HERNIA) == (0.0, 0.0, 0.0)
    assert f1.rewards(HERNIA, ann()) == (0.0, 0.0, 0.0)
    assert f1.rewards(HERNIA, HERNIA) == (1.0, 1.0, 1.0)  # upstream golden pair 1 (identical) = 1.0


def test_reward_levels_hand_case():
    ref = HERNIA
    # hypothesis: process without its relation, everything else identical
    hyp = ann(
        ("acute", "OBS-DA", []), ("cardiopulmonary", "ANAT-DP", []), ("process", "OBS-DA", []),
        ("moderate", "OBS-DP", []), ("hiatal", "ANAT-DP", []), ("hernia", "OBS-DP", []),
    )
    simple, partial, complete = f1.rewards(hyp, ref)
    assert simple == 1.0
    # partial: ref has ("process","OBS-DA",True); hyp has ("process","OBS-DA"): 5/6 each way
    assert partial == pytest.approx(5 / 6)
    # complete: ref has 5 plain + ("process","OBS-DA","located_at","cardiopulmonary"); hyp 6 plain -> 5/6, 5/6
    assert complete == pytest.approx(5 / 6)


def test_complete_lowercases_relation_tuples_only():
    # 0.1.18: entities with relations are compared lower-cased, entities without are not
    ref = ann(("Effusion", "OBS-DP", [("located_at", 2)]), ("Left", "ANAT-DP", []))
    hyp = ann(("effusion", "OBS-DP", [("located_at", 2)]), ("left", "ANAT-DP", []))
    simple, partial, complete = f1.rewards(hyp, ref)
    assert simple == 0.0 and partial == 0.0
    # relation tuple matches after lower-casing; ("Left",..) vs ("left",..) does not: P = R = 1/2
    assert complete == pytest.approx(0.5)


def test_complete_keeps_each_relation_apart_by_its_target():
    # same source entity, different targets: no relation tuple is shared; the unrelated
    # targets ("left" / "right") differ too, so nothing matches at the complete level
    ref = ann(("effusion", "OBS-DP", [("located_at", 2)]), ("left", "ANAT-DP", []))
    hyp = ann(("effusion", "OBS-DP", [("located_at", 2)]), ("right", "ANAT-DP", []))
    simple, partial, complete = f1.rewards(hyp, ref)
    # simple: {effusion, left} vs {effusion, right}: P = R = 1/2
    assert simple == pytest.approx(0.5) and partial == pytest.approx(0.5)
    assert complete == 0.0


def test_complete_compares_relation_tuples_lower_cased_not_upper_cased():
    # 0.1.18 applies str.lower(): "Maß" -> "maß" differs from "mass", though both upper-case to "MASS"
    ref = ann(("Maß", "OBS-DP", [("located_at", 2)]), ("lung", "ANAT-DP", []))
    hyp = ann(("mass", "OBS-DP", [("located_at", 2)]), ("lung", "ANAT-DP", []))
    # complete: {("maß", ..., "lung"), ("lung", ...)} vs {("mass", ..., "lung"), ("lung", ...)}: P = R = 1/2
    assert f1.rewards(hyp, ref)[2] == pytest.approx(0.5)
    # the same on the relation's target
    ref = ann(("opacity", "OBS-DP", [("located_at", 2)]), ("Maß", "ANAT-DP", []))
    hyp = ann(("opacity", "OBS-DP", [("located_at", 2)]), ("Maß", "ANAT-DP", []))
    hyp["entities"]["2"]["tokens"] = "MASS"
    # target "maß" vs "mass": the relation tuples differ, and so do the plain targets ("Maß" / "MASS")
    assert f1.rewards(hyp, ref)[2] == 0.0


def test_reward_f1_of_an_empty_side_is_zero_as_radgraph_rewards():
    # rewards.py: precision is 0 without hypothesis items, recall 0 without reference items
    assert f1._reward_f1([], [("acute", "OBS-DA")]) == 0.0
    assert f1._reward_f1([("acute", "OBS-DA")], []) == 0.0
    assert f1._reward_f1([], []) == 0.0
