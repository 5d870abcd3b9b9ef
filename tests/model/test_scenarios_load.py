"""Which cache entry ``server_prompt_cache::load`` picks.

server-task.cpp, ``load``: the baseline is the slot's own ``f_keep = lcp0 / len(slot)`` (or
-1 for an empty slot) and ``f_sim = lcp0 / len(new)``; entries are scanned front to back, an
entry with ``f_keep < 0.25`` is skipped ("don't trash large prompts"), and an entry becomes the
best only when it beats the running best *strictly on both* f_keep and f_sim. The chosen
entry is handed over (tokens and checkpoints) and erased from the cache.

The prompts are plain full-attention (KV) prompts with n_predict 1, so a slot holds exactly
its prompt and nothing checkpoints; the load rules do not depend on the memory kind.
"""

from __future__ import annotations

import pytest

from pcspec.model import events as ev
from pcspec.model.config import Config, MemoryKind
from pcspec.model.designs import DESIGNS
from pcspec.model.server import Server
from tests.support.common import DESIGN_NAMES, events
from tests.support.nested_approx import approx_flat, flat

N = tuple(range(1, 101))  # the new prompt, 100 tokens


def junk(tag: int, n: int) -> tuple[int, ...]:
    return tuple(range(10_000 * tag, 10_000 * tag + n))


# Entries, each sharing a prefix with N; (lcp with N, length) -> (f_keep, f_sim) against N:
E1 = N[:30] + junk(1, 90)  # (30, 120) -> (0.25, 0.30): exactly the floor; better f_sim only
E2 = N[:20] + junk(2, 20)  # (20, 40) -> (0.50, 0.20): better f_keep, f_sim only equal
E3 = N[:90] + junk(3, 310)  # (90, 400) -> (0.225, 0.90): below the 0.25 floor: skipped
E4 = N[:45] + junk(4, 45)  # (45, 90) -> (0.50, 0.45): strictly better on both: chosen
E5 = N[:60] + junk(5, 65)  # (60, 125) -> (0.48, 0.60): beats the base, not the running best
S = N[:20] + junk(6, 30)  # the slot: (20, 50) -> base (0.40, 0.20)


@pytest.mark.parametrize("variant", DESIGN_NAMES)
def test_load_needs_strict_improvement_on_both(variant: str) -> None:
    # One slot, --slot-prompt-similarity 0: every task is an LRU pick, so every task first
    # saves the slot and then scans the cache. Built in the order E1..E5, S, N; no earlier scan
    # loads anything (hand check, base = the slot's previous prompt):
    #   E2 vs slot E1: base (20/120, 20/40); E1 ties.
    #   E3 vs slot E2: base (0.5, 0.05); E1 (0.25, 0.075) has a lower f_keep.
    #   E4 vs slot E3: base (0.1125, 0.5); E1 (0.25, 0.33), E2 (0.5, 0.22): f_sim not better.
    #   E5 vs slot E4: base (0.5, 0.36); E1 (0.25, 0.24), E2 (0.5, 0.16): no; E3 60/400 < 0.25.
    #   S vs slot E5: base (0.16, 0.4); E1 20/120, E3, E4 20/90, E5 below the floor; E2
    #     (0.5, 0.4): f_sim only equal.
    cfg = Config(
        n_ctx_slot=1024,
        n_batch=64,
        n_ubatch=16,
        memory=MemoryKind.KV,
        cell_bytes=1,
        slot_prompt_similarity=0.0,
    )
    srv = Server(cfg, DESIGNS[variant])
    for p in (E1, E2, E3, E4, E5, S):
        srv.request(p, n_predict=1)
        srv.run()
    assert srv.cache is not None
    assert [e.prompt.tokens for e in srv.cache.entries] == [E1, E2, E3, E4, E5]
    assert [s.chosen for s in events(srv, ev.LoadScan)] == [None] * 6
    e4_id = srv.cache.entries[3].id

    start = len(srv.heap.events)
    srv.request(N, n_predict=1)
    # The save of S appends it; the scan runs over [E1, E2, E3, E4, E5, S].
    (scan,) = events(srv, ev.LoadScan, start)
    assert flat(scan.base) == approx_flat((0.4, 0.2))
    assert flat(scan.candidates) == approx_flat(
        [(0.25, 0.3), (0.5, 0.2), (0.225, 0.9), (0.5, 0.45), (0.48, 0.6), (0.4, 0.2)]
    )
    assert scan.chosen == e4_id
    # The loaded entry leaves the cache; the slot now holds its tokens.
    assert [(e.entry, e.reason) for e in events(srv, ev.EntryEvict, start)] == [
        (e4_id, "loaded")
    ]
    assert [e.prompt.tokens for e in srv.cache.entries] == [E1, E2, E3, E5, S]
    assert srv.slots[0].prompt.tokens == E4
    srv.run()
    (ps,) = events(srv, ev.PromptStart, start)
    assert (ps.n_prefix, ps.n_past) == (45, 45)
    assert srv.slots[0].prompt.tokens == N


def empty_slot_server(variant: str, entry: tuple[int, ...]) -> tuple[Server, int]:
    """Two slots, unified KV: idle slots are saved *and cleared* when another task launches.
    ``entry`` runs first (on slot 1: both LRU times are -1 and ties go to the last slot); a
    filler then runs on slot 0 (LRU: -1 < 1) and its launch saves slot 1 and clears it. The
    request for N finds slot 0 unrelated (f_sim 0) and slot 1 empty: LRU picks slot 1, whose
    load baseline is f_keep = -1."""
    cfg = Config(
        n_slots=2, kv_unified=True, n_ctx_slot=256, n_batch=64, n_ubatch=16, memory=MemoryKind.KV
    )
    srv = Server(cfg, DESIGNS[variant])
    srv.request(entry, n_predict=1)
    srv.run()
    srv.request(junk(9, 4), n_predict=1)
    srv.run()
    assert srv.cache is not None
    assert [e.prompt.tokens for e in srv.cache.entries] == [entry]
    assert srv.slots[1].prompt.tokens == ()
    start = len(srv.heap.events)
    srv.request(N, n_predict=1)
    (select,) = events(srv, ev.Select, start)
    assert (select.slot, select.how) == (1, "lru")
    return srv, start


@pytest.mark.parametrize("variant", DESIGN_NAMES)
def test_empty_slot_baseline_is_minus_one(variant: str) -> None:
    # The entry shares 5 of N's 100 tokens: f_sim 0.05 (below the 0.1 slot-similarity
    # threshold), f_keep 5/20 = 0.25 (at the floor). Against an empty slot's base (-1, 0) it
    # is strictly better on both: loaded.
    entry = N[:5] + junk(1, 15)
    srv, start = empty_slot_server(variant, entry)
    (scan,) = events(srv, ev.LoadScan, start)
    assert scan.base == (-1.0, 0.0)
    assert flat(scan.candidates) == approx_flat([(0.25, 0.05)])
    assert scan.chosen is not None
    assert srv.slots[1].prompt.tokens == entry
    srv.run()
    (ps,) = events(srv, ev.PromptStart, start)
    assert (ps.slot, ps.n_prefix, ps.n_past) == (1, 5, 5)


@pytest.mark.parametrize("variant", DESIGN_NAMES)
def test_load_floor_skips_entry_for_empty_slot(variant: str) -> None:
    # The same entry one token longer: f_keep 5/21 = 0.238 < 0.25 -> skipped even for an empty
    # slot; the prompt is processed from scratch and the entry stays in the cache.
    entry = N[:5] + junk(1, 16)
    srv, start = empty_slot_server(variant, entry)
    (scan,) = events(srv, ev.LoadScan, start)
    assert scan.base == (-1.0, 0.0)
    assert flat(scan.candidates) == approx_flat([(5 / 21, 0.05)])
    assert scan.chosen is None
    assert srv.slots[1].prompt.tokens == ()
    assert srv.cache is not None
    assert entry in [e.prompt.tokens for e in srv.cache.entries]
    srv.run()
    (ps,) = events(srv, ev.PromptStart, start)
    assert (ps.slot, ps.n_prefix, ps.n_past) == (1, 0, 0)
