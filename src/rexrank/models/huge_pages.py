"""Transparent huge pages for PyTorch's large CPU buffers, in rexrank's own programs.

A forward pass allocates and frees activation buffers of several MB each (RaTE-NER's
relative-attention scores reach ~50 MB a batch). glibc serves buffers that size with fresh
mmaps, which the kernel faults in and zeroes 4 KiB at a time: on CPU, one RaTE-NER pass over
60 studies' sentences took 3.2 M page faults, a third of its CPU time, and how many depends
on the heap's history, so the same pass swung by ±20 % within one process.

PyTorch (2.2 and later) aligns buffers of 2 MB and more to huge pages and madvises them
when THP_MEM_ALLOC_ENABLE is set: on that pass 23 times fewer faults and 1.28 times less
CPU time, steadier too (`benchmarks/huge_pages.py`). PyTorch reads the variable once, at the
process's first tensor, so a program sets it before creating any. Only where buffers lie changes, not what is
computed: every score is the same bit for bit (tests/models/test_huge_pages.py).
"""
from __future__ import annotations

import os

VARIABLE = "THP_MEM_ALLOC_ENABLE"


def prefer_huge_pages() -> None:
    """Ask PyTorch for huge pages unless the environment already decides (0 turns them off).
    Called first by the `rexrank` command, the Spaces and benchmarks/suite.py; a library caller
    sets THP_MEM_ALLOC_ENABLE=1 itself before its first tensor."""
    os.environ.setdefault(VARIABLE, "1")
