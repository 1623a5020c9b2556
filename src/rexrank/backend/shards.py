"""How a request is cut into shards, and what it is expected to cost.

A request of n studies becomes K contiguous shards in test-set order. K follows the
request's size and the flavour's throughput (about `target_shard_hours` of work per
shard), capped by --max-jobs. Each metric says how its studies may be cut
(`Metric.shard_rule`): every boundary is a multiple of each one's batch (GREEN's official
batches of 8 in input order, rexrank.metrics.green), so each shard generates exactly the
batches the single run builds; a metric whose batches span the whole request under its
options (GREEN's `batching="by_length"` on a local model) keeps the request in one shard.

Throughput figures are per study, measured on one NVIDIA H100 with random-weight models
of the real architectures (issue 29): the non-LLM suite (BLEU-2, BERTScore, SembScore,
RadGraph, RadCliQ, RaTEScore) 15.4 s per 600 studies; GREEN (Llama-2-7B, fp16, 350-token
answers, official batches of 8) 1.50 s per study. FineRadScore is taken as GREEN's cost
(same model size; not measured). Other flavours scale these by `FLAVOR_SPEED`, an
estimate; the store's config can set both `flavor_speed` and `flavor_prices`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from rexrank.errors import RexrankError

H100_NON_LLM_SUITE_SECONDS = 15.4 / 600  # per study, the six non-LLM ReXrank metrics together
H100_SECONDS_PER_STUDY = {"green": 1.50, "fineradscore": 1.50, "crimson": 1.50, "spec_cxr": 1.50}
NON_LLM_SUITE = ("bleu2", "bertscore", "sembscore", "radgraph", "radcliq", "ratescore")
CPU_NON_LLM_SUITE_SECONDS = 3600.0 / 10000  # a CPU Space: about an hour per 10,000 studies (issue 29)

# throughput relative to one H100 (estimates from the cards' fp16 figures; set flavor_speed to override)
FLAVOR_SPEED = {"h100": 1.0, "h100x8": 1.0, "a100-large": 0.6, "a10g-largex2": 0.3, "a10g-large": 0.25,
                "a10g-small": 0.25, "l40sx1": 0.45, "l4x1": 0.2, "l4x4": 0.2, "t4-medium": 0.1, "t4-small": 0.1,
                "cpu-upgrade": None, "cpu-basic": None}
# USD per hour as the Hub's Jobs hardware list showed them (HfApi().list_jobs_hardware()); set flavor_prices to override
FLAVOR_PRICES = {"h100": 4.50, "h100x8": 36.0, "a100-large": 2.50, "a10g-largex2": 3.00, "a10g-large": 1.50,
                 "a10g-small": 1.00, "l40sx1": 1.80, "l4x1": 0.80, "l4x4": 3.80, "t4-medium": 0.60, "t4-small": 0.40,
                 "cpu-upgrade": 0.03, "cpu-basic": 0.01}


class PlanError(RexrankError):
    """The request cannot be planned as asked (unknown flavour, over the cost ceiling)."""


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

    @property
    def k(self) -> int:
        return len(self.ranges)

    @property
    def gpu_hours(self) -> float:
        return self.n_studies * self.seconds_per_study / 3600

    @property
    def cost_usd(self) -> float:
        return self.gpu_hours * self.price_per_hour

    @property
    def makespan_hours(self) -> float:
        return max(stop - start for start, stop in self.ranges) * self.seconds_per_study / 3600

    def to_json(self) -> dict:
        return {"ranges": [list(r) for r in self.ranges], "flavor": self.flavor, "align": self.align,
                "metrics": list(self.metrics), "estimated_gpu_hours": round(self.gpu_hours, 4),
                "estimated_cost_usd": round(self.cost_usd, 2)}

    def describe(self) -> str:
        lines = [f"{self.n_studies} studies -> {self.k} shard(s) on {self.flavor} "
                 f"(boundaries on multiples of {self.align}"
                 + (f"; one shard: {self.why_one_shard}" if self.why_one_shard else "") + ")",
                 f"metrics: {', '.join(self.metrics)}",
                 f"estimated {self.gpu_hours:.2f} GPU-hours, ${self.cost_usd:.2f} at ${self.price_per_hour:.2f}/h, "
                 f"about {self.makespan_hours * 60:.0f} min with every shard running at once"]
        lines += [f"  shard {i}: studies [{a}, {b})" for i, (a, b) in enumerate(self.ranges)]
        return "\n".join(lines)


def shard_rules(metrics, metric_options: dict) -> dict:
    """metric -> its ShardRule under these options (rexrank.metrics.base.Metric.shard_rule)."""
    from rexrank.metrics.registry import metric_class

    return {name: metric_class(name).shard_rule(metric_options.get(name, {})) for name in metrics}


def seconds_per_study(metrics, flavor: str, *, speed: dict | None = None) -> float:
    speed = {**FLAVOR_SPEED, **(speed or {})}
    if flavor not in speed:
        raise PlanError(f"unknown flavour {flavor!r}; known: {', '.join(sorted(speed))} (--flavor, or "
                        "flavor_speed in the store's config.json)")
    factor = speed[flavor]
    non_llm = [m for m in metrics if m not in H100_SECONDS_PER_STUDY]
    llm = [m for m in metrics if m in H100_SECONDS_PER_STUDY]
    if factor is None:  # a CPU flavour: the LLM judges do not run there in any useful time
        if llm:
            raise PlanError(f"{flavor} has no GPU: {', '.join(llm)} need a GPU flavour (--flavor, e.g. a10g-large)")
        return CPU_NON_LLM_SUITE_SECONDS * len(non_llm) / len(NON_LLM_SUITE)
    h100 = H100_NON_LLM_SUITE_SECONDS * len(non_llm) / len(NON_LLM_SUITE) + sum(H100_SECONDS_PER_STUDY[m] for m in llm)
    return h100 / factor


def plan_shards(n_studies: int, metrics, metric_options: dict | None = None, *, flavor: str, max_jobs: int,
                target_shard_hours: float = 0.5, speed: dict | None = None, prices: dict | None = None,
                max_shards: int | None = None) -> ShardPlan:
    """Cut `n_studies` into shards for `metrics` on `flavor` (see the module's note)."""
    if max_jobs < 1:
        raise PlanError(f"--max-jobs must be at least 1, got {max_jobs}")
    metric_options = metric_options or {}
    metrics = tuple(metrics)
    rules = shard_rules(metrics, metric_options)
    align = math.lcm(*(rule.align for rule in rules.values()))
    per_study = seconds_per_study(metrics, flavor, speed=speed)
    prices = {**FLAVOR_PRICES, **(prices or {})}
    if flavor not in prices:
        raise PlanError(f"no price for flavour {flavor!r}: set flavor_prices in the store's config.json")
    units = max(1, math.ceil(n_studies / align))
    wanted = max(1, math.ceil(n_studies * per_study / 3600 / target_shard_hours))
    k = min(wanted, max_jobs, units, max_shards or units)
    why = ""
    refused = [f"{name}: {rule.refusal}" for name, rule in rules.items() if rule.refusal]
    if refused:
        k, why = 1, "; ".join(refused)
    # the first shards take one more batch each where the batches do not divide evenly
    base, extra = divmod(units, k)
    ranges, start = [], 0
    for i in range(k):
        stop = min(n_studies, start + (base + (i < extra)) * align)
        ranges.append((start, stop))
        start = stop
    return ShardPlan(n_studies, tuple(ranges), flavor, align, per_study, prices[flavor], why, metrics)
