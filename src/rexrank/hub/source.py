"""The files of a rexrank checkout that deploy publishes (metrics/, leaderboard_space/,
spaces/), found from --source, the checkout this package runs from, or the current folder."""
from __future__ import annotations

import ast
from pathlib import Path

from rexrank.hub.errors import DeployError

METRICS_DIR = "metrics"
LEADERBOARD_DIR = "leaderboard_space"
BACKEND_DIR = "spaces"
SKIPPED_PARTS = {"__pycache__", ".ipynb_checkpoints"}


def is_checkout(path: Path) -> bool:
    return all((path / d).is_dir() for d in (METRICS_DIR, LEADERBOARD_DIR, BACKEND_DIR)) and (path / "pyproject.toml").is_file()


def find_source(given: str | Path | None = None) -> Path:
    if given is not None:
        root = Path(given).resolve()
        if not is_checkout(root):
            raise DeployError(f"--source {root}: not a rexrank checkout (needs pyproject.toml, {METRICS_DIR}/, "
                              f"{LEADERBOARD_DIR}/ and {BACKEND_DIR}/)")
        return root
    package_root = Path(__file__).resolve().parents[3]  # src/rexrank/hub -> checkout (editable install)
    for candidate in (package_root, Path.cwd()):
        if is_checkout(candidate):
            return candidate
    raise DeployError("deploy publishes the Space folders of a rexrank checkout: run it inside one or pass --source DIR")


def folder_files(folder: Path) -> dict[str, bytes]:
    """Every regular file below `folder` (relative POSIX path -> bytes), without caches and dotfiles."""
    if not folder.is_dir():
        raise DeployError(f"{folder} is missing from the checkout")
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if path.is_file() and not SKIPPED_PARTS & set(rel.parts) and not any(p.startswith(".") for p in rel.parts) \
                and path.suffix != ".pyc":
            out[rel.as_posix()] = path.read_bytes()
    return out


def metric_names(root: Path) -> list[str]:
    """The metric folders: metrics/<name>/ holding <name>.py."""
    return sorted(p.name for p in (root / METRICS_DIR).iterdir() if (p / f"{p.name}.py").is_file())


def source_version(root: Path) -> str:
    """rexrank.__version__ of the checkout, read without importing it."""
    init = root / "src" / "rexrank" / "__init__.py"
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__version__" for t in node.targets):
            return ast.literal_eval(node.value)
    raise DeployError(f"{init}: no __version__")
