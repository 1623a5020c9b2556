"""What `rexrank hub deploy` would publish (the plan), its requirements.txt rewriting, the
Spaces' configuration and `--dry-run`. No Hub writes here (see tests/hub/test_deploy.py)."""
from __future__ import annotations

import hashlib
import json
import shutil

import pytest
import yaml
from packaging.specifiers import SpecifierSet

from support.hubhelpers import ROOT, deploy, hub, stand_in_wheel, version  # noqa: F401  (hub is a fixture)
from rexrank.hub import DeployError, build_plan
from rexrank.hub.manifest import MANIFEST
from rexrank.hub.requirements import extras, pin_rexrank
from support.paths import shared_path

SPACE_FOLDERS = [f"metrics/{p.name}" for p in sorted((ROOT / "metrics").iterdir()) if p.is_dir()] + [
    "leaderboard_space", "spaces"]


def plan(tmp_path, **kw):
    kw.setdefault("wheel", stand_in_wheel(tmp_path))
    return build_plan("rexrank", source=ROOT, version=version(), **kw)


def by_id(p):
    return {r.repo_id: r for r in p.repos}


# ---- requirements.txt -----------------------------------------------------------------

REQS = "# comment\n--extra-index-url https://download.pytorch.org/whl/cpu\ntorch==2.13.0\nrexrank[spaces,models]>=0.1.0\n"


def test_pin_rexrank_rewrites_only_the_rexrank_line():
    url = "https://huggingface.co/spaces/o/x/resolve/main/rexrank-0.1.0-py3-none-any.whl#sha256=ab"
    out = pin_rexrank(REQS, "r.txt", wheel_url=url)
    assert out.splitlines()[:3] == REQS.splitlines()[:3]
    assert out.splitlines()[3] == f"rexrank[models,spaces] @ {url}"
    assert pin_rexrank(REQS, "r.txt", wheel_file="rexrank-0.1.0-py3-none-any.whl").splitlines()[3] == \
        "./rexrank-0.1.0-py3-none-any.whl[models,spaces]"
    assert pin_rexrank(REQS, "r.txt", version="0.1.0").splitlines()[3] == "rexrank[models,spaces]==0.1.0"
    assert extras(REQS, "r.txt") == ["models", "spaces"]


@pytest.mark.parametrize("text", ["torch==2.13.0\n", "rexrank[a]>=1\nrexrank[b]>=1\n"])
def test_pin_rexrank_wants_exactly_one_rexrank_line(text):
    with pytest.raises(DeployError, match="metrics/x/requirements.txt: expected exactly one"):
        pin_rexrank(text, "metrics/x/requirements.txt", version="0.1.0")


# ---- the Space folders as checked in ------------------------------------------------------

def front_matter(path):
    return yaml.safe_load(path.read_text(encoding="utf-8").split("\n---\n", 1)[0].removeprefix("---\n"))


@pytest.mark.parametrize("folder", SPACE_FOLDERS)
def test_space_config_builds_on_the_hub(folder):
    import tomllib

    import gradio

    meta = front_matter(ROOT / folder / "README.md")
    requires = SpecifierSet(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"])
    if folder == "spaces":  # private backend: Docker, which copies the wheel in before installing
        assert meta["sdk"] == "docker" and meta["app_port"] == 7860
        dockerfile = (ROOT / folder / "Dockerfile").read_text()
        copy, install = dockerfile.index("COPY --chown=user . ."), dockerfile.index("pip install --no-cache-dir -r requirements.txt")
        assert copy < install
        python = dockerfile.split("FROM python:", 1)[1].split("-", 1)[0]
    else:  # the Hub's default Python (3.10) cannot install rexrank
        assert meta["sdk"] == "gradio" and meta["app_file"] == "app.py"
        assert meta["sdk_version"] == gradio.__version__
        python = meta["python_version"]
    assert python in requires, f"{folder}: Python {python} does not satisfy requires-python {requires}"
    reqs = (ROOT / folder / "requirements.txt").read_text()
    assert extras(reqs, folder)  # exactly one rexrank line
    if "models" in extras(reqs, folder) and folder != "spaces":  # CPU Spaces get the CPU build of torch
        assert "--extra-index-url https://download.pytorch.org/whl/cpu" in reqs and "torch==2.13.0" in reqs


# ---- the plan ---------------------------------------------------------------------------

def test_plan_holds_every_piece(tmp_path):
    p = plan(tmp_path)
    repos = by_id(p)
    metrics = sorted(x.name for x in (ROOT / "metrics").iterdir() if x.is_dir())
    assert set(repos) == {f"rexrank/{m}" for m in metrics} | {
        "rexrank/leaderboard", "rexrank/backend", "rexrank/requests", "rexrank/results"}
    wheel = stand_in_wheel(tmp_path)
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    for name in metrics:
        repo = repos[f"rexrank/{name}"]
        assert (repo.repo_type, repo.sdk, repo.private) == ("space", "gradio", False)
        assert {f"{name}.py", "README.md", "app.py", "requirements.txt", wheel.name, MANIFEST} == set(repo.files)
        assert repo.files[f"{name}.py"] == (ROOT / "metrics" / name / f"{name}.py").read_bytes()
        line = [x for x in repo.files["requirements.txt"].decode().splitlines() if x.startswith("rexrank")][0]
        checked_in = extras((ROOT / "metrics" / name / "requirements.txt").read_text(), name)
        assert line == (f"rexrank[{','.join(checked_in)}] @ https://huggingface.co/spaces/rexrank/{name}/resolve/main/"
                        f"{wheel.name}#sha256={sha}")
    board, backend = repos["rexrank/leaderboard"], repos["rexrank/backend"]
    assert board.variables == {"REXRANK_STORE": "hf://rexrank"} == backend.variables
    assert "HF_TOKEN" in board.secrets and "HF_TOKEN" in backend.secrets
    assert (backend.private, backend.sdk) == (True, "docker")
    # the Docker backend installs after copying the Space's files, the wheel among them
    assert f"./{wheel.name}[llm,models,spaces]" in backend.files["requirements.txt"].decode()
    assert backend.files[wheel.name] == wheel.read_bytes() and "Dockerfile" in backend.files
    assert repos["rexrank/requests"].private and not repos["rexrank/results"].private
    seed = repos["rexrank/results"].seed
    assert sum(p.startswith("records/") for p in seed) == 128 and "index/layout.json" in seed
    manifest = json.loads(board.files[MANIFEST])
    assert set(manifest["files"]) == set(board.files) - {MANIFEST}
    assert manifest["files"]["app.py"] == hashlib.sha256(board.files["app.py"]).hexdigest()


def test_plan_from_pypi_has_no_wheel(tmp_path):
    p = plan(tmp_path, wheel=None)
    for repo in p.repos:
        assert not any(f.endswith(".whl") for f in repo.files)
    assert "rexrank[spaces]==" + version() in by_id(p)["rexrank/bleu2"].files["requirements.txt"].decode()


def test_only_picks_groups(tmp_path):
    assert set(by_id(plan(tmp_path, groups=("backend",)))) == {"rexrank/backend", "rexrank/requests", "rexrank/results"}
    assert all(r.role == "metric" for r in plan(tmp_path, groups=("metrics",)).repos)


@pytest.mark.parametrize("org", ["", "a/b", "bad org", "-x"])
def test_bad_org_names_are_refused(org, tmp_path):
    with pytest.raises(DeployError, match="--org"):
        build_plan(org, source=ROOT, version=version(), wheel=stand_in_wheel(tmp_path))


def test_only_public_test_sets_become_repos(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(shared_path("data", "iu_xray", "ReXRank_IUXray_test.json"), data)
    (data / "ReXRank_MIMICCXR_test.json").write_text("{}")  # credentialed: must never be picked up
    (data / "ReXGradient_test.json").write_text("{}")
    repos = by_id(plan(tmp_path, groups=("data",), data_dir=data))
    assert set(repos) == {"rexrank/iu_xray"}
    repo = repos["rexrank/iu_xray"]
    assert not repo.private and set(repo.files) == {"README.md", "data/test-00000-of-00001.parquet", "eval.yaml", MANIFEST}
    meta = front_matter_bytes(repo.files["README.md"])
    assert meta["license"] == "cc-by-nc-nd-4.0"
    assert meta["configs"] == [{"config_name": "default",
                                "data_files": [{"split": "test", "path": "data/test-00000-of-00001.parquet"}]}]
    assert "CC BY-NC-ND 4.0" in repo.files["README.md"].decode()


def test_a_changed_test_set_file_is_not_published(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    raw = json.loads(shared_path("data", "iu_xray", "ReXRank_IUXray_test.json").read_text())
    first = next(iter(raw))
    raw[first]["section_findings"] = "edited"
    (data / "ReXRank_IUXray_test.json").write_text(json.dumps(raw))
    with pytest.raises(DeployError, match="not the pinned ReXrank file"):
        plan(tmp_path, groups=("data",), data_dir=data)


def front_matter_bytes(data: bytes):
    return yaml.safe_load(data.decode().split("\n---\n", 1)[0].removeprefix("---\n"))


# ---- --dry-run --------------------------------------------------------------------------

def test_dry_run_prints_the_plan_and_contacts_nothing(hub, tmp_path, capsys):
    wheel = stand_in_wheel(tmp_path)
    assert deploy("--dry-run", "--wheel", str(wheel)) == 0
    out = capsys.readouterr().out
    assert hub.requests == []  # not even a read
    assert hub.repos == {}
    for repo in ("rexrank/bleu2", "rexrank/radcliq", "rexrank/leaderboard", "rexrank/backend", "rexrank/requests",
                 "rexrank/results"):
        assert repo in out
    assert f"{wheel.name}" in out and "bleu2.py" in out and " B" in out
    assert "secret HF_TOKEN (required)" in out and "dry run: nothing was written" in out


def test_wheel_of_another_version_is_refused(hub, tmp_path, capsys):
    wheel = tmp_path / "rexrank-9.9.9-py3-none-any.whl"
    wheel.write_bytes(b"PK")
    assert deploy("--dry-run", "--wheel", str(wheel)) == 1
    assert "rexrank 9.9.9, the checkout is" in capsys.readouterr().err
