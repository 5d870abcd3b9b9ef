"""An observation of the model: the port-visible state variables, read from a ``Server``.

Only what a port of the core holds is read: each slot's tokens, checkpoint list and the
checkpoint its task restored; every checkpoint reachable from a slot or an entry (metadata,
holders, the state each payload holds); the entries in order (tokens, checkpoints, data); the
accounted bytes, the unique bytes and the byte limit. Object ids are the model's own here;
``pcspec.conform.canon`` renames them for comparison.
"""

from __future__ import annotations

from typing import Any

from pcspec.conform.tags import Tags
from pcspec.model.checkpoint import Checkpoint
from pcspec.model.heap import Buffer
from pcspec.model.server import Server

ROLE = {"main": "main", "drft": "drft", "ckpt_tgt": "tgt", "ckpt_dft": "dft", "ckpt_spec": "spec"}


def state_of(buf: Buffer, tags: Tags) -> int | None:
    """The tag a buffer holds as a port reads it back: None unless a fill wrote it whole."""
    if not buf.complete or buf.unwritten or buf.freed:
        return None
    key = (buf.id, buf.version)  # a write bumps the version: the content is the same until then
    tag = tags.by_buffer.get(key)
    if tag is None:
        tag = tags.by_buffer[key] = tags.tag(buf.content)
    return tag if buf.size >= 4 else tag & ((1 << (8 * buf.size)) - 1)


def part(buf: Buffer, tags: Tags) -> dict[str, Any]:
    return {"role": ROLE.get(buf.role, buf.role), "size": buf.size, "state": state_of(buf, tags)}


def ckpt(ck: Checkpoint, tags: Tags) -> dict[str, Any]:
    return {
        "id": ck.id,
        "n_tokens": ck.n_tokens,
        "pos_min": ck.pos_min,
        "pos_max": ck.pos_max,
        "id_task": ck.id_task,
        "refs": ck.refs,
        "parts": [part(b, tags) for b in ck.buffers()],
    }


def observe(srv: Server, tags: Tags, events: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    seen: dict[int, Checkpoint] = {}
    slots = []
    for s in srv.slots:
        for ck in s.prompt.checkpoints:
            seen.setdefault(ck.id, ck)
        held = s.restored is not None and any(c is s.restored for c in s.prompt.checkpoints)
        slots.append(
            {
                "tokens": list(s.prompt.tokens),
                "ckpts": [c.id for c in s.prompt.checkpoints],
                "restored": s.restored.id if held and s.restored is not None else None,
            }
        )
    entries = []
    cache = srv.cache
    if cache is not None:
        for e in cache.entries:
            for ck in e.prompt.checkpoints:
                seen.setdefault(ck.id, ck)
            entries.append(
                {
                    "id": e.id,
                    "tokens": list(e.prompt.tokens),
                    "ckpts": [c.id for c in e.prompt.checkpoints],
                    "parts": [part(b, tags) for b in e.data_buffers()],
                }
            )
    return {
        "events": list(events or []),
        "slots": slots,
        "ckpts": [ckpt(ck, tags) for ck in seen.values()],
        "entries": entries,
        "accounted": srv.accounted_bytes,
        "unique": srv.unique_bytes,
        "limit": cache.limit_size if cache is not None else 0,
    }
