"""A conformance case: core operations with the observations a port must make, and the model
trace they were lowered from. Golden files are cases written as JSON lines:

line 1, the header::

    {"schema": 1, "kind": "pcspec-conform", "name": "...", "variant": "fixed",
     "config": {the port's configuration}, "purpose": "...", "shows": [["pr30137", "RB-2"]],
     "source": {"config": {model configuration, non-defaults}, "ops": [model operations]},
     "tags": {"1": [the token prefix state 1 describes], ...}}

then one line per core operation: ``{"at": k, "op": {...}, "expect": {...}}``, where ``at`` is
the index of the model operation it came from and ``expect`` the canonical observation, written
as what changed: ``events`` always, the other keys (``slots``, ``ckpts``, ``entries``,
``accounted``, ``unique``, ``limit``) only on the first line and where they differ from the
line before.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pcspec.conform.canon import Canon
from pcspec.conform.lower import Lowered, lower
from pcspec.conform.protocol import KIND, SCHEMA, begin_line
from pcspec.conform.tags import Tags
from pcspec.core.errors import PcspecError
from pcspec.core.trace import Trace, config_diff
from pcspec.model.config import Config
from pcspec.model.designs import get_design


@dataclass
class Case:
    name: str
    variant: str
    config: dict[str, Any]
    ops: list[dict[str, Any]]
    expect: list[dict[str, Any]]  # canonical observations
    tags: Tags
    origin: list[int]
    source: Trace | None = None
    purpose: str = ""
    shows: list[tuple[str, str]] = field(default_factory=list)

    def begin(self) -> dict[str, Any]:
        return begin_line(self.variant, self.config, self.name)

    @classmethod
    def from_trace(cls, name: str, trace: Trace, purpose: str = "", shows: list[tuple[str, str]] | None = None) -> Case:
        return cls.from_lowered(name, trace, lower(trace), purpose, shows or [])

    @classmethod
    def from_lowered(
        cls, name: str, trace: Trace, low: Lowered, purpose: str = "", shows: list[tuple[str, str]] | None = None
    ) -> Case:
        canon = Canon()
        return cls(
            name,
            low.variant,
            low.config,
            low.ops,
            [canon(o) for o in low.expect],
            low.tags,
            low.origin,
            trace,
            purpose,
            list(shows or []),
        )

    # -- golden files ------------------------------------------------------------------------------

    def header(self) -> dict[str, Any]:
        head: dict[str, Any] = {
            "schema": SCHEMA,
            "kind": KIND,
            "name": self.name,
            "variant": self.variant,
            "config": self.config,
            "purpose": self.purpose,
            "shows": [list(s) for s in self.shows],
        }
        if self.source is not None:
            ops = [op.to_json() for op in self.source.ops]
            head["source"] = {"config": config_diff(self.source.config), "ops": ops}
        head["tags"] = self.tags.table()
        return head

    def dumps(self) -> str:
        lines = [json.dumps(self.header(), sort_keys=True)]
        prev: dict[str, Any] = {}
        for at, op, want in zip(self.origin, self.ops, self.expect, strict=True):
            delta = {k: v for k, v in want.items() if k == "events" or prev.get(k) != v}
            prev = want
            lines.append(json.dumps({"at": at, "op": op, "expect": delta}, sort_keys=True))
        return "\n".join(lines) + "\n"

    @classmethod
    def loads(cls, text: str, where: str = "<case>") -> Case:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if not lines:
            raise PcspecError("empty conformance case", where)
        try:
            head = json.loads(lines[0])
            body = [json.loads(ln) for ln in lines[1:]]
        except json.JSONDecodeError as exc:
            raise PcspecError(f"not JSON lines ({exc.msg})", where) from None
        if not isinstance(head, dict) or head.get("kind") != KIND or head.get("schema") != SCHEMA:
            want = f'"kind": "{KIND}", "schema": {SCHEMA}'
            raise PcspecError(f"line 1: not a pcspec conformance case (expected {want})", where)
        expect: list[dict[str, Any]] = []
        for b in body:
            expect.append({**(expect[-1] if expect else {}), **b["expect"]})
        source = None
        if "source" in head:
            src = head["source"]
            source = Trace(get_design(head["variant"]), Config.from_json(src["config"], where), list(src["ops"]))
        return cls(
            head["name"],
            head["variant"],
            head["config"],
            [b["op"] for b in body],
            expect,
            Tags.from_table(head.get("tags", {})),
            [b.get("at", -1) for b in body],
            source,
            head.get("purpose", ""),
            [(s[0], s[1]) for s in head.get("shows", [])],
        )
