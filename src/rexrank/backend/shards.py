"""How a request is cut into shards, and what it is expected to cost and take.

A request of n studies becomes K contiguous shards in test-set order. K follows the
request's size and the flavour's throughput (about `target_shard_hours` of work per
shard), capped by --max-jobs; `target_wall` instead asks for the Jobs that finish it
within that time. Every shard fits the Job timeout with its start-up (more shards, run in
waves of --max-jobs, when the cap would make them too long), or the plan refuses and says
which setting to change. Each metric says how its studies may be cut (`Metric.shard_rule`):
every boundary is a multiple of each one's batch (GREEN's official batches of 8 in input
order, rexrank.metrics.green), so each shard generates exactly the batches the single run
builds; a metric whose batches span the whole request under its options (GREEN's
`batching="by_length"` on a local model) keeps the request in one shard.

Flavours are the Hub's Jobs hardware (`huggingface_hub.JobHardware`). A shard Job scores on
one GPU (one replica of each LLM judge), so a flavour with several GPUs is refused rather
than planned at one GPU's speed for several GPUs' price: the same GPUs as single-GPU Jobs
(--max-jobs) cost the same per GPU-hour and are used.

Throughput figures are per study, measured on one NVIDIA H100 with random-weight models
of the real architectures (issue 29): the non-LLM suite (BLEU-2, BERTScore, SembScore,
RadGraph, RadCliQ, RaTEScore) 15.4 s per 600 studies; GREEN (Llama-2-7B, fp16, 350-token
answers, official batches of 8) 1.50 s per study. FineRadScore is taken as GREEN's cost
(same model size; not measured). Other flavours divide these by `FLAVOR_SPEED` (their
throughput relative to the H100), an estimate. Prices are the Hub's own
(`HfApi.list_jobs_hardware()`) when it answers, else the dated table below. A Job's
start-up (image pull, install, model downloads) is a stated default, not a measurement.
The store's config can set `flavor_speed`, `flavor_prices` and `job_startup`.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from rexrank.errors import RexrankError

H100_NON_LLM_SUITE_SECONDS = 15.4 / 600  # per study, the six non-LLM ReXrank metrics together
H100_SECONDS_PER_STUDY = {"green": 1.50, "fineradscore": 1.50, "crimson": 1.50, "spec_cxr": 1.50}
NON_LLM_SUITE = ("bleu2", "bertscore", "sembscore", "radgraph", "radcliq", "ratescore")
CPU_NON_LLM_SUITE_SECONDS = 3600.0 / 10000  # a CPU Space: about an hour per 10,000 studies (issue 29)

# One GPU's throughput relative to one H100 (set flavor_speed to override): estimates from the cards'
# figures, memory bandwidth first (GREEN's batch-of-8 decoding is bound by it): the H200 has the
# H100's compute and 1.4x its bandwidth. None: no GPU (the non-LLM suite at a CPU Space's pace).
FLAVOR_SPEED = {"h200": 1.3, "a100-large": 0.6, "rtx-pro-6000": 0.5, "l40sx1": 0.45, "a10g-large": 0.25,
                "a10g-small": 0.25, "l4x1": 0.2, "t4-medium": 0.1, "t4-small": 0.1,
                "cpu-basic": None, "cpu-upgrade": None, "cpu-performance": None, "cpu-xl": None}
# USD per hour, the Hub's Jobs pricing page (huggingface/hub-docs, docs/hub/jobs-pricing.md) as of
# PRICE_TABLE_DATE; used when the Hub's hardware list cannot be read (offline, local Jobs)
PRICE_TABLE_DATE = "2026-08-21"
FLAVOR_PRICES = {"cpu-basic": 0.01, "cpu-upgrade": 0.03, "cpu-xl": 1.00, "cpu-performance": 1.90,
                 "t4-small": 0.40, "t4-medium": 0.60, "l4x1": 0.80, "l4x4": 3.80, "l40sx1": 1.80, "l40sx4": 8.30,
                 "l40sx8": 23.50, "a10g-small": 1.00, "a10g-large": 1.50, "a10g-largex2": 3.00, "a10g-largex4": 5.00,
                 "a100-large": 2.50, "a100x4": 10.00, "a100x8": 20.00, "h200": 5.00, "h200x2": 10.00, "h200x4": 20.00,
                 "h200x8": 40.00, "rtx-pro-6000": 2.75, "rtx-pro-6000x2": 5.50, "rtx-pro-6000x4": 11.00,
                 "rtx-pro-6000x8": 22.00}
TABLE_SOURCE = f"the Hub's Jobs pricing page as of {PRICE_TABLE_DATE} (an estimate: prices change)"

# A Job's start-up before its first study, by default (set job_startup to override, per flavour):
# pulling the pinned PyTorch image and installing rexrank, then the encoder models of the non-LLM
# suite; plus, per LLM judge the Job generates with itself (no endpoint), downloading a 7B fp16
# checkpoint (~13.5 GB) and loading it on the GPU. Assumptions, not measurements.
IMAGE_AND_INSTALL_SECONDS = 240.0
ENCODERS_SECONDS = 60.0
JUDGE_SECONDS = 120.0
# shards are planned to end within this share of the Job timeout: the figures are estimates
TIMEOUT_SHARE = 0.8


def job_flavors() -> tuple[str, ...]:
    """The Hub's Jobs hardware, as the installed huggingface_hub names it."""
    from huggingface_hub import JobHardware

    return tuple(flavor.value for flavor in JobHardware)


def gpus_of(flavor: str) -> int:
    """GPUs of a Jobs flavour: 0 for CPU, N for the `...xN` flavours, else 1."""
    if flavor.startswith("cpu-"):
        return 0
    many = re.search(r"x(\d+)$", flavor)
    return int(many.group(1)) if many else 1


def single_gpu_flavor(flavor: str) -> str:
    """The one-GPU flavour of the same GPU (h200x8 -> h200, l40sx4 -> l40sx1, a100x8 -> a100-large)."""
    base = re.sub(r"x\d+$", "", flavor)
    return {"a100": "a100-large", "l40s": "l40sx1", "l4": "l4x1"}.get(base, base)


def check_flavor(flavor: str) -> None:
    """PlanError unless `flavor` is a Jobs flavour a shard Job can use (one GPU, or none)."""
    known = job_flavors()
    if flavor not in known:
        raise PlanError(f"unknown flavour {flavor!r}: not Hugging Face Jobs hardware; known: {', '.join(known)} "
                        "(--flavor, --llm-flavor or the store's config.json)")
    gpus = gpus_of(flavor)
    if gpus > 1:
        one = single_gpu_flavor(flavor)
        raise PlanError(f"{flavor} has {gpus} GPUs and a shard Job scores on one (one replica of each judge), so "
                        f"{gpus - 1} would be paid for and idle: use --flavor {one} with {gpus} times the --max-jobs "
                        f"(the same GPUs at the same price per GPU-hour)")


@dataclass(frozen=True)
class PriceList:
    """USD per hour of each flavour, and where the figures come from (said in every plan)."""

    per_hour: dict
    source: str

    @classmethod
    def table(cls) -> "PriceList":
        return cls(dict(FLAVOR_PRICES), TABLE_SOURCE)

    @classmethod
    def from_hardware(cls, hardware) -> "PriceList":
        """From `HfApi.list_jobs_hardware()`'s JobHardwareInfo (a cost per unit of time)."""
        per = {"second": 3600, "minute": 60, "hour": 1}
        prices = {}
        for info in hardware:
            factor = per.get(str(info.unit_label).lower())
            if factor is not None:
                prices[info.name] = round(float(info.unit_cost_usd) * factor, 6)
        return cls({**FLAVOR_PRICES, **prices}, "the Hub's list_jobs_hardware()")

    def configured(self, prices: dict) -> "PriceList":
        """The store's `flavor_prices` over these figures (what the organisers set wins)."""
        if not prices:
            return self
        named = ", ".join(sorted(prices))
        return PriceList({**self.per_hour, **prices}, f"{self.source}; flavor_prices in config.json for {named}")

    def price(self, flavor: str) -> float:
        if flavor not in self.per_hour:
            raise PlanError(f"no price for flavour {flavor!r}: set flavor_prices in the store's config.json")
        return float(self.per_hour[flavor])


def startup_seconds(flavor: str, local_judges: int = 0, overrides: dict | float | None = None) -> float:
    """A Job's start-up on `flavor` (see the module's note); `overrides`: seconds for every
    flavour, or by flavour (the store's job_startup)."""
    if isinstance(overrides, (int, float)) and not isinstance(overrides, bool):
        return float(overrides)
    if isinstance(overrides, dict) and flavor in overrides:
        return float(overrides[flavor])
    return IMAGE_AND_INSTALL_SECONDS + ENCODERS_SECONDS + JUDGE_SECONDS * local_judges


class PlanError(RexrankError):
    """The organisers' settings cannot plan the request (unknown flavour, no price or speed
    for it, a shard over the Job timeout, a target wall time the Jobs allowed cannot meet);
    the message names the setting to change. The dispatcher gives the request back and
    stops: the submitter did nothing wrong (the plan reads only settings and the test set's
    public size)."""


@dataclass(frozen=True)
class ShardPlan:
    n_studies: int
    ranges: tuple[tuple[int, int], ...]
    flavor: str
    align: int  # every boundary is a multiple of this (the LLM metrics' official batch sizes)
    seconds_per_study: float  # on `flavor`
    price_per_hour: float
    why_one_shard: str = ""
    metrics: tuple[str, ...] = field(default=())
    # the size the estimates (K, hours, cost) come from: the request's, or on a private test
    # set the whole set's, which is public (the track's size is not)
    estimate_studies: int | None = None
    startup_seconds: float = 0.0  # per Job, before its first study
    max_jobs: int = 1  # Jobs at once: more shards than this run in waves
    job_timeout: float | None = None
    price_source: str = TABLE_SOURCE

    @property
    def k(self) -> int:
        return len(self.ranges)

    @property
    def sized(self) -> int:
        return self.n_studies if self.estimate_studies is None else self.estimate_studies

    @property
    def scoring_hours(self) -> float:
        return self.sized * self.seconds_per_study / 3600

    @property
    def gpu_hours(self) -> float:
        """Billed hours: the scoring, and every Job's start-up (a starting Job is billed)."""
        return self.scoring_hours + self.k * self.startup_seconds / 3600

    @property
    def cost_usd(self) -> float:
        return self.gpu_hours * self.price_per_hour

    @property
    def shard_hours(self) -> float:
        """The longest shard's Job: start-up and its studies (by the estimate's size)."""
        units = math.ceil(self.sized / self.align)
        longest = min(self.sized, math.ceil(units / self.k) * self.align)
        return (self.startup_seconds + longest * self.seconds_per_study) / 3600

    @property
    def waves(self) -> int:
        return math.ceil(self.k / max(1, self.max_jobs))

    @property
    def makespan_hours(self) -> float:
        return self.waves * self.shard_hours

    def to_json(self) -> dict:
        return {"ranges": [list(r) for r in self.ranges], "flavor": self.flavor, "align": self.align,
                "metrics": list(self.metrics), "estimated_gpu_hours": round(self.gpu_hours, 4),
                "estimated_cost_usd": round(self.cost_usd, 2), "estimated_makespan_hours": round(self.makespan_hours, 4),
                "startup_seconds": self.startup_seconds, "price_per_hour": self.price_per_hour,
                "price_source": self.price_source}

    def describe(self) -> str:
        sized = "" if self.estimate_studies is None else f" (estimated from the test set's {self.sized} studies)"
        waves = f" in {self.waves} waves of up to {self.max_jobs}" if self.waves > 1 else ""
        timeout = "" if self.job_timeout is None else \
            f"; Job timeout {self.job_timeout / 3600:.2f} h ({TIMEOUT_SHARE:.0%} planned)"
        lines = [f"{self.n_studies} studies{sized} -> {self.k} shard(s) on {self.flavor} "
                 f"(boundaries on multiples of {self.align}"
                 + (f"; one shard: {self.why_one_shard}" if self.why_one_shard else "") + ")",
                 f"metrics: {', '.join(self.metrics)}",
                 f"estimated {self.gpu_hours:.2f} GPU-hours, ${self.cost_usd:.2f} at ${self.price_per_hour:.2f}/h "
                 f"({self.price_source})",
                 f"about {self.makespan_hours * 60:.0f} min{waves}: each Job {self.shard_hours * 60:.0f} min with "
                 f"{self.startup_seconds / 60:.1f} min of start-up (a stated default: image, install, model "
                 f"downloads; set job_startup){timeout}"]
        lines += [f"  shard {i}: studies [{a}, {b})" for i, (a, b) in enumerate(self.ranges)]
        return "\n".join(lines)


def shard_rules(metrics, metric_options: dict) -> dict:
    """metric -> its ShardRule under these options (rexrank.metrics.base.Metric.shard_rule)."""
    from rexrank.metrics.registry import metric_class

    return {name: metric_class(name).shard_rule(metric_options.get(name, {})) for name in metrics}


def seconds_per_study(metrics, flavor: str, *, speed: dict | None = None) -> float:
    """Seconds per study on one `flavor` Job: the H100 figures divided by its relative speed."""
    check_flavor(flavor)
    speed = {**FLAVOR_SPEED, **(speed or {})}
    if flavor not in speed:
        raise PlanError(f"no speed estimate for flavour {flavor!r}: set flavor_speed (its throughput relative to "
                        "one H100) in the store's config.json")
    factor = speed[flavor]
    non_llm = [m for m in metrics if m not in H100_SECONDS_PER_STUDY]
    llm = [m for m in metrics if m in H100_SECONDS_PER_STUDY]
    if factor is None:  # a CPU flavour: the LLM judges do not run there in any useful time
        if llm:
            raise PlanError(f"{flavor} has no GPU: {', '.join(llm)} need a GPU flavour (--flavor, e.g. a10g-large)")
        return CPU_NON_LLM_SUITE_SECONDS * len(non_llm) / len(NON_LLM_SUITE)
    h100 = H100_NON_LLM_SUITE_SECONDS * len(non_llm) / len(NON_LLM_SUITE) + sum(H100_SECONDS_PER_STUDY[m] for m in llm)
    return h100 / factor


def _time(seconds: float, *, up: bool = False) -> str:
    """A duration for people; `up`: rounded up (a least value that must suffice)."""
    rounding = math.ceil if up else round
    if seconds < 90:
        return f"{rounding(seconds)} s"
    if seconds < 5400:
        return f"{rounding(seconds / 60)} min"
    return f"{rounding(seconds / 360) / 10:.1f} h"


def plan_shards(n_studies: int, metrics, metric_options: dict | None = None, *, flavor: str, max_jobs: int,
                target_shard_hours: float = 0.5, speed: dict | None = None, prices: "PriceList | dict | None" = None,
                max_shards: int | None = None, estimate_studies: int | None = None,
                startup: dict | float | None = None, local_judges: int = 0, job_timeout: float | None = None,
                target_wall: float | None = None) -> ShardPlan:
    """Cut `n_studies` into shards for `metrics` on `flavor` (see the module's note).
    `estimate_studies`: the size K and the estimates come from (default n_studies); `startup`:
    job_startup overrides; `local_judges`: LLM judges each Job generates with itself;
    `job_timeout`, `target_wall`: seconds."""
    if max_jobs < 1:
        raise PlanError(f"--max-jobs must be at least 1, got {max_jobs}")
    metric_options = metric_options or {}
    metrics = tuple(metrics)
    rules = shard_rules(metrics, metric_options)
    align = math.lcm(*(rule.align for rule in rules.values()))
    per_study = seconds_per_study(metrics, flavor, speed=speed)
    price_list = prices if isinstance(prices, PriceList) else PriceList.table().configured(prices or {})
    price = price_list.price(flavor)
    sized = n_studies if estimate_studies is None else estimate_studies
    start_up = startup_seconds(flavor, local_judges, startup)
    sized_units = max(1, math.ceil(sized / align))
    units = math.ceil(n_studies / align)
    wanted = max(1, math.ceil(sized * per_study / 3600 / target_shard_hours))
    k = min(wanted, max_jobs, sized_units, max_shards or sized_units)
    fit = _Fit(sized, sized_units, align * per_study, start_up, max_jobs)
    if target_wall is not None:
        k = fit.jobs_within(target_wall, "--target-wall")
    why = ""
    refused = [f"{name}: {rule.refusal}" for name, rule in rules.items() if rule.refusal]
    if refused:
        k, why = 1, "; ".join(refused)
    if job_timeout is not None:
        k = max(k, fit.shards_within(job_timeout * TIMEOUT_SHARE, job_timeout))
    if k > 1 and (refused or (max_shards is not None and k > max_shards)):
        limit = why or f"at most {max_shards} shard(s)"
        unshardable = ", ".join(name for name, rule in rules.items() if rule.refusal)
        raise PlanError(f"{limit}, and one shard of {sized} studies ({_time(fit.one_shard_seconds)} with start-up) does not "
                        f"fit {TIMEOUT_SHARE:.0%} of the Job timeout of {_time(job_timeout)}: raise --job-timeout to at "
                        f"least {_time(fit.one_shard_seconds / TIMEOUT_SHARE, up=True)}, or score without {unshardable or 'it'}")
    # the first shards take one more batch each where the batches do not divide evenly
    base, extra = divmod(units, k)
    ranges, start = [], 0
    for i in range(k):
        stop = min(n_studies, start + (base + (i < extra)) * align)
        ranges.append((start, stop))
        start = stop
    plan = ShardPlan(n_studies, tuple(ranges), flavor, align, per_study, price, why, metrics,
                     None if estimate_studies is None else sized, start_up, max_jobs, job_timeout, price_list.source)
    if target_wall is not None and plan.makespan_hours * 3600 > target_wall + 1e-6:
        raise PlanError(f"{plan.k} shard(s) take about {_time(plan.makespan_hours * 3600)} "
                        + (f"({why}) " if why else "") + f"where --target-wall asks for {_time(target_wall)}: allow "
                        f"a longer --target-wall or --job-timeout")
    return plan


@dataclass(frozen=True)
class _Fit:
    """How many shards of `units` batches (each `unit` seconds, after a Job's `startup`) a
    time limit needs."""

    sized: int
    units: int
    unit: float
    startup: float
    max_jobs: int

    @property
    def one_shard_seconds(self) -> float:
        return self.startup + self.units * self.unit

    def _shards(self, seconds: float, what: str, fix: str) -> int:
        """Shards whose Jobs end within `seconds`; PlanError naming `fix` when none can."""
        room = seconds - self.startup
        if room < self.unit:
            raise PlanError(f"{what} leaves no room: a Job's start-up ({_time(self.startup)}) and one batch of studies "
                            f"({_time(self.unit)}) take longer; {fix}")
        return math.ceil(self.units / math.floor(room / self.unit))

    def shards_within(self, seconds: float, timeout: float) -> int:
        """Shards short enough for `seconds` (the planned share of the Job timeout)."""
        least = (self.startup + self.unit) / TIMEOUT_SHARE
        return self._shards(seconds, f"{TIMEOUT_SHARE:.0%} of the Job timeout ({_time(seconds)} of {_time(timeout)})",
                            f"raise --job-timeout to at least {_time(least, up=True)}")

    def jobs_within(self, seconds: float, flag: str) -> int:
        """Jobs, all running at once, that finish the request within `seconds`."""
        k = self._shards(seconds, f"{flag} {_time(seconds)}",
                         f"set {flag} to at least {_time(self.startup + self.unit, up=True)}")
        if k > self.max_jobs:
            raise PlanError(f"{self.sized} studies within {_time(seconds)} need {k} Jobs at once and --max-jobs allows "
                            f"{self.max_jobs}: raise --max-jobs to {k}, or allow a longer {flag}")
        return k
