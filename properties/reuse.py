"""REUSE family: the server reuses what it holds, as far as the rules allow.

Faults of *optimality* leave every state consistent, so the state checks cannot see them: the
server re-processes tokens it could have kept, or skips a cache load that would have helped.
These checks judge each decision against what was available when it was made, and they judge
"available" by content identity (``pcspec.model.memory``), not by the numeric tests the
server (or ``fixed``) applies: a rule that is stricter than the memory needs shows up here.
"""

from __future__ import annotations

from collections.abc import Sequence
from copy import copy
from fractions import Fraction

from pcspec.model import events as ev
from pcspec.model.checkpoint import Checkpoint
from pcspec.model.events import Event
from pcspec.model.memory import PARTIAL_ONLY, SeqMemory, StateImage, Tokens
from pcspec.properties.base import events_of, history_of, needs, on_events
from pcspec.properties.checkpoints import describes_prefix
from pcspec.properties.view import StateView


def _serves(memories: Sequence[tuple[str, SeqMemory]], ck: Checkpoint | None, prompt: Tokens, n: int) -> bool:
    """Whether resuming at ``n`` leaves every context holding exactly the state of
    ``prompt[:n]``: copies of the memories the slot held, the checkpoint's payloads loaded
    (a partial image replaces only the non-rollbackable part, as ``set_data_ext`` does), then
    ``seq_rm(n)``. A checkpoint without a draft payload leaves the draft to be re-decoded
    (``fixed`` does so; the judgement is about what the held state could serve)."""
    for name, held in memories:
        mem = copy(held)  # (a shallow copy: its fields are tuples and numbers)
        if ck is not None:
            buf = ck.tgt if name == "tgt" else ck.dft
            if buf is None:
                if name == "tgt":
                    return False
                continue
            img = buf.content
            if not isinstance(img, StateImage) or img.scope != PARTIAL_ONLY or buf.filled < buf.size:
                return False
            mem.load_image(img)
        if not mem.seq_rm(n) or not mem.is_state_of(prompt[:n]):
            return False
    return True


def _logits_rule(n: int, n_prompt: int) -> int:
    """[TAG_PROMPT_LOGITS] (server-context.cpp:3384-3387 at 0c1e570): a resume point at the
    prompt's end goes back one token, so that one is evaluated."""
    return n - 1 if n == n_prompt and n > 0 else n


def _restored_n_past(pos_next: int, ck: Checkpoint, n_prompt: int) -> int:
    """Where restoring ``ck`` resumes (server-context.cpp:3355-3356, then the logits rule),
    restated here rather than taken from ``policy.restored_positions``, which ``fixed``'s own
    resume applies: a wrong rule there would move the model and this expectation together.
    A recurrent checkpoint (``pos_min == pos_max``) resumes after its position, an SWA one at
    ``pos_max``; never past the prompt's shared ``pos_next`` nor the checkpoint's tokens
    (text tokens: ``size_up_to_pos`` is the position itself)."""
    pos = min(pos_next, max(ck.pos_min + 1, ck.pos_max))
    return _logits_rule(min(pos, ck.n_tokens), n_prompt)


@on_events(ev.PromptStart)
@needs("starts")
def reuse1_best_resume(srv: StateView, events: Sequence[Event]) -> list[str]:
    """At every prompt start with ``cache_prompt``: the tokens kept (``n_past``) are at least
    what the best usable source would keep. The sources are the slot's live memory (kept up to
    the shared prefix) and each held checkpoint that is the state of a prefix of the new
    prompt, restored with the server's arithmetic (``_restored_n_past``, restated from the
    C++). "Usable" is content identity: after the restore and ``seq_rm``, every
    context must be exactly the state of the kept tokens (an SWA window covering the next
    token, a recurrent state within its rollback depth). A checkpoint that failed to load is
    a fault, not a choice, and is not judged."""
    out: list[str] = []
    for d, start in zip(events_of(events, ev.PromptStart), history_of(events).starts, strict=True):
        if not d.cache_prompt or d.reprocess == "checkpoint failed to load":
            continue
        prompt: Tokens = d.prompt
        n_prompt, n_prefix = len(prompt), d.n_prefix
        memories = start.memories
        best, source = 0, ""
        n_live = _logits_rule(n_prefix, n_prompt)
        if n_live > 0 and _serves(memories, None, prompt, n_live):
            best, source = n_live, "its live memory"
        for ck in start.held:
            if not describes_prefix(ck, prompt):
                continue
            n = _restored_n_past(n_prefix, ck, n_prompt)
            if n > best and _serves(memories, ck, prompt, n):
                best, source = n, ck.describe()
        if d.n_past < best:
            how = f"re-processed from {d.n_past}" + (f" ({d.reprocess})" if d.reprocess else "")
            out.append(
                f"task {d.task} on slot {d.slot} {how}, though {source} served a resume at {best}"
                f" (prompt {n_prompt} tokens, shared prefix {n_prefix})"
            )
    return out


def _shared(a: Tokens, b: Tokens) -> int:
    """How many leading tokens ``a`` and ``b`` share (``get_common_prefix`` of text tokens)."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _load_choice(prompt: Tokens, slot_tokens: Tokens, entries: Sequence[Tokens]) -> int | None:
    """The index of the entry ``server_prompt_cache::load`` takes, or None, worked out here from
    the C++ (server-task.cpp:1793-1823 at 0c1e570) and not with the model's ``policy`` rules,
    so that a wrong rule there changes the model and not this expectation. Exact fractions:
    the C++'s floats order these small ratios the same way.

    * the running best starts at the slot's own ``f_keep = lcp / n_slot`` (``-1`` for an empty
      slot, 1796: "any cache entry wins") and ``f_sim = lcp / n_new`` (1797);
    * entries are scanned oldest first (1804); one keeping under a quarter of its own tokens
      is skipped (1813-1815; an empty entry's 0 / 0 is NaN, which no comparison takes);
    * an entry becomes the best only when strictly better on both fractions (1817-1822)."""
    n_new = len(prompt)
    lcp0 = _shared(slot_tokens, prompt)
    f_keep_best = Fraction(lcp0, len(slot_tokens)) if slot_tokens else Fraction(-1)
    f_sim_best = Fraction(lcp0, n_new)
    best: int | None = None
    for i, toks in enumerate(entries):
        if not toks:
            continue
        n_lcp = _shared(toks, prompt)
        f_keep, f_sim = Fraction(n_lcp, len(toks)), Fraction(n_lcp, n_new)
        if f_keep < Fraction(1, 4):
            continue
        if f_keep_best < f_keep and f_sim_best < f_sim:
            best, f_keep_best, f_sim_best = i, f_keep, f_sim
    return best


@on_events(ev.Select)
@needs("loads")
def reuse2_cache_load(srv: StateView, events: Sequence[Event]) -> list[str]:
    """A completion task placed on a slot that shares nothing with its prompt (empty, or
    unrelated) gets the cache entry the load rules choose (``_load_choice``: the ``f_keep``
    floor, strictly better than the slot on both fractions; an empty slot's load
    baseline ``f_keep`` is -1), judged on the entries present when the load decision is made:
    at the load scan, or at the selection when no scan ran (``pcspec.properties.history``). A
    save right before the load may evict entries (make room): what it evicts is the save's
    business (ACC-3), not the load's."""
    out: list[str] = []
    for d in history_of(events).settled_loads():
        slot_tokens: Tokens = d.slot_tokens
        entries = d.entries
        i = _load_choice(d.prompt, slot_tokens, [toks for _, toks in entries])
        want = None if i is None else entries[i][0]
        got = d.chosen if d.scanned else None
        if want != got:
            what = "no entry" if got is None else f"entry #{got}"
            why = "" if d.scanned else " (the cache was not consulted)"
            out.append(
                f"task {d.task} on slot {d.slot} ({len(slot_tokens)} tokens, none shared) loaded {what}{why},"
                f" but the load rules choose entry #{want} of {[len(t) for _, t in entries]} tokens"
            )
    return out
