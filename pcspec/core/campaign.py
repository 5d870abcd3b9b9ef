"""The one campaign runner: what the model's walker campaigns (``pcspec.engines.campaign``) and
live campaigns (``pcspec.live.campaign``) share.

A campaign covers a range of integers ``[start, stop)`` (example seeds, requests). The range is
cut into one contiguous block per worker; a worker covers its block in order and stops between
two units once the shared wall-clock deadline passes, so what it covered is always a prefix of
its block and every unit in it ran whole. Workers are processes (spawned, not forked: the same
start-up on every platform, and no copy of a parent's state, locks or Hypothesis's globals, into
them) of the one worker pool (``pcspec.core.pool``), or the calling process itself when there is
one block. The parts come back in block order, a block whose worker died as ``Lost`` (its range
named: it covered nothing the caller may count); the caller merges them, and the covered
ranges join (``joined``, ``join_disjoint``) so that a merged result does not depend on how the
range was split.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TypeVar

from pcspec.core.errors import PcspecError
from pcspec.core.pool import Lost, run_all

P = TypeVar("P")
Range = tuple[int, int]  # [start, stop)

# a block's worker: (start, stop, deadline as time.time()) -> what it covered and found
Work = Callable[[int, int, float], P]


def blocks(start: int, stop: int, n: int) -> list[Range]:
    """``[start, stop)`` cut into ``n`` contiguous blocks of (nearly) equal size, in order."""
    size, extra = divmod(stop - start, n)
    out, a = [], start
    for i in range(n):
        b = a + size + (1 if i < extra else 0)
        out.append((a, b))
        a = b
    return [r for r in out if r[0] < r[1]]


def joined(ranges: Iterable[Range]) -> list[Range]:
    """The ranges sorted, empty ones dropped, touching or overlapping ones joined."""
    out: list[Range] = []
    for a, b in sorted(r for r in ranges if r[0] < r[1]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def join_disjoint(mine: list[Range], theirs: list[Range], what: str = "seed") -> list[Range]:
    """Two parts' covered ranges joined; a unit covered twice is refused (merge disjoint
    campaigns only: a unit counted twice would count twice)."""
    for a, b in theirs:
        for lo, hi in mine:
            if a < hi and lo < b:
                raise PcspecError(f"the {what} ranges {a}:{b} and {lo}:{hi} overlap: merge disjoint campaigns only")
    return joined(mine + theirs)


def cover(start: int, stop: int, deadline: float, step: Callable[[int], int]) -> int:
    """Run ``step(pos)`` from ``start`` (it returns the next position) while ``pos < stop`` and
    the deadline (``time.time()``) has not passed, checked between steps only; where it stopped:
    ``[start, returned)`` is covered."""
    pos = start
    while pos < stop and time.time() < deadline:
        pos = step(pos)
    return pos


def _call(job: tuple[Work[P], int, int, float]) -> P:
    work, a, b, deadline = job
    return work(a, b, deadline)


def run_blocks(
    work: Work[P], start: int, stop: int, workers: int, seconds: float, what: str = "seed"
) -> list[P | Lost]:
    """``[start, stop)`` on ``workers`` processes (in this one when there is one block) for at
    most ``seconds``: each block's part, in block order (none for an empty range); a block whose
    worker died is ``Lost``, named ``{what}s A:B``. With more than one block ``work`` must be
    picklable (a module-level function, or a ``functools.partial`` of one)."""
    deadline = time.time() + seconds
    jobs = [(work, a, b, deadline) for a, b in blocks(start, stop, workers)]
    if len(jobs) <= 1:
        return [_call(j) for j in jobs]
    return run_all(_call, jobs, len(jobs), name=lambda j: f"{what}s {j[1]}:{j[2]}")


__all__ = ["Lost", "Range", "Work", "blocks", "cover", "join_disjoint", "joined", "run_blocks"]
