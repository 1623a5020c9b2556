"""The rexrank wheel a Space installs: built from the checkout's sdist (so only what the
sdist ships gets in, never stale build/ files) and reproducible (SOURCE_DATE_EPOCH fixes
the zip timestamps), so an unchanged checkout gives the same bytes and deploy uploads nothing."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from rexrank.hub.errors import DeployError

ZIP_EPOCH = "315532800"  # 1980-01-01, the earliest time a zip entry can hold


def build_wheel(root: Path, outdir: Path) -> Path:
    if importlib.util.find_spec("build") is None:
        raise DeployError("building the wheel needs the `build` package: pip install 'rexrank[release]' "
                          "(or pass --wheel FILE, or --rexrank-from pypi)")
    env = {**os.environ, "SOURCE_DATE_EPOCH": ZIP_EPOCH}
    proc = subprocess.run([sys.executable, "-m", "build", "--outdir", str(outdir), str(root)],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise DeployError(f"python -m build {root} failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    wheels = sorted(outdir.glob("rexrank-*.whl"))
    if len(wheels) != 1:
        raise DeployError(f"python -m build made {len(wheels)} rexrank wheels in {outdir}, expected one")
    return wheels[0]


def wheel_version(path: Path) -> str:
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    if not path.is_file():
        raise DeployError(f"--wheel {path}: no such file")
    try:
        name, version, _, _ = parse_wheel_filename(path.name)
    except InvalidWheelFilename as exc:
        raise DeployError(f"--wheel {path}: {exc}") from None
    if name != "rexrank":
        raise DeployError(f"--wheel {path}: a wheel of {name!r}, not of rexrank")
    return str(version)
