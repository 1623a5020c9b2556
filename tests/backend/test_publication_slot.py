"""The machine's clock a private result waits on for its publication slot (issue 40: the
privacy door's time). Every other test replaces the wait (tests/conftest.py); this one runs
the real one on a clock of its own."""
from __future__ import annotations

import logging

from rexrank.backend import publication_slot
from rexrank.store.records import iso
from support.neighbours import ControlledClock

REAL_WAIT = publication_slot.SystemClock.wait_until  # taken before conftest's autouse stand-in replaces it


class _Time:
    def __init__(self, now: float):
        self.now, self.sleeps = now, []

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert len(self.sleeps) < 100, "the wait does not end"
        self.sleeps.append(seconds)
        self.now += seconds


def test_the_wait_sleeps_until_the_slot_in_steps_of_at_most_a_minute(monkeypatch):
    fake = _Time(1000.0)
    monkeypatch.setattr(publication_slot, "time", fake)
    REAL_WAIT(publication_slot.SystemClock(), 1150.0)
    assert fake.sleeps == [60.0, 60.0, 30.0] and fake.now == 1150.0
    REAL_WAIT(publication_slot.SystemClock(), 1100.0)  # a slot already past: no wait
    REAL_WAIT(publication_slot.SystemClock(), 1150.0)  # the slot itself: no wait
    assert fake.sleeps == [60.0, 60.0, 30.0]
    REAL_WAIT(publication_slot.SystemClock(), 1150.5)  # under a second to go is still waited
    assert fake.sleeps[3:] == [0.5] and fake.now == 1150.5


def test_the_clock_is_the_machines(monkeypatch):
    monkeypatch.setattr(publication_slot, "time", _Time(1234.5))
    assert publication_slot.SystemClock().now() == 1234.5


def test_a_private_result_is_held_until_the_next_slot_strictly_after_its_scoring(caplog):
    clock = ControlledClock(7200.0 + 1.0)
    with caplog.at_level(logging.INFO, logger="rexrank.backend"):
        assert publication_slot.hold_until_slot("r", seconds=3600.0, clock=clock) == 10800.0
    assert caplog.messages == [f"r: scored; held until its publication slot {iso(10800.0)}"]
    # now on the slot itself (the first wait moved the clock there): the next one
    assert publication_slot.hold_until_slot("r", seconds=900.0, clock=clock) == 11700.0
    assert clock.waits == [(7201.0, 10800.0), (10800.0, 11700.0)]
