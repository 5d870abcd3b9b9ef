"""``pcspec live``: drive a real llama-server with fuzzed workloads and check every request
against the model and the cache-transparency oracle.

Exit codes: 0 when every finding is explained (a known server bug, an observation, or a model
change already asked for: docs/LIVE.md), 1 when a finding is unexplained, 2 for bad input (no
server binary, an unreadable workload).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from pcspec.core.errors import PcspecError
from pcspec.live import build as live_build
from pcspec.live import calibrate
from pcspec.live.buildinfo import rules_for_server
from pcspec.live.designs import DESIGNS, DesignUnavailable, design_of, with_faults
from pcspec.live.models import KINDS, ensure_model
from pcspec.live.process import ServerDied
from pcspec.live.report import Workload, read_workload
from pcspec.model.rulesets import RULE_SETS, get_rule_set
from pcspec.tools.user_variant import load_variant

DEFAULT_OUT = Path("pcspec-out") / "live"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "live",
        help="fuzz a real llama-server and check it against the model",
        description="Start llama-server on 127.0.0.1 with tiny generated models (one per memory kind), "
        "send fuzzed requests, and check every one against the model, the server's own log and the "
        "cache-transparency oracle (cached and uncached log-probabilities must agree). Every finding "
        "is shrunk and written as a workload, curl lines, a model trace and the log excerpt.",
        epilog="Build the server once with `pcspec live --build` (or pcspec build); "
        "see docs/LIVE.md.",
    )
    p.add_argument("--server", metavar="PATH", help="the llama-server binary (default: the cached build, "
                   f"or ${live_build.ENV_SERVER})")
    p.add_argument("--design", metavar="NAME",
                   help="run a design's build (baseline, pr30137, pr27451, fixed: its cached binary, built with "
                        "--build) and compare it with the model's design of that name under the build tree's rule "
                        "set (pr30137@0c1e570: the design under the October tree's rules; baseline: october)")
    p.add_argument("--llama", metavar="TREE", choices=list(live_build.TREES), default=None,
                   help=f"the cached build of this llama.cpp tree ({', '.join(live_build.TREES)}; default "
                        f"{live_build.DEFAULT_TREE}); with --build, built when missing")
    p.add_argument("--build", action="store_true", help="build the server first if it is not cached "
                   "(7 to 17 minutes from cold on 2 cores, docs/LIVE.md)")
    p.add_argument("--kind", action="append", choices=[*KINDS, "all"], help="model kind(s) (default: all)")
    p.add_argument("--requests", type=int, default=200, metavar="N", help="requests per kind (default 200)")
    p.add_argument("--seconds", type=float, default=900.0, metavar="S", help="time budget per kind")
    p.add_argument("--run-requests", type=int, default=50, metavar="N",
                   help="requests per server run (flags are drawn per run)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, metavar="DIR", help="where findings go")
    p.add_argument("--no-shrink", action="store_true", help="report findings without shrinking them")
    p.add_argument("--shrink-seconds", type=float, default=180.0, metavar="S")
    p.add_argument("--timeout", type=float, default=20.0, metavar="S",
                   help="a request without an answer after S seconds is a finding")
    p.add_argument(
        "--variant", default=None,
        help="the rule set or design the server is compared with (default: the rule set of the build the "
             "server names, or the --design's rules)",
    )
    p.add_argument("--variant-module", metavar="MODULE:NAME", default=None,
                   help="your own design (a Design subclass NAME in MODULE, found from the current folder) that the "
                        "server at --server PATH was built from: the server is compared with it, under the rule set "
                        "of the build the server names unless the class sets its own")
    p.add_argument("--rules", metavar="NAME", default=None,
                   help=f"the rule set of the server's build ({', '.join(RULE_SETS)}; default: the one its "
                        "build names, docs/RULESETS.md)")
    p.add_argument("--faults", action="store_true",
                   help="with --design: its fault-point build (pcspec build --design NAME --faults; "
                        "docs/DESIGNS.md): the design's code with the LLAMA_FAULTS hooks, none armed by pcspec")
    p.add_argument("--matrix", action="store_true",
                   help="the verdict matrix on the designs' binaries: each cell a workload reaches, run on every "
                        "cached design build (or those --design names, comma-separated) and its model; exit 1 if a "
                        "binary diverged from its model")
    p.add_argument("--replay", type=Path, metavar="WORKLOAD", help="run a saved workload.jsonl once")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)


def _design_server(args: argparse.Namespace) -> Path:
    """The design's cached build (``--build``: built when missing); the model's rules for it."""
    if args.server:
        raise PcspecError("--design runs the design's own build: drop --server (or --design)")
    try:
        design = design_of(args.design)
    except DesignUnavailable as exc:
        raise PcspecError(str(exc)) from None
    if args.variant is None:
        args.variant = calibrate.design_rules(design.name, design.tree)
    patches, flags = with_faults(design) if args.faults else (design.patch_paths(), design.flags)
    found = live_build.find_server(design.tree, patches, flags)
    if found is not None:
        return found
    if args.build:
        return live_build.build(tree=design.tree, patches=patches, flags=flags).path
    how = f"--design {design.name}" + (" --faults" if args.faults else "")
    raise PcspecError(f"design {design.name!r} is not built: run `pcspec live {how} --build` "
                      f"(or pcspec build {how})")


def _choose_rules(args: argparse.Namespace, binary: Path) -> None:
    """``--rules`` (checked), else ``--variant``, else the rule set of the build ``binary`` names,
    with its warning on stderr (pcspec.live.buildinfo)."""
    if args.rules is not None:
        if args.variant is not None:
            raise PcspecError("--rules and --variant both name what the server is compared with: give one")
        args.variant, args.rules_evidence = get_rule_set(args.rules).name, f"--rules {args.rules}"
    if args.variant is not None:
        calibrate.variant(args.variant)  # (a name that does not resolve fails here, before any server)
        return
    chosen = rules_for_server(binary)
    if chosen.warning:
        print(f"pcspec live: warning: {chosen.warning}", file=sys.stderr)
    args.variant, args.rules_evidence = chosen.rule_set, chosen.evidence


def _server(args: argparse.Namespace) -> Path:
    if args.design is not None:
        if args.rules is not None:
            raise PcspecError("--design compares the design's build with its own rules: drop --rules")
        if args.llama is not None:
            raise PcspecError("--design builds on its own tree (docs/DESIGNS.md): drop --llama")
        return _design_server(args)
    if args.rules is not None:
        get_rule_set(args.rules)  # a bad name fails before anything is looked up or built
    mine = load_variant(args.variant_module) if args.variant_module is not None else None
    if mine is not None and args.variant is not None:
        raise PcspecError("--variant-module names the design the server is compared with: drop --variant")
    binary = _binary(args)
    _choose_rules(args, binary)
    if mine is not None:
        # the design under the rule set of the server's build (a class that names its own keeps it)
        own_rules = any("rules" in k.__dict__ for k in type(mine).__mro__ if not k.__module__.startswith("pcspec."))
        args.variant = mine.name if own_rules else f"{mine.name}@{args.variant}"
        calibrate.variant(args.variant)  # (a name that does not resolve fails here, before any server)
    return binary


def _binary(args: argparse.Namespace) -> Path:
    if args.server and args.llama:
        raise PcspecError("--server and --llama both name the binary: give one")
    if args.server:
        # absolute: a relative path keeps its folder (``./llama-server`` is not looked up on PATH)
        path = Path(os.path.abspath(args.server))
        if not path.is_file():
            raise PcspecError("no such llama-server binary", str(path))
        return path
    tree = args.llama or live_build.DEFAULT_TREE
    found = live_build.find_server(tree)
    if found is not None:
        return found
    if args.build:
        res = live_build.build(tree=tree)
        return res.path
    named = f" --llama {args.llama}" if args.llama else ""
    raise PcspecError(f"no llama-server: pass --server PATH, or build one with `pcspec live --build{named}` "
                      f"(cached in {live_build.cached_server(tree).parent})")


def _stop_on_sigterm() -> None:
    """SIGTERM unwinds like Ctrl-C, so every server this run started is stopped (by PID) in
    the ``finally`` blocks instead of being left running."""
    def handler(_sig: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def _matrix(args: argparse.Namespace) -> int:
    from pcspec.live.binaries import matrix, render

    if args.server or args.llama or args.replay or args.faults or args.variant or args.rules:
        raise PcspecError("--matrix runs the designs' own builds with their own rules: "
                          "give only --design and --timeout")
    designs = list(DESIGNS)
    if args.design is not None:  # one design, or several: --design pr30137@november,fixed@november
        try:
            designs = [design_of(name.strip()).name for name in args.design.split(",")]
        except DesignUnavailable as exc:
            raise PcspecError(str(exc)) from None
    cells = matrix(designs, say=lambda m: print(m, file=sys.stderr, flush=True), timeout=args.timeout)
    if args.json:
        json.dump({"schema": 1, "cells": [vars(c) for c in cells]}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(render(cells, designs))
    return 1 if any(c.verdict == "diverged" for c in cells) else 0


def _need_gguf() -> None:
    """pcspec live writes its tiny models with the ``gguf`` package (the ``live`` extra)."""
    if importlib.util.find_spec("gguf") is None:
        raise PcspecError("pcspec live makes its tiny models with the gguf package, which is not installed: "
                          "pip install 'pcspec[live]'")


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except ServerDied as exc:
        raise PcspecError(_died(exc)) from None


def _died(exc: ServerDied) -> str:
    """A server that would not start (or died), in one line: what it said last, and its log."""
    text = str(exc)
    head, _, tail = text.partition("log tail:\n")
    lines = [x.strip() for x in tail.splitlines() if x.strip()]
    said = next((x for x in reversed(lines) if "error" in x.lower() or "invalid" in x.lower()),
                lines[-1] if lines else "")
    where = getattr(exc, "log", None)
    return (f"{head.strip().rstrip(';')}: it said {said!r}" + (f" (whole log: {where})" if where else "")
            + "; check the flags this build takes (llama-server --help)")


def _run(args: argparse.Namespace) -> int:
    _stop_on_sigterm()
    if args.matrix:
        return _matrix(args)
    if args.faults and args.design is None:
        raise PcspecError("--faults takes the fault-point build of a design: give --design NAME")
    # A workload is read first: a damaged one is named before a server is looked for or built.
    workload = read_workload(args.replay) if args.replay else None
    binary = _server(args)
    if not args.build or args.kind or args.replay:
        _need_gguf()
    if args.build and not args.kind and not args.replay:
        print(binary)
        return 0
    out_dir: Path = args.out
    models_dir = live_build.cache_root() / "models"
    if workload is not None:
        return _replay(args, workload, binary, models_dir, out_dir)
    from pcspec.live.campaign import campaign

    kinds = list(KINDS) if not args.kind or "all" in args.kind else list(dict.fromkeys(args.kind))
    reports = []
    for kind in kinds:
        rep = campaign(binary, kind, models_dir, out_dir, seed=args.seed, requests=args.requests,
                       seconds=args.seconds, run_requests=args.run_requests, timeout=args.timeout,
                       do_shrink=not args.no_shrink, shrink_seconds=args.shrink_seconds, variant=args.variant,
                       log=lambda m: print(m, file=sys.stderr, flush=True))
        reports.append(rep)
    unexplained = sum(len(r.unexplained) for r in reports)
    if args.json:
        json.dump({"schema": 1, "server": str(binary), "design": args.design or "", "rules": args.variant,
                   "rules_evidence": getattr(args, "rules_evidence", ""),
                   "kinds": [r.to_json() for r in reports],
                   "unexplained": unexplained}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        why = getattr(args, "rules_evidence", "")
        print(f"server: {binary} (design {args.design or 'unnamed'}); model rules: {args.variant}"
              + (f" ({why})" if why else ""))
        _print(reports)
    return 1 if unexplained else 0


def _print(reports: list[Any]) -> None:
    print(f"{'kind':10} {'runs':>4} {'requests':>8} {'req/s':>6} {'checked':>7} {'max dlp':>7}  findings")
    for r in reports:
        rps = r.requests / r.live_seconds if r.live_seconds else 0.0
        print(f"{r.kind:10} {r.runs:4d} {r.requests:8d} {rps:6.2f} {r.transparency_checks:7d} "
              f"{r.max_logprob_diff:7.4f}  {len(r.reported)} ({len(r.unexplained)} unexplained)")
        for rep in r.reported:
            why = rep.explanation or "UNEXPLAINED"
            print(f"  - {rep.finding.rule}: {rep.finding.message}")
            print(f"      {why}; {rep.shrunk_ops} ops (from {rep.original_ops}); {rep.directory}")


def _replay(args: argparse.Namespace, workload: Workload, binary: Path, models_dir: Path, out_dir: Path) -> int:
    from pcspec.live.analyze import is_observation, to_json
    from pcspec.live.campaign import References
    from pcspec.live.explain import explain
    from pcspec.live.session import Target, execute

    kind, flags, _seed, ops = workload
    model = ensure_model(kind, models_dir)
    work = Path(tempfile.mkdtemp(prefix="replay-", dir=out_dir if out_dir.is_dir() else None))
    refs = References(binary, model, work, args.timeout, kind)
    try:
        out = execute(Target(binary, model, kind, flags), work, refs.get(flags), ops=ops, timeout=args.timeout,
                      variant=args.variant)
    finally:
        refs.close()
    found = [(f, explain(f, out)) for f in out.analysis.findings]
    if args.json:
        json.dump({"schema": 1, "requests": out.n_requests, "log": str(work / "server.log"),
                   "findings": [{**to_json(f), "explanation": w} for f, w in found]}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(f"{out.n_requests} requests; server log: {work / 'server.log'}")
        for f, w in found:
            print(f"  op {f.op}: {f.rule}: {f.message}" + (f"  [{w}]" if w else "  [UNEXPLAINED]"))
    return 1 if any(w is None and not is_observation(f) for f, w in found) else 0
