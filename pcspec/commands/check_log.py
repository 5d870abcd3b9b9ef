"""``pcspec check-log LOG [LOG ...]``: check real llama-server logs against the spec.

Exit codes (``EXIT_CODES``, also in ``--help``): 0 when no log shows a deviation, 1 when one
does, 2 when an input is not a log that can be read (missing, a directory, a device, empty,
binary data, text without a single llama-server line), when the ``--trace`` file cannot be
written, or when an option is invalid (each is one line on stderr), 3 when no log deviates but
one has nothing to check (server lines, none about the cache or checkpoints): a pass would
claim a check that did not happen. The trace file is opened before any log is read, so a bad
``--trace`` path fails at once.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from pcspec.core.errors import PcspecError
from pcspec.logcheck import TraceWriter, check_log, parse_options
from pcspec.logcheck.checker import CheckResult
from pcspec.logcheck.options import ALIASES, CHOICES, POINTS, options_for, with_rules
from pcspec.logcheck.report import render_plain, render_rich, rules_help, to_json
from pcspec.model.design import Design
from pcspec.model.designs import DESIGNS, get_design, renamed_error
from pcspec.model.rulesets import RULE_SETS
from pcspec.tools.user_variant import load_variant

EXIT_CODES = (
    "exit codes: 0 no deviation; 1 a deviation; 2 bad input (not a readable llama-server log: "
    "missing, empty, binary, no server line; a bad option or --trace path); 3 no deviation, but "
    "a log had nothing about the prompt cache or checkpoints to check"
)

_EPILOG = (
    "rule sets (--rules NAME; default: the one the log's build line names, a build newer than "
    "every known one gets the newest, with a warning):\n"
    + "\n".join(f"  {n:15} {v.summary}" for n, v in RULE_SETS.items())
    + "\n\noptions (--option KEY=VALUE, repeatable; 'auto' = what the log shows of its build: "
    "message formats, the build line; 'either' where it cannot tell):\n"
    + "\n".join(f"  {k:18} {' | '.join(v)}" for k, v in CHOICES.items())
    + "\n\nthe design's points the checker replays (--option POINT=DESIGN: DESIGN's code at POINT, over --design):\n"
    + "\n".join(f"  {k:18} {' | '.join(DESIGNS)}" for k in POINTS)
    + "\n\nthe spellings of before, one point each:\n"
    + "\n".join(f"  {k:18} {' | '.join(f'{v} ({d})' for v, d in values.items())} = {point}"
                 for k, (point, values) in ALIASES.items())
    + "\n\ndeviation rules:\n" + rules_help() + "\n\n" + EXIT_CODES
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "check-log",
        help="check a llama-server log against the spec and report where its cache and "
        "checkpoints went",
        description="Read llama-server logs, replay their prompt-cache and checkpoint lines "
        "against the model's rules, report deviations with line numbers and statistics. Every "
        "rule is judged on a -v log. Without -v the server prints no TRACE or DEBUG line "
        "(checkpoint creation, restore scans, cache saves and listings): the log's verbosity is "
        "read from its 'verbosity = N' line (or the levels of the lines it shows), and each rule "
        "whose lines are not printed is skipped or weakened and named in the report as 'not "
        "judged' (docs/USING.md, 'What a production log shows').",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("logs", nargs="+", metavar="LOG", help="log file(s) (stdout+stderr capture)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--trace", metavar="OUT.jsonl",
                   help="also write the recognised events as a JSON-lines trace")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="choose a rule variant (see below)")
    p.add_argument("--rules", metavar="NAME", default=None,
                   help=f"the rule set of the build that wrote the logs ({', '.join(RULE_SETS)}; default: "
                        "from the build line the log shows, docs/RULESETS.md)")
    design = p.add_mutually_exclusive_group()
    design.add_argument("--design", metavar="NAME", default=None,
                        help="the design the server runs, a built-in (baseline, pr30137, pr27451, fixed), also under a "
                             "rule set (pr30137@november): the rules its points change are judged its way")
    design.add_argument("--variant-module", metavar="MODULE:NAME", default=None,
                        help="the design of your own the server runs (a Design subclass NAME in MODULE, found from "
                             "the current folder): its decision points judge the log; the rules that hang on an "
                             "effect point it overrides are reported as not judged")
    p.set_defaults(func=run)


def _design(name: str) -> Design:
    """A built-in design, one under a tree's or a rule set's rules (``pr30137@november``), or a
    rule set's model (``november``)."""
    renamed = renamed_error(name)  # an old name (master): what it is called now
    if renamed is not None:
        raise PcspecError(renamed.why, "--design")
    try:
        return get_design(name)
    except PcspecError:
        raise PcspecError(f"unknown design {name!r}; built-in designs: {', '.join(DESIGNS)}, each also as "
                          f"DESIGN@RULES ({', '.join(RULE_SETS)}) (a design of your own: --variant-module "
                          "MODULE:NAME)", "--design") from None


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _warn(results: list[CheckResult]) -> None:
    """Each rule-set warning once per log, on stderr (the report keeps it in its JSON too)."""
    for r in results:
        for warning in dict.fromkeys(run.build_warning for run in r.runs if run.build_warning):
            print(f"pcspec check-log: warning: {r.source}: {warning}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    options = with_rules(parse_options(args.option), args.rules)
    if args.variant_module is not None:
        options = options_for(load_variant(args.variant_module), options)
    elif args.design is not None:
        options = options_for(_design(args.design), options)
    with ExitStack() as stack:
        trace: TraceWriter | None = None
        if args.trace:
            # opening the trace truncates it: never when it is one of the logs
            if any(_same_file(args.trace, log) for log in args.logs):
                raise PcspecError("the trace file is one of the logs", str(Path(args.trace)))
            trace = stack.enter_context(TraceWriter(args.trace))
        results = [check_log(path, options, trace) for path in args.logs]
    _warn(results)
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
    if any(r.n_deviations for r in results):
        return 1
    return 3 if any(r.nothing_to_check for r in results) else 0
