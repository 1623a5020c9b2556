"""The mutation audit's table stays valid as the code changes: every mutant mutates text that
stands exactly once in its file, and names tests that exist (the audit itself runs with
`python tests/mutation_audit.py`: it takes minutes per mutant, so not in the suite)."""
from __future__ import annotations

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
