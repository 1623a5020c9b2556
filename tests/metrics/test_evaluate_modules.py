"""evaluate conventions of every module: the name users type, an inputs_description
that documents every option with a runnable example, and cards that show the Hub id."""
from __future__ import annotations

import dataclasses
import doctest
import inspect
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NAMES = sorted(p.name for p in (ROOT / "metrics").iterdir() if (p / f"{p.name}.py").is_file())


def load(name):
    import evaluate

    return evaluate.load(str(ROOT / "metrics" / name))


def documented_options(text: str) -> list[str]:
    section = text.split("Options (keyword arguments of `compute`):", 1)
    if len(section) == 1:
        return []
    body = section[1].split("\nReturns:", 1)[0]
    return re.findall(r"^    (\w+) \(", body, flags=re.M)


def test_every_metric_has_a_module():
    assert NAMES == ["bertscore", "bleu2", "crimson", "fineradscore", "green", "radcliq", "radgraph", "ratescore",
                     "rouge", "sembscore", "spec_cxr", "srr_bert", "temporal_f1"]


@pytest.mark.parametrize("name", NAMES)
def test_module_name_is_the_name_users_type(name):
    import evaluate

    module = load(name)
    assert module.name == name
    assert evaluate.combine([module]).evaluation_modules[0].name == name  # combine prefixes keys with it


@pytest.mark.parametrize("name", NAMES)
def test_inputs_description_documents_every_option(name):
    from rexrank.llm import LLMSettings
    from rexrank.metrics.registry import metric_class

    text = load(name).inputs_description
    options = documented_options(text)
    cls = metric_class(name)
    plumbing = ("llm_options", "args", "kwargs", "run_context")  # run_context: set by a scoring run, not by users
    own = [p for p in list(inspect.signature(cls.__init__).parameters)[1:] if p not in plumbing]
    assert set(own) <= set(options), f"{name}: options of {cls.__name__}.__init__ missing from the description"
    if name in ("green", "crimson", "fineradscore", "spec_cxr"):
        assert {f.name for f in dataclasses.fields(LLMSettings)} | {"progress"} <= set(options)
    assert len(options) == len(set(options))
    assert "(undocumented)" not in text
    assert "predictions (list of str)" in text and "references (list of str)" in text
    assert f'evaluate.load("rexrank/{name}")' in text and "Returns:" in text
    # the description is what `help(module.compute)` shows
    assert text in load(name).compute.__doc__


def test_defaults_are_read_from_the_metric_class():
    text = load("bertscore").inputs_description
    assert "idf (default False)" in text and "batch_size (default 64)" in text
    assert "num_layers (default None)" in text
    assert documented_options(load("bleu2").inputs_description) == []


@pytest.mark.parametrize("name", NAMES)
def test_examples_run(name, tmp_path, monkeypatch):
    """The examples, run with doctest where `evaluate.load("rexrank/<name>")` resolves to this
    checkout's module (evaluate uses a local ./rexrank/<name>/<name>.py before the Hub).
    bleu2's run completely; the others up to loading the module (compute needs weights)."""
    for other in NAMES:
        shutil.copytree(ROOT / "metrics" / other, tmp_path / "rexrank" / other)
    monkeypatch.chdir(tmp_path)
    text = load(name).inputs_description
    test = doctest.DocTestParser().get_doctest(text, {}, name, None, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test, out=lambda s: None)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{name}: {result.failed} example(s) failed"
    skipped = sum(bool(e.options.get(doctest.SKIP)) for e in test.examples)
    assert result.attempted >= 2  # at least the import and the load ran (doctest does not count skipped ones)
    if name == "bleu2":
        assert skipped == 0 and result.attempted >= 4


@pytest.mark.parametrize("name", NAMES)
def test_card_shows_the_hub_id_and_the_install(name):
    from rexrank.metrics.registry import METRICS

    card = (ROOT / "metrics" / name / "README.md").read_text(encoding="utf-8")
    assert f'evaluate.load("rexrank/{name}")' in card
    extra = METRICS[name][1]
    assert ("pip install rexrank" if extra == "core" else f'pip install "rexrank[{extra}]"') in card
