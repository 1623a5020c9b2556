"""The metric protocol (rexrank.metrics.base): the per-study rows a metric keeps, their
concatenation over shards, the tallies' sums, the checks on the pairs and on a part, and the
default corpus value (the mean of each column, NaN left out), each by hand."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from rexrank.errors import MetricError
from rexrank.metrics.base import (
    Metric, MetricResult, ShardRule, StudyRows, add_tallies, check_pairs, nanmean_or_nan,
)
from rexrank.models.advice import AdvisedError, WeightsUnavailable


class Recorder(Metric):
    """A metric whose per-study score is the prediction's length; it records what it was given."""

    name = "recorder"

    def __init__(self, rows=None, error=None):
        self.calls = []
        self.rows = rows
        self.error = error

    def _score(self, predictions, references):
        self.calls.append((predictions, references))
        if self.error is not None:
            raise self.error
        if self.rows is not None:
            return self.rows
        return self._rows({"recorder": [len(p) for p in predictions]})


# ---- StudyRows ----

def test_columns_become_float64_arrays():
    rows = StudyRows({"a": [1, 2], "b": (3,)})
    assert rows.columns["a"].dtype == np.float64 and rows.columns["a"].tolist() == [1.0, 2.0]
    assert isinstance(rows.columns["b"], np.ndarray) and rows.columns["b"].tolist() == [3.0]


def test_the_length_is_the_studies_of_columns_and_side_alike():
    assert len(StudyRows({"a": [1, 2, 3]}, side={"labels": [[0], [1], [0]]})) == 3
    assert len(StudyRows({}, side={"labels": [1, 2]})) == 2
    assert len(StudyRows({})) == 0  # no column: no study


def test_rows_of_two_lengths_are_refused_naming_both():
    with pytest.raises(MetricError) as error:
        len(StudyRows({"a": [1, 2, 3]}, side={"labels": [1, 2]}))
    assert str(error.value) == "study rows of different lengths: [2, 3]"


def test_concat_is_one_runs_rows_with_failures_at_their_run_positions():
    first = StudyRows({"m": [1.0, 2.0], "n": [0.5, 0.25]}, side={"arr": np.array([[1, 0], [0, 1]]), "lst": ["x", "y"]},
                      failures={1: "first's second"}, settings={"k": 1}, tallies={"tokens": 10, "note": "same"})
    second = StudyRows({"m": [3.0], "n": [0.125]}, side={"arr": np.array([[1, 1]]), "lst": ["z"]},
                       failures={0: "second's first"}, settings={"k": 1}, tallies={"tokens": 5, "note": "same"})
    third = StudyRows({"m": [4.0, 5.0], "n": [1.0, 0.0]}, side={"arr": np.array([[0, 0], [1, 1]]), "lst": ["u", "v"]},
                      failures={1: "third's second"}, settings={"k": 1}, tallies={"tokens": 1, "note": "same"})
    run = StudyRows.concat([first, second, third])
    assert run.columns["m"].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert run.columns["n"].tolist() == [0.5, 0.25, 0.125, 1.0, 0.0]
    assert isinstance(run.side["arr"], np.ndarray) and run.side["arr"].tolist() == [[1, 0], [0, 1], [1, 1], [0, 0], [1, 1]]
    assert run.side["lst"] == ["x", "y", "z", "u", "v"]
    assert run.failures == {1: "first's second", 2: "second's first", 4: "third's second"}
    assert run.settings == {"k": 1} and run.settings is not first.settings
    assert run.tallies == {"tokens": 16, "note": "same"}
    assert len(run) == 5


def test_concat_of_arrays_and_lists_is_a_list():
    a = StudyRows({}, side={"s": np.array([1, 2])})
    b = StudyRows({}, side={"s": [3]})
    joined = StudyRows.concat([a, b]).side["s"]
    assert isinstance(joined, list) and joined == [1, 2, 3]


@pytest.mark.parametrize("other", [
    StudyRows({"m": [1.0], "extra": [0.0]}, side={"s": [1]}),  # one column more
    StudyRows({"m": [1.0]}, side={"t": [1]}),                   # another side key
    StudyRows({"m": [1.0]}, side={}),                           # no side key
], ids=["column", "side", "no-side"])
def test_concat_refuses_parts_with_other_columns_naming_both(other):
    first = StudyRows({"m": [1.0]}, side={"s": [1]})
    with pytest.raises(ValueError) as error:
        StudyRows.concat([first, other])
    assert str(error.value) == f"parts with other columns: {list(other.columns) + list(other.side)} and ['m', 's']"


def test_concat_refuses_columns_in_another_order():
    with pytest.raises(ValueError, match="parts with other columns"):
        StudyRows.concat([StudyRows({"a": [1], "b": [2]}), StudyRows({"b": [2], "a": [1]})])


def test_concat_refuses_parts_run_with_other_settings_even_the_last():
    same, other = StudyRows({"m": [1]}, settings={"t": 0.5}), StudyRows({"m": [1]}, settings={"t": 0.6})
    with pytest.raises(ValueError) as error:
        StudyRows.concat([same, same, other])
    assert str(error.value) == "parts run with other settings"


def test_concat_of_one_part_is_that_part():
    part = StudyRows({"m": [1.0, 2.0]}, failures={0: "why"}, settings={"k": 2}, tallies={"n": 3})
    run = StudyRows.concat([part])
    assert run.columns["m"].tolist() == [1.0, 2.0] and run.failures == {0: "why"}
    assert run.settings == {"k": 2} and run.tallies == {"n": 3}


# ---- tallies ----

def test_tallies_add_numbers_key_by_key_and_nested():
    a = {"tokens": 10, "cost": 0.5, "cache": {"hits": 2, "misses": 1}, "only_a": 7}
    b = {"tokens": 5, "cost": 0.25, "cache": {"hits": 3, "new": 4}, "only_b": 1}
    out = add_tallies(a, b)
    assert out == {"tokens": 15, "cost": 0.75, "cache": {"hits": 5, "misses": 1, "new": 4}, "only_a": 7, "only_b": 1}
    assert a == {"tokens": 10, "cost": 0.5, "cache": {"hits": 2, "misses": 1}, "only_a": 7}  # left as it was


def test_tallies_keep_equal_notes_and_refuse_differing_ones():
    assert add_tallies({"price": "a10g", "flag": True}, {"price": "a10g", "flag": True}) == {"price": "a10g", "flag": True}
    with pytest.raises(ValueError) as error:
        add_tallies({"price": "a10g"}, {"price": "t4"})
    assert str(error.value) == "tally 'price' differs between parts: 'a10g' and 't4'"


def test_a_true_flag_is_a_note_not_a_count():
    # booleans are ints to Python: added up, True and True would give 2
    assert add_tallies({"flag": True}, {"flag": True}) == {"flag": True}
    with pytest.raises(ValueError, match="tally 'flag' differs"):
        add_tallies({"flag": True}, {"flag": False})


# ---- MetricResult, ShardRule, Metric's defaults ----

def test_result_primary_and_value_are_the_metrics_own_column():
    result = MetricResult("m", {"m": np.array([1.0, 3.0]), "other": np.array([9.0, 9.0])}, {"m": 2.0, "other": 9.0})
    assert result.primary.tolist() == [1.0, 3.0] and result.value == 2.0
    assert result.details == {} and result.failures == {} and result.rows is None


def test_a_metric_shards_anywhere_by_default():
    assert Metric.shard_rule({}) == ShardRule() and ShardRule().align == 1 and ShardRule().refusal == ""


def test_a_metrics_defaults_and_provenance():
    metric = Recorder()
    assert (Metric.version, Metric.description, Metric.citation, Metric.higher_is_better) == ("1", "", "", True)
    assert metric.config() == {}
    assert metric.provenance() == {"name": "recorder", "version": "1", "config": {}}
    assert metric.run_key() == "{'name': 'recorder', 'version': '1', 'config': {}}"


def test_rows_helper_defaults_to_empty_parts():
    rows = Recorder()._rows({"recorder": [1]})
    assert (rows.side, rows.failures, rows.settings, rows.tallies) == ({}, {}, {}, {})
    full = Recorder()._rows({"recorder": [1]}, side={"s": [2]}, failures={0: "w"}, settings={"t": 1}, tallies={"n": 1})
    assert (full.side, full.failures, full.settings, full.tallies) == ({"s": [2]}, {0: "w"}, {"t": 1}, {"n": 1})


# ---- score ----

def test_score_is_the_mean_of_each_column_leaving_nan_out():
    rows = StudyRows({"recorder": [1.0, math.nan, 4.0], "all_nan": [math.nan] * 3}, failures={1: "judge failed"})
    result = Recorder(rows=rows).score(["a", "b", "c"], ["x", "y", "z"])
    assert result.name == "recorder" and result.value == 2.5 and result.details == {}
    assert math.isnan(result.corpus["all_nan"])
    assert result.failures == {1: "judge failed"} and result.failures is not rows.failures
    assert result.rows is rows and result.per_study["recorder"] is rows.columns["recorder"]


def test_score_of_all_studies_and_of_a_part():
    metric = Recorder()
    assert metric.score(["a", "bb", "ccc"], ["x", "y", "z"]).primary.tolist() == [1.0, 2.0, 3.0]
    assert metric.calls[-1] == (["a", "bb", "ccc"], ["x", "y", "z"])
    part = metric.score(["a", "bb", "ccc", "dddd"], ["w", "x", "y", "z"], part=(1, 3))
    assert part.primary.tolist() == [2.0, 3.0] and metric.calls[-1] == (["bb", "ccc"], ["x", "y"])
    assert metric.score(["a", "bb"], ["x", "y"], part=(2, 2)).primary.tolist() == []  # an empty part at the end
    assert metric.score(["a", "bb"], ["x", "y"], part=(0, 0)).primary.tolist() == []


@pytest.mark.parametrize("part", [(-1, 1), (2, 1), (0, 4), (4, 4)])
def test_a_part_outside_the_studies_is_refused(part):
    with pytest.raises(MetricError) as error:
        Recorder().score(["a", "b", "c"], ["x", "y", "z"], part=part)
    assert str(error.value) == f"recorder: part [{part[0]}, {part[1]}) is outside the 3 studies"


def test_a_column_or_side_of_the_wrong_length_is_refused_naming_it():
    with pytest.raises(MetricError) as error:
        Recorder(rows=StudyRows({"recorder": [1.0, 2.0]})).score(["a", "b", "c"], ["x", "y", "z"])
    assert str(error.value) == "recorder: column 'recorder' has 2 scores for 3 studies"
    with pytest.raises(MetricError) as error:
        Recorder(rows=StudyRows({"recorder": [1.0]}, side={"labels": [1, 2]})).score(["a"], ["x"])
    assert str(error.value) == "recorder: column 'labels' has 2 scores for 1 studies"
    with pytest.raises(MetricError) as error:  # a part's studies are stop - start
        Recorder(rows=StudyRows({"recorder": [1.0]})).score(["a", "b", "c", "d"], ["w", "x", "y", "z"], part=(1, 3))
    assert str(error.value) == "recorder: column 'recorder' has 1 scores for 2 studies"


def test_unpaired_texts_are_refused_naming_the_metric():
    with pytest.raises(MetricError) as error:
        Recorder().score(["a", "b"], ["x"])
    assert str(error.value) == "recorder: got 2 predictions but 1 references; they must pair up"


def test_an_advised_error_is_told_the_metric_it_passed_through():
    error = AdvisedError("no model")
    with pytest.raises(AdvisedError) as raised:
        Recorder(error=error).score(["a"], ["x"])
    assert raised.value is error and error.metrics == ["recorder"]


def test_missing_weights_get_the_weights_inventory_unless_they_have_one():
    from rexrank.models import weights

    missing = WeightsUnavailable(object(), option="model", reason="not cached")
    with pytest.raises(WeightsUnavailable):
        Recorder(error=missing).score(["a"], ["x"])
    assert missing.inventory is weights and missing.metrics == ["recorder"]
    own = object()
    kept = WeightsUnavailable(object(), option="model", reason="not cached")
    kept.inventory = own
    with pytest.raises(WeightsUnavailable):
        Recorder(error=kept).score(["a"], ["x"])
    assert kept.inventory is own


# ---- the pairs ----

def test_pairs_must_pair_up():
    with pytest.raises(MetricError) as error:
        check_pairs(["a", "b"], ["x"], metric="m")
    assert str(error.value) == "m: got 2 predictions but 1 references; they must pair up"


@pytest.mark.parametrize("side", ["prediction", "reference"])
@pytest.mark.parametrize("bad, shown", [(None, "NoneType (None)"), (math.nan, "float (nan)")])
def test_a_text_that_is_not_a_string_is_named_by_side_position_and_type(side, bad, shown):
    texts = ["a", "b", bad]
    predictions, references = (texts, ["x", "y", "z"]) if side == "prediction" else (["x", "y", "z"], texts)
    with pytest.raises(MetricError) as error:
        check_pairs(predictions, references, metric="m")
    assert str(error.value) == f"m: {side} at position 2 is {shown}, expected a string"


def test_pairs_come_back_as_lists():
    predictions, references = check_pairs(("a", "b"), iter(["x", "y"]), metric="m")
    assert predictions == ["a", "b"] and references == ["x", "y"]


def test_nanmean_leaves_nan_out_and_is_nan_with_nothing_left():
    assert nanmean_or_nan(np.array([1.0, math.nan, 2.0])) == 1.5
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's mean of nothing warns "Mean of empty slice"
        assert math.isnan(nanmean_or_nan(np.array([math.nan])))
        assert math.isnan(nanmean_or_nan(np.array([])))
