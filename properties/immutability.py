"""IMM family: what was published does not change (review: "checkpoints are only mutated
before publication", seed 000; #27451's copy-on-update)."""

from __future__ import annotations

from collections.abc import Sequence

from pcspec.model.events import Event
from pcspec.model.server import Server
from pcspec.properties.base import held_checkpoints, on_storage


@on_storage
def imm1_published_checkpoint_unchanged(srv: Server, events: Sequence[Event]) -> list[str]:
    out: list[str] = []
    for ck, names in held_checkpoints(srv, events).values():
        sealed = ck.sealed
        if sealed is None:
            continue
        now = ck.fingerprint()
        if now != sealed:
            out.append(
                f"{ck.describe()} held by {names[0]} changed after publication: "
                f"was {_short(sealed)}, now {_short(now)}"
            )
    return out


@on_storage
def imm2_entry_unchanged(srv: Server, events: Sequence[Event]) -> list[str]:
    if srv.cache is None:
        return []
    out: list[str] = []
    for e in srv.cache.entries:
        if e.sealed is not None and e.fingerprint() != e.sealed:
            what = "its main state was emptied" if e.main is None else "its saved state or checkpoints changed"
            out.append(
                f"cache entry #{e.id} ({e.prompt.n_tokens} tokens) changed while in the cache: {what}"
            )
    return out


def _short(fp: object) -> str:
    text = repr(fp)
    return text if len(text) <= 160 else text[:157] + "..."
