"""Exceptions with messages a user can act on (what is wrong, and where)."""
from __future__ import annotations


class RexrankError(Exception):
    """Base class: the CLI prints these without a traceback and exits non-zero."""


class TestSetError(RexrankError):
    """A test set cannot be found, downloaded or read."""

    __test__ = False  # not a pytest test class


class SubmissionError(RexrankError):
    """A predictions file is malformed or does not match its test set."""

    def __init__(self, message: str, *, source: str | None = None, details: dict | None = None):
        self.source = source
        self.details = details or {}
        super().__init__(f"{source}: {message}" if source else message)

    def renamed(self, path: str, name: str) -> "SubmissionError":
        """The same error (same type and details) naming `name` where it named `path`, a
        temporary copy of the file."""
        return type(self)(str(self).replace(path, name), details=self.details)


class ReaderKilled(SubmissionError):
    """The predictions reader's child was stopped by this machine (its wall clock: a stuck or
    overloaded machine; a SIGKILL no limit of the reader explains: the kernel's out-of-memory
    killer), not by a limit the file broke. A filer reads it as any refusal ("try again
    later"); the backend gives the request back instead of failing it (rexrank.sandbox)."""


class MetricError(RexrankError):
    """A metric is unknown, misconfigured, or its model cannot be loaded."""


def first_line(exc: BaseException, *, limit: int = 300) -> str:
    """An exception's message as one short line (a library's multi-line error inside ours)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:limit]
