"""A short state read during a save (``save.read.tgt``).

``server_slot::prompt_save`` first calls ``server_prompt_cache::alloc`` -- which removes
obsolete entries, makes room and appends the new entry -- and only then fills the entry with
``llama_state_seq_get_data_ext``. What a short read leaves behind is the save-protocol seam:

* baseline (parent of #30137): the return value is ignored; the entry stays, half written,
  counted at full size.
* pr30137: "failed to save complete prompt state", ``pop_back()``; but the obsolete entry and
  the entry evicted to make room are gone for good (RB-2 is violated, RB-1 holds).
* fixed: builds and fills the entry off the list and only then removes, evicts and inserts; a
  failed fill leaves the cache exactly as it was.

Workload (hand derivation; recurrent memory, U = 16 + 1000 bytes per state or checkpoint,
n_batch 16, n_ubatch 4, cache_ram 4000 bytes, i.e. between 3U = 3048 and 4U = 4064):

* A1 = tokens 1..24 on slot 0 (n_predict 2): checkpoint c20, slot T1 = 25 tokens.
* B (4 tokens) on slot 1: its launch saves slot 0 -> E1 = (T1, {c20}) = 2U. Cache [E1].
* A2 = T1 + the reply's last token + 18 user tokens = 44 tokens (the client sends the reply
  back exactly): lcp = 25 = the whole slot, recurrent ``pos_min = 24 < thold = 25``: no
  restore, c20 survives; batches [25,36), [36,40), [40,44) -> c40. Slot T2 = 45 tokens.
  Its launch saves slot 1 -> EB = U: 2U + U = 3U <= 4000. Cache [E1, EB].
* B again, with ``save.read.tgt`` armed: the launch saves slot 0, E2 = (T2, {c20, c40}) = 3U
  per holder. ``alloc``: not contained, 3U <= 4000 (not oversize); E1 (T1) is a prefix of T2:
  removed as obsolete; make room: EB U + 3U = 4U = 4064 > 4000 -> EB popped; append E2. Then
  the target state read comes up short.
"""

from __future__ import annotations

import pytest

from pcspec.model import events as ev
from pcspec.model.designs import DESIGNS
from pcspec.model.server import Server
from pcspec.properties.history import cache_fingerprint
from tests.support.common import B_PROMPT, recurrent_config
from tests.support.common import RS_STATE as U


def setup(variant: str) -> Server:
    cfg = recurrent_config(cache_ram=4000)
    srv = Server(cfg, DESIGNS[variant])
    srv.request(tuple(range(1, 25)), n_predict=2, id_slot=0)
    srv.run()
    srv.request(B_PROMPT, n_predict=1, id_slot=1)
    srv.run()
    t1 = srv.slots[0].prompt.tokens
    assert len(t1) == 25
    a2 = (*t1, srv.slots[0].next_token, *range(100, 118))
    assert len(a2) == 44
    srv.request(a2, n_predict=2, id_slot=0)
    srv.run()
    assert srv.crash is None
    assert [c.n_tokens for c in srv.slots[0].prompt.checkpoints] == [20, 40]
    assert srv.cache is not None
    assert [e.prompt.n_tokens for e in srv.cache.entries] == [25, 4]
    assert srv.accounted_bytes == 3 * U
    return srv


def failing_save(srv: Server) -> list[ev.Event]:
    """Arm the fault, send B (whose launch saves slot 0); return the events of that request."""
    srv.inject("save.read.tgt")
    start = len(srv.heap.events)
    srv.request(B_PROMPT, n_predict=1, id_slot=1)
    assert srv.crash is None
    return srv.heap.events[start:]


def evictions(evs: list[ev.Event]) -> list[tuple[str, int]]:
    return [(e.reason, e.n_tokens) for e in evs if isinstance(e, ev.EntryEvict)]


def saves_ok(evs: list[ev.Event]) -> list[bool]:
    return [e.ok for e in evs if isinstance(e, ev.SaveEnd)]


@pytest.mark.parametrize("variant", ["baseline", "pr27451"])
def test_unvalidated_save_keeps_partial_entry(variant: str) -> None:
    srv = setup(variant)
    evs = failing_save(srv)
    assert evictions(evs) == [("obsolete", 25), ("make_room", 4)]
    assert saves_ok(evs) == [True]  # return value ignored
    assert srv.cache is not None
    (entry,) = srv.cache.entries
    assert entry.prompt.n_tokens == 45
    assert entry.main is not None
    assert entry.main.size == U
    assert not entry.main.complete
    assert 0 < entry.main.filled < U
    # Counted at full size: main U + c20 + c40.
    assert srv.accounted_bytes == 3 * U


def test_pr30137_pops_entry_but_keeps_collateral_evictions() -> None:
    srv = setup("pr30137")
    before = cache_fingerprint(srv)
    evs = failing_save(srv)
    assert evictions(evs) == [("obsolete", 25), ("make_room", 4), ("pop_back", 45)]
    assert saves_ok(evs) == [False]
    assert srv.cache is not None
    assert srv.cache.entries == []  # no partial entry (RB-1) ...
    assert cache_fingerprint(srv) != before  # ... but E1 and EB are lost (RB-2)
    assert srv.accounted_bytes == 0


def test_fixed_leaves_cache_exactly_as_it_was() -> None:
    srv = setup("fixed")
    before = cache_fingerprint(srv)
    evs = failing_save(srv)
    assert evictions(evs) == []
    assert saves_ok(evs) == [False]
    assert cache_fingerprint(srv) == before
    assert srv.cache is not None
    assert [e.prompt.n_tokens for e in srv.cache.entries] == [25, 4]
    assert all(b.complete for e in srv.cache.entries for b in e.buffers())
    assert srv.accounted_bytes == 3 * U


@pytest.mark.parametrize("variant", ["baseline", "pr30137", "pr27451", "fixed"])
def test_without_fault_the_same_save_succeeds(variant: str) -> None:
    # The control: without the fault every design ends with [E2] (obsolete E1, evicted EB).
    srv = setup(variant)
    start = len(srv.heap.events)
    srv.request(B_PROMPT, n_predict=1, id_slot=1)
    evs = srv.heap.events[start:]
    assert evictions(evs) == [("obsolete", 25), ("make_room", 4)]
    assert srv.cache is not None
    assert [e.prompt.n_tokens for e in srv.cache.entries] == [45]
    assert srv.accounted_bytes == 3 * U
