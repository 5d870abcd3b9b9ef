"""``pcspec prove``: the Z3 proof obligations, each against ``fixed`` and its paired buggy
designs; counterexamples replayed in the model; optionally exported as SMT-LIB 2 and
re-checked with a second solver (cvc5)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from pcspec.commands.argtypes import count, positive
from pcspec.core.errors import PcspecError
from pcspec.core.outdir import ensure_writable_dir
from pcspec.model.designs import get_design
from pcspec.proofs.cache_proofs import Bounds
from pcspec.proofs.obligations import BY_ID, OBLIGATIONS
from pcspec.proofs.recheck import Recheck, recheck, require_cvc5
from pcspec.proofs.run import Row, RunConfig
from pcspec.proofs.solver import Settings, version_measured, z3_version
from pcspec.proofs.suite import Report, export, run_suite
from pcspec.tools.user_variant import add_expect_option, declared_violations, load_variant

DEEP = Bounds(8, 10)


def add_prove_args(p: argparse.ArgumentParser) -> None:
    """The options ``pcspec verify`` shares (the solver's seed and limits)."""
    p.add_argument("--proof-seed", type=count, default=0, help="Z3's random seed (default 0)")
    p.add_argument("--proof-timeout", type=positive, default=5000, help="per-query timeout in ms (default 5000)")
    p.add_argument(
        "--proof-rlimit",
        type=positive,
        default=Settings().rlimit,
        help=f"per-query resource limit of the solver, in its work units (default {Settings().rlimit:,})",
    )


def register(sub: Any) -> None:
    p = sub.add_parser("prove", help="Z3 proof obligations: proved for fixed, counterexamples replayed for the others")
    p.add_argument(
        "--obligation", action="append", help="only these obligations (repeatable; e.g. IMM-1, ACC-1/unbounded)"
    )
    p.add_argument(
        "--variant", action="append", help="run against these variants instead of the paired ones (repeatable)"
    )
    p.add_argument(
        "--variant-module",
        action="append",
        metavar="MODULE:NAME",
        help="... or against a Design of your own: the object NAME in MODULE (repeatable)",
    )
    add_expect_option(p)
    add_prove_args(p)
    p.add_argument("--entries", type=positive, default=Bounds().n, help="bounded proofs: cache entries (default 6)")
    p.add_argument("--checkpoints", type=positive, default=Bounds().k, help="bounded proofs: checkpoints (default 8)")
    p.add_argument("--deep", action="store_true", help=f"the deep profile: {DEEP.n} entries, {DEEP.k} checkpoints")
    p.add_argument(
        "--depth", type=positive, default=4, help="counterexample search: requests after the first (default 4)"
    )
    p.add_argument("--smt2", type=Path, metavar="DIR", help="write every query solved as SMT-LIB 2, with manifest.json")
    p.add_argument("--recheck", action="store_true", help="re-check the --smt2 files with cvc5; verdicts must agree")
    p.add_argument(
        "--out", type=Path, default=Path("pcspec-out"), help="where counterexample traces go (default ./pcspec-out)"
    )
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.set_defaults(func=run)


def config_of(args: argparse.Namespace) -> RunConfig:
    bounds = (
        DEEP if getattr(args, "deep", False) else Bounds(getattr(args, "entries", 6), getattr(args, "checkpoints", 8))
    )
    if bounds.n < 2:
        raise PcspecError("--entries must be at least 2 (one entry and room for the new one)")
    settings = Settings(
        seed=args.proof_seed,
        timeout_ms=args.proof_timeout,
        rlimit=args.proof_rlimit,
        watchdog_s=2 * args.proof_timeout / 1000 + 1,
    )
    return RunConfig(settings, bounds, getattr(args, "depth", 4))


def line(r: Row) -> str:
    if r.result == "not covered":
        mark = "   <-- no proof of code the encodings do not know (never a pass)"
    else:
        mark = "" if r.ok else "   <-- " + ("expected " + r.expected if r.expected else "not settled")
    rep = "" if r.replayed is None else ("  replayed" if r.replayed else "  NOT replayed")
    return f"  {r.obligation:<16s} {r.variant:<24s} {r.result:<15s} {r.seconds:6.3f}s{rep}{mark}"


def print_row(r: Row) -> None:
    print(line(r), flush=True)
    if r.result != "proved" or not r.ok:
        print(f"      {r.detail}" + (f" [{r.trace_path}]" if r.trace_path else ""), flush=True)


def print_summary(report: Report, rechecked: list[Recheck] | None = None) -> None:
    proved = sum(r.result == "proved" for r in report.rows)
    found = sum(r.result == "counterexample" for r in report.rows)
    unknown = sum(r.result == "unknown" for r in report.rows)
    uncovered = sum(r.result == "not covered" for r in report.rows)
    s = report.cfg.settings
    replayed = sum(bool(r.replayed) for r in report.rows)
    print()
    print(
        f"{len(report.rows)} proofs: {proved} proved, {found} counterexample(s) ({replayed} replayed),"
        f" {unknown} unknown" + (f", {uncovered} not covered" if uncovered else "")
        + f"; Z3 {z3_version()} seed {s.seed}, timeout {s.timeout_ms} ms, "
        f"{report.seconds:.2f}s solving; bounds: {report.cfg.bounds.describe()}"
    )
    if not version_measured():
        print(f"note: the figures of docs/PROOFS.md were measured with Z3 5.4.1; this is Z3 {z3_version()}")
    if rechecked is not None:
        bad = [c for c in rechecked if not c.agrees]
        print(
            f"cvc5 re-check: {len(rechecked) - len(bad)} of {len(rechecked)} verdicts agree "
            f"({sum(c.seconds for c in rechecked):.1f}s)"
        )
        for c in bad:
            print(f"  DISAGREE {c.file}: z3 {c.z3}, cvc5 {c.cvc5}")
    if report.ok and (rechecked is None or all(c.agrees for c in rechecked)):
        print("OK: every obligation as expected")
    elif report.exit_code == 3:
        print("UNKNOWN: some obligations were not settled or not covered (never a pass): see the lines marked above")
    else:
        print("FAILED: see the lines marked above")


def run(args: argparse.Namespace) -> int:
    obligations = (
        tuple(BY_ID[o] if o in BY_ID else _unknown(o) for o in args.obligation) if args.obligation else OBLIGATIONS
    )
    mine = [(load_variant(m), m) for m in args.variant_module or []]
    chosen = [get_design(n) for n in args.variant or []] + [v for v, _ in mine]
    variants = chosen or None
    by_ref = declared_violations(args.expect, [ref for _, ref in mine])
    declared = {v.name: by_ref[ref] for v, ref in mine}
    if args.recheck and args.smt2 is None:
        raise PcspecError("--recheck re-checks the files --smt2 DIR writes: give --smt2 too")
    if args.recheck:
        require_cvc5()  # before any proof runs, not after all of them
    cfg = config_of(args)
    ensure_writable_dir(args.out, "--out")
    if args.smt2 is not None:
        ensure_writable_dir(args.smt2, "--smt2")
    t0 = time.monotonic()
    report = run_suite(cfg, obligations, variants, args.out, None if args.json else print_row, declared=declared)
    rechecked: list[Recheck] | None = None
    written: list[Path] = []
    if args.smt2 is not None:
        written = export(report, args.smt2)
        if not args.json:
            print(f"wrote {len(written)} SMT-LIB files to {args.smt2}/ (manifest.json says which query each is)")
        if args.recheck:
            rechecked = recheck(args.smt2)
    agree = rechecked is None or all(c.agrees for c in rechecked)
    if args.json:
        data = report.to_json()
        data["ok"] = report.ok and agree
        data["wall_seconds"] = round(time.monotonic() - t0, 2)
        if args.smt2 is not None:
            data["smt2"] = {"dir": str(args.smt2), "files": len(written)}
        if rechecked is not None:
            data["recheck"] = [
                {"file": c.file, "z3": c.z3, "cvc5": c.cvc5, "seconds": round(c.seconds, 3), "agrees": c.agrees}
                for c in rechecked
            ]
        print(json.dumps(data, indent=1))
    else:
        print_summary(report, rechecked)
    return report.exit_code if agree else 1


def _unknown(name: str) -> Any:
    raise PcspecError(f"unknown obligation {name!r}; valid obligations: {', '.join(BY_ID)}")
