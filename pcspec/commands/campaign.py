"""``pcspec campaign``: a long walker campaign over a seed range, on N processes; or the merge of
campaigns run elsewhere (other machines, see docs/CAMPAIGNS.md)."""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

from pcspec.commands.argtypes import positive, seconds
from pcspec.core.errors import PcspecError
from pcspec.core.outdir import ensure_writable_dir
from pcspec.engines import campaign
from pcspec.engines.walker import STEPS
from pcspec.model.designs import get_design
from pcspec.properties.oracle import MUTANT_TARGETS, ORACLE


def seed_range(text: str) -> tuple[int, int]:
    """``A:B``, the example seeds ``A..B-1`` (``0 <= A < B``)."""
    a, sep, b = text.partition(":")
    try:
        start, stop = int(a), int(b)
    except ValueError:
        start = stop = -1
    if not sep or start < 0 or stop <= start:
        raise argparse.ArgumentTypeError(f"expected A:B with 0 <= A < B (example seeds A..B-1), got {text[:40]!r}")
    return start, stop


def register(sub: Any) -> None:
    p = sub.add_parser(
        "campaign",
        help="walk a seed range of one variant on N processes (or merge campaign records)",
        description="Walk the example seeds A..B-1 of one variant with the seeded swarm walker, every chosen "
        "property judged, on N worker processes; write campaign.json (mergeable) and the shortest shrunk "
        "trace of each violated property. With --merge, merge records of disjoint seed ranges instead.",
    )
    p.add_argument("--variant", default="fixed", help="a design or mutant:NAME (default fixed)")
    p.add_argument("--property", action="append", help="only these property IDs (repeatable; default all)")
    p.add_argument("--seeds", type=seed_range, help="example seeds A:B (A..B-1); required unless --merge")
    p.add_argument("--workers", type=positive, default=1, help="worker processes (default 1)")
    p.add_argument("--minutes", type=seconds, help="time cap in minutes (default none: the whole range)")
    p.add_argument("--steps", type=positive, default=STEPS, help=f"rules per example at most (default {STEPS})")
    p.add_argument("--keep", type=positive, default=3, help="traces shrunk per violated property (default 3)")
    p.add_argument("--merge", nargs="+", type=Path, metavar="RECORD", help="merge these campaign.json records")
    p.add_argument(
        "--out", type=Path, default=Path("pcspec-campaign"), help="output folder (default ./pcspec-campaign)"
    )
    p.add_argument("--json", action="store_true", help="print the record as one JSON object")
    p.set_defaults(func=run)


def _merged(paths: list[Path]) -> tuple[campaign.Spec, tuple[int, int], campaign.Part]:
    spec0: campaign.Spec | None = None
    total = campaign.Part()
    lo, hi = math.inf, -math.inf
    for path in paths:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise PcspecError(f"cannot read a campaign record ({exc})", str(path)) from None
        spec, (a, b), part = campaign.from_json(data, str(path))
        if spec0 is not None and spec != spec0:
            raise PcspecError(f"another campaign ({spec.to_json()} vs {spec0.to_json()})", str(path))
        spec0 = spec
        total.absorb(part, spec.keep)
        lo, hi = min(lo, a), max(hi, b)
    assert spec0 is not None
    # The merged request is the hull of the parts': "holds" needs every seed in it covered.
    return spec0, (int(lo), int(hi)), total


def expected(variant: str, pid: str) -> str:
    if variant in ORACLE:
        return ORACLE[variant].get(pid, "?")
    return "x" if pid in MUTANT_TARGETS.get(variant, ()) else "?"


def run(args: argparse.Namespace) -> int:
    if args.merge:
        ensure_writable_dir(args.out)
        spec, requested, part = _merged(args.merge)
    else:
        if args.seeds is None:
            raise PcspecError("give --seeds A:B (or --merge RECORD...)")
        spec = campaign.Spec.of(get_design(args.variant).name, args.property, args.steps, args.keep)
        ensure_writable_dir(args.out)
        requested = args.seeds
        cap = args.minutes * 60 if args.minutes else math.inf
        t0 = time.monotonic()
        part = campaign.run(spec, requested[0], requested[1], args.workers, cap)
        if not args.json:
            print(f"{part.examples} examples, {part.steps} steps judged in {time.monotonic() - t0:.1f}s")
    results = campaign.verdicts(spec, part, requested)
    record = campaign.write(args.out, spec, requested, part, results)
    if args.json:
        print(json.dumps({k: v for k, v in record.items() if k != "candidates"}, indent=1))
    else:
        covered = ", ".join(f"{a}:{b}" for a, b in part.covered)
        print(f"{spec.variant}: seeds covered {covered} of {requested[0]}:{requested[1]}")
        for lost in part.lost:
            print(f"  LOST: {lost} (its seeds are not covered: never a pass)")
        for r in record["results"]:
            if r["verdict"] == "violated":
                detail = f"{r['length']} ops, example seed {r['seed']}, {r['trace']}"
            else:
                detail = f"after {part.steps} steps ({part.examples} examples)"
            print(f"  {r['property']:<10s} {r['verdict']:<9s} {detail}")
        print(f"record: {args.out / 'campaign.json'}")
    mismatch, unknown = False, bool(part.lost)
    for r in results:
        exp = expected(spec.variant, r.property)
        if r.verdict == "unknown":
            unknown = True
        elif exp != "?" and (r.verdict == "violated") != (exp == "x"):
            mismatch = True
    return 1 if mismatch else 3 if unknown else 0
