"""Restore arithmetic and the invalidation that follows.

server-context.cpp, update_slots (SLOT_STATE_STARTED), as of #30137's merged diff:
``pos_next = n_past = lcp``; ``pos_min_thold = max(0, pos_next - n_swa - (has_new ? 0 : 1))``;
when the memory's ``pos_min >= thold``, scan the checkpoints newest to oldest for the first
with ``pos_max <= pos_next`` and (``pos_min < thold`` or ``pos_min == 0``); restoring it sets
``pos_next = min(pos_next, max(pos_min + 1, pos_max))`` and
``n_past = min(size_up_to_pos(pos_next), n_tokens)``; none found: full re-processing
(``pos_next = n_past = 0``). Then every checkpoint with ``pos_max > pos_next`` or
``n_tokens > n_prefix`` is erased; ``n_past == task.n_tokens`` gives ``n_past -= 1``.
"""

from __future__ import annotations

import pytest

from pcspec.model import events as ev
from pcspec.model.config import Config, MemoryKind
from pcspec.model.design import runs
from pcspec.model.designs import DESIGNS, Fixed
from pcspec.model.server import Server
from tests.support.common import DESIGN_NAMES, events, recurrent_config
from tests.support.nested_approx import approx_flat, flat


def ckpts(srv: Server, slot: int = 0) -> list[tuple[int, int, int]]:
    return [(c.n_tokens, c.pos_min, c.pos_max) for c in srv.slots[slot].prompt.checkpoints]


# -- recurrent -------------------------------------------------------------------------------

# A1 = tokens 1..40 with a user message starting at 20; n_batch 16, n_ubatch 4, so the tail
# break points are N-8 = 32 and N-4 = 36. Batches: [0,16) (memory empty: no checkpoint),
# [16,20) (stops at the user start 20 = last_user_pos; 16 is no user start, not near the end),
# [20,32) (starts at a user message: checkpoint n_tokens 20, memory pos [19,19]), [32,36) (not
# near the end: 40 < 36 + 4 is false), [36,40) (near the end: checkpoint 36, pos [35,35]).
# n_predict 2: the slot keeps 41 tokens, so the recurrent memory is at pos_min = pos_max = 40.
A1 = tuple(range(1, 41))


def recurrent_server(variant: str) -> Server:
    # One slot, no prompt cache: only the slot's own checkpoints matter here.
    cfg = recurrent_config(n_slots=1, n_ctx_slot=256, cache_ram=0)
    srv = Server(cfg, DESIGNS[variant])
    srv.request(A1, spans=(20,), n_predict=2)
    srv.run()
    assert ckpts(srv) == [(20, 19, 19), (36, 35, 35)]
    assert srv.ctx_tgt.seqs[0].pos_range() == (40, 40)
    return srv


@pytest.mark.parametrize("variant", DESIGN_NAMES)
def test_recurrent_restore_then_invalidate(variant: str) -> None:
    # New prompt: A1[:30] + 10 new tokens. lcp = 30 (f_keep 30/41 >= 0.5: same slot, no cache).
    # pos_next = 30, thold = 30 - 0 - 0 = 30, pos_min 40 >= 30 -> scan: c36 has pos_max 35 > 30;
    # c20 has pos_max 19 <= 30 and pos_min 19 < 30 -> restored:
    # pos_next = min(30, max(19 + 1, 19)) = 20, n_past = min(20, 20) = 20.
    # Invalidation: c36 (pos_max 35 > 20, and n_tokens 36 > n_prefix 30) erased; c20 survives.
    # Re-processing [20,32) [32,36) [36,40) creates a new c36 in the last batch.
    srv = recurrent_server(variant)
    start = len(srv.heap.events)
    srv.request(A1[:30] + tuple(range(500, 510)), n_predict=2)
    srv.run()
    assert srv.crash is None
    (restore,) = events(srv, ev.CkptRestore, start)
    assert (restore.n_tokens, restore.n_past) == (20, 20)
    (ps,) = events(srv, ev.PromptStart, start)
    assert (ps.n_prefix, ps.n_past, ps.reprocess) == (30, 20, None)
    assert [(e.n_tokens, e.reason) for e in events(srv, ev.CkptErase, start)] == [
        (36, "invalidated")
    ]
    assert [b.start for b in events(srv, ev.Batch, start)] == [20, 32, 36]
    assert ckpts(srv) == [(20, 19, 19), (36, 35, 35)]
    assert srv.slots[0].prompt.checkpoints[0].id == restore.ckpt  # c20 is the same object


@pytest.mark.parametrize("variant", DESIGN_NAMES)
def test_recurrent_restore_keeps_everything_at_or_below(variant: str) -> None:
    # New prompt: A1[:37] + 3 new tokens (40). pos_next = thold = 37; c36: pos_max 35 <= 37 and
    # pos_min 35 < 37 -> pos_next = min(37, max(36, 35)) = 36, n_past = min(36, 36) = 36.
    # Nothing invalidated (pos_max 19, 35 <= 36; n_tokens 20, 36 <= 37). The last batch [36,40)
    # then checkpoints at n_tokens 36 again: the C++ designs supersede the checkpoint this task
    # just restored with an identical one (reported in the #30137 review; #30683); fixed keeps it.
    srv = recurrent_server(variant)
    restored_id = srv.slots[0].prompt.checkpoints[1].id
    start = len(srv.heap.events)
    srv.request((*A1[:37], 500, 501, 502), n_predict=2)
    srv.run()
    (restore,) = events(srv, ev.CkptRestore, start)
    assert (restore.ckpt, restore.n_tokens, restore.n_past) == (restored_id, 36, 36)
    (ps,) = events(srv, ev.PromptStart, start)
    assert (ps.n_prefix, ps.n_past) == (37, 36)
    erased = [(e.n_tokens, e.reason) for e in events(srv, ev.CkptErase, start)]
    assert ckpts(srv) == [(20, 19, 19), (36, 35, 35)]
    if variant == "fixed":
        assert erased == []
        assert srv.slots[0].prompt.checkpoints[1].id == restored_id
    else:
        assert erased == [(36, "supersede")]
        assert srv.slots[0].prompt.checkpoints[1].id != restored_id


@pytest.mark.parametrize("variant", DESIGN_NAMES)
def test_recurrent_identical_prompt_restores(variant: str) -> None:
    # The same prompt again: lcp = 40 = task.n_tokens, so has_new_tokens is false and
    # thold = max(0, 40 - 0 - 1) = 39 (#24110); pos_min 40 >= 39 -> c36 restored:
    # pos_next = min(40, max(36, 35)) = 36, n_past = 36 (so the n_past -= 1 rule is not needed).
    srv = recurrent_server(variant)
    start = len(srv.heap.events)
    srv.request(A1, n_predict=2)
    srv.run()
    (restore,) = events(srv, ev.CkptRestore, start)
    assert (restore.n_tokens, restore.n_past) == (36, 36)
    (ps,) = events(srv, ev.PromptStart, start)
    assert (ps.n_prefix, ps.n_past) == (40, 36)
    assert [b.start for b in events(srv, ev.Batch, start)] == [36]


def test_full_attention_identical_prompt_n_past_minus_one() -> None:
    # [TAG_PROMPT_LOGITS]: plain KV, the same 20-token prompt: n_past = 20 = task.n_tokens ->
    # n_past = 19, and the one token is re-evaluated for its logits. No checkpoints (KV).
    cfg = Config(n_ctx_slot=64, n_batch=16, n_ubatch=4, memory=MemoryKind.KV, cache_ram=0)
    srv = Server(cfg, DESIGNS["baseline"])
    prompt = tuple(range(1, 21))
    srv.request(prompt, n_predict=1)
    srv.run()
    start = len(srv.heap.events)
    srv.request(prompt, n_predict=1)
    srv.run()
    (ps,) = events(srv, ev.PromptStart, start)
    assert (ps.n_prefix, ps.n_past, ps.restored) == (20, 19, None)
    assert [(b.start, b.n) for b in events(srv, ev.Batch, start)] == [(19, 1)]
    assert ckpts(srv) == []


# -- SWA ---------------------------------------------------------------------------------------

# The configuration of tests/data/real/03-eviction.log: iSWA with n_swa 32 and 256 SWA cells,
# -b 256 -ub 64 --ctx-checkpoints 8 -cms 64, one slot. A checkpoint's payload holds the last
# n_swa = 32 SWA cells: 16 + 32 * 512 = 16400 bytes here (the log prints 0.016 MiB).
#
# Prompt A (586 tokens; the log's task 97), tail break points 586-68 = 518 and 586-4 = 582:
# [0,256) (empty memory), [256,512) (not near the end: 586 < 512 + 64 is false),
# [512,518) (586 < 518 + 64 = 582 is false), [518,582) (near the end: checkpoint n_tokens 518
# with the memory's pos before the batch: SWA cells [518 - 256, 517] = [262, 517]),
# [582,586) (checkpoint 582, [326, 581]). n_predict 4 leaves 589 tokens (log: "n_tokens = 589").
SWA_CKPT = 16 + 32 * 512
COMMON = tuple(range(1, 10))  # the log's prompts share their first 9 tokens (lcp = 9)
A = COMMON + tuple(range(10, 587))
B = COMMON + tuple(range(700, 1317))
C = A + tuple(range(5000, 5018))


def logged(srv: Server, expected: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """The checkpoints the real log shows, as this design records them: the C++ records the
    SWA cache's pos_min; ``fixed`` (its point ``checkpoint_pos_min``) the first of the n_swa
    cells its payload holds."""
    if not runs(srv.design, "checkpoint_pos_min", Fixed):
        return expected
    return [(n, max(lo, hi - 32 + 1), hi) for n, lo, hi in expected]


def swa_server(variant: str, cache_ram: int) -> Server:
    cfg = Config(
        n_ctx_slot=4096,
        n_batch=256,
        n_ubatch=64,
        memory=MemoryKind.SWA,
        n_swa=32,
        swa_cells=256,
        cell_bytes=512,
        n_ctx_checkpoints=8,
        checkpoint_min_step=64,
        cache_ram=cache_ram,
    )
    srv = Server(cfg, DESIGNS[variant])
    srv.request(A, n_predict=4)
    srv.run()
    assert len(srv.slots[0].prompt.tokens) == 589
    assert ckpts(srv) == logged(srv, [(518, 262, 517), (582, 326, 581)])
    assert [c.size() for c in srv.slots[0].prompt.checkpoints] == [SWA_CKPT, SWA_CKPT]
    return srv


@pytest.mark.parametrize("variant", DESIGN_NAMES)
def test_swa_real_log_restore(variant: str) -> None:
    """tests/data/real/03-eviction.log lines 3437-3472 (tasks 106 and 115)."""
    srv = swa_server(variant, cache_ram=1 << 30)
    # Task 106: B (626 tokens, lcp 9 with A): LRU pick (f_sim 9/626 <= 0.1) saves A's 589
    # tokens with both checkpoints; B is processed from 0 and leaves 629 tokens.
    srv.request(B, n_predict=4)
    srv.run()
    assert len(srv.slots[0].prompt.tokens) == 629
    # Task 115: C = A + 18 tokens (604). Slot f_sim = 9/604 = 0.015 -> LRU, update the cache:
    # save the 629 tokens, then load: base f_keep = 9/629 = 0.014, f_sim = 9/604 = 0.015;
    # entry 589: lcp 586, f_keep 586/589 = 0.995, f_sim 586/604 = 0.970 -> "found better
    # prompt" (the log's numbers); entry 629 ties with the base.
    start = len(srv.heap.events)
    srv.request(C, n_predict=4)
    (scan,) = events(srv, ev.LoadScan, start)
    assert flat(scan.base) == approx_flat((9 / 629, 9 / 604))
    assert flat(scan.candidates) == approx_flat([(586 / 589, 586 / 604), (9 / 629, 9 / 604)])
    assert [round(x, 3) for x in scan.candidates[0]] == [0.995, 0.970]
    # A full-state load brings back only the last n_swa SWA cells ("cell_count = 32"):
    # 589 - 32 = 557 = pos_min.
    assert srv.ctx_tgt.seqs[0].pos_range() == (557, 588)
    srv.run()
    assert srv.crash is None
    # Prompt start: lcp = 586 = pos_next; thold = 586 - 32 = 554 (log: "against 554");
    # pos_min 557 >= 554 -> scan: c582 [326, 581]: 581 <= 586 and 326 < 554 -> restored;
    # pos_next = min(586, max(327, 581)) = 581, n_past = min(581, 582) = 581 (log: "n_past =
    # 581"): the token at pos_max is recomputed. Invalidation: c518 and c582 both survive
    # (pos_max 517, 581 <= 581; n_tokens 518, 582 <= 586).
    (restore,) = events(srv, ev.CkptRestore, start)
    assert (restore.n_tokens, restore.n_past) == (582, 581)
    (ps,) = events(srv, ev.PromptStart, start)
    assert (ps.n_prefix, ps.n_past) == (586, 581)
    assert events(srv, ev.CkptErase, start) == []
    # Batches [581, 600) and [600, 604) (tail break at 604 - 4): checkpoint n_tokens 581 with
    # SWA cells [550, 580] (the 32 restored cells minus the removed 581), appended after the
    # restored 582 ("created context checkpoint 3 of 8"), then 600 with [550, 599] ("4 of 8").
    assert [(b.start, b.n, b.checkpoint) for b in events(srv, ev.Batch, start)][:2] == [
        (581, 19, True),
        (600, 4, True),
    ]
    assert ckpts(srv) == logged(srv, [(518, 262, 517), (582, 326, 581), (581, 550, 580), (600, 550, 599)])
    assert len(srv.slots[0].prompt.tokens) == 607  # log: "stop processing: n_tokens = 607"
    # The loaded entry left the cache; the 629-token save is what remains (log: "cache state:
    # 1 prompts ... 629 tokens, checkpoints: 2").
    assert srv.cache is not None
    assert [(e.prompt.n_tokens, len(e.prompt.checkpoints)) for e in srv.cache.entries] == [(629, 2)]


@pytest.mark.parametrize("variant", DESIGN_NAMES)
def test_swa_rollback_within_cells_needs_no_restore(variant: str) -> None:
    # A[:560] + 40 new tokens on the same slot (f_keep 560/589 >= 0.5). The SWA cache still
    # holds cells [589 - 256, 588] = [333, 588]: pos_min 333 < thold 560 - 32 = 528, so the
    # memory serves position 560 itself: no restore, n_past = 560. Invalidation: c582 (pos_max
    # 581 > 560) erased, c518 survives. Then [560,596) checkpoints 560 with [333, 559] and
    # [596,600) checkpoints 596 with [596 - 256, 595] = [340, 595].
    srv = swa_server(variant, cache_ram=0)
    assert srv.ctx_tgt.seqs[0].pos_range() == (333, 588)
    start = len(srv.heap.events)
    srv.request(A[:560] + tuple(range(5000, 5040)), n_predict=4)
    srv.run()
    (ps,) = events(srv, ev.PromptStart, start)
    assert (ps.n_prefix, ps.n_past, ps.restored, ps.reprocess) == (560, 560, None, None)
    assert [(e.n_tokens, e.reason) for e in events(srv, ev.CkptErase, start)] == [
        (582, "invalidated")
    ]
    assert ckpts(srv) == logged(srv, [(518, 262, 517), (560, 333, 559), (596, 340, 595)])


@pytest.mark.parametrize("variant", DESIGN_NAMES)
def test_swa_no_usable_checkpoint_full_reprocess(variant: str) -> None:
    # A[:300] + 300 new tokens: pos_next 300, thold 268 <= pos_min 333; both checkpoints have
    # pos_max > 300 -> "forcing full prompt re-processing": pos_next = n_past = 0, and every
    # checkpoint with pos_max > 0 is invalidated.
    srv = swa_server(variant, cache_ram=0)
    start = len(srv.heap.events)
    srv.request(A[:300] + tuple(range(5000, 5300)), n_predict=4)
    srv.run()
    (ps,) = events(srv, ev.PromptStart, start)
    assert (ps.n_prefix, ps.n_past, ps.restored) == (300, 0, None)
    assert ps.reprocess is not None
    assert sorted(e.n_tokens for e in events(srv, ev.CkptErase, start)) == [518, 582]
    assert events(srv, ev.CkptRestore, start) == []
    # Re-processed from 0: 600 tokens -> tail checkpoints 600 - 68 = 532 and 596.
    assert [c[0] for c in ckpts(srv)] == [532, 596]
