"""The mutation audit's table stays valid as the code changes: every mutant mutates text that
stands exactly once in its file, and names tests that exist (the audit itself runs with
`python tests/mutation_audit.py`: it takes minutes per mutant, so not in the suite)."""
from __future__ import annotations

import fnmatch
import hashlib

import pytest

from mutation_audit import MUTANTS, ROOT


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.id)
def test_each_mutant_mutates_one_place_and_names_real_tests(mutant):
    text = (ROOT / mutant.file).read_text(encoding="utf-8")
    assert text.count(mutant.find) == 1, f"{mutant.id}: {mutant.file} holds the text {text.count(mutant.find)} times"
    assert mutant.find != mutant.replace
    for test in mutant.tests:
        path, _, name = test.partition("::")
        assert (ROOT / path).is_file(), test
        if name:
            assert f"def {name.split('[')[0]}(" in (ROOT / path).read_text(encoding="utf-8"), test


def test_mutant_ids_are_unique():
    ids = [m.id for m in MUTANTS]
    assert len(ids) == len(set(ids)) and ids  # an empty table audits nothing


def _mutation_tool():
    import importlib.util

    spec = importlib.util.spec_from_file_location("mutation_tool", ROOT / "benchmarks" / "mutation.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def test_the_mutation_tool_audits_every_module_but_those_excluded_with_a_reason():
    tool = _mutation_tool()
    audited = tool.modules()
    for path in tool.module_files():
        why = tool.exclusion(path)
        assert (why is None) == (tool.label_of(path) in audited), path
        assert why is None or why.strip(), f"{path} is excluded without a reason"
    for pattern in tool.EXCLUDED:
        assert any(fnmatch.fnmatchcase(p, pattern) for p in tool.module_files()), f"EXCLUDED {pattern!r} names no module"
    # a module the issue names is never excluded
    for label in ("backend.dispatch", "backend.shards", "backend.jobs", "backend.merge", "backend.public_door",
                  "backend.privacy", "store.ledger", "store.accounts", "store.names", "leaderboard.identity",
                  "metrics.green_text", "metrics.crimson_text", "metrics.fineradscore_text", "metrics.spec_cxr_text",
                  "analysis.uncertainty", "analysis.strata", "analysis.sites", "analysis.error_rates", "submissions", "scoring"):
        assert label in audited, label


def test_every_audited_module_has_tests_that_exist():
    tool = _mutation_tool()
    assert set(tool.TESTS) <= set(tool.modules()), set(tool.TESTS) - set(tool.modules())
    for label, (path, _, tests) in tool.modules().items():
        assert (tool.SRC / path).is_file(), label
        assert tests, f"{label} has no tests: add tests/<folder>/test_<name>.py or name them in TESTS"
        for test in tests:
            file, _, name = test.partition("::")
            assert (ROOT / file).is_file(), f"{label}: {test}"
            if name:
                assert f"def {name.split('[')[0]}(" in (ROOT / file).read_text(encoding="utf-8"), f"{label}: {test}"


def test_the_mutation_tool_maps_tests_to_functions_again_after_a_test_changed(tmp_path, monkeypatch):
    """mutmut maps tests to the functions they call only for new tests: a test file (or shared
    helper) edited after the mapping makes the tool drop it, so mutmut maps every test again."""
    import os

    tool = _mutation_tool()
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    (tmp_path / "tests" / "support").mkdir(parents=True)
    for name in ("tests/test_x.py", "tests/support/helper.py", "tests/conftest.py", "tests/test_other.py"):
        (tmp_path / name).write_text("")
        os.utime(tmp_path / name, (1000, 1000))
    stats = tmp_path / "mutants" / "x" / "mutants" / "mutmut-stats.json"
    folder = stats.parent.parent
    assert tool.drop_stale_stats(folder, ("tests/test_x.py::test_a",)) is False  # nothing mapped yet
    stats.parent.mkdir(parents=True)
    stats.write_text("{}")
    os.utime(stats, (2000, 2000))
    assert tool.drop_stale_stats(folder, ("tests/test_x.py::test_a",)) is False and stats.exists()
    os.utime(tmp_path / "tests" / "test_other.py", (3000, 3000))  # a test the module does not run
    assert tool.drop_stale_stats(folder, ("tests/test_x.py::test_a",)) is False and stats.exists()
    for edited in ("tests/support/helper.py", "tests/conftest.py", "tests/test_x.py"):
        os.utime(tmp_path / edited, (3000, 3000))
        assert tool.drop_stale_stats(folder, ("tests/test_x.py::test_a",)) is True and not stats.exists()
        stats.write_text("{}")
        os.utime(stats, (2000, 2000))
        os.utime(tmp_path / edited, (1000, 1000))


def test_a_run_after_the_first_names_only_the_mutants_without_a_result(tmp_path, monkeypatch, capsys):
    """mutmut re-runs every mutant a pattern matches, so a stopped run goes on by name."""
    import json

    tool = _mutation_tool()
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    patterns = ("rexrank.x.*",)
    assert tool._not_run_yet("x", "x.py", patterns) == ["rexrank.x.*"]  # first run: the pattern
    meta = tool.workdir("x") / "mutants" / "src" / "rexrank" / "x.py.meta"
    meta.parent.mkdir(parents=True)
    codes = {"rexrank.x.f__mutmut_2": None, "rexrank.x.f__mutmut_1": 1, "rexrank.x.g__mutmut_1": 0,
             "rexrank.x.g__mutmut_3": None, "rexrank.y.h__mutmut_1": None, "rexrank.x.h__mutmut_1": 33,
             "rexrank.x.h__mutmut_2": -24}
    meta.write_text(json.dumps({"exit_code_by_key": codes}))
    assert tool._not_run_yet("x", "x.py", patterns) == ["rexrank.x.f__mutmut_2", "rexrank.x.g__mutmut_3",
                                                         "rexrank.x.h__mutmut_1"]  # 33: no test reached it then
    assert capsys.readouterr().out == ""
    meta.write_text(json.dumps({"exit_code_by_key": {"rexrank.x.f__mutmut_1": 1, "rexrank.x.f__mutmut_2": -24}}))
    assert tool._not_run_yet("x", "x.py", patterns) == []
    assert "every mutant has a result" in capsys.readouterr().out


def test_mutmut_copies_the_top_level_folders_the_tests_read(tmp_path, monkeypatch):
    """mutmut runs its own copy of tests/, whose project root is mutants/<module>/mutants: the
    metric cards and Space apps the tests read must be copied there beside it."""
    import tomllib

    tool = _mutation_tool()
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    for name in ("src", "tests", *tool.PROJECT_FOLDERS):
        (tmp_path / name).mkdir()
    (tmp_path / "pyproject.toml").write_text('[tool.mutmut]\nalso_copy = ["x.cfg"]\n\n[tool.pytest.ini_options]\nmarkers = []\n')
    folder = tool.prepare("metrics.radcliq", "metrics/radcliq.py", ("tests/metrics/test_radcliq.py",))
    settings = tomllib.loads((folder / "pyproject.toml").read_text())["tool"]["mutmut"]
    assert settings["also_copy"] == ["x.cfg", "metrics", "spaces", "datasets_scripts", "leaderboard_space"]
    assert settings["only_mutate"] == ["src/rexrank/metrics/radcliq.py"]
    for name in ("src", "tests", "metrics", "leaderboard_space"):
        assert (folder / name).resolve() == tmp_path / name


def test_a_mutant_file_left_empty_or_cut_short_by_a_stopped_run_is_written_again(tmp_path, monkeypatch, capsys):
    """mutmut never rewrites a mutated file newer than its source: one that a stopped run left
    empty or cut short is removed before the next run, and a whole one is kept."""
    tool = _mutation_tool()
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    monkeypatch.setattr(tool, "SRC", tmp_path / "src" / "rexrank")
    for name in ("tests", *tool.PROJECT_FOLDERS):
        (tmp_path / name).mkdir()
    (tmp_path / "src" / "rexrank" / "store").mkdir(parents=True)
    (tmp_path / "src" / "rexrank" / "store" / "records.py").write_text("ACCOUNTS_DIR = 'accounts'\n")
    (tmp_path / "pyproject.toml").write_text("[tool.mutmut]\n\n[tool.pytest.ini_options]\nmarkers = []\n")
    written = tmp_path / "mutants" / "store.records" / "mutants" / "src" / "rexrank" / "store" / "records.py"
    written.parent.mkdir(parents=True)
    for text, kept in (("", False), ("def f(:\n", False), ("ACCOUNTS_DIR = 'accounts'\n", True)):
        written.write_text(text)
        tool.prepare("store.records", "store/records.py", ("tests/store/test_records.py",))
        assert written.exists() is kept, text
        said = capsys.readouterr().out
        assert said == ("" if kept else "   mutants/src/rexrank/store/records.py was left half written by a stopped run: "
                                        "written again\n")
    written.unlink()
    (tmp_path / "src" / "rexrank" / "store" / "records.py").write_text("")
    written.write_text("")  # an empty module's mutants are an empty file
    tool.prepare("store.records", "store/records.py", ("tests/store/test_records.py",))
    assert written.exists()


def test_stopping_the_tool_ends_mutmut_and_every_process_it_started(tmp_path):
    """A SIGTERM to the tool ends the process group it started (mutmut, its fork server, the
    mutant under test): none of them outlives it to race the next run."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    grandchild = tmp_path / "grandchild.pid"
    # stands in for mutmut: starts a process of its own (the fork server) and waits
    command = [sys.executable, "-c",
               "import subprocess, sys, time; p = subprocess.Popen(['sleep', '60']); "
               f"open({str(grandchild)!r}, 'w').write(str(p.pid)); time.sleep(60)"]
    driver = (f"import importlib.util, sys; spec = importlib.util.spec_from_file_location('t', {str(ROOT / 'benchmarks' / 'mutation.py')!r}); "
              "t = importlib.util.module_from_spec(spec); spec.loader.exec_module(t); "
              f"t.run_as_one_group({command!r})")
    tool = subprocess.Popen([sys.executable, "-c", driver])
    deadline = time.monotonic() + 30
    while not (grandchild.exists() and grandchild.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = int(grandchild.read_text())
    tool.send_signal(signal.SIGTERM)
    assert tool.wait(timeout=30) == 128 + signal.SIGTERM

    def alive() -> bool:  # a killed process no one has reaped yet (a zombie) is gone too
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except FileNotFoundError:
            return False

    deadline = time.monotonic() + 10
    while alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    if alive():
        os.kill(pid, signal.SIGKILL)
        raise AssertionError("the process mutmut started outlived the stopped tool")


MUTATED_MODULE = '''
def f__mutmut_orig(a, c=0):
    b = a + 1
    return b * 2

def f__mutmut_1(a, c=0):
    b = a - 1
    return b * 2

def f__mutmut_2(a, c=0):
    b = a + 1
    return b / 2

def f__mutmut_3(a, c=1):
    b = a + 1
    return b * 2
'''


def test_an_equivalent_record_counts_only_for_the_change_it_was_written_for(tmp_path, monkeypatch, capsys):
    """mutmut numbers a function's mutants in order, so a changed function renumbers them and a
    record by name alone may hide another, real survivor: a record holds the fingerprint of its
    mutant's change, and one that does not match (or has none) is listed and counts for nothing."""
    import json

    tool = _mutation_tool()
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    mutated = tool.workdir("x") / "mutants" / "src" / "rexrank" / "x.py"
    mutated.parent.mkdir(parents=True)
    mutated.write_text(MUTATED_MODULE)
    (mutated.parent / "x.py.meta").write_text(json.dumps({"exit_code_by_key": {"rexrank.x.f__mutmut_1": 0,
                                                                               "rexrank.x.f__mutmut_2": 0}}))
    prints = tool.mutant_fingerprints("x", "x.py")
    assert sorted(prints) == ["rexrank.x.f__mutmut_1", "rexrank.x.f__mutmut_2", "rexrank.x.f__mutmut_3"]
    # each change its own, a default in the signature too (not the fingerprint of no change)
    no_change = hashlib.sha256(b"").hexdigest()[:10]
    assert len(set(prints.values()) | {no_change}) == 4 and all(len(p) == 10 for p in prints.values())
    # the fingerprint is the change's, not the function's: an unchanged line elsewhere leaves it
    mutated.write_text(MUTATED_MODULE.replace("return b * 2", "return (b * 2)"))
    assert tool.mutant_fingerprints("x", "x.py")["rexrank.x.f__mutmut_1"] == prints["rexrank.x.f__mutmut_1"]
    mutated.write_text(MUTATED_MODULE)

    records = tmp_path / "equivalents.txt"
    records.write_text(f"rexrank.x.f__mutmut_1  @{prints['rexrank.x.f__mutmut_1']}  # why 1\n"
                       f"rexrank.x.f__mutmut_2  @{prints['rexrank.x.f__mutmut_1']}  # written for another change\n")
    equivalents = tool.load_equivalents(records)
    assert equivalents["rexrank.x.f__mutmut_1"] == (prints["rexrank.x.f__mutmut_1"], "why 1")
    chosen = {"x": ("x.py", ("rexrank.x.*",), ("tests/test_x.py",))}
    assert tool.report(chosen, equivalents) == 1
    out = capsys.readouterr().out
    assert "| x | 2 | 0 | 1 | 0 | 1 | 0 | 0.0 % |" in out
    assert f"  rexrank.x.f__mutmut_2  @{prints['rexrank.x.f__mutmut_2']}" in out  # the fingerprint to record
    assert out.split("record(s) in")[1].split("\n", 1)[1].split() == ["rexrank.x.f__mutmut_2"]
    records.write_text("rexrank.x.f__mutmut_1  # never pinned\n")
    assert tool.report(chosen, tool.load_equivalents(records)) == 1
    assert "| x | 2 | 0 | 2 | 0 | 0 | 0 |" in capsys.readouterr().out
    records.write_text("rexrank.x.f__mutmut_1  @12345  # a short fingerprint\n")
    with pytest.raises(SystemExit, match="'@12345' is not a fingerprint"):
        tool.load_equivalents(records)


def test_a_parts_kills_count_for_its_module_only_with_tests_the_module_runs_on_the_same_code(tmp_path, monkeypatch):
    """A part runs some of a module's mutants against fewer, faster tests. A mutant the part
    killed is killed in the module's run too when the part's tests are among the module's and
    the function is the code the part ran (mutmut's hash): the module's run then takes only the
    rest. A part's survivor, a part with a test the module does not run, or a function changed
    since the part ran, count for nothing."""
    import json

    tool = _mutation_tool()
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    monkeypatch.setattr(tool, "PARTS", {"x (fast)": ("x.py", ("rexrank.x.*",), ("tests/test_x.py::test_fast",)),
                                        "x (other)": ("x.py", ("rexrank.x.*",), ("tests/test_other.py",))})

    def meta(label, codes, hashes):
        path = tool.workdir(label) / "mutants" / "src" / "rexrank" / "x.py.meta"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"exit_code_by_key": codes, "hash_by_function_name": hashes}))

    names = [f"rexrank.x.x_{f}__mutmut_{i}" for f in ("f", "g") for i in (1, 2, 3)]
    meta("x", dict.fromkeys(names), {"x_f": "aaa", "x_g": "bbb"})
    meta("x (fast)", dict(zip(names, (1, 0, -24, 3, 1, None))), {"x_f": "aaa", "x_g": "changed"})
    meta("x (other)", dict.fromkeys(names, 1), {"x_f": "aaa", "x_g": "bbb"})  # tests/test_other.py: not the module's
    module = {"x": ("x.py", ("rexrank.x.*",), ("tests/test_x.py",))}
    assert tool.results(module)["x"] == {**dict.fromkeys(names), "rexrank.x.x_f__mutmut_1": 1}
    assert tool._not_run_yet("x", "x.py", ("rexrank.x.*",), ("tests/test_x.py",)) == names[1:]
    meta("x (fast)", dict(zip(names, (1, 0, -24, 3, 1, None))), {"x_f": "aaa", "x_g": "bbb"})  # g as the module has it
    assert tool.results(module)["x"] == {**dict.fromkeys(names), "rexrank.x.x_f__mutmut_1": 1,
                                         "rexrank.x.x_g__mutmut_1": 3, "rexrank.x.x_g__mutmut_2": 1}
    meta("x", {**dict.fromkeys(names), "rexrank.x.x_g__mutmut_1": 0}, {"x_f": "aaa", "x_g": "bbb"})
    assert tool.results(module)["x"]["rexrank.x.x_g__mutmut_1"] == 0  # the module's own verdict stands
    assert tool.results({"x (fast)": tool.PARTS["x (fast)"]})["x (fast)"]["rexrank.x.x_f__mutmut_2"] == 0


def test_mutmut_and_its_tests_receive_hangups_when_the_tool_was_started_under_nohup():
    """Under nohup a local Job inherits an ignored SIGHUP, and `os.kill(pid, 1)` for
    `os.kill(pid, 0)` survived (backend.jobs' `_alive`)."""
    import signal
    import subprocess
    import sys

    tool = _mutation_tool()
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        tool.hangups_reach_the_tests()
        child = subprocess.run([sys.executable, "-c", "import signal; print(signal.getsignal(signal.SIGHUP) == signal.SIG_DFL)"],
                               capture_output=True, text=True, check=True)
    finally:
        signal.signal(signal.SIGHUP, before)
    assert child.stdout.strip() == "True"
