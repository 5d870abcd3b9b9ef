"""Regression scenarios for the points where the model departed from the C++ source. Each
test names the point and the source lines it follows (the October tree 0c1e570; docs/SOURCES.md)."""

from __future__ import annotations

import struct
from dataclasses import replace
from pathlib import Path

import pytest

from pcspec.core.trace import load, parse
from pcspec.model import events as ev
from pcspec.model.config import Config, MemoryKind
from pcspec.model.context import Context
from pcspec.model.designs import DESIGNS, RULE_SET_MODELS
from pcspec.model.errors import PcspecError
from pcspec.model.memory import FULL, PARTIAL_ONLY, SeqMemory, StateImage
from pcspec.model.server import Server
from pcspec.model.slot import SlotState
from pcspec.model.slot_files import decode_content, encode_content
from pcspec.model.slotfile import read_slot_file
from pcspec.model.swa_ring import split_equal
from pcspec.properties.catalogue import get_property
from pcspec.properties.judge import replay
from tests.support.paths import DATA

BASELINE, PR30137, PR27451, FIXED = (DESIGNS[name] for name in ("baseline", "pr30137", "pr27451", "fixed"))
OCTOBER = RULE_SET_MODELS["october"]


def kinds(srv: Server, since: int = 0) -> list[str]:
    return [e.kind for e in srv.heap.events[since:]]


def recurrent(**kw: object) -> Config:
    base: dict[str, object] = dict(
        memory=MemoryKind.RECURRENT, n_ctx_slot=64, n_batch=4, n_ubatch=2, n_ctx_checkpoints=3,
        checkpoint_min_step=2, rs_bytes=64, cache_ram=-1, cache_idle_slots=False,
    )
    base.update(kw)
    return Config(**base)  # type: ignore[arg-type]


# -- 1. prompt start and the first batch are one pass of update_slots (3114-3616) -------------


def test_prompt_start_and_first_batch_are_one_step() -> None:
    srv = Server(recurrent(), FIXED)
    srv.request(tuple(range(1, 30)), spans=(8,))
    assert srv.slots[0].state == SlotState.STARTED
    start = len(srv.heap.events)
    srv.step()
    assert kinds(srv, start).count("prompt_start") == 1 and kinds(srv, start).count("batch") == 1
    assert srv.slots[0].state == SlotState.PROCESSING_PROMPT and srv.slots[0].prompt.n_tokens == 4


# -- 3. a pinned id beyond the slot count: the scan compares the raw id (1546) -----------------


@pytest.mark.parametrize("pin", [0, 2])
def test_pin_beyond_slot_count_always_updates_the_cache(pin: int) -> None:
    cfg = Config(n_slots=1, n_ctx_slot=64, n_batch=16, n_ubatch=4, cache_ram=-1, cache_idle_slots=False)
    srv = Server(cfg, BASELINE)
    prompt = tuple(range(1, 20))
    srv.request(prompt, n_predict=1)
    srv.run()
    start = len(srv.heap.events)
    srv.request(prompt, n_predict=1, id_slot=pin)
    select = next(e for e in srv.heap.events[start:] if isinstance(e, ev.Select))
    assert select.slot == 0  # get_slot_by_id wraps (1501-1512)
    # id 0 is scanned: f_sim 1.0, f_keep 1.0, no cache update; id 2 matches no slot: f_keep 0.
    assert ("save_begin" in kinds(srv, start)) == (pin == 2)


# -- 4. one deferred task re-queued per slot release (server-queue.cpp:90-113) ---------------


def test_one_deferred_task_per_release() -> None:
    srv = Server(Config(n_slots=1, n_ctx_slot=64, n_batch=16, n_ubatch=4, cache_ram=-1), FIXED)
    srv.request(tuple(range(1, 10)), n_predict=2)
    srv.request(tuple(range(20, 30)), n_predict=2)  # no free slot: deferred
    srv.request(tuple(range(40, 50)), n_predict=2)  # deferred too
    assert len(srv.deferred) == 2
    while srv.slots[0].task is not None and srv.slots[0].task.id == 0:
        srv.step()
    # The release re-queued exactly one task, which took the slot; the other still waits.
    assert len(srv.deferred) == 1 and srv.slots[0].task is not None and srv.slots[0].task.id == 1
    srv.run()
    assert not srv.deferred and kinds(srv).count("requeued") == 2


def test_requeue_prefers_the_task_pinned_to_the_released_slot() -> None:
    srv = Server(Config(n_slots=2, n_ctx_slot=64, n_batch=16, n_ubatch=4, cache_ram=-1), FIXED)
    srv.request(tuple(range(1, 10)), n_predict=2, id_slot=0)
    srv.request(tuple(range(60, 70)), n_predict=6, id_slot=1)
    srv.request(tuple(range(20, 30)), n_predict=1, id_slot=1)  # waits for slot 1
    srv.request(tuple(range(40, 50)), n_predict=1, id_slot=0)  # waits for slot 0
    while srv.slots[0].task is not None and srv.slots[0].task.id == 0:
        srv.step()
    assert srv.slots[0].task is not None and srv.slots[0].task.id == 3


# -- 5. bad_alloc while creating a checkpoint: iterate() catches it per slot (2711-2721) -------


@pytest.mark.parametrize("variant", ["baseline", "pr27451", "pr30137", "fixed"])
def test_bad_alloc_in_create_checkpoint_of_the_only_slot_in_the_batch(variant: str) -> None:
    """The slot is released before ``slot_batched = &slot`` (3619-3621): its tokens are the
    batch's only ones and ``GGML_ASSERT(batch.slot_batched || batch.size() == 0)`` (2826)
    aborts. Seen on every design's build (docs/FINDINGS.md, F6)."""
    srv = Server(recurrent(n_batch=8, n_ubatch=4), DESIGNS[variant])
    srv.heap.faults.arm("ckpt.alloc")
    srv.request(tuple(range(1, 30)), spans=(8,), n_predict=2)
    srv.run()
    if variant == "fixed":  # contained: the checkpoint is skipped, the task completes
        assert srv.crash is None
        release = [e for e in srv.heap.events if isinstance(e, ev.Release)]
        assert release[0].error is None
        return
    assert srv.crash is not None and srv.crash.where == "update_slots"
    assert "GGML_ASSERT(batch.slot_batched || batch.size() == 0)" in srv.crash.message


@pytest.mark.parametrize("variant", ["baseline", "pr27451", "pr30137"])
def test_bad_alloc_in_create_checkpoint_beside_a_generating_slot(variant: str) -> None:
    """With a generating slot in the batch (it set ``slot_batched``, 2969-2971) the server goes
    on: the failed slot's tokens are decoded with the others, and baseline and #27451 keep the
    checkpoint they appended before the fill (2333), empty."""
    srv = Server(recurrent(n_slots=2, n_batch=8, n_ubatch=4), DESIGNS[variant])
    srv.request(tuple(range(100, 104)), n_predict=40, id_slot=1)
    while srv.slots[1].state != SlotState.GENERATING:
        srv.step()
    srv.heap.faults.arm("ckpt.alloc")
    srv.request(tuple(range(1, 30)), spans=(8,), n_predict=2, id_slot=0)
    srv.run()
    assert srv.crash is None
    slot = srv.slots[0]
    release = next(e for e in srv.heap.events if isinstance(e, ev.Release) and e.slot == 0)
    assert release.error and "bad_alloc" in release.error
    # The batch's tokens were decoded with the others: bookkeeping and memory agree.
    assert srv.ctx_tgt.seqs[0].is_state_of(slot.prompt.tokens)
    if variant in ("baseline", "pr27451"):  # emplace_back before the fill (2333)
        assert len(slot.prompt.checkpoints) == 1 and slot.prompt.checkpoints[0].tgt is None
    else:  # #30137: built off the list, appended only when filled
        assert slot.prompt.checkpoints == []


# -- 6. /slots actions on a busy slot are deferred (2526-2663) ----------------------------------


@pytest.mark.parametrize("action", ["save", "restore", "erase"])
def test_slot_action_on_busy_slot_is_deferred(action: str) -> None:
    srv = Server(Config(n_slots=1, n_ctx_slot=64, n_batch=4, n_ubatch=2, cache_ram=-1), PR30137)
    srv.request(tuple(range(1, 20)), n_predict=1)
    srv.run()
    srv.slot_action("save", 0, "f.bin")
    srv.request(tuple(range(1, 30)), n_predict=2)
    srv.step()
    assert srv.slots[0].is_processing
    start = len(srv.heap.events)
    srv.slot_action(action, 0, "f.bin")
    assert kinds(srv, start)[-1] == "deferred"
    srv.run()
    done = {"save": "file_write", "restore": "file_restore", "erase": "prompt_clear"}[action]
    after = kinds(srv, start)
    assert after.index("release") < after.index(done)


# -- 7. context shift (2886-2950, 1166-1170) ----------------------------------------------------


def test_context_shift_keeps_bos_and_clamps() -> None:
    cfg = Config(n_ctx_slot=16, n_batch=16, n_ubatch=4, cache_ram=-1, ctx_shift=True, memory=MemoryKind.KV)
    srv = Server(cfg, FIXED)
    prompt = tuple(range(1, 13))
    srv.request(prompt, n_predict=8)
    srv.run()
    shift = next(e for e in srv.heap.events if isinstance(e, ev.ContextShift))
    assert shift.n_keep == 1 and shift.n_discard == (15 - 1) // 2
    slot = srv.slots[0]
    assert slot.prompt.tokens[0] == 1 and slot.prompt.tokens[1] == prompt[1 + 7]
    assert srv.ctx_tgt.seqs[0].is_state_of(slot.prompt.tokens)


@pytest.mark.parametrize(("memory", "shifts"), [(MemoryKind.SWA, False), (MemoryKind.RECURRENT, True)])
def test_context_shift_only_where_the_memory_can_shift(memory: MemoryKind, shifts: bool) -> None:
    cfg = Config(
        n_ctx_slot=16, n_batch=16, n_ubatch=4, cache_ram=-1, ctx_shift=True, memory=memory, n_swa=4, swa_cells=8
    )
    srv = Server(cfg, FIXED)
    srv.request(tuple(range(1, 13)), n_predict=8)
    srv.run()
    assert ("context_shift" in kinds(srv)) == shifts
    assert srv.slots[0].truncated


# -- 8. #27451 keeps the speculative state value-owned (its description) -----------------------


def test_pr27451_copies_the_speculative_payload() -> None:
    cfg = Config(
        memory=MemoryKind.RECURRENT, n_ctx_slot=64, n_batch=8, n_ubatch=4, rs_bytes=64, has_draft=True,
        spec_bytes=8, n_ctx_checkpoints=3, checkpoint_min_step=2, cache_ram=-1, slot_prompt_similarity=0.0,
    )
    srv = Server(cfg, PR27451)
    srv.request(tuple(range(1, 30)), spans=(8,), n_predict=1)
    srv.run()
    start = len(srv.heap.events)
    srv.request(tuple(range(100, 120)), n_predict=1)  # LRU path: the slot is saved to the cache
    copies = [e for e in srv.heap.events[start:] if isinstance(e, ev.CopyPayload)]
    assert copies and {e.role for e in copies} == {"ckpt_spec"}


# -- 9. the hang: a cache load onto a busy pinned slot longer than its prompt -------------------


def _hang(variant: str) -> Server:
    cfg = Config(n_slots=1, n_ctx_slot=128, n_batch=4, n_ubatch=2, cache_ram=-1, slot_prompt_similarity=0.1)
    srv = Server(cfg, DESIGNS[variant])
    long = tuple(range(1, 41))
    srv.request(long, n_predict=1)
    srv.run()  # the slot holds 40 tokens
    srv.request(tuple(range(200, 240)), n_predict=1)  # unrelated: the 40 go to the cache
    srv.run()
    srv.request(tuple(range(500, 520)), n_predict=1)  # a 20-token task ...
    srv.step()  # ... mid-prompt
    srv.request(long, n_predict=1, id_slot=0)  # pinned to the busy slot: loads the 40-token entry
    srv.run(max_steps=50)
    return srv


@pytest.mark.parametrize("variant", ["baseline", "pr30137", "pr27451"])
def test_busy_pinned_load_hangs_the_cpp_designs(variant: str) -> None:
    srv = _hang(variant)
    assert "stall" in kinds(srv) and srv.slots[0].stalled and srv.idle
    judge_events = [e for e in srv.heap.events if e.kind == "stall"]
    assert get_property("PROGRESS-1").check(srv, judge_events)


def test_fixed_leaves_the_busy_slot_alone() -> None:
    srv = _hang("fixed")
    assert "stall" not in kinds(srv) and not srv.slots[0].is_processing and not srv.deferred


# -- 10. smaller points --------------------------------------------------------------------------


def test_empty_swa_window_reports_minus_one() -> None:
    ctx = Context.target(Config(memory=MemoryKind.SWA, n_ubatch=4, n_swa=4, swa_cells=8))
    ctx.decode([(0, tuple(range(1, 20)))])  # ubatches of 4, 4, 4, 4, 3 in a ring of 8 cells
    mem = ctx.seqs[0]
    assert mem.pos_range() == (11, 18)
    mem.part, mem.part_lo = (), 0  # the SWA cache emptied while the base cache holds cells
    assert mem.pos_range() == (-1, -1)  # llama-kv-cache-iswa.cpp:142-149


def test_hybrid_pos_max_is_the_smaller_of_its_parts() -> None:
    mem = SeqMemory(MemoryKind.HYBRID, n_swa=0, n_rs=0, cell_bytes=8, rs_bytes=64)
    mem.decode(tuple(range(1, 11)))
    mem.attn = mem.attn[:6]  # attention part shorter than the recurrent one
    assert mem.pos_range() == (9, 5)  # llama-memory-hybrid.cpp:172-180: max of mins, min of maxes


def test_restore_accepts_this_builds_state_version_only() -> None:
    srv = Server(Config(n_slots=1, n_ctx_slot=64, n_batch=16, n_ubatch=4, cache_ram=-1), BASELINE)
    srv.request(tuple(range(1, 20)), n_predict=1)
    srv.run()
    srv.slot_action("save", 0, "f.bin")
    data = bytearray(srv.files["f.bin"])
    struct.pack_into("<I", data, 4, 2)  # the August 2026 version
    srv.files["f.bin"] = bytes(data)
    read_slot_file(bytes(data))  # an inspector still reads it ...
    with pytest.raises(PcspecError):
        read_slot_file(bytes(data), expected_version=3)
    srv.slot_action("restore", 0, "f.bin")  # ... the server refuses it (llama-context.cpp:3326-3334)
    assert "file_restore_failed" in kinds(srv) and srv.slots[0].prompt.n_tokens == 0


# -- 11. a short write: get_data_ext returns fewer bytes than get_size said ---------------------


@pytest.mark.parametrize(("variant", "kept"), [("baseline", True), ("pr30137", False), ("fixed", False)])
def test_short_write_in_a_save(variant: str, kept: bool) -> None:
    cfg = Config(n_slots=1, n_ctx_slot=64, n_batch=16, n_ubatch=4, cache_ram=-1, slot_prompt_similarity=0.0)
    srv = Server(cfg, DESIGNS[variant])
    srv.request(tuple(range(1, 20)), n_predict=1)
    srv.run()
    srv.inject("state.write.short")
    srv.request(tuple(range(100, 120)), n_predict=1)
    assert srv.cache is not None
    short = [e for e in srv.heap.events if isinstance(e, ev.StateReadShort)]
    assert short and short[0].written is not None and short[0].written * 2 == short[0].size
    assert (len(srv.cache.entries) == 1) == kept  # baseline keeps the partial entry (RB-1)


# -- three short traces longer fuzzing found; each replays clean on fixed ---

REGRESSIONS = sorted((DATA / "regressions").glob("*.jsonl"))


@pytest.mark.parametrize("path", REGRESSIONS, ids=[p.stem for p in REGRESSIONS])
def test_issue8_traces_replay_clean_on_fixed(path: Path) -> None:
    trace = parse(path.read_text(encoding="utf-8"), str(path))
    assert trace.variant.name == "fixed"
    assert replay(trace).violations == []


@pytest.mark.parametrize(
    ("stem", "variant", "pid"),
    [
        # The C++ installs a record whose length lost one byte: pos fields read from the wrong place.
        ("ckpt2-recurrent-record-one-short", "baseline", "CKPT-1"),
        # The SWA off-by-one the real server shows (docs/FINDINGS.md, F2).
        ("state1-swa-prompt-one-before-checkpoint", "pr30137", "STATE-1"),
        ("state1-swa-divergent-tails", "pr30137", "STATE-1"),
        # Found by the default verify once fixed took prompt start and the first batch as one
        # pass: the C++ restores the checkpoint at n_prefix + 1, then invalidates it at once.
        ("perf2-restore-then-invalidate", "pr30137", "PERF-2"),
    ],
)
def test_issue8_traces_show_the_cpp_hazard(stem: str, variant: str, pid: str) -> None:
    path = next(p for p in REGRESSIONS if p.stem == stem)
    trace = parse(path.read_text(encoding="utf-8"), str(path), variant=variant)
    assert pid in {v.property for v in replay(trace).violations}


# -- M6: a slot restore validates the token ids (server-context.cpp:2609-2611) ----------------

M6 = DATA / "live" / "found" / "m6-hybrid-invalid-tokens.trace.jsonl"


def _m6(n_vocab: int | None) -> Server:
    """pcspec live's shrunk M6 workload: save an empty slot, write 4 bytes over the packed-format
    marker (the words now read as a legacy list holding id 0x23c5d8dd), restore."""
    from dataclasses import replace as dc_replace

    from pcspec.core.trace import load

    tr = load(M6)
    srv = replay(dc_replace(tr, config=dc_replace(tr.config, n_vocab=n_vocab))).server
    assert next(e.kind for e in srv.heap.events if e.kind.startswith("file_")) == "file_write"
    return srv


def test_restore_refuses_ids_outside_the_vocabulary() -> None:
    """With the model's vocabulary size the restore fails as the server's did: "Invalid tokens
    in slot save file", after the state load, and the slot is cleared (2616-2618)."""
    srv = _m6(272)
    assert "Invalid tokens in slot save file" in str(srv.last_result.get("error"))
    failed = [e for e in srv.heap.events if isinstance(e, ev.FileRestoreFailed)]
    assert len(failed) == 1 and "token 600168669 at index 0" in failed[0].reason
    assert srv.slots[1].prompt.tokens == () and srv.ctx_tgt.seqs[1].n_tokens == 0


def test_restore_without_a_vocabulary_installs_the_ids() -> None:
    """n_vocab None (the default, every existing trace): no vocabulary, the ids are installed."""
    srv = _m6(None)
    assert srv.last_result.get("n_restored") == 4 and len(srv.slots[1].prompt.tokens) == 4


def test_the_models_own_sampled_ids_are_in_any_vocabulary() -> None:
    from pcspec.model.processing import GEN_SPAN, VOCAB_GEN
    from pcspec.model.slot_files import invalid_token

    assert invalid_token((5, VOCAB_GEN, VOCAB_GEN + GEN_SPAN - 1), 272) is None
    assert invalid_token((5, VOCAB_GEN + GEN_SPAN), 272) == 1
    assert invalid_token((271, 272), 272) == 1 and invalid_token((272,), None) is None


def test_config_n_vocab_bounds_and_json() -> None:
    assert "n_vocab" not in Config().to_json()  # written configurations stay as they were
    assert Config.from_json({"n_vocab": 272}).n_vocab == 272
    assert Config.from_json({"n_vocab": None}).n_vocab is None
    assert Config.from_json(Config(n_vocab=9).to_json()) == Config(n_vocab=9)
    for bad, why in ((0, "at least 1"), (2**31, "at most"), ("272", "integer or null"), (True, "integer or null")):
        with pytest.raises(PcspecError, match=why):
            Config.from_json({"n_vocab": bad})


def test_releases_follow_slot_order_after_the_decode() -> None:
    """Live finding M7 (docs/FINDINGS.md), server-context.cpp:3800-3870: after the decode the
    server samples every slot in slot order, a slot whose prompt just ended as well as a
    generating one, and releases those that are done. Slot 0 generates its last token while slot
    1's prompt (n_predict 1) ends in the same batch: the server releases 0, then 1, so the next
    LRU pick is slot 0. (The model used to release slot 1 inside its prompt batch, first.)"""
    cfg = Config(n_slots=2, n_ctx_slot=128, n_batch=64, n_ubatch=16, memory=MemoryKind.KV, cache_ram=0)
    for variant in DESIGNS.values():
        srv = Server(cfg, variant)
        srv.request(tuple(range(1, 9)), n_predict=2, id_slot=0)
        srv.step()  # slot 0: prompt done, first token sampled
        srv.request(tuple(range(20, 28)), n_predict=1, id_slot=1)
        srv.step()  # slot 0 decodes its second token; slot 1's prompt ends: both done
        assert [e.slot for e in srv.heap.events if isinstance(e, ev.Release)] == [0, 1]
        srv.request(tuple(range(40, 48)), n_predict=1)
        select = [e for e in srv.heap.events if isinstance(e, ev.Select)][-1]
        assert (select.slot, select.how) == (0, "lru")


# -- M3: the SWA cache's cells decide pos_min (llama-kv-cache.cpp:898-1186, 2065-2470) ------------

# What the server logged for the shrunk live workload found/m3-swa-pos-min.jsonl (-np 3 -c 3072
# -b 64 -ub 32 --kv-unified, "creating SWA KV cache, size = 256 cells"), replayed on 0c1e570 with
# `pcspec live --kind swa --replay`: every "created context checkpoint" line as (slot, n_tokens,
# pos_min, pos_max). The model used to say pos_min 38 for the last two (len - 256 clamped, plus a
# restored window): the three slots share one ring, and slot 1's cells were overwritten by the
# others' and by its own ubatches.
M3_SERVER_CHECKPOINTS = [
    (2, 218, 0, 217), (2, 250, 0, 249), (2, 253, 1, 252), (2, 213, 0, 212), (2, 245, 0, 244),
    (1, 204, 0, 203), (1, 236, 0, 235), (2, 25, 0, 24), (2, 57, 0, 56), (1, 255, 0, 254),
    (1, 287, 31, 286), (1, 201, 38, 200), (1, 231, 38, 230), (1, 252, 51, 251), (1, 284, 83, 283),
]


def test_swa_pos_min_of_a_live_run_is_the_servers() -> None:
    """Live finding M3 (docs/LIVE.md): the model's trace of the shrunk workload (its requests, and
    the steps the server's log showed) creates the checkpoints the server created, pos_min
    included."""
    tr = load(DATA / "live" / "found" / "m3-swa-pos-min.trace.jsonl")
    srv = replay(replace(tr, variant=OCTOBER)).server
    got = [(e.slot, e.n_tokens, e.pos_min, e.pos_max) for e in srv.heap.events if isinstance(e, ev.CkptCreate)]
    assert got == M3_SERVER_CHECKPOINTS


def test_a_unified_ring_lets_one_sequence_overwrite_another() -> None:
    """find_slot reuses a cell whose position its own sequence no longer sees (1042-1064), after
    wrapping at the end (1021-1025); apply_ubatch then purges that sequence up to the position
    overwritten (1160-1178). Two sequences share a stream of 10 cells (n_swa 4, ubatches of 2):
    the third ubatch of sequence 1 takes the cells of sequence 0's positions 0 and 1."""
    ctx = Context.target(Config(n_slots=2, kv_unified=True, n_batch=16, n_ubatch=2, n_swa=4, swa_cells=8))
    assert ctx.swa is not None and ctx.swa.size == 4 * 2 + 2  # iswa.cpp:73, before the padding
    ctx.decode([(0, tuple(range(1, 7)))])
    ctx.decode([(1, tuple(range(11, 17)))])
    assert [m.pos_range() for m in ctx.seqs] == [(2, 5), (0, 5)]
    assert ctx.swa.streams[0].cells[:2] == [(1, 4), (1, 5)]


def test_separate_streams_split_a_batch_into_equal_shares() -> None:
    """split_equal(n_ubatch, sequential = true) (llama-kv-cache-iswa.cpp:209; llama-batch.cpp:
    542-711): the sequences of a ubatch are consecutive ids from the first unused token's, and
    each gives the same count."""
    batch = [(2, 9), (0, 5), (0, 6), (0, 7), (1, 3), (1, 4), (1, 5)]
    used = [False] * len(batch)
    assert split_equal(batch, used, 4, sequential=True) == [(2, 9)]  # 0 does not follow 2
    assert split_equal(batch, used, 4, sequential=True) == [(0, 5), (0, 6), (1, 3), (1, 4)]
    assert split_equal(batch, used, 4, sequential=True) == [(0, 7), (1, 5)]
    assert all(used)


def test_a_state_read_places_the_cells_in_the_order_written() -> None:
    """state_write writes a sequence's cells in cell order (2082-2110): a window that wraps the
    end of the ring comes out rotated, and state_read_meta places it in that order (2343-2442),
    which decides which cell a later ubatch overwrites first."""
    cfg = Config(n_batch=16, n_ubatch=4, n_swa=4, swa_cells=8)
    src = Context.target(cfg)
    src.decode([(0, tuple(range(1, 11)))])  # positions 8, 9 wrapped to cells 0, 1
    img = src.state_write(0, PARTIAL_ONLY)
    assert img.swa_order == (8, 9, 6, 7)
    dst = Context.target(cfg)
    dst.state_read(0, img)
    assert dst.swa is not None and dst.swa.streams[0].cells[:4] == [(0, 8), (0, 9), (0, 6), (0, 7)]
    assert dst.seqs[0].pos_range() == (6, 9)
    back = decode_content(encode_content(img))  # a slot file keeps the order
    assert isinstance(back, StateImage) and back == img and back.swa_order == img.swa_order


# -- M8: the constant part of a state in the prompt cache (llama-context.cpp:3191-3202) --------

M8_TRACE = DATA / "live" / "found" / "m8-swa-size-margin.trace.jsonl"


def _m8_saves(cfg: Config) -> list[tuple[str, int]]:
    """The cache's insertions and evictions of the M8 trace, around the save that differed."""
    tr = load(M8_TRACE)
    srv = replay(replace(tr, config=cfg, variant=OCTOBER)).server
    out: list[tuple[str, int]] = []
    for e in srv.heap.events:
        if isinstance(e, ev.EntryInsert):
            out.append(("insert", e.limit - e.unique_after))
        elif isinstance(e, ev.EntryEvict) and e.reason == "make_room":
            out.append(("make_room", e.n_tokens))
    return out


def test_an_eviction_at_the_byte_limit_counts_the_states_headers() -> None:
    """Live finding M8 (docs/LIVE.md): llama_state_seq_get_size_ext counts the io magic and the
    sequence id (llama-context.cpp:3194-3195) and each cache's headers and per-stream cell
    counts (llama-kv-cache.cpp:2074-2122), which the model's ``16 + cells * cell_bytes`` left
    out. The model's trace of the shrunk workload (swa, -np 2, --cache-ram 2, --ctx-checkpoints
    2) with the calibrated overheads (128 bytes a state, 60 a checkpoint: two streams) makes
    room at the 18th insertion, evicting the 136-token entry as the server did; without them
    that insertion left the cache 1576 bytes under the limit and the eviction came a save later."""
    cfg = load(M8_TRACE).config
    assert (cfg.state_overhead, cfg.ckpt_overhead) == (128, 60)
    with_headers = _m8_saves(cfg)
    inserts = [i for i, (what, _) in enumerate(with_headers) if what == "insert"]
    at = inserts[17]
    assert with_headers[at - 1] == ("make_room", 136)
    without = _m8_saves(replace(cfg, state_overhead=0, ckpt_overhead=0))
    inserts0 = [i for i, (what, _) in enumerate(without) if what == "insert"]
    assert without[inserts0[17]] == ("insert", 1576) and without[inserts0[17] - 1][0] == "insert"
    assert without[inserts0[18] - 1] == ("make_room", 136)


def test_state_overheads_size_cache_and_checkpoint_states_only() -> None:
    """The overheads are the target context's llama_state_seq_get_size_ext: a full image for the
    prompt cache (server-context.cpp:263-264) and a partial one for a checkpoint (common.cpp:
    2296); a plain KV cache ignores PARTIAL_ONLY (llama-kv-cache.cpp:2070), an empty sequence is
    never cached, the draft context keeps its own sizes, and a slot file holds the image without
    the io magic and sequence id (llama_state_seq_save_file, llama-context.cpp:3377-3395)."""
    base = Config(n_slots=1, n_ctx_slot=256, n_batch=64, n_ubatch=16, n_swa=8, swa_cells=32, cell_bytes=10,
                  has_draft=True, draft_memory=MemoryKind.KV, draft_cell_bytes=3)
    cfg = replace(base, state_overhead=40, ckpt_overhead=7).validate()
    for c, (full, part) in ((base, (0, 0)), (cfg, (40, 7))):
        tgt, dft = Context.target(c), Context.draft(c)
        assert tgt.get_size(0, FULL) == 16
        tgt.decode([(0, tuple(range(1, 21)))])
        dft.decode([(0, tuple(range(1, 21)))])
        assert tgt.get_size(0, FULL) == 16 + 20 * 10 + 8 * 10 + full
        assert tgt.get_size(0, PARTIAL_ONLY) == 16 + 8 * 10 + part
        assert dft.get_size(0, FULL) == 16 + 20 * 3
    kv = Context.target(replace(cfg, memory=MemoryKind.KV))
    kv.decode([(0, (1, 2, 3))])
    assert kv.get_size(0, PARTIAL_ONLY) == kv.get_size(0, FULL) == 16 + 30 + 40
    # a slot file is the same with and without them (its state is the image, not a sized blob)
    files = []
    for c in (base, cfg):
        srv = Server(replace(c, has_draft=False), OCTOBER)
        srv.request(tuple(range(1, 30)), n_predict=1)
        srv.run()
        srv.slot_action("save", 0, "a.bin")
        files.append(srv.files["a.bin"])
    assert files[0] == files[1]


def test_config_state_overheads_bounds_and_json() -> None:
    assert "state_overhead" not in Config().to_json() and "ckpt_overhead" not in Config().to_json()
    cfg = Config(state_overhead=128, ckpt_overhead=60)
    assert Config.from_json(cfg.to_json()) == cfg
    for key in ("state_overhead", "ckpt_overhead"):
        for bad, why in ((-1, ">= 0"), (2**20 + 1, "at most"), ("8", "integer"), (True, "integer")):
            with pytest.raises(PcspecError, match=why):
                Config.from_json({key: bad})


def test_a_draft_left_behind_takes_its_cells_at_the_batch_positions() -> None:
    """Found by the 20-seed time-to-first benchmark after M3: on pr30137 a slot restore clears
    the draft and a checkpoint restore puts back only its window, so the draft memory no longer
    agrees with the slot (STATE-1, as expected of the C++ designs). The SWA cache then placed
    the batch at the memory's own next positions, re-using positions it still held, until
    find_slot found no cell. The server's batch carries the slot's positions; with them the
    run goes on (and reports STATE-1, with the C++ designs' other hazards of that trace)."""
    path = DATA / "model" / "swa-draft-batch-positions.jsonl"
    trace = parse(path.read_text(encoding="utf-8"), str(path))
    assert trace.variant.name == "pr30137"
    assert "STATE-1" in {v.property for v in replay(trace).violations}
