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
from pcspec.model.heap import Abort, BadAlloc, Buffer
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


def _erase(
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
    srv.heap.emit(ev.CkptErase(
        slot=slot.id,
        ckpt=ck.id,
        reason=reason,
        task=slot.task_id,
        restored_by_task=ck is slot.restored,
        n_tokens=ck.n_tokens,
        list_len=len(slot.prompt.checkpoints),
        pos_max=pos_max,
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


def _restore_checkpoint(srv: Server, slot: Slot, ck: Checkpoint, pos_next: int) -> tuple[int, int] | None:
    """Load ``ck``'s target, then draft part (update_slots, 3345-3364); on success the
    ``(pos_next, n_past)`` it resumes at (``ckpt_restore`` emitted), else None. A build whose
    loads return nothing (``checkpoint_load_checked`` off: 0c1e570, b11434) aborts inside the
    load instead (common/common.cpp:2336-2338, 2354-2356 at 0c1e570)."""
    v = srv.variant
    ok = True
    for ctx, buf, site, part in ((srv.ctx_tgt, ck.tgt, "ckpt.write.tgt", "load_tgt"),
                                 (srv.ctx_dft, ck.dft, "ckpt.write.dft", "load_dft")):
        ok = _load_ckpt_part(srv, ctx, slot, buf, site)
        if not ok and not v.checkpoint_load_checked and not v.contain_failures:
            raise Abort(f"common_prompt_checkpoint::{part}", "checkpoint size mismatch")
        if not ok:
            break
    if not ok:
        return None
    pos_next, n_past = policy.restored_positions(pos_next, ck.pos_min, ck.pos_max, ck.n_tokens)
    srv.heap.emit(ev.CkptRestore(slot=slot.id, ckpt=ck.id, task=slot.task_id, n_tokens=ck.n_tokens, n_past=n_past))
    return pos_next, n_past


# -- SLOT_STATE_STARTED ----------------------------------------------------------------------


def prompt_start(srv: Server, slot: Slot) -> None:
    """server-context.cpp:3121-3407: update_slots, the new-prompt branch (``SLOT_STATE_STARTED``)."""
    cfg, v, heap = srv.cfg, srv.variant, srv.heap
    task = slot.task
    assert task is not None
    if task.n_tokens == 0:  # "empty prompt - releasing slot"
        heap.emit(ev.EmptyPrompt(slot=slot.id, task=task.id))
        slot.release(srv)
        return
    if task.n_tokens >= cfg.n_ctx_slot:  # server-context.cpp:3178-3184
        slot.release(srv, error="request exceeds the available context size")
        return
    ckpts = slot.prompt.checkpoints
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
    has_new = n_past < task.n_tokens
    # (mutants needless-restore and thold-minus-one-always: the threshold as before #24110, one
    # lower whatever the prompt; thold-minus-one-never: never one lower)
    minus_one = v.threshold_minus_one and not (has_new and v.threshold_uses_new_tokens)
    thold = policy.pos_min_threshold(pos_next, cfg.swa_window, not minus_one)
    restored: Checkpoint | None = None
    reprocess: str | None = None
    heap.emit(ev.PromptBegin(slot=slot.id, task=task.id))  # nothing of the slot has changed yet
    if v.resume_best and 0 < n_past <= slot.prompt.n_tokens:
        restored, reprocess, pos_next, n_past = _resume_best(srv, slot, n_prefix, n_past)
    elif 0 < n_past <= slot.prompt.n_tokens:
        pos_min, _ = srv.ctx_tgt.seqs[slot.id].pos_range()
        if pos_min == -1:
            raise Abort(
                "update_slots",
                f"pos_min == -1, but n_past = {n_past} > 0 - should not happen (slot {slot.id})",
            )
        if pos_min >= thold:
            # fixed: only checkpoints of the shared prefix (n_tokens <= n_prefix) are candidates;
            # the C++ may restore the one at n_prefix + 1 (pos_max == pos_next) and then erase
            # it at once as invalidated (n_tokens > n_prefix): a wasted restore.
            eligible = [c.n_tokens <= n_prefix for c in ckpts] if v.restore_only_prefixes else None
            if v.record_payload_pos_min and cfg.swa_window > 0:
                trip = [(c.pos_min, c.pos_max, c.n_tokens) for c in ckpts]
                if eligible is not None:
                    trip = [t if ok else (t[0], pos_next + 1, t[2]) for t, ok in zip(trip, eligible, strict=True)]
                i = policy.restore_choice_exact(trip, pos_next, thold, task.n_tokens, cfg.swa_window)
            else:
                i = policy.restore_choice(
                    [(c.pos_min, c.pos_max) for c in ckpts],
                    pos_next,
                    thold,
                    eligible,
                    v.restore_accepts_pos_min_zero,
                    v.restore_rejects_beyond_pos_next,
                )
            reprocess = "no usable checkpoint" if ckpts else "no checkpoints"
            if i is not None:
                ck = ckpts[i]
                resumed = _restore_checkpoint(srv, slot, ck, pos_next)
                if resumed is not None:
                    (pos_next, n_past), restored, reprocess = resumed, ck, None
                elif ck.id_task != -1 and not v.contain_failures:
                    raise Abort("update_slots", "failed to restore context checkpoint")
                else:
                    # Restored from a slot file (#30137's merged diff), or contained (fixed): re-process.
                    reprocess = "checkpoint failed to load"
                    if v.contain_failures:
                        _erase(srv, slot, ck, "invalidated", cause="failed to load")
            if reprocess is not None:
                pos_next = n_past = 0
    # The task owns what it restored from here on: an invalidation right after the restore
    # (the checkpoint at n_prefix + 1, by the ``n_tokens > n_prefix`` of #30137's merged diff)
    # is an erasure of the checkpoint this task restored, and is recorded as such.
    slot.restored = restored
    if v.invalidate:
        ckpts = slot.prompt.checkpoints
        if v.invalidate_by_pos_min:  # mutant: the earlier rule, by pos_min against the threshold
            doomed = policy.invalidated_by_pos_min([c.pos_min for c in ckpts], thold)
        else:
            pairs = [(c.pos_max, c.n_tokens) for c in ckpts]
            doomed = policy.invalidated(pairs, pos_next, n_prefix, v.invalidate_n_prefix)
        for ck in [ckpts[i] for i in doomed]:
            # The erasure carries the numbers its condition is judged on, as of the erasure.
            _erase(srv, slot, ck, "invalidated", pos_max=ck.pos_max, pos_next=pos_next, n_prefix=n_prefix)
    if restored is not None and restored not in slot.prompt.checkpoints:
        restored = None  # erased right away: nothing restored is kept
    if n_past == task.n_tokens > 0:  # [TAG_PROMPT_LOGITS]
        n_past -= 1
    slot.n_prompt_cached = n_past
    slot.prompt.tokens = slot.prompt.tokens[:n_past]  # keep_first
    slot.restored = restored
    dft = srv.ctx_dft
    if restored is not None and restored.dft is None and dft is not None and v.resync_draft_on_file_restore:
        # fixed: a checkpoint without draft data (restored from a file whose draft part did
        # not fit) rolls back only the target; bring the draft to the same prefix.
        dft.seq_rm(slot.id, -1)
        dft.decode([(slot.id, slot.prompt.tokens)])
    # The first batch fill's ``slot.mem.seq_rm(id, pos_next, -1)`` on target and draft
    # (server-context.cpp:3422-3426, common.cpp:1536-1562: aborts on failure). Later fills
    # repeat it at the end of the bookkept tokens, where it removes nothing.
    for ctx in srv.contexts():
        if not ctx.seq_rm(slot.id, n_past):
            if not v.contain_failures:
                raise Abort("common_memory::seq_rm", f"failed to remove sequence {slot.id} with p0={n_past}, p1=-1")
            # fixed: the memory cannot go back to n_past: re-process the prompt from 0.
            heap.emit(ev.SeqRmRefused(slot=slot.id, ctx=ctx.name, p0=n_past))
            for c in srv.contexts():
                c.seq_rm(slot.id, -1)
            slot.prompt.tokens = ()
            n_past = slot.n_prompt_cached = 0
            reprocess = "seq_rm refused"
            for ck in list(slot.prompt.checkpoints):
                _erase(srv, slot, ck, "invalidated", cause="seq_rm refused")
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


def _serves_live(srv: Server, slot: Slot, n: int) -> bool:
    """``policy.live_serves`` for every context of the slot (target and draft)."""
    for ctx in srv.contexts():
        mem = ctx.seqs[slot.id]
        pos_min, pos_max = mem.pos_range()
        if not policy.live_serves(pos_min, pos_max, n, mem.n_swa, ctx.kind in _RECURRENT_KINDS, mem.n_rs):
            return False
    return True


def _serves_checkpoint(srv: Server, slot: Slot, ck: Checkpoint, n: int) -> bool:
    """``policy.checkpoint_serves`` for the target payload and, when the checkpoint has one,
    the draft payload (without one, ``fixed`` re-decodes the draft: ``resync_draft_on_file_restore``).
    A payload's start is the recorded ``pos_min`` (``record_payload_pos_min``): the latest
    start of the target's and an SWA draft's payloads, so it serves both windows."""
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


def _resume_best(
    srv: Server, slot: Slot, n_prefix: int, pos_next: int
) -> tuple[Checkpoint | None, str | None, int, int]:
    """``fixed``'s resume (seam ``resume_best``): of live memory and every held
    checkpoint of the shared prefix, take the one that keeps the most tokens, by what each
    memory kind can roll back. Ties go to live memory (no restore), then to the newest
    checkpoint (the C++ scan order). Returns ``(restored, reprocess, pos_next, n_past)``."""
    task = slot.task
    assert task is not None
    ckpts = slot.prompt.checkpoints
    n_prompt = task.n_tokens
    best_n, best = 0, None
    n_live = policy.resume_point(pos_next, n_prompt)
    if _serves_live(srv, slot, n_live):
        best_n = n_live
    for ck in reversed(ckpts):
        if ck.n_tokens > n_prefix or ck.pos_max > pos_next:
            continue  # not a state of the shared prefix (restore_only_prefixes)
        _, n = policy.restored_positions(pos_next, ck.pos_min, ck.pos_max, ck.n_tokens)
        n = policy.resume_point(n, n_prompt)
        if n > best_n and _serves_checkpoint(srv, slot, ck, n):
            best_n, best = n, ck
    if best is None:
        if best_n > 0:
            return None, None, pos_next, pos_next  # live memory
        return None, "no usable checkpoint" if ckpts else "no checkpoints", 0, 0
    resumed = _restore_checkpoint(srv, slot, best, pos_next)
    if resumed is None:
        _erase(srv, slot, best, "invalidated", cause="failed to load")
        return None, "checkpoint failed to load", 0, 0
    return best, None, *resumed


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
    tail_a, tail_b = min(cfg.n_batch, 4 + cfg.n_ubatch), min(cfg.n_batch, 4)
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
        # server-context.cpp:3530-3538: the last user message, or one past the minimum step
        spaced = pos == last_user or not ckpts or pos > ckpts[-1].n_tokens + cfg.checkpoint_min_step
        if pos in spans and (spaced or not srv.variant.space_user_breaks):
            break
        remaining = task.n_tokens - pos
        if remaining in (tail_a, tail_b) and srv.variant.tail_checkpoints:
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
        if srv.variant.record_payload_pos_min:
            # fixed: record where the payload really starts, so that the restore rule's
            # ``pos_min < thold`` test (written for exactly that) sees the truth; the C++
            # records the SWA cache's pos_min and restores a window one cell short when a
            # prompt ends one before the checkpoint (docs/FINDINGS.md, F2). With an SWA
            # draft, the latest start of the two payloads: each context's SWA cache places
            # its cells by its own history (a draft re-decoded after a slot restore, where the
            # target read its cells from the file, loses other cells to the other slots), so
            # the draft's window can start after the target's, and a restore the target's
            # start allows would leave the draft short (found by the campaign after M3).
            pos_min = max(
                ctx.seqs[slot.id].payload_pos_min()
                for ctx in srv.contexts()
                if ctx.name == "tgt" or ctx.kind == MemoryKind.SWA
            )
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
    create). Returns the error a ``std::bad_alloc`` escaping it sends (the caller releases the
    slot), or None."""
    cfg, v, heap = srv.cfg, srv.variant, srv.heap
    task = slot.task
    assert task is not None
    ckpts = slot.prompt.checkpoints
    cap = cfg.n_ctx_checkpoints
    kept = slot.restored if v.keep_restored and slot.restored in ckpts else None

    # The restored checkpoint counts as the current task's (#30683): the sweep exempts it.
    pairs = [(c.n_tokens, task.id if c is kept else c.id_task) for c in ckpts]
    full = len(ckpts) + 1 >= cap  # the sweep's condition when it starts
    doomed = policy.sweep_too_close(
        pairs, task.id, cfg.checkpoint_min_step, cap, v.sweep_only_when_full, v.sweep_rechecks_full
    )
    for ck in [ckpts[i] for i in doomed]:  # front to back, as the C++ walk erases
        _erase(srv, slot, ck, "too_close", full=full)

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
    if kept is not None and cap > 0 and len(ckpts) >= cap and v.cap_checkpoints:
        # fixed: the list is full of the checkpoint this task restored (a cap of 1, say, and a
        # restore beyond the resume point: a recurrent state rolled back from n_tokens). It
        # stays (it is not re-created); a new one would break the cap. Nothing is made.
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
        if recycled is not None:
            heap.release(recycled)
        if v.contain_failures:
            for b in ck.buffers():
                heap.release(b)
            heap.emit(ev.CkptCreateFailed(slot=slot.id, task=task.id, reason=str(exc)))
            return None
        if isinstance(exc, _ShortSnapshot):  # GGML_ABORT in update_tgt/update_dft (common.cpp:2301-2321)
            raise Abort("common_prompt_checkpoint::update", str(exc)) from None
        heap.emit(ev.CkptCreateFailed(slot=slot.id, task=task.id, reason=str(exc)))
        if v.checkpoint_appended_before_fill:
            # master: ``emplace_back()`` then ``update_pos`` then the fills (2333-2342): the
            # checkpoint stays in the list with the parts filled before the throw (a target
            # payload that failed to resize is empty, and loading it is a no-op).
            hold(heap, slot.prompt, ck)
        else:
            for b in ck.buffers():
                heap.release(b)
        return f"got exception: std::bad_alloc ({exc})"
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
        buf = srv.heap.allocate(size, role, srv.variant.zero_init, "ckpt.alloc")
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
        _erase(srv, slot, ck, "context_shift")
    slot.prompt.tokens = kept
    slot.truncated = True
    for ctx in srv.contexts():
        ctx.shift(slot.id, n_keep, n_discard)
