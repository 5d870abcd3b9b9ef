"""``pcspec verify --workers N``: the cells of the verdict matrix in worker processes.

The units of work are the ones one worker runs in turn (``pcspec.tools.verdicts``): a
design's survey, with the cells it settles by itself (the properties it saw violated, their
traces shrunk and saved); a hunt of each expected violation a survey did not see; each target
of each mutant; the proof suite. A unit is a function of the budget and the names it is given
alone: the walker's examples are drawn from per-cell seeds (a survey walks the examples of
seed ``s`` from ``SURVEY_OFFSET`` on, a hunt those of seed ``s`` from 0), and no unit reads what
another left in its process. So which worker ran a unit, and after which, changes nothing,
and the matrix is put together in the order one worker makes it: the JSON is the same, apart
from the timings, and so are the trace files (each cell writes its own).

Workers are processes of the one worker pool (``pcspec.core.pool``), which campaigns use too.
A worker that dies (killed, out of memory) loses the one unit it was running: that unit is
reported as lost (``Matrix.crashed``; its cells unknown, exit 3: never a pass; a lost survey
opens no hunts, so every cell of its design is unknown), never waited for, and the other units
run on. A unit that raises gives its exception to the caller, as it would in one process.

Progress names each unit once settled, in the order one worker would have run them (a unit
that finished early waits for those before it): the lines read the same on every run.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from pcspec.core.pool import Lost, Pool
from pcspec.engines.search import Run
from pcspec.model.designs import get_design
from pcspec.proofs.run import Row, RunConfig
from pcspec.properties.catalogue import CATALOGUE
from pcspec.properties.oracle import MUTANT_TARGETS
from pcspec.tools.verdicts import (
    Budget,
    Cell,
    Matrix,
    Mine,
    Surveyed,
    Tick,
    caught_by,
    declared_of,
    held_cell,
    hunt_cell,
    mutant_cell,
    proof_rows,
    selected,
    survey_cells,
)

SURVEY, HUNT, MUTANT, PROOFS = "survey", "hunt", "mutant", "proofs"


@dataclass(frozen=True)
class Unit:
    """One unit of work, by name (a worker looks the variant up: nothing but names and
    numbers crosses to it)."""

    kind: str  # SURVEY | HUNT | MUTANT | PROOFS
    variant: str = ""
    pid: str = ""  # HUNT, MUTANT: the property hunted
    # (what a hunt is given besides its names; not part of which unit it is)
    expected: str = field(default="", compare=False)  # HUNT: the oracle's expectation of the cell
    surveyed: Run | None = field(default=None, compare=False)  # HUNT: the design's survey run

    @property
    def label(self) -> str:
        if self.kind == PROOFS:
            return "proofs"
        return f"{self.variant}: {self.kind if self.kind == SURVEY else 'hunt ' + self.pid}"


@dataclass(frozen=True)
class Job:
    """What every unit of one run shares."""

    budget: Budget
    out: Path | None
    proofs: RunConfig | None
    variants: tuple[str, ...] | None
    mine: tuple[Mine, ...] = ()  # the user's designs (a worker imports each again)


Result = Surveyed | tuple[Cell, Counter[str]] | Cell | list[Row]
Work = Callable[[Job, Unit], Result]


def run_unit(job: Job, unit: Unit) -> Result:
    """A unit as one worker runs it: the same functions ``verdicts.verify`` calls in turn."""
    if unit.kind == PROOFS:
        assert job.proofs is not None
        return proof_rows(job.proofs, job.out, job.variants, job.mine)
    declared, ref = declared_of(unit.variant, job.mine)
    v = next((m.design() for m in job.mine if m.name == unit.variant), None) or get_design(unit.variant)
    if unit.kind == SURVEY:
        return survey_cells(v, job.budget, job.out, [p.id for p in CATALOGUE], declared, ref)
    if unit.kind == HUNT:
        assert unit.surveyed is not None
        return hunt_cell(v, unit.pid, unit.expected, unit.surveyed, job.budget, job.out, ref)
    return mutant_cell(v, unit.pid, job.budget, job.out)


# What to start first when a worker is free: a design's hunts, then the surveys (each may
# open hunts), then the proofs, then the mutants' hunts (short: they fill in at the end).
PRIORITY = {HUNT: 0, SURVEY: 1, PROOFS: 2, MUTANT: 3}


@dataclass
class _Schedule:
    """The units in the order one worker runs them (``order``; a design's hunts go in after
    its survey once it is settled), and what is settled: a result, or lost."""

    order: list[Unit]
    results: dict[Unit, Result] = field(default_factory=dict)
    lost: dict[Unit, Lost] = field(default_factory=dict)
    announced: int = 0

    def settle(self, unit: Unit, result: Result) -> list[Unit]:
        """Record a unit's result; the units it opens (a survey: its design's hunts)."""
        self.results[unit] = result
        if unit.kind != SURVEY:
            return []
        assert isinstance(result, Surveyed)
        # (the survey's coverage stays with the design; the hunt needs its steps and time only)
        run = replace(result.run, coverage=Counter())
        hunts = [Unit(HUNT, unit.variant, pid, result.expected[pid], run) for pid in result.to_hunt]
        at = self.order.index(unit) + 1
        self.order[at:at] = hunts
        return hunts

    def newly_settled(self) -> list[Unit]:
        """The units settled since the last call, up to the first one that is not."""
        out: list[Unit] = []
        while self.announced < len(self.order) and (
            self.order[self.announced] in self.results or self.order[self.announced] in self.lost
        ):
            out.append(self.order[self.announced])
            self.announced += 1
        return out


def verify_in_workers(
    budget: Budget,
    out: Path | None,
    variants: Sequence[str] | None = None,
    progress: Callable[[Tick], None] = lambda _tick: None,
    proofs: RunConfig | None = None,
    workers: int = 2,
    work: Work = run_unit,
    mine: Sequence[Mine] = (),
) -> Matrix:
    """``verdicts.verify`` on ``workers`` processes: the same matrix. ``work`` runs one unit in
    a worker (a module-level function: it is pickled by name)."""
    designs, mutants, total = selected(variants, mine)
    job = Job(budget, out, proofs, None if variants is None else tuple(variants), tuple(mine))
    order = [Unit(SURVEY, v.name) for v in designs]
    order += [Unit(MUTANT, v.name, pid) for v in mutants for pid in MUTANT_TARGETS[v.name]]
    order += [Unit(PROOFS)] if proofs is not None else []
    sched = _Schedule(list(order))
    settled: list[Cell] = []  # the cells of the units announced, for the progress counts

    def tell(msg: str) -> None:
        progress(Tick(msg, len(settled), total, sum(c.steps for c in settled)))

    tell(f"starting {workers} worker processes")
    # (the first waiting unit of the best kind starts when a worker is free)
    with Pool(functools.partial(work, job), workers, lambda u: u.label, lambda u: PRIORITY[u.kind]) as pool:
        for unit in order:
            pool.submit(unit)
        while pool.pending:
            s = pool.next()
            if s.lost is not None:
                sched.lost[s.unit] = s.lost
            else:
                assert s.result is not None
                for hunt in sched.settle(s.unit, s.result):
                    pool.submit(hunt)
            for unit in sched.newly_settled():
                if unit in sched.lost:
                    tell(sched.lost[unit].message)
                else:
                    settled.extend(_cells_of(unit, sched.results[unit]))
                    tell(f"settled {unit.label}")
    m = _matrix(sched, designs=[v.name for v in designs])
    tell("done")
    return m


def _cells_of(unit: Unit, result: Result) -> list[Cell]:
    """The cells a unit settles (a survey: those it saw violated and those it leaves holding)."""
    if isinstance(result, Surveyed):
        held = [pid for pid in result.expected if pid not in result.cells and pid not in result.to_hunt]
        return [*result.cells.values(), *(held_cell(unit.variant, p, result.expected[p], result.run) for p in held)]
    if isinstance(result, Cell):
        return [result]
    if isinstance(result, tuple):
        return [result[0]]
    return []


def _lost_cell(variant: str, pid: str, expected: str, lost: Lost | None) -> Cell:
    why = lost.message if lost is not None else "not settled"
    return Cell(variant, pid, expected, "unknown", 0, 0.0, message=why)


def _matrix(sched: _Schedule, designs: list[str]) -> Matrix:
    """The matrix in the order ``verdicts.verify`` makes it."""
    m = Matrix(crashed=[u.label for u in sched.order if u in sched.lost])
    pids = [p.id for p in CATALOGUE]
    results = sched.results
    for name in designs:
        s = results.get(Unit(SURVEY, name))
        if not isinstance(s, Surveyed):
            why = sched.lost.get(Unit(SURVEY, name))
            m.cells += [_lost_cell(name, pid, "?", why) for pid in pids]  # (no survey: no expectations read)
            continue
        m.coverage[name] = Counter(s.run.coverage)
        hunts = {u.pid: r for u, r in results.items() if u.kind == HUNT and u.variant == name}
        for pid in pids:
            if pid in s.cells:
                m.cells.append(s.cells[pid])
            elif pid in s.to_hunt:
                h = hunts.get(pid)
                if not isinstance(h, tuple):
                    m.cells.append(_lost_cell(name, pid, s.expected[pid], sched.lost.get(Unit(HUNT, name, pid))))
                    continue
                cell, reached = h
                m.coverage[name].update(reached)
                m.cells.append(cell)
            else:
                m.cells.append(held_cell(name, pid, s.expected[pid], s.run))
    mutants = dict.fromkeys(u.variant for u in sched.order if u.kind == MUTANT)
    for name in mutants:
        complete = True
        for pid in MUTANT_TARGETS[name]:
            c = results.get(Unit(MUTANT, name, pid))
            if isinstance(c, Cell):
                m.cells.append(c)
            else:
                m.cells.append(_lost_cell(name, pid, "x", sched.lost.get(Unit(MUTANT, name, pid))))
                complete = False
        if complete:  # (a mutant whose targets were not all run is neither caught nor missed)
            m.mutants[name] = caught_by(m.cells, name)
    rows = results.get(Unit(PROOFS))
    if isinstance(rows, list):
        m.proofs = rows
    return m


__all__ = ["PRIORITY", "Job", "Unit", "run_unit", "verify_in_workers"]
