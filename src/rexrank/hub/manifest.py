"""`.rexrank-deploy.json`: the files deploy put into a repo, with their SHA-256. It marks a
repo as made by deploy (anything else is foreign content, never overwritten) and tells
which files a later deploy may delete (e.g. the previous version's wheel)."""
from __future__ import annotations

import hashlib
import json

MANIFEST = ".rexrank-deploy.json"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def manifest_bytes(files: dict[str, bytes], version: str) -> bytes:
    body = {"made_by": "rexrank hub deploy", "rexrank": version,
            "files": {path: sha256(data) for path, data in sorted(files.items())}}
    return (json.dumps(body, indent=1, sort_keys=True) + "\n").encode()


def managed_paths(data: bytes) -> set[str]:
    try:
        files = json.loads(data)["files"]
    except (ValueError, KeyError, TypeError):
        return set()
    return set(files) if isinstance(files, dict) else set()
