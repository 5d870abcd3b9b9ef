"""What ``pcspec conform`` prints: a verdict, the figures, and a divergence as a trace and a diff.

A divergence is written as a conformance case (the golden file format) cut after the first
operation whose answer differs, so that it can be replayed on its own (``pcspec conform
--cmd ... --suite FILE``), and printed as the core operations that lead to it, the expected
and the observed values of each field that differs, and the properties the port's own
observations violate there (``judge``).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from pcspec.conform.case import Case
from pcspec.conform.session import Divergence, Result
from pcspec.properties.catalogue import BY_ID

MAX_TRACE_LINES = 40


def cut(div: Divergence) -> Case:
    """The divergent case up to and including the operation that differs."""
    c = div.case
    n = div.index + 1 if div.index >= 0 else len(c.ops)
    return replace(c, ops=c.ops[:n], expect=c.expect[:n], origin=c.origin[:n])


def trace_lines(div: Divergence) -> list[str]:
    case = cut(div)
    return [json.dumps(x, separators=(",", ":")) for x in [case.begin(), *case.ops]]


def _short(x: Any, n: int = 300) -> str:
    text = json.dumps(x, separators=(",", ":"), sort_keys=True)
    return text if len(text) <= n else text[: n - 3] + "..."


def divergence_text(div: Divergence, written: Path | None) -> list[str]:
    c = div.case
    out = []
    shrunk = (f" (shrunk from {div.shrunk_from} model operations to {len(c.source.ops)})"
              if div.shrunk_from is not None and c.source is not None else "")
    if div.index < 0:
        out.append(f"  the port failed on case {c.name!r}{shrunk}: {div.error}")
    else:
        out.append(f"  case {c.name!r}, core operation {div.index} of {len(c.ops)}{shrunk}")
    if c.purpose:
        out.append(f"  ({c.purpose})")
    if div.index >= 0:
        out.append(f"  operation: {_short(c.ops[div.index], 400)}")
        if div.error is not None:
            out.append(f"  the port answered an error: {div.error}")
    if div.findings:
        for f in div.findings[:6]:
            stmt = BY_ID[f.property].statement if f.property in BY_ID else ""
            where = f" at operation {f.op}" if f.op >= 0 else ""
            out.append(f"  violates {f.property}{where}: {f.message}")
            if stmt:
                out.append(f"      {f.property}: {stmt}")
    elif div.error is None:
        out.append("  violates no property the kit judges: the port differs from the spec without breaking one")
    if div.diffs:
        out.append("  differences (expected, then the port's):")
        for d in div.diffs[:12]:
            out.append(f"    {d.rule}:")
            out.append(f"      expected {_short(d.data['expected'])}")
            out.append(f"      port     {_short(d.data['port'])}")
    lines = trace_lines(div)
    out.append(f"  the core trace ({len(lines)} lines: begin, then the operations):")
    for ln in lines[:MAX_TRACE_LINES]:
        out.append(f"    {ln if len(ln) <= 400 else ln[:397] + '...'}")
    if len(lines) > MAX_TRACE_LINES:
        out.append(f"    ... ({len(lines) - MAX_TRACE_LINES} more)")
    if c.source is not None:
        out.append(f"  lowered from the model trace ({len(c.source.ops)} operations, variant {c.variant}):")
        for op in c.source.ops[:MAX_TRACE_LINES]:
            out.append(f"    {_short(op.to_json(), 400)}")
    if written is not None:
        out.append(f"  written to {written} (replay: pcspec conform --cmd CMD --suite {written} --fuzz 0)")
    return out


def text(result: Result, cmd: str, variant: str, written: Path | None) -> str:
    rate = result.fuzzed / result.seconds if result.seconds > 0 else 0.0
    head = "CONFORMS" if result.divergence is None else "DIVERGES"
    lines = [f"pcspec conform: {cmd!r} {head} ({variant})"]
    lines.append(f"  golden suite: {result.golden} case(s); fuzzed: {result.fuzzed} trace(s); "
                 f"{result.ops} core operation(s) answered")
    waits = f"the port's waits {result.port_seconds:.1f} s"
    lines.append(f"  time: {result.seconds:.1f} s ({rate:.1f} fuzzed traces/s; {waits})")
    lines += [f"  note: {n}" for n in result.notes]
    if result.divergence is not None:
        lines += divergence_text(result.divergence, written)
    return "\n".join(lines) + "\n"


def as_json(result: Result, cmd: str, variant: str, written: Path | None) -> dict[str, Any]:
    d = result.divergence
    out: dict[str, Any] = {
        "schema": 1,
        "ok": d is None,
        "cmd": cmd,
        "variant": variant,
        "golden": result.golden,
        "fuzzed": result.fuzzed,
        "ops": result.ops,
        "seconds": round(result.seconds, 3),
        "traces_per_second": round(result.fuzzed / result.seconds, 2) if result.seconds > 0 else 0.0,
        "notes": result.notes,
    }
    if d is not None:
        out["divergence"] = {
            "case": d.case.name,
            "index": d.index,
            "op": d.case.ops[d.index] if d.index >= 0 else None,
            "error": d.error,
            "properties": d.properties,
            "findings": [f.to_json() for f in d.findings],
            "differences": [{"path": f.rule, **f.data} for f in d.diffs],
            "trace": [json.loads(ln) for ln in trace_lines(d)],
            "source": [op.to_json() for op in d.case.source.ops] if d.case.source is not None else None,
            "shrunk_from": d.shrunk_from,
            "file": str(written) if written is not None else None,
        }
    return out
