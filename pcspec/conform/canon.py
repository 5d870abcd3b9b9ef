"""Canonical observations and their comparison.

A port names its checkpoints and entries as it likes (any integers, never reused within a
trace); the model names them by its heap counter. Both are renamed 1, 2, ... per namespace in
order of first appearance over the trace: in each observation, first the state (slots in
order, each list in order, then the entries in order), then the ids only events name. Events of
one operation are compared as a multiset (a port may erase front to back where the model
erases back to front). Two observations conform when their canonical forms are equal; where
they do not, each field that differs is a divergence (``pcspec.core.results``).
"""

from __future__ import annotations

import json
from typing import Any

from pcspec.conform.protocol import ID_FIELDS
from pcspec.core.results import Finding, divergence

Obs = dict[str, Any]


def _key(x: Any) -> str:
    return json.dumps(x, sort_keys=True)


class Canon:
    """The renaming of one side (the port, or the model) over one trace."""

    def __init__(self) -> None:
        self.names: dict[str, dict[Any, int]] = {"ckpt": {}, "entry": {}}

    def name(self, ns: str, raw: Any) -> int | None:
        if raw is None:
            return None
        m = self.names[ns]
        if raw not in m:
            m[raw] = len(m) + 1
        return m[raw]

    def __call__(self, obs: Obs) -> Obs:
        slots = [
            {
                "tokens": list(s["tokens"]),
                "ckpts": [self.name("ckpt", c) for c in s["ckpts"]],
                "restored": self.name("ckpt", s["restored"]),
            }
            for s in obs["slots"]
        ]
        entries = []
        for e in obs["entries"]:
            ident = self.name("entry", e["id"])
            entries.append(
                {
                    "id": ident,
                    "tokens": list(e["tokens"]),
                    "ckpts": [self.name("ckpt", c) for c in e["ckpts"]],
                    "parts": [dict(p) for p in e["parts"]],
                }
            )
        ckpts = sorted(
            ({**c, "id": self.name("ckpt", c["id"]), "parts": [dict(p) for p in c["parts"]]} for c in obs["ckpts"]),
            key=lambda c: c["id"],
        )
        # Ids only events name: assigned in an order that does not depend on the event order.
        events = [dict(e) for e in obs["events"]]
        for e in sorted(events, key=lambda e: _key({k: (None if k in ID_FIELDS else v) for k, v in e.items()})):
            for k, ns in ID_FIELDS.items():
                if k in e:
                    self.name(ns, e[k])
        for e in events:
            for k, ns in ID_FIELDS.items():
                if k in e:
                    e[k] = self.name(ns, e[k])
        events.sort(key=_key)
        return {
            "events": events,
            "slots": slots,
            "ckpts": ckpts,
            "entries": entries,
            "accounted": obs["accounted"],
            "unique": obs["unique"],
            "limit": obs["limit"],
        }


def differences(want: Obs, got: Obs, at: int = -1) -> list[Finding]:
    """A divergence at operation ``at`` for every field where two canonical observations differ:
    the field's path is its rule, ``data`` holds the ``expected`` and the ``port``'s value."""
    out: list[tuple[str, Any, Any]] = []
    we, ge = [_key(e) for e in want["events"]], [_key(e) for e in got["events"]]
    missing = [json.loads(k) for k in we if k not in ge or we.count(k) > ge.count(k)]
    extra = [json.loads(k) for k in ge if k not in we or ge.count(k) > we.count(k)]
    if missing or extra:
        out.append(("events", _dedup(missing), _dedup(extra)))
    ws, gs = want["slots"], got["slots"]
    for i in range(max(len(ws), len(gs))):
        a, b = (ws[i] if i < len(ws) else None), (gs[i] if i < len(gs) else None)
        _fields(f"slots[{i}]", a, b, out)
    wc, gc = {c["id"]: c for c in want["ckpts"]}, {c["id"]: c for c in got["ckpts"]}
    for cid in sorted(set(wc) | set(gc)):
        _fields(f"ckpts[id={cid}]", wc.get(cid), gc.get(cid), out)
    we2, ge2 = want["entries"], got["entries"]
    for i in range(max(len(we2), len(ge2))):
        a, b = (we2[i] if i < len(we2) else None), (ge2[i] if i < len(ge2) else None)
        _fields(f"entries[{i}]", a, b, out)
    for k in ("accounted", "unique", "limit"):
        if want[k] != got[k]:
            out.append((k, want[k], got[k]))
    return [divergence(path, at, f"the port differs at {path}", expected=w, port=g) for path, w, g in out]


def _dedup(items: list[Any]) -> list[Any]:
    seen: list[Any] = []
    for x in items:
        if x not in seen:
            seen.append(x)
    return seen


def _fields(path: str, a: dict[str, Any] | None, b: dict[str, Any] | None, out: list[tuple[str, Any, Any]]) -> None:
    if a is None or b is None:
        if a != b:
            out.append((path, a, b))
        return
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            out.append((f"{path}.{k}", a.get(k), b.get(k)))
