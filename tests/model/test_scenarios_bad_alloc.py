"""An allocation failure while saving a prompt.

server-task.cpp, ``server_prompt_cache::alloc``: the two ``resize`` calls are in a ``try``;
on ``std::bad_alloc`` the cache sets ``limit_size = max(1, 0.4 * size())`` -- for good, it is
never raised again -- calls ``update()`` (which evicts down to the new limit) and returns null.
The ``states.push_back`` after the ``try`` is unguarded: a ``bad_alloc`` there escapes and the
server dies (baseline, pr30137). #27451 widens the ``try`` to the whole entry construction.
``fixed`` contains the failure and does not reduce the limit (LIVE-1).

Workload: one slot, full-attention KV memory, cell_bytes 10, --slot-prompt-similarity 0 (each
task saves the slot's previous prompt), unrelated 10-token prompts X(i) with n_predict 1: each
entry is 16 + 10 * 10 = 116 bytes. cache_ram = 10000 bytes.
"""

from __future__ import annotations

import pytest

from pcspec.model import events as ev
from pcspec.model.server import Server
from tests.support.common import ENTRY, X, cached, events, kv_server, run

LIMIT = 10_000


def server(variant: str) -> Server:
    return kv_server(variant, cache_ram=LIMIT)


# X1, X2, X3 leave [X1, X2] (232 bytes) in the cache. The save of X3 (during X4's request)
# fails to allocate its 116-byte state: the limit becomes max(1, int(0.4 * 232)) =
# int(92.8) = 92, and update() pops X1 (232 > 92) and X2 (116 > 92). From then on every
# 116-byte entry is "exceeds cache size limit": X4's save (during X5's request) is rejected.
@pytest.mark.parametrize("variant", ["baseline", "pr30137", "pr27451"])
def test_bad_alloc_shrinks_the_limit_for_good(variant: str) -> None:
    srv = server(variant)
    run(srv, X(1), X(2), X(3))
    assert cached(srv) == [100, 200]
    srv.inject("save.alloc.main")
    start = len(srv.heap.events)
    run(srv, X(4))
    assert srv.crash is None
    assert [(e.old, e.new) for e in events(srv, ev.LimitChange, start)] == [(LIMIT, 92)]
    assert [e.reason for e in events(srv, ev.EntryEvict, start)] == [
        "limit_bytes",
        "limit_bytes",
    ]
    assert srv.cache is not None
    assert srv.cache.limit_size == 92
    assert cached(srv) == []
    start = len(srv.heap.events)
    run(srv, X(5), X(6))
    assert [(e.size, e.limit) for e in events(srv, ev.SaveRejectOversize, start)] == [
        (ENTRY, 92),
        (ENTRY, 92),
    ]
    assert cached(srv) == []
    assert srv.cache.limit_size == 92


def test_bad_alloc_does_not_shrink_the_limit_in_fixed() -> None:
    srv = server("fixed")
    run(srv, X(1), X(2), X(3))
    srv.inject("save.alloc.main")
    start = len(srv.heap.events)
    run(srv, X(4), X(5))
    assert srv.crash is None
    assert events(srv, ev.LimitChange, start) == []
    assert events(srv, ev.EntryEvict, start) == []
    assert srv.cache is not None
    assert srv.cache.limit_size == LIMIT
    # X3's save failed and changed nothing; X4's save (during X5's request) succeeds.
    assert cached(srv) == [100, 200, 400]


@pytest.mark.parametrize("variant", ["baseline", "pr30137", "pr27451"])
def test_bad_alloc_on_empty_cache_disables_it(variant: str) -> None:
    # The first save (X1, during X2's request) fails with an empty cache: limit = max(1, 0) =
    # 1 byte, so every later entry is oversize: the cache is off for the rest of the process.
    srv = server(variant)
    run(srv, X(1))
    srv.inject("save.alloc.main")
    run(srv, X(2), X(3), X(4))
    assert srv.cache is not None
    assert srv.cache.limit_size == 1
    assert [e.limit for e in events(srv, ev.SaveRejectOversize)] == [1, 1]
    assert cached(srv) == []


@pytest.mark.parametrize("variant", ["baseline", "pr30137"])
def test_bad_alloc_in_push_back_is_uncaught(variant: str) -> None:
    # The entry construction (tokens clone + checkpoint list copy + push_back) is outside the
    # try: the exception escapes server_prompt_cache::alloc and the process dies.
    srv = server(variant)
    run(srv, X(1), X(2), X(3))
    srv.inject("save.alloc.entry")
    run(srv, X(4), crash_ok=True)
    assert srv.crash is not None
    assert srv.crash.where == "server_prompt_cache::alloc"
    assert "bad_alloc" in srv.crash.message


@pytest.mark.parametrize(("variant", "limit"), [("pr27451", 92), ("fixed", LIMIT)])
def test_bad_alloc_in_entry_construction_is_contained(variant: str, limit: int) -> None:
    # #27451 catches it around the whole construction (and still shrinks the limit, to 92 as
    # above); fixed catches it without touching the limit.
    srv = server(variant)
    run(srv, X(1), X(2), X(3))
    srv.inject("save.alloc.entry")
    run(srv, X(4))
    assert srv.crash is None
    assert srv.cache is not None
    assert srv.cache.limit_size == limit
    assert cached(srv) == ([] if variant == "pr27451" else [100, 200])
