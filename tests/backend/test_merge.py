"""Shards merge into a single run by construction (rexrank.backend.merge): parts of a request
scored as a shard scores them, written and read back as a shard writes them, give the whole
run's per-study table and every published value (corpus values, details, CIs), because the
merge calls the same Metric.aggregate and scoring.metric_summary as the single run."""
from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest

from support.llm_fake_server import FakeOpenAIServer, Reply, chat_body, completion_body
from rexrank.backend.merge import merge_shards, shard_header, shard_table
from rexrank.scoring import _select, score_predictions
from rexrank.submissions import Predictions


def merged_and_whole(metrics: str, options: dict, predictions: list[str], references: list[str], cuts, **whole_run):
    """(merged results, merged per-study table, the whole run) of `cuts` [(start, stop)]."""
    shards, header, whole = shard_outputs(metrics, options, predictions, references, cuts, **whole_run)
    results, table = merge_shards(shards, plan_ranges=[list(c) for c in cuts], header=header)
    return results, table, whole


def shard_outputs(metrics: str, options: dict, predictions: list[str], references: list[str], cuts, **whole_run):
    """([(shard JSON, shard table)] as the merge reads them, the whole run's header, the whole run);
    `whole_run`: score_predictions' options of the whole run (its bootstrap is in the header)."""
    ids = [f"S{i:02d}" for i in range(len(predictions))]
    whole_predictions = Predictions(ids, list(predictions), "test", 0)
    whole = score_predictions(whole_predictions, references, metrics=metrics, metric_options=options, progress=False,
                              **whole_run)
    shards = []
    for index, (start, stop) in enumerate(cuts):
        part_predictions, part_references, part_options, part = _select(whole_predictions, references, options,
                                                                        start, stop)
        run = score_predictions(part_predictions, part_references, metrics=metrics, metric_options=part_options,
                                progress=False, nothing_scored_is_error=False, part=part)
        meta = json.loads(json.dumps(shard_header(run, request_id="r", shard=index, attempt=1, start=start, stop=stop,
                                                  metrics=metrics.split(","), metric_options=options)))
        buf = io.BytesIO()
        shard_table(run).to_parquet(buf, index=False)  # read back as the merge reads it from the store
        shards.append((meta, pd.read_parquet(io.BytesIO(buf.getvalue()))))
    header = {**{k: v for k, v in whole.results.items() if k != "metrics"}, "predictions_ids": ids}
    return shards, header, whole


def assert_same_run(results, table, whole):
    pd.testing.assert_frame_equal(table, whole.per_study)
    for name, summary in whole.results["metrics"].items():
        merged = {k: v for k, v in results["metrics"][name].items() if k != "seconds"}
        assert merged == {k: v for k, v in summary.items() if k != "seconds"}, name


def test_fineradscore_rates_strata_failures_and_reasks_merge_into_the_single_run(tmp_path):
    def answer(*severities):
        return json.dumps({"corrections": [{"line": 0, "action": "edit", "corrected_text": "x", "severity": s,
                                            "error_categories": ["false finding"], "comment": ""} for s in severities]})

    levels = ["no error", "not actionable", "actionable nonurgent", "urgent", "emergent"]
    predictions = [f"Finding {i}." for i in range(10)]

    def script(path, body):
        i = int(body["messages"][1]["content"].split("[0] Finding ")[1].split(".")[0])
        attempt = (len(body["messages"]) - 2) // 2
        if i == 3:
            return Reply(500, {"error": {"message": "down"}})
        if i == 6 or (i == 8 and attempt == 0):  # 6: never valid; 8: valid once re-asked
            return Reply(body=chat_body("{not json"))
        return Reply(body=chat_body(answer(*(levels[k % 5] for k in range(i % 4))), prompt_tokens=100 + i))

    with FakeOpenAIServer(script) as server:
        options = {"fineradscore": dict(model="judge", base_url=server.base_url, max_reasks=1, backoff=0.01,
                                        max_retries=0, cache_dir=str(tmp_path), cache=False, progress=False,
                                        strata=["a", "b"] * 5)}
        results, table, whole = merged_and_whole("fineradscore", options, predictions, [f"Ref {i}." for i in range(10)],
                                                 [(0, 4), (4, 7), (7, 10)])
    details = results["metrics"]["fineradscore"]["details"]
    assert details["strata"]["a"] and details["reasks"] == 2 and details["n_failed"] == 2  # the parts' rows, pooled
    assert_same_run(results, table, whole)


def test_green_unparseable_failed_and_completions_merge_into_the_single_run(tmp_path):
    matched = "\n[Clinically Significant Errors]:\n(a) False report of a finding in the candidate: {n}. x.\n\n[Matched Findings]:\n2. a; b."
    predictions = [f"Candidate {i}." for i in range(12)]

    def script(path, body):
        i = int(body["prompt"].split("Candidate ")[-1].split(".")[0])
        if i == 9:
            return Reply(500, {"error": {"message": "down"}})
        text = "no sections at all" if i == 2 else matched.format(n=i % 3)
        return Reply(body=completion_body("[Explanation]:" + text))

    with FakeOpenAIServer(script) as server:
        options = {"green": dict(base_url=server.base_url, max_retries=0, backoff=0.01, cache=False,
                                 keep_completions=True, progress=False)}
        results, table, whole = merged_and_whole("green", options, predictions, [f"Reference {i}." for i in range(12)],
                                                 [(0, 8), (8, 12)])  # on the official batches of 8
    details = results["metrics"]["green"]["details"]
    assert details["unparseable_positions"] == [2] and details["failed_ids"] == ["S09"]
    assert len(details["completions"]) == 12 and details["completions"][9] is None
    assert results["metrics"]["green"]["corpus"]["green_zero_error_rate_a"] == pytest.approx(4 / 11)
    assert_same_run(results, table, whole)


def test_bertscore_and_radcliq_with_idf_merge_into_the_single_run(tmp_path):
    """idf weighs tokens by their document frequency over all the run's references, so a
    shard weighs its studies' tokens as the whole run does (not by its own references)."""
    from rexrank.backend.shards import shard_rules
    from support.tiny_report_models import make_tiny_radcliq_models

    m = make_tiny_radcliq_models(tmp_path / "models")
    bertscore = {"model": str(m["roberta"]), "num_layers": 2, "rescale_with_baseline": False, "idf": True}
    options = {"bertscore": {**bertscore, "cache": False, "progress": False},
               "radcliq": {"bertscore_options": {**bertscore, "baseline": (0.8, 0.81, 0.805),
                                                 "rescale_with_baseline": True},
                           "sembscore_options": {"checkpoint_path": str(m["chexbert"]), "tokenizer": str(m["tokenizer"])},
                           "radgraph_options": {"model_path": str(m["radgraph"])}, "cache": False, "progress": False}}
    assert all(not rule.refusal for rule in shard_rules(["bertscore", "radcliq"], options).values())
    references = ["No acute process.", "Small pleural effusions.", "Lungs are clear. No effusion.",
                  "Heart size normal.", "No pneumothorax. Lungs clear.", "Mild cardiomegaly."]
    predictions = ["No acute cardiopulmonary process.", "Bilateral effusions.", "The lungs are clear.",
                   "Normal heart.", "No pneumothorax.", "Cardiomegaly."]
    results, table, whole = merged_and_whole("bertscore,radcliq", options, predictions, references, [(0, 2), (2, 6)])
    # batch mates change only float rounding (an encoder metric merges within 1e-6)
    for column in ("bertscore", "bertscore_precision", "bertscore_recall", "radcliq", "radcliq_bertscore"):
        np.testing.assert_allclose(table[column], whole.per_study[column], rtol=0, atol=1e-6, err_msg=column)
    for name in ("bertscore", "radcliq"):
        merged, alone = results["metrics"][name]["corpus"], whole.results["metrics"][name]["corpus"]
        assert merged.keys() == alone.keys()
        for key, value in alone.items():
            assert merged[key] == pytest.approx(value, abs=2e-6), (name, key)


def test_radcliq_shards_as_its_components_allow_under_their_options(monkeypatch):
    from rexrank.metrics.base import ShardRule
    from rexrank.metrics.bertscore import BertScore
    from rexrank.metrics.radcliq import RadCliQ
    from rexrank.metrics.radgraph import RadGraph
    from rexrank.metrics.sembscore import SembScore

    # each component's rule sees its own options only
    monkeypatch.setattr(BertScore, "shard_rule", classmethod(
        lambda cls, options: ShardRule(align=options.get("batch_size", 1))))
    monkeypatch.setattr(SembScore, "shard_rule", classmethod(
        lambda cls, options: ShardRule(refusal="own batches") if options.get("coupled") else ShardRule(align=options.get("batch_size", 1))))
    monkeypatch.setattr(RadGraph, "shard_rule", classmethod(
        lambda cls, options: ShardRule(refusal="coupled") if options.get("coupled") else ShardRule(align=6)))
    assert RadCliQ.shard_rule({"sembscore_options": {"batch_size": 4}}) == ShardRule(align=12)
    assert RadCliQ.shard_rule({"bertscore_options": {"batch_size": 5}, "sembscore_options": {"batch_size": 4}}) == ShardRule(align=60)
    assert RadCliQ.shard_rule({"bertscore_options": {"batch_size": 5}}) == ShardRule(align=30)
    rule = RadCliQ.shard_rule({"radgraph_options": {"coupled": True}})
    assert rule.refusal == "radgraph: coupled"
    rule = RadCliQ.shard_rule({"radgraph_options": {"coupled": True}, "sembscore_options": {"coupled": True}})
    assert rule.refusal == "radgraph: coupled; sembscore: own batches"  # every refusal, in the components' order


def test_each_merge_refusal_word_for_word_and_the_merged_runs_accounting():
    import rexrank
    from rexrank.backend.merge import SHARD_FORMAT, MergeError, code_fingerprint, options_fingerprint

    predictions = [f"Finding {i} is clear." for i in range(5)]
    results, table, whole = merged_and_whole("bleu2", {}, predictions, [f"Finding {i} is seen." for i in range(5)],
                                             [(0, 2), (2, 5)])
    assert_same_run(results, table, whole)
    assert (results["pending"], results["failed"], results["complete"]) == ([], {}, True)
    assert "predictions_ids" not in results and list(table.columns) == list(whole.per_study.columns)
    ids = [f"S{i:02d}" for i in range(5)]
    shards, ranges = [], [[0, 2], [2, 5]]
    for index, (start, stop) in enumerate(ranges):
        meta = {"format": SHARD_FORMAT, "request_id": "r", "shard": index, "attempt": 1, "range": [start, stop],
                "code": code_fingerprint(), "metrics": [], "options": options_fingerprint([], {}),
                "parts": {}, "seconds": [1.0004, 2.0003][index]}
        shards.append((meta, table.iloc[start:stop].reset_index(drop=True)))
    header = {"predictions_ids": ids}
    # no metric asked: the accounting alone, its seconds the shards' 1.0004 + 2.0003, to the millisecond
    merged, _ = merge_shards(shards, plan_ranges=ranges, header=header)
    assert merged == {"metrics": {}, "pending": [], "failed": {}, "complete": True, "seconds": 3.001}

    def refusal(changed_shards, plan=ranges, ids_said=ids):
        with pytest.raises(MergeError) as caught:
            merge_shards(changed_shards, plan_ranges=plan, header={"predictions_ids": ids_said})
        return str(caught.value)

    def second(**changes):
        return [shards[0], ({**shards[1][0], **changes}, shards[1][1])]

    assert refusal(shards[:1]) == "1 of 2 shards present"
    assert refusal([({**m, "code": "0.0.1+abc"}, t) for m, t in shards]) == (
        f"the shards were scored by rexrank 0.0.1, the dispatcher is {rexrank.__version__}: set the Jobs' install to "
        "this version (\"install\" in the dispatch settings) and requeue the request")
    for key, value in (("code", f"{rexrank.__version__}+other"), ("metrics", ["rouge"]), ("options", "0123")):
        assert refusal(second(**{key: value})) == (
            f"shard 1 was made with another {key} ({value!r}, shard 0: {shards[0][0][key]!r}); requeue the request "
            "so that every shard is scored again")
    assert refusal(second(format=1)) == (
        f"shard 1 is in shard format 1, this merge reads {SHARD_FORMAT}; requeue the request so that every shard is "
        "scored again")
    assert refusal(second(range=[2, 4])) == "shard 1 holds studies [2, 4] (3 rows), the plan says [2, 5)"
    assert refusal(shards, plan=[[0, 2], [2, 4]]) == "shard 1 holds studies [2, 5] (3 rows), the plan says [2, 4)"
    assert refusal(shards, ids_said=list(reversed(ids))) == (
        "the shards' studies are not the request's studies in test-set order")
    # a metric's parts scored with another checkpoint, or rows that cannot make one table
    scored, header, _ = shard_outputs("bleu2", {}, predictions, [f"Finding {i} is seen." for i in range(5)],
                                      [(0, 2), (2, 5)])
    part = scored[1][0]["parts"]["bleu2"]
    other = {**scored[1][0], "parts": {"bleu2": {**part, "provenance": {"checkpoint": "other"}}}}
    with pytest.raises(MergeError, match=r"^shard 1 ran bleu2 with another checkpoint or settings$"):
        merge_shards([scored[0], (other, scored[1][1])], plan_ranges=ranges, header=header)
    other = {**scored[1][0], "parts": {"bleu2": {**part, "settings": {"n": 3}}}}
    with pytest.raises(MergeError, match=r"^the shards' bleu2 rows cannot make one run: parts run with other settings$"):
        merge_shards([scored[0], (other, scored[1][1])], plan_ranges=ranges, header=header)


def test_a_shards_header_by_hand_and_its_options_fingerprint():
    """What a shard writes beside its table, field by field; the options fingerprint is the first
    16 hex digits of SHA-256 over the metrics and options as canonical JSON (sorted keys), so
    two Jobs that built the same options in another order still merge, and other options do not."""
    import hashlib

    from rexrank.backend.merge import SHARD_FORMAT, code_fingerprint, options_fingerprint

    predictions, references = ["Finding 1 is clear.", "Finding 2 is clear."], ["Finding 1 is seen.", "Finding 2 is seen."]
    run = score_predictions(Predictions(["S00", "S01"], predictions, "test", 0), references, metrics="bleu2",
                            metric_options={"bleu2": {}}, progress=False)
    options = {"bleu2": {}, "green": {"batching": "official", "max_new_tokens": 300}}
    meta = shard_header(run, request_id="req-7", shard=2, attempt=3, start=10, stop=12, metrics=["bleu2"],
                        metric_options=options)
    summary, rows = run.results["metrics"]["bleu2"], run.metric_results["bleu2"].rows
    assert meta == {
        "format": SHARD_FORMAT, "request_id": "req-7", "shard": 2, "attempt": 3, "range": [10, 12],
        "code": code_fingerprint(), "metrics": ["bleu2"], "options": options_fingerprint(["bleu2"], options),
        "parts": {"bleu2": {"provenance": summary["provenance"], "higher_is_better": summary["higher_is_better"],
                            "seconds": summary["seconds"], "columns": list(rows.columns), "side": list(rows.side),
                            "settings": rows.settings, "tallies": rows.tallies}},
        "seconds": run.results["seconds"]}
    assert meta["seconds"] > 0

    canonical = b'{"metrics": ["bleu2"], "options": {"bleu2": {}, "green": {"batching": "official", "max_new_tokens": 300}}}'
    assert meta["options"] == hashlib.sha256(canonical).hexdigest()[:16]
    reordered = {"green": {"max_new_tokens": 300, "batching": "official"}, "bleu2": {}}
    assert options_fingerprint(["bleu2"], reordered) == meta["options"]
    assert options_fingerprint(["bleu2"], {**options, "green": {"batching": "by_length"}}) != meta["options"]
    assert options_fingerprint(["bleu2", "rouge"], options) != meta["options"]
    # a value JSON cannot write (a folder given in process) is fingerprinted by its text
    from pathlib import Path

    assert options_fingerprint(["srr_bert"], {"srr_bert": {"cache_dir": Path("/cache")}}) == hashlib.sha256(
        b'{"metrics": ["srr_bert"], "options": {"srr_bert": {"cache_dir": "/cache"}}}').hexdigest()[:16]


def test_a_metric_that_scored_no_study_fails_the_merge_unless_told_otherwise(monkeypatch):
    import rexrank.metrics.registry as registry
    from rexrank.errors import MetricError
    from support.backendhelpers import TEST_METRICS

    monkeypatch.setattr(registry, "METRICS", {**registry.METRICS, **TEST_METRICS})
    references = ["A is seen.", "B is seen.", "C is seen."]
    options = {"patchy": {"fail_references": references}}  # no study gets an answer
    shards, header, _ = shard_outputs("patchy", options, ["A.", "B.", "C."], references, [(0, 1), (1, 3)],
                                      nothing_scored_is_error=False)
    with pytest.raises(MetricError, match=r"^none of the 3 studies could be scored: the judge gave no answer \(3x\)$"):
        merge_shards(shards, plan_ranges=[[0, 1], [1, 3]], header=header)
    results, _ = merge_shards(shards, plan_ranges=[[0, 1], [1, 3]], header=header, nothing_scored_is_error=False)
    assert results["metrics"]["patchy"]["n_scored"] == 0


def test_the_whole_runs_bootstrap_gives_the_merged_runs_bootstrap_intervals():
    predictions = [f"Finding {i} is clear and small." for i in range(9)]
    references = [f"Finding {i} is {'clear' if i % 3 else 'seen'}." for i in range(9)]
    results, table, whole = merged_and_whole("bleu2", {}, predictions, references, [(0, 4), (4, 9)], bootstrap=40, seed=7)
    assert_same_run(results, table, whole)
    score = results["metrics"]["bleu2"]["scores"]["bleu2"]
    assert (score["bootstrap_resamples"], score["bootstrap_seed"]) == (40, 7)
    assert score["bootstrap_low"] < score["mean"] < score["bootstrap_high"]


def test_a_request_of_one_shard_merges_into_the_single_run():
    """A small request is planned as one shard: its merge compares and reads that shard alone."""
    predictions = [f"Finding {i} is clear." for i in range(4)]
    results, table, whole = merged_and_whole("bleu2", {}, predictions, [f"Finding {i} is seen." for i in range(4)], [(0, 4)])
    assert_same_run(results, table, whole)
