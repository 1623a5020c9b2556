"""The release: `python -m build` gives an sdist and a wheel that pass `twine check` and hold
every data file; and each published Space works from its own files. The wheel is deployed
to the fake Hub, the bleu2 and leaderboard Space folders are downloaded from it, and ONE
fresh venv installs the Spaces' requirements.txt the way the Hub's Space build does (the
file alone, before the Space's files are there: rexrank comes from the wheel in each Space,
by URL), then:
  - `evaluate.load(<bleu2 folder>)` and `evaluate.load("rexrank/bleu2")` (from the Hub)
    score the example set exactly as this checkout does;
  - the leaderboard Space's app.py, configured by the Space variables deploy set, serves
    the seeded published results.
Needs PyPI (or a warm pip cache) for the build and the venv (installed with uv where this venv
has it, else pip): without a reachable package index the tests skip with the reason
(tests/support/package_index.py); deselect with `-m "not fresh_venv"`."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from support.fakehub import FakeHub
from support.hubhelpers import ACCOUNTS, ROOT, WRITE
from support.package_index import no_index_reason

pytestmark = pytest.mark.fresh_venv
SEED_TEST_SET, SEED_TRACK = "iu_xray", "findings"


def run(cmd, **kw):
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


@pytest.fixture(scope="module")
def package_index():
    """Skip, saying why, where pip reaches no package index (checked once, in seconds)."""
    why = no_index_reason()
    if why:
        pytest.skip(why)


@pytest.fixture(scope="module")
def dist(package_index, tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], env={**os.environ, "SOURCE_DATE_EPOCH": "315532800"})
    [wheel], [sdist] = sorted(out.glob("*.whl")), sorted(out.glob("*.tar.gz"))
    return wheel, sdist


def test_sdist_and_wheel_pass_twine_check(dist):
    out = run([sys.executable, "-m", "twine", "check", "--strict", *map(str, dist)]).stdout
    assert out.count("PASSED") == 2


def test_wheel_holds_every_data_file_the_code_reads(dist):
    wheel, _ = dist
    names = set(zipfile.ZipFile(wheel).namelist())
    package_dirs = {ROOT / "src" / "rexrank": "rexrank", ROOT / "datasets_scripts" / "rexrank_datasets": "rexrank_datasets"}
    expected = set()
    for folder, package in package_dirs.items():
        for path in folder.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                expected.add(f"{package}/{path.relative_to(folder).as_posix()}")
    assert expected - names == set()
    assert {"rexrank/data/green_prompt_template.txt", "rexrank/data/spec_cxr_entities.yaml",
            "rexrank/data/published_results.json", "rexrank/data/example_test.json"} <= names


def test_wheel_metadata(dist):
    import rexrank

    wheel, _ = dist
    with zipfile.ZipFile(wheel) as z:
        meta = Parser().parsestr(z.read(f"rexrank-{rexrank.__version__}.dist-info/METADATA").decode())
        assert f"rexrank-{rexrank.__version__}.dist-info/licenses/LICENSE" in z.namelist()
    assert meta["Version"] == rexrank.__version__
    assert meta["License-Expression"] == "MIT"
    assert "Programming Language :: Python :: 3.11" in meta.get_all("Classifier")
    assert any(url.startswith("Homepage, ") for url in meta.get_all("Project-URL"))
    assert meta["Description-Content-Type"] == "text/markdown" and "## Releasing" in meta.get_payload()


def test_deploy_builds_the_same_wheel(dist, tmp_path):
    """deploy's own build is reproducible: an unchanged checkout uploads nothing new."""
    from rexrank.hub.wheel import build_wheel

    assert build_wheel(ROOT, tmp_path).read_bytes() == dist[0].read_bytes()


# ---- the published Spaces, from their own files --------------------------------------------

@pytest.fixture(scope="module")
def deployed(dist, tmp_path_factory):
    import huggingface_hub.constants as constants
    from huggingface_hub import HfApi, snapshot_download

    from rexrank.cli.main import main

    folders = tmp_path_factory.mktemp("spaces")
    with FakeHub(accounts=ACCOUNTS) as hub:
        # the Hub settings only while deploying: this fixture now comes up before the build and
        # twine tests (the early Space install below), which must not run with them
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(constants, "HF_HUB_OFFLINE", False)
            mp.setenv("HF_ENDPOINT", hub.url)
            mp.setenv("HF_TOKEN", WRITE)
            assert main(["hub", "deploy", "--org", "rexrank", "--only", "metrics,leaderboard", "--wheel", str(dist[0])]) == 0
            api = HfApi(endpoint=hub.url, token=WRITE)
            for name in ("bleu2", "leaderboard"):
                snapshot_download(f"rexrank/{name}", repo_type="space", local_dir=folders / name, endpoint=hub.url)
            variables = {k: v.value for k, v in api.get_space_variables("rexrank/leaderboard").items()}
        yield hub, folders, variables


@pytest.fixture(scope="module")
def space_venv(deployed, tmp_path_factory):
    """One venv for the Spaces; `install(name)` adds a Space's requirements.txt as the Space
    build installs it (one install call per Space: two direct URLs to the same wheel, one per
    Space, cannot go into a single call). The bleu2 install starts here, in the background (with
    pip it mostly waits on the package index), so the build and twine tests run meanwhile;
    `install` joins it."""
    hub, folders, _ = deployed
    venv = tmp_path_factory.mktemp("venv")
    # no pip of its own (ensurepip's bundled pip costs seconds and is years older): this
    # checkout's uv or pip installs into it with --python (pip >= 22.3), resolving against the
    # index as pip inside it would
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    done: set[str] = set()
    started: dict[str, tuple[subprocess.Popen, float, Path]] = {}

    def start(name: str) -> None:
        # as the Hub's Space build: requirements.txt alone (mounted at /tmp), run from the
        # still empty app folder; the Space's other files are copied in only afterwards
        build = tmp_path_factory.mktemp(f"build-{name}")
        (build / "app").mkdir()
        shutil.copy(folders / name / "requirements.txt", build / "requirements.txt")
        # the build adds the Space's gradio (sdk_version) to the same install call
        sdk = re.search(r"^sdk_version: (\S+)$", (folders / name / "README.md").read_text(), re.M).group(1)
        requirements = ["-r", str(build / "requirements.txt"), f"gradio[oauth]=={sdk}"]
        uv = Path(sys.executable).with_name("uv")
        if uv.exists():
            # uv resolves these requirements to the same 89 packages and versions as the Hub's pip
            # (compared with `uv pip list` on both venvs), from the cache .ci/run's install filled:
            # 2 s against pip's 30 s idle and over 100 s in CI, where pip fetches ~130 index pages
            # one at a time
            cmd = [str(uv), "pip", "install", "--quiet", "--python", str(python), *requirements]
        else:  # --no-compile, --progress-bar off and --disable-pip-version-check change nothing installed
            cmd = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-compile",
                   "--progress-bar", "off", "--disable-pip-version-check", *requirements]
        log = build / "install.log"
        with log.open("wb") as out:  # a file, not a pipe: nobody reads it while pip runs
            proc = subprocess.Popen(cmd, cwd=build / "app", stdout=out, stderr=subprocess.STDOUT)
        started[name] = (proc, time.monotonic(), log)

    def install(name: str) -> Path:
        if name not in done:
            if name not in started:
                for other, _, _ in started.values():  # never two pip runs in one venv at once
                    other.wait()
                start(name)
            proc, t0, log = started[name]
            proc.wait()
            assert proc.returncode == 0, f"the install of the {name} Space's requirements failed:\n{log.read_text()[-8000:]}"
            print(f"\n{name} Space requirements into the fresh venv: {time.monotonic() - t0:.0f} s")
            wheel = next((folders / name).glob("*.whl")).name
            assert f"GET /spaces/rexrank/{name}/resolve/main/{wheel}" in hub.requests  # the wheel in that Space
            done.add(name)
        return python

    start("bleu2")
    yield install
    for proc, _, _ in started.values():  # a run that never joined it (e.g. -k twine)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module", autouse=True)
def _space_install_first(request):
    """Bring up `space_venv` (so the bleu2 install starts) before the first test of this file,
    when a selected test here needs it."""
    if any(getattr(item, "module", None) is request.module and "space_venv" in getattr(item, "fixturenames", ())
           for item in request.session.items):
        request.getfixturevalue("space_venv")


def venv_env(hub, tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "PYTHON", "VIRTUAL_ENV", "REXRANK_"))}
    env.update(HF_HOME=str(tmp_path / "hf"), HF_ENDPOINT=hub.url, HF_HUB_DISABLE_TELEMETRY="1",
               HF_UPDATE_DOWNLOAD_COUNTS="0", GRADIO_ANALYTICS_ENABLED="False", **extra)
    return env


METRIC_SCRIPT = """
import json, sys, evaluate, rexrank
from rexrank.data import data_path
test = rexrank.load_test_set("example", track="findings")
predictions = json.loads(data_path("example_predictions.json").read_text())
preds = [predictions[i]["model_prediction"] for i in test["id"]]
refs = list(test["reference"])
by_folder = evaluate.load(sys.argv[1]).compute(predictions=preds, references=refs)
by_hub_id = evaluate.load("rexrank/bleu2").compute(predictions=preds, references=refs)
print(json.dumps({"rexrank": rexrank.__file__, "ids": list(test["id"]), "folder": by_folder, "hub": by_hub_id}))
"""


def test_metric_space_scores_the_example_set_in_a_fresh_venv(space_venv, deployed, tmp_path):
    from rexrank import load_test_set
    from rexrank.data import data_path
    from rexrank.metrics.bleu2 import Bleu2

    hub, folders, _ = deployed
    python = space_venv("bleu2")
    proc = run([str(python), "-c", METRIC_SCRIPT, str(folders / "bleu2")], cwd=tmp_path, env=venv_env(hub, tmp_path))
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["rexrank"].startswith(str(python.parents[1]))  # the installed wheel, not this checkout
    test = load_test_set("example", track="findings")
    predictions = json.loads(data_path("example_predictions.json").read_text())
    expected = Bleu2().score([predictions[i]["model_prediction"] for i in test["id"]], list(test["reference"]))
    assert got["ids"] == list(test["id"]) and len(got["ids"]) == 19
    for out in (got["folder"], got["hub"]):
        assert out["per_study"] == expected.primary.tolist()
        assert out["bleu2"] == expected.value


LEADERBOARD_SCRIPT = """
import json, runpy, socket
from gradio_client import Client
namespace = runpy.run_path("app.py", run_name="space_app")
demo = namespace["demo"]
with socket.socket() as s:
    s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
try:
    table = Client(demo.local_url, verbose=False, download_files=False).predict(
        "%s", "%s", "radcliq_v1_inv", "", api_name="/leaderboard")
finally:
    demo.close()
print(json.dumps({"store": namespace["store"].name, "table": table}))
""" % (SEED_TEST_SET, SEED_TRACK)


def test_leaderboard_space_serves_the_seeded_results_in_a_fresh_venv(space_venv, deployed, tmp_path):
    from rexrank.leaderboard.published import load_seed_records

    hub, folders, variables = deployed
    assert variables == {"REXRANK_STORE": "hf://rexrank"}
    # the Space runtime: its variables, and the HF_TOKEN secret the operator sets by hand
    env = venv_env(hub, tmp_path, HF_TOKEN=WRITE, **variables)
    proc = run([str(space_venv("leaderboard")), "-c", LEADERBOARD_SCRIPT], cwd=folders / "leaderboard", env=env)
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["store"] == "hf://rexrank"
    seeded = sorted(r["model_name"] for r in load_seed_records()
                    if (r["test_set"], r["track"]) == (SEED_TEST_SET, SEED_TRACK))
    shown = sorted(row[1].split("](")[0].lstrip("[").replace(" \\*", "") for row in got["table"]["data"])
    assert len(seeded) > 10 and shown == seeded
