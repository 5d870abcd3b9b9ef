"""``pcspec check-log LOG [LOG ...]``: check real llama-server logs against the spec.

Exit codes: 0 when no log shows a deviation, 1 when one does, 2 when an input cannot be read
(missing, a directory, binary data) or an option is invalid.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from pcspec.logcheck import check_log, parse_options, write_trace
from pcspec.logcheck.options import CHOICES
from pcspec.logcheck.report import render_plain, render_rich, rules_help, to_json

_EPILOG = (
    "options (--option KEY=VALUE, repeatable; 'auto' = November 2026 behaviour unless the "
    "log's message formats show an older build):\n"
    + "\n".join(f"  {k:15} {' | '.join(v)}" for k, v in CHOICES.items())
    + "\n\ndeviation rules:\n" + rules_help()
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "check-log",
        help="check a llama-server log against the spec and report where its cache and "
        "checkpoints went",
        description="Read llama-server logs (any verbosity; -v shows the TRACE lines that "
        "carry most of the checkpoint and cache detail), replay their prompt-cache and "
        "checkpoint lines against the model's rules, report deviations with line numbers and "
        "statistics.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("logs", nargs="+", metavar="LOG", help="log file(s) (stdout+stderr capture)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--trace", metavar="OUT.jsonl",
                   help="also write the recognised events as a JSON-lines trace")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="choose a rule variant (see below)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    options = parse_options(args.option)
    results = [check_log(path, options) for path in args.logs]
    if args.trace:
        write_trace(args.trace, [(r.source, r.events) for r in results])
    try:
        if args.json:
            json.dump(to_json(results), sys.stdout, indent=2)
            sys.stdout.write("\n")
        elif sys.stdout.isatty():
            render_rich(results, sys.stdout)
        else:
            render_plain(results, sys.stdout)
        sys.stdout.flush()
    except BrokenPipeError:
        # the reader of a pipe (`| head`) went away: the verdict is still the exit code
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 1 if any(r.deviations for r in results) else 0
