"""The shard plan's arithmetic written out by hand (issue 40: the money a plan decides).

GREEN on a10g-large: 1.50 s per study on an H100 (shards.H100_SECONDS_PER_STUDY) over the
flavour's relative speed 0.25 (shards.FLAVOR_SPEED) = 6 s per study; its official batches of
8 make every boundary a multiple of 8, so 1,000 studies are 125 batches of 48 s. A Job's
start-up is set to 272 s, and a10g-large costs $1.50 an hour in the dated table."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from rexrank.backend import shards
from rexrank.backend.shards import (
    TABLE_SOURCE,
    PlanError,
    PriceList,
    _time,
    check_flavor,
    gpus_of,
    plan_shards,
    seconds_per_study,
    shard_rules,
    startup_seconds,
)
from rexrank.metrics.base import ShardRule

GREEN_A10G = dict(flavor="a10g-large", startup=272)
# GREEN sorted by length on a local model, and SRR-BERT's distinct sentences, batch the whole
# request: each says so in its shard rule (rexrank.metrics.green, rexrank.metrics.srr_bert)
BY_LENGTH = {"green": {"batching": "by_length"}}
GREEN_WHY = ("green: batching='by_length' batches the whole request's prompts sorted by length (batching='official', "
             "the default, shards)")
SRR_WHY = ("srr_bert: batching='distinct' classifies the request's distinct sentences together (batching='radeval', "
           "the default, shards)")


def test_three_jobs_plan_their_ranges_hours_cost_and_makespan_by_hand():
    plan = plan_shards(1000, ["green"], max_jobs=3, **GREEN_A10G)
    # 1,000 x 6 s = 1.67 h of work asks for ceil(1.67 / 0.5) = 4 shards; --max-jobs caps them at 3;
    # the 125 batches split 42, 42, 41
    assert plan.to_json() == {
        "ranges": [[0, 336], [336, 672], [672, 1000]], "flavor": "a10g-large", "align": 8, "metrics": ["green"],
        "estimated_gpu_hours": round((1000 * 6 + 3 * 272) / 3600, 4),  # 1.8933: every Job's start-up is billed
        "estimated_cost_usd": round((1000 * 6 + 3 * 272) / 3600 * 1.5, 2),  # 2.84
        "estimated_makespan_hours": round((272 + 42 * 8 * 6) / 3600, 4),  # 0.6356: one wave, the longest shard
        "startup_seconds": 272.0, "price_per_hour": 1.5, "price_source": TABLE_SOURCE}
    assert plan.to_json()["estimated_gpu_hours"] == 1.8933 and plan.to_json()["estimated_makespan_hours"] == 0.6356


def test_a_job_timeout_cuts_more_shards_that_run_in_waves_of_max_jobs():
    plan = plan_shards(1000, ["green"], max_jobs=2, job_timeout=1800, **GREEN_A10G)
    # 80 % of 30 min = 1,440 s; less the start-up, 1,168 s hold 24 batches of 48 s: ceil(125 / 24) = 6 shards
    # (21, 21, 21, 21, 21, 20 batches), 3 waves of 2 Jobs
    assert [tuple(r) for r in plan.ranges] == [(0, 168), (168, 336), (336, 504), (504, 672), (672, 840), (840, 1000)]
    assert plan.waves == 3
    assert plan.to_json()["estimated_gpu_hours"] == round((1000 * 6 + 6 * 272) / 3600, 4) == 2.12
    assert plan.to_json()["estimated_makespan_hours"] == round(3 * (272 + 21 * 8 * 6) / 3600, 4) == 1.0667


# 80 % of the timeout less 272 s of start-up: 1,168 s hold 24 batches of 48 s, so 6 shards; 3,728 s hold 77, so 2
@pytest.mark.parametrize(("job_timeout", "said"), [(1800, "30 min"), (5000, "83 min")])
def test_one_shard_over_the_job_timeout_names_its_hours_and_the_timeout_needed(job_timeout, said):
    with pytest.raises(PlanError) as refused:
        plan_shards(1000, ["green"], max_jobs=2, job_timeout=job_timeout, max_shards=1, **GREEN_A10G)
    # one shard: 272 + 125 x 48 = 6,272 s = 1.7 h; it needs a timeout of 6,272 / 0.8 = 7,840 s, 2.2 h rounded up
    assert str(refused.value) == ("at most 1 shard(s), and one shard of 1000 studies (1.7 h with start-up) does not fit "
                                  f"80% of the Job timeout of {said}: raise --job-timeout to at least 2.2 h, or score "
                                  "without it")


def test_a_target_wall_shorter_than_one_job_names_the_least_that_works():
    with pytest.raises(PlanError) as refused:
        plan_shards(1000, ["green"], max_jobs=2, target_wall=300, **GREEN_A10G)
    # start-up and one batch: 272 + 48 = 320 s, 5.3 min, rounded up to 6 min
    assert str(refused.value) == ("--target-wall 5 min leaves no room: a Job's start-up (5 min) and one batch of studies "
                                  "(48 s) take longer; set --target-wall to at least 6 min")


def test_a_target_wall_may_use_exactly_max_jobs():
    # within 1 h: 3,328 s after start-up hold 69 batches, so ceil(125 / 69) = 2 Jobs, which --max-jobs 2 allows
    plan = plan_shards(1000, ["green"], max_jobs=2, target_wall=3600, **GREEN_A10G)
    assert plan.k == 2 and plan.makespan_hours == pytest.approx((272 + 63 * 8 * 6) / 3600)
    with pytest.raises(PlanError) as refused:
        plan_shards(1000, ["green"], max_jobs=1, target_wall=3600, **GREEN_A10G)
    assert str(refused.value) == ("1000 studies within 60 min need 2 Jobs at once and --max-jobs allows 1: raise "
                                  "--max-jobs to 2, or allow a longer --target-wall")


def test_seconds_per_study_add_the_suites_share_and_each_judge_over_the_flavours_speed():
    # BLEU-2 and RadCliQ: 2 of the 6 non-LLM metrics' 15.4 s per 600 studies; GREEN 1.50 s; h200 at 1.3 H100s
    assert seconds_per_study(["bleu2", "green", "radcliq"], "h200") == pytest.approx((15.4 / 600 * 2 / 6 + 1.5) / 1.3)
    # a CPU flavour: an hour per 10,000 studies for the whole suite, here 2 of its 6 metrics
    assert seconds_per_study(["bleu2", "rouge"], "cpu-basic") == pytest.approx(3600 / 10000 * 2 / 6)
    assert seconds_per_study(["green"], "t4-small", speed={"t4-small": 0.5}) == pytest.approx(1.5 / 0.5)


def test_a_jobs_start_up_is_image_encoders_and_each_local_judge_unless_set():
    assert startup_seconds("h200") == 240 + 60
    assert startup_seconds("h200", 2) == 240 + 60 + 2 * 120
    assert startup_seconds("h200", 1, 100) == 100.0
    assert startup_seconds("h200", 1, {"h200": 50}) == 50.0
    assert startup_seconds("t4-small", 1, {"h200": 50}) == 240 + 60 + 120


def test_the_plan_says_its_sizes_hours_cost_waves_and_shards_in_words():
    plan = plan_shards(1000, ["green"], max_jobs=2, job_timeout=1800, estimate_studies=2000, **GREEN_A10G)
    # sized on the set's 2,000 studies: 250 batches, 24 a shard -> 11 shards; the request's 125 batches
    # split 12, 12, 12, 12, then 11 each; (12,000 + 11 x 272) s = 4.16 GPU-h at $1.50 = $6.25; the longest
    # sized shard 272 + 23 x 48 s = 23 min, 6 waves of 2 = 138 min
    lines = plan.describe().splitlines()
    assert lines[:4] == [
        "1000 studies (estimated from the test set's 2000 studies) -> 11 shard(s) on a10g-large (boundaries on "
        "multiples of 8)",
        "metrics: green",
        f"estimated 4.16 GPU-hours, $6.25 at $1.50/h ({TABLE_SOURCE})",
        "about 138 min in 6 waves of up to 2: each Job 23 min with 4.5 min of start-up (a stated default: image, "
        "install, model downloads; set job_startup); Job timeout 0.50 h (80% planned)"]
    assert lines[4:] == [f"  shard {i}: studies [{a}, {b})" for i, (a, b) in enumerate(
        [(0, 96), (96, 192), (192, 288), (288, 384)] + [(384 + 88 * j, 472 + 88 * j) for j in range(7)])]


def test_the_hubs_prices_per_second_minute_or_hour_are_dollars_an_hour():
    def info(name, unit, cost):
        return SimpleNamespace(name=name, unit_label=unit, unit_cost_usd=cost)

    prices = PriceList.from_hardware([info("t4-small", "Second", "0.0000012345"), info("l4x1", "minute", 0.02),
                                      info("h200", "hour", 4.5), info("a10g-large", "day", 99.0)])
    assert prices.per_hour["t4-small"] == 0.004444  # 0.0000012345 x 3,600, to the micro-dollar
    assert prices.per_hour["l4x1"] == pytest.approx(1.2) and prices.per_hour["h200"] == 4.5
    assert prices.per_hour["a10g-large"] == 1.5  # a unit it cannot read: the dated table's figure stays
    assert prices.source == "the Hub's list_jobs_hardware()"


def test_the_shards_wanted_follow_the_work_when_max_jobs_allows_more():
    # 1.67 h of work in half-hour shards: 4, which --max-jobs 10 allows; 125 batches split 32, 31, 31, 31
    plan = plan_shards(1000, ["green"], max_jobs=10, **GREEN_A10G)
    assert [tuple(r) for r in plan.ranges] == [(0, 256), (256, 504), (504, 752), (752, 1000)]
    assert plan_shards(1000, ["green"], max_jobs=10, target_shard_hours=1.0, **GREEN_A10G).k == 2  # ceil(1.67 / 1)
    # five studies are one batch: one shard however many Jobs may run
    assert [tuple(r) for r in plan_shards(5, ["green"], max_jobs=4, **GREEN_A10G).ranges] == [(0, 5)]
    # a cap of exactly the shards the timeout needs is enough
    assert plan_shards(1000, ["green"], max_jobs=2, job_timeout=1800, max_shards=6, **GREEN_A10G).k == 6


def test_the_plans_speed_price_and_start_up_come_from_the_settings_given():
    faster = plan_shards(1000, ["green"], max_jobs=3, speed={"a10g-large": 0.5}, **GREEN_A10G)
    assert faster.seconds_per_study == 1.5 / 0.5
    priced = plan_shards(1000, ["green"], max_jobs=3, prices={"a10g-large": 2.0}, **GREEN_A10G)
    assert priced.price_per_hour == 2.0 and priced.price_source == f"{TABLE_SOURCE}; flavor_prices in config.json for a10g-large"
    # no start-up set and no judge in the Job: image and install, and the encoders
    assert plan_shards(1000, ["green"], flavor="a10g-large", max_jobs=3).startup_seconds == 240 + 60


def test_gpus_of_each_kind_of_flavour_and_what_a_refusal_says():
    assert [gpus_of(f) for f in ("cpu-basic", "a10g-large", "h200x8", "l40sx4")] == [0, 1, 8, 4]
    with pytest.raises(PlanError) as refused:
        check_flavor("h200x8")
    assert str(refused.value) == ("h200x8 has 8 GPUs and a shard Job scores on one (one replica of each judge), so 7 "
                                  "would be paid for and idle: use --flavor h200 with 8 times the --max-jobs (the same "
                                  "GPUs at the same price per GPU-hour)")
    with pytest.raises(PlanError, match=r"^unknown flavour 'h300': not Hugging Face Jobs hardware; known: cpu-basic, "):
        check_flavor("h300")
    with pytest.raises(PlanError, match=r"\(--flavor, --llm-flavor or the store's config.json\)$"):
        check_flavor("h300")
    with pytest.raises(PlanError, match=r"^cpu-basic has no GPU: green, crimson need a GPU flavour \(--flavor, e.g. a10g-large\)$"):
        seconds_per_study(["bleu2", "green", "crimson"], "cpu-basic")


def test_a_plan_of_the_requests_own_size_in_one_wave_says_no_more():
    lines = plan_shards(1000, ["green"], max_jobs=3, **GREEN_A10G).describe().splitlines()
    assert lines[0] == "1000 studies -> 3 shard(s) on a10g-large (boundaries on multiples of 8)"
    # one wave of 3 Jobs, each 272 + 42 x 48 s = 38 min; no Job timeout set
    assert lines[3] == ("about 38 min: each Job 38 min with 4.5 min of start-up (a stated default: image, install, "
                        "model downloads; set job_startup)")


def test_durations_for_people_switch_units_at_90_s_and_90_min():
    assert [_time(89), _time(89.4)] == ["89 s", "89 s"]
    # from 90 s on, minutes: 1.5 min rounds to 2, and 90.5 s too (it is no longer said in seconds)
    assert [_time(90), _time(90.5)] == ["2 min", "2 min"]
    assert _time(5399) == "90 min"  # 89.98 min
    # from 90 min on, hours to the tenth: 5,400 s is 1.5 h, and so is 5,400.5 s
    assert [_time(5400), _time(5400.5)] == ["1.5 h", "1.5 h"]
    assert _time(9200) == "2.6 h"  # 2.556 h
    # up: a least value that must suffice is never rounded down
    assert [_time(47.2, up=True), _time(47.2)] == ["48 s", "47 s"]
    assert [_time(9000, up=True), _time(9001, up=True)] == ["2.5 h", "2.6 h"]


def test_a_flavour_with_no_speed_estimate_is_refused_naming_the_setting(monkeypatch):
    # a flavour a newer huggingface_hub names and FLAVOR_SPEED does not know yet
    known = shards.job_flavors()
    monkeypatch.setattr(shards, "job_flavors", lambda: (*known, "b200"))
    with pytest.raises(PlanError) as refused:
        seconds_per_study(["green"], "b200")
    assert str(refused.value) == ("no speed estimate for flavour 'b200': set flavor_speed (its throughput relative to "
                                  "one H100) in the store's config.json")
    assert seconds_per_study(["green"], "b200", speed={"b200": 2.0}) == 1.5 / 2.0


def test_a_flavour_with_no_price_is_refused_and_configured_prices_are_named_in_the_source():
    with pytest.raises(PlanError) as refused:
        PriceList({"h200": 5.0}, "a list").price("b200")
    assert str(refused.value) == "no price for flavour 'b200': set flavor_prices in the store's config.json"
    configured = PriceList({"h200": 5.0}, "a list").configured({"h200": 4.0, "a10g-large": 1.2})
    assert configured.source == "a list; flavor_prices in config.json for a10g-large, h200"
    assert (configured.price("h200"), configured.price("a10g-large")) == (4.0, 1.2)


def test_max_jobs_below_one_is_refused_with_the_value_given():
    with pytest.raises(PlanError) as refused:
        plan_shards(1000, ["green"], max_jobs=0, **GREEN_A10G)
    assert str(refused.value) == "--max-jobs must be at least 1, got 0"


def test_each_metric_gets_the_shard_rule_of_its_own_options():
    assert shard_rules(["green", "bleu2"], BY_LENGTH) == {"green": ShardRule(refusal=GREEN_WHY[len("green: "):]),
                                                         "bleu2": ShardRule()}
    assert shard_rules(["green"], {"bleu2": {"batching": "by_length"}}) == {"green": ShardRule(align=8)}


def test_a_metric_that_cannot_be_cut_keeps_the_request_in_one_shard_and_says_why():
    # 1.67 h of work would be 4 half-hour shards, which --max-jobs 4 allows; GREEN by length allows one
    plan = plan_shards(1000, ["green"], BY_LENGTH, max_jobs=4, **GREEN_A10G)
    assert plan.ranges == ((0, 1000),) and plan.why_one_shard == GREEN_WHY
    assert plan.describe().splitlines()[0] == ("1000 studies -> 1 shard(s) on a10g-large (boundaries on multiples of 1; "
                                               f"one shard: {GREEN_WHY})")
    both = plan_shards(1000, ["green", "srr_bert"], {**BY_LENGTH, "srr_bert": {"batching": "distinct"}}, max_jobs=4,
                       **GREEN_A10G)
    assert both.ranges == ((0, 1000),) and both.why_one_shard == f"{GREEN_WHY}; {SRR_WHY}"


def test_a_metric_that_cannot_be_cut_over_the_job_timeout_names_the_timeout_it_needs():
    # one shard: 120 s of start-up and 1,000 x 6 s = 6,120 s = 1.7 h; 80 % of 5,000 s leaves 3,880 s after
    # start-up, 646 studies, so 2 shards would be needed; 6,120 / 0.8 = 7,650 s = 2.125 h, up to 2.2 h
    with pytest.raises(PlanError) as refused:
        plan_shards(1000, ["green"], BY_LENGTH, flavor="a10g-large", startup=120, max_jobs=4, job_timeout=5000)
    assert str(refused.value) == (f"{GREEN_WHY}, and one shard of 1000 studies (1.7 h with start-up) does not fit 80% "
                                  "of the Job timeout of 83 min: raise --job-timeout to at least 2.2 h, or score without "
                                  "green")
    # with SRR-BERT as well: 1/6 of the suite's 15.4 s per 600 studies at a quarter of an H100 adds 0.0171 s a
    # study: 6,137 s (1.7 h) in one shard, 7,671 s (2.13 h) needed
    with pytest.raises(PlanError) as refused:
        plan_shards(1000, ["green", "srr_bert"], {**BY_LENGTH, "srr_bert": {"batching": "distinct"}},
                    flavor="a10g-large", startup=120, max_jobs=4, job_timeout=5000)
    assert str(refused.value) == (f"{GREEN_WHY}; {SRR_WHY}, and one shard of 1000 studies (1.7 h with start-up) does "
                                  "not fit 80% of the Job timeout of 83 min: raise --job-timeout to at least 2.2 h, or "
                                  "score without green, srr_bert")


def test_shards_are_no_more_than_max_shards_nor_the_batches_nor_the_work_wants():
    # --max-shards 2 where the work wants 4 and --max-jobs allows 10: 125 batches split 63, 62
    assert plan_shards(1000, ["green"], max_jobs=10, max_shards=2, **GREEN_A10G).ranges == ((0, 504), (504, 1000))
    # 16 studies are 2 batches: 2 shards however many a tiny shard target, --max-jobs and --max-shards allow
    assert plan_shards(16, ["green"], max_jobs=10, max_shards=5, target_shard_hours=1e-6,
                       **GREEN_A10G).ranges == ((0, 8), (8, 16))
    assert plan_shards(5, ["green"], max_jobs=4, target_shard_hours=1e-6, **GREEN_A10G).ranges == ((0, 5),)
    # 16 x 6 s = 96 s of work is less than one half-hour shard: one, though 2 batches and 4 Jobs allow 2
    small = plan_shards(16, ["green"], max_jobs=4, **GREEN_A10G)
    assert small.ranges == ((0, 16),) and small.why_one_shard == ""
    # 3,601 x 6 s = 6.0017 h: 12.003 half-hours, so 13 shards
    assert plan_shards(3601, ["green"], max_jobs=20, **GREEN_A10G).k == 13


def test_a_target_wall_that_waves_or_one_unshardable_shard_exceed_is_refused():
    # the target wall gives 2 Jobs, the Job timeout 6 shards: 3 waves of 272 + 21 x 48 = 1,280 s, 64 min
    with pytest.raises(PlanError) as refused:
        plan_shards(1000, ["green"], max_jobs=2, target_wall=3600, job_timeout=1800, **GREEN_A10G)
    assert str(refused.value) == ("6 shard(s) take about 64 min where --target-wall asks for 60 min: allow a longer "
                                  "--target-wall or --job-timeout")
    # 3 Jobs would finish 250 studies in 15 min (570.5 s after start-up hold 95 studies); GREEN by length keeps one
    # shard: 329.5 + 250 x 6 = 1,829.5 s, half a second short of 30.5 min
    with pytest.raises(PlanError) as refused:
        plan_shards(250, ["green"], BY_LENGTH, flavor="a10g-large", startup=329.5, max_jobs=4, target_wall=900)
    assert str(refused.value) == (f"1 shard(s) take about 30 min ({GREEN_WHY}) where --target-wall asks for 15 min: "
                                  "allow a longer --target-wall or --job-timeout")


def test_a_makespan_of_exactly_the_target_wall_is_allowed_and_half_a_second_more_is_not():
    # 480 studies, 60 batches of 48 s after 180 s of start-up: 80 % of 1,150 s leaves 740 s, 15 batches, so 4
    # shards of 180 + 720 = 900 s; the 30 min target wall gives 2 Jobs (1,620 s hold 33 batches): 2 waves, 1,800 s
    settings = dict(flavor="a10g-large", startup=180, max_jobs=2, job_timeout=1150)
    plan = plan_shards(480, ["green"], target_wall=1800, **settings)
    assert plan.ranges == ((0, 120), (120, 240), (240, 360), (360, 480)) and plan.makespan_hours == 0.5
    plan_shards(480, ["green"], target_wall=1800 - 1e-6, **settings)  # a microsecond is float noise
    with pytest.raises(PlanError, match=r"^4 shard\(s\) take about 30 min where --target-wall asks for 30 min"):
        plan_shards(480, ["green"], target_wall=1799.5, **settings)


def test_a_limit_of_start_up_and_exactly_one_batch_is_enough():
    # 272 s of start-up and one batch of 48 s: 320 s fit one batch a Job, so 2 Jobs for 16 studies
    assert plan_shards(16, ["green"], max_jobs=2, target_wall=320, **GREEN_A10G).ranges == ((0, 8), (8, 16))
    # the same through the Job timeout: 80 % of 400 s is 320 s; 400 s is 6.67 min, said as at least 7 min
    assert plan_shards(16, ["green"], max_jobs=1, job_timeout=400, **GREEN_A10G).ranges == ((0, 8), (8, 16))
    with pytest.raises(PlanError) as refused:
        plan_shards(16, ["green"], max_jobs=1, job_timeout=300, **GREEN_A10G)
    assert str(refused.value) == ("80% of the Job timeout (4 min of 5 min) leaves no room: a Job's start-up (5 min) and "
                                  "one batch of studies (48 s) take longer; raise --job-timeout to at least 7 min")


def test_the_plan_names_every_metric_and_a_day_long_job_timeout_in_hours():
    lines = plan_shards(1000, ["bleu2", "green"], max_jobs=3, job_timeout=86400, **GREEN_A10G).describe().splitlines()
    assert lines[1] == "metrics: bleu2, green"
    assert lines[3].endswith("; set job_startup); Job timeout 24.00 h (80% planned)")
