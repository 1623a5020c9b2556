"""RaTEScore building blocks without models: span decoding, affinity matrices, the
matching score, sentence splitting."""
from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from support.paths import shared_path
from rexrank.errors import MetricError
from rexrank.ratescore.affinity import ENTITY_TYPES, LONG, SHORT, load_affinity
from rexrank.ratescore.match import directional_score, rate_score
from rexrank.ratescore.sentences import get_splitter, keep, split_regex
from rexrank.ratescore.spans import decode_spans

C, S = "[CLS]", "[SEP]"


def spans(labels, tokens=None):
    tokens = tokens or [C] + [f"t{i}" for i in range(1, len(labels) - 1)] + [S]
    return decode_spans(tokens, labels)


# --- span decoder: one test per official rule (reference metrics_nonllm.md §6 step 3) ---
def test_b_then_i_then_o_is_one_span():
    assert spans(["O", "B-DISEASE", "I-DISEASE", "I-DISEASE", "O", "O"]) == [(1, 3, "DISEASE")]


def test_b_then_o_is_a_single_token_span():
    assert spans(["O", "O", "B-ANATOMY", "O", "O"]) == [(2, 2, "ANATOMY")]


def test_b_then_b_emits_first_and_keeps_going():
    # B B O: both single-token spans, typed by their own labels
    assert spans(["O", "B-ANATOMY", "B-DISEASE", "O", "O"]) == [(1, 1, "ANATOMY"), (2, 2, "DISEASE")]


def test_i_then_b_closes_span_and_opens_one_at_the_i_token():
    # B I I B O: span 1..3 closed at the I; the I token opens a span that the B overwrites
    assert spans(["O", "B-ABNORMALITY", "I-ABNORMALITY", "I-ABNORMALITY", "B-ANATOMY", "O", "O"]) == [
        (1, 3, "ABNORMALITY"),
        (4, 4, "ANATOMY"),
    ]


def test_orphan_i_is_ignored():
    assert spans(["O", "O", "I-DISEASE", "I-DISEASE", "O", "O"]) == []


def test_orphan_i_before_b_opens_a_span_typed_by_the_i():
    # I B I O: no span closed at the I (start unset), the B->I then restarts at the B
    assert spans(["O", "I-ANATOMY", "B-DISEASE", "I-DISEASE", "O", "O"]) == [(2, 3, "DISEASE")]


def test_span_running_into_sep_is_closed_at_the_last_word_token():
    # the look-ahead of the last word token is the label predicted at [SEP]
    assert spans(["O", "O", "B-DISEASE", "I-DISEASE", "I-DISEASE"]) == [(2, 3, "DISEASE")]


def test_span_open_at_end_is_dropped_when_end_is_stale():
    # official quirk: after B->B, `end` keeps its value, so the span B(3)->I(4)->[SEP]
    # is never emitted by the end-of-sentence rule
    assert spans(["O", "B-ANATOMY", "B-DISEASE", "I-DISEASE", "I-DISEASE"]) == [(1, 1, "ANATOMY")]


def test_special_tokens_are_skipped_but_count_as_positions():
    # a B at [CLS] is ignored; the label at [SEP] is still a look-ahead (B -> B emits)
    assert spans(["B-DISEASE", "B-ANATOMY", "B-ANATOMY"]) == [(1, 1, "ANATOMY")]


def test_last_label_is_never_acted_on():
    # tokens without special tokens: the final position has no look-ahead
    assert decode_spans(["a", "b"], ["O", "B-DISEASE"]) == []


# --- affinity matrices ---
def _markdown_matrix(text: str, heading: str):
    """The 5x5 table and neg_weight that follow `heading` in the reference document."""
    block = text[text.index(heading) :]
    rows = re.findall(r"^\| (abnormality|anatomy|disease|non-abnormality|non-disease) \|(.*)\|\s*$", block, re.M)[:5]
    neg = float(re.search(r"`neg_weight = ([0-9.]+)`", block).group(1))
    return {name.upper(): [float(x) for x in cells.split("|")] for name, cells in rows}, neg


@pytest.mark.parametrize("matrix, heading", [(LONG, 'Default affinity matrix "long"'), (SHORT, 'Matrix "short"')])
def test_builtin_matrices_equal_the_reference_tables(matrix, heading):
    text = shared_path("reference", "metrics_nonllm.md").read_text(encoding="utf-8")
    table, neg = _markdown_matrix(text, heading)
    assert sorted(table) == sorted(ENTITY_TYPES)
    for row, values in table.items():
        for col, value in zip(ENTITY_TYPES, values):
            assert matrix.weights[(row, col)] == value, (row, col)
    assert matrix.neg_weight == neg


def test_json_matrix_in_the_official_key_format(tmp_path):
    path = tmp_path / "w.json"
    data = {f"{a.lower()}_{b.lower()}": 0.25 for a in ENTITY_TYPES for b in ENTITY_TYPES}
    data["neg_weight"] = 0.5
    path.write_text(json.dumps(data))
    matrix = load_affinity(str(path))
    assert matrix.weight("NON-DISEASE", "ANATOMY") == 0.25 and matrix.neg_weight == 0.5
    assert load_affinity("LONG") is LONG


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.pop("neg_weight"), "neg_weight"),
        (lambda d: d.pop("anatomy_disease"), "lacks 1 pair"),
        (lambda d: d.update({"anatomy-disease": 1.0}), "is not '<row type>_<column type>'"),
        (lambda d: d.update({"anatomy_disease": "high"}), "finite number"),
    ],
)
def test_bad_json_matrix_is_a_clear_error(tmp_path, mutate, message):
    data = {f"{a.lower()}_{b.lower()}": 0.25 for a in ENTITY_TYPES for b in ENTITY_TYPES}
    data["neg_weight"] = 0.5
    mutate(data)
    path = tmp_path / "w.json"
    path.write_text(json.dumps(data))
    with pytest.raises(MetricError, match=message):
        load_affinity(str(path))


def test_unknown_matrix_name_is_an_error():
    with pytest.raises(MetricError, match="neither 'long', 'short'"):
        load_affinity("medium")


# --- the matching score, against hand computations ---
def test_directional_score_by_hand():
    # A: a1=(1,0) DISEASE, a2=(0,2) ANATOMY; B: b1=(1,1) ANATOMY, b2=(3,0) NON-DISEASE
    a = np.array([[1.0, 0.0], [0.0, 2.0]])
    b = np.array([[1.0, 1.0], [3.0, 0.0]])
    # a1: cos with b1 = 1/sqrt2, with b2 = 1 -> b2 (NON-DISEASE): negation pair
    # a2: cos with b1 = 1/sqrt2, with b2 = 0 -> b1 (ANATOMY)
    w1, w2 = 0.3789136708096537, 0.2856134859160784  # LONG[DISEASE, NON-DISEASE], LONG[ANATOMY, ANATOMY]
    expected = (1.0 * w1 * 0.8716553966489615 + (1 / math.sqrt(2)) * w2 * 1.0) / (w1 + w2)
    got = directional_score(a, b, ["DISEASE", "ANATOMY"], ["ANATOMY", "NON-DISEASE"], LONG)
    assert got == pytest.approx(expected, rel=1e-12)


def test_rate_score_is_the_harmonic_mean_of_both_directions():
    pred = np.array([[1.0, 0.0], [0.0, 2.0]])
    ref = np.array([[1.0, 1.0], [3.0, 0.0]])
    p_types, r_types = ["DISEASE", "ANATOMY"], ["ANATOMY", "NON-DISEASE"]
    # ref -> pred: r1=(1,1) ties (cos 1/sqrt2 with both) -> first, p1 DISEASE;
    #              r2=(3,0) -> p1 (cos 1), NON-DISEASE -> DISEASE is a negation pair
    w_ad, w_nd = 0.4592143222158069, 0.10073046076318157  # LONG[ANATOMY, DISEASE], LONG[NON-DISEASE, DISEASE]
    ref_to_pred = ((1 / math.sqrt(2)) * w_ad + 1.0 * w_nd * 0.8716553966489615) / (w_ad + w_nd)
    pred_to_ref = directional_score(pred, ref, p_types, r_types, LONG)
    expected = 2 * ref_to_pred * pred_to_ref / (ref_to_pred + pred_to_ref)
    assert directional_score(ref, pred, r_types, p_types, LONG) == pytest.approx(ref_to_pred, rel=1e-12)
    assert rate_score(pred, p_types, ref, r_types, LONG) == pytest.approx(expected, rel=1e-12)


def test_no_entities_on_either_side_scores_one_half():
    some = np.ones((1, 3))
    none = np.zeros((0, 3))
    assert rate_score(none, [], some, ["DISEASE"], LONG) == 0.5
    assert rate_score(some, ["DISEASE"], none, [], LONG) == 0.5
    assert rate_score(none, [], none, [], LONG) == 0.5


def test_orthogonal_entities_score_zero():
    assert rate_score(np.array([[1.0, 0.0]]), ["DISEASE"], np.array([[0.0, 1.0]]), ["DISEASE"], LONG) == 0.0


# --- sentence splitting: the earlier "regex" splitter (the default "pyrush" one is in
# tests/ratescore/test_sentences.py) ---
# Expected outputs below are what medspaCy 1.3.1 / PyRuSH 1.0.13 produced for these
# (made-up) reports, after the official strip / length filter.
@pytest.mark.parametrize(
    "text, expected",
    [
        ("Heart size is normal. Lungs are clear. No pneumothorax.", ["Heart size is normal.", "Lungs are clear.", "No pneumothorax."]),
        ("1. Mild cardiomegaly. 2. Small left effusion.", ["Mild cardiomegaly.", "2. Small left effusion."]),
        ("Impression: 1. Mild cardiomegaly. 2. Small left effusion.", ["Impression: 1.", "Mild cardiomegaly.", "2. Small left effusion."]),
        ("No effusion. .", ["No effusion."]),
        ("Nodule measures 3.5 mm. Stable.", ["Nodule measures 3.5 mm.", "Stable."]),
        ("Is there effusion? No effusion!", ["Is there effusion?", "No effusion!"]),
        ("Heart normal\nLungs clear.", ["Heart normal", "Lungs clear."]),
        ("FINDINGS:\nHeart normal. Lungs clear.\n\nIMPRESSION:\nNo acute process.", ["FINDINGS:", "Heart normal.", "Lungs clear.", "IMPRESSION:", "No acute process."]),
        ("Heart is normal in size and\ncontour. Lungs clear.", ["Heart is normal in size and\ncontour.", "Lungs clear."]),
        ("No effusion.  Heart normal.", ["No effusion.", "Heart normal."]),
        ("", []),
        ("ok", []),
    ],
)
def test_regex_splitter_matches_pyrush_on_simple_reports(text, expected):
    assert get_splitter("regex")(text) == expected


def test_regex_splitter_keeps_the_original_text():
    # merged pieces keep their original whitespace
    assert split_regex("No effusion..  Heart normal.") == ["No effusion..  Heart normal."]
    assert split_regex("A b.  C d.") == ["A b.", "C d."]


def test_keep_is_the_official_filter():
    assert keep(["  ab ", " abc ", "\n\n", "a."]) == ["abc"]


def test_unknown_splitter():
    with pytest.raises(ValueError, match="unknown sentence splitter"):
        get_splitter("nltk")


# --- the affinity matrices' API and refusals, word for word ---
NEGATION = {("NON-DISEASE", "DISEASE"), ("NON-ABNORMALITY", "ABNORMALITY"), ("DISEASE", "NON-DISEASE"),
            ("ABNORMALITY", "NON-ABNORMALITY"), ("NON-DISEASE", "ABNORMALITY"), ("NON-ABNORMALITY", "DISEASE"),
            ("DISEASE", "NON-ABNORMALITY"), ("ABNORMALITY", "NON-DISEASE")}  # reference §6 step 5


def _official_keys(value=0.25):
    return {f"{a.lower()}_{b.lower()}": value for a in ENTITY_TYPES for b in ENTITY_TYPES}


def test_penalty_is_neg_weight_exactly_on_the_eight_polarity_flips():
    for a in ENTITY_TYPES:
        for b in ENTITY_TYPES:
            assert LONG.penalty(a, b) == (0.8716553966489615 if (a, b) in NEGATION else 1.0), (a, b)
            assert SHORT.penalty(a, b) == (0.3611577852354489 if (a, b) in NEGATION else 1.0), (a, b)


def test_a_type_outside_the_matrix_is_named_with_the_types_it_covers():
    with pytest.raises(MetricError) as error:
        LONG.weight("ORGAN", "ANATOMY")
    assert str(error.value) == ("ratescore: affinity matrix 'long' has no weight for entity types (ORGAN, ANATOMY); "
                                "it covers ['ABNORMALITY', 'ANATOMY', 'DISEASE', 'NON-ABNORMALITY', 'NON-DISEASE']")


def test_types_and_provenance_in_the_official_key_format():
    assert LONG.types() == set(ENTITY_TYPES)
    provenance = LONG.provenance()
    assert provenance["name"] == "long" and provenance["neg_weight"] == 0.8716553966489615
    assert set(provenance["weights"]) == set(_official_keys())
    # reference table "long": row non-disease, column anatomy; row anatomy, column non-disease
    assert provenance["weights"]["non-disease_anatomy"] == 0.1839139293714062
    assert provenance["weights"]["anatomy_non-disease"] == 0.00013736314126696204
    # what provenance writes reads back as the same matrix
    again = load_affinity({**provenance["weights"], "neg_weight": provenance["neg_weight"]})
    assert again.name == "custom" and dict(again.weights) == dict(LONG.weights) and again.neg_weight == LONG.neg_weight


def test_load_affinity_takes_a_matrix_a_name_in_any_case_or_a_mapping():
    assert load_affinity(SHORT) is SHORT and load_affinity("Short") is SHORT and load_affinity("long") is LONG
    matrix = load_affinity({**_official_keys(1), "non-disease_disease": 2, "neg_weight": 0})
    # key halves are upper-cased as the official reader does; ints become floats
    assert matrix.weight("NON-DISEASE", "DISEASE") == 2.0 and isinstance(matrix.weight("ANATOMY", "ANATOMY"), float)
    assert matrix.neg_weight == 0.0 and isinstance(matrix.neg_weight, float)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.pop("neg_weight"), "ratescore: affinity matrix custom has no 'neg_weight' entry (needed since RaTEScore 0.6.0)"),
        (lambda d: [d.pop(k) for k in list(d)[:6]],
         "ratescore: affinity matrix custom lacks 6 pair(s): abnormality_abnormality, abnormality_anatomy, "
         "abnormality_disease, abnormality_non-abnormality, abnormality_non-disease"),
        (lambda d: d.update({"_disease": 1.0}), "ratescore: affinity matrix custom: key '_disease' is not '<row type>_<column type>'"),
        (lambda d: d.update({"anatomy_": 1.0}), "ratescore: affinity matrix custom: key 'anatomy_' is not '<row type>_<column type>'"),
        (lambda d: d.update({"anatomy_disease": True}),
         "ratescore: affinity matrix custom: 'anatomy_disease' must be a finite number, got True"),
        (lambda d: d.update({"anatomy_disease": float("inf")}),
         "ratescore: affinity matrix custom: 'anatomy_disease' must be a finite number, got inf"),
        (lambda d: d.update({"neg_weight": None}), "ratescore: affinity matrix custom: 'neg_weight' must be a finite number, got None"),
    ],
)
def test_a_bad_mapping_is_refused_word_for_word(mutate, message):
    data = {**_official_keys(), "neg_weight": 0.5}
    mutate(data)
    with pytest.raises(MetricError) as error:
        load_affinity(data)
    assert str(error.value) == message


def test_a_matrix_file_that_is_missing_unreadable_or_not_an_object_is_refused_word_for_word(tmp_path):
    with pytest.raises(MetricError) as error:
        load_affinity(str(tmp_path / "none.json"))
    assert str(error.value) == (f"ratescore: affinity_matrix={str(tmp_path / 'none.json')!r} is neither 'long', 'short' "
                                "nor an existing JSON file")
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(MetricError) as error:
        load_affinity(broken)
    assert str(error.value).startswith(f"ratescore: cannot read affinity matrix {broken}: Expecting property name")
    listed = tmp_path / "list.json"
    listed.write_text("[0.25]")
    with pytest.raises(MetricError) as error:
        load_affinity(str(listed))
    assert str(error.value) == f"ratescore: affinity matrix {listed} must be a JSON object"
    # a file's matrix is named by its path
    good = tmp_path / "good.json"
    good.write_text(json.dumps({**_official_keys(), "neg_weight": 0.5}))
    assert load_affinity(good).name == str(good)


def test_embeddings_are_normalised_as_torch_normalize_with_its_1e_12_floor():
    # cosine similarity does not depend on the vectors' lengths, however small
    a = np.array([[1.0, 0.0], [0.0, 2.0]])
    b = np.array([[1.0, 1.0], [3.0, 0.0]])
    types_a, types_b = ["DISEASE", "ANATOMY"], ["ANATOMY", "NON-DISEASE"]
    assert directional_score(a * 1e-6, b * 1e-3, types_a, types_b, LONG) == pytest.approx(
        directional_score(a, b, types_a, types_b, LONG), rel=1e-12)
    # F.normalize divides by max(norm, 1e-12): a vector of norm 1e-13 becomes one of norm 0.1,
    # so its cosine with a unit vector along it is 0.1 (weights cancel for a single entity)
    tiny, unit = np.array([[1e-13, 0.0]]), np.array([[1.0, 0.0]])
    assert directional_score(tiny, unit, ["DISEASE"], ["DISEASE"], LONG) == pytest.approx(0.1, rel=1e-12)
    # a zero vector is similar to nothing: 0
    assert directional_score(np.zeros((1, 2)), unit, ["DISEASE"], ["DISEASE"], LONG) == 0.0


def test_a_direction_whose_matches_weigh_nothing_scores_zero():
    # every weight 0: the denominator is 0 and the official code gives 0
    zero = load_affinity({**_official_keys(0), "neg_weight": 0.5})
    unit = np.array([[1.0, 0.0]])
    assert directional_score(unit, unit, ["DISEASE"], ["DISEASE"], zero) == 0.0
    assert rate_score(unit, ["DISEASE"], unit, ["DISEASE"], zero) == 0.0


def test_equal_directions_give_their_common_value():
    # both directions 1 (the same entity on each side): 2 * 1 * 1 / (1 + 1) = 1
    unit = np.array([[0.6, 0.8]])
    assert rate_score(unit, ["DISEASE"], unit * 5, ["DISEASE"], LONG) == pytest.approx(1.0, rel=1e-12)
    # both directions -1 (opposite vectors): 2 * (-1)(-1) / (-2) = -1
    assert rate_score(unit, ["DISEASE"], -unit, ["DISEASE"], LONG) == pytest.approx(-1.0, rel=1e-12)


def test_similarities_are_computed_in_double_precision_whatever_the_embeddings_dtype():
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(4, 8)).astype(np.float32), rng.normal(size=(3, 8)).astype(np.float32)
    types_a, types_b = ["DISEASE", "ANATOMY", "ABNORMALITY", "NON-DISEASE"], ["ANATOMY", "DISEASE", "NON-ABNORMALITY"]
    as_float32 = directional_score(a, b, types_a, types_b, LONG)
    assert type(as_float32) is float
    assert as_float32 == directional_score(a.astype(np.float64), b.astype(np.float64), types_a, types_b, LONG)


def test_a_table_is_read_row_by_scored_type_and_column_by_matched_type():
    from rexrank.ratescore.affinity import _table

    rows = [[10 * i + j for j in range(5)] for i in range(5)]
    table = _table(rows)
    assert len(table) == 25
    assert table[("ABNORMALITY", "NON-DISEASE")] == 4 and table[("NON-DISEASE", "ABNORMALITY")] == 40
    assert table[("ANATOMY", "DISEASE")] == 12 and table[("NON-ABNORMALITY", "NON-ABNORMALITY")] == 33


def test_types_are_those_named_as_a_row_or_as_a_column():
    # a user matrix may weigh an extra type as scored entity only: it is still one of its types
    matrix = load_affinity({**_official_keys(), "organ_anatomy": 0.5, "neg_weight": 0.5})
    assert matrix.types() == {*ENTITY_TYPES, "ORGAN"}


def test_a_matrix_file_is_read_as_utf_8_whatever_the_locale(tmp_path, monkeypatch):
    import codecs
    from pathlib import Path

    encodings = []
    read_text = Path.read_text

    def recording(self, *args, **kwargs):
        encodings.append(kwargs.get("encoding", args[0] if args else None))
        return read_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", recording)
    path = tmp_path / "w.json"
    path.write_bytes(json.dumps({**_official_keys(), "neg_weight": 0.5}).encode("utf-8"))
    load_affinity(path)
    # the locale's encoding (encoding=None) would differ from machine to machine
    assert len(encodings) == 1 and encodings[0] is not None and codecs.lookup(encodings[0]).name == "utf-8"
