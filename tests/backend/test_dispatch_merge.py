"""Dispatched shards merge into exactly one worker's numbers (rexrank.backend.dispatch with
rexrank.backend.merge): an LLM judge, an encoder, SembScore with RadCliQ, GREEN by length,
SRR-BERT, SPEC-CXR, a metric that scores nothing in one shard, a private request; and the
merge's refusals of missing or foreign shards."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from rexrank.backend.dispatch import Dispatcher, DispatchSettings
from rexrank.backend.worker import Worker
from rexrank.store import FAILED, FINISHED, Quota, open_store
from support.backend_fixtures import leaks_in, private_set  # noqa: F401 (private_set: a fixture)
from support.requests import submit
from support.dispatch_fixtures import ThreadJobs, published, without_seconds
from support.backend_fixtures import test_metrics  # noqa: F401 (fixtures)

pytestmark = pytest.mark.long  # shard processes and tiny models: minutes


def test_a_tiny_llm_judge_merges_into_the_single_worker_run(tmp_path):
    from support.llm_tiny_models import build_tiny_llama
    from rexrank.metrics.green_text import prompt_template

    corpus = [prompt_template()] * 3 + ["No pneumothorax. Mild cardiomegaly. Small left pleural effusion."] * 3
    model = build_tiny_llama(tmp_path / "llama", corpus=corpus)

    def options(cache: str) -> dict:  # separate answer caches: the single run must generate its own
        return {"green": dict(model_path=str(model), max_new_tokens=12, cache_dir=str(tmp_path / cache), batch_size=4,
                              keep_completions=True, progress=False)}

    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    s = DispatchSettings(mode="local", flavor="h200", max_jobs=3, target_shard_hours=1e-9, poll=0.3)
    worker = Worker(store, metrics="green", metric_options=options("c1"), worker_id="d")
    # shards in threads: the merge is what is tested here (a shard as its own process, an LLM judge's
    # from its Job spec alone: tests/backend/test_dispatch_jobs.py); three processes each loading torch
    # took most of a minute
    assert Dispatcher(worker, ThreadJobs(str(tmp_path / "s"), None), s).run(once=True) == 1
    final = store.get_request(req["id"])
    assert final["status"] == FINISHED, final.get("error")
    assert final["dispatch"]["plan"]["ranges"] == [[0, 8], [8, 16], [16, 19]]
    record, per_study = published(store)
    single_store = open_store(tmp_path / "single", quota=Quota(0))
    submit(single_store)
    assert Worker(single_store, metrics="green", metric_options=options("c2"), worker_id="one").run(once=True) == 1
    single, single_per_study = published(single_store)
    pd.testing.assert_frame_equal(per_study, single_per_study)
    merged, alone = record["summaries"]["green"], single["summaries"]["green"]
    assert merged["details"]["completions"] == alone["details"]["completions"]  # the same generated tokens
    assert {k: v for k, v in merged.items() if k != "seconds"} == {k: v for k, v in alone.items() if k != "seconds"}


def test_an_encoder_metric_merges_within_1e_6_of_the_single_worker_run(tmp_path):
    from support.tiny_report_models import make_tiny_roberta

    model = make_tiny_roberta(tmp_path / "encoder")

    def options(cache: str) -> dict:
        return {"bertscore": dict(model=str(model), num_layers=2, rescale_with_baseline=False,
                                  cache_dir=str(tmp_path / cache))}

    store = open_store(tmp_path / "s", quota=Quota(0))
    submit(store)
    s = DispatchSettings(mode="local", flavor="l4x1", max_jobs=3, target_shard_hours=1e-9, poll=0.3)
    worker = Worker(store, metrics="bertscore", metric_options=options("c1"), worker_id="d")
    assert Dispatcher(worker, ThreadJobs(str(tmp_path / "s"), None), s).run(once=True) == 1
    record, per_study = published(store)
    single_store = open_store(tmp_path / "single", quota=Quota(0))
    submit(single_store)
    assert Worker(single_store, metrics="bertscore", metric_options=options("c2"), worker_id="one").run(once=True) == 1
    single, single_per_study = published(single_store)
    assert list(per_study["id"]) == list(single_per_study["id"])
    for column in ("bertscore", "bertscore_precision", "bertscore_recall"):
        assert abs(per_study[column] - single_per_study[column]).max() <= 1e-6
    assert abs(record["values"]["bertscore"]["mean"] - single["values"]["bertscore"]["mean"]) <= 1e-6


def dispatched_and_single(tmp_path, metrics: str, options, *, flavor: str = "l4x1", **worker_kw):
    """The example submission dispatched as three shards (Jobs as threads of this process), and
    scored by a single worker; `options(tag)` gives each run its own caches, so that each
    computes its own values. Returns (final request, its store, the single worker's store)."""
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    s = DispatchSettings(mode="local", flavor=flavor, max_jobs=3, target_shard_hours=1e-9, poll=0.2)
    runner = ThreadJobs(str(tmp_path / "s"), None)
    worker = Worker(store, metrics=metrics, metric_options=options("c1"), worker_id="d", **worker_kw)
    assert Dispatcher(worker, runner, s).run(once=True) == 1
    single_store = open_store(tmp_path / "single", quota=Quota(0))
    submit(single_store)
    assert Worker(single_store, metrics=metrics, metric_options=options("c2"), worker_id="one", **worker_kw).run(once=True) == 1
    return store.get_request(req["id"]), store, single_store


def test_sembscore_details_and_radcliq_reach_a_dispatched_record(tmp_path):
    from support.tiny_report_models import make_tiny_radcliq_models

    m = make_tiny_radcliq_models(tmp_path / "models")

    def options(cache: str) -> dict:
        bertscore = {"model": str(m["roberta"]), "num_layers": 2, "baseline": (0.8, 0.81, 0.805)}
        sembscore = {"checkpoint_path": str(m["chexbert"]), "tokenizer": str(m["tokenizer"])}
        radgraph = {"model_path": str(m["radgraph"])}
        common = {"cache_dir": str(tmp_path / cache)}
        return {"sembscore": {**common, **sembscore},
                "radcliq": {**common, "bertscore_options": bertscore, "sembscore_options": sembscore,
                            "radgraph_options": radgraph}}

    final, store, single_store = dispatched_and_single(tmp_path, "sembscore,radcliq", options)
    assert final["status"] == FINISHED, final.get("error")
    assert len(final["dispatch"]["plan"]["ranges"]) == 3
    (record, per_study), (single, single_per_study) = published(store), published(single_store)
    merged, alone = record["summaries"]["sembscore"]["details"], single["summaries"]["sembscore"]["details"]
    assert "not_merged" not in merged and merged["chexbert_labels"]["predictions"]  # every study's labels
    # the labels are discrete (the same in any batch): the F1 tables equal the single run's exactly
    assert merged == alone
    for column, tolerance in (("sembscore", 1e-6), ("radcliq", 2e-6), ("radcliq_v0", 2e-6)):
        assert abs(per_study[column] - single_per_study[column]).max() <= tolerance
    for column in ("radcliq_radgraph", "radcliq_bleu2"):  # each study's own reports: exactly
        pd.testing.assert_series_equal(per_study[column], single_per_study[column])
    assert record["values"].keys() == single["values"].keys()
    for column, value in record["values"].items():
        assert abs(value["mean"] - single["values"][column]["mean"]) <= 2e-6


def test_green_by_length_on_a_local_model_is_one_shard_and_equals_the_single_run(tmp_path):
    from support.llm_tiny_models import build_tiny_llama
    from rexrank.metrics.green import load_tokenizer
    from rexrank.metrics.green_text import make_prompt, prompt_template, render_model_input
    from rexrank.testsets.loading import track_studies
    from support.requests import EXAMPLE_PREDS

    corpus = [prompt_template()] * 3 + ["No pneumothorax. Mild cardiomegaly. Small left pleural effusion."] * 3
    model = build_tiny_llama(tmp_path / "llama", corpus=corpus)
    # room for a few tokens after the longest prompt: each completion's cap is max_length minus its
    # length-sorted batch's width, so a batch made of other studies changes the completions
    studies = track_studies("example", "findings")
    predictions = {k: v["section_findings"] for k, v in json.loads(Path(EXAMPLE_PREDS).read_text()).items()}
    tokenizer = load_tokenizer(str(model))
    lengths = [len(tokenizer(render_model_input(make_prompt(r, predictions[i])), add_special_tokens=True)["input_ids"])
               for i, r in zip(studies.ids, studies.references)]

    def options(cache: str) -> dict:
        return {"green": dict(model_path=str(model), batching="by_length", max_length=max(lengths) + 4, max_new_tokens=16,
                              batch_size=4, cache_dir=str(tmp_path / cache), keep_completions=True, progress=False)}

    final, store, single_store = dispatched_and_single(tmp_path, "green", options, flavor="h200")
    assert final["status"] == FINISHED, final.get("error")
    assert final["dispatch"]["plan"]["ranges"] == [[0, 19]]  # the metric refuses a cut
    (record, per_study), (single, single_per_study) = published(store), published(single_store)
    pd.testing.assert_frame_equal(per_study, single_per_study)
    assert record["summaries"]["green"]["details"]["completions"] == single["summaries"]["green"]["details"]["completions"]
    assert without_seconds(record["summaries"]) == without_seconds(single["summaries"])


def test_a_shard_where_one_metric_scores_nothing_finishes_when_the_whole_request_passes(tmp_path, test_metrics):
    from rexrank.testsets.loading import track_studies

    references = list(track_studies("example", "findings").references)
    # the plan's last shard is studies [13, 19): the judge answers none of them, 13 of 19 in all (68 %)
    options = lambda cache: {"patchy": {"fail_references": references[13:]}}  # noqa: E731
    final, store, single_store = dispatched_and_single(tmp_path, "bleu2,patchy", options,
                                                       flavor="cpu-basic", min_coverage=0.6)
    assert final["dispatch"]["plan"]["ranges"] == [[0, 7], [7, 13], [13, 19]]
    assert final["status"] == FINISHED, final.get("error")
    (record, per_study), (single, single_per_study) = published(store), published(single_store)
    pd.testing.assert_frame_equal(per_study, single_per_study)
    assert without_seconds(record["summaries"]) == without_seconds(single["summaries"])
    assert record["summaries"]["patchy"]["n_scored"] == 13
    # nothing scored in the whole request fails it, with the single worker's words
    nothing = lambda cache: {"patchy": {"fail_references": references}}  # noqa: E731
    final, _, single_store = dispatched_and_single(tmp_path / "all", "bleu2,patchy", nothing,
                                                   flavor="cpu-basic", min_coverage=0.6)
    [alone] = single_store.list_requests()
    assert final["status"] == alone["status"] == FAILED
    assert "none of the 19 studies could be scored" in final["error"] and final["error"] == alone["error"]


def test_srr_bert_shards_and_merges_exactly_into_the_single_run(tmp_path, monkeypatch):
    import nltk

    from support import srr_bert_tiny
    from rexrank.models import srr_bert as S

    monkeypatch.setattr(nltk, "sent_tokenize", srr_bert_tiny.stand_in_sent_tokenize)  # punkt_tab is not here
    monkeypatch.setattr(S, "punkt_available", lambda: True)
    model_dir, tokenizer_dir = srr_bert_tiny.build(tmp_path / "srr")
    options = lambda cache: {"srr_bert": dict(model_path=str(model_dir), tokenizer_path=str(tokenizer_dir),  # noqa: E731
                                              device="cpu", cache=False, progress=False)}
    final, store, single_store = dispatched_and_single(tmp_path, "srr_bert", options)
    assert final["status"] == FINISHED, final.get("error")
    assert len(final["dispatch"]["plan"]["ranges"]) == 3
    (record, per_study), (single, single_per_study) = published(store), published(single_store)
    pd.testing.assert_frame_equal(per_study, single_per_study)  # exactly: each shard classifies the run's batches
    assert record["values"] == single["values"]
    assert without_seconds(record["summaries"]) == without_seconds(single["summaries"])


def test_spec_cxr_shards_and_merges_into_the_single_run(tmp_path):
    import hashlib

    from support.llm_fake_server import FakeOpenAIServer, Reply, chat_body
    from rexrank.metrics.spec_cxr_text import load_entity_set

    entities = load_entity_set().entities
    labels = ("TP", "FP", "FN", "TN")

    def script(path, body):  # a judge whose answer follows from the candidate report
        candidate = body["messages"][1]["content"].split("CANDIDATE:\n")[1]
        digest = hashlib.sha256(candidate.encode()).digest()
        judged = [{"entity": entities[b % len(entities)], "presence": labels[b % 4], "comparison": "other",
                   "location": ("aligned", "not_aligned", "not_available")[b % 3], "severity": "not_available"}
                  for b in digest[:3]]
        if digest[5] % 7 == 0:
            return Reply(body=chat_body("not json"))  # some studies fail even after the re-ask
        return Reply(body=chat_body(json.dumps({"entities": judged})))

    with FakeOpenAIServer(script) as server:
        options = lambda cache: {"spec_cxr": dict(model="judge", base_url=server.base_url, max_reasks=1,  # noqa: E731
                                                  cache_dir=str(tmp_path / cache), progress=False)}
        final, store, single_store = dispatched_and_single(tmp_path, "spec_cxr", options,
                                                           min_coverage=0.5)
    assert final["status"] == FINISHED, final.get("error")
    assert len(final["dispatch"]["plan"]["ranges"]) == 3
    (record, per_study), (single, single_per_study) = published(store), published(single_store)
    pd.testing.assert_frame_equal(per_study, single_per_study)
    assert record["summaries"]["spec_cxr"]["details"]["per_entity"]  # pooled over every study of every shard
    assert without_seconds(record["summaries"]) == without_seconds(single["summaries"])


def test_a_dispatched_private_request_publishes_aggregates_once(tmp_path, monkeypatch, private_set):
    import rexrank.backend.privacy as privacy_module

    data_dir, preds = private_set
    noised = []
    real = privacy_module.private_results
    monkeypatch.setattr(privacy_module, "private_results", lambda results, **kw: noised.append(1) or real(results, **kw))
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store, preds, test_set="rexgradient")
    s = DispatchSettings(mode="local", flavor="cpu-basic", max_jobs=3, target_shard_hours=1e-9, poll=0.1)
    worker = Worker(store, data_dir=data_dir, metrics="bleu2,leaky", worker_id="d", min_coverage=0.5)
    assert Dispatcher(worker, ThreadJobs(str(tmp_path / "s"), data_dir), s).run(once=True) == 1
    final = store.get_request(req["id"])
    assert final["status"] == FINISHED, final.get("error")
    assert len(final["dispatch"]["plan"]["ranges"]) == 3 and noised == [1]  # the noise drawn once, after the merge
    [record] = store.list_results()
    # through the privacy door: noised aggregates, no counts (rexrank.backend.public_door)
    assert not record["per_study_available"] and record["values"]["bleu2"]["n"] is None
    assert "dispatch" not in json.dumps(record) and "RG000" not in json.dumps(record)
    leaky = record["summaries"]["leaky"]
    # the careless metric fails the first study of each call it gets (one per shard): not said
    assert not {"n_failed", "n_scored", "failures", "seconds"} & set(leaky)
    assert leaks_in(tmp_path / "s") == []  # the shards' outputs (the careless details) are removed too


def test_the_merge_refuses_missing_shards_and_shards_of_other_code_or_options():
    from rexrank.backend.merge import MergeError, merge_shards, shard_header, shard_table
    from rexrank.scoring import score_submission
    from support.requests import EXAMPLE_PREDS

    ranges = [[0, 10], [10, 19]]
    shards = []
    for index, (start, stop) in enumerate(ranges):
        run = score_submission("example", "findings", EXAMPLE_PREDS, metrics="bleu2", progress=False, select=(start, stop))
        shards.append((shard_header(run, request_id="r", shard=index, attempt=1, start=start, stop=stop,
                                    metrics=["bleu2"], metric_options={}), shard_table(run)))
    whole = score_submission("example", "findings", EXAMPLE_PREDS, metrics="bleu2", progress=False)
    header = {**{k: v for k, v in whole.results.items() if k != "metrics"}, "predictions_ids": list(whole.per_study["id"])}
    results, table = merge_shards(shards, plan_ranges=ranges, header=header)
    pd.testing.assert_frame_equal(table, whole.per_study)
    assert results["metrics"]["bleu2"]["scores"] == whole.results["metrics"]["bleu2"]["scores"]
    with pytest.raises(MergeError, match="1 of 2 shards present"):
        merge_shards(shards[:1], plan_ranges=ranges, header=header)
    other_options = [shards[0], ({**shards[1][0], "options": "0123"}, shards[1][1])]
    with pytest.raises(MergeError, match="shard 1 was made with another options"):
        merge_shards(other_options, plan_ranges=ranges, header=header)
    other_code = [({**meta, "code": "0.0.1+abc"}, t) for meta, t in shards]
    with pytest.raises(MergeError, match="scored by rexrank 0.0.1"):
        merge_shards(other_code, plan_ranges=ranges, header=header)
    old_format = [shards[0], ({**shards[1][0], "format": 1}, shards[1][1])]
    with pytest.raises(MergeError, match="shard 1 is in shard format 1"):
        merge_shards(old_format, plan_ranges=ranges, header=header)
