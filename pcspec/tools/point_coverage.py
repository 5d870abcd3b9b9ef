"""Which of a design's own extension points the fuzzing reached, and how often.

A user's design overrides a few points (``pcspec.model.design``). A run that never calls them
says nothing about them, whatever its verdicts: ``pcspec fuzz --coverage`` counts every call
of each point the design defines itself (not inherited from pcspec's designs), by wrapping it
on the design object for the run.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pcspec.model.design import ATTRIBUTE_POINTS, POINTS, Design, defined_by


def own_points(design: Design) -> list[str]:
    """The points whose code (or value) the design's own classes define, not pcspec's."""
    return [p for p in POINTS if not defined_by(design, p).__module__.startswith("pcspec.")]


@contextmanager
def counting(design: Design) -> Iterator[Counter[str]]:
    """Count the calls of the design's own points while the block runs (attributes are reported
    as defined, not counted)."""
    calls: Counter[str] = Counter()
    wrapped = [p for p in own_points(design) if p not in ATTRIBUTE_POINTS]
    for point in wrapped:
        setattr(design, point, _counted(getattr(design, point), point, calls))
    try:
        yield calls
    finally:
        for point in wrapped:
            delattr(design, point)


def _counted(fn: Callable[..., Any], point: str, calls: Counter[str]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        calls[point] += 1
        return fn(*args, **kwargs)

    return call


def report(design: Design, calls: Counter[str]) -> list[str]:
    """One line per point of the design's own: how often the run reached it."""
    lines: list[str] = []
    for point in own_points(design):
        where = defined_by(design, point).__qualname__
        if point in ATTRIBUTE_POINTS:
            lines.append(f"  {point:<26s} {getattr(design, point)!s:>10s}  (an attribute of {where})")
        else:
            n = calls[point]
            never = "   <-- never reached: nothing judged it" if not n else ""
            lines.append(f"  {point:<26s} {n:>10d}  ({where}){never}")
    return lines
