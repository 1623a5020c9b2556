"""A result record as one row of the leaderboard's frame (rexrank.leaderboard.records).

Pinned by hand (issue 32: what the mutation tool found unpinned): every expected value comes from an
independent oracle, never from rexrank's earlier output."""
from __future__ import annotations

import math
from datetime import datetime, timezone

import numpy as np
import pytest

from rexrank.errors import RexrankError
from rexrank.leaderboard import records as R
from support.boards import nan


def rec(**changes) -> dict:
    """A valid record of one model on IU-Xray findings (590 studies): BLEU and GREEN given."""
    out = {
        "id": "r1", "model_name": "Model", "institution": "Lab", "model_url": "https://example.org/m",
        "date": "2025-06-15", "submitter": "someone", "test_set": "iu_xray", "track": "findings",
        "source": "rexrank", "trained_on": [], "per_study_available": False,
        "values": {"bleu2": {"mean": 0.25, "ci95": 0.02, "n": 590}, "green": {"mean": 0.5, "ci95": None, "n": None}},
    }
    out.update(changes)
    return out


def values(**entries) -> dict:
    return rec(values=entries)


# ---- records: one row per record ---------------------------------------------------------
def test_a_records_row_holds_its_numbers_as_floats_and_nan_for_what_is_missing():
    row = R.check_record(rec())
    assert (row["bleu2"], row["bleu2_ci"], row["bleu2_n"]) == (0.25, 0.02, 590.0)
    assert type(row["bleu2"]) is float and type(row["bleu2_ci"]) is float and type(row["bleu2_n"]) is float
    assert row["green"] == 0.5 and nan(row["green_ci"]) and nan(row["green_n"])
    # a column the record does not give: mean, CI and n all NaN (BERTScore comes after BLEU,
    # CRIMSON last; a missing BLEU does not stop the columns after it)
    for key in ("bertscore", "radcliq_v1_inv", "crimson"):
        assert nan(row[key]) and nan(row[f"{key}_ci"]) and nan(row[f"{key}_n"])
    later = R.check_record(values(bertscore={"mean": 0.3}, crimson={"mean": 0.1, "n": 7}))
    assert nan(later["bleu2"]) and later["bertscore"] == 0.3 and later["crimson"] == 0.1 and later["crimson_n"] == 7.0
    # n: the most studies any column was computed on; NaN when no column says
    row = R.check_record(values(bleu2={"mean": 0.2, "n": 580}, green={"mean": 0.4, "n": 588},
                                ratescore={"mean": 0.5, "n": 575}))
    assert row["n"] == 588
    assert nan(R.check_record(values(bleu2={"mean": 0.2})).get("n"))


def test_a_records_identity_fields_are_shown_without_invisible_characters_and_default_to_empty():
    row = R.check_record(rec(model_name="Med\u202eVersa\u200b", institution=None, submitter="x\x1b[31my"))
    # no namespace: filed under its submitter (store.accounts.namespace_of), as the board names it
    assert row["model_name"] == "xy / MedVersa" and row["institution"] == "" and row["submitter"] == "xy"
    missing = rec()
    for field in ("institution", "model_url", "date", "submitter", "source"):
        del missing[field]
    row = R.check_record(missing)
    assert [row[f] for f in ("institution", "model_url", "date", "submitter")] == ["", "", "", ""]
    assert row["source"] == "rexrank"  # a record without a source is a submitted one
    assert R.check_record(rec(source="published"))["source"] == "published"
    assert (row["id"], row["model_name"], row["test_set"], row["track"]) == ("r1", "Model", "iu_xray", "findings")


def test_trained_on_and_per_study_flags():
    assert R.check_record(rec(trained_on=["mimic_cxr", "iu_xray"]))["trained"] is True
    assert R.check_record(rec(trained_on=["mimic_cxr"]))["trained"] is False
    no_list = rec()
    del no_list["trained_on"], no_list["per_study_available"]
    row = R.check_record(no_list)
    assert row["trained"] is False and row["per_study_available"] is False
    assert R.check_record(rec(per_study_available=True))["per_study_available"] is True
    # a string is no list: "iu_xray" would otherwise be "in" it
    with pytest.raises(RexrankError) as err:
        R.check_record(rec(trained_on="iu_xray"))
    assert str(err.value) == "result record r1: 'trained_on' must be a list of test set names"


def test_the_test_sets_size_comes_from_the_records_provenance():
    assert R.check_record(rec(provenance={"test_set": {"n_studies": 590}}))["n_studies"] == 590.0
    for provenance in (None, "text", {}, {"test_set": "x"}, {"test_set": {}}, {"other": {"n_studies": 5}}):
        assert nan(R.check_record(rec(provenance=provenance))["n_studies"]), provenance
    with pytest.raises(RexrankError) as err:
        R.check_record(rec(provenance={"test_set": {"n_studies": "590"}}))
    assert str(err.value) == "result record r1 provenance.test_set.n_studies: '590' is not a finite number"


@pytest.mark.parametrize("record,message", [
    ([1], "result record is a list, not an object"),
    (None, "result record is a NoneType, not an object"),
    (rec(id=""), "result record <record of Model>: field 'id' is missing or empty"),
    ({k: v for k, v in rec().items() if k not in ("id", "model_name")}, "result record <record of ?>: field 'id' is missing or empty"),
    (rec(model_name=None), "result record r1: field 'model_name' is missing or empty"),
    (rec(test_set=""), "result record r1: field 'test_set' is missing or empty"),
    (rec(track=None), "result record r1: field 'track' is missing or empty"),
    (rec(values={}), "result record r1: field 'values' is missing or empty"),
    (rec(test_set="nih"), "result record r1: unknown test set 'nih' (known: iu_xray, mimic_cxr, chexpert_plus, rexgradient, example)"),
    (rec(track="impression"), "result record r1: unknown track 'impression' (known: findings, findings_impression)"),
    (rec(values=[("bleu2", 0.1)]), "result record r1: 'values' must be an object keyed by column"),
    (values(bleu2={"mean": 0.1}, bleu4={"mean": 0.1}, rouge1={"mean": 0.1}),
     "result record r1: unknown leaderboard column(s) ['bleu4', 'rouge1'] (known: ['bleu2', 'bertscore', 'sembscore', "
     "'radgraph', 'radcliq_v1_inv', 'ratescore', 'green', 'fineradscore_inv', 'rouge', 'temporal_f1', 'srr_bert', 'crimson'])"),
    (rec(date="2025-13-01"), "result record r1: date '2025-13-01' is not a real date"),
    (values(bleu2=0.1), "result record r1: values['bleu2'] must be an object with a 'mean'"),
    (values(bleu2={"ci95": 0.1}), "result record r1: values['bleu2'] must be an object with a 'mean'"),
    (values(green={"mean": None}), "result record r1 values['green'].mean: None is not a finite number"),
    (values(green={"mean": "0.5"}), "result record r1 values['green'].mean: '0.5' is not a finite number"),
    (values(green={"mean": True}), "result record r1 values['green'].mean: True is not a finite number"),
    (values(green={"mean": math.inf}), "result record r1 values['green'].mean: inf is not a finite number"),
    (values(green={"mean": 0.5, "ci95": "0.1"}), "result record r1 values['green'].ci95: '0.1' is not a finite number"),
    (values(green={"mean": 0.5, "n": 5.0, "ci95": -math.inf}), "result record r1 values['green'].ci95: -inf is not a finite number"),
    (values(green={"mean": 0.5, "n": "5"}), "result record r1 values['green'].n: '5' is not a finite number"),
    (values(green={"mean": 0.5, "n": math.nan}), "result record r1 values['green'].n: nan is not a finite number"),
])
def test_each_bad_record_is_refused_with_its_message(record, message):
    with pytest.raises(RexrankError) as err:
        R.check_record(record)
    assert str(err.value) == message


@pytest.mark.parametrize("entry,why", [
    ({"mean": 1.5}, "mean 1.5 is outside the metric's range (0 to 1)"),
    ({"mean": -0.25}, "mean -0.25 is outside the metric's range (0 to 1)"),
    ({"mean": 0.5, "ci95": -0.01}, "ci95 -0.01 is negative"),
    ({"mean": 0.5, "n": 0}, "n 0 is not a count of studies of the test set (590 studies)"),
    ({"mean": 0.5, "n": -3}, "n -3 is not a count of studies of the test set (590 studies)"),
    ({"mean": 0.5, "n": 2.5}, "n 2.5 is not a count of studies of the test set (590 studies)"),
    ({"mean": 0.5, "n": 591}, "n 591 is not a count of studies of the test set (590 studies)"),
])
def test_a_value_that_cannot_be_ranked_is_refused_or_left_empty_and_listed(entry, why):
    message = f"result record r1 values['green']: {why}; not ranked by GREEN"
    with pytest.raises(RexrankError) as err:
        R.check_record(values(bleu2={"mean": 0.2, "n": 7}, green=entry))
    assert str(err.value) == message
    problems: list[str] = []
    row = R.check_record(values(bleu2={"mean": 0.2, "n": 7}, green=entry), value_problems=problems)
    assert problems == [message]
    assert nan(row["green"]) and nan(row["green_ci"]) and nan(row["green_n"])
    assert row["bleu2"] == 0.2 and row["n"] == 7  # the other columns stay ranked; a dropped n counts for nothing


@pytest.mark.parametrize("entry", [
    {"mean": 0.0, "ci95": 0.0, "n": 1}, {"mean": 1.0, "ci95": 0.5, "n": 590}, {"mean": 0.5, "ci95": 2.0, "n": 100.0},
    {"mean": 1, "n": 590},
])
def test_values_at_the_edges_of_what_can_be_ranked_pass(entry):
    """0 and 1 for a 0-to-1 metric, a CI of 0 and one above 1, n of 1 and of the test set's
    590 studies (IU-Xray, by the ReXrank paper), a whole float n."""
    problems: list[str] = []
    row = R.check_record(values(green=entry), value_problems=problems)
    assert problems == [] and row["green"] == entry["mean"] and row["green_n"] == entry["n"]


def test_a_test_set_of_unknown_size_takes_any_whole_n():
    row = R.check_record(rec(test_set="example", values={"green": {"mean": 0.5, "n": 123456}}))
    assert row["green_n"] == 123456
    assert "n 0 is not a count of studies of the test set (None studies)" in str(
        pytest.raises(RexrankError, R.check_record, rec(test_set="example", values={"green": {"mean": 0.5, "n": 0}})).value)


class _Clock(datetime):
    """datetime with `now` fixed at 2026-01-01T00:00:00Z (what check_date compares with)."""

    @classmethod
    def now(cls, tz=None):
        return datetime(2026, 1, 1, tzinfo=timezone.utc).astimezone(tz) if tz else datetime(2026, 1, 1)


@pytest.mark.parametrize("text,why", [
    ("2025", None), ("2025-06", None), ("2025-06-15", None), ("2024-02-29", None),
    ("2026-01-01", None), ("2026-01-02", None),  # a day of slack: now + 1 day is not yet the future
    ("2026-01-03", "date '2026-01-03' is in the future"), ("2027", "date '2027' is in the future"),
    ("2025-13", "date '2025-13' is not a real date"), ("2025-02-29", "date '2025-02-29' is not a real date"),
    ("2025-00-10", "date '2025-00-10' is not a real date"), ("2025-06-31", "date '2025-06-31' is not a real date"),
    ("25", "date '25' is not YYYY-MM-DD"), ("2025-6-15", "date '2025-6-15' is not YYYY-MM-DD"),
    ("2025-06-15T10:00", "date '2025-06-15T10:00' is not YYYY-MM-DD"), ("x2025", "date 'x2025' is not YYYY-MM-DD"),
])
def test_a_date_is_a_real_past_date_with_a_day_of_slack(monkeypatch, text, why):
    monkeypatch.setattr(R, "datetime", _Clock)
    assert R.check_date(text) == why


def test_records_frame_refuses_or_lists_bad_records_and_keeps_the_rest():
    good, second = rec(), rec(id="r2", model_name="Other")
    bad_value = rec(id="r3", values={"green": {"mean": 0.5, "n": 591}, "bleu2": {"mean": 0.1}})
    with pytest.raises(RexrankError) as err:
        R.records_frame([good, rec()])
    assert str(err.value) == "result record r1: id appears more than once"
    with pytest.raises(RexrankError) as err:
        R.records_frame([good, bad_value])
    assert str(err.value) == ("result record r3 values['green']: n 591 is not a count of studies of the test set "
                              "(590 studies); not ranked by GREEN")
    problems: list[str] = []
    frame = R.records_frame([None, good, rec(), bad_value, rec(test_set="nih", id="r4"), second], problems=problems)
    assert frame["id"].tolist() == ["r1", "r3", "r2"]  # the bad value's record stays, without that value
    assert frame["bleu2"].tolist()[1] == 0.1 and math.isnan(frame["green"].tolist()[1])
    assert problems == [
        "result record is a NoneType, not an object",
        "result record r1: id appears more than once",
        "result record r3 values['green']: n 591 is not a count of studies of the test set (590 studies); not ranked by GREEN",
        "result record r4: unknown test set 'nih' (known: iu_xray, mimic_cxr, chexpert_plus, rexgradient, example)",
    ]


def test_the_frame_has_every_column_in_order_with_its_type_even_when_empty():
    keys = ["bleu2", "bertscore", "sembscore", "radgraph", "radcliq_v1_inv", "ratescore", "green", "fineradscore_inv",
            "rouge", "temporal_f1", "srr_bert", "crimson"]
    columns = ["id", "model_name", "institution", "model_url", "date", "submitter", "namespace", "test_set", "track",
               "source", "trained", "per_study_available", *keys, *(f"{k}_ci" for k in keys), "n",
               *(f"{k}_n" for k in keys), "n_studies"]
    for frame in (R.records_frame([]), R.records_frame([rec(values={"green": {"mean": 0.5, "n": 590}})])):
        assert list(frame.columns) == columns
        numbers = [c for c in columns[12:]]
        assert all(frame[c].dtype == np.float64 for c in numbers), frame.dtypes[numbers]
        assert frame["trained"].dtype == bool and frame["per_study_available"].dtype == bool
    one = R.records_frame([rec(values={"green": {"mean": 0.5, "n": 590}})])
    assert one["n"].tolist() == [590.0] and one["green"].tolist() == [0.5]


def test_coverage_notes_name_each_value_computed_on_fewer_studies():
    rows = [
        R.check_record(rec(id="a", model_name="Short", provenance={"test_set": {"n_studies": 590}},
                           values={"bleu2": {"mean": 0.2, "n": 586}, "bertscore": {"mean": 0.3, "n": 500},
                                   "green": {"mean": 0.4, "n": 590}, "crimson": {"mean": 0.1}})),
        R.check_record(rec(id="b", model_name="Whole", provenance={"test_set": {"n_studies": 590}},
                           values={"bleu2": {"mean": 0.2, "n": 590}})),
        R.check_record(rec(id="c", model_name="Unknown size", values={"bleu2": {"mean": 0.2, "n": 3}})),
        R.check_record(rec(id="d", model_name="Also short", test_set="mimic_cxr", track="findings_impression",
                           provenance={"test_set": {"n_studies": 2347}}, values={"ratescore": {"mean": 0.5, "n": 2300}})),
        R.check_record(rec(id="e", model_name="Toy", test_set="example", provenance={"test_set": {"n_studies": 10}},
                           values={"green": {"mean": 0.5, "n": 9}})),
    ]
    frame = R.frame_from_rows(rows)
    assert R.coverage_notes(frame) == [
        "someone / Short on IU-Xray / Findings: BLEU n = 586, BertScore n = 500 of 590 studies",
        "someone / Also short on MIMIC-CXR / Findings + Impression: RaTEScore n = 2300 of 2347 studies",
        "someone / Toy on Example (synthetic) / Findings: GREEN n = 9 of 10 studies",
    ]
    # a test set or track without a label is named as it is
    odd = frame.iloc[[4]].assign(test_set="nih_cxr", track="impression")
    assert R.coverage_notes(odd) == ["someone / Toy on nih_cxr / impression: GREEN n = 9 of 10 studies"]
    assert R.coverage_notes(frame.iloc[[1, 2]]) == []


def test_the_namespace_and_title_a_result_is_shown_under():
    """record_namespace: the record's own; a submission filed before namespaces, its
    submitter's; a published ReXrank entry, none unless it says one. board_title:
    "namespace / name" with invisible characters removed, a name alone without a namespace."""
    assert R.record_namespace({"namespace": "acme", "submitter": "bob"}) == "acme"
    assert R.record_namespace({"submitter": "bob"}) == "bob" and R.record_namespace({}) == ""
    assert R.record_namespace({"source": "published", "submitter": "ReXrank"}) == ""
    assert R.record_namespace({"source": "published", "namespace": "org"}) == "org"
    assert R.board_title({"namespace": "ac\u200bme", "model_name": "M\u202eX"}) == "acme / MX"
    assert R.board_title({"source": "published", "model_name": "MAIRA-2", "submitter": "x"}) == "MAIRA-2"
    assert R.board_title({"submitter": "bob", "model_name": "M"}) == "bob / M"  # filed before namespaces
    assert R.board_title({"submitter": "bob", "model_name": None}) == "bob / "  # a name left empty stays empty
