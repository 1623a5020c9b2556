"""A Space's requirements.txt, with the rexrank line pointed at the chosen source.

The checked-in file names the extras a piece needs (`rexrank[spaces,models]>=0.1.0`) and
any other lines (e.g. PyTorch's CPU index); deploy rewrites only the rexrank line:
  - a wheel by URL, for a Gradio Space. The Hub's Gradio-Space Dockerfile installs
    requirements.txt before the Space's files are copied (its build logs show
    `WORKDIR /home/user/app`, `RUN --mount=target=/tmp/requirements.txt,source=requirements.txt
    pip install --no-cache-dir -r /tmp/requirements.txt gradio[oauth,mcp]==<sdk_version> ...`,
    and only then `COPY --link --chown=1000 ./ /home/user/app`; e.g. the public Space
    fffiloni/Pix2Pix-Video), so a relative path would not resolve. The URL is the wheel
    uploaded into the same (public) Space, pinned by its SHA-256;
  - a wheel by relative path, for the Docker backend Space, whose Dockerfile copies the
    Space's files before installing (a private Space's files cannot be fetched by URL);
  - `rexrank[...]==VERSION` from PyPI (`--rexrank-from pypi`).
"""
from __future__ import annotations

from packaging.requirements import InvalidRequirement, Requirement

from rexrank.hub.errors import DeployError


def _rexrank_line(text: str, where: str) -> tuple[int, Requirement]:
    found = []
    for i, line in enumerate(text.splitlines()):
        stripped = line.split("#", 1)[0].strip()
        if not stripped or stripped.startswith("-"):
            continue
        try:
            req = Requirement(stripped)
        except InvalidRequirement:
            continue
        if req.name == "rexrank":
            found.append((i, req))
    if len(found) != 1:
        raise DeployError(f"{where}: expected exactly one `rexrank[...]` requirement line, found {len(found)}")
    return found[0]


def extras(text: str, where: str) -> list[str]:
    return sorted(_rexrank_line(text, where)[1].extras)


def pin_rexrank(text: str, where: str, *, wheel_url: str | None = None, wheel_file: str | None = None,
                version: str | None = None) -> str:
    """`text` with its rexrank line replaced by exactly one of the three sources."""
    if sum(x is not None for x in (wheel_url, wheel_file, version)) != 1:
        raise ValueError("give one of wheel_url, wheel_file, version")
    index, req = _rexrank_line(text, where)
    bracket = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    if wheel_url is not None:
        line = f"rexrank{bracket} @ {wheel_url}"
    elif wheel_file is not None:
        line = f"./{wheel_file}{bracket}"
    else:
        line = f"rexrank{bracket}=={version}"
    lines = text.splitlines()
    lines[index] = line
    return "\n".join(lines) + "\n"
