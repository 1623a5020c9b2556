"""The dispatcher's settings (rexrank.backend.dispatch): the store's `dispatch` block of
config.json (what the backend Space reads), with the command line's flags on top, checked."""
from __future__ import annotations

from dataclasses import dataclass, field

from rexrank import __version__
from rexrank.store import records as R
from rexrank.store.repo import StoreError

CONFIG_KEY = "dispatch"
DEFAULT_IMAGE = "pytorch/pytorch:2.6.0-cuda12.4-cudnn9-runtime"  # pinned: every shard runs on the same stack


@dataclass(frozen=True)
class DispatchSettings:
    mode: str = "local"  # "hf-jobs" or "local"
    flavor: str = "a10g-large"
    llm_flavor: str | None = None  # flavour for a metric set with LLM judges (default: `flavor`)
    max_jobs: int = 4
    gpu_hours_ceiling: float | None = None  # per request
    job_timeout: int = 6 * 3600  # seconds
    shard_attempts: int = 3
    poll: float = 10.0
    target_shard_hours: float = 0.5
    target_wall: int | None = None  # seconds: the Jobs that finish a request within it (all at once)
    image: str = DEFAULT_IMAGE
    install: str = f"rexrank[all]=={__version__}"  # or the wheel `rexrank hub deploy` published
    namespace: str | None = None  # where Jobs run (default: the store's org)
    job_command: tuple[str, ...] = ()  # the rexrank command inside a Job (default: installs `install` first)
    job_env: dict = field(default_factory=dict)
    jobs_dir: str | None = None  # local Jobs' state
    private_data_repo: str | None = None  # Hub Jobs read private test sets there (default $REXRANK_PRIVATE_DATA_REPO)
    flavor_prices: dict = field(default_factory=dict)
    flavor_speed: dict = field(default_factory=dict)
    job_startup: dict | float | None = None  # seconds before a Job's first study: one figure, or by flavour

    def flavor_for(self, metrics) -> str:
        from rexrank.metrics.llm_common import LLM_METRICS

        return (self.llm_flavor or self.flavor) if set(metrics) & set(LLM_METRICS) else self.flavor


_SETTING_TYPES = {"mode": str, "flavor": str, "llm_flavor": str, "max_jobs": int, "gpu_hours_ceiling": float,
                  "job_timeout": int, "shard_attempts": int, "poll": float, "target_shard_hours": float,
                  "target_wall": int, "image": str, "install": str, "namespace": str, "job_command": list,
                  "job_env": dict, "jobs_dir": str, "private_data_repo": str, "flavor_prices": dict,
                  "flavor_speed": dict, "job_startup": (dict, float)}
_DURATIONS = ("job_timeout", "target_wall")


def dispatch_settings(store, **overrides) -> DispatchSettings:
    """The store's `dispatch` settings (config.json, what the backend Space reads), with
    `overrides` (command-line flags; None = not given) on top."""
    from rexrank.store.config import parse_duration, read_config

    config = read_config(store).get(CONFIG_KEY) or {}
    where = f"{store.name}/{R.CONFIG_FILE}: {CONFIG_KEY}"
    if not isinstance(config, dict):
        raise StoreError(f"{where} must be a JSON object")
    values = {}
    for key, value in {**config, **{k: v for k, v in overrides.items() if v is not None}}.items():
        kind = _SETTING_TYPES.get(key)
        if kind is None:
            raise StoreError(f"{where}: unknown setting {key!r}; known: {', '.join(sorted(_SETTING_TYPES))}")
        if key in _DURATIONS and isinstance(value, str):  # "6h": whole seconds
            value = int(parse_duration(value, setting=key, where=where))
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if float in kinds and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kinds) or isinstance(value, bool):
            raise StoreError(f"{where}: {key} must be {' or '.join(k.__name__ for k in kinds)}, got {value!r}")
        values[key] = tuple(value) if key == "job_command" else value
    settings = DispatchSettings(**values)
    if settings.mode not in ("hf-jobs", "local"):
        raise StoreError(f"dispatch mode {settings.mode!r}: expected hf-jobs or local (--dispatch)")
    for key in ("max_jobs", "shard_attempts", "job_timeout"):
        if getattr(settings, key) < 1:
            raise StoreError(f"{key} must be at least 1 (--{key.replace('_', '-')} or {where})")
    if settings.gpu_hours_ceiling is not None and settings.gpu_hours_ceiling <= 0:
        raise StoreError(f"gpu_hours_ceiling must be positive (--gpu-hours-ceiling or {where})")
    if settings.target_wall is not None and settings.target_wall < 1:
        raise StoreError(f"target_wall must be at least 1 second (--target-wall or {where})")
    return settings
