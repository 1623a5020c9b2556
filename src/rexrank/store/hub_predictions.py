"""A predictions dataset on the Hub, read for a submission: `hf://USER/REPO[@REVISION]`.

The revision is resolved to its commit sha first, and everything after reads that commit,
so a push made meanwhile (or after filing) changes nothing. Which file holds the predictions
and how big it is are decided from the Hub's file metadata, before anything is downloaded.
Every refusal is one line naming the repo.

`token`: whose access reads the repo. The leaderboard passes the submitter's own token and
never lets it fall back to the server's (its HF_TOKEN can read the organisers' private
requests repo): `False` means no token at all.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from rexrank.errors import SubmissionError
from rexrank.input_limits import MAX_FILE_BYTES, check_rows, check_texts
from rexrank.store.scratch import ScratchDir
from rexrank.submissions import RawPredictions, read_raw_predictions

DATA_SUFFIXES = (".parquet", ".json", ".jsonl", ".csv")
MAX_BYTES_ENV = "REXRANK_MAX_PREDICTIONS_MB"
MAX_FILES = 64
# metadata files `datasets` writes beside the data (save_to_disk, older push_to_hub): never predictions
DATASETS_METADATA = {"dataset_info.json", "dataset_infos.json", "dataset_dict.json", "state.json"}
# `datasets.push_to_hub` writes one split as data/<split>-00000-of-00003.parquet, ...
_SHARD = re.compile(r"^(?P<split>.+)-\d{5}-of-(?P<total>\d{5})\.parquet$")
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}$")


@dataclass(frozen=True)
class HubDataset:
    repo_id: str
    revision: str | None  # as asked (None: the default branch)
    sha: str  # the commit it resolved to
    files: tuple[str, ...]  # the predictions file, or the shards of one parquet split
    size: int  # bytes, from the Hub's metadata
    public: bool = False  # the Hub said the repo is public (private or unsaid: never named publicly)

    @property
    def pinned(self) -> str:
        return f"hf://{self.repo_id}@{self.sha}"


def max_bytes() -> int:
    """The most a predictions dataset may download: the largest file any other route accepts
    (input_limits.MAX_FILE_BYTES), or less where the Space sets REXRANK_MAX_PREDICTIONS_MB
    (more could only be downloaded to be refused by the reader's own limits)."""
    setting = os.environ.get(MAX_BYTES_ENV)
    if not setting:
        return MAX_FILE_BYTES
    try:
        wanted = int(float(setting) * 1024 * 1024)
    except ValueError:
        raise SubmissionError(f"{MAX_BYTES_ENV}={setting!r} is not a number of MB") from None
    return min(wanted, MAX_FILE_BYTES)


def _mb(n: int) -> str:
    return f"{n / 1e6:.3g} MB"


def parse_spec(spec: str) -> tuple[str, str | None]:
    """`hf://USER/REPO[@REV]` (or `hf://datasets/USER/REPO`, `USER/REPO[@REV]`, or the repo's page
    https://huggingface.co/datasets/USER/REPO[/tree/REV]) -> (repo id, revision)."""
    text = str(spec).strip()
    page = re.match(r"^https?://[^/]+/datasets/([^/]+/[^/]+?)(?:/tree/([^/]+))?/?$", text)
    if page:
        text = page[1] + (f"@{page[2]}" if page[2] else "")
    text = text.removeprefix("hf://").removeprefix("datasets/")
    repo_id, _, revision = text.partition("@")
    if not _REPO_ID.match(repo_id) or "--" in repo_id or ".." in repo_id:
        raise SubmissionError(f"expected hf://USER/REPO or hf://USER/REPO@REVISION (a Hub dataset repo), got {spec!r}")
    return repo_id, revision.strip() or None


def _size(sibling) -> int:
    lfs = getattr(sibling, "lfs", None)
    size = getattr(lfs, "size", None) if lfs is not None else None
    return int(size if size is not None else sibling.size or 0)


def choose_files(repo_id: str, files: dict[str, int]) -> tuple[str, ...]:
    """Which of the repo's files (path -> size) hold the predictions; a SubmissionError when
    none does or several could and none is clearly the one."""
    candidates = sorted(p for p in files if PurePosixPath(p).suffix.lower() in DATA_SUFFIXES
                        and PurePosixPath(p).name not in DATASETS_METADATA
                        and not any(part.startswith(".") for part in PurePosixPath(p).parts))
    if not candidates:
        raise SubmissionError(f"no predictions file ({', '.join(DATA_SUFFIXES)}) in the dataset repo", source=repo_id)
    if len(candidates) == 1:
        return tuple(candidates)
    named = [p for p in candidates if PurePosixPath(p).stem.lower() == "predictions"]
    if len(named) == 1:  # predictions.csv beside other data: it names itself
        return tuple(named)
    shards = [_SHARD.match(PurePosixPath(p).name) for p in candidates]
    if all(shards):
        groups = {(str(PurePosixPath(p).parent), m["split"], m["total"]) for p, m in zip(candidates, shards)}
        if len(groups) == 1 and len(candidates) == int(next(iter(groups))[2]):  # every shard of one split
            return tuple(candidates)
    listed = ", ".join(candidates[:8]) + (f", … ({len(candidates) - 8} more)" if len(candidates) > 8 else "")
    raise SubmissionError(
        f"{len(candidates)} candidate files ({listed}) and none is clearly the predictions: keep one file, name it "
        "predictions.<csv|jsonl|json|parquet>, or push a single split",
        source=repo_id,
    )


def _hub_message(exc: Exception, repo_id: str, revision: str | None) -> str:
    """One line for an error of the Hub's API about `repo_id`."""
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(exc, GatedRepoError):
        return (f"the dataset repo is gated and this token's account has not been granted access: accept its "
                f"conditions on https://huggingface.co/datasets/{repo_id} or ungate it")
    if isinstance(exc, RevisionNotFoundError):
        return f"no revision {revision!r} in the dataset repo (a branch, a tag or a commit sha)"
    if isinstance(exc, RepositoryNotFoundError) or status == 404:
        return ("no dataset repo by that name that this token can read: check the name; if it is private, make it "
                f"public (https://huggingface.co/datasets/{repo_id}/settings) or submit with a token of an account "
                "that can read it (a fine-grained token needs read access to this repo)")
    if status in (401, 403):
        return ("this token may not read the dataset repo (HTTP %s): use a token with read access to it, or make "
                "the repo public" % status)
    return f"cannot read the dataset repo: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def resolve(repo_id: str, revision: str | None, *, api) -> HubDataset:
    """The commit `revision` names now, and which files hold the predictions there (sizes
    checked from the metadata: nothing is downloaded)."""
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    try:
        info = api.dataset_info(repo_id, revision=revision, files_metadata=True)
    except OfflineModeIsEnabled:
        raise SubmissionError("cannot read the Hub: HF_HUB_OFFLINE is set", source=repo_id) from None
    except HfHubHTTPError as exc:
        raise SubmissionError(_hub_message(exc, repo_id, revision), source=repo_id) from None
    except Exception as exc:  # connection errors of the HTTP client
        raise SubmissionError(f"cannot reach the Hub ({api.endpoint}): {type(exc).__name__}: {exc}", source=repo_id) from None
    sizes = {s.rfilename: _size(s) for s in info.siblings or []}
    pinned = f"hf://{repo_id}@{info.sha}"
    files = choose_files(pinned, sizes)
    if len(files) > MAX_FILES:
        raise SubmissionError(f"{len(files)} parquet shards, over the limit of {MAX_FILES}", source=pinned)
    total = sum(sizes[f] for f in files)
    if total > max_bytes():
        raise SubmissionError(
            f"the predictions are {_mb(total)} ({', '.join(files[:3])}{' …' if len(files) > 3 else ''}), over the "
            f"limit of {_mb(max_bytes())}: keep the id and prediction columns only", source=pinned)
    return HubDataset(repo_id, revision, info.sha, files, total, public=getattr(info, "private", None) is False)


def read_raw_from_hub(spec: str, *, endpoint: str | None = None, token: str | bool | None = None,
                      **columns) -> tuple[RawPredictions, HubDataset]:
    """hf://user/repo[@revision] -> raw rows of the resolved commit, and what was read.
    `token` None: HF_TOKEN or the saved login (the organisers' command line); False: none."""
    from huggingface_hub import HfApi

    repo_id, revision = parse_spec(spec)
    endpoint = endpoint or os.environ.get("HF_ENDPOINT") or None
    if token is None:
        token = os.environ.get("HF_TOKEN") or None
    api = HfApi(endpoint=endpoint, token=token)
    dataset = resolve(repo_id, revision, api=api)
    with ScratchDir("preds") as scratch:  # gone after reading, or after a kill at the next worker start
        return _read_files(api, dataset, scratch, columns), dataset


def _read_files(api, dataset: HubDataset, scratch: Path, columns: dict) -> RawPredictions:
    from huggingface_hub import hf_hub_download

    pinned = dataset.pinned
    rows = []
    for name in dataset.files:  # one file, or the shards of one split in file-name order
        try:
            local = hf_hub_download(dataset.repo_id, name, repo_type="dataset", revision=dataset.sha,
                                    endpoint=api.endpoint, token=api.token, local_dir=str(scratch))
        except Exception as exc:  # HTTP and connection errors
            raise SubmissionError(f"cannot download {name}: {type(exc).__name__}", source=pinned) from None
        if os.path.getsize(local) > max_bytes():  # the metadata said otherwise: refuse all the same
            raise SubmissionError(f"{name} is over the limit of {_mb(max_bytes())}", source=pinned)
        try:
            rows.extend(read_raw_predictions(local, **columns).rows)
        except SubmissionError as exc:  # name the repo's file, not the download folder
            raise exc.renamed(str(local), f"{pinned}/{name}") from None
        # the limits hold for the shards together, checked as they add up: 64 shards each
        # within a file's limits must not make 64 times the work
        check_rows(len(rows), source=pinned)
        check_texts([r[1] for r in rows], [r[0] for r in rows], source=pinned)
    return RawPredictions(rows, pinned)


def content_time_on_hub(dataset: HubDataset, *, endpoint: str | None = None,
                        token: str | bool | None = None) -> float | None:
    """When the predictions' content reached the Hub: the server's time of the last commit
    that changed the predictions file(s), as of the pinned commit (the latest of them for
    the shards of one split; rexrank.store.copies judges who had predictions first by
    it). None when the Hub does not say (the filing is then dated when it was received)."""
    from huggingface_hub import HfApi

    endpoint = endpoint or os.environ.get("HF_ENDPOINT") or None
    if token is None:
        token = os.environ.get("HF_TOKEN") or None
    try:
        infos = HfApi(endpoint=endpoint, token=token).get_paths_info(
            dataset.repo_id, list(dataset.files), expand=True, repo_type="dataset", revision=dataset.sha)
    except Exception:  # HTTP and connection errors: the filing is dated when received, which is later
        return None
    dates = [info.last_commit.date for info in infos if getattr(info, "last_commit", None) is not None]
    if len(dates) != len(dataset.files):
        return None
    return max(date.timestamp() for date in dates)
