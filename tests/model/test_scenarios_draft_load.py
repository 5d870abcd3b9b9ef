"""The draft-state load fails after the target load succeeded.

server-task.cpp, ``server_prompt_cache::load`` on the chosen entry:
``set_data_ext(ctx_tgt, main)``; on success ``main.clear(); main.shrink_to_fit()``; then, when
``drft`` is non-empty, ``set_data_ext(ctx_dft, drft)``; a mismatch returns false -- with the
entry still in the cache and its ``main`` already emptied. The caller (get_available_slot)
then runs ``prompt_clear()`` on the slot. A later load of that entry calls
``set_data_ext(ctx_tgt, <0 bytes>)``, which returns 0: ``0 == main.size()`` passes as success,
so the slot takes the entry's tokens while its target memory was never restored
(server-task.cpp:1832-1856 of the October tree). What follows depends on what the target
memory holds: another prompt's state (a silent tokens/memory desync: STATE-1) or nothing (the
``pos_min == -1, but n_past > 0`` GGML_ABORT). ``fixed`` drops the entry on a failed load.

Workload: two slots, full-attention KV target (cell_bytes 10) and a KV draft (4 bytes per
cell), idle-slot caching off, n_predict 1 (a slot holds exactly its prompt).
Entry sizes: main = 16 + 10 n, drft = 16 + 4 n; a 20-token entry is 216 + 96 bytes.

1. A (tokens 1..20) pinned to slot 0 (an empty pinned slot does not touch the cache).
2. Z (20 unrelated tokens) pinned to slot 0: f_sim 0 -> f_keep 0 < 0.5 -> save A -> E(A);
   the scan skips E(A) (lcp 0).
3. ``load.write.dft`` armed; B = A[:6] + 14 new tokens pinned to slot 0: f_sim 0 -> save Z ->
   E(Z); scan: base (0, 0), E(A) (6/20, 6/20) = (0.3, 0.3) wins, E(Z) is below the floor.
   Target load of E(A) succeeds, E(A).main is released, the draft load fails; the slot is
   cleared and B is processed from 0 (the slot then holds B).
"""

from __future__ import annotations

import pytest

from pcspec.model import events as ev
from pcspec.model.config import Config, MemoryKind
from pcspec.model.designs import DESIGNS
from pcspec.model.server import Server
from tests.support.common import CPP_DESIGNS, events
from tests.support.nested_approx import approx_flat, flat

A = tuple(range(1, 21))
Z = tuple(range(500, 520))
B = A[:6] + tuple(range(600, 614))
MAIN_20 = 16 + 10 * 20
DRFT_20 = 16 + 4 * 20


def after_failed_draft_load(variant: str) -> Server:
    cfg = Config(
        n_slots=2,
        n_ctx_slot=256,
        n_batch=16,
        n_ubatch=4,
        memory=MemoryKind.KV,
        cell_bytes=10,
        has_draft=True,
        draft_memory=MemoryKind.KV,
        draft_cell_bytes=4,
        cache_idle_slots=False,
        cache_ram=100_000,
    )
    srv = Server(cfg, DESIGNS[variant])
    srv.request(A, n_predict=1, id_slot=0)
    srv.run()
    srv.request(Z, n_predict=1, id_slot=0)
    srv.run()
    srv.inject("load.write.dft")
    start = len(srv.heap.events)
    srv.request(B, n_predict=1, id_slot=0)
    (scan,) = events(srv, ev.LoadScan, start)
    assert flat(scan.candidates) == approx_flat([(0.3, 0.3), (0.0, 0.0)])
    assert scan.chosen is not None
    assert [e.ctx for e in events(srv, ev.StateWriteFailed, start)] == ["dft"]
    assert [e.slot for e in events(srv, ev.PromptClear, start)] == [0]
    srv.run()
    assert srv.crash is None
    assert srv.slots[0].prompt.tokens == B
    return srv


@pytest.mark.parametrize("variant", CPP_DESIGNS)
def test_failed_draft_load_leaves_entry_with_empty_main(variant: str) -> None:
    srv = after_failed_draft_load(variant)
    assert srv.cache is not None
    e_a, e_z = srv.cache.entries
    assert (e_a.prompt.tokens, e_z.prompt.tokens) == (A, Z)
    assert e_a.main is None  # main.clear(): the entry changed while in the cache (IMM-2)
    assert e_a.drft is not None
    assert e_a.drft.size == DRFT_20
    # E(A) now counts only its draft state: 96 + E(Z) 216 + 96.
    assert srv.accounted_bytes == DRFT_20 + MAIN_20 + DRFT_20


def test_fixed_drops_the_entry_on_failed_load() -> None:
    srv = after_failed_draft_load("fixed")
    assert srv.cache is not None
    assert [e.prompt.tokens for e in srv.cache.entries] == [Z]
    assert [e.n_tokens for e in events(srv, ev.EntryEvict) if e.reason == "load_failed"] == [
        20
    ]
    assert srv.accounted_bytes == MAIN_20 + DRFT_20


@pytest.mark.parametrize("variant", CPP_DESIGNS)
def test_reloading_emptied_entry_desyncs_a_busy_slot(variant: str) -> None:
    # A2 = A + 10 tokens pinned to slot 0 (holding B): lcp 6 -> f_sim 6/30 = 0.2 > 0.1 and
    # f_keep 6/20 = 0.3 < 0.5 -> save B -> E(B); scan: base (0.3, 0.2), E(A) (1.0, 20/30)
    # wins. set_data_ext(main, 0 bytes) returns 0 == 0: "success"; the draft load works. The
    # slot now claims A's 20 tokens; the draft memory is A's state, the target memory is still
    # B's. Prompt start: lcp(A, A2) = 20, KV pos_min 0: nothing notices; the target keeps
    # B[:20] and appends A2[20:]: a silent desync, no crash.
    srv = after_failed_draft_load(variant)
    start = len(srv.heap.events)
    srv.request(A + tuple(range(700, 710)), n_predict=1, id_slot=0)
    (scan,) = events(srv, ev.LoadScan, start)
    assert flat(scan.base) == approx_flat((0.3, 0.2))
    assert flat(scan.candidates) == approx_flat([(1.0, 20 / 30), (0.0, 0.0), (0.3, 0.2)])
    assert [e.reason for e in events(srv, ev.EntryEvict, start)] == ["loaded"]
    assert srv.slots[0].prompt.tokens == A
    assert srv.ctx_tgt.seqs[0].attn == B  # never restored
    assert srv.ctx_dft is not None
    assert srv.ctx_dft.seqs[0].is_state_of(A)
    srv.run()
    assert srv.crash is None
    (ps,) = events(srv, ev.PromptStart, start)
    assert (ps.n_prefix, ps.n_past) == (20, 20)
    tokens = srv.slots[0].prompt.tokens
    assert tokens[:30] == A + tuple(range(700, 710))
    assert not srv.ctx_tgt.seqs[0].is_state_of(tokens)
    assert srv.ctx_tgt.seqs[0].attn[:20] == B
    assert srv.ctx_dft.seqs[0].is_state_of(tokens)


@pytest.mark.parametrize("variant", CPP_DESIGNS)
def test_reloading_emptied_entry_into_empty_slot_aborts(variant: str) -> None:
    # A3 = A + 60 tokens, unpinned: slot 0 (B) has f_sim 6/80 = 0.075 <= 0.1, slot 1 is empty
    # -> LRU picks slot 1 (never used); base (-1, 0); E(A) (1.0, 0.25) wins; the 0-byte target
    # "load" succeeds, the draft load works: slot 1 claims 20 tokens with an empty target
    # sequence. Prompt start: n_past = 20 > 0 and pos_min == -1 -> GGML_ABORT.
    srv = after_failed_draft_load(variant)
    start = len(srv.heap.events)
    srv.request(A + tuple(range(700, 760)), n_predict=1)
    (select,) = events(srv, ev.Select, start)
    assert (select.slot, select.how) == (1, "lru")
    (scan,) = events(srv, ev.LoadScan, start)
    assert scan.base == (-1.0, 0.0)
    assert flat(scan.candidates) == approx_flat([(1.0, 0.25), (0.0, 0.0)])
    assert srv.slots[1].prompt.tokens == A
    assert srv.ctx_tgt.seqs[1].pos_range() == (-1, -1)
    srv.run()
    assert srv.crash is not None
    assert srv.crash.where == "update_slots"
    assert "pos_min == -1" in srv.crash.message


@pytest.mark.parametrize("pinned", [True, False])
def test_fixed_later_requests_stay_consistent(pinned: bool) -> None:
    # The same two follow-ups under fixed: E(A) is gone, nothing is loaded (the pinned one
    # keeps slot 0's B and reuses its 6 tokens; the unpinned one starts slot 1 from 0).
    srv = after_failed_draft_load("fixed")
    start = len(srv.heap.events)
    if pinned:
        srv.request(A + tuple(range(700, 710)), n_predict=1, id_slot=0)
    else:
        srv.request(A + tuple(range(700, 760)), n_predict=1)
    srv.run()
    assert srv.crash is None
    assert [s.chosen for s in events(srv, ev.LoadScan, start)] == [None]
    (ps,) = events(srv, ev.PromptStart, start)
    assert (ps.slot, ps.n_past) == ((0, 6) if pinned else (1, 0))
    slot = srv.slots[ps.slot]
    assert srv.ctx_tgt.seqs[slot.id].is_state_of(slot.prompt.tokens)
    assert srv.ctx_dft is not None
    assert srv.ctx_dft.seqs[slot.id].is_state_of(slot.prompt.tokens)
