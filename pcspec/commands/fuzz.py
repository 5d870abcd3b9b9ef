"""``pcspec fuzz``: fuzz one variant (or mutant) for some or all properties."""

from __future__ import annotations

import argparse
import json
from typing import Any

from pcspec.commands.verify import SYMBOL, add_budget_args, budget_of, progress_printer
from pcspec.model.variants import get_variant
from pcspec.properties.catalogue import get_property
from pcspec.verdicts import fuzz_variant


def register(sub: Any) -> None:
    p = sub.add_parser("fuzz", help="fuzz one variant for some or all properties")
    p.add_argument("--variant", default="fixed", help="a design or mutant:NAME (default fixed)")
    p.add_argument("--property", action="append", help="only these property IDs (repeatable)")
    add_budget_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    v = get_variant(args.variant)
    props = [get_property(p).id for p in args.property] if args.property else None
    args.out.mkdir(parents=True, exist_ok=True)
    cells = fuzz_variant(v, budget_of(args), args.out, props, progress_printer(not args.json))
    if args.json:
        print(json.dumps({"schema": 1, "ok": all(c.ok for c in cells), "fuzz": [c.to_json() for c in cells]}, indent=1))
    else:
        for c in cells:
            mark = "" if c.ok else "   <-- does not match the oracle"
            detail = f"{c.length} ops, {c.trace}" if c.verdict == "violated" else f"{c.steps} steps"
            print(
                f"{c.property:<10s} {SYMBOL[c.verdict]} {c.verdict:<9s} (expected {c.expected})"
                f" {detail}, {c.seconds:.1f}s{mark}"
            )
            if c.message:
                print(f"           {c.message}")
    return 0 if all(c.ok for c in cells) else 1
