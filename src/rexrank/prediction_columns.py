"""Finding a predictions file's id and text columns by name, and short reprs for messages:
shared by the validator (rexrank.submissions) and the checks made before a file is read
(rexrank.input_limits), so that neither imports the other."""
from __future__ import annotations

from typing import Any, Iterable, Sequence

from rexrank.errors import SubmissionError

# named by every refusal of a file's shape (rexrank.submissions reads each of them)
ACCEPTED_SHAPES = ("the accepted shapes: CSV, JSONL or a JSON list of records with id and prediction fields; "
                   "a JSON object {id: prediction}; the ReXrank submission JSON (the test JSON with "
                   "model_prediction added to each study); a parquet file; a datasets.save_to_disk folder")

# the option that names a column of another name, per column kind: (CLI flag, Python argument)
COLUMN_OPTIONS = {"id": ("--id-column", "id_column"), "prediction text": ("--prediction-column", "prediction_column")}


def short_repr(value: Any, limit: int = 60) -> str:
    """repr() cut to `limit` characters: an id or value of megabytes must not make the
    message megabytes."""
    text = repr(value) if not isinstance(value, (list, dict, tuple)) or len(value) < 100 else f"<{type(value).__name__} of {len(value)}>"
    return text if len(text) <= limit else text[:limit - 1] + "…"


def first_present(columns: Iterable[str], wanted: Sequence[str], *, what: str, source: str) -> str:
    """The first of `wanted` among `columns`; else an error naming the columns found and the
    option that names another column (`what`: "id" or "prediction text")."""
    columns = list(columns)
    for name in wanted:
        if name in columns:
            return name
    flag, argument = COLUMN_OPTIONS[what]
    raise SubmissionError(
        f"no {what} column: expected one of {', '.join(wanted)}, found {column_names(columns) or 'none'}; "
        f"name yours with {flag} NAME (Python: {argument}=NAME), or rename the column ({ACCEPTED_SHAPES})",
        source=source,
    )


def column_names(columns: list, shown: int = 10) -> str:
    listed = ", ".join(short_repr(str(c), 40)[1:-1] for c in columns[:shown])
    return listed + (f", … ({len(columns) - shown} more)" if len(columns) > shown else "")
