"""Progress of long runs (``pcspec verify``, ``pcspec fuzz``) on standard error.

On a terminal, a live line (rich): cells settled of all, model steps per second, elapsed and
estimated time left, and the unit running now. Elsewhere (a pipe, a CI log) one plain line per
unit, which a log keeps readable. ``--json`` runs print nothing here (standard output is the
JSON alone).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from pcspec.tools.verdicts import Tick


def plain_lines(enabled: bool) -> Callable[[str], None]:
    """One timestamped line per unit of work."""
    t0 = time.monotonic()

    def show(msg: str) -> None:
        if enabled:
            print(f"  [{time.monotonic() - t0:6.1f}s] {msg}", file=sys.stderr, flush=True)

    return show


@contextmanager
def verify_progress(enabled: bool) -> Iterator[Callable[[Tick], None]]:
    """A callback for ``verdicts.verify``: live on a terminal, plain lines otherwise."""
    if not enabled:
        yield lambda _tick: None
        return
    if not sys.stderr.isatty():
        line = plain_lines(True)
        yield lambda tick: line(f"{tick.message}  ({tick.done}/{tick.total} cells)")
        return
    t0 = time.monotonic()
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("cells"),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    with bar:
        task = bar.add_task("starting", total=None, rate="")

        def show(tick: Tick) -> None:
            rate = tick.steps / max(1e-9, time.monotonic() - t0)
            rate_text = f"{rate:,.0f} steps/s"
            bar.update(task, description=tick.message, completed=tick.done, total=tick.total, rate=rate_text)

        yield show
