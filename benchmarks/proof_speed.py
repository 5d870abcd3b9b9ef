"""Proof speed (docs/PERFORMANCE.md, "Targets"): Z3 solving time of the whole proof suite, the
slowest obligation, and the cvc5 re-check of every exported query.

Targets: Z3 solving time for the whole suite at most 5 s, no obligation (one obligation against
one variant, all its queries) over 5 s, the cvc5 re-check at most 30 s. The suite runs once
per seed (``--seeds``, default 5: seeds 0..4), each query in a fresh context as ``pcspec prove``
runs it; the export of the first seed is re-checked with cvc5. ``--deep`` also times the deep
profile (8 entries, 10 checkpoints).

Usage:  python benchmarks/proof_speed.py [--seeds N] [--deep] [--check]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from pcspec.proofs.cache_proofs import Bounds
from pcspec.proofs.recheck import available, recheck
from pcspec.proofs.run import RunConfig
from pcspec.proofs.solver import Settings, z3_version
from pcspec.proofs.suite import Report, export, run_suite

SUITE_TARGET, OBLIGATION_TARGET, RECHECK_TARGET = 5.0, 5.0, 30.0


def one(seed: int, bounds: Bounds) -> tuple[Report, float]:
    t0 = time.perf_counter()
    report = run_suite(RunConfig(Settings(seed=seed), bounds))
    return report, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--deep", action="store_true", help="also time the deep profile (8 entries, 10 checkpoints)")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args()
    print(f"z3 {z3_version()}; {args.seeds} seeds; default bounds {Bounds().describe()}")
    ok = True
    totals: list[float] = []
    worst: list[tuple[float, str]] = []
    first: Report | None = None
    for seed in range(args.seeds):
        report, wall = one(seed, Bounds())
        first = first or report
        slowest = max(report.rows, key=lambda r: r.seconds)
        totals.append(report.seconds)
        worst.append((slowest.seconds, f"{slowest.obligation} on {slowest.variant}"))
        ok &= report.ok
        print(
            f"  seed {seed}: {len(report.rows)} rows, all as expected: {report.ok}; Z3 solving {report.seconds:.2f}s"
            f" (slowest {slowest.seconds:.2f}s, {slowest.obligation} on {slowest.variant}); wall {wall:.1f}s"
        )
    med, top = statistics.median(totals), max(totals)
    slow = max(worst)
    print(f"Z3 solving, whole suite: median {med:.2f}s, max {top:.2f}s over {args.seeds} seeds", end="")
    print(f" (target <= {SUITE_TARGET}s)")
    print(f"slowest obligation: {slow[0]:.2f}s ({slow[1]}) (target <= {OBLIGATION_TARGET}s)")
    ok &= top <= SUITE_TARGET and slow[0] <= OBLIGATION_TARGET
    if args.deep:
        report, wall = one(0, Bounds(8, 10))
        slowest = max(report.rows, key=lambda r: r.seconds)
        print(
            f"deep profile (8 entries, 10 checkpoints): all as expected {report.ok}; Z3 solving {report.seconds:.2f}s,"
            f" slowest {slowest.seconds:.2f}s ({slowest.obligation} on {slowest.variant}); wall {wall:.1f}s"
        )
    if not available():
        print("cvc5 not installed: no re-check (pip install cvc5==1.4.2)")
        return 1 if args.check else 0
    assert first is not None
    with tempfile.TemporaryDirectory() as tmp:
        export(first, Path(tmp))
        checked = recheck(Path(tmp))
    total = sum(c.seconds for c in checked)
    agree = sum(c.agrees for c in checked)
    slowest_c = max(checked, key=lambda c: c.seconds)
    print(
        f"cvc5 re-check: {agree} of {len(checked)} queries agree with Z3; {total:.1f}s"
        f" (slowest {slowest_c.seconds:.2f}s, {slowest_c.file}) (target <= {RECHECK_TARGET}s)"
    )
    ok &= agree == len(checked) and total <= RECHECK_TARGET
    print("all targets met" if ok else "TARGET MISSED")
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
