"""Trace files: versioned JSON lines that drive a ``Server``.

Line 1 is the header::

    {"schema": 1, "kind": "pcspec-trace", "variant": "pr30137", "config": {...},
     "seed": 7, "expect": [{"property": "RB-2", "op": 5, "message": "..."}]}

``config`` holds only the keys that differ from ``Config()`` defaults (any may be given);
``expect`` (optional) lists the violations the trace is known to show: ``pcspec replay``
exits 0 when what it observes matches them exactly (or, without ``expect``, when it observes
no violation). Every further line is one operation of ``pcspec.model.ops``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pcspec.errors import PcspecError
from pcspec.model import ops
from pcspec.model.config import Config
from pcspec.model.variants import Variant, get_variant

SCHEMA = 1
KIND = "pcspec-trace"


@dataclass
class Trace:
    variant: Variant
    config: Config
    ops: list[dict[str, Any]]
    seed: int | None = None
    expect: list[dict[str, Any]] = field(default_factory=list)

    def header(self) -> dict[str, Any]:
        defaults = Config().to_json()
        cfg = {k: v for k, v in self.config.to_json().items() if defaults.get(k) != v}
        head: dict[str, Any] = {"schema": SCHEMA, "kind": KIND, "variant": self.variant.name, "config": cfg}
        if self.seed is not None:
            head["seed"] = self.seed
        if self.expect:
            head["expect"] = self.expect
        return head

    def dumps(self) -> str:
        lines = [json.dumps(self.header(), sort_keys=True)]
        lines += [json.dumps(op, sort_keys=True) for op in self.ops]
        return "\n".join(lines) + "\n"

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.dumps(), encoding="utf-8")


def parse(text: str, where: str = "<trace>", variant: str | None = None) -> Trace:
    """Parse a trace; every problem names the line and the reason."""
    lines = [(i + 1, ln) for i, ln in enumerate(text.splitlines()) if ln.strip()]
    if not lines:
        raise PcspecError("empty trace: expected a header line", where)
    objs: list[tuple[int, Any]] = []
    for n, ln in lines:
        try:
            objs.append((n, json.loads(ln)))
        except json.JSONDecodeError as exc:
            raise PcspecError(f"line {n} is not JSON ({exc.msg} at column {exc.colno})", where) from None
    n0, head = objs[0]
    if not isinstance(head, dict) or head.get("kind") != KIND:
        raise PcspecError(
            f'line {n0}: not a pcspec trace header (expected {{"schema": {SCHEMA}, "kind": "{KIND}", ...}})', where
        )
    if head.get("schema") != SCHEMA:
        raise PcspecError(
            f"line {n0}: unsupported trace schema {head.get('schema')!r} (this pcspec reads {SCHEMA})", where
        )
    try:
        v = get_variant(variant or str(head.get("variant", "")))
    except PcspecError as exc:
        raise PcspecError(f"line {n0}: {exc.why}", where) from None
    cfg = Config.from_json(head.get("config", {}), f"{where}: line {n0}")
    expect = head.get("expect", [])
    if not isinstance(expect, list) or not all(isinstance(e, dict) and "property" in e for e in expect):
        raise PcspecError(f'line {n0}: "expect" must be a list of {{"property": ..., "op": ...}}', where)
    out: list[dict[str, Any]] = []
    for n, op in objs[1:]:
        try:
            out.append(ops.validate(op))
        except PcspecError as exc:
            raise PcspecError(f"line {n}: {exc.why}", where) from None
    seed = head.get("seed")
    return Trace(v, cfg, out, seed if isinstance(seed, int) else None, expect)


def load(path: Path, variant: str | None = None) -> Trace:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PcspecError("no such file", str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PcspecError(f"cannot read: {exc}", str(path)) from None
    return parse(text, str(path), variant)


def pytest_snippet(trace: Trace, name: str) -> str:
    """The trace as a runnable pytest test that fails while the violation reproduces."""
    ident = "".join(c if c.isalnum() else "_" for c in name)
    return (
        '"""Counterexample found by pcspec fuzz; see the trace file of the same name."""\n\n'
        "from pcspec.replay import replay\nfrom pcspec.trace import parse\n\n"
        f"TRACE = {trace.dumps()!r}\n\n\n"
        f"def test_{ident}() -> None:\n"
        "    result = replay(parse(TRACE))\n"
        "    assert not result.violations, result.violations[0].message\n"
    )
