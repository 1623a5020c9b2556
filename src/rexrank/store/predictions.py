"""Predictions going into the store: read (a file, a datasets folder or hf://user/repo),
validate with `rexrank.submissions` (the validator behind `rexrank score`), and serialise
to the parquet file stored beside the request."""
from __future__ import annotations

import hashlib
import io
from pathlib import Path

from rexrank.errors import SubmissionError
from rexrank.store.scratch import ScratchDir
from rexrank.submissions import Predictions, RawPredictions, read_raw_predictions, validate_predictions

DATA_SUFFIXES = (".parquet", ".json", ".jsonl", ".csv")


def content_sha256(predictions: Predictions) -> str:
    """Of the (id, text) pairs in test-set order: the same predictions in another file
    format or row order give the same hash (used to refuse identical resubmissions)."""
    digest = hashlib.sha256()
    for sid, text in zip(predictions.ids, predictions.texts):
        digest.update(sid.encode("utf-8") + b"\x00" + text.encode("utf-8") + b"\x00")
    return digest.hexdigest()


def to_parquet_bytes(predictions: Predictions) -> bytes:
    import pandas as pd

    buf = io.BytesIO()
    pd.DataFrame({"id": predictions.ids, "prediction": predictions.texts}).to_parquet(buf, index=False)
    return buf.getvalue()


def read_raw_from_hub(spec: str, *, endpoint: str | None = None, token: str | None = None,
                      **columns) -> tuple[RawPredictions, str]:
    """hf://user/repo[@revision] (a Hub dataset repo holding one predictions file, or
    parquet shards) -> raw rows, and the pinned source `hf://user/repo@<commit>`."""
    from huggingface_hub import HfApi

    repo_id, _, revision = spec.removeprefix("hf://").removeprefix("datasets/").partition("@")
    if repo_id.count("/") != 1:
        raise SubmissionError("expected hf://USER/REPO[@REVISION] (a Hub dataset repo)", source=spec)
    import os

    endpoint = endpoint or os.environ.get("HF_ENDPOINT") or None
    token = token or os.environ.get("HF_TOKEN") or None
    api = HfApi(endpoint=endpoint, token=token)
    with ScratchDir("preds") as scratch:  # gone after reading, or after a kill at the next worker start
        return _read_downloaded(api, spec, repo_id, revision, endpoint, token, scratch, columns)


def _read_downloaded(api, spec, repo_id, revision, endpoint, token, scratch: Path,
                     columns: dict) -> tuple[RawPredictions, str]:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    try:
        sha = api.repo_info(repo_id, repo_type="dataset", revision=revision or None).sha
        local = snapshot_download(
            repo_id, repo_type="dataset", revision=sha, endpoint=endpoint, token=token, local_dir=str(scratch),
        )
    except OfflineModeIsEnabled:
        raise SubmissionError("cannot download: HF_HUB_OFFLINE is set", source=spec) from None
    except HfHubHTTPError as exc:
        raise SubmissionError(f"cannot read the Hub dataset: {exc}", source=spec) from None
    except Exception as exc:  # connection errors of the HTTP client
        raise SubmissionError(f"cannot reach {endpoint or 'the Hub'}: {type(exc).__name__}: {exc}", source=spec) from None
    files = sorted(
        p for p in Path(local).rglob("*")
        if p.is_file() and p.suffix.lower() in DATA_SUFFIXES and ".cache" not in p.parts
    )
    pinned = f"hf://{repo_id}@{sha}"
    if not files:
        raise SubmissionError(f"no data file ({', '.join(DATA_SUFFIXES)}) in the repo", source=pinned)
    if len(files) > 1 and not all(p.suffix.lower() == ".parquet" for p in files):
        names = ", ".join(str(p.relative_to(local)) for p in files)
        raise SubmissionError(f"several data files ({names}); keep one predictions file or parquet shards", source=pinned)
    try:
        rows = []
        for shard in files:  # one file, or parquet shards of one split in file-name order
            rows.extend(read_raw_predictions(shard, **columns).rows)
    except SubmissionError as exc:  # name the repo, not the download folder
        raise SubmissionError(str(exc).replace(str(local), pinned), details=exc.details) from None
    raw = RawPredictions(rows, pinned)
    raw.source = pinned
    return raw, pinned


def validate_for(
    raw: RawPredictions, test_set: str, track: str, *, data_dir: str | Path | None = None
) -> tuple[Predictions, bool]:
    """Validate against the test set's ids; returns (predictions, ids_checked).

    A private test set's studies are only known to the backend: the ids are not checked
    here, whatever `data_dir` holds (a filing is answered by the public service, which
    must never hold or consult the private set); the backend checks them, fails the
    request with counts of missing/unknown ids, never the ids, and counts the attempt
    against the quota. Only the file's structure is validated: its row count against
    the set's published size, and ids being non-empty, unique strings.
    """
    from rexrank.testsets.loading import track_studies
    from rexrank.testsets.registry import check_track, get_spec

    spec = get_spec(test_set)
    check_track(track)
    if spec.private:
        if spec.n_studies is not None and len(raw.rows) > spec.n_studies:
            raise SubmissionError(f"{len(raw.rows)} predictions, but {spec.title} has {spec.n_studies} studies",
                                  source=raw.source)
        # the same validator, against the submitted ids: catches duplicates, non-strings, bad ids
        submitted = list(dict.fromkeys(str(r[0]).strip() for r in raw.rows))
        return validate_predictions(raw, submitted, test_set=spec.title), False
    test = track_studies(test_set, track, data_dir=data_dir)
    outside = test.outside_ids
    preds = validate_predictions(raw, list(test.ids), test_set=f"{spec.title}, {track} track", outside_track_ids=outside)
    return preds, True
