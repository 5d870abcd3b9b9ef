"""``pcspec fuzz``: fuzz one variant (or mutant) for some or all properties."""

from __future__ import annotations

import argparse
import json
from typing import Any

from pcspec.commands.progress import plain_lines
from pcspec.commands.verify import SYMBOL, add_budget_args, budget_of
from pcspec.core.outdir import ensure_writable_dir
from pcspec.model.design import Design
from pcspec.model.designs import get_design
from pcspec.properties.catalogue import get_property
from pcspec.tools.point_coverage import counting, own_points, report
from pcspec.tools.user_variant import add_expect_option, add_variant_options, chosen_variant, declared_violations
from pcspec.tools.verdicts import Matrix, fuzz_variant


def register(sub: Any) -> None:
    p = sub.add_parser("fuzz", help="fuzz one variant for some or all properties")
    add_variant_options(p, "a design or mutant:NAME (default fixed)", default="fixed")
    add_expect_option(p)
    p.add_argument("--property", action="append", help="only these property IDs (repeatable)")
    p.add_argument("--coverage", action="store_true",
                   help="print how often the runs reached each extension point your design defines itself")
    add_budget_args(p)  # shared with verify; the time budgets are argtypes.seconds there
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Everything is checked before the fuzzing starts: a mistake costs no minutes.
    chosen = chosen_variant(args)
    v = chosen if isinstance(chosen, Design) else get_design(chosen or "fixed")
    props = [get_property(p).id for p in args.property] if args.property else None
    ref = args.variant_module
    declared = declared_violations(args.expect, [ref] if ref is not None else []).get(ref, frozenset())
    ensure_writable_dir(args.out, "--out")
    budget = budget_of(args)
    with counting(v) as calls:
        cells = fuzz_variant(v, budget, args.out, props, plain_lines(not args.json), None, declared, ref)
    result = Matrix(cells)
    ran = {"engine": "walker", "seed": budget.seed, "survey_examples": budget.survey_examples,
           "hunt_examples": budget.hunt_examples, "operations_judged": max((c.steps for c in cells), default=0)}
    if args.json:
        out: dict[str, Any] = {"schema": 1, "ok": result.ok, "unknown": len(result.unknown), "ran": ran,
                               "fuzz": [c.to_json() for c in cells]}
        if args.coverage:
            out["points"] = {p: calls[p] for p in own_points(v)}
        print(json.dumps(out, indent=1))
    else:
        for c in cells:
            if c.verdict == "unknown":
                mark = "   <-- unknown: a time cap cut the run (never a pass)"
            else:
                mark = "" if c.ok else "   <-- does not match the expectation"
            detail = f"{c.length} ops, {c.trace}" if c.verdict == "violated" else f"{c.steps} steps"
            print(
                f"{c.property:<10s} {SYMBOL[c.verdict]} {c.verdict:<9s} (expected {c.expected})"
                f" {detail}, {c.seconds:.1f}s{mark}"
            )
            if c.message:
                print(f"           {c.message}")
        print(f"ran: the seeded walker, seed {budget.seed}: a survey of {budget.survey_examples} examples, then up "
              f"to {budget.hunt_examples} examples per hunt of an expected violation the survey did not see; "
              f"{ran['operations_judged']} model operations judged for the longest cell")
        if args.coverage:
            print(f"extension points of {v.name}'s own (calls during the runs):")
            print("\n".join(report(v, calls)) or "  none: it defines no point of its own")
    return result.exit_code
