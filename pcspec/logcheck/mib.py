"""Sizes as the log prints them: MiB with 3 decimals, kept as intervals.

Every size in the cache and checkpoint lines is MiB printed with ``%.3f``: ``bytes / (1024.0 *
1024.0)`` in the cache's (server-task.cpp:1732-1899 at 0c1e570), ``(float) bytes / 1024 / 1024``
in the checkpoints' (server-context.cpp:2301-2350, 3357, 3374). A logged value ``v`` therefore
stands for any byte count whose MiB value lies within half a unit of the last digit
(0.0005 MiB), widened by the float32 conversion (relative 2^-24, doubled for safety). Sums of
logged values add their tolerances, so a comparison between a sum of ``n`` logged values and
another logged value tolerates ``(n + 1) * 0.0005`` MiB. ``Approx`` is that interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MIB = 1024 * 1024
HALF_UNIT = 0.0005  # half of the last printed digit of %.3f
_F32_REL = 2.0**-23  # float32 rounding of (float) bytes, with a factor 2 of margin
_EPS = 1e-9  # a value printed exactly on the rounding boundary


@dataclass(frozen=True, slots=True)
class Approx:
    """A size in MiB known to lie in ``[lo, hi]``."""

    lo: float
    hi: float

    @staticmethod
    def logged(v: float) -> Approx:
        tol = HALF_UNIT + abs(v) * _F32_REL + _EPS
        return Approx(max(0.0, v - tol), v + tol)

    @staticmethod
    def exact(v: float) -> Approx:
        return Approx(v, v)

    @staticmethod
    def unknown() -> Approx:
        return Approx(0.0, math.inf)

    @property
    def known(self) -> bool:
        return self.hi != math.inf

    @property
    def mid(self) -> float:
        return (self.lo + self.hi) / 2 if self.known else self.lo

    def __add__(self, other: Approx) -> Approx:
        return Approx(self.lo + other.lo, self.hi + other.hi)

    def minus(self, other: Approx) -> Approx:
        return Approx(max(0.0, self.lo - other.hi), self.hi - other.lo)

    def overlaps(self, other: Approx) -> bool:
        return self.lo <= other.hi and other.lo <= self.hi

    def bytes_lo(self) -> int:
        return max(0, math.floor(self.lo * MIB))

    def bytes_hi(self) -> int:
        # an unknown size stands for "more than any limit"
        return math.ceil(self.hi * MIB) if self.known else 1 << 62

    def show(self) -> str:
        if not self.known:
            return "unknown"
        if self.hi - self.lo < 0.0011:
            return f"{self.mid:.3f} MiB"
        return f"{self.lo:.4f}..{self.hi:.4f} MiB"


def prints_as(value: float, printed: float) -> bool:
    """Whether a fraction (f_keep, f_sim) prints with %.3f as ``printed``."""
    return abs(value - printed) <= HALF_UNIT + 1e-6


def total(values: list[Approx]) -> Approx:
    return sum(values, Approx(0.0, 0.0))
