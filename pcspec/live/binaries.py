"""The verdict matrix on the designs' binaries (``pcspec live --matrix``, docs/FINDINGS.md).

A cell of the verdict matrix is a claim about C++: a design violates a property. Where a live
workload reaches the cell, this runs it on each design's cached build and on the model of the
same build (``calibrate.design_rules``), and says what the binary showed:

* ``seen``: the model of the build violates the property on the workload, and the binary did
  what the model did (every finding of the run explained: no divergence from the model, no log
  deviation, no answer the model did not give);
* ``clean``: the model of the build does not violate it there, the binary agreed, and the
  verdict matrix says the design violates the property (by another route, or the design is
  ``fixed``, where the cell is ``.`` and the patches make it hold);
* ``holds``: as ``clean``, for a cell the verdict matrix marks ``.``;
* ``diverged``: the binary did something the model of its build did not (the first unexplained
  finding is named): the cell is not settled by this run;
* ``not built``: no cached build (``pcspec build --design NAME``).

A violated cell no workload here reaches is listed with the reason (``REACHED_ELSEWHERE``: the
fault builds and draft models of the live tests, which a workload file cannot describe yet; or
why no binary can show it).

The workloads are package data (``pcspec/live/repro/*.jsonl``), each one route of one property
(docs/PROPERTIES.md); ``pcspec live --design NAME --replay FILE`` runs one of them alone.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pcspec.core.errors import PcspecError
from pcspec.live import calibrate
from pcspec.live.analyze import is_observation
from pcspec.live.build import find_server
from pcspec.live.campaign import References
from pcspec.live.designs import DESIGNS, design_of
from pcspec.live.explain import explain
from pcspec.live.models import ensure_model
from pcspec.live.report import read_workload
from pcspec.live.session import Outcome, Target, execute
from pcspec.properties.catalogue import CATALOGUE
from pcspec.properties.judge import first_violation
from pcspec.properties.oracle import ORACLE, expected

REPRO_DIR = Path(__file__).resolve().parent / "repro"


@dataclass(frozen=True)
class Repro:
    cell: str  # the property (docs/PROPERTIES.md)
    route: str  # the route of its entry there
    workload: str  # a file of REPRO_DIR
    finding: str  # where docs/FINDINGS.md tells it
    tries: int = 1  # runs until the model's violation shows (a race: F1)
    # False: not a route that violates the cell but a workload where it must hold on every build
    # (FILE-1's round trip); the cell's violating route is then listed with REACHED_ELSEWHERE
    violating: bool = True


REPROS: tuple[Repro, ...] = (
    Repro("PROGRESS-1", "busy-pinned-load", "progress-1-pinned-busy.jsonl", "F1", tries=3),
    Repro("STATE-1", "swa-off-by-one", "state-1-swa-off-by-one.jsonl", "F2"),
    Repro("RESTORE-1", "unshared-last-position", "restore-1-unshared-last-position.jsonl", "F11"),
    Repro("PERF-2", "supersede", "perf-2-supersede.jsonl", "the PERF-2 row"),
    Repro("REUSE-1", "live-memory-test", "reuse-1-live-memory-test.jsonl", "the REUSE-1 row"),
    Repro("REUSE-2", "nan-f-keep", "reuse-2-empty-pinned.jsonl", "the REUSE-2 row"),
    # A slot file with checkpoints, saved, restored over another prompt, and a prompt resuming
    # from its checkpoints: the round trip FILE-1 asks for, on the trees that write an appendix
    # (b11549 on; the October tree restores the tokens alone, F3). Its violating route needs a
    # failed checkpoint allocation (a fault build).
    Repro("FILE-1", "round-trip", "file-1-round-trip.jsonl", "F3 and the FILE-1 row", violating=False),
)

# Cells the workloads above do not reach, and where they are shown or why they cannot be.
REACHED_ELSEWHERE: dict[str, str] = {
    "RB-1": "a fault build, a short state write armed (tests/live/test_live_faults.py)",
    "RB-2": "a fault build, a failed state allocation armed (tests/live/test_live_faults.py)",
    "RB-3": "no binary: save.alloc.entry's sizes are shared by other allocations, alloc.SIZE cannot name it",
    "NOABORT-1": "a fault build, a failed checkpoint restore or allocation armed (tests/live/test_live_faults.py)",
    "CKPT-1": "a slot file whose tokens marker is changed in place (tests/live/test_live_tokens_marker.py)",
    "CKPT-2": "a fault build, a failed checkpoint allocation beside a generating slot (tests/live/test_live_faults.py)",
    "LIVE-1": "a fault build, a failed allocation at a save (tests/live/test_live_faults.py)",
    "IMM-2": "a fault build and a draft model (tests/live/test_live_draft_cache_load.py)",
    "PERF-1": "a fault build counting allocations (tests/live/test_live_faults.py)",
    "ACC-1": "a benchmark of several GiB (pcspec bench idle-slots; docs/BENCH.md)",
    "ACC-3": "a benchmark of several GiB (pcspec bench idle-slots; docs/BENCH.md)",
    "FILE-1": "a fault build, a failed checkpoint allocation saved into a slot file (route empty-checkpoint); the "
              "October tree writes no checkpoint appendix (#26004 came after it)",
}

Observe = Callable[[str], None]


@dataclass(frozen=True)
class Cell:
    cell: str
    route: str
    design: str
    verdict: str  # seen | clean | holds | diverged | not built
    detail: str = ""


def oracle_name(design: str) -> str:
    """The verdict matrix's column a build's cells are read from: a design under the
    ``november`` rules is judged as under ``spec``, whose checkpoint and cache rules are
    November's (they differ in the slot files' state version and what the server offers
    clients, which move no verdict: docs/RULESETS.md)."""
    base, _, rules = design.partition("@")
    return base if rules == "november" else design


def _binary(design: str) -> Path | None:
    d = design_of(design)
    return find_server(d.tree, d.patch_paths(), d.flags)


def _unexplained(out: Outcome) -> str | None:
    for f in out.analysis.findings:
        if not is_observation(f) and explain(f, out) is None:
            return f"{f.rule}: {f.message}"
    return None


def _violated(out: Outcome, pid: str) -> str | None:
    p = out.analysis.predictor
    if p is None:
        raise PcspecError("the run was not compared with the model")
    v = first_violation(p.trace(), pid)
    return None if v is None else str(v["message"])


def observe(repro: Repro, design: str, models: Path, workdir: Path, timeout: float = 20.0) -> Cell:
    """Run ``repro``'s workload on ``design``'s cached build and judge the cell."""
    binary = _binary(design)
    if binary is None:
        return Cell(repro.cell, repro.route, design, "not built", f"pcspec build --design {design}")
    kind, flags, _seed, ops = read_workload(REPRO_DIR / repro.workload)
    model = ensure_model(kind, models)
    rules = calibrate.design_rules(design, design_of(design).tree)
    mark = expected(oracle_name(design), repro.cell)
    last = Cell(repro.cell, repro.route, design, "diverged", "no run")
    for i in range(repro.tries):
        refs = References(binary, model, workdir / f"try{i}" / "refs", timeout, kind)
        try:
            out = execute(Target(binary, model, kind, flags), workdir / f"try{i}" / "run", refs.get(flags), ops=ops,
                          timeout=timeout, variant=rules)
        finally:
            refs.close()
        odd = _unexplained(out)
        if odd is not None:
            last = Cell(repro.cell, repro.route, design, "diverged", odd)
            continue
        why = _violated(out, repro.cell)
        if why is not None:
            return Cell(repro.cell, repro.route, design, "seen", why)
        last = Cell(repro.cell, repro.route, design, "clean" if mark == "x" else "holds",
                    "" if i == 0 else f"in {i + 1} runs")
    return last


def matrix(designs: Sequence[str] = tuple(DESIGNS), repros: Sequence[Repro] = REPROS,
           say: Observe | None = None, timeout: float = 20.0) -> list[Cell]:
    """Every reproduction on every design's build, in order."""
    out: list[Cell] = []
    with tempfile.TemporaryDirectory(prefix="pcspec-matrix-") as tmp:
        root = Path(tmp)
        for r in repros:
            for d in designs:
                c = observe(r, d, root / "models", root / f"{r.workload}-{d}", timeout)
                if say is not None:
                    say(f"{r.cell} ({r.route}) on {d}: {c.verdict}")
                out.append(c)
    return out


def render(cells: Sequence[Cell], designs: Sequence[str]) -> str:
    """The matrix as a table: a row per reproduced cell and route, a column per design, then
    the violated cells no workload here reaches, with the reason."""
    rows: dict[tuple[str, str], dict[str, Cell]] = {}
    for c in cells:
        rows.setdefault((c.cell, c.route), {})[c.design] = c
    width = max([len(f"{p} ({r})") for p, r in rows] + [10])
    col = max([len(d) for d in designs] + [10])
    lines = ["cell (route)".ljust(width) + "".join(f"  {d:<{col}}" for d in designs)]
    for (pid, route), by in rows.items():
        lines.append(f"{pid} ({route})".ljust(width) + "".join(
            f"  {by[d].verdict if d in by else '-':<{col}}" for d in designs))
    odd = [c for c in cells if c.verdict == "diverged"]
    for c in odd:
        lines.append(f"  diverged: {c.cell} on {c.design}: {c.detail}")
    holding = {(r.cell, r.route) for r in REPROS if not r.violating}
    reached = {c.cell for c in cells if (c.cell, c.route) not in holding}
    rest = [p.id for p in CATALOGUE if p.id not in reached
            and any(expected(oracle_name(d), p.id) == "x" for d in designs if oracle_name(d) in ORACLE)]
    if rest:
        lines.append("")
        lines.append("violated cells no workload of this command reaches:")
        for pid in rest:
            lines.append(f"  {pid}: {REACHED_ELSEWHERE.get(pid, 'not driven on a binary yet')}")
    return "\n".join(lines)
