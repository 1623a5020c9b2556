"""A shard Job is self-contained (rexrank.backend.dispatch.Dispatcher.job_spec): everything its
shard needs is in its spec (data location, LLM endpoint and settings, the exact rexrank
build, the store token as a secret), nothing comes from the dispatcher's environment. A
shard run from its spec alone, under `env -i`, gives the dispatcher's numbers."""
from __future__ import annotations

import json
import os
import sys

import pandas as pd
import pytest

from support.paths import shared_path
from support.llm_fake_server import FakeOpenAIServer
from rexrank import __version__
from rexrank.backend.dispatch import Dispatcher, DispatchSettings, default_job_command
from rexrank.backend.job_environment import LOCAL_MACHINE_ENVIRONMENT
from rexrank.backend.jobs import LocalJobs
from rexrank.backend.worker import Worker
from rexrank.store import FAILED, FINISHED, Quota, open_store
from support.llm_judges import judge
from support.dispatch_fixtures import ORG, TOKEN, published, without_seconds
from support.dispatch_fixtures import hub  # noqa: F401 (fixtures)
from support.requests import submit

LLM_VARIABLES = ("REXRANK_LLM_BASE_URL", "REXRANK_LLM_MODEL", "REXRANK_LLM_BACKEND", "OPENAI_BASE_URL",
                 "REXRANK_LLM_API_KEY", "OPENAI_API_KEY")


@pytest.fixture(autouse=True)
def no_llm_in_the_environment(monkeypatch):
    for name in LLM_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def local(**kw) -> DispatchSettings:
    return DispatchSettings(**{**dict(mode="local", flavor="l4x1", max_jobs=3, target_shard_hours=1e-9, poll=0.2), **kw})


def test_a_shard_job_run_from_its_spec_alone_gives_the_dispatchers_numbers(tmp_path, monkeypatch):
    """The judge's endpoint is the dispatcher's environment (REXRANK_LLM_*): each Job runs under
    `env -i` with its spec only, and must call the same judge."""
    with FakeOpenAIServer(judge({})) as server:
        monkeypatch.setenv("REXRANK_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("REXRANK_LLM_MODEL", "judge")
        monkeypatch.setenv("REXRANK_LLM_API_KEY", "sk-judge-key")

        def options(cache: str) -> dict:
            return {"fineradscore": dict(backoff=0.01, max_retries=1, cache_dir=str(tmp_path / cache), progress=False)}

        store = open_store(tmp_path / "s", quota=Quota(0))
        req = submit(store)
        worker = Worker(store, metrics="fineradscore", metric_options=options("c1"), worker_id="d")
        clean = LocalJobs(tmp_path / "jobs", image_environment=())  # env -i: the spec is all a Job has
        assert Dispatcher(worker, clean, local()).run(once=True) == 1
        final = store.get_request(req["id"])
        assert final["status"] == FINISHED, final.get("error")
        assert len(final["dispatch"]["plan"]["ranges"]) == 3
        calls = len(server.requests)
        assert calls >= 19  # the Jobs asked the dispatcher's judge, every study
        single_store = open_store(tmp_path / "single", quota=Quota(0))
        submit(single_store)
        assert Worker(single_store, metrics="fineradscore", metric_options=options("c2"), worker_id="one").run(once=True) == 1
    (record, per_study), (single, single_per_study) = published(store), published(single_store)
    pd.testing.assert_frame_equal(per_study, single_per_study)
    assert without_seconds(record["summaries"]) == without_seconds(single["summaries"])
    for folder in (tmp_path / "jobs").iterdir():  # what each Job was given: the key as a secret only
        given = json.loads((folder / "job.json").read_text())["environment"]
        assert given["REXRANK_LLM_BASE_URL"] == server.base_url and given["REXRANK_LLM_MODEL"] == "judge"
        assert "sk-judge-key" not in json.dumps(given)


def test_a_local_dispatch_reads_the_data_folder_it_was_given(tmp_path):
    """`--dispatch local --data-dir D`: the shards read D, as the dispatcher does (IU-Xray from
    ../shared; without D a Job would have to download it, and offline it cannot)."""
    data = shared_path("data", "iu_xray")
    predictions = shared_path("validation", "moerad_iu", "MoERad.json")
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store, predictions, test_set="iu_xray", data_dir=data)
    worker = Worker(store, data_dir=data, metrics="bleu2", worker_id="d")
    assert Dispatcher(worker, LocalJobs(tmp_path / "jobs"), local(flavor="cpu-basic")).run(once=True) == 1
    final = store.get_request(req["id"])
    assert final["status"] == FINISHED, final.get("error")
    assert len(final["dispatch"]["plan"]["ranges"]) == 3
    single_store = open_store(tmp_path / "single", quota=Quota(0))
    submit(single_store, predictions, test_set="iu_xray", data_dir=data)
    assert Worker(single_store, data_dir=data, metrics="bleu2", worker_id="one").run(once=True) == 1
    (record, per_study), (single, single_per_study) = published(store), published(single_store)
    assert len(per_study) == record["values"]["bleu2"]["n"] > 500
    pd.testing.assert_frame_equal(per_study, single_per_study)
    assert record["values"] == single["values"]


def test_a_job_spec_holds_what_its_shard_needs_and_nothing_inherited(tmp_path, monkeypatch):
    monkeypatch.setenv("REXRANK_CANARY", "the dispatcher's own")
    monkeypatch.setenv("REXRANK_LLM_BASE_URL", "http://judge.example:8000/v1")
    monkeypatch.setenv("REXRANK_LLM_MODEL", "green")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    monkeypatch.setenv("REXRANK_PRIVATE_DATA_REPO", "board/private-data")
    store = open_store(tmp_path / "s", quota=Quota(0))
    worker = Worker(store, data_dir=tmp_path, metrics="bleu2", worker_id="d")
    hub = Dispatcher(worker, None, DispatchSettings(mode="hf-jobs", flavor="cpu-basic", install="rexrank==9.9"))
    command, env, secrets = hub.job_spec("r1", 2, 1)
    args = ["backend-shard", "--store", store.name, "--request", "r1", "--shard", "2", "--attempt", "1"]
    # a Hub machine installs the dispatcher's exact build, then runs the shard
    assert command == ["bash", "-c", 'pip install --quiet "$REXRANK_INSTALL" && exec rexrank "$@"', "rexrank-job", *args]
    assert env == {"HF_HUB_DISABLE_TELEMETRY": "1", "REXRANK_VERSION": __version__, "REXRANK_INSTALL": "rexrank==9.9",
                   "REXRANK_LLM_BASE_URL": "http://judge.example:8000/v1", "REXRANK_LLM_MODEL": "green",
                   "REXRANK_PRIVATE_DATA_REPO": "board/private-data"}  # no data folder, no HF_HOME: it has its own
    assert secrets == {"OPENAI_API_KEY": "sk-openai"}
    # the board's own command and variables, where it sets them
    own = Dispatcher(worker, None, DispatchSettings(mode="hf-jobs", flavor="cpu-basic", install="rexrank==9.9",
                                                    job_command=("python", "shard.py"), job_env={"EXTRA": "x"}))
    command, env, _ = own.job_spec("r1", 2, 1)
    assert command == ["python", "shard.py", *args] and env["EXTRA"] == "x"
    # this machine: its caches, models and GPUs, and the data folder the worker was given
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    command, env, secrets = Dispatcher(worker, None, DispatchSettings(mode="local", flavor="cpu-basic")).job_spec(
        "r1", 0, 1)
    assert command == [*default_job_command(), "backend-shard", "--store", store.name, "--request", "r1", "--shard",
                       "0", "--attempt", "1"]
    machine = {k: os.environ[k] for k in LOCAL_MACHINE_ENVIRONMENT if os.environ.get(k)}
    assert machine["HF_HOME"] == str(tmp_path / "hf")
    assert env == {"HF_HUB_DISABLE_TELEMETRY": "1", "REXRANK_VERSION": __version__,
                   "REXRANK_LLM_BASE_URL": "http://judge.example:8000/v1", "REXRANK_LLM_MODEL": "green", **machine,
                   "REXRANK_DATA_DIR": str(tmp_path.resolve())}
    assert secrets == {"OPENAI_API_KEY": "sk-openai"}


def test_a_hub_stores_jobs_reach_its_endpoint_with_its_token_as_a_secret_only(hub, monkeypatch):
    monkeypatch.delenv("REXRANK_PRIVATE_DATA_REPO", raising=False)
    store = open_store(f"hf://{ORG}", quota=Quota(0))
    d = Dispatcher(Worker(store, metrics="bleu2", worker_id="d"), None,
                   DispatchSettings(mode="hf-jobs", flavor="cpu-basic", install="rexrank==9.9"))
    command, env, secrets = d.job_spec("r1", 0, 1)
    assert secrets == {"HF_TOKEN": TOKEN}
    assert env == {"HF_HUB_DISABLE_TELEMETRY": "1", "REXRANK_VERSION": __version__, "HF_ENDPOINT": hub.url,
                   "REXRANK_INSTALL": "rexrank==9.9"}
    assert TOKEN not in json.dumps([command, env])


def test_a_job_of_another_rexrank_build_scores_nothing(tmp_path, monkeypatch):
    import rexrank.backend.shard_job as shard_job
    from support.dispatch_fixtures import InProcessJobs

    monkeypatch.setattr(shard_job, "__version__", "0.0.1+elsewhere")  # what the Job installed
    store = open_store(tmp_path / "s", quota=Quota(0))
    req = submit(store)
    settings = local(flavor="cpu-basic", shard_attempts=2, poll=0.05)
    assert Dispatcher(Worker(store, metrics="bleu2", worker_id="d"), InProcessJobs(str(tmp_path / "s")), settings).run(
        once=True) == 1
    final = store.get_request(req["id"])
    assert final["status"] == FAILED and store.list_results() == []
    assert f"the Job runs rexrank 0.0.1+elsewhere and the dispatcher {__version__}" in final["error"]
    assert sys.modules["rexrank"].__version__ == __version__
