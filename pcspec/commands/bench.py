"""``pcspec bench WORKLOAD [WORKLOAD ...] --design D ...``: what each design costs, measured on its
real server and predicted by the model, side by side (docs/BENCH.md).

Exit codes: 0 when the runs completed, 1 when a request failed on a server (its error is
printed), 2 for bad input (an unknown workload or design, a bad workload file, a size beyond what
the machine or the model holds), all refused before anything runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from pcspec.bench import report
from pcspec.bench.run import DESIGNS, Server, bench, check_design, to_json
from pcspec.bench.workload import LIVE_LIMITS, MODEL_LIMITS, PRESETS, load
from pcspec.commands.progress import plain_lines
from pcspec.core.errors import PcspecError
from pcspec.live.buildinfo import rules_for_server
from pcspec.tools.user_variant import load_variant

# the parameters a command line may change, for every workload it names
PARAMS = ("turns", "first_tokens", "turn_tokens", "reply_tokens", "n_predict", "ctx_checkpoints",
          "checkpoint_min_step", "cache_ram_mib", "n_ctx", "repeats", "seed")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "bench",
        help="measure what each design costs on its real server, with the model's prediction beside it",
        description="Run named workloads on each design's llama-server (the same requests, one after "
        "another) and measure per request the prompt cache update time (the server's own log line), the "
        "time to the first token, the request's time, and the process's RSS and peak RSS (/proc); "
        "beside them the model's prediction at the same sizes: bytes held, accounted and unique cache "
        "bytes, payload bytes copied per save, evictions.",
        epilog="workloads: " + "; ".join(f"{n}: {w.notes}" for n, w in PRESETS.items())
        + ". A .toml file of Workload fields is a workload of one's own (docs/BENCH.md).",
    )
    p.add_argument("workload", nargs="+", help=f"a preset ({', '.join(PRESETS)}) or a .toml file")
    p.add_argument("--design", action="append", metavar="D",
                   help=f"a design ({', '.join(DESIGNS)}, or a November build: baseline@november, "
                        "pr30137@november, fixed@november); repeatable (default: the four)")
    p.add_argument("--server", type=Path, metavar="PATH",
                   help="also measure this llama-server binary (a build of your own), predicted by the model of "
                        "the build it names, or by --variant-module's design")
    p.add_argument("--variant-module", metavar="MODULE:NAME",
                   help="with --server: the design of your own the binary was built from (a Design subclass NAME "
                        "in MODULE, found from the current folder), whose model predicts it")
    p.add_argument("--model-only", action="store_true",
                   help="run the model alone (no server): sizes this machine cannot hold")
    for name in PARAMS:
        p.add_argument("--" + name.replace("_", "-"), type=int, default=None, metavar="N",
                       help=argparse.SUPPRESS if name in ("n_predict", "reply_tokens", "seed") else f"set {name}")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--save", type=Path, metavar="FILE.json", help="also write the results as JSON to FILE")
    p.add_argument("--plot", type=Path, metavar="FILE.png",
                   help="RSS and cache bytes over the requests, one line per design (needs matplotlib)")
    p.add_argument("--workdir", type=Path, default=None, metavar="DIR",
                   help="where the servers' logs go (default: a temporary folder, kept)")
    p.set_defaults(func=run)


def _servers(args: argparse.Namespace) -> list[Server]:
    """``--server`` (and ``--variant-module``) as a column of its own."""
    if args.server is None:
        if args.variant_module is not None:
            raise PcspecError("--variant-module names the design a --server binary was built from: give --server PATH")
        return []
    path = args.server.resolve() if args.server.exists() else args.server
    if not path.is_file() or not os.access(path, os.X_OK):
        raise PcspecError("no such llama-server binary (or not executable)", f"--server {args.server}")
    chosen = rules_for_server(path)
    if chosen.warning:
        print(f"pcspec bench: warning: {chosen.warning}", file=sys.stderr)
    if args.variant_module is None:
        return [Server(path.name, path, chosen.rule_set)]
    mine = load_variant(args.variant_module)
    return [Server(mine.name, path, f"{mine.name}@{chosen.rule_set}")]


def run(args: argparse.Namespace) -> int:
    servers = _servers(args)
    designs = args.design or ([] if servers else list(DESIGNS))
    for d in designs:
        check_design(d)
    changes = {k: getattr(args, k) for k in PARAMS if getattr(args, k) is not None}
    workloads = [replace(load(spec), **changes) for spec in args.workload]
    limits = MODEL_LIMITS if args.model_only else LIVE_LIMITS
    for w in workloads:  # every workload checked before any runs
        w.validate(limits)
    if args.plot is not None and args.plot.suffix.lower() != ".png":
        raise PcspecError(f"--plot: {args.plot} is not a .png file")
    if args.plot is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise PcspecError("--plot needs matplotlib: pip install 'pcspec[bench]'") from None
    for opt, path in (("--save", args.save), ("--plot", args.plot)):
        if path is not None and not path.resolve().parent.is_dir():
            raise PcspecError(f"{opt}: {path.parent} is not a folder")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="pcspec-bench-"))
    show = plain_lines(not args.json)
    results = [bench(w, designs, model_only=args.model_only, workdir=workdir, progress=show, servers=servers)
               for w in workloads]
    if args.save is not None:
        try:
            args.save.write_text(json.dumps([to_json(r) for r in results], indent=1) + "\n", encoding="utf-8")
        except OSError as exc:
            raise PcspecError(f"--save: cannot write {args.save}: {exc.strerror}") from None
    failed = any(m.error for res in results for d in res.designs for r in d.runs for m in r.requests)
    if args.json:
        print(json.dumps([to_json(r) for r in results], indent=1))
    else:
        for res in results:
            print(report.table(res))
            print()
        if not args.model_only:
            print(f"server logs: {workdir}")
    if args.plot is not None:
        report.plot(results, args.plot)
        if not args.json:
            print(f"plot: {args.plot}")
    return 1 if failed else 0
