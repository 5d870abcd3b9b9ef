"""The first pass over a log: what each server run shows, before any of it is replayed.

A server run starts at load_model's ``initializing, n_slots`` line (a restart, or a wake from
sleep, which loses every slot and cached prompt); a log that starts after the server did opens
a run at its first event. The replay of a run needs facts from the whole run before its first
line is judged: which line kinds are visible at this verbosity (a checkpoint list can only be
tracked when its creation lines are shown), the format era and the build (the rule set). A
``RunSummary`` holds those facts, a few hundred bytes per run.

``scan_runs`` yields each run's summary as soon as the run is over, so the checker can run this
pass and the replay side by side over the same file, this one at most one run ahead: memory does
not grow with the log.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from pcspec.logcheck import events as ev
from pcspec.logcheck.builds import BuildEvidence, EraDetector


def opens_run(e: ev.Event, in_run: bool) -> bool:
    """Whether ``e`` starts a new server run. A build line belongs to the process (it is
    printed before load_model), so it never opens a run by itself."""
    if isinstance(e, ev.ServerInit):
        return True
    return not in_run and not isinstance(e, ev.BuildLine)


@dataclass(slots=True)
class RunSummary:
    started: bool  # begins with the server's start-up (load_model)
    first_line: int
    kinds: set[type[ev.Event]] = field(default_factory=set)
    listed: bool = False  # a "cache state" line listed at least one entry
    era: EraDetector = field(default_factory=EraDetector)
    build: BuildEvidence = field(default_factory=BuildEvidence)

    def add(self, e: ev.Event) -> None:
        self.kinds.add(type(e))
        if isinstance(e, ev.CacheSummary) and e.n_prompts > 0:
            self.listed = True
        self.era.add(e)
        self.build.add(e)


def scan_runs(events: Iterable[ev.Event]) -> Iterator[RunSummary]:
    """One summary per server run, in order, each yielded once its run is over."""
    current: RunSummary | None = None
    build: ev.BuildLine | None = None  # the last build line: every later run is that process's
    for e in events:
        if isinstance(e, ev.BuildLine):
            build = e
            if current is not None and current.build.build is None:
                current.build.build = e
        if opens_run(e, current is not None):
            if current is not None:
                yield current
            current = RunSummary(isinstance(e, ev.ServerInit), e.line)
            current.build.build = build
        if current is not None:
            current.add(e)
    if current is not None:
        yield current
