"""The suite's own scheduling (tests/conftest.py): files of minutes start first."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import conftest


def collected(path: str, *markers: str):
    return SimpleNamespace(path=Path(path), get_closest_marker=lambda name: (name in markers) or None)


def test_long_files_start_first_whole_and_the_rest_keep_their_order():
    items = [collected("a.py"), collected("b.py", "long"), collected("c.py"), collected("b.py"),
             collected("d.py", "browser"), collected("e.py", "fresh_venv"), collected("d.py")]
    conftest.pytest_collection_modifyitems(items)
    # fresh venvs (mostly waiting on pip) first, then browsers, then other long files; a file's
    # unmarked tests go with it
    assert [item.path.name for item in items] == ["e.py", "d.py", "d.py", "b.py", "b.py", "a.py", "c.py"]
