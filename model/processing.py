"""Prompt processing and context checkpoints (tools/server/server-context.cpp).

``prompt_start`` is the ``SLOT_STATE_STARTED`` branch of the ``pre_decode`` lambda in
``update_slots`` (restore or reset, invalidation, ``n_past -= 1``, ``keep_first``, ``seq_rm``);
``prompt_batch`` is one batch fill with its ``do_checkpoint`` decision; ``create_checkpoint``
is ``server_context::create_checkpoint`` as of #30137's merged diff (sweep only when full, cap,
supersede, create); ``generate_step`` takes one sampled token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pcspec.model import events as ev
from pcspec.model import policy
from pcspec.model.cache import lcp
from pcspec.model.checkpoint import Checkpoint, drop, hold
from pcspec.model.config import MemoryKind
from pcspec.model.heap import BadAlloc, Buffer
from pcspec.model.memory import PARTIAL_ONLY, Tokens
from pcspec.model.slot import Slot, SlotState, TaskType

if TYPE_CHECKING:
    from pcspec.model.context import Context
    from pcspec.model.server import Server

VOCAB_GEN = 1000  # generated tokens are >= 1000 so traces show which tokens came from the model
GEN_SPAN = 97  # ... and below VOCAB_GEN + GEN_SPAN


def sample_token(tokens: Tokens) -> int:
    """The model at temperature 0: the next token is a function of the prefix."""
    h = len(tokens) * 7919
    for t in tokens[-4:]:
        h = (h * 31 + t) % 1_000_003
    return VOCAB_GEN + h % GEN_SPAN


def erase_checkpoint(
    srv: Server,
    slot: Slot,
    ck: Checkpoint,
    reason: str,
    *,
    pos_max: int | None = None,
    pos_next: int | None = None,
    n_prefix: int | None = None,
    cause: str | None = None,
    full: bool | None = None,
) -> None:
    """``erase`` of ``ck`` from the slot's list, with why (the numbers its condition is judged on)."""
    srv.heap.emit(ev.CkptErase(
        slot=slot.id,
        ckpt=ck.id,
        reason=reason,
        task=slot.task_id,
        restored_by_task=ck is slot.restored,
        n_tokens=ck.n_tokens,
        list_len=len(slot.prompt.checkpoints),
        pos_max=ck.pos_max if pos_max is not None else None,
        pos_next=pos_next,
        n_prefix=n_prefix,
        cause=cause,
        full=full,
    ))
    drop(srv.heap, slot.prompt, ck)


def _load_ckpt_part(srv: Server, ctx: Context | None, slot: Slot, buf: Buffer | None, site: str) -> bool:
    """common_prompt_checkpoint::load_tgt / load_dft: a no-op for no context or an empty
    buffer; otherwise ``set_data_ext(PARTIAL_ONLY) == size``."""
    if ctx is None or buf is None or buf.size == 0:
        return True
    return ctx.set_data(srv.heap, slot.id, buf, site) == buf.size


def restore_checkpoint(srv: Server, slot: Slot, ck: Checkpoint, pos_next: int) -> tuple[int, int] | None:
    """Load ``ck``'s target, then draft part (update_slots, 3345-3364); on success the
    ``(pos_next, n_past)`` it resumes at (``ckpt_restore`` emitted), else None. A part that
    does not load whole goes to the design (``Design.checkpoint_load_failed``: a build whose
    loads return nothing aborts inside the load)."""
    for ctx, buf, site, part in ((srv.ctx_tgt, ck.tgt, "ckpt.write.tgt", "load_tgt"),
                                 (srv.ctx_dft, ck.dft, "ckpt.write.dft", "load_dft")):
        if not _load_ckpt_part(srv, ctx, slot, buf, site):
            srv.design.checkpoint_load_failed(srv, slot, ck, part)
            return None
    pos_next, n_past = policy.restored_positions(pos_next, ck.pos_min, ck.pos_max, ck.n_tokens)
    srv.heap.emit(ev.CkptRestore(slot=slot.id, ckpt=ck.id, task=slot.task_id, n_tokens=ck.n_tokens, n_past=n_past))
    return pos_next, n_past


# -- SLOT_STATE_STARTED ----------------------------------------------------------------------


def prompt_start(srv: Server, slot: Slot) -> None:
    """server-context.cpp:3121-3407: update_slots, the new-prompt branch (``SLOT_STATE_STARTED``):
    the design's threshold, resume (``Design.resume``: live memory, a restored checkpoint, or
    from 0) and invalidation, then the prompt-logits rule, ``keep_first`` and the first fill's
    ``seq_rm``."""
    cfg, design, heap = srv.cfg, srv.design, srv.heap
    task = slot.task
    assert task is not None
    if task.n_tokens == 0:  # "empty prompt - releasing slot"
        heap.emit(ev.EmptyPrompt(slot=slot.id, task=task.id))
        slot.release(srv)
        return
    if task.n_tokens >= cfg.n_ctx_slot:  # server-context.cpp:3178-3184
        slot.release(srv, error="request exceeds the available context size")
        return
    n_slot_tokens = slot.prompt.n_tokens
    n_prefix = lcp(slot.prompt.tokens, task.tokens)
    if task.n_tokens_shared > 0:
        # The parent of shared-prefix children does not go past the shared prefix
        # (server-context.cpp:3594-3595 of b11549, 3447-3448 of b11434), before the restore choice.
        # The model caps the common prefix itself, which every later rule reads as the C++ reads
        # the capped n_past. In b11434 and b11549 nothing else reads it; under #30137's
        # ``n_tokens > n_prefix`` invalidation (``november``) the capped prefix also erases a
        # checkpoint at n_tokens_shared + 1, which the uncapped one would keep: which of the two the
        # November code compares is not in the trees at hand (docs/RULESETS.md).
        n_prefix = min(n_prefix, task.n_tokens_shared)
    n_past = n_prefix if task.cache_prompt else 0
    pos_next = n_past
    thold = design.pos_min_threshold(pos_next, cfg.swa_window, n_past < task.n_tokens)
    restored: Checkpoint | None = None
    reprocess: str | None = None
    heap.emit(ev.PromptBegin(slot=slot.id, task=task.id))  # nothing of the slot has changed yet
    if 0 < n_past <= slot.prompt.n_tokens:
        resumed = design.resume(srv, slot, n_prefix, n_past, thold)
        restored, reprocess, pos_next, n_past = resumed.restored, resumed.reprocess, resumed.pos_next, resumed.n_past
    # The task owns what it restored from here on: an invalidation right after the restore
    # (the checkpoint at n_prefix + 1, by the ``n_tokens > n_prefix`` of #30137's merged diff)
    # is an erasure of the checkpoint this task restored, and is recorded as such.
    slot.restored = restored
    ckpts = slot.prompt.checkpoints
    doomed = design.invalidated([(c.pos_min, c.pos_max, c.n_tokens) for c in ckpts], pos_next, n_prefix, thold)
    for ck in [ckpts[i] for i in doomed]:
        # The erasure carries the numbers its condition is judged on, as of the erasure.
        erase_checkpoint(srv, slot, ck, "invalidated", pos_max=ck.pos_max, pos_next=pos_next, n_prefix=n_prefix)
    if restored is not None and restored not in slot.prompt.checkpoints:
        restored = None  # erased right away: nothing restored is kept
    if n_past == task.n_tokens > 0:  # [TAG_PROMPT_LOGITS]
        n_past -= 1
    slot.n_prompt_cached = n_past
    slot.prompt.tokens = slot.prompt.tokens[:n_past]  # keep_first
    slot.restored = restored
    if restored is not None and restored.dft is None and srv.ctx_dft is not None:
        # A checkpoint without draft data (restored from a file whose draft part did not fit)
        # rolls back only the target: the design's draft (``Design.sync_draft``).
        design.sync_draft(srv, slot)
    # The first batch fill's ``slot.mem.seq_rm(id, pos_next, -1)`` on target and draft
    # (server-context.cpp:3422-3426, common.cpp:1536-1562: aborts on failure). Later fills
    # repeat it at the end of the bookkept tokens, where it removes nothing.
    for ctx in srv.contexts():
        if not ctx.seq_rm(slot.id, n_past) and design.seq_rm_refused(srv, slot, ctx, n_past):
            n_past = slot.n_prompt_cached
            reprocess = "seq_rm refused"
            slot.restored = restored = None
            break
    heap.emit(ev.PromptStart(
        slot=slot.id,
        task=task.id,
        n_prefix=n_prefix,
        n_slot_tokens=n_slot_tokens,
        n_past=n_past,
        restored=None if restored is None else restored.id,
        reprocess=reprocess,
        pos_next=n_past,
        prompt=task.tokens,
        cache_prompt=task.cache_prompt,
    ))
    slot.state = SlotState.PROCESSING_PROMPT


# Memories with a recurrent state: it rolls back at most ``n_rs`` tokens (policy.live_serves).
_RECURRENT_KINDS = (MemoryKind.RECURRENT, MemoryKind.HYBRID)


def serves_live(srv: Server, slot: Slot, n: int) -> bool:
    """``policy.live_serves`` for every context of the slot (target and draft)."""
    for ctx in srv.contexts():
        mem = ctx.seqs[slot.id]
        pos_min, pos_max = mem.pos_range()
        if not policy.live_serves(pos_min, pos_max, n, mem.n_swa, ctx.kind in _RECURRENT_KINDS, mem.n_rs):
            return False
    return True


def serves_checkpoint(srv: Server, slot: Slot, ck: Checkpoint, n: int) -> bool:
    """``policy.checkpoint_serves`` for the target payload and, when the checkpoint has one,
    the draft payload (without one, ``fixed`` re-decodes the draft: ``Design.sync_draft``).
    A payload's start is the recorded ``pos_min`` (``fixed``'s ``Design.checkpoint_pos_min``:
    the latest start of the target's and an SWA draft's payloads, so it serves both windows)."""
    for ctx in srv.contexts():
        buf = ck.tgt if ctx.name == "tgt" else ck.dft
        if buf is None or buf.size == 0:  # (an empty payload's load is a no-op: it restores nothing)
            if ctx.name == "tgt":
                return False
            continue
        mem = ctx.seqs[slot.id]
        if not policy.checkpoint_serves(ck.pos_min, ck.n_tokens, n, mem.n_swa, ctx.kind in _RECURRENT_KINDS, mem.n_rs):
            return False
    return True


# -- one batch ---------------------------------------------------------------------------------


def prompt_batch(srv: Server, slot: Slot, room: int, batch: list[tuple[int, Tokens]]) -> int:
    """server-context.cpp:3420-3616: this slot's share of the batch (at most ``room``
    tokens, added to ``batch``, which ``Server._update_slots`` decodes after every slot's
    share) and the checkpoint decision. The checkpoint is taken before the decode, so it
    holds the state of the first ``n_tokens_start`` tokens. Returns the number of tokens the
    slot put into the batch."""
    cfg = srv.cfg
    task = slot.task
    assert task is not None
    ckpts = slot.prompt.checkpoints
    # "make checkpoints only for completion tasks" (server-context.cpp:3868 of b11549, 3711 of
    # b11434, 3444 at 0c1e570): no infill, embedding, rerank or decision makes one
    do_ckpt = cfg.needs_checkpoints and task.type == TaskType.COMPLETION
    spans = set(task.spans)
    last_user = task.last_user_pos
    tails = srv.design.tail_breaks(cfg.n_batch, cfg.n_ubatch)
    n_start = slot.prompt.n_tokens
    wait_shared = False
    if task.n_tokens_shared > 0:
        # The shared prefix (server-context.cpp:3833-3849 of b11549, 3676-3692 of b11434): once
        # the parent holds exactly it, every waiting child gets a copy and starts; until then the
        # fill stops there (3945-3948 of b11549, 3788-3791 of b11434).
        shared_done = n_start == task.n_tokens_shared
        for other in srv.slots:
            if other.state != SlotState.WAIT_OTHER or other.task is None or other.task.id_parent != task.id:
                continue
            if not shared_done:
                wait_shared = True
                continue
            try:
                slot.copy_prompt_to(srv, other)
            except BadAlloc as exc:
                # prompt.clone() threw inside the per-slot ``iterate`` (3472, 3082-3092 of b11549):
                # send_error, release the parent; nothing of it joins this batch
                slot.release(srv, error=f"got exception: std::bad_alloc ({exc})")
                return 0
            other.state = SlotState.STARTED
    n_cur = 0
    while n_start + n_cur < task.n_tokens and n_cur < room:
        if wait_shared and n_start + n_cur == task.n_tokens_shared:
            break  # "stop at the end of the shared prefix"
        n_cur += 1
        if not do_ckpt:
            continue
        pos = n_start + n_cur
        # server-context.cpp:3530-3538: a user-message start, where the design breaks (the last
        # user message, or one past the minimum step); 3540-3559: the prompt's tail
        if pos in spans and srv.design.breaks_at_user_message(
                pos, last_user, ckpts[-1].n_tokens if ckpts else None, cfg.checkpoint_min_step):
            break
        if task.n_tokens - pos in tails:
            break
    new = task.tokens[n_start : n_start + n_cur]
    slot.prompt.tokens = slot.prompt.tokens + new
    done = slot.prompt.n_tokens == task.n_tokens
    near_end = task.n_tokens < slot.prompt.n_tokens + cfg.n_ubatch
    if not done and not (n_start in spans or near_end):
        do_ckpt = False
    pos_min, pos_max = srv.ctx_tgt.seqs[slot.id].pos_range()
    gate_pos_min = pos_min
    listed = tuple(c.n_tokens for c in ckpts)  # the list the fill's breaks and the gates saw
    if pos_min < 0:
        do_ckpt = False
    do_ckpt = do_ckpt and (
        not ckpts or n_start == last_user or near_end or n_start > ckpts[-1].n_tokens + cfg.checkpoint_min_step
    )
    error: str | None = None
    if do_ckpt:
        # The pos_min the checkpoint records: the memory's in the C++ (docs/FINDINGS.md, F2, for
        # what fixed records instead: Design.checkpoint_pos_min)
        pos_min = srv.design.checkpoint_pos_min(srv, slot, pos_min)
        error = create_checkpoint(srv, slot, n_cur, pos_min, pos_max)
    if new:
        batch.append((slot.id, new))
    srv.heap.emit(ev.Batch(
        slot=slot.id,
        task=task.id,
        start=n_start,
        n=n_cur,
        room=room,
        checkpoint=do_ckpt,
        # The inputs of the creation rules: whether this task makes checkpoints
        # at all, its prompt's length and message spans, the list and pos_min at the fill.
        needs=cfg.needs_checkpoints and task.type == TaskType.COMPLETION,
        n_prompt=task.n_tokens,
        spans=task.spans,
        last_user=last_user,
        listed=listed,
        pos_min=gate_pos_min,
        wait_shared=task.n_tokens_shared if wait_shared else None,
    ))
    if error is not None:
        # iterate() caught the exception (server-context.cpp:2711-2721): send_error, release
        # this slot. The tokens it put into the batch are still decoded (the batch is built
        # for all slots and decoded after the loop), so bookkeeping and memory agree, when
        # another slot made the batch its own; else update_slots aborts (Server._update_slots).
        slot.release(srv, error=error)
        return n_cur
    if done:
        # SLOT_STATE_DONE_PROMPT: the first token is sampled after the decode, in the slot-order
        # loop that also samples the generating slots (Server._update_slots, M7).
        slot.state = SlotState.DONE_PROMPT
    elif n_cur == 0:
        # The slot holds more tokens than the prompt (a cache load onto this busy pinned slot
        # put them there): no token is ever added, the batch stays empty, the task never
        # finishes and no error is sent. Measured on a real server: a livelock, not the
        # assert the source suggests (docs/FINDINGS.md, F1).
        slot.stalled = True
        srv.heap.emit(ev.Stall(slot=slot.id, task=task.id, n_tokens=slot.prompt.n_tokens, n_prompt=task.n_tokens))
    return n_cur


# -- create_checkpoint -------------------------------------------------------------------------


def create_checkpoint(srv: Server, slot: Slot, n_tokens_cur: int, pos_min: int, pos_max: int) -> str | None:
    """server-context.cpp:2290-2345 (server_context::create_checkpoint; in the order of
    #30137's merged diff: sweep while the list is full, cap, supersede at equal ``n_tokens``,
    create), at the design's points (``Design.kept_checkpoint``, ``sweep_too_close``,
    ``cap_evictions``, ``reuse_payload``, ``checkpoint_create_failed``). Returns the error a
    ``std::bad_alloc`` escaping it sends (the caller releases the slot), or None."""
    cfg, design, heap = srv.cfg, srv.design, srv.heap
    task = slot.task
    assert task is not None
    ckpts = slot.prompt.checkpoints
    cap = cfg.n_ctx_checkpoints
    kept = design.kept_checkpoint(slot)

    # A kept checkpoint counts as the current task's (#30683): the sweep exempts it.
    pairs = [(c.n_tokens, task.id if c is kept else c.id_task) for c in ckpts]
    full = len(ckpts) + 1 >= cap  # the sweep's condition when it starts
    doomed = design.sweep_too_close(pairs, task.id, cfg.checkpoint_min_step, cap)
    for ck in [ckpts[i] for i in doomed]:  # front to back, as the C++ walk erases
        erase_checkpoint(srv, slot, ck, "too_close", full=full)

    recycled: Buffer | None = None
    wanted = design.cap_evictions(len(ckpts), cap)
    made = 0
    while made < wanted:
        victim = next((c for c in ckpts if c is not kept), None)
        if victim is None:
            break
        if recycled is None and victim.tgt is not None and design.reuse_payload(victim):
            recycled = srv.heap.retain(victim.tgt)
        erase_checkpoint(srv, slot, victim, "cap")
        made += 1

    n_tokens_new = slot.prompt.n_tokens - n_tokens_cur
    if kept is not None and cap > 0 and made < wanted:
        # The list is full of the checkpoint this task keeps (a cap of 1, say, and a restore
        # beyond the resume point: a recurrent state rolled back from n_tokens). It stays (it is
        # not re-created); a new one would break the cap. Nothing is made.
        heap.emit(ev.CkptCreateSkipped(slot=slot.id, task=task.id, n_tokens=n_tokens_new, ckpt=kept.id))
        if recycled is not None:
            heap.release(recycled)
        return None
    if kept is not None and kept.n_tokens == n_tokens_new:
        # It would be superseded by a byte-identical save (reported in the #30137 review; #30683): keep it.
        heap.emit(ev.CkptKeptRestored(slot=slot.id, ckpt=kept.id, task=task.id, n_tokens=kept.n_tokens))
        if recycled is not None:
            heap.release(recycled)
        return None
    for c in [ckpts[i] for i in policy.superseded([c.n_tokens for c in ckpts], n_tokens_new)]:
        erase_checkpoint(srv, slot, c, "supersede")

    ck = Checkpoint(heap.new_id(), n_tokens_new, task.id, pos_min, pos_max)
    try:
        ck.tgt = _snapshot(srv, slot, srv.ctx_tgt, "ckpt_tgt", "ckpt.read.tgt", recycled)
        recycled = None
        if srv.ctx_dft is not None:
            ck.dft = _snapshot(srv, slot, srv.ctx_dft, "ckpt_dft", "ckpt.read.dft", None)
        if cfg.spec_bytes > 0:
            # common_speculative_get_state: a small host copy, always complete.
            ck.spec = heap.allocate(cfg.spec_bytes, "ckpt_spec", design.zero_init, "ckpt.alloc")
            heap.fill(ck.spec, ("spec", slot.prompt.tokens[:n_tokens_new]), cfg.spec_bytes)
    except (BadAlloc, _ShortSnapshot) as exc:
        if recycled is not None:
            heap.release(recycled)
        return design.checkpoint_create_failed(srv, slot, ck, str(exc), isinstance(exc, _ShortSnapshot))
    hold(heap, slot.prompt, ck)
    heap.emit(ev.CkptCreate(
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
    ))
    return None


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
        buf = srv.heap.allocate(size, role, srv.design.zero_init, "ckpt.alloc")
    n = ctx.get_data(srv.heap, slot.id, buf, PARTIAL_ONLY, site)
    if n != size:
        srv.heap.release(buf)
        raise _ShortSnapshot(f"checkpoint size mismatch: expected {size}, got {n}")
    return buf


# -- generation ----------------------------------------------------------------------------------


def finish_prompt(srv: Server, slot: Slot) -> None:
    """``SLOT_STATE_DONE_PROMPT`` after the decode (server-context.cpp:3800-3830): the first
    token is sampled from the prompt's logits; with ``n_predict`` 1 the task is done."""
    task = slot.task
    assert task is not None
    if task.type == TaskType.DECISION:
        # send_decision, then release: nothing is sampled or generated (server-context.cpp:
        # 4321-4326 of b11549, 4164-4169 of b11434)
        slot.release(srv, sampled=False)
        return
    slot.n_gen = 1
    slot.next_token = sample_token(slot.prompt.tokens)
    slot.state = SlotState.GENERATING
    if slot.n_gen >= task.n_predict:
        slot.release(srv)


def generate_step(srv: Server, slot: Slot) -> None:
    """The sampled token, decoded at the head of the batch (``Server._update_slots``), joins
    the prompt, and the next is sampled (update_slots, SLOT_STATE_GENERATING). The last
    sampled token is never decoded: a 608-token prompt with n_predict 4 leaves 611 tokens in
    the slot (real log 03)."""
    task = slot.task
    assert task is not None
    tok = (slot.next_token,)
    slot.prompt.tokens = slot.prompt.tokens + tok
    # token: the one decoded (handle_last_sampled_token adds slot.sampled to the batch and the
    # prompt, server-context.cpp:484, 509)
    srv.heap.emit(ev.Generate(slot=slot.id, task=task.id, n_tokens=slot.prompt.n_tokens, token=tok[0]))
    slot.n_gen += 1
    slot.next_token = sample_token(slot.prompt.tokens)
    if slot.n_gen >= task.n_predict:
        slot.release(srv)


def can_shift(kind: MemoryKind) -> bool:
    """llama_memory_can_shift of the target memory (llama-kv-cache.cpp:1188, -iswa.cpp:253-257,
    -memory-recurrent.cpp:716-719, -memory-hybrid.cpp:133-136): a plain KV cache, a recurrent
    state and a hybrid (through its attention part) can shift; iSWA only when its SWA cache
    is as large as the base one (``--swa-full``, which the model does not configure). The
    server turns ``ctx_shift`` off at load for a memory that cannot (server-context.cpp:
    1166-1170)."""
    return kind != MemoryKind.SWA


def context_shift_if_full(srv: Server, slot: Slot) -> None:
    """pre_decode (server-context.cpp:2886-2950) for a generating slot one token short of
    ``n_ctx``: shift if enabled; otherwise generation stops there, truncated (process_token
    ends a task before it runs out of context when shifting is off, server-context.cpp:1866)."""
    if slot.prompt.n_tokens + 1 < srv.cfg.n_ctx_slot:
        return
    if srv.cfg.ctx_shift and can_shift(srv.cfg.memory):
        context_shift(srv, slot)
    else:
        slot.truncated = True
        srv.heap.emit(ev.Truncated(slot=slot.id, task=slot.task_id, n_tokens=slot.prompt.n_tokens))
        slot.release(srv)


# ``add_bos_token`` (server-context.cpp:1099, llama_vocab_get_add_bos): the vocabularies the
# model stands for (and the byte-level ones of the live models) add a BOS token.
ADD_BOS = True
N_KEEP = 0  # common_params::n_keep default (common.h:455); a task may not override it here


def context_shift(srv: Server, slot: Slot) -> None:
    """server-context.cpp:2915-2950: keep ``n_keep`` (+1 for BOS, at most ``n_ctx - 4``)
    tokens, discard half of the rest (clamped to leave one), ``seq_rm`` the discarded cells
    and ``seq_add`` the later ones down, then ``prompt.clear()`` and re-insert the tokens:
    every checkpoint is dropped and the slot is marked truncated."""
    n_keep = N_KEEP + (1 if ADD_BOS else 0)
    n_keep = min(srv.cfg.n_ctx_slot - 4, n_keep)
    n_left = slot.prompt.n_tokens - n_keep
    n_discard = max(0, min(n_left // 2, max(0, n_left - 1)))
    tokens = slot.prompt.tokens
    kept = tokens[:n_keep] + tokens[n_keep + n_discard :]
    srv.heap.emit(ev.ContextShift(slot=slot.id, n_keep=n_keep, n_left=n_left, n_discard=n_discard))
    for ck in list(slot.prompt.checkpoints):
        erase_checkpoint(srv, slot, ck, "context_shift")
    slot.prompt.tokens = kept
    slot.truncated = True
    for ctx in srv.contexts():
        ctx.shift(slot.id, n_keep, n_discard)
