"""``pcspec replay TRACE``: apply a trace step by step and judge every property."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pcspec.properties.catalogue import CATALOGUE, get_property
from pcspec.replay import Step, replay
from pcspec.trace import load


def register(sub: Any) -> None:
    p = sub.add_parser("replay", help="replay a trace file and judge every property after every operation")
    p.add_argument("trace", type=Path, help="a pcspec trace (JSON lines)")
    p.add_argument("--variant", help="replay under this variant instead of the header's")
    p.add_argument("--property", action="append", help="judge only these property IDs (repeatable)")
    p.add_argument("--json", action="store_true", help="print one JSON object per step")
    p.add_argument("--dot", type=Path, help="write the final ownership graph as a DOT file")
    p.set_defaults(func=run)


def _describe(step: Step) -> str:
    kinds: dict[str, int] = {}
    for e in step.events:
        if e.kind not in ("op", "alloc", "fill", "free", "load_scan", "cache_state", "select", "batch"):
            kinds[e.kind] = kinds.get(e.kind, 0) + 1
    return ", ".join(f"{k}" + (f" x{n}" if n > 1 else "") for k, n in kinds.items()) or "-"


def _is_log_events(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            first = f.readline(4096)
    except OSError:
        return False
    return b'"pcspec-log-events"' in first


def replay_log_events(path: Path, as_json: bool) -> int:
    """A trace written by ``pcspec check-log --trace``: the log's events, re-checked against
    the spec's rules (what the server did, replayed with partial observation)."""
    from pcspec.logcheck import check_events, load_trace

    worst = 0
    for source, events in load_trace(path):
        result = check_events(events, source=source)
        if as_json:
            print(json.dumps(result.as_dict(), default=str))
        else:
            print(f"{source}: {len(events)} events, {len(result.deviations)} deviation(s)")
            for d in result.deviations:
                print(f"  line {d.line}: {d.rule}: {d.message}")
        worst = max(worst, 1 if result.deviations else 0)
    return worst


def run(args: argparse.Namespace) -> int:
    if _is_log_events(args.trace):
        return replay_log_events(args.trace, args.json)
    trace = load(args.trace, args.variant)
    props = [get_property(p) for p in args.property] if args.property else list(CATALOGUE)

    def show(step: Step) -> None:
        if args.json:
            print(
                json.dumps(
                    {
                        "step": step.index,
                        "op": step.op,
                        "events": [e.kind for e in step.events if e.kind not in ("alloc", "fill", "free")],
                        "violations": [v.to_json() for v in step.violations],
                    },
                    default=str,
                )
            )
            return
        op = step.op.get("op")
        extra = ""
        if op == "request":
            extra = f" {len(step.op['tokens'])} tokens" + (
                f" pinned to {step.op['id_slot']}" if step.op.get("id_slot", -1) >= 0 else ""
            )
        elif op == "inject":
            extra = f" {step.op['site']}"
        print(f"[{step.index:3d}] {op}{extra}: {_describe(step)}")
        for v in step.violations:
            print(f"      VIOLATED {v.property} (op {v.op}): {v.message}")

    result = replay(trace, props, show)
    srv = result.server
    ok = result.matches(trace.expect)
    if args.dot:
        from pcspec.model.ownership import graph, to_dot

        args.dot.write_text(to_dot(graph(srv)), encoding="utf-8")
    if not args.json:
        print(
            f"variant {trace.variant.name}: {len(trace.ops)} operations, {len(result.violations)} violation(s); "
            f"cache accounted {srv.accounted_bytes} B, unique {srv.unique_bytes} B, physical {srv.physical_bytes} B"
            + (f"; crashed at {srv.crash.where}" if srv.crash else "")
        )
        if trace.expect:
            print("expected violations " + ("reproduced" if ok else "NOT reproduced"))
    return 0 if ok else 1
