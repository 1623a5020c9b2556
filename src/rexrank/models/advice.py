"""Errors that tell a user how to supply what a metric lacks (weights, an LLM endpoint), in
the terms of where they run it: the command line's (`--metric-option METRIC.KEY=VALUE`,
`hf download ...`, `rexrank weights download`) inside `cli_terms()`, Python keywords
(`checkpoint_path="..."`, `huggingface_hub.hf_hub_download(...)`) elsewhere.

Such an error is raised where a checkpoint is resolved: that place knows the checkpoint and
the keyword that points at a local copy, not the metric. Every `Metric.score` it passes
through records its name (`note_metric`), so RadCliQ's components are advised as
`radcliq.sembscore_options={...}`. The message is composed when it is read.
"""
from __future__ import annotations

import contextvars
import json
import shlex
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator, Protocol

from rexrank.errors import MetricError

if TYPE_CHECKING:
    from rexrank.catalogue import Checkpoint

_STYLE: contextvars.ContextVar[str] = contextvars.ContextVar("rexrank_advice_style", default="python")
PLACEHOLDER = "DIR"  # where the user put the downloaded copy


@contextmanager
def cli_terms() -> Iterator[None]:
    """Advice inside this block is phrased for the `rexrank` command line."""
    token = _STYLE.set("cli")
    try:
        yield
    finally:
        _STYLE.reset(token)


def style() -> str:
    return _STYLE.get()


def option_setting(metrics: list[str], key: str, value: str, *, terms: str | None = None) -> str:
    """How to set option `key` of the innermost metric of `metrics` (innermost first) to
    `value`: `--metric-option radcliq.sembscore_options={...}` or `sembscore_options={...}`."""
    terms = terms or style()
    nested: object = value
    for inner in metrics[:-1]:  # a wrapping metric takes its components' options as `<name>_options`
        nested = {key: nested}
        key = f"{inner}_options"
    if terms == "cli":
        outer = metrics[-1] if metrics else "METRIC"
        text = nested if isinstance(nested, str) else json.dumps(nested)
        return f"--metric-option {shlex.quote(f'{outer}.{key}={text}')}"
    return f"{key}={json.dumps(nested)}"


class AdvisedError(MetricError):
    """A MetricError whose advice depends on the metric it surfaced in and on where it is read."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
        self.metrics: list[str] = []  # innermost first

    def note_metric(self, name: str) -> None:
        if not self.metrics or self.metrics[-1] != name:
            self.metrics.append(name)

    @property
    def subject(self) -> str:
        raise NotImplementedError

    def advice(self, terms: str | None = None) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        where = f"{self.metrics[-1]}: " if self.metrics else ""
        return f"{where}{self.subject} {self.reason}. {self.advice()}"


class Inventory(Protocol):
    """The checkpoints `rexrank weights` fetches for a metric (rexrank.models.weights)."""

    def is_default_need(self, metric: str, checkpoint: "Checkpoint") -> bool: ...

    def other_missing(self, metric: str, checkpoint: "Checkpoint") -> list[str]: ...


class WeightsUnavailable(AdvisedError):
    """A checkpoint is not in the local cache and cannot be fetched, or the cached copy is wrong.

    files: for a checkpoint that is a folder (no `filename`), the files a metric reads from it
        (for `hf download`); empty = the whole repository at that revision.
    """

    def __init__(self, checkpoint: "Checkpoint", *, option: str, reason: str, files: tuple[str, ...] = ()):
        super().__init__(reason)
        self.checkpoint = checkpoint
        self.option = option
        self.files = tuple(files)
        # what `rexrank weights` knows of the metric (is_default_need, other_missing): given by the
        # metric the error passes through (metrics.base), since this layer is below `weights`
        self.inventory: Inventory | None = None

    @property
    def subject(self) -> str:
        return f"checkpoint {self.checkpoint.describe()}"

    def local_value(self) -> str:
        return f"{PLACEHOLDER}/{self.checkpoint.filename}" if self.checkpoint.filename else PLACEHOLDER

    def advice(self, terms: str | None = None) -> str:
        terms = terms or style()
        fetch = download_command(self.checkpoint, self.files, terms=terms)
        setting = option_setting(self.metrics, self.option, self.local_value(), terms=terms)
        outer = self.metrics[-1] if self.metrics else None
        ours = outer is not None and self.inventory is not None and self.inventory.is_default_need(outer, self.checkpoint)
        others = self.inventory.other_missing(outer, self.checkpoint) if ours else []
        if others:  # advice that fixes one file of several would leave the next error waiting
            listed = ", ".join(others)
            if terms == "cli":
                return (f"{outer} also lacks {listed}. Fetch all it needs where the Hub is reachable with "
                        f"`rexrank weights download {outer}`; with local copies, pass `{setting}` for this one, and "
                        f"`rexrank weights status {outer}` shows each other one with its option")
            return (f"{outer} also lacks {listed}. Fetch all it needs where the Hub is reachable with "
                    f"rexrank.models.weights.download([{outer!r}]) (command line: rexrank weights download {outer}); "
                    f"with local copies, pass {setting} for this one and the others' options as "
                    f"rexrank.models.weights.status([{outer!r}]) lists them")
        if terms == "cli":
            if ours:
                return (f"Fetch it where the Hub is reachable with `rexrank weights download {outer}`, or download it "
                        f"elsewhere (`{fetch}`) and pass `{setting}`; `rexrank weights status {outer}` lists all it needs")
            return f"Download it where the Hub is reachable (`{fetch}`) and pass `{setting}`"
        if ours:
            return (f"Fetch it where the Hub is reachable with rexrank.models.weights.download([{outer!r}]) (command "
                    f"line: rexrank weights download {outer}), or download it elsewhere ({fetch}) and pass {setting}")
        return f"Download it where the Hub is reachable ({fetch}) and pass {setting}"


def download_command(checkpoint: "Checkpoint", files: tuple[str, ...] = (), *, terms: str | None = None,
                     local_dir: str = PLACEHOLDER) -> str:
    """`hf download ...` (command line) or the huggingface_hub call (Python) that fetches the
    checkpoint's files at its revision into `local_dir`."""
    terms = terms or style()
    names = (checkpoint.filename,) if checkpoint.filename else tuple(files)
    if terms == "cli":
        parts = ["hf", "download", checkpoint.repo_id, *names, "--revision", checkpoint.revision, "--local-dir", local_dir]
        return " ".join(shlex.quote(p) for p in parts)
    if checkpoint.filename:
        return (f"huggingface_hub.hf_hub_download({checkpoint.repo_id!r}, {checkpoint.filename!r}, "
                f"revision={checkpoint.revision!r}, local_dir={local_dir!r})")
    patterns = f", allow_patterns={list(names)!r}" if names else ""
    return (f"huggingface_hub.snapshot_download({checkpoint.repo_id!r}, revision={checkpoint.revision!r}"
            f"{patterns}, local_dir={local_dir!r})")


class EndpointUnreachable(AdvisedError):
    """An LLM metric's OpenAI-compatible server does not answer."""

    def __init__(self, url: str, reason: str):
        super().__init__(reason)
        self.url = url

    @property
    def subject(self) -> str:
        return f"LLM endpoint {self.url}"

    def advice(self, terms: str | None = None) -> str:
        terms = terms or style()
        setting = option_setting(self.metrics, "base_url", "URL", terms=terms)
        if terms == "cli":
            return f"Start the server, or point the metric at one that runs: `--llm-base-url URL` or `{setting}`"
        return f"Start the server, or point the metric at one that runs: {setting}"
