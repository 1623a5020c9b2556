"""What a shard Job is given besides its command (rexrank.backend.dispatch.Dispatcher.job_spec),
and whether its LLM judges can run there: a Job inherits nothing from the dispatcher, so
the judges' endpoint and settings travel in its env (keys as secrets), and a local Job gets
this machine's caches; an LLM judge of the metric set no Job can run is an error at start."""
from __future__ import annotations

import os

# what the LLM judges read (rexrank.llm.settings): values in a Job's env, keys as its secrets
LLM_JOB_ENVIRONMENT = ("REXRANK_LLM_BACKEND", "REXRANK_LLM_BASE_URL", "REXRANK_LLM_MODEL", "OPENAI_BASE_URL")
LLM_JOB_SECRETS = ("REXRANK_LLM_API_KEY", "OPENAI_API_KEY")
# where this machine keeps its models, caches and GPUs: what a local Job (this machine) needs to find them
LOCAL_MACHINE_ENVIRONMENT = ("HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "HF_DATASETS_CACHE", "XDG_CACHE_HOME",
                             "TORCH_HOME", "REXRANK_CACHE", "REXRANK_SHARED_MODELS", "REXRANK_ALLOW_DOWNLOAD",
                             "REXRANK_LOCK_WAIT", "STANZA_RESOURCES_DIR", "CUDA_VISIBLE_DEVICES", "TMPDIR")


def judge_backend(name: str, options: dict) -> str:
    """The LLM backend the judge `name` uses with these options and this environment."""
    from rexrank.llm.settings import LLMSettings
    from rexrank.metrics.registry import metric_class

    return LLMSettings(backend=options.get("backend"), base_url=options.get("base_url")).chosen_backend(
        metric_class(name).default_backend)


def job_llm_problem(worker, mode: str) -> str | None:
    """Why an LLM judge of the store's set (or the dispatcher's --metrics; `worker`: its
    rexrank.backend.worker.Worker) cannot run in a Job of `mode`, or None: no endpoint and
    no checkpoint configured for it, an endpoint a Hub Job cannot reach, weights in a folder
    of this machine."""
    from urllib.parse import urlparse

    from rexrank.metrics.llm_common import LLM_METRICS

    if worker.not_scored:
        names, why = ", ".join(sorted(worker.not_scored)), next(iter(worker.not_scored.values()))
        return (f"{names} (LLM judges of the store's metric set) cannot run in any Job: {why}. "
                "Give the dispatcher an endpoint every Job calls (REXRANK_LLM_BASE_URL and REXRANK_LLM_MODEL, a key in "
                f"REXRANK_LLM_API_KEY), or have each Job run the checkpoint itself (--metric-option NAME.backend="
                f"transformers); or score without them (--metrics, or --store-llm-metrics)")
    if mode != "hf-jobs":
        return None
    for name in (m for m in worker.metrics if m in LLM_METRICS):
        options = worker.metric_options.get(name, {})
        url = options.get("base_url") or os.environ.get("REXRANK_LLM_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
        if judge_backend(name, options) == "openai" and url and urlparse(url).hostname in ("localhost", "127.0.0.1", "::1"):
            return (f"{name}'s LLM endpoint {url} is this machine's: a Hub Job cannot reach it. Serve it at an "
                    "address the Jobs reach (REXRANK_LLM_BASE_URL), or run the checkpoint in each Job "
                    f"(--metric-option {name}.backend=transformers)")
        path = options.get("model_path")
        if path and os.path.exists(path):
            return (f"{name}.model_path={path} is a folder of this machine: a Hub Job cannot read it. Give the "
                    f"checkpoint's Hub id instead (--metric-option {name}.model=HUB_ID)")
    return None
