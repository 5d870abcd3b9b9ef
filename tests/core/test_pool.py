"""The one worker pool (pcspec/core/pool.py): a worker that dies (``os._exit``, SIGKILL) loses
the one unit it ran, named; a fresh worker takes its place and the other units complete; a
unit that raises gives its exception to the caller. Campaigns' blocks run on it too
(pcspec/core/campaign.py: ``run_blocks``)."""

from __future__ import annotations

import os
import signal

import pytest

from pcspec.core.campaign import run_blocks
from pcspec.core.pool import Lost, run_all


def dies_on_some(unit: int) -> int:
    """Unit 2 exits (as ``os._exit`` in a C extension would), unit 4 is killed (as the kernel's
    out-of-memory killer does); every other unit answers."""
    if unit == 2:
        os._exit(1)
    if unit == 4:
        os.kill(os.getpid(), signal.SIGKILL)
    return unit * 10


def raises(unit: int) -> int:
    raise KeyError(f"unit {unit}")


def test_a_dead_worker_loses_its_unit_by_name_and_the_others_complete() -> None:
    out = run_all(dies_on_some, [0, 1, 2, 3, 4, 5, 6], 2, name=lambda u: f"unit {u}")
    assert out[2] == Lost("unit 2", "exit code 1")
    assert out[4] == Lost("unit 4", "killed by SIGKILL")
    assert [r for r in out if not isinstance(r, Lost)] == [0, 10, 30, 50, 60]
    assert out[4].message == "lost unit unit 4: its worker process died (killed by SIGKILL)"


def test_a_unit_that_raises_gives_its_exception_to_the_caller() -> None:
    with pytest.raises(KeyError, match="unit 7") as info:
        run_all(raises, [7], 2)
    assert "in a worker process" in info.value.__notes__[0]  # (where it was raised)


def block(start: int, stop: int, deadline: float) -> list[int]:
    if start == 0:
        os._exit(3)
    return list(range(start, stop))


def test_a_campaign_block_whose_worker_died_is_lost_by_its_range() -> None:
    parts = run_blocks(block, 0, 9, 3, 60.0)
    assert parts == [Lost("seeds 0:3", "exit code 3"), [3, 4, 5], [6, 7, 8]]
