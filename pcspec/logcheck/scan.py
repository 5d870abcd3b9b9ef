"""The first pass over a log: what each server run shows, before any of it is replayed.

A server run starts at load_model's ``initializing, n_slots`` line (a restart, or a wake from
sleep, which loses every slot and cached prompt); a log that starts after the server did opens
a run at its first event. The replay of a run needs facts from the whole run before its first
line is judged: the verbosity and which line kinds are visible at it (a checkpoint list can
only be tracked when its creation lines are shown, ``pcspec.logcheck.needs``), the format era
and the build (the rule set). A ``RunSummary`` holds those facts, a few hundred bytes per run.

``scan_runs`` yields each run's summary as soon as the run is over, so the checker can run this
pass and the replay side by side over the same file, this one at most one run ahead: memory does
not grow with the log.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from pcspec.logcheck import events as ev
from pcspec.logcheck import levels
from pcspec.logcheck.builds import BuildEvidence, EraDetector


def opens_run(e: ev.Event, in_run: bool) -> bool:
    """Whether ``e`` starts a new server run. The build and verbosity lines belong to the
    process (printed before load_model), so they never open a run by themselves."""
    if isinstance(e, ev.ServerInit):
        return True
    return not in_run and not isinstance(e, ev.BuildLine | ev.VerbosityLine)


@dataclass(slots=True)
class RunSummary:
    started: bool  # begins with the server's start-up (load_model)
    first_line: int
    kinds: set[type[ev.Event]] = field(default_factory=set)
    listed: bool = False  # a "cache state" line listed at least one entry
    era: EraDetector = field(default_factory=EraDetector)
    build: BuildEvidence = field(default_factory=BuildEvidence)
    # the process's "verbosity = N" line (inherited across runs), and the highest level of a
    # line the run shows (pcspec.logcheck.levels)
    verbosity_line: ev.VerbosityLine | None = None
    max_level: int = levels.ERR

    def add(self, e: ev.Event) -> None:
        self.kinds.add(type(e))
        if not isinstance(e, ev.VerbosityLine):
            self.max_level = max(self.max_level, levels.level_of(e))
        if isinstance(e, ev.CacheSummary) and e.n_prompts > 0:
            self.listed = True
        self.era.add(e)
        self.build.add(e)

    def verbosity(self) -> tuple[int, str]:
        """The run's verbosity threshold and how the log shows it: the printed ``verbosity = N``
        (common.cpp:405), raised to the level of any line the run shows above it; without
        that line, the highest level shown (a run without a TRACE or DEBUG line is read as one
        at the default, 3: its INFO lines come with TRACE ones at -lv 4, every task's "new
        prompt" among them)."""
        seen = self.max_level
        line = self.verbosity_line
        if line is not None and line.verbosity >= seen:
            return line.verbosity, f"line {line.line}: verbosity = {line.verbosity}"
        if line is not None:
            return seen, (f"line {line.line} says verbosity = {line.verbosity}, but the run "
                          f"shows {levels.NAMES[seen]} lines")
        if seen >= levels.DBG:
            return levels.EVERYTHING, "no verbosity line; the run shows DEBUG lines"
        if seen == levels.TRC:
            return levels.TRC, "no verbosity line; the run shows TRACE lines but no DEBUG line"
        return levels.DEFAULT_VERBOSITY, "no verbosity line; the run shows no TRACE or DEBUG line"


def scan_runs(events: Iterable[ev.Event]) -> Iterator[RunSummary]:
    """One summary per server run, in order, each yielded once its run is over."""
    current: RunSummary | None = None
    build: ev.BuildLine | None = None  # the last build line: every later run is that process's
    verbosity: ev.VerbosityLine | None = None  # likewise the last verbosity line
    for e in events:
        if isinstance(e, ev.BuildLine):
            build = e
            if current is not None and current.build.build is None:
                current.build.build = e
        if isinstance(e, ev.VerbosityLine):
            verbosity = e
            if current is not None and current.verbosity_line is None:
                current.verbosity_line = e
        if opens_run(e, current is not None):
            if current is not None:
                yield current
            current = RunSummary(isinstance(e, ev.ServerInit), e.line)
            current.build.build = build
            current.verbosity_line = verbosity
        if current is not None:
            current.add(e)
    if current is not None:
        yield current
