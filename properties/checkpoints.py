"""CKPT and RESTORE families: the checkpoint list of a slot, and what checkpoints describe.

Content identity makes "describes a prefix" a comparison: a checkpoint's target payload is
the state image of a token prefix, which must equal the holder's tokens up to ``n_tokens``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pcspec.model import events as ev
from pcspec.model.checkpoint import Checkpoint
from pcspec.model.config import MemoryKind
from pcspec.model.events import Event
from pcspec.model.memory import StateImage, Tokens
from pcspec.model.ownership import Holder, entry_holder, slot_holder, slot_task_tokens
from pcspec.model.slot import Slot
from pcspec.properties.base import (
    Carry,
    also_reads,
    carry_of,
    events_of,
    history_of,
    holders_of,
    needs,
    on_events,
    on_storage,
)
from pcspec.properties.view import StateView


@on_storage
@also_reads(ev.CkptCreate)
def ckpt1_slot_list_shape(srv: StateView, events: Sequence[Event]) -> list[str]:
    out: list[str] = []
    cap = srv.cfg.n_ctx_checkpoints
    # A checkpoint created and dropped within one operation was still in the slot's list: the
    # one taken just before a batch the decode refuses (server-context.cpp:3612-3616 at
    # 0c1e570), which the refusal's prompt_clear drops (Server._decode_refused).
    bad = [e for e in events_of(events, ev.CkptCreate) if not _shaped(e.pos_min, e.pos_max, e.n_tokens)]
    if bad:
        held = {c.id for s in srv.slots for c in s.prompt.checkpoints}
        out += [f"slot {e.slot}: ckpt#{e.ckpt}(n_tokens={e.n_tokens}, pos=[{e.pos_min},{e.pos_max}])"
                " was created breaking pos_min <= pos_max = n_tokens - 1" for e in bad if e.ckpt not in held]
    for s in srv.slots:
        cks = s.prompt.checkpoints
        if len(cks) > cap:
            out.append(f"slot {s.id} holds {len(cks)} checkpoints, over the cap {cap}")
        n = [c.n_tokens for c in cks]
        if len(set(n)) != len(n):  # (the quadratic count only when there is a duplicate)
            dup = sorted({x for x in n if n.count(x) > 1})
            out.append(f"slot {s.id} holds several checkpoints at n_tokens {dup}")
        for c in cks:
            if not _shaped(c.pos_min, c.pos_max, c.n_tokens):
                out.append(f"slot {s.id}: {c.describe()} breaks pos_min <= pos_max = n_tokens - 1")
    return out


def _shaped(pos_min: int, pos_max: int, n_tokens: int) -> bool:
    """CKPT-1's shape of one checkpoint (create_checkpoint, server-context.cpp:2337-2341)."""
    return pos_min <= pos_max == n_tokens - 1


def describes_prefix(ck: Checkpoint, tokens: Tokens) -> bool:
    """The checkpoint's target payload is the state of ``tokens[:n_tokens]``."""
    if ck.n_tokens > len(tokens) or ck.tgt is None:
        return False
    img = ck.tgt.content
    return isinstance(img, StateImage) and img.describes() == tokens[: ck.n_tokens]


def ckpt2_describes_prefix(srv: StateView, events: Sequence[Event]) -> list[str]:
    carry = carry_of(events)
    if carry is None:
        out: list[str] = []
        for h in holders_of(srv, events):
            out += _not_prefixes(h)
        return out
    return _ckpt2_carried(srv, events, carry)


def _not_prefixes(h: Holder) -> list[str]:
    """CKPT-2 of one holder: each checkpoint it holds (once) that describes no prefix of its
    tokens, nor of its task's."""
    out: list[str] = []
    seen: set[int] = set()
    for ck in h.checkpoints:
        if ck.id in seen:
            continue
        seen.add(ck.id)
        if describes_prefix(ck, h.tokens):
            continue
        if h.task_tokens is not None and describes_prefix(ck, h.task_tokens):
            continue
        out.append(
            f"{h.name} holds {ck.describe()} that is not the state of a prefix"
            f" of its tokens ({len(h.tokens)} tokens)"
        )
    return out


@dataclass
class _SlotKept:
    """What CKPT-2 found of one slot in a storage epoch, and the tokens it found it on."""

    tokens: Tokens
    task_tokens: Tokens | None
    longest: int  # the largest n_tokens of its checkpoints (the storage's: fixed in the epoch)
    found: list[str]


@dataclass
class _Kept:
    epoch: int
    entries: list[str]  # what it found of the cache's entries (storage only: fixed in the epoch)
    slots: list[_SlotKept]


def _slot_kept(s: Slot) -> _SlotKept:
    h = slot_holder(s)
    return _SlotKept(h.tokens, h.task_tokens, max((c.n_tokens for c in h.checkpoints), default=0), _not_prefixes(h))


def _keeps_prefix(k: _SlotKept, tokens: Tokens) -> bool:
    """``tokens`` begin with the first ``min(longest, len(old))`` tokens the slot was judged on."""
    m = min(k.longest, len(k.tokens))
    return len(tokens) >= m and tokens[:m] == k.tokens[:m]


def _ckpt2_carried(srv: StateView, events: Sequence[Event], carry: Carry) -> list[str]:
    """CKPT-2, carried over a storage epoch. The checkpoints (their lists, metadata and target
    payloads) are the storage's, the same all epoch; what changes within it is the slots'
    tokens (a decode step appends to them) and tasks. A slot whose checkpoints all described
    prefixes still has them all describe prefixes when its task is the same and its tokens
    keep their first ``min(longest, len(old))`` tokens: a checkpoint that matched the old
    tokens is no longer than that (or matched the task's tokens, which did not change). A slot
    with a finding is judged afresh (the message counts its tokens)."""
    kept = carry.kept.get("CKPT-2")
    if not isinstance(kept, _Kept) or kept.epoch != carry.epoch or len(kept.slots) != len(srv.slots):
        entries: list[str] = []
        if srv.cache is not None:
            for e in srv.cache.entries:
                entries += _not_prefixes(entry_holder(e))
        kept = _Kept(carry.epoch, entries, [_slot_kept(s) for s in srv.slots])
        carry.kept["CKPT-2"] = kept
    else:
        slots = kept.slots
        for i, s in enumerate(srv.slots):
            k = slots[i]
            if not k.found and slot_task_tokens(s) is k.task_tokens:
                tokens = s.prompt.tokens
                if tokens is k.tokens:
                    continue
                if _keeps_prefix(k, tokens):
                    k.tokens = tokens
                    continue
            slots[i] = _slot_kept(s)
    out: list[str] = []
    for k in kept.slots:
        out += k.found
    return out + kept.entries


@on_events(ev.PromptStart)
@needs("starts")
def restore1_prompt_start(srv: StateView, events: Sequence[Event]) -> list[str]:
    """Judged on what ``prompt_start`` kept, as of that moment (later work in the same
    ``update_slots`` iteration, such as a deferred task's cache load, is not its doing)."""
    out: list[str] = []
    for e, start in zip(events_of(events, ev.PromptStart), history_of(events).starts, strict=True):
        prompt: Tokens = e.prompt
        for ck in start.kept:
            if not describes_prefix(ck, prompt):
                out.append(
                    f"task {e.task} on slot {e.slot} kept {ck.describe()}, which is not a "
                    f"prefix of the new prompt (shared prefix {e.n_prefix} tokens)"
                )
            elif ck.id == e.restored and ck.pos_max > e.n_prefix:
                out.append(f"task {e.task} restored {ck.describe()} beyond pos_next {e.n_prefix}")
    return out


@on_events(ev.CkptErase, ev.CkptCreate, ev.PromptClear)
def perf2_restored_kept(srv: StateView, events: Sequence[Event]) -> list[str]:
    """Wasted restores: the task erases, re-creates identically or clears away the checkpoint
    it restored. A context shift is not counted: it moves every position, so no checkpoint
    describes the shifted sequence and keeping one would break CKPT-2."""
    out = [
        f"task {e.task} erased the checkpoint it restored (ckpt#{e.ckpt}, "
        f"n_tokens={e.n_tokens}, reason {e.reason})"
        for e in events_of(events, ev.CkptErase)
        if e.restored_by_task and e.reason != "context_shift"
    ]
    out += [
        f"task {c.task} re-created the checkpoint it restored, byte-identical (n_tokens={c.n_tokens})"
        for c in events_of(events, ev.CkptCreate)
        if c.identical_to_restored
    ]
    # A prompt clear while the task runs (a failed cache load onto its slot, a failed step)
    # drops the whole list without erase events: the restored checkpoint goes with it.
    out += [
        f"task {p.task} lost the checkpoint it restored (ckpt#{p.restored_by_task}) "
        f"to a prompt clear of slot {p.slot}"
        for p in events_of(events, ev.PromptClear)
        if p.restored_by_task is not None
    ]
    return out


ALLOWED_ERASURES = ("invalidated", "cap", "too_close", "supersede", "context_shift")


@on_events(ev.CkptErase)
def ckpt4_erasure_reasons(srv: StateView, events: Sequence[Event]) -> list[str]:
    """Every ``ckpt_erase`` has an allowed reason whose condition held *at that erasure*
    (clears and prompt replacements drop whole lists and are not ``ckpt_erase`` events):

    * ``invalidated``: ``pos_max > pos_next`` or ``n_tokens > n_prefix`` (#30137's merged diff),
      judged on the numbers the prompt start gave the erasure (the model's, and ``pos_max`` the
      checkpoint's own); a contained failure names its ``cause`` instead; one with neither is
      not allowed;
    * ``too_close``: the list was full or about to be (``len + 1 >= cap``) when this one went:
      the C++ walk re-checks its condition before every erasure;
    * ``cap``: the list held at least ``cap`` checkpoints;
    * ``supersede`` and ``context_shift``: allowed as such.
    """
    out: list[str] = []
    cap = srv.cfg.n_ctx_checkpoints
    for e in events_of(events, ev.CkptErase):
        what = f"task {e.task} erased ckpt#{e.ckpt} (n_tokens={e.n_tokens}) as {e.reason}"
        if e.reason not in ALLOWED_ERASURES:
            out.append(f"{what}: not an allowed reason ({', '.join(ALLOWED_ERASURES)})")
        elif e.reason == "too_close" and e.list_len + 1 < cap:
            out.append(f"{what} while the list ({e.list_len} of {cap}) was not full")
        elif e.reason == "cap" and e.list_len < cap:
            out.append(f"{what} while the list held {e.list_len} of {cap}")
        elif e.reason == "invalidated" and e.cause is None and (
                e.pos_max is None or e.pos_next is None or e.n_prefix is None):
            out.append(f"{what} outside a prompt start's invalidation (no pos_next, no n_prefix to justify it)"
                       " and with no failure named")
        elif (
            e.reason == "invalidated"
            and e.cause is None
            and e.pos_max is not None
            and e.pos_next is not None
            and e.n_prefix is not None
            and not (e.pos_max > e.pos_next or e.n_tokens > e.n_prefix)
        ):
            out.append(
                f"{what} though pos_max {e.pos_max} <= pos_next {e.pos_next} and "
                f"n_tokens {e.n_tokens} <= n_prefix {e.n_prefix}: it still described the prompt"
            )
    return out


@on_events(ev.PromptStart)
@needs("starts")
def perf3_extension_resumes(srv: StateView, events: Sequence[Event]) -> list[str]:
    """A prompt that strictly extends a recurrent or hybrid slot's live tokens resumes from
    live memory (#24110: no needless restore when the prompt brings new tokens). "Live" is
    the premise: every context's memory was the state of the slot's tokens when the prompt
    started. A slot whose memory already disagreed with its bookkeeping (a STATE-1 violation,
    left by a failed load) cannot resume from it, and restoring is then no waste."""
    if srv.cfg.memory not in (MemoryKind.RECURRENT, MemoryKind.HYBRID):
        return []
    out: list[str] = []
    for e, start in zip(events_of(events, ev.PromptStart), history_of(events).starts, strict=True):
        if not 0 < e.n_prefix == e.n_slot_tokens < len(e.prompt):
            continue
        live = e.prompt[: e.n_slot_tokens]
        if not all(mem.is_state_of(live) for _, mem in start.memories):
            continue
        if e.restored is not None or e.reprocess is not None or e.n_past != e.n_prefix:
            how = "restored a checkpoint" if e.restored is not None else f"re-processed ({e.reprocess})"
            out.append(
                f"task {e.task} strictly extends the {e.n_slot_tokens} live tokens of slot {e.slot} "
                f"but {how}: n_past {e.n_past}"
            )
    return out


def _named_breaks(d: ev.Batch, n_batch: int, n_ubatch: int, min_step: int) -> dict[int, str]:
    """The positions where the creation rules end a batch (server-context.cpp:3529-3559), as
    of the list the fill saw: a user-message start that is the last one, or the first, or
    more than ``--checkpoint-min-step`` past the newest checkpoint; and the tail positions
    ``4 + n_ubatch`` and ``4`` tokens before the prompt's end (#20288; at most ``n_batch``)."""
    n_prompt, listed = d.n_prompt, d.listed
    out: dict[int, str] = {}
    for p in d.spans:
        if p == d.last_user:
            out[p] = "the last user message's start"
        elif not listed:
            out[p] = "a user message's start (no checkpoint yet)"
        elif p > listed[-1] + min_step:
            out[p] = f"a user message's start more than {min_step} past the checkpoint at {listed[-1]}"
    for off in (4 + n_ubatch, 4):
        out.setdefault(n_prompt - min(n_batch, off), f"{min(n_batch, off)} tokens before the prompt's end")
    return out


# CKPT-3's events besides the batches (tuples, not ``A | B``: the loop sees every event)
_MADE = (ev.CkptCreate, ev.CkptKeptRestored)
_COUNTS_AS_MADE = (ev.CkptCreateFailed, ev.CkptCreateSkipped)


@on_events(ev.Batch)
def ckpt3_creation_rules(srv: StateView, events: Sequence[Event]) -> list[str]:
    """Checkpoint creation judged both ways, batch by batch, for every task that makes
    checkpoints (a completion on a memory that cannot roll back, or with a window):

    * complete: no batch runs across a position where the rules end it (so a checkpoint can be
      made there), and a batch that starts where the rules want a checkpoint gets one: at a
      user-message start or near the prompt's end (``n_prompt < end + n_ubatch``) or at the
      prompt's last batch, once the memory holds something, unless the newest checkpoint is
      within ``--checkpoint-min-step`` (which the last user message and the prompt's end
      override);
    * not excessive: no checkpoint is made at a batch start the rules do not name.

    A checkpoint that failed to build (an injected fault), ``fixed`` keeping the one its task
    restored at that position, and ``fixed`` making none because the cap is full of the one
    its task restored, count as made."""
    cfg = srv.cfg
    out: list[str] = []
    made: dict[int, set[int]] = {}  # slot -> n_tokens made since its previous batch
    for e in events:
        if isinstance(e, _MADE):
            made.setdefault(e.slot, set()).add(e.n_tokens)
            continue
        if isinstance(e, _COUNTS_AS_MADE):
            made.setdefault(e.slot, set()).add(-2)
            continue
        if not isinstance(e, ev.Batch):
            continue
        d = e
        got = made.pop(d.slot, set())
        if not d.needs:
            continue
        start, end, n_prompt = d.start, d.start + d.n, d.n_prompt
        breaks = _named_breaks(d, cfg.n_batch, cfg.n_ubatch, cfg.checkpoint_min_step)
        for p in sorted(breaks):
            if start < p < end:
                out.append(f"task {d.task}: batch [{start}, {end}) runs across {p}, {breaks[p]}, where it must end")
        listed = d.listed
        near_end = n_prompt < end + cfg.n_ubatch
        named = start in d.spans or near_end or end == n_prompt
        spaced = not listed or start == d.last_user or near_end or start > listed[-1] + cfg.checkpoint_min_step
        want = named and spaced and d.pos_min >= 0
        has = start in got or -2 in got
        if want and not has:
            out.append(f"task {d.task}: no checkpoint at n_tokens={start}, the start of batch [{start}, {end})")
        elif has and not want and start in got:
            why = "not a user-message start nor near the prompt's end" if not named else "too close to the last"
            out.append(f"task {d.task}: made a checkpoint at n_tokens={start} ({why}: list {list(listed)})")
    return out


@on_events(ev.Batch)
def ckpt5_batch_ends(srv: StateView, events: Sequence[Event]) -> list[str]:
    """CKPT-3's other direction: a batch ends only where the fill loop's conditions name an
    end (server-context.cpp:3505-3560 at 0c1e570). The loop runs while the prompt has tokens
    left and the batch has room (3505); it breaks early only when ``do_checkpoint`` (3441-3455)
    and the position just reached is a user-message start that is the last one, or with no
    checkpoint yet, or more than ``--checkpoint-min-step`` past the newest (3531-3538), or lies
    ``min(n_batch, 4 + n_ubatch)`` or ``min(n_batch, 4)`` tokens before the prompt's end
    (3545-3559). The named positions are ``_named_breaks``, which CKPT-3 holds the fill to from
    the other side. A batch that used its whole share of ``n_batch`` or reached the prompt's
    end ended for those reasons; a task that makes no checkpoints never ends early, but for the
    parent of shared-prefix children still waiting, which stops at the shared prefix
    (server-context.cpp:3945-3948 of b11549)."""
    cfg = srv.cfg
    out: list[str] = []
    for d in events_of(events, ev.Batch):
        end = d.start + d.n
        if d.n >= d.room or end >= d.n_prompt or end == d.wait_shared:
            continue
        breaks = _named_breaks(d, cfg.n_batch, cfg.n_ubatch, cfg.checkpoint_min_step) if d.needs else {}
        if end not in breaks:
            why = "it makes no checkpoints" if not d.needs else f"named ends {sorted(breaks)}, list {list(d.listed)}"
            out.append(
                f"task {d.task}: batch [{d.start}, {end}) ended at {end} with {d.room - d.n} tokens of room left"
                f" and {d.n_prompt - end} of the prompt to go, where the rules name no end ({why})"
            )
    return out
