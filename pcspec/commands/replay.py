"""``pcspec replay TRACE``: apply a trace step by step and judge every property.

With ``--json`` it prints one object per step (``"kind": "step"``) and ends with one summary
object (``"kind": "summary"``): the counts, whether the expected violations were reproduced,
and the exit status it goes with.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pcspec.core import ops
from pcspec.core.errors import PcspecError
from pcspec.core.loop import ReplayResult, Step
from pcspec.core.outdir import check_output_file, write_output
from pcspec.core.trace import Trace, file_lines, first_object, from_header
from pcspec.model.events import Event
from pcspec.properties.catalogue import BY_ID, CATALOGUE, get_property
from pcspec.properties.judge import replay
from pcspec.properties.routes import route_name
from pcspec.tools.user_variant import add_variant_options, chosen_variant

LOG_EVENTS_KIND = "pcspec-log-events"  # pcspec.logcheck.trace.KIND (imported only when needed)
QUIET_EVENTS = ("alloc", "fill", "free")  # per-buffer bookkeeping: every step has many


def register(sub: Any) -> None:
    p = sub.add_parser("replay", help="replay a trace file and judge every property after every operation")
    p.add_argument("trace", type=Path, help="a pcspec trace (JSON lines)")
    add_variant_options(p, "replay under this built-in variant instead of the header's")
    p.add_argument("--property", action="append", help="judge only these property IDs (repeatable)")
    p.add_argument("--json", action="store_true", help="print one JSON object per step, then a summary object")
    p.add_argument("--dot", type=Path, help="write the final ownership graph as a DOT file")
    p.add_argument("--expand", action="store_true",
                   help="show each server step inside a `run` step on a line of its own "
                   "(numbered `run` step 1, 2, ...)")
    p.set_defaults(func=run)


def _describe(step: Step, events: list[Event] | None = None) -> str:
    kinds: dict[str, int] = {}
    for e in step.events if events is None else events:
        if e.kind not in ("op", *QUIET_EVENTS, "load_scan", "cache_state", "select", "batch"):
            kinds[e.kind] = kinds.get(e.kind, 0) + 1
    return ", ".join(f"{k}" + (f" x{n}" if n > 1 else "") for k, n in kinds.items()) or "-"


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


def _show_step(step: Step, as_json: bool, expand: bool = False) -> None:
    if as_json:
        print(
            json.dumps(
                {
                    "kind": "step",
                    "step": step.index,
                    "op": step.op.to_json(),
                    "events": [e.kind for e in step.events if e.kind not in QUIET_EVENTS],
                    "violations": [v.to_json() for v in step.violations],
                },
                default=str,
            )
        )
        return
    op = step.op.OP
    extra = ""
    if isinstance(step.op, ops.Request):
        extra = f" {len(step.op.tokens)} tokens" + (f" pinned to {step.op.id_slot}" if step.op.id_slot >= 0 else "")
    elif isinstance(step.op, ops.RequestGroup):
        extra = f" {len(step.op.prompts)} decision prompts"
    elif isinstance(step.op, ops.Inject):
        extra = f" {step.op.site}"
    print(f"[{step.index:3d}] {op}{extra}: {_describe(step)}")
    if expand and op == "run" and step.last_op > step.first_op:
        by_op: dict[int, list[Event]] = {}
        for e in step.events:
            by_op.setdefault(e.op, []).append(e)
        for k in range(step.first_op, step.last_op + 1):
            print(f"      server step {k - step.first_op + 1}: {_describe(step, by_op.get(k, []))}")
            for v in step.violations:
                if v.op == k:
                    print(f"        VIOLATED {v.property} ({step.where(v.op)}): {v.message}")
        return
    for v in step.violations:
        print(f"      VIOLATED {v.property} ({step.where(v.op)}): {v.message}")


def _routes(trace: Trace, result: ReplayResult) -> dict[str, str]:
    """The route (properties/routes.py) of each expected violation of a C++ design's trace
    that the replay reproduced: its name, or "" when the trace takes none of the cell's listed
    routes. (An expectation that did not reproduce took no route: none is named.)"""
    out = {}
    shown = {v.property for v in result.violations}
    for e in trace.expect:
        pid = str(e.get("property"))
        if pid not in shown:
            continue
        name = route_name(trace.variant.name, pid, trace.ops)
        if name is not None:
            out[pid] = name
    return out


def summary(trace: Trace, result: ReplayResult, ok: bool) -> dict[str, Any]:
    """The ``--json`` run's last object."""
    srv = result.server
    return {
        "kind": "summary",
        "variant": trace.variant.name,
        "operations": len(trace.ops),
        "violations": len(result.violations),
        "violated": sorted({v.property for v in result.violations}),
        "expected": trace.expect,
        "expected_reproduced": ok if trace.expect else None,
        "routes": _routes(trace, result),
        "crashed": srv.crash.where if srv.crash else None,
        "accounted_bytes": srv.accounted_bytes,
        "unique_bytes": srv.unique_bytes,
        "physical_bytes": srv.physical_bytes,
        "exit": 0 if ok else 1,
    }


def run(args: argparse.Namespace) -> int:
    # Everything the run will need is checked before it starts: options, then the header.
    props = [get_property(p) for p in args.property] if args.property else list(CATALOGUE)
    if args.dot is not None:
        check_output_file(args.dot, "--dot")
    variant = chosen_variant(args)
    where = str(args.trace)
    lines = file_lines(args.trace)
    n0, head = first_object(lines, where)
    if isinstance(head, dict) and head.get("kind") == LOG_EVENTS_KIND:
        lines.close()
        if variant is not None or args.property or args.dot is not None:
            raise PcspecError("a check-log event trace takes no --variant, --property or --dot option", where)
        return replay_log_events(args.trace, args.json)
    trace = from_header(n0, head, lines, where, variant, BY_ID)

    result = replay(trace, props, lambda step: _show_step(step, args.json, args.expand))
    ok = result.matches(trace.expect)
    srv = result.server
    if args.dot is not None:
        from pcspec.model.ownership import graph, to_dot

        write_output(args.dot, to_dot(graph(srv)), "--dot")
    if args.json:
        print(json.dumps(summary(trace, result, ok), default=str))
    else:
        print(
            f"variant {trace.variant.name}: {len(trace.ops)} operations, {len(result.violations)} violation(s); "
            f"cache accounted {srv.accounted_bytes} B, unique {srv.unique_bytes} B, physical {srv.physical_bytes} B"
            + (f"; crashed at {srv.crash.where}" if srv.crash else "")
        )
        if trace.expect:
            print("expected violations " + ("reproduced" if ok else "NOT reproduced"))
        for pid, name in _routes(trace, result).items():
            how = name or "none of those listed in properties/routes.py"
            print(f"route of {pid} on {trace.variant.name}: {how} (docs/PROPERTIES.md explains each)")
    return 0 if ok else 1
