"""The model's prediction of a workload: ``Server(config, variant)`` run on the same requests at the
same sizes, one ``Predicted`` per request.

The configuration is the live server's (``pcspec.live.calibrate``): the bench models' state sizes
(``calibrate.SIZES``, derived from their shapes and checked against the server's own
checkpoint lines) and the design on the October tree's rule set (``pr30137@0c1e570``; ``october``
for baseline, whose code that tree is). A model-only workload may set a checkpoint's size
(``ckpt_mib``) or a token's (``cell_bytes``) beyond what the machine holds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

from pcspec.bench.workload import Workload
from pcspec.core import ops
from pcspec.core.loop import Driver
from pcspec.live import calibrate
from pcspec.live.models import SPECS
from pcspec.live.process import Flags
from pcspec.live.schedule import ServerFacts
from pcspec.model import events as ev
from pcspec.model.config import MIB, Config, MemoryKind
from pcspec.model.design import Design
from pcspec.model.server import Server

TREE = "0c1e570"  # the tree every design's build is made of (pcspec.live.designs)
# the evictions that free memory (not ``loaded``: a load moves the entry back into the slot)
EVICTING = ("obsolete", "make_room", "limit_bytes", "limit_tokens", "pop_back")


def flags(w: Workload) -> Flags:
    """The server flags of a workload's live run."""
    idle = "--cache-idle-slots" if w.cache_idle_slots else "--no-cache-idle-slots"
    return Flags(n_slots=w.slots, n_ctx=w.n_ctx, n_batch=w.n_batch, n_ubatch=w.n_ubatch,
                 cache_ram_mib=w.cache_ram_mib, ctx_checkpoints=w.ctx_checkpoints,
                 checkpoint_min_step=w.checkpoint_min_step, slot_prompt_similarity=w.sps, extra=(idle,))


def swa_cells(w: Workload) -> int:
    """Cells of the SWA cache: ``n_swa + n_ubatch`` padded to 256, at most a slot's context
    (llama-kv-cache-iswa.cpp:71-73 of 0c1e570)."""
    n_swa = SPECS[w.model].n_swa
    if not n_swa:
        return 256
    pad = -(-(n_swa + w.n_ubatch) // 256) * 256
    return min(w.n_ctx // w.slots, pad)


def config(w: Workload) -> Config:
    facts = ServerFacts(w.slots, w.n_ctx // w.slots, swa_cells(w))
    cfg = calibrate.model_config(w.model, flags(w), facts)
    if w.cell_bytes:
        cfg = replace(cfg, cell_bytes=w.cell_bytes)
    if w.ckpt_mib:
        size = int(w.ckpt_mib * MIB)
        if cfg.memory in (MemoryKind.RECURRENT, MemoryKind.HYBRID):
            cfg = replace(cfg, rs_bytes=size)
        elif cfg.memory == MemoryKind.SWA:
            cfg = replace(cfg, cell_bytes=max(1, size // max(1, cfg.n_swa)))
    # the model's heap must never be the limit: the machine's RAM is what the live run measures
    return replace(cfg, host_ram=max(cfg.host_ram, 1 << 50)).validate()


def variant(design: str) -> Design:
    """The model of a design's build (the design on the October tree) or, for any other name (a
    rule set's model, ``DESIGN@RULES`` of a design of one's own), that design."""
    if design in ("baseline", "pr30137", "pr27451", "fixed"):
        return calibrate.variant(calibrate.design_rules(design, TREE))
    return calibrate.variant(design)


@dataclass
class Predicted:
    """What the model says of one request (bytes are the model's symbolic buffers)."""

    index: int
    physical: int  # every live buffer: the slots' checkpoints and the cache's entries
    peak: int  # the most ``physical`` was during the request (both copies of a deep copy, ...)
    accounted: int  # server_prompt_cache::size as the design counts it
    unique: int  # the cache's distinct buffers, each counted once
    copied: int  # checkpoint payload bytes deep-copied during this request
    copied_per_save: list[int]  # per prompt_save of this request
    saves: int
    evictions: int
    entries: int
    slot_checkpoints: int  # checkpoints the request's slot holds after it
    cache_checkpoints: int
    created: int = 0  # checkpoints created during the request

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def predict(w: Workload, design: str) -> tuple[list[Predicted], float]:
    """The model on the workload; returns the predictions and the seconds it took."""
    t0 = time.monotonic()
    # (design: what predicts the column, DesignResult.model); the one loop applies each
    # request and its run, keeping no trace (a model-only workload may be long)
    model = Driver(Server(config(w), variant(design)), record=False)
    srv = model.server
    out: list[Predicted] = []
    for r in w.requests():
        start = len(srv.heap.events)
        live = peak = srv.physical_bytes
        model.apply(ops.Request(tuple(r.tokens), w.n_predict, id_slot=r.id_slot))
        model.apply(ops.Run(100_000))
        saves: list[int] = []
        in_save = False
        copied = evictions = created = 0
        for e in srv.heap.events[start:]:
            if isinstance(e, ev.Alloc):
                live += e.size
                peak = max(peak, live)
            elif isinstance(e, ev.Free):
                live -= e.size
            elif isinstance(e, ev.SaveBegin):
                in_save = True
                saves.append(0)
            elif isinstance(e, ev.SaveEnd):
                in_save = False
            elif isinstance(e, ev.CopyPayload):
                copied += e.bytes
                if in_save:
                    saves[-1] += e.bytes
            elif isinstance(e, ev.EntryEvict) and e.reason in EVICTING:
                evictions += 1
            elif isinstance(e, ev.CkptCreate):
                created += 1
        entries = srv.cache.entries if srv.cache is not None else []
        slot = srv.slots[r.id_slot if r.id_slot >= 0 else 0]
        out.append(Predicted(
            r.index, srv.physical_bytes, peak, srv.accounted_bytes, srv.unique_bytes, copied, saves, len(saves),
            evictions, len(entries), len(slot.prompt.checkpoints),
            sum(len(e.prompt.checkpoints) for e in entries), created,
        ))
        # a long model-only run keeps only the events it still needs
        if len(srv.heap.events) > 200_000:
            srv.heap.events.clear()
    return out, time.monotonic() - t0
