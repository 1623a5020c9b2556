"""Preparing the next batch on the CPU while the device computes the current one (`ahead`),
and finishing the last one's results on the CPU meanwhile (`behind`).

On CUDA a model's forward pass is launched asynchronously and waited for when its result is
read; the tokenising and padding of the next batch can run meanwhile, in one background
thread. The batches, their tensors and their order are exactly those of the plain loop (the
same function builds them), so no number changes; only when they are built. On the CPU the
plain loop is kept: there the thread would compete with PyTorch's own threads for the cores.
"""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator, TypeVar

Item = TypeVar("Item")
Prepared = TypeVar("Prepared")


def ahead(items: Iterable[Item], prepare: Callable[[Item], Prepared], *, enabled: bool) -> Iterator[tuple[Item, Prepared]]:
    """(item, prepare(item)) in order; with `enabled`, prepare(next item) runs in a background
    thread while the caller works on the current one."""
    items = list(items)
    if not enabled or len(items) < 2:
        for item in items:
            yield item, prepare(item)
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="rexrank-prefetch") as pool:
        upcoming = pool.submit(prepare, items[0])
        for k, item in enumerate(items):
            prepared = upcoming.result()  # an error in prepare is raised here, for its own batch
            if k + 1 < len(items):
                upcoming = pool.submit(prepare, items[k + 1])
            yield item, prepared


@contextmanager
def behind(*, enabled: bool) -> Iterator[Callable[..., None]]:
    """A `submit(fn, *args)` that runs fn(*args) in order, with `enabled` in one background
    thread while the caller goes on to its next batch (at most one call waiting, so results
    held for it stay bounded). A call's error is raised by the next submit or when the `with`
    block ends, after every call has run."""
    if not enabled:
        yield lambda fn, *args: fn(*args)
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="rexrank-finish") as pool:
        pending: list[Future] = []

        def submit(fn, *args) -> None:
            if pending:
                pending.pop().result()
            pending.append(pool.submit(fn, *args))

        yield submit
        for future in pending:
            future.result()


def on_device(device: str) -> bool:
    """Whether batches are worth preparing ahead: the model runs on an accelerator."""
    return not str(device).startswith("cpu")
