"""Issue 39, the first hour round three, on the command line: a test set's folder given once
is remembered and reused by score, submit, analyze, the backend and `load_test_set` (and
named); a moved or changed file is not used; mistyped names get the closest one; progress
on the slow steps; `python -m rexrank`; result files follow the umask; the legend and notes
speak only of what a table shows."""
from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import rexrank.testsets.download as download
from support.paths import PROJECT_ROOT, shared_path
from rexrank.cli.main import main
from rexrank.errors import TestSetError


@pytest.fixture
def offline(monkeypatch):
    """IU-Xray is not in the download cache and cannot be fetched (as offline): it must come
    from a folder the user gave."""
    def refuse(*args, **kwargs):
        raise TestSetError("ReXRank_IUXray_test.json is not cached and HF_HUB_OFFLINE=1 is set (test)")

    monkeypatch.setattr(download, "fetch_pinned", refuse)


@pytest.fixture
def iu_copy(tmp_path):
    """A folder of the user's holding IU-Xray (a copy, so that the test may move or edit it)."""
    folder = tmp_path / "data" / "iu_xray"
    folder.mkdir(parents=True)
    shutil.copy(shared_path("data", "iu_xray", "ReXRank_IUXray_test.json"), folder)
    return folder


PREDS = ("validation", "moerad_iu", "MoERad.json")


def score(*args: str) -> int:
    return main(["score", "--dataset", "iu_xray", "--predictions", str(shared_path(*PREDS)), "--metrics", "bleu2",
                 "--no-progress", *args])


def test_a_folder_given_once_is_reused_by_every_command_and_named(tmp_path, iu_copy, offline, capsys, monkeypatch):
    import rexrank
    import rexrank.testsets.loading as loading

    given = str(iu_copy / "ReXRank_IUXray_test.json")
    assert score("--data-dir", str(iu_copy.parent), "--per-study", str(tmp_path / "a.parquet")) == 0
    assert f"test set: IU-Xray (test), {given} (from --data-dir)" in capsys.readouterr().out
    # no --data-dir from here on: score, submit, the backend, analyze and Python find it, and say so
    assert score("--per-study", str(tmp_path / "b.parquet")) == 0
    out = capsys.readouterr().out
    assert f"test set: IU-Xray (test), {given} (remembered from an earlier --data-dir" in out
    assert "its SHA-256 is unchanged" in out
    store = tmp_path / "store"
    assert main(["submit", "--store", str(store), "--dataset", "iu_xray", "--predictions", str(shared_path(*PREDS)),
                 "--model-name", "Mine", "--submitter", "me", "--no-progress"]) == 0
    assert f"{given} (remembered" in capsys.readouterr().out
    assert main(["backend", "--store", str(store), "--once", "--metrics", "bleu2", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["analyze", f"a={tmp_path / 'a.parquet'}", f"b={tmp_path / 'b.parquet'}", "--out", str(tmp_path / "r"),
                 "--bootstrap", "10", "--no-progress", "--strata", "split"]) == 0
    out = capsys.readouterr().out
    assert f"study attributes: IU-Xray (test), {given} (remembered" in out and "were not loaded" not in out
    monkeypatch.setattr(loading, "_told", set())  # Python in a process of its own: it names the file once
    test = rexrank.load_test_set("iu_xray")
    assert len(test) > 0 and f"read from {given} (remembered" in capsys.readouterr().err


def test_python_data_dir_is_remembered_for_the_commands(iu_copy, offline, capsys):
    import rexrank

    rexrank.load_test_set("iu_xray", data_dir=iu_copy)  # the same rule from Python
    assert score() == 0
    assert "(remembered from an earlier data_dir=: it worked on" in capsys.readouterr().out


def test_a_folder_given_in_the_environment_is_remembered_as_such(iu_copy, offline, capsys, monkeypatch):
    monkeypatch.setenv("REXRANK_DATA_DIR", str(iu_copy))
    assert score() == 0
    monkeypatch.delenv("REXRANK_DATA_DIR")
    capsys.readouterr()
    assert score() == 0
    out = capsys.readouterr().out
    assert "(remembered from an earlier $REXRANK_DATA_DIR: it worked on" in out
    assert "SHA-256 is unchanged; --data-dir names another)" in out  # what this command would take instead


@pytest.mark.parametrize("change", ["edited", "moved"])
def test_a_moved_or_changed_file_is_not_used_and_the_error_says_so(iu_copy, offline, capsys, change):
    assert score("--data-dir", str(iu_copy)) == 0
    capsys.readouterr()
    path = iu_copy / "ReXRank_IUXray_test.json"
    if change == "edited":  # the same studies, other bytes (as an editor's re-save would give)
        path.write_text(json.dumps(json.loads(path.read_text()), indent=3))
    else:
        path.rename(iu_copy / "moved.json")
    assert score() == 1
    err = capsys.readouterr().err
    why = "has changed since (its size differs)" if change == "edited" else "is no longer there"
    assert f"not used: the file remembered from an earlier use, {path} {why}; pass its folder again with --data-dir" in err


def test_the_file_is_checked_by_its_sha256_not_only_its_size(iu_copy, offline, capsys):
    from rexrank.testsets.loading import locate
    from rexrank.testsets.registry import get_spec

    assert score("--data-dir", str(iu_copy)) == 0
    path = iu_copy / "ReXRank_IUXray_test.json"
    data = bytearray(path.read_bytes())
    at = data.index(b"the")  # same size, one letter changed
    data[at:at + 3] = b"The"
    path.write_bytes(bytes(data))
    with pytest.raises(TestSetError, match=r"has changed since \(its SHA-256 differs\)"):
        locate(get_spec("iu_xray"), None)


@pytest.mark.parametrize("argv, hint", [
    (["score", "--dataset", "example", "--predictions", "p.json", "--metrics", "bleu"], "unknown metric(s) 'bleu' (did you mean bleu2?)"),
    (["score", "--dataset", "example", "--predictions", "p.json", "--metrics", "bleu2,bertscor"], "(did you mean bertscore?)"),
    (["score", "--dataset", "example", "--predictions", "p.json", "--metrics", "BLEU,radclique"],
     "(did you mean bleu2 for 'BLEU', radcliq for 'radclique'?)"),
    (["score", "--dataset", "iu-xray", "--predictions", "p.json"], "unknown test set 'iu-xray' (did you mean iu_xray?)"),
    (["score", "--dataset", "example", "--track", "finding", "--predictions", "p.json"], "(did you mean findings?)"),
    (["score", "--dataset", "example", "--predictions", "p.json", "--metric-option", "blue2.x=1"], "(did you mean bleu2?)"),
    (["weights", "status", "sembscor"], "unknown metric(s) 'sembscor' (did you mean sembscore?)"),
])
def test_unknown_names_suggest_the_closest(argv, hint, capsys):
    assert main(argv) == 1
    assert hint in capsys.readouterr().err


def test_an_unknown_per_study_column_suggests_the_closest(tmp_path, capsys):
    from support.analysis_files import write_runs

    paths = write_runs(tmp_path)
    assert main(["analyze", *map(str, paths), "--out", str(tmp_path / "o"), "--attributes", str(tmp_path / "attrs.csv"),
                 "--sites", "--site-metric", "blue2", "--bootstrap", "5", "--no-progress"]) == 1
    assert "no per-study column 'blue2' (did you mean bleu2?)" in capsys.readouterr().err


def test_python_dash_m_runs_the_command():
    done = subprocess.run([sys.executable, "-m", "rexrank", "list"], capture_output=True, text=True, timeout=300,
                          cwd=PROJECT_ROOT, env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT / "src")})
    assert done.returncode == 0, done.stderr
    assert "bleu2" in done.stdout
    version = subprocess.run([sys.executable, "-m", "rexrank", "--version"], capture_output=True, text=True, timeout=300)
    assert version.stdout.startswith("rexrank ")  # named as the command, not "__main__.py"


@pytest.fixture
def umask():
    """Run with a given umask, and put the test runner's back afterwards."""
    before = os.umask(0o022)
    os.umask(before)
    yield lambda mask: os.umask(mask)
    os.umask(before)


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o027, 0o640)])
def test_result_files_follow_the_umask(tmp_path, umask, mask, mode):
    from rexrank.data import data_path

    umask(mask)
    out, per_study, store = tmp_path / "results.json", tmp_path / "scores.parquet", tmp_path / "store"
    assert main(["score", "--dataset", "example", "--predictions", str(data_path("example_predictions.json")),
                 "--out", str(out), "--per-study", str(per_study), "--no-progress"]) == 0
    assert stat.S_IMODE(out.stat().st_mode) == mode and stat.S_IMODE(per_study.stat().st_mode) == mode
    assert main(["submit", "--store", str(store), "--dataset", "example", "--predictions",
                 str(data_path("example_predictions.json")), "--model-name", "M", "--submitter", "me", "--no-progress"]) == 0
    written = [p for p in store.rglob("*") if p.is_file() and not p.name.endswith(".lock")]
    assert written and {oct(stat.S_IMODE(p.stat().st_mode)) for p in written} == {oct(mode)}


def test_slow_steps_show_progress(tmp_path, capsys):
    from rexrank.data import data_path
    from support.analysis_files import write_runs

    paths = write_runs(tmp_path)
    assert main(["analyze", *map(str, paths), "--out", str(tmp_path / "o"), "--bootstrap", "5"]) == 0
    err = capsys.readouterr().err
    assert "analysis: 100%" in err and "figures: 100%" in err
    main(["weights", "status", "bleu2", "bertscore"])
    assert "checking weights: 100%" in capsys.readouterr().err
    assert main(["submit", "--store", str(tmp_path / "s"), "--dataset", "example", "--predictions",
                 str(data_path("example_predictions.json")), "--model-name", "M", "--submitter", "me"]) == 0
    assert "submit: 100%" in capsys.readouterr().err
    main(["weights", "status", "bleu2", "--no-progress"])
    assert "checking weights" not in capsys.readouterr().err


def test_submits_link_opens_the_test_sets_table_on_the_model(tmp_path, iu_copy, capsys):
    assert main(["submit", "--store", str(tmp_path / "s"), "--dataset", "iu_xray", "--predictions",
                 str(shared_path(*PREDS)), "--model-name", "My Model", "--submitter", "me", "--data-dir", str(iu_copy),
                 "--no-progress"]) == 0
    assert "then open http://127.0.0.1:7860/?tab=iu_xray&model=me+%2F+My+Model" in capsys.readouterr().out


def test_readme_gives_the_test_suites_time():
    readme = (PROJECT_ROOT / "README.md").read_text()
    tests = readme.split(".venv/bin/python -m pytest -q", 1)[1][:600]
    assert "minutes" in tests, tests


def test_the_index_is_kept_in_the_users_cache_with_path_hash_and_size(iu_copy, offline):
    from rexrank.testsets.download import sha256_of
    from rexrank.testsets.locations import _index_path

    # an entry without a size and SHA-256 (the index as an earlier version wrote it) cannot be
    # checked: it is not used
    _index_path().parent.mkdir(parents=True, exist_ok=True)
    _index_path().write_text(json.dumps({"iu_xray": [str(iu_copy / "ReXRank_IUXray_test.json")]}))
    assert score() == 1
    assert score("--data-dir", str(iu_copy)) == 0
    entry = json.loads(_index_path().read_text())["iu_xray"][0]
    path = Path(entry["path"])
    assert path == (iu_copy / "ReXRank_IUXray_test.json").resolve()
    assert entry["sha256"] == sha256_of(path) and entry["size"] == path.stat().st_size


def test_a_remembered_copy_other_than_the_pinned_download_is_not_used(iu_copy, monkeypatch):
    """IU-Xray has a pinned download: a copy of other content given once with --data-dir
    must not become every later command's test set."""
    from rexrank.testsets.loading import locate
    from rexrank.testsets.registry import get_spec

    path = iu_copy / "ReXRank_IUXray_test.json"
    data = bytearray(path.read_bytes())
    at = data.index(b"the")
    data[at:at + 3] = b"The"
    path.write_bytes(bytes(data))
    assert score("--data-dir", str(iu_copy)) == 0  # remembered: it loaded
    pinned = shared_path("data", "iu_xray", "ReXRank_IUXray_test.json")
    monkeypatch.setattr(download, "fetch_pinned", lambda *args, **kwargs: pinned)
    located = locate(get_spec("iu_xray"), None)
    assert (located.origin, located.path) == ("download", pinned)

    def refuse(*args, **kwargs):
        raise TestSetError("ReXRank_IUXray_test.json is not cached (test)")

    monkeypatch.setattr(download, "fetch_pinned", refuse)
    with pytest.raises(TestSetError, match=re.escape(f"{path.resolve()} is not the pinned file (its SHA-256 differs)")):
        locate(get_spec("iu_xray"), None)


def test_analyze_uses_no_remembered_file_when_none_has_the_runs_references(tmp_path, iu_copy, offline, capsys):
    """The runs were scored with a copy that is gone since; the pinned copy, with other
    references, is remembered: analyze must not take its attributes from that one."""
    path = iu_copy / "ReXRank_IUXray_test.json"
    studies = json.loads(path.read_text())
    first = next(s for s in studies.values() if s.get("section_findings"))
    first["section_findings"] = "Edited findings."
    path.write_text(json.dumps(studies))
    runs = []
    for name in ("a", "b"):
        assert score("--data-dir", str(iu_copy), "--per-study", str(tmp_path / f"{name}.parquet")) == 0
        runs.append(f"{name}={tmp_path / f'{name}.parquet'}")
    pinned = tmp_path / "pinned"
    pinned.mkdir()
    shutil.copy(shared_path("data", "iu_xray", "ReXRank_IUXray_test.json"), pinned)
    assert score("--data-dir", str(pinned)) == 0
    path.unlink()
    capsys.readouterr()
    assert main(["analyze", *runs, "--out", str(tmp_path / "r"), "--bootstrap", "10", "--no-progress"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert str(pinned) not in printed and "SHA-256 is unchanged" not in printed
    assert ("no file remembered on this machine has the references the per-study files were scored with "
            "(1 passed over), so none is used; pass --data-dir") in printed
    assert "study attributes of iu_xray (named by the per-study files) were not loaded" in printed


def test_python_scoring_and_the_backend_name_a_remembered_file_once_per_process(iu_copy, offline):
    """track_studies / resolve_test_set (Python scoring, the store, the Worker, the dispatcher)
    say on stderr which remembered file they read, as load_test_set does: once per file."""
    import rexrank

    rexrank.load_test_set("iu_xray", data_dir=iu_copy)  # remembered
    code = ("import rexrank\n"
            "from rexrank.testsets.loading import resolve_test_set, track_studies\n"
            "resolve_test_set('iu_xray', 'findings')\n"
            "track_studies('iu_xray', 'findings_impression')\n"
            "print('then load_test_set', file=__import__('sys').stderr)\n"
            "rexrank.load_test_set('iu_xray')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    line = f"rexrank: IU-Xray (test) read from {(iu_copy / 'ReXRank_IUXray_test.json').resolve()} (remembered"
    before, after = done.stderr.split("then load_test_set")
    assert before.count(line) == 1 and line not in after, done.stderr
