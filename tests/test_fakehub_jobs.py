"""The fake Hub's Jobs API (tests/support/fakehub.py) is the real one's shape, checked against the
installed huggingface_hub: what run_job may send, what JobInfo / JobStatus / JobHardwareInfo
read back, the hardware flavours; and it behaves as the Hub does: a token is required, an
unknown flavour is refused, a Job sees only what run_job gave it."""
from __future__ import annotations

import dataclasses
import inspect
import json
import sys
import time

import pytest

from support.fakehub import (JOB_INFO_NOT_SERVED, JOB_SPEC_FIELDS, JOB_STATUS_NOT_SERVED, RUN_JOB_PARAMETERS, Account,
                     FakeHub)

TOKEN, ORG = "hf_jobs_token_1", "board"
PRINT_ENV = [sys.executable, "-c", "import json, os; print(json.dumps(dict(os.environ)))"]


@pytest.fixture
def hub(monkeypatch):
    import huggingface_hub.constants as constants

    with FakeHub(accounts={TOKEN: Account("organiser", orgs=(ORG,)), "hf_read": Account("reader", (ORG,), "read"),
                           "hf_other": Account("stranger")}) as fake:
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.delenv("HF_TOKEN", raising=False)
        yield fake


def api(hub, token=TOKEN):
    from huggingface_hub import HfApi

    return HfApi(endpoint=hub.url, token=token)


def finished(hub, job_id: str, timeout: float = 120.0):
    """The Job's answer once it ended (waits on its state)."""
    deadline = time.time() + timeout
    while True:
        info = api(hub).inspect_job(job_id=job_id, namespace=ORG)
        if info.status.stage in ("COMPLETED", "ERROR", "CANCELED", "DELETED"):
            return info
        assert time.time() < deadline, f"Job {job_id} still {info.status.stage}"
        time.sleep(0.05)


def test_run_job_parameters_are_the_installed_huggingface_hub_ones():
    """A parameter huggingface_hub adds to run_job, or a spec field it starts sending, fails here
    until the fake either runs it or refuses it on purpose."""
    from huggingface_hub import HfApi
    from huggingface_hub._jobs_api import _create_job_spec

    parameters = set(inspect.signature(HfApi.run_job).parameters) - {"self"}
    assert parameters == set(RUN_JOB_PARAMETERS)
    # every field the installed client can build, with every option it has set, is one the fake knows
    from huggingface_hub import Volume

    volume = Volume(type="dataset", source="org/data", mount_path="/data")
    spec = _create_job_spec(image="python:3.12", command=["true"], env={"A": "1"}, secrets={"B": "2"}, flavor="cpu-basic",
                            timeout="1h", name="n", labels={"k": "v"}, volumes=[volume], expose=[8000],
                            expose_public=[8001], ssh=True, network_group="g", network_aliases=["a"],
                            resource_group_id="r", attempts=2)
    assert set(spec) <= set(JOB_SPEC_FIELDS), set(spec) - set(JOB_SPEC_FIELDS)
    # each parameter lands in the field the fake maps it to ("arguments": always sent, empty)
    assert {field for field in RUN_JOB_PARAMETERS.values() if field} | {"arguments"} == set(spec)
    space = _create_job_spec(image="hf.co/spaces/org/app", command=["true"], env=None, secrets=None, flavor=None,
                             timeout=None)
    assert set(space) <= set(JOB_SPEC_FIELDS) and "spaceId" in space


def test_the_fake_answers_every_field_the_installed_dataclasses_read(hub):
    from huggingface_hub import JobHardware, JobHardwareInfo, JobInfo, JobStatus

    info = api(hub).run_job(image="python:3.12", command=[sys.executable, "-c", "print('hi')"], namespace=ORG,
                            env={"A": "1"}, secrets={"B": "2"}, labels={"k": "v"}, flavor="cpu-basic", timeout=60)
    done = finished(hub, info.id)
    fields = {f.name for f in dataclasses.fields(JobInfo)}
    assert set(JOB_INFO_NOT_SERVED) <= fields  # no stale names in the fake's list
    for answer, not_yet in ((info, {"finished_at"}), (done, set())):  # a running Job has not finished
        unset = {f for f in fields if getattr(answer, f) is None}
        assert unset == set(JOB_INFO_NOT_SERVED) | not_yet, unset ^ (set(JOB_INFO_NOT_SERVED) | not_yet)
        status_fields = {f.name for f in dataclasses.fields(JobStatus)}
        assert set(JOB_STATUS_NOT_SERVED) <= status_fields
        assert {f for f in status_fields if getattr(answer.status, f) is None} - {"message"} == set(JOB_STATUS_NOT_SERVED)
    assert done.status.stage == "COMPLETED" and done.secrets == ["B"] and done.environment == {"A": "1"}
    assert done.durations.running_secs is not None and done.owner.name == ORG
    hardware = api(hub).list_jobs_hardware()
    assert [h.name for h in hardware] == [flavor.value for flavor in JobHardware]
    for entry in hardware:
        unset = {f.name for f in dataclasses.fields(JobHardwareInfo) if getattr(entry, f.name) is None}
        assert unset == ({"accelerator"} if entry.name.startswith("cpu-") else set()), (entry.name, unset)
        assert entry.unit_label == "minute" and entry.unit_cost_usd > 0


def test_a_job_sees_only_its_command_env_and_secrets(hub, monkeypatch):
    monkeypatch.setenv("REXRANK_CANARY", "from the caller")
    monkeypatch.setenv("HF_TOKEN", TOKEN)  # the caller's token: the Job gets it only as a secret it is given
    info = api(hub).run_job(image="python:3.12", command=PRINT_ENV, env={"GIVEN": "env"}, secrets={"KEY": "secret"},
                            flavor="cpu-basic", namespace=ORG)
    assert finished(hub, info.id).status.stage == "COMPLETED"
    seen = json.loads(hub.jobs[info.id].logs[-1][1])
    assert seen["GIVEN"] == "env" and seen["KEY"] == "secret"
    assert set(seen) <= {"GIVEN", "KEY", "PATH", "HOME", "PWD", "LC_CTYPE", "SHLVL", "_"}, set(seen)
    assert seen["HOME"] != str(__import__("pathlib").Path.home())  # the image's home, not the caller's


def test_every_jobs_call_needs_a_token_of_the_namespace(hub):
    from huggingface_hub.errors import HfHubHTTPError

    job = api(hub).run_job(image="python:3.12", command=[sys.executable, "-c", "pass"], namespace=ORG)
    calls = {
        "run": lambda a: a.run_job(image="python:3.12", command=["true"], namespace=ORG),
        "inspect": lambda a: a.inspect_job(job_id=job.id, namespace=ORG),
        "list": lambda a: list(a.list_jobs(namespace=ORG)),
        "cancel": lambda a: a.cancel_job(job_id=job.id, namespace=ORG),
        "logs": lambda a: list(a.fetch_job_logs(job_id=job.id, namespace=ORG)),
    }
    for name, call in calls.items():
        for token, status in ((False, 401), ("hf_unknown", 401), ("hf_other", 403)):
            with pytest.raises(HfHubHTTPError) as caught:
                call(api(hub, token))
            assert caught.value.response.status_code == status, (name, token)
    for name in ("run", "cancel"):  # a read token may look, not start or stop
        with pytest.raises(HfHubHTTPError) as caught:
            calls[name](api(hub, "hf_read"))
        assert caught.value.response.status_code == 403
    assert api(hub, "hf_read").inspect_job(job_id=job.id, namespace=ORG).id == job.id


@pytest.mark.parametrize("flavor", ["h100", "h100x8", "a10", "H200"])
def test_a_flavour_the_hub_does_not_have_is_refused(hub, flavor):
    from huggingface_hub.errors import HfHubHTTPError

    with pytest.raises(HfHubHTTPError) as caught:
        api(hub).run_job(image="python:3.12", command=["true"], flavor=flavor, namespace=ORG)
    assert caught.value.response.status_code == 400 and f"Invalid flavor '{flavor}'" in str(caught.value)
    assert hub.jobs == {}


def test_what_the_fake_cannot_run_is_refused_not_ignored(hub):
    from huggingface_hub import Volume
    from huggingface_hub.errors import HfHubHTTPError

    for extra in ({"volumes": [Volume(type="dataset", source="org/data", mount_path="/data")]}, {"expose": [8000]},
                  {"ssh": True}, {"attempts": 2}):
        with pytest.raises(HfHubHTTPError, match="does not run Jobs with"):
            api(hub).run_job(image="python:3.12", command=["true"], namespace=ORG, **extra)
    assert hub.jobs == {}
