"""Predictions going into the store: read (a file, a datasets folder; hf://user/repo in
rexrank.store.hub_predictions),
validate with `rexrank.submissions` (the validator behind `rexrank score`), and serialise
to the parquet file stored beside the request."""
from __future__ import annotations

import hashlib
import io
from pathlib import Path

from rexrank.errors import SubmissionError
from rexrank.submissions import Predictions, RawPredictions, validate_predictions


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
