"""RESTORE-2: the restore choice itself, judged against the C++'s rule at every prompt start.

RESTORE-1 and REUSE-1 judge the consequences of a prompt start (what it kept, how far it
resumed). A wrong choice can leave both true: an off-by-one in the threshold that restores a
checkpoint where live memory would do, or re-processes where a checkpoint would do, still keeps
consistent state, and on baseline REUSE-1 is violated anyway (the C++ rule is not the best one).
This check restates the rule from the C++ (server-context.cpp:3271-3388 of 0c1e570) over the
state the prompt start began with, and compares what the server did with it. It is written
here, apart from ``pcspec.model.policy``, on purpose: an expectation computed by the function
under test moves with it, and a planted bug in ``policy`` would change both sides.

A design that resumes by its own rule (``fixed``'s best resume, seam ``resume_best``, judged for
optimality by REUSE-1) chooses differently by design; RESTORE-2 holds it to the part of the
C++ rule that is about correctness rather than choice: a checkpoint it restores lies within the
shared prefix (``pos_max <= pos_next``) and resumes where the C++'s restore arithmetic says.
"""

from __future__ import annotations

from collections.abc import Sequence

from pcspec.model import events as ev
from pcspec.model.checkpoint import Checkpoint
from pcspec.model.design import Design, runs
from pcspec.model.events import Event
from pcspec.properties.base import events_of, history_of, needs, on_events
from pcspec.properties.view import StateView

# A prompt start whose restore was cut by a fault, or whose memory refused to go back (fixed):
# no choice to judge (the choice is made, the failure is not the rule's).
_FAULTED = ("checkpoint failed to load", "seq_rm refused")


def _resumes_at(ck: Checkpoint, pos_next: int) -> int:
    """n_past after restoring ``ck`` (server-context.cpp:3355-3356): ``pos_next`` becomes
    ``min(pos_next, max(pos_min + 1, pos_max))`` and ``n_past`` that, clamped to the
    checkpoint's ``n_tokens`` (text tokens: one position each)."""
    return min(min(pos_next, max(ck.pos_min + 1, ck.pos_max)), ck.n_tokens)


def _logits(n_past: int, n_prompt: int) -> int:
    """[TAG_PROMPT_LOGITS] (server-context.cpp:3382-3388): at least one token is evaluated."""
    return n_past - 1 if n_past == n_prompt and n_past > 0 else n_past


def _cpp_choice(
    held: Sequence[Checkpoint], live_pos_min: int, n_prefix: int, n_prompt: int, n_swa: int, cache_prompt: bool
) -> tuple[Checkpoint | None, int, str]:
    """What the C++ does at a prompt start: (checkpoint restored, n_past before the prompt-logits
    rule, how it got there), from the slot's state when the prompt start began."""
    n_past = n_prefix if cache_prompt else 0  # (context reuse, --cache-reuse, is not modelled)
    pos_next = n_past
    has_new_tokens = n_past < n_prompt  # 3275
    thold = max(0, pos_next - n_swa - (0 if has_new_tokens else 1))  # 3278
    if n_past <= 0:  # 3280 (n_past <= slot.prompt.n_tokens() always: it is a common prefix)
        return None, n_past, "nothing shared"
    if live_pos_min < thold:  # 3330: the live memory serves
        return None, n_past, f"live memory (pos_min {live_pos_min} < pos_min_thold {thold})"
    for ck in reversed(held):  # 3332-3344: newest first
        if ck.pos_max > pos_next:  # 3339-3341
            continue
        if ck.pos_min < thold or ck.pos_min == 0:  # 3342
            return ck, _resumes_at(ck, pos_next), f"pos_min_thold {thold}, live pos_min {live_pos_min}"
    return None, 0, f"no usable checkpoint (pos_min_thold {thold}, live pos_min {live_pos_min})"


def _show(ck: Checkpoint | None) -> str:
    return "none" if ck is None else f"ckpt #{ck.id} [{ck.pos_min}, {ck.pos_max}] n_tokens {ck.n_tokens}"


@on_events(ev.PromptStart)
@needs("starts")
def restore2_restore_choice(srv: StateView, events: Sequence[Event]) -> list[str]:
    """At every prompt start, the checkpoint restored (or none) and the resume point are the
    C++ rule's over the slot's checkpoints and live memory as the prompt start found them."""
    out: list[str] = []
    restores = {(r.slot, r.task): r for r in events_of(events, ev.CkptRestore)}
    # A design that resumes its own way (fixed's best resume) is held to the restore arithmetic
    # only; which point it resumes at is REUSE-1's to judge.
    resume_best = not runs(srv.design, "resume", Design)
    for d, start in zip(events_of(events, ev.PromptStart), history_of(events).starts, strict=True):
        if d.reprocess in _FAULTED:
            continue
        n_prompt = len(d.prompt)
        held = {ck.id: ck for ck in start.held}
        r = restores.get((d.slot, d.task))
        got = None if r is None else held.get(r.ckpt)
        if resume_best:
            if got is None:
                continue  # (which point it resumes at is REUSE-1's to judge)
            want_n = _logits(_resumes_at(got, d.n_prefix), n_prompt)
            if got.pos_max > d.n_prefix or d.n_past != want_n:
                out.append(
                    f"task {d.task} on slot {d.slot} restored {_show(got)} and resumed at {d.n_past}; the C++"
                    f" restore needs pos_max <= pos_next {d.n_prefix} and resumes at {want_n}"
                )
            continue
        live = dict(start.memories).get("tgt")
        live_pos_min = -1 if live is None else live.pos_range()[0]
        want, n_past, why = _cpp_choice(start.held, live_pos_min, d.n_prefix, n_prompt, srv.cfg.swa_window,
                                        d.cache_prompt)
        want_n = _logits(n_past, n_prompt)
        if (None if want is None else want.id) != (None if got is None else got.id) or d.n_past != want_n:
            out.append(
                f"task {d.task} on slot {d.slot} (prompt {n_prompt} tokens, shared prefix {d.n_prefix}) restored"
                f" {_show(got)} and resumed at {d.n_past}; the C++ rule ({why}) restores {_show(want)} and"
                f" resumes at {want_n}"
            )
    return out
