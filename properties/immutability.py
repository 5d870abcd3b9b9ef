"""IMM family: what was published does not change (the #30137 review: "checkpoints are only
mutated before publication"; #27451's copy-on-update). Each is compared with itself as the
judge saw it at its publication (``pcspec.properties.history``: the model keeps no copy)."""

from __future__ import annotations

from collections.abc import Sequence

from pcspec.model.events import Event
from pcspec.properties.base import held_checkpoints, history_of, needs, on_storage
from pcspec.properties.history import checkpoint_fingerprint, entry_fingerprint
from pcspec.properties.view import StateView


@on_storage
@needs("seals")
def imm1_published_checkpoint_unchanged(srv: StateView, events: Sequence[Event]) -> list[str]:
    out: list[str] = []
    seals = history_of(events).sealed_ckpts
    for ck, names in held_checkpoints(srv, events).values():
        sealed = seals.get(ck.id)
        if sealed is None:
            continue
        now = checkpoint_fingerprint(ck)
        if now != sealed:
            out.append(
                f"{ck.describe()} held by {names[0]} changed after publication: "
                f"was {_short(sealed)}, now {_short(now)}"
            )
    return out


@on_storage
@needs("seals")
def imm2_entry_unchanged(srv: StateView, events: Sequence[Event]) -> list[str]:
    if srv.cache is None:
        return []
    out: list[str] = []
    seals = history_of(events).sealed_entries
    for e in srv.cache.entries:
        sealed = seals.get(e.id)
        if sealed is not None and entry_fingerprint(e) != sealed:
            what = "its main state was emptied" if e.main is None else "its saved state or checkpoints changed"
            out.append(
                f"cache entry #{e.id} ({e.prompt.n_tokens} tokens) changed while in the cache: {what}"
            )
    return out


def _short(fp: object) -> str:
    text = repr(fp)
    return text if len(text) <= 160 else text[:157] + "..."
