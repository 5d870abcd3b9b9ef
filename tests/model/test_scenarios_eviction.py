"""FIFO eviction, the strict byte limit, the token limit.

server-task.cpp: ``alloc`` step 5 pops the front (oldest) entry while ``size() + new_size >
limit_size`` (only when there is a byte limit); ``update`` then pops the front while
``size() > limit_size`` and while ``n_tokens() > limit_tokens_cur``, where
``limit_tokens_cur = limit_size > 0 ? max(n_ctx, limit_size / size_per_token) : n_ctx``.
``--cache-ram -1`` means no byte limit, but the token limit (n_ctx, all slots) still applies;
``--cache-ram 0`` disables the cache.

Workload: one slot, full-attention KV memory (no checkpoints), cell_bytes 10,
--slot-prompt-similarity 0 (every task is an LRU pick, so every task first saves the slot's
previous prompt). ``X(i)`` are unrelated 10-token prompts run with n_predict 1, so the slot
holds exactly the prompt and each saved entry is one full KV state: 16 + 10 * 10 = 116 bytes.
Running X(1) .. X(k) saves X(1) .. X(k-1).
"""

from __future__ import annotations

import pytest

from pcspec.model import events as ev
from tests.support.common import DESIGN_NAMES, ENTRY, X, cached, events, kv_server, run


@pytest.mark.parametrize("variant", DESIGN_NAMES)
def test_fifo_make_room(variant: str) -> None:
    # Limit 2 entries (232 bytes): saving X3, X4, X5 each pops the then-oldest entry.
    srv = kv_server(variant, cache_ram=2 * ENTRY)
    run(srv, *(X(i) for i in range(1, 7)))
    evicted = [(e.reason, e.entry) for e in events(srv, ev.EntryEvict)]
    inserted = [e.entry for e in events(srv, ev.EntryInsert)]
    assert evicted == [
        ("make_room", inserted[0]),
        ("make_room", inserted[1]),
        ("make_room", inserted[2]),
    ]
    assert cached(srv) == [400, 500]
    assert srv.accounted_bytes == 2 * ENTRY


@pytest.mark.parametrize("variant", DESIGN_NAMES)
def test_make_room_pops_oldest_until_it_fits(variant: str) -> None:
    # [X1, X2, X3] = 348 bytes at limit 348; then a 30-token prompt X(4, 30) is saved: 16 +
    # 300 = 316 bytes. 348 + 316 = 664 > 348 -> pop X1: 232 + 316 = 548 > 348 -> pop X2:
    # 116 + 316 = 432 > 348 -> pop X3: 316 <= 348 fits. Oldest first, all three.
    srv = kv_server(variant, cache_ram=3 * ENTRY)
    run(srv, X(1), X(2), X(3), X(4, 30), X(5))
    assert [e.reason for e in events(srv, ev.EntryEvict)] == ["make_room"] * 3
    assert cached(srv) == [400]
    assert srv.accounted_bytes == 16 + 30 * 10


@pytest.mark.parametrize("variant", DESIGN_NAMES)
def test_byte_limit_is_strict(variant: str) -> None:
    # Exactly at the limit is allowed (348 + 0 <= 348: no eviction while saving X3) ...
    srv = kv_server(variant, cache_ram=3 * ENTRY)
    run(srv, X(1), X(2), X(3), X(4))
    assert events(srv, ev.EntryEvict) == []
    assert cached(srv) == [100, 200, 300]
    assert srv.accounted_bytes == 3 * ENTRY
    # ... one byte less, and the third save makes room.
    srv = kv_server(variant, cache_ram=3 * ENTRY - 1)
    run(srv, X(1), X(2), X(3), X(4))
    assert [e.reason for e in events(srv, ev.EntryEvict)] == ["make_room"]
    assert cached(srv) == [200, 300]


@pytest.mark.parametrize("variant", DESIGN_NAMES)
def test_oversize_entry_skipped_without_eviction(variant: str) -> None:
    # Limit 115 < 116: every entry exceeds the limit on its own: skipped, nothing evicted.
    srv = kv_server(variant, cache_ram=ENTRY - 1)
    run(srv, X(1), X(2), X(3))
    assert [e.size for e in events(srv, ev.SaveRejectOversize)] == [ENTRY, ENTRY]
    assert events(srv, ev.EntryEvict) == []
    assert cached(srv) == []


@pytest.mark.parametrize("variant", DESIGN_NAMES)
def test_token_limit_applies_without_byte_limit(variant: str) -> None:
    # --cache-ram -1: limit_size = 0 (no byte limit, no make room), limit_tokens = n_ctx = 32.
    # Saves of X1..X5 (10 tokens each): after the 4th save the cache holds 40 > 32 tokens ->
    # update() pops X1; after the 5th, X2. Bytes are unbounded (4 * 116 > any "limit").
    srv = kv_server(variant, cache_ram=-1, n_ctx_slot=32)
    assert srv.cache is not None
    assert (srv.cache.limit_size, srv.cache.limit_tokens) == (0, 32)
    run(srv, *(X(i) for i in range(1, 7)))
    assert [(e.reason, e.n_tokens) for e in events(srv, ev.EntryEvict)] == [
        ("limit_tokens", 10),
        ("limit_tokens", 10),
    ]
    assert cached(srv) == [300, 400, 500]
    assert srv.cache.n_tokens() == 30


@pytest.mark.parametrize("variant", DESIGN_NAMES)
def test_byte_limit_raises_the_token_cap(variant: str) -> None:
    # With a byte limit the token cap is max(n_ctx, limit_size / size_per_token): 5 entries =
    # 580 bytes / 50 tokens = 11.6 bytes per token -> int(10000 / 11.6) = 862 tokens >> 32 =
    # n_ctx, so 50 tokens stay.
    srv = kv_server(variant, cache_ram=10_000, n_ctx_slot=32)
    run(srv, *(X(i) for i in range(1, 7)))
    assert events(srv, ev.EntryEvict) == []
    assert cached(srv) == [100, 200, 300, 400, 500]
    assert srv.cache is not None
    assert srv.cache.n_tokens() == 50


def test_cache_ram_zero_disables_the_cache() -> None:
    srv = kv_server("baseline", cache_ram=0)
    run(srv, X(1), X(2))
    assert srv.cache is None
    assert not srv.cfg.idle_caching
    assert srv.accounted_bytes == 0
    assert events(srv, ev.SaveBegin) == []
