"""A task pinned to a busy slot: the C++ runs the cache save/load on that slot before the task
is deferred (server-context.cpp:1528-1641; docs/FINDINGS.md, F1); `fixed` leaves the busy slot
alone."""

from __future__ import annotations

import pytest

from pcspec.model.config import Config, MemoryKind
from pcspec.model.designs import DESIGNS
from pcspec.model.server import Server

CFG = Config(memory=MemoryKind.RECURRENT, n_ctx_slot=64, n_batch=4, n_ubatch=2, n_ctx_checkpoints=3,
             checkpoint_min_step=2, rs_bytes=64, cache_ram=-1, cache_idle_slots=False)


@pytest.mark.parametrize("variant", list(DESIGNS))
def test_pinned_task_on_busy_slot(variant: str) -> None:
    srv = Server(CFG, DESIGNS[variant])
    srv.request(tuple(range(1, 30)), spans=(8,), id_slot=0)
    srv.step()  # prompt start and the first batch, one pass: slot 0 is mid-prompt with 4 of 29 tokens
    busy = srv.slots[0]
    assert busy.is_processing and busy.prompt.n_tokens == 4
    start = len(srv.heap.events)
    srv.request((50, 51, 52), id_slot=0)
    kinds = [e.kind for e in srv.heap.events[start:]]
    assert "deferred" in kinds
    assert srv.cache is not None
    if variant == "fixed":
        assert "save_begin" not in kinds and not srv.cache.entries
    else:
        # The half-processed prompt was saved as if it were the slot's content.
        assert "save_begin" in kinds
        assert [e.prompt.n_tokens for e in srv.cache.entries] == [4]
    srv.run()
    assert srv.crash is None
