"""The live operation vocabulary: what a fuzzed workload sends to a server, as JSON.

A live operation maps to HTTP and to the model's operations (``pcspec.core.ops``). Prompts are
built from *segments* so that a workload means the same thing on the server and in the model,
whose generated tokens differ (the server's come from random weights; the model's are >= 1000):

* ``["lit", [ids]]``: literal token ids (0..255, bytes);
* ``["prompt", i]``: the prompt of request ``i`` (as resolved on that side);
* ``["reply", i]``: the tokens request ``i`` generated (on that side);
* ``["head", [i, n]]``: the first ``n`` tokens of request ``i``'s prompt and reply.

``cut`` (optional) keeps the first ``cut`` tokens of the resolved prompt. Every number is
concrete, so a workload replays exactly (the fuzzer may choose a cut from what the log showed,
but stores the number).

=================  ==========================================================================
op                 fields
=================  ==========================================================================
``request``        ``id`` (its index among requests), ``segments``, ``cut`` (null),
                   ``n_predict``, ``id_slot`` (-1), ``cache_prompt`` (true), ``async`` (false:
                   wait for the reply), ``delay_ms`` (0: sleep before sending)
``wait``           wait for every async request
``slot_save``      ``id_slot``, ``filename``
``slot_restore``   ``id_slot``, ``filename``
``slot_erase``     ``id_slot``
``corrupt_file``   ``filename``, ``truncate`` (new length) or ``offset`` + ``data`` (bytes)
=================  ==========================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from pcspec.core.errors import PcspecError

Segment = tuple[str, Any]

# Each operation's fields (the table above): a field an operation lacks is refused, as the
# model's operations refuse one (pcspec.core.ops.parse), so a misspelt field is not ignored.
FIELDS: dict[str, tuple[str, ...]] = {
    "request": ("id", "segments", "cut", "n_predict", "id_slot", "cache_prompt", "async", "delay_ms"),
    "wait": (),
    "slot_save": ("id_slot", "filename"),
    "slot_restore": ("id_slot", "filename"),
    "slot_erase": ("id_slot",),
    "corrupt_file": ("filename", "truncate", "offset", "data"),
}
OP_NAMES = tuple(FIELDS)


@dataclass(frozen=True)
class LiveOp:
    op: str
    id: int = -1  # request index
    segments: tuple[Segment, ...] = ()
    cut: int | None = None
    n_predict: int = 4
    id_slot: int = -1
    cache_prompt: bool = True
    is_async: bool = False
    delay_ms: int = 0
    filename: str = ""
    truncate: int | None = None
    offset: int = 0
    data: tuple[int, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        if self.op == "request":
            d: dict[str, Any] = {"op": "request", "id": self.id,
                                 "segments": [[k, list(v) if k in ("lit", "head") else v] for k, v in self.segments],
                                 "n_predict": self.n_predict}
            if self.cut is not None:
                d["cut"] = self.cut
            if self.id_slot != -1:
                d["id_slot"] = self.id_slot
            if not self.cache_prompt:
                d["cache_prompt"] = False
            if self.is_async:
                d["async"] = True
            if self.delay_ms:
                d["delay_ms"] = self.delay_ms
            return d
        if self.op == "wait":
            return {"op": "wait"}
        if self.op == "slot_erase":
            return {"op": self.op, "id_slot": self.id_slot}
        if self.op in ("slot_save", "slot_restore"):
            return {"op": self.op, "id_slot": self.id_slot, "filename": self.filename}
        d = {"op": "corrupt_file", "filename": self.filename}
        if self.truncate is not None:
            d["truncate"] = self.truncate
        else:
            d["offset"], d["data"] = self.offset, list(self.data)
        return d

    @classmethod
    def from_json(cls, d: object) -> LiveOp:
        if not isinstance(d, dict) or d.get("op") not in OP_NAMES:
            raise PcspecError(f"not a live operation: {d!r}")
        name = d["op"]
        extra = sorted(k for k in d if k != "op" and k not in FIELDS[name])
        if extra:
            fields = ", ".join(FIELDS[name]) or "none"
            raise PcspecError(f"live operation {name!r} has no field {extra[0]!r}; its fields: {fields}")
        try:
            if name == "request":
                segs: list[Segment] = []
                for kind, val in d["segments"]:
                    if kind == "lit":
                        segs.append(("lit", tuple(int(x) for x in val)))
                    elif kind in ("prompt", "reply"):
                        segs.append((kind, int(val)))
                    elif kind == "head":
                        segs.append(("head", (int(val[0]), int(val[1]))))
                    else:
                        raise PcspecError(f"unknown segment kind {kind!r}")
                return cls("request", id=int(d["id"]), segments=tuple(segs), cut=d.get("cut"),
                           n_predict=int(d.get("n_predict", 4)), id_slot=int(d.get("id_slot", -1)),
                           cache_prompt=bool(d.get("cache_prompt", True)), is_async=bool(d.get("async", False)),
                           delay_ms=int(d.get("delay_ms", 0)))
            if name == "wait":
                return cls("wait")
            if name == "slot_erase":
                return cls(name, id_slot=int(d["id_slot"]))
            if name in ("slot_save", "slot_restore"):
                return cls(name, id_slot=int(d["id_slot"]), filename=str(d["filename"]))
            return cls("corrupt_file", filename=str(d["filename"]), truncate=d.get("truncate"),
                       offset=int(d.get("offset", 0)), data=tuple(int(x) for x in d.get("data", [])))
        except (KeyError, TypeError, ValueError) as exc:
            raise PcspecError(f"malformed live operation {d!r}: {exc}") from None


def together(ops: list[LiveOp]) -> list[list[int]]:
    """Indices of the operations that run together: one synchronous operation, or asynchronous
    requests and the operation that waits for them (none at the end of a workload)."""
    out: list[list[int]] = [[]]
    for i, op in enumerate(ops):
        out[-1].append(i)
        if not op.is_async:
            out.append([])
    return [g for g in out if g]


def resolve(op: LiveOp, prompts: dict[int, list[int]], replies: dict[int, list[int]]) -> list[int]:
    """The token ids of a request's prompt on one side (server or model)."""
    out: list[int] = []
    for kind, val in op.segments:
        if kind == "lit":
            out.extend(val)
        elif kind == "prompt":
            out.extend(prompts.get(val, []))
        elif kind == "reply":
            out.extend(replies.get(val, []))
        else:
            src, n = val
            out.extend((prompts.get(src, []) + replies.get(src, []))[:n])
    return out if op.cut is None else out[: op.cut]


def renumber(ops: list[LiveOp]) -> list[LiveOp]:
    """Drop references to requests that are gone (after shrinking removed them) and number the
    remaining requests 0..n-1 in order; a reference to a removed request becomes nothing."""
    mapping: dict[int, int] = {}
    out: list[LiveOp] = []
    for op in ops:
        if op.op != "request":
            out.append(op)
            continue
        segs = tuple(_remap(k, v, mapping) for k, v in op.segments
                     if k == "lit" or (v[0] if k == "head" else v) in mapping)
        mapping[op.id] = len(mapping)
        out.append(replace(op, id=mapping[op.id], segments=segs))
    return out


def _remap(kind: str, val: Any, mapping: dict[int, int]) -> Segment:
    if kind == "lit":
        return (kind, val)
    if kind == "head":
        return (kind, (mapping[val[0]], val[1]))
    return (kind, mapping[val])
