"""Which failed HTTP calls to the Hub are its passing faults (worth trying again), and how
long it asks to wait: shared by the store (rexrank.store.hub) and the Jobs client
(rexrank.backend.jobs)."""
from __future__ import annotations

import time

TRANSIENT_STATUSES = (429, 500, 502, 503, 504)


def transient_fault(exc: BaseException) -> bool:
    """A fault of the service or the network, not of the call: an HTTP 429 or 5xx, or the
    HTTP client's transport errors (a reset, a timeout, a refused connection)."""
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if status is not None:
        return status in TRANSIENT_STATUSES
    return isinstance(exc, ConnectionError) or any(c.__name__ == "TransportError" for c in type(exc).__mro__)


def retry_after(exc: BaseException) -> float | None:
    """The seconds a 429 or 503 answer asks to wait (Retry-After, seconds or an HTTP date)."""
    from email.utils import parsedate_to_datetime

    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None

