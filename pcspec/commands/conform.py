"""``pcspec conform``: check a port of the core against the model (docs/SPEC.md).

``pcspec conform --cmd "./my-port"`` runs the golden suite, then fuzzed traces, through the
port, compares every answer with the model's observation, and on the first divergence shrinks
the trace and prints it with a diff and the property the port breaks. ``--write-suite`` and
``--check-suite`` regenerate the committed golden suite and report its drift.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pcspec.commands.argtypes import count, seconds
from pcspec.commands.progress import plain_lines
from pcspec.conform import golden
from pcspec.conform.report import as_json, cut, text
from pcspec.conform.run import conform
from pcspec.core.errors import PcspecError
from pcspec.core.outdir import ensure_writable_dir
from pcspec.model.designs import get_design


def register(sub: Any) -> None:
    p = sub.add_parser(
        "conform",
        help="check a port of the core (a program speaking the protocol) against the model",
        description="Run the golden suite, then fuzzed traces, through a port (docs/SPEC.md, section 9); "
        "compare every answer with the model's observation; shrink and print the first divergence.",
    )
    p.add_argument("--cmd", help='the port: a command line, e.g. "./build/pcspec-port" (split like a shell)')
    p.add_argument("--variant", default="fixed", help="the design the port implements (default fixed)")
    p.add_argument("--suite", type=Path, help="golden suite folder or one case file (default: pcspec's own)")
    p.add_argument("--no-golden", action="store_true", help="skip the golden suite")
    p.add_argument("--fuzz", type=count, default=1000, help="fuzzed traces after the suite (default 1000)")
    p.add_argument("--seed", type=count, default=0, help="the fuzzing seed (default 0)")
    p.add_argument("--timeout", type=seconds, default=20.0, help="seconds to wait for one answer (default 20)")
    p.add_argument("--no-shrink", action="store_true", help="report the first divergence as found")
    p.add_argument(
        "--out", type=Path, default=Path("pcspec-out"), help="where a divergent trace goes (default ./pcspec-out)"
    )
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.add_argument("--write-suite", nargs="?", const="", metavar="DIR",
                   help="regenerate the golden suite (default: pcspec's own, pcspec/conform/suite) and exit")
    p.add_argument("--check-suite", nargs="?", const="", metavar="DIR",
                   help="compare the golden suite with a regeneration; exit 1 on drift")
    p.set_defaults(func=run)


def _suite_dir(arg: str) -> Path:
    return Path(arg) if arg else golden.SUITE


def run(args: argparse.Namespace) -> int:
    if args.write_suite is not None:
        folder = _suite_dir(args.write_suite)
        files = golden.write(folder)
        print(json.dumps({"written": len(files), "folder": str(folder)}) if args.json else
              f"wrote {len(files)} golden cases to {folder}")
        return 0
    if args.check_suite is not None:
        folder = _suite_dir(args.check_suite)
        drift = golden.drift(folder)
        if args.json:
            print(json.dumps({"ok": not drift, "folder": str(folder), "drift": drift}))
        else:
            print(f"golden suite {folder}: " + ("current" if not drift else f"{len(drift)} case(s) drifted"))
            for d in drift:
                print(f"  {d}")
            if drift:
                print("  regenerate with: pcspec conform --write-suite")
        return 1 if drift else 0
    if not args.cmd:
        raise PcspecError("--cmd is required (the port to check), or --write-suite / --check-suite")
    variant = get_design(args.variant)
    if args.suite is not None and not args.suite.exists():
        raise PcspecError("no such file or folder", f"--suite {args.suite}")
    ensure_writable_dir(args.out, "--out")
    result = conform(
        args.cmd,
        variant,
        args.suite,
        args.fuzz,
        args.seed,
        not args.no_golden,
        not args.no_shrink,
        args.timeout,
        plain_lines(not args.json),
    )
    written = None
    if result.divergence is not None:
        written = args.out / f"conform-{result.divergence.case.name}.jsonl"
        written.write_text(cut(result.divergence).dumps(), encoding="utf-8")
    if args.json:
        print(json.dumps(as_json(result, args.cmd, variant.name, written), indent=1))
    else:
        sys.stdout.write(text(result, args.cmd, variant.name, written))
    return 0 if result.divergence is None else 1
