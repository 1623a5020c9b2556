"""Which checkpoints each metric needs at its pinned revision, whether they are in the local
hub cache (and are the official bytes), and fetching them: `rexrank weights status` and
`rexrank weights download`, and the Python functions `status` and `download`.

The list is the checkpoint catalogue (rexrank.catalogue), which the metrics load from too,
so it cannot name other weights than the metrics use; a test checks that each default metric
resolves exactly these checkpoints. Nothing here imports the metrics.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable

from rexrank import catalogue
from rexrank.catalogue import CONFIG_FILE, TOKENIZER_FILES, WEIGHT_FILES, Checkpoint, Need
from rexrank.errors import MetricError
from rexrank.models.advice import PLACEHOLDER, WeightsUnavailable, download_command, option_setting
from rexrank.models.checkpoints import DOWNLOAD_PROBE_TIMEOUT, cached_path, fetch, hub_unavailable

CACHED, MISSING, WRONG_HASH, UNKNOWN = "cached", "missing", "wrong hash", "unknown"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_SHA1 = re.compile(r"[0-9a-f]{40}")

LLM_ENDPOINT_METRICS = catalogue.LLM_ENDPOINT_METRICS


def _named_in(need: Need) -> Need:
    """A need whose checkpoint is named inside another (RadGraph's encoder, in its archive's
    config): resolved when that other one is in the local cache, else left pending with why."""
    from rexrank.radgraph.tarball import archive_transformer_name

    local = cached_path(need.named_in)
    if local is None:
        return need
    try:
        name = archive_transformer_name(local)
    except (MetricError, OSError, ValueError) as exc:
        return replace(need, pending=f"the encoder named in {need.named_in.filename} (unreadable: {exc})")
    licence = catalogue.CXR_BERT_GENERAL.licence if name == catalogue.CXR_BERT_GENERAL.repo_id else "see its model card"
    return replace(need, checkpoint=Checkpoint(name, catalogue.radgraph_encoder_revision(name), licence=licence))


def _resolved(needs: Iterable[Need]) -> list[Need]:
    return [_named_in(n) if n.checkpoint is None and n.named_in is not None else n for n in needs]


def default_needs(metric: str) -> list[Need]:
    """What `metric` loads with its default options (from the checkpoint catalogue)."""
    if metric not in catalogue.METRIC_NEEDS:
        from rexrank.suggest import did_you_mean

        raise MetricError(f"unknown metric {metric!r}{did_you_mean(metric, catalogue.METRIC_NEEDS)}; "
                          f"available: {', '.join(sorted(catalogue.METRIC_NEEDS))}")
    return _resolved(catalogue.METRIC_NEEDS[metric])


def is_default_need(metric: str, checkpoint: Checkpoint) -> bool:
    """Does `rexrank weights download METRIC` fetch this very checkpoint?"""
    try:
        needs = default_needs(metric)
    except MetricError:
        return False
    return any(n.checkpoint is not None and n.checkpoint.same_source(checkpoint) for n in needs)


def other_missing(metric: str, checkpoint: Checkpoint) -> list[str]:
    """The metric's other checkpoints that are not in the local cache either (a cache look-up,
    no network), named as `rexrank weights status` names them."""
    try:
        statuses = status([metric])
    except MetricError:
        return []
    return [s.need.label() for s in statuses
            if s.state not in (CACHED, UNKNOWN) and s.need.checkpoint is not None
            and not s.need.checkpoint.same_source(checkpoint)]


def option_for(metric: str, need: Need, value: str, *, terms: str | None = None) -> str:
    """The setting that points `metric` at a local copy of `need` (radcliq nests its components')."""
    chain = [need.component] if need.component == metric else [need.component, metric]
    return option_setting(chain, need.option, value, terms=terms)


# -- status ------------------------------------------------------------------------------

@dataclass
class NeedStatus:
    metric: str
    need: Need
    state: str
    path: Path | None = None  # the cached file, or the folder a metric option can point at
    size: int | None = None  # bytes of the cached files
    detail: str = ""

    def local_option(self, *, terms: str | None = None) -> str:
        """The option pointing at the cached copy, or at DIR after `hf download` ('' when
        no option can: NLTK data is found on NLTK's own search path)."""
        if not self.need.option:
            return ""
        if self.state == CACHED and self.path is not None:
            return option_for(self.metric, self.need, str(self.path), terms=terms)
        checkpoint = self.need.checkpoint
        value = f"{PLACEHOLDER}/{checkpoint.filename}" if checkpoint and checkpoint.filename else PLACEHOLDER
        return option_for(self.metric, self.need, value, terms=terms)

    def download_command(self, *, terms: str | None = None) -> str:
        if self.need.kind == "stanza":
            from rexrank.models.stanza_ner import download_command as stanza_command

            return stanza_command()
        if self.need.kind == "nltk":
            return "python -m nltk.downloader punkt_tab"
        return download_command(self.need.checkpoint, self.need.files, terms=terms) if self.need.checkpoint else ""


def status(metrics: Iterable[str] | None = None, *, verify: bool = False, on_start=None) -> list[NeedStatus]:
    """State of every checkpoint the metrics need, from the local cache only (no network).

    verify: re-hash the cached files (pinned SHA-256, and each hub blob against the content
    address it is stored under) instead of trusting the cache's names; slow for big models.
    on_start(needs): called once with the (metric, need) pairs to check, then each is
    checked in turn (`on_start` returns a callable told of each one done, or None).
    """
    pairs = [(metric, need) for metric in metrics or sorted(catalogue.METRIC_NEEDS) for need in default_needs(metric)]
    tick = on_start(pairs) if on_start else None
    out = []
    for metric, need in pairs:
        out.append(_status(metric, need, verify=verify))
        if tick:
            tick(out[-1])
    return out


def _status(metric: str, need: Need, *, verify: bool) -> NeedStatus:
    if need.checkpoint is None:
        return NeedStatus(metric, need, UNKNOWN)  # its label says why
    if need.kind == "file":
        return _file_status(metric, need, verify=verify)
    if need.kind == "stanza":
        return _stanza_status(metric, need)
    if need.kind == "nltk":
        return _nltk_status(metric, need)
    if need.kind == "snapshot":
        return _snapshot_status(metric, need, verify=verify)
    return _folder_status(metric, need, verify=verify)


def _file_status(metric: str, need: Need, *, verify: bool) -> NeedStatus:
    checkpoint = need.checkpoint
    local = cached_path(checkpoint)
    if local is None:
        return NeedStatus(metric, need, MISSING, detail="not in the local cache")
    size = local.stat().st_size
    problem = _hash_problem(local, checkpoint.sha256, verify=verify)
    if problem:
        return NeedStatus(metric, need, WRONG_HASH, local, size, problem)
    return NeedStatus(metric, need, CACHED, local, size, "SHA-256 verified" if verify and checkpoint.sha256 else "")


def _folder_status(metric: str, need: Need, *, verify: bool) -> NeedStatus:
    from huggingface_hub import try_to_load_from_cache

    checkpoint = need.checkpoint
    found: dict[str, Path] = {}
    for name in need.files:
        hit = try_to_load_from_cache(checkpoint.repo_id, name, revision=checkpoint.revision)
        if isinstance(hit, str):
            found[name] = Path(hit)
    lacking = []
    if CONFIG_FILE not in found:
        lacking.append(CONFIG_FILE)
    if need.kind != "weights" and not any(n in found for n in TOKENIZER_FILES):
        lacking.append("tokenizer files")
    if need.kind in ("model", "weights") and not any(n in found for n in WEIGHT_FILES):
        lacking.append(" or ".join(WEIGHT_FILES))
    size = sum(p.stat().st_size for p in found.values()) if found else None
    folder = found[CONFIG_FILE].parent if CONFIG_FILE in found else None
    if not found:
        return NeedStatus(metric, need, MISSING, detail="not in the local cache")
    if lacking:
        return NeedStatus(metric, need, MISSING, folder, size, f"no {', '.join(lacking)}; cached: {', '.join(sorted(found))}")
    for path in found.values() if verify else ():
        problem = _hash_problem(path, None, verify=True)
        if problem:
            return NeedStatus(metric, need, WRONG_HASH, folder, size, problem)
    return NeedStatus(metric, need, CACHED, folder, size, f"{len(found)} files" + (", verified" if verify else ""))


def _snapshot_status(metric: str, need: Need, *, verify: bool) -> NeedStatus:
    local = cached_path(need.checkpoint)
    if local is None:
        return NeedStatus(metric, need, MISSING, detail="not in the local cache")
    files = [p for p in local.rglob("*") if p.is_file()]
    size = sum(p.stat().st_size for p in files)
    names = {p.name for p in files}
    if "config.json" not in names or not any(n.endswith(WEIGHT_SUFFIXES) for n in names):
        return NeedStatus(metric, need, MISSING, local, size, f"incomplete snapshot ({len(files)} files, no config or weights)")
    for path in files if verify else ():
        problem = _hash_problem(path, None, verify=True)
        if problem:
            return NeedStatus(metric, need, WRONG_HASH, local, size, problem)
    return NeedStatus(metric, need, CACHED, local, size, f"{len(files)} files" + (", verified" if verify else ""))


def _stanza_status(metric: str, need: Need) -> NeedStatus:
    from rexrank.models.stanza_ner import LANG, installed_version, is_cached, resources_dir

    folder = resources_dir()
    if not is_cached():
        return NeedStatus(metric, need, MISSING, detail=f"not in {folder}")
    files = [p for p in (folder / LANG).rglob("*") if p.is_file()]
    return NeedStatus(metric, need, CACHED, folder, sum(p.stat().st_size for p in files),
                      f"{len(files)} files, stanza {installed_version() or 'not installed'}")


def _nltk_status(metric: str, need: Need) -> NeedStatus:
    import nltk

    from rexrank.models.srr_bert import PUNKT

    try:
        found = Path(str(nltk.data.find(PUNKT)))
    except LookupError:
        return NeedStatus(metric, need, MISSING, detail="not on NLTK's data path")
    files = [p for p in found.rglob("*") if p.is_file()]
    return NeedStatus(metric, need, CACHED, found, sum(p.stat().st_size for p in files), f"{len(files)} files")


def _hash_problem(path: Path, pinned: str | None, *, verify: bool) -> str:
    """'' when the file is what it should be. The hub cache stores each file as a blob named
    by its content: SHA-256 for LFS files, git's blob SHA-1 for small ones."""
    real = path.resolve()
    if pinned and not verify:
        if real.name == pinned:
            return ""
        verify = True  # stored under another name: only its bytes can tell
    if not verify:
        return ""
    if pinned or _SHA256.fullmatch(real.name):
        expected = pinned or real.name
        with open(real, "rb") as fh:
            actual = hashlib.file_digest(fh, "sha256").hexdigest()
        what = "the pinned" if pinned else "its content address"
        return "" if actual == expected else f"{path.name}: SHA-256 {actual}, not {what} {expected}"
    if _SHA1.fullmatch(real.name):
        digest = hashlib.sha1(f"blob {real.stat().st_size}\0".encode())
        with open(real, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        actual = digest.hexdigest()
        return "" if actual == real.name else f"{path.name}: git blob SHA-1 {actual}, not its content address {real.name}"
    return ""


# -- download ----------------------------------------------------------------------------

def download(metrics: Iterable[str] | None = None, *, on_done=None, radgraph_xl: bool = False) -> list[NeedStatus]:
    """Fetch every checkpoint the metrics need at its pinned revision into the hub cache,
    then check each one by its bytes. A cached copy with the wrong bytes is fetched again.
    Returns the verified statuses; `on_done(status)` is called as each need is settled.
    `radgraph_xl`: also RadGraph-XL (radgraph's model_type="radgraph-xl") and its encoder.
    Raises WeightsUnavailable at once when the Hub cannot be reached."""
    why = hub_unavailable(DOWNLOAD_PROBE_TIMEOUT)
    if why:
        raise MetricError(f"cannot download weights: {why}")
    out: list[NeedStatus] = []
    fetched: dict[tuple, NeedStatus] = {}
    jobs = [(metric, lambda m=metric: default_needs(m)) for metric in metrics or sorted(catalogue.METRIC_NEEDS)]
    if radgraph_xl:
        jobs.append(("radgraph", lambda: _resolved(catalogue.radgraph_needs("radgraph-xl"))))
    for metric, needs_of in jobs:
        queue = needs_of()
        while queue:
            need = queue.pop(0)
            key = (need.checkpoint, need.kind)
            if need.checkpoint is None:
                # RadGraph's encoder is named inside the archive: known now that the archive is here
                known = [n for n in needs_of() if n.option == need.option and n.checkpoint is not None]
                if known:
                    queue.insert(0, known[0])
                    continue
                result = NeedStatus(metric, need, UNKNOWN)
            elif key in fetched:
                previous = fetched[key]
                result = NeedStatus(metric, need, previous.state, previous.path, previous.size, previous.detail)
            else:
                result = fetch_need(metric, need)
                fetched[key] = result
            out.append(result)
            if on_done:
                on_done(result)
    return out


def fetch_need(metric: str, need: Need) -> NeedStatus:
    """Fetch one need unless it is cached with the right bytes; its status, checked by its bytes."""
    checkpoint = need.checkpoint
    before = _status(metric, need, verify=True)
    if before.state == CACHED:
        return before
    try:
        if need.kind == "nltk":
            import nltk

            if not nltk.download("punkt_tab", quiet=True, raise_on_error=True):
                return NeedStatus(metric, need, MISSING, detail="NLTK's downloader could not fetch punkt_tab")
            return _status(metric, need, verify=True)
        if need.kind == "stanza":
            from rexrank.models.stanza_ner import download as stanza_download

            try:
                stanza_download()
            except MetricError as exc:  # stanza itself is not installed
                return NeedStatus(metric, need, MISSING, detail=str(exc))
            except Exception as exc:  # stanza's downloader: HTTP, transport and disk errors alike
                return NeedStatus(metric, need, MISSING, detail=f"cannot be fetched ({type(exc).__name__}: {exc})")
            return _status(metric, need, verify=True)
        if need.kind in ("file", "snapshot"):
            fetch(checkpoint, option=need.option, force=before.state == WRONG_HASH)
        else:
            _fetch_folder(need, force=before.state == WRONG_HASH)
    except WeightsUnavailable as exc:
        return NeedStatus(metric, need, MISSING, detail=exc.reason)
    return _status(metric, need, verify=True)


def _fetch_folder(need: Need, *, force: bool) -> None:
    """The config and tokenizer files the repo has (patterns: absent ones are skipped), and
    the first weight file, in the order the metrics prefer them, that it has."""
    from huggingface_hub import snapshot_download

    checkpoint = need.checkpoint
    first = [CONFIG_FILE] if need.kind == "weights" else [CONFIG_FILE, *TOKENIZER_FILES]
    rounds = [first] + ([[name] for name in WEIGHT_FILES] if need.kind in ("model", "weights") else [])
    for patterns in rounds:
        try:
            folder = Path(snapshot_download(checkpoint.repo_id, revision=checkpoint.revision, allow_patterns=patterns,
                                            etag_timeout=10, force_download=force))
        except Exception as exc:  # HTTP status, transport (the client's own types) and disk errors alike
            detail = " ".join(str(exc).split())[:300]
            raise WeightsUnavailable(checkpoint, option=need.option, files=need.files,
                                     reason=f"cannot be fetched ({type(exc).__name__}: {detail})") from None
        if patterns[0] in WEIGHT_FILES and (folder / patterns[0]).exists():
            return


def ready(statuses: Iterable[NeedStatus]) -> dict[str, bool]:
    """metric -> every need cached and correct."""
    out: dict[str, bool] = {}
    for s in statuses:
        out[s.metric] = out.get(s.metric, True) and s.state == CACHED
    return out
