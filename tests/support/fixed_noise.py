"""A stand-in random generator for the privacy door's Laplace draws (tests of the coverage rule)."""
from __future__ import annotations


class FixedNoise:
    """Every Laplace draw is `value`; each (loc, scale) asked for is recorded in `asked`."""

    def __init__(self, value: float):
        self.value, self.asked = value, []

    def laplace(self, loc, scale):
        self.asked.append((loc, scale))
        return self.value
