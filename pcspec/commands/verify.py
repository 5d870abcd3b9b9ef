"""``pcspec verify``: fuzz every variant and mutant against the oracle, run the Z3 proof
obligations (``pcspec prove``), and print the matrix and the proofs."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from pcspec.commands.argtypes import positive, seconds
from pcspec.commands.progress import verify_progress
from pcspec.commands.prove import add_prove_args, config_of, print_row
from pcspec.core.outdir import ensure_writable_dir
from pcspec.model.designs import get_design, named
from pcspec.properties.catalogue import CATALOGUE
from pcspec.properties.coverage import DECISIONS, UNREACHABLE, missing, never_reached
from pcspec.tools.columns import describe
from pcspec.tools.user_variant import add_expect_option, declared_violations, load_variant
from pcspec.tools.verdicts import PROFILES, Budget, Cell, Matrix, Mine, verify
from pcspec.tools.workers import verify_in_workers

SYMBOL = {"violated": "x", "holds": ".", "unknown": "?"}


def add_budget_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--profile",
        choices=list(PROFILES),
        default="ci",
        help="example budgets: ci (600 survey, 4000 per hunt; the default), dev, campaign",
    )
    p.add_argument("--seed", type=int, default=0, help="the run's seed: same seed, same result (default 0)")
    # The budgets that decide a verdict are example counts (the profile's); the seconds are
    # safety caps, far above what a run needs on a loaded 2-core machine (a hunt takes at
    # most a few seconds, a survey under 30). A run a cap cuts short reports ``unknown``.
    p.add_argument("--hunt-seconds", type=seconds, default=300.0, help="safety time cap of one hunt (default 300)")
    p.add_argument("--survey-seconds", type=seconds, default=600.0, help="safety time cap of one survey (default 600)")
    p.add_argument("--out", type=Path, default=Path("pcspec-out"), help="where traces go (default ./pcspec-out)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")


def budget_of(args: argparse.Namespace) -> Budget:
    return Budget.of(args.profile, args.seed, args.survey_seconds, args.hunt_seconds)


def register(sub: Any) -> None:
    p = sub.add_parser("verify", help="fuzz every variant and mutant against the oracle; print the verdict matrix")
    p.add_argument("--variant", action="append", help="only these variants/mutants (repeatable)")
    p.add_argument("--variant-module", action="append", default=[], metavar="MODULE:NAME",
                   help="a design of your own as an extra column (repeatable): a Design subclass NAME in MODULE, "
                   "found from the current folder; judged against the violations it declares")
    add_expect_option(p)
    p.add_argument(
        "--coverage",
        action="store_true",
        help="print which decisions each design's runs reached and how often (the JSON always has them)",
    )
    p.add_argument(
        "--workers",
        type=positive,
        default=cores(),
        help=f"worker processes for the cells (default: the machine's cores, {cores()} here); "
        "1 runs them in this process; the result is the same",
    )
    add_budget_args(p)
    add_prove_args(p)  # the proofs run after the fuzzing (pcspec prove's defaults)
    p.set_defaults(func=run)


def cores() -> int:
    """The cores this process may use (Python 3.13's ``os.process_cpu_count`` honours the CPU
    affinity; before it, ``os.cpu_count``: every core of the machine)."""
    count = getattr(os, "process_cpu_count", os.cpu_count)()
    return max(1, count or 1)


def print_matrix(m: Matrix) -> None:
    pids = [p.id for p in CATALOGUE]
    designs = sorted({c.variant for c in m.cells if not c.variant.startswith("mutant:")}, key=list(named()).index)
    width = max(len(p) for p in pids)
    by = {(c.variant, c.property): c for c in m.cells}
    if designs:  # (a mutant-only run has no design columns: only the mutants' table below)
        print("verdicts (x violated, . holds, ? unknown; ! marks a mismatch with the oracle)")
        print(" " * (width + 2) + "".join(f"{d:>10s}" for d in designs))
        for pid in pids:
            row = ""
            for d in designs:
                c = by.get((d, pid))
                row += f"{'' if c is None else SYMBOL[c.verdict] + ('' if c.ok else '!'):>10s}"
            print(f"  {pid:<{width}s}{row}")
        for d in designs:
            print(f"  {describe(named()[d])}")
        print()
    for c in m.cells:
        if c.verdict == "violated":
            status = "" if c.ok else "  <-- MISMATCH"
            print(f"  {c.variant:<26s} {c.property:<10s} {c.length} ops  {c.trace}{_route(c)}{status}")
    if m.mutants:
        print()
        print("mutants:")
        for name, by_p in m.mutants.items():
            print(f"  {name:<26s} " + (f"caught by {', '.join(by_p)}" if by_p else "NOT CAUGHT"))
    bad = m.mismatches
    print()
    if m.ok:
        print("OK: every cell matches the oracle and every mutant is caught")
    elif bad or not all(m.mutants.values()):
        print(f"FAILED: {len(bad)} cell(s) do not match")
    for c in bad:
        print(
            f"  {c.variant} {c.property}: expected {c.expected}, got {c.verdict}"
            + (" (trace did not replay)" if c.replayed is False else "")
        )
    capped = [c for c in m.unknown if c.message is None]  # (a lost unit's cells say so in their message)
    if capped:
        print(
            f"UNKNOWN: {len(capped)} cell(s) cut short by a time cap (never a pass); raise "
            "--survey-seconds / --hunt-seconds, or run on a less loaded machine"
        )
        for c in capped:
            print(f"  {c.variant} {c.property}: unknown after {c.steps} steps")
    if m.crashed:
        lost = len(m.unknown) - len(capped)
        print(
            f"CRASHED: a worker process died; {len(m.crashed)} unit(s) of work lost, the others ran; "
            f"{lost} cell(s) unknown (never a pass):"
        )
        for unit in m.crashed:
            print(f"  lost unit {unit}")


def _route(c: Cell) -> str:
    """How the counterexample comes about (properties/routes.py, docs/PROPERTIES.md)."""
    if c.route is None:
        return ""
    if c.route:
        return f"  [{c.route}]"
    return "  [a route not in properties/routes.py: read the trace, then list it there]"


def print_coverage(m: Matrix) -> None:
    """One row per decision (properties/coverage.py), one column per design: how often the
    design's survey and hunts reached it; ``-`` where ``UNREACHABLE`` excuses it, ``0!``
    where nothing excuses it."""
    designs = list(m.coverage)
    width = max(len(n) for n in DECISIONS)
    print()
    print("decision coverage (times reached; - unreachable by design, 0! never reached)")
    print(" " * (width + 2) + "".join(f"{d:>10s}" for d in designs))
    for name in DECISIONS:
        row = ""
        for d in designs:
            n = m.coverage[d][name]
            row += f"{(str(n) if n else '-' if (d, name) in UNREACHABLE else '0!'):>10s}"
        print(f"  {name:<{width}s}{row}")
    gaps = {d: missing(d, m.coverage[d]) for d in designs}
    never = never_reached(m.coverage)
    print("every decision reached by some design" if not never else f"NEVER REACHED: {', '.join(never)}")
    if any(gaps.values()):
        print("not reached by this design's runs: " + "; ".join(f"{d}: {', '.join(g)}" for d, g in gaps.items() if g))


def print_proofs(m: Matrix) -> None:
    """The proof obligations (docs/PROOFS.md), one line each, as ``pcspec prove`` prints them."""
    if not m.proofs:
        return
    print()
    print("proofs (Z3; counterexamples replayed in the model):")
    for r in m.proofs:
        print_row(r)
    bad = [r for r in m.proofs if not r.ok]
    proved = sum(r.result == "proved" for r in m.proofs)
    uncovered = sum(r.result == "not covered" for r in m.proofs)
    print(
        f"{len(m.proofs)} proofs, {proved} proved"
        + (f", {uncovered} not covered" if uncovered else "") + ": "
        + ("every obligation as expected" if not bad else f"{len(bad)} NOT as expected (never a pass)")
    )


def run(args: argparse.Namespace) -> int:
    if args.variant:
        args.variant = [get_design(name).name for name in args.variant]  # unknown: lists the valid ones
    by_ref = declared_violations(args.expect, args.variant_module)
    mine = [Mine(load_variant(ref).name, ref, by_ref[ref]) for ref in args.variant_module]
    ensure_writable_dir(args.out)  # refused before any fuzzing, not after it
    t0 = time.monotonic()
    with verify_progress(not args.json) as show:
        if args.workers == 1:  # in this process, unit after unit
            m = verify(budget_of(args), args.out, args.variant, show, config_of(args), mine)
        else:
            m = verify_in_workers(budget_of(args), args.out, args.variant, show, config_of(args), args.workers,
                                  mine=mine)
    if args.json:
        out = m.to_json()
        out["seconds"] = round(time.monotonic() - t0, 1)
        print(json.dumps(out, indent=1))
    else:
        print_matrix(m)
        if args.coverage:
            print_coverage(m)
        print_proofs(m)
        print(f"\n{len(m.cells)} cells in {time.monotonic() - t0:.1f}s; traces in {args.out}/")
    return m.exit_code


__all__ = ["Cell", "add_budget_args", "budget_of", "print_matrix"]
