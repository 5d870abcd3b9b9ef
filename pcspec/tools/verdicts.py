"""The verdict matrix: every (variant, property) cell fuzzed against the oracle, every
mutant hunted by the properties meant to catch it.

A cell's verdict comes from a survey of the variant (all properties judged, nothing fails)
plus, for each property the survey saw violated or the oracle expects violated, a hunt
(``pcspec.engines.search``; both are walks of the seeded walker) whose counterexample is
shrunk. Every
trace found is written as JSON lines and a pytest snippet, then replayed to confirm it
reproduces. A cell matches the oracle when ``violated`` meets
``x`` or ``holds`` meets ``.``; ``unknown`` never matches.

A mutant (a rule change planted in any design, ``Design.base``) is caught by a target
property that it violates and its base design does not violate on the same trace: its hunt
passes over finds its base shares, its shrinking keeps the base clean, and the saved trace is
replayed on the base to confirm (``pcspec.properties.judge.base_violates``). A mutant of
``fixed``, which violates nothing, is caught by any violation of a target, as before.
"""

from __future__ import annotations

import builtins
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pcspec.engines.search import HUNT_EXAMPLES, Hit, Run, hunt, survey
from pcspec.model.design import Design
from pcspec.model.designs import named
from pcspec.proofs.run import Row, RunConfig
from pcspec.proofs.suite import run_suite
from pcspec.properties.catalogue import CATALOGUE
from pcspec.properties.coverage import DECISIONS
from pcspec.properties.judge import base_violates, replay, write_counterexample
from pcspec.properties.judge import shrink_trace as shrink
from pcspec.properties.mutants import MUTANTS
from pcspec.properties.oracle import MUTANT_TARGETS, ORACLE, expected
from pcspec.properties.routes import route_name


@dataclass
class Cell:
    variant: str
    property: str
    expected: str  # "x" | "." | "?" (no expectation: extended catalogue or mutant survey)
    verdict: str  # "violated" | "holds" | "unknown"
    steps: int
    seconds: float
    trace: str | None = None
    length: int | None = None
    message: str | None = None
    replayed: bool | None = None
    # The route the counterexample of a C++ design's cell takes (properties/routes.py):
    # its name, "" when it takes none of the cell's listed routes; None where there are no
    # routes (fixed, a mutant, a cell that holds).
    route: str | None = None

    @builtins.property  # (the field `property` shadows the builtin in this class body)
    def ok(self) -> bool:
        if self.verdict == "unknown":
            return False
        if self.verdict == "violated" and self.replayed is False:
            return False
        if self.expected == "?":
            return True
        return (self.verdict == "violated") == (self.expected == "x")

    def to_json(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "property": self.property,
            "expected": self.expected,
            "verdict": self.verdict,
            "steps": self.steps,
            "seconds": round(self.seconds, 3),
            "trace": self.trace,
            "length": self.length,
            "message": self.message,
            "replayed": self.replayed,
            "route": self.route,
            "ok": self.ok,
        }


@dataclass
class Matrix:
    cells: list[Cell] = field(default_factory=list)
    mutants: dict[str, list[str]] = field(default_factory=dict)
    # design -> decision -> how often its runs reached it (properties/coverage.py)
    coverage: dict[str, Counter[str]] = field(default_factory=dict)
    # the Z3 proof obligations run after the fuzzing (pcspec.proofs; docs/PROOFS.md)
    proofs: list[Row] = field(default_factory=list)
    # The units of work a worker process's death left unfinished (pcspec.tools.workers): their
    # cells are unknown, the proofs absent; never a pass.
    crashed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            all(c.ok for c in self.cells)
            and all(self.mutants.values())
            and all(r.ok for r in self.proofs)
            and not self.crashed
        )

    @property
    def unknown(self) -> list[Cell]:
        """Cells a time cap cut short: neither a pass nor a failure."""
        return [c for c in self.cells if c.verdict == "unknown"]

    @property
    def mismatches(self) -> list[Cell]:
        """Cells whose settled verdict contradicts the oracle (or whose trace did not replay)."""
        return [c for c in self.cells if not c.ok and c.verdict != "unknown"]

    @property
    def proof_mismatches(self) -> list[Row]:
        """Proof rows settled otherwise than expected (or counterexamples that did not replay)."""
        return [r for r in self.proofs if not r.ok and r.result not in ("unknown", "not covered")]

    @property
    def exit_code(self) -> int:
        """0: everything matched; 1: a mismatch, an uncaught mutant or a proof settled
        otherwise than expected; 3: nothing contradicts the oracle but some cells or proofs
        are unknown (a time cap, a solver timeout, a worker process that died) or not covered
        (a design's own code the proofs do not encode)."""
        if self.mismatches or not all(self.mutants.values()) or self.proof_mismatches:
            return 1
        open_ = ("unknown", "not covered")
        return 3 if self.unknown or any(r.result in open_ for r in self.proofs) or self.crashed else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": 1,
            "ok": self.ok,
            "unknown": len(self.unknown),
            "fuzz": [c.to_json() for c in self.cells],
            "mutants": [{"mutant": m, "caught_by": by} for m, by in self.mutants.items()],
            "coverage": {
                design: {name: counts[name] for name in DECISIONS} for design, counts in self.coverage.items()
            },
            "proofs": [r.to_json() for r in self.proofs],
            "crashed": self.crashed,
        }


@dataclass
class Budget:
    """What a verdict depends on: the seed and the example budgets (the walker's examples);
    the seconds are safety caps only (a cut walk is ``unknown``)."""

    seed: int = 0
    survey_examples: int = 600
    survey_seconds: float = 40.0
    hunt_examples: int = HUNT_EXAMPLES
    hunt_seconds: float = 20.0

    @staticmethod
    def of(profile: str, seed: int, survey_seconds: float, hunt_seconds: float) -> Budget:
        survey, hunts = PROFILES[profile]
        return Budget(seed, survey, survey_seconds, hunts, hunt_seconds)


# The example budgets of ``--profile``: (survey examples, hunt examples). ``ci``, the default,
# finds every expected violation and mutant target in every seed measured (docs/PERFORMANCE.md).
PROFILES: dict[str, tuple[int, int]] = {
    "ci": (600, HUNT_EXAMPLES),
    "dev": (3000, 4 * HUNT_EXAMPLES),
    "campaign": (20_000, 10 * HUNT_EXAMPLES),
}


def _save(hit: Hit, out: Path | None, variant_ref: str | None = None) -> tuple[str | None, bool, int]:
    """Shrink the trace, write it and its pytest snippet, replay it; return (path,
    reproduced, length)."""
    hit.trace = shrink(hit.trace, hit.property)
    hit.message = hit.trace.expect[0]["message"] if hit.trace.expect else hit.message
    # (a mutant's trace must also leave its base design clean of the property: judge.base_violates)
    reproduced = replay(hit.trace).matches(hit.trace.expect) and not base_violates(hit.trace, hit.property)
    if out is None:
        return None, reproduced, len(hit.trace.ops)
    stem = f"{hit.trace.variant.name.replace(':', '-')}__{hit.property}"
    path = write_counterexample(hit.trace, out, stem, variant_ref)
    return str(path), reproduced, len(hit.trace.ops)


def _hunt(v: Design, pid: str, budget: Budget) -> tuple[Run, Hit | None]:
    return hunt(v, pid, budget.seed, budget.hunt_examples, budget.hunt_seconds)


@dataclass
class Surveyed:
    """What a design's survey settles: the cells of the properties it saw violated (their
    traces shrunk and saved), the properties still to hunt (expected violated, not seen), and
    the survey's run (its steps and time count towards the cells it leaves holding)."""

    run: Run
    cells: dict[str, Cell]
    to_hunt: list[str]
    expected: dict[str, str]


def survey_cells(
    v: Design,
    budget: Budget,
    out: Path | None,
    pids: Sequence[str],
    declared: Collection[str] = (),
    variant_ref: str | None = None,
) -> Surveyed:
    """The survey of one design and the cells it settles by itself (judging ``pids`` only: the
    walks are the same whichever properties are judged)."""
    every = [p.id for p in CATALOGUE]
    run, hits = survey(v, budget.seed, budget.survey_examples, budget.survey_seconds,
                       None if list(pids) == every else list(pids))
    exp: dict[str, str] = {pid: expected(v.name, pid, declared) for pid in pids}
    cells: dict[str, Cell] = {}
    for pid in pids:
        if pid in hits:
            cells[pid] = _violated(v, pid, exp[pid], run, hits[pid], out, variant_ref)
    return Surveyed(run, cells, [pid for pid in pids if pid not in hits and exp[pid] == "x"], exp)


def hunt_cell(
    v: Design, pid: str, exp: str, surveyed: Run, budget: Budget, out: Path | None, variant_ref: str | None = None
) -> tuple[Cell, Counter[str]]:
    """The hunt of a design's expected violation its survey did not see (``surveyed``: that
    survey's run), and the decisions the hunt reached."""
    hrun, hit = _hunt(v, pid, budget)
    if hit is not None:
        return _violated(v, pid, exp, hrun, hit, out, variant_ref), hrun.coverage
    complete = hrun.complete and surveyed.complete
    verdict = "holds" if complete else "unknown"
    return Cell(v.name, pid, exp, verdict, surveyed.steps + hrun.steps, surveyed.seconds + hrun.seconds), hrun.coverage


def held_cell(variant: str, pid: str, exp: str, surveyed: Run) -> Cell:
    """A property the survey did not see violated and no hunt was owed."""
    return Cell(variant, pid, exp, "holds" if surveyed.complete else "unknown", surveyed.steps, surveyed.seconds)


def _violated(v: Design, pid: str, exp: str, run: Run, hit: Hit, out: Path | None, variant_ref: str | None) -> Cell:
    path, ok, n = _save(hit, out, variant_ref)
    route = route_name(v.name, pid, hit.trace.ops)  # (of the shrunk trace)
    return Cell(v.name, pid, exp, "violated", run.steps, run.seconds, path, n, hit.message, ok, route)


def mutant_cell(v: Design, pid: str, budget: Budget, out: Path | None) -> Cell:
    """One target of a mutant hunted. A mutant is caught once one of its target properties
    is violated (and the trace replays): a hunt stops at the first violation, a survey would
    run its whole budget."""
    hrun, hit = _hunt(v, pid, budget)
    if hit is None:
        return Cell(v.name, pid, "x", "holds" if hrun.complete else "unknown", hrun.steps, hrun.seconds)
    path, ok, n = _save(hit, out)
    return Cell(v.name, pid, "x", "violated", hrun.steps, hrun.seconds, path, n, hit.message, ok)


def caught_by(cells: Sequence[Cell], mutant: str) -> list[str]:
    """The targets that caught a mutant: violated, with a trace that replays (target order)."""
    return [c.property for c in cells if c.variant == mutant and c.verdict == "violated" and c.replayed]


def fuzz_variant(
    v: Design,
    budget: Budget,
    out: Path | None,
    properties: Sequence[str] | None = None,
    progress: Callable[[str], None] = lambda _msg: None,
    coverage: Counter[str] | None = None,
    declared: Collection[str] = (),
    variant_ref: str | None = None,
) -> list[Cell]:
    """The cells of one design: a survey, then a hunt for each expected violation the survey
    did not see. ``coverage`` collects the decisions every run of it reached. ``declared``: the
    violations a variant of the user's is expected to show (``oracle.expected``);
    ``variant_ref``: where its pytest files import it from (``MODULE:NAME``)."""
    pids = list(properties) if properties else [p.id for p in CATALOGUE]
    progress(f"{v.name}: survey")
    s = survey_cells(v, budget, out, pids, declared, variant_ref)
    if coverage is not None:
        coverage.update(s.run.coverage)
    cells: list[Cell] = []
    for pid in pids:
        if pid in s.cells:
            cells.append(s.cells[pid])
        elif pid in s.to_hunt:
            progress(f"{v.name}: hunt {pid}")
            c, reached = hunt_cell(v, pid, s.expected[pid], s.run, budget, out, variant_ref)
            if coverage is not None:
                coverage.update(reached)
            cells.append(c)
        else:
            cells.append(held_cell(v.name, pid, s.expected[pid], s.run))
    return cells


@dataclass
class Tick:
    """What a progress display shows: the unit of work starting now, cells settled of all,
    and the model steps examined so far."""

    message: str
    done: int
    total: int
    steps: int


@dataclass(frozen=True)
class Mine:
    """A design of the user's in the matrix: its name, where it is imported from
    (``MODULE:NAME``, as ``--variant-module`` takes it; a worker process imports it again) and
    the violations its author declared (``--expect``, ``PCSPEC_EXPECT``): its column is judged
    against those, every other property must hold."""

    name: str
    ref: str
    declared: frozenset[str] = frozenset()

    def design(self) -> Design:
        from pcspec.tools.user_variant import load_variant

        return load_variant(self.ref)


def selected(variants: Sequence[str] | None, mine: Sequence[Mine] = ()) -> tuple[list[Design], list[Design], int]:
    """The designs and the mutants ``verify`` runs (all, or those ``variants`` names), and how
    many cells they make. The designs are the oracle's rows: the model's designs and the
    upstream build b11549 (its rule set, properties/oracle.py); then the user's (``mine``)."""
    designs = [named()[name] for name in ORACLE if not variants or name in variants]
    designs += [m.design() for m in mine]
    mutants = [v for name, v in MUTANTS.items() if not variants or name in variants]
    return designs, mutants, len(designs) * len(CATALOGUE) + sum(len(MUTANT_TARGETS[v.name]) for v in mutants)


def declared_of(name: str, mine: Sequence[Mine]) -> tuple[frozenset[str], str | None]:
    """(the declared violations, the import reference) of a design of the user's; none else."""
    m = next((x for x in mine if x.name == name), None)
    return (m.declared, m.ref) if m is not None else (frozenset(), None)


# What ``verify`` proves after the fuzzing unless told otherwise: pcspec prove's defaults.
PROOFS = RunConfig()


def proof_rows(proofs: RunConfig, out: Path | None, variants: Sequence[str] | None,
               mine: Sequence[Mine] = ()) -> list[Row]:
    """The proof obligations whose variant is among ``variants`` (all when None), then every
    obligation against each design of the user's (``mine``: proved, a replayed counterexample,
    or not covered); their traces in a folder of their own (the fuzzing's are one per cell)."""
    where = None if out is None else out / "proofs"
    rows = run_suite(proofs, out=where, only=variants).rows
    if mine:
        rows += run_suite(proofs, variants=[m.design() for m in mine], out=where,
                          declared={m.name: m.declared for m in mine}).rows
    return rows


def verify(
    budget: Budget,
    out: Path | None,
    variants: Sequence[str] | None = None,
    progress: Callable[[Tick], None] = lambda _tick: None,
    proofs: RunConfig | None = PROOFS,
    mine: Sequence[Mine] = (),
) -> Matrix:
    """Fuzz every design and mutant (or ``variants``), and the user's (``mine``), then run the
    proof obligations whose variant is among them (``proofs``: None runs none)."""
    m = Matrix()
    designs, mutants, total = selected(variants, mine)

    def tell(msg: str) -> None:
        progress(Tick(msg, len(m.cells), total, sum(c.steps for c in m.cells)))

    for v in designs:
        m.coverage[v.name] = Counter()
        declared, ref = declared_of(v.name, mine)
        m.cells += fuzz_variant(v, budget, out, progress=tell, coverage=m.coverage[v.name], declared=declared,
                                variant_ref=ref)
    for v in mutants:
        # Every target is hunted: besides catching the mutant, this is where the properties
        # that hold on all four designs are shown to be able to fail at all.
        for pid in MUTANT_TARGETS[v.name]:
            tell(f"{v.name}: hunt {pid}")
            m.cells.append(mutant_cell(v, pid, budget, out))
        m.mutants[v.name] = caught_by(m.cells, v.name)
    if proofs is not None:
        tell("proofs")
        m.proofs = proof_rows(proofs, out, variants, mine)
    tell("done")
    return m
