"""Prompt processing and context checkpoints (tools/server/server-context.cpp).

``prompt_start`` is the ``SLOT_STATE_STARTED`` branch of the ``pre_decode`` lambda in
``update_slots`` (restore or reset, invalidation, ``n_past -= 1``, ``keep_first``, ``seq_rm``);
``prompt_batch`` is one batch fill with its ``do_checkpoint`` decision; ``create_checkpoint``
is ``server_context::create_checkpoint`` as of seed 001 (sweep only when full, cap,
supersede, create); ``generate_step`` decodes one sampled token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pcspec.model import policy
from pcspec.model.cache import lcp
from pcspec.model.checkpoint import Checkpoint, drop, hold
from pcspec.model.config import MemoryKind
from pcspec.model.heap import Abort, BadAlloc, Buffer
from pcspec.model.memory import PARTIAL_ONLY, Tokens
from pcspec.model.slot import Slot, SlotState, TaskType

if TYPE_CHECKING:
    from pcspec.model.context import Context
    from pcspec.model.server import Server

VOCAB_GEN = 1000  # generated tokens are >= 1000 so traces show which tokens came from the model


def sample_token(tokens: Tokens) -> int:
    """The model at temperature 0: the next token is a function of the prefix."""
    h = len(tokens) * 7919
    for t in tokens[-4:]:
        h = (h * 31 + t) % 1_000_003
    return VOCAB_GEN + h % 97


def _erase(srv: Server, slot: Slot, ck: Checkpoint, reason: str, **why: object) -> None:
    srv.heap.emit(
        "ckpt_erase",
        slot=slot.id,
        ckpt=ck.id,
        reason=reason,
        task=slot.task_id,
        restored_by_task=ck is slot.restored,
        n_tokens=ck.n_tokens,
        list_len=len(slot.prompt.checkpoints),
        **why,
    )
    drop(srv.heap, slot.prompt, ck)


def _load_ckpt_part(srv: Server, ctx: Context | None, slot: Slot, buf: Buffer | None, site: str) -> bool:
    """common_prompt_checkpoint::load_tgt / load_dft: a no-op for no context or an empty
    buffer; otherwise ``set_data_ext(PARTIAL_ONLY) == size``."""
    if ctx is None or buf is None or buf.size == 0:
        return True
    return ctx.set_data(srv.heap, slot.id, buf, site) == buf.size


# -- SLOT_STATE_STARTED ----------------------------------------------------------------------


def prompt_start(srv: Server, slot: Slot) -> None:
    """server-context.cpp: update_slots, the new-prompt branch (behaviour notes 2.10)."""
    cfg, v, heap = srv.cfg, srv.variant, srv.heap
    task = slot.task
    assert task is not None
    if task.n_tokens == 0:  # "empty prompt - releasing slot"
        heap.emit("empty_prompt", slot=slot.id, task=task.id)
        slot.release(srv)
        return
    ckpts = slot.prompt.checkpoints
    n_slot_tokens = slot.prompt.n_tokens
    n_prefix = lcp(slot.prompt.tokens, task.tokens)
    n_past = n_prefix if task.cache_prompt else 0
    pos_next = n_past
    has_new = n_past < task.n_tokens
    # (mutant needless-restore: the threshold as before #24110, one lower whatever the prompt)
    thold = policy.pos_min_threshold(pos_next, cfg.swa_window, has_new and v.threshold_uses_new_tokens)
    restored: Checkpoint | None = None
    reprocess: str | None = None
    if 0 < n_past <= slot.prompt.n_tokens:
        pos_min, _ = srv.ctx_tgt.seqs[slot.id].pos_range()
        if pos_min == -1:
            raise Abort(
                "update_slots",
                f"pos_min == -1, but n_past = {n_past} > 0 - should not happen (slot {slot.id})",
            )
        if pos_min >= thold:
            i = policy.restore_choice([(c.pos_min, c.pos_max) for c in ckpts], pos_next, thold)
            reprocess = "no usable checkpoint" if ckpts else "no checkpoints"
            if i is not None:
                ck = ckpts[i]
                ok = _load_ckpt_part(srv, srv.ctx_tgt, slot, ck.tgt, "ckpt.write.tgt") and _load_ckpt_part(
                    srv, srv.ctx_dft, slot, ck.dft, "ckpt.write.dft"
                )
                if ok:
                    pos_next, n_past = policy.restored_positions(pos_next, ck.pos_min, ck.pos_max, ck.n_tokens)
                    restored, reprocess = ck, None
                    heap.emit(
                        "ckpt_restore", slot=slot.id, ckpt=ck.id, task=task.id, n_tokens=ck.n_tokens, n_past=n_past
                    )
                elif ck.id_task != -1 and not v.contain_failures:
                    raise Abort("update_slots", "failed to restore context checkpoint")
                else:
                    # Restored from a slot file (seed 001), or contained (fixed): re-process.
                    reprocess = "checkpoint failed to load"
                    if v.contain_failures:
                        _erase(srv, slot, ck, "invalidated", cause="failed to load")
            if reprocess is not None:
                pos_next = n_past = 0
    if v.invalidate:
        pairs = [(c.pos_max, c.n_tokens) for c in slot.prompt.checkpoints]
        for i in reversed(policy.invalidated(pairs, pos_next, n_prefix)):
            _erase(srv, slot, slot.prompt.checkpoints[i], "invalidated")
    if n_past == task.n_tokens > 0:  # [TAG_PROMPT_LOGITS]
        n_past -= 1
    slot.n_prompt_cached = n_past
    slot.prompt.tokens = slot.prompt.tokens[:n_past]  # keep_first
    slot.restored = restored
    heap.emit(
        "prompt_start",
        slot=slot.id,
        task=task.id,
        n_prefix=n_prefix,
        n_slot_tokens=n_slot_tokens,
        n_past=n_past,
        restored=None if restored is None else restored.id,
        reprocess=reprocess,
        pos_next=n_past,
        prompt=task.tokens,
        kept=tuple(slot.prompt.checkpoints),  # immutable objects: RESTORE-1 judges them as of now
    )
    dft = srv.ctx_dft
    if restored is not None and restored.dft is None and dft is not None and v.resync_on_file_restore:
        # fixed: a checkpoint without draft data (restored from a file whose draft part did
        # not fit) rolls back only the target; bring the draft to the same prefix.
        dft.seqs[slot.id].clear()
        dft.seqs[slot.id].decode(slot.prompt.tokens)
    for ctx in srv.contexts():  # common_memory::seq_rm(id, pos_next, -1) on target and draft
        if not ctx.seqs[slot.id].seq_rm(n_past):
            if not v.contain_failures:
                raise Abort("common_memory::seq_rm", f"failed to remove sequence {slot.id} with p0={n_past}, p1=-1")
            # fixed: the memory cannot go back to n_past: re-process the prompt from 0.
            heap.emit("seq_rm_refused", slot=slot.id, ctx=ctx.name, p0=n_past)
            for c in srv.contexts():
                c.seqs[slot.id].clear()
            slot.prompt.tokens = ()
            slot.n_prompt_cached = 0
            for ck in list(slot.prompt.checkpoints):
                _erase(srv, slot, ck, "invalidated")
            slot.restored = None
            break
    slot.state = SlotState.PROCESSING_PROMPT


# -- one batch ---------------------------------------------------------------------------------


def prompt_batch(srv: Server, slot: Slot) -> None:
    """server-context.cpp: update_slots, one batch fill plus the checkpoint decision and the
    decode (behaviour notes 2.8). The checkpoint is taken before the decode, so it holds the
    state of the first ``n_tokens_start`` tokens."""
    cfg = srv.cfg
    task = slot.task
    assert task is not None
    ckpts = slot.prompt.checkpoints
    do_ckpt = cfg.needs_checkpoints and task.type == TaskType.COMPLETION
    spans = set(task.spans)
    last_user = task.last_user_pos
    tail_a, tail_b = min(cfg.n_batch, 4 + cfg.n_ubatch), min(cfg.n_batch, 4)
    n_start = slot.prompt.n_tokens
    n_cur = 0
    while n_start + n_cur < task.n_tokens and n_cur < cfg.n_batch:
        n_cur += 1
        if not do_ckpt:
            continue
        pos = n_start + n_cur
        if pos in spans and (pos == last_user or not ckpts or pos > ckpts[-1].n_tokens + cfg.checkpoint_min_step):
            break
        remaining = task.n_tokens - pos
        if remaining in (tail_a, tail_b):
            break
    new = task.tokens[n_start : n_start + n_cur]
    slot.prompt.tokens = slot.prompt.tokens + new
    done = slot.prompt.n_tokens == task.n_tokens
    near_end = task.n_tokens < slot.prompt.n_tokens + cfg.n_ubatch
    if not done and not (n_start in spans or near_end):
        do_ckpt = False
    pos_min, pos_max = srv.ctx_tgt.seqs[slot.id].pos_range()
    if pos_min < 0:
        do_ckpt = False
    do_ckpt = do_ckpt and (
        not ckpts or n_start == last_user or near_end or n_start > ckpts[-1].n_tokens + cfg.checkpoint_min_step
    )
    if do_ckpt:
        create_checkpoint(srv, slot, n_cur, pos_min, pos_max)
    for ctx in srv.contexts():
        ctx.seqs[slot.id].decode(new)
    srv.heap.emit("batch", slot=slot.id, task=task.id, start=n_start, n=n_cur, checkpoint=do_ckpt)
    if done:
        slot.n_gen = 1
        slot.next_token = sample_token(slot.prompt.tokens)
        slot.state = SlotState.GENERATING
        if slot.n_gen >= task.n_predict:
            slot.release(srv)


# -- create_checkpoint -------------------------------------------------------------------------


def create_checkpoint(srv: Server, slot: Slot, n_tokens_cur: int, pos_min: int, pos_max: int) -> None:
    """server-context.cpp: server_context::create_checkpoint (seed 001 order: sweep while the
    list is full, cap, supersede at equal ``n_tokens``, create)."""
    cfg, v, heap = srv.cfg, srv.variant, srv.heap
    task = slot.task
    assert task is not None
    ckpts = slot.prompt.checkpoints
    cap = cfg.n_ctx_checkpoints
    kept = slot.restored if v.keep_restored and slot.restored in ckpts else None

    # The restored checkpoint counts as the current task's (#30683): the sweep exempts it.
    pairs = [(c.n_tokens, task.id if c is kept else c.id_task) for c in ckpts]
    full = len(ckpts) + 1 >= cap  # the sweep's condition when it starts (CKPT-4 judges it)
    for i in reversed(policy.sweep_too_close(pairs, task.id, cfg.checkpoint_min_step, cap, v.sweep_only_when_full)):
        _erase(srv, slot, ckpts[i], "too_close", full=full)

    recycled: Buffer | None = None
    if v.cap_checkpoints:
        for _ in range(policy.cap_evictions(len(ckpts), cap)):
            victim = next((c for c in ckpts if c is not kept), None)
            if victim is None:
                break
            if v.inplace_update and victim.tgt is not None and recycled is None:
                recycled = srv.heap.retain(victim.tgt)  # mutant: reuse the payload in place
            _erase(srv, slot, victim, "cap")

    n_tokens_new = slot.prompt.n_tokens - n_tokens_cur
    if kept is not None and kept.n_tokens == n_tokens_new:
        # It would be superseded by a byte-identical save (seed 000, Nthalk): keep it.
        heap.emit("ckpt_kept_restored", slot=slot.id, ckpt=kept.id, task=task.id)
        if recycled is not None:
            heap.release(recycled)
        return
    for c in [c for c in ckpts if c.n_tokens == n_tokens_new]:
        _erase(srv, slot, c, "supersede")

    ck = Checkpoint(heap.new_id(), n_tokens_new, task.id, pos_min, pos_max)
    try:
        ck.tgt = _snapshot(srv, slot, srv.ctx_tgt, "ckpt_tgt", "ckpt.read.tgt", recycled)
        recycled = None
        if srv.ctx_dft is not None:
            ck.dft = _snapshot(srv, slot, srv.ctx_dft, "ckpt_dft", "ckpt.read.dft", None)
        if cfg.spec_bytes > 0:
            # common_speculative_get_state: a small host copy, always complete.
            ck.spec = heap.allocate(cfg.spec_bytes, "ckpt_spec", v.zero_init, "ckpt.alloc")
            heap.fill(ck.spec, ("spec", slot.prompt.tokens[:n_tokens_new]), cfg.spec_bytes)
    except (BadAlloc, _ShortSnapshot) as exc:
        for b in ck.buffers():
            heap.release(b)
        if recycled is not None:
            heap.release(recycled)
        if not v.contain_failures:
            if isinstance(exc, BadAlloc):
                raise Abort("create_checkpoint", f"uncaught std::bad_alloc ({exc})") from None
            raise Abort("common_prompt_checkpoint::update", str(exc)) from None
        heap.emit("ckpt_create_failed", slot=slot.id, task=task.id, reason=str(exc))
        return
    hold(heap, slot.prompt, ck)
    heap.emit(
        "ckpt_create",
        slot=slot.id,
        ckpt=ck.id,
        task=task.id,
        n_tokens=ck.n_tokens,
        pos_min=pos_min,
        pos_max=pos_max,
        identical_to_restored=slot.restored is not None
        and slot.restored.n_tokens == ck.n_tokens
        and slot.restored.tgt is not None
        and ck.tgt is not None
        and slot.restored.tgt.content == ck.tgt.content,
    )


class _ShortSnapshot(Exception):
    """``GGML_ABORT("checkpoint size mismatch: expected %zu, got %zu")`` in update_tgt/dft."""


def _snapshot(srv: Server, slot: Slot, ctx: Context, role: str, site: str, recycled: Buffer | None) -> Buffer:
    """common_prompt_checkpoint::update_tgt / update_dft with PARTIAL_ONLY."""
    size = ctx.get_size(slot.id, PARTIAL_ONLY)
    if recycled is not None and recycled.size == size:
        buf = recycled  # mutant inplace-update: overwrite a buffer other holders may share
    else:
        if recycled is not None:
            srv.heap.release(recycled)
        buf = srv.heap.allocate(size, role, srv.variant.zero_init, "ckpt.alloc")
    n = ctx.get_data(srv.heap, slot.id, buf, PARTIAL_ONLY, site)
    if n != size:
        srv.heap.release(buf)
        raise _ShortSnapshot(f"checkpoint size mismatch: expected {size}, got {n}")
    return buf


# -- generation ----------------------------------------------------------------------------------


def generate_step(srv: Server, slot: Slot) -> None:
    """Decode the sampled token and sample the next (update_slots, SLOT_STATE_GENERATING).
    The last sampled token is never decoded: a 608-token prompt with n_predict 4 leaves
    611 tokens in the slot (real log 03)."""
    cfg = srv.cfg
    task = slot.task
    assert task is not None
    if slot.prompt.n_tokens + 1 >= cfg.n_ctx_slot:
        can_shift = cfg.memory in (MemoryKind.KV, MemoryKind.SWA)
        if cfg.ctx_shift and can_shift:
            context_shift(srv, slot)
        else:
            slot.truncated = True
            slot.release(srv)
            return
    tok = (slot.next_token,)
    slot.prompt.tokens = slot.prompt.tokens + tok
    for ctx in srv.contexts():
        ctx.seqs[slot.id].decode(tok)
    srv.heap.emit("generate", slot=slot.id, task=task.id, n_tokens=slot.prompt.n_tokens)
    slot.n_gen += 1
    slot.next_token = sample_token(slot.prompt.tokens)
    if slot.n_gen >= task.n_predict:
        slot.release(srv)


def context_shift(srv: Server, slot: Slot) -> None:
    """update_slots, "slot context shift": drop half of the tokens after ``n_keep`` (0), shift
    the KV, ``prompt.clear()`` and re-insert the tokens: all checkpoints are dropped."""
    n_left = slot.prompt.n_tokens
    n_discard = n_left // 2
    kept = slot.prompt.tokens[n_discard:]
    srv.heap.emit("context_shift", slot=slot.id, n_left=n_left, n_discard=n_discard)
    for ck in list(slot.prompt.checkpoints):
        _erase(srv, slot, ck, "context_shift")
    slot.prompt.tokens = kept
    for ctx in srv.contexts():
        mem = ctx.seqs[slot.id]
        # The shifted cells are, by the server's intent, the state of the kept tokens.
        mem.clear()
        mem.decode(kept)
