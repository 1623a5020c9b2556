"""A RadGraph model archive in the `StanfordAIMI/RRG_scorers/<type>.tar.gz` layout.

The archive holds `config.json` (the AllenNLP training config), `vocabulary/` (AllenNLP
vocabulary files) and `weights.th` (the DyGIE++ state dict). Facts from radgraph 0.1.18
`radgraph.py` (MIT) and AllenNLP `Vocabulary.from_files` (Apache-2.0), read, not copied.

The tarball is extracted once into the rexrank cache, under its sha256, into a temporary
folder that is then renamed, so concurrent processes never see a half-extracted model.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rexrank.errors import MetricError
from rexrank.models.checkpoints import Checkpoint, resolve
from rexrank.catalogue import RADGRAPH_LICENCE, RRG_SCORERS_REPO, RRG_SCORERS_REVISION, radgraph_archive

REPO_ID = RRG_SCORERS_REPO
DEFAULT_REVISION = RRG_SCORERS_REVISION  # pins and their sources: rexrank.catalogue
LICENCE = RADGRAPH_LICENCE

NON_PADDED_FILE = "non_padded_namespaces.txt"
PADDING_TOKEN = "@@PADDING@@"
OOV_TOKEN = "@@UNKNOWN@@"


@dataclass
class RadGraphArchive:
    directory: Path
    config: dict[str, Any]
    vocabulary: dict[str, list[str]]  # namespace -> index-ordered tokens
    fingerprint: str  # sha256 over config, vocabulary and weights: names the model in caches

    @property
    def weights_path(self) -> Path:
        return self.directory / "weights.th"

    def model_config(self) -> dict[str, Any]:
        try:
            return self.config["model"]
        except KeyError:
            raise MetricError(f"{self.directory / 'config.json'} has no 'model' section") from None

    def transformer_name(self) -> str:
        try:
            return self.model_config()["embedder"]["token_embedders"]["bert"]["model_name"]
        except KeyError:
            raise MetricError(
                f"{self.directory / 'config.json'}: model.embedder.token_embedders.bert.model_name is missing"
            ) from None

    def max_length(self) -> int | None:
        bert = self.model_config()["embedder"]["token_embedders"]["bert"]
        return bert.get("max_length")


def checkpoint_for(model_type: str, *, path: str | None = None, revision: str = DEFAULT_REVISION) -> Checkpoint:
    return radgraph_archive(model_type, revision=revision, path=path)


def load_archive(checkpoint: Checkpoint, *, option: str = "model_path") -> RadGraphArchive:
    """Resolve (hub or local), extract when it is a tarball, and read config + vocabulary."""
    local = resolve(checkpoint, option=option)
    directory = local if local.is_dir() else _extract(local)
    for required in ("config.json", "vocabulary", "weights.th"):
        if not (directory / required).exists():
            raise MetricError(
                f"RadGraph model at {directory} has no {required}: expected the RRG_scorers layout "
                f"(config.json, vocabulary/, weights.th) ({checkpoint.describe()})"
            )
    with (directory / "config.json").open(encoding="utf-8") as fh:
        config = json.load(fh)
    return RadGraphArchive(directory, config, read_vocabulary(directory / "vocabulary"), _fingerprint(directory))


def archive_transformer_name(local: Path) -> str:
    """The encoder a RadGraph archive (tarball or folder) names in its config.json, read
    without extracting the weights: from the extracted copy when there is one (hub blobs are
    named by their SHA-256, as `_extract` names its folders), else by streaming the tarball."""
    real = Path(local).resolve()
    config = None
    if real.is_dir():
        config = json.loads((real / "config.json").read_text(encoding="utf-8"))
    else:
        from rexrank.testsets.download import cache_root

        extracted = cache_root() / "radgraph" / real.name[:32] / "config.json"
        if len(real.name) == 64 and extracted.exists():
            config = json.loads(extracted.read_text(encoding="utf-8"))
        else:
            try:
                with tarfile.open(real, "r:*") as tar:
                    for member in tar:
                        if member.isfile() and Path(member.name).name == "config.json" and member.name.count("/") <= 1:
                            config = json.load(tar.extractfile(member))
                            break
            except (tarfile.TarError, EOFError, json.JSONDecodeError) as exc:
                raise MetricError(f"{local}: not a readable RadGraph archive ({exc})") from None
    if config is None:
        raise MetricError(f"{local}: no config.json in the RadGraph archive")
    return RadGraphArchive(real, config, {}, "").transformer_name()


def _sha256(path: Path, digest=None):
    digest = digest or hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest


def _extract(tarball: Path) -> Path:
    from rexrank.testsets.download import cache_root

    if not tarfile.is_tarfile(tarball):
        raise MetricError(f"{tarball} is neither a folder nor a tar archive (expected <type>.tar.gz from {REPO_ID})")
    target = cache_root() / "radgraph" / _sha256(tarball).hexdigest()[:32]
    if (target / "weights.th").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".extract-"))
    try:
        with tarfile.open(tarball, "r:*") as tar:
            tar.extractall(tmp, filter="data")  # refuses absolute paths and links out of the folder
        root = tmp
        # Tolerate a single top-level folder inside the archive.
        entries = [p for p in tmp.iterdir() if not p.name.startswith(".")]
        if not (tmp / "config.json").exists() and len(entries) == 1 and entries[0].is_dir():
            root = entries[0]
        try:
            os.replace(root, target)
        except OSError:
            if not (target / "weights.th").exists():  # lost a race only if the winner finished
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _fingerprint(directory: Path) -> str:
    digest = hashlib.sha256()
    digest.update((directory / "config.json").read_bytes())
    for path in sorted((directory / "vocabulary").iterdir()):
        if path.name.startswith("."):
            continue
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    _sha256(directory / "weights.th", digest)
    return digest.hexdigest()


def _namespace_match(pattern: str, namespace: str) -> bool:
    # AllenNLP: "*labels" matches any namespace ending in "labels"; otherwise exact match
    return namespace.endswith(pattern[1:]) if pattern.startswith("*") else namespace == pattern


def read_vocabulary(directory: Path) -> dict[str, list[str]]:
    """AllenNLP vocabulary folder -> {namespace: tokens by index}.

    One file per namespace, one token per line, index = line number; padded namespaces
    (those not matched by non_padded_namespaces.txt) get @@PADDING@@ at index 0 first.
    RadGraph's `<type>__ner_labels.txt` starts with an empty line: the null label "" at 0.
    """
    padding_file = directory / NON_PADDED_FILE
    if not padding_file.exists():
        raise MetricError(f"{directory} has no {NON_PADDED_FILE} (not an AllenNLP vocabulary folder)")
    patterns = [line.strip() for line in padding_file.read_text(encoding="utf-8").splitlines()]
    vocabulary: dict[str, list[str]] = {}
    for path in sorted(directory.iterdir()):
        if path.name == NON_PADDED_FILE or path.name.startswith(".") or not path.name.endswith(".txt"):
            continue
        namespace = path.name[: -len(".txt")]
        lines = path.read_text(encoding="utf-8").replace("\r\n", "\n").split("\n")
        if lines and lines[-1] == "":
            lines = lines[:-1]
        tokens = [OOV_TOKEN if line == OOV_TOKEN else line.replace("@@NEWLINE@@", "\n") for line in lines]
        padded = not any(_namespace_match(p, namespace) for p in patterns if p)
        vocabulary[namespace] = ([PADDING_TOKEN] if padded else []) + tokens
    return vocabulary
