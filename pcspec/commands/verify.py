"""``pcspec verify``: fuzz every variant and mutant against the oracle and print the matrix."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from pcspec.model.variants import ALL, get_variant
from pcspec.properties.catalogue import CATALOGUE
from pcspec.properties.machine import PROFILES
from pcspec.verdicts import Budget, Cell, Matrix, verify

SYMBOL = {"violated": "x", "holds": ".", "unknown": "?"}


def add_budget_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", choices=sorted(PROFILES), default="ci", help="Hypothesis settings profile (default ci)")
    p.add_argument("--seed", type=int, default=0, help="the run's seed: same seed, same result (default 0)")
    p.add_argument("--hunt-seconds", type=float, default=20.0, help="time budget of one hunt (default 20)")
    p.add_argument("--survey-seconds", type=float, default=40.0, help="time budget of one survey (default 40)")
    p.add_argument("--out", type=Path, default=Path("pcspec-out"), help="where traces go (default ./pcspec-out)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")


def budget_of(args: argparse.Namespace) -> Budget:
    # The ci profile's example counts are for the test suite's own machine runs; a verify
    # survey needs more examples to meet the rare combinations (see docs/PERFORMANCE.md).
    examples = PROFILES[args.profile].max_examples
    survey = 600 if args.profile == "ci" else examples
    return Budget(args.profile, args.seed, survey, args.survey_seconds, max(1500, examples), args.hunt_seconds)


def register(sub: Any) -> None:
    p = sub.add_parser("verify", help="fuzz every variant and mutant against the oracle; print the verdict matrix")
    p.add_argument("--variant", action="append", help="only these variants/mutants (repeatable)")
    add_budget_args(p)
    p.set_defaults(func=run)


def progress_printer(enabled: bool) -> Any:
    t0 = time.monotonic()

    def show(msg: str) -> None:
        if enabled:
            print(f"  [{time.monotonic() - t0:6.1f}s] {msg}", file=sys.stderr, flush=True)

    return show


def print_matrix(m: Matrix) -> None:
    pids = [p.id for p in CATALOGUE]
    designs = sorted({c.variant for c in m.cells if not c.variant.startswith("mutant:")}, key=list(ALL).index)
    width = max(len(p) for p in pids)
    print("verdicts (x violated, . holds, ? unknown; ! marks a mismatch with the oracle)")
    print(" " * (width + 2) + "".join(f"{d:>10s}" for d in designs))
    by = {(c.variant, c.property): c for c in m.cells}
    for pid in pids:
        row = ""
        for d in designs:
            c = by.get((d, pid))
            row += f"{'' if c is None else SYMBOL[c.verdict] + ('' if c.ok else '!'):>10s}"
        print(f"  {pid:<{width}s}{row}")
    print()
    for c in m.cells:
        if c.verdict == "violated":
            status = "" if c.ok else "  <-- MISMATCH"
            print(f"  {c.variant:<26s} {c.property:<10s} {c.length} ops  {c.trace}{status}")
    print()
    print("mutants:")
    for name, by_p in m.mutants.items():
        print(f"  {name:<26s} " + (f"caught by {', '.join(by_p)}" if by_p else "NOT CAUGHT"))
    bad = [c for c in m.cells if not c.ok]
    print()
    print(
        "OK: every cell matches the oracle and every mutant is caught"
        if m.ok
        else f"FAILED: {len(bad)} cell(s) do not match"
    )
    for c in bad:
        print(
            f"  {c.variant} {c.property}: expected {c.expected}, got {c.verdict}"
            + (" (trace did not replay)" if c.replayed is False else "")
        )


def run(args: argparse.Namespace) -> int:
    if args.variant:
        args.variant = [get_variant(name).name for name in args.variant]  # unknown: lists the valid ones
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    m = verify(budget_of(args), args.out, args.variant, progress_printer(not args.json))
    if args.json:
        out = m.to_json()
        out["seconds"] = round(time.monotonic() - t0, 1)
        print(json.dumps(out, indent=1))
    else:
        print_matrix(m)
        print(f"\n{len(m.cells)} cells in {time.monotonic() - t0:.1f}s; traces in {args.out}/")
    return 0 if m.ok else 1


__all__ = ["Cell", "add_budget_args", "budget_of", "print_matrix", "progress_printer"]
