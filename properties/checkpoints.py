"""CKPT and RESTORE families: the checkpoint list of a slot, and what checkpoints describe.

Content identity makes "describes a prefix" a comparison: a checkpoint's target payload is
the state image of a token prefix, which must equal the holder's tokens up to ``n_tokens``.
"""

from __future__ import annotations

from collections.abc import Sequence

from pcspec.model.checkpoint import Checkpoint
from pcspec.model.config import MemoryKind
from pcspec.model.heap import Event
from pcspec.model.memory import StateImage, Tokens
from pcspec.model.server import Server
from pcspec.properties.base import events_of, holders_of, on_events


def ckpt1_slot_list_shape(srv: Server, events: Sequence[Event]) -> list[str]:
    out: list[str] = []
    cap = srv.cfg.n_ctx_checkpoints
    for s in srv.slots:
        cks = s.prompt.checkpoints
        if len(cks) > cap:
            out.append(f"slot {s.id} holds {len(cks)} checkpoints, over the cap {cap}")
        n = [c.n_tokens for c in cks]
        if len(set(n)) != len(n):  # (the quadratic count only when there is a duplicate)
            dup = sorted({x for x in n if n.count(x) > 1})
            out.append(f"slot {s.id} holds several checkpoints at n_tokens {dup}")
        for c in cks:
            if not c.pos_min <= c.pos_max == c.n_tokens - 1:
                out.append(f"slot {s.id}: {c.describe()} breaks pos_min <= pos_max = n_tokens - 1")
    return out


def describes_prefix(ck: Checkpoint, tokens: Tokens) -> bool:
    """The checkpoint's target payload is the state of ``tokens[:n_tokens]``."""
    if ck.n_tokens > len(tokens) or ck.tgt is None:
        return False
    img = ck.tgt.content
    return isinstance(img, StateImage) and img.describes() == tokens[: ck.n_tokens]


def ckpt2_describes_prefix(srv: Server, events: Sequence[Event]) -> list[str]:
    out: list[str] = []
    seen: set[tuple[str, int]] = set()
    for h in holders_of(srv, events):
        for ck in h.checkpoints:
            if (h.name, ck.id) in seen:
                continue
            seen.add((h.name, ck.id))
            if describes_prefix(ck, h.tokens):
                continue
            if h.task_tokens is not None and describes_prefix(ck, h.task_tokens):
                continue
            out.append(
                f"{h.name} holds {ck.describe()} that is not the state of a prefix"
                f" of its tokens ({len(h.tokens)} tokens)"
            )
    return out


@on_events("prompt_start")
def restore1_prompt_start(srv: Server, events: Sequence[Event]) -> list[str]:
    """Judged on what ``prompt_start`` kept, as of that moment (later work in the same
    ``update_slots`` iteration, such as a deferred task's cache load, is not its doing)."""
    out: list[str] = []
    for e in events_of(events, "prompt_start"):
        prompt: Tokens = e.data["prompt"]
        for ck in e.data["kept"]:
            if not describes_prefix(ck, prompt):
                out.append(
                    f"task {e.data['task']} on slot {e.data['slot']} kept {ck.describe()}, which is not a "
                    f"prefix of the new prompt (shared prefix {e.data['n_prefix']} tokens)"
                )
            elif ck.id == e.data["restored"] and ck.pos_max > e.data["n_prefix"]:
                out.append(f"task {e.data['task']} restored {ck.describe()} beyond pos_next {e.data['n_prefix']}")
    return out


@on_events("ckpt_erase", "ckpt_create", "prompt_clear")
def perf2_restored_kept(srv: Server, events: Sequence[Event]) -> list[str]:
    """Wasted restores: the task erases, re-creates identically or clears away the checkpoint
    it restored. A context shift is not counted: it moves every position, so no checkpoint
    describes the shifted sequence and keeping one would break CKPT-2."""
    out = [
        f"task {e.data['task']} erased the checkpoint it restored (ckpt#{e.data['ckpt']}, "
        f"n_tokens={e.data['n_tokens']}, reason {e.data['reason']})"
        for e in events_of(events, "ckpt_erase")
        if e.data["restored_by_task"] and e.data["reason"] != "context_shift"
    ]
    out += [
        f"task {e.data['task']} re-created the checkpoint it restored, byte-identical (n_tokens={e.data['n_tokens']})"
        for e in events_of(events, "ckpt_create")
        if e.data["identical_to_restored"]
    ]
    # A prompt clear while the task runs (a failed cache load onto its slot, a failed step)
    # drops the whole list without erase events: the restored checkpoint goes with it.
    out += [
        f"task {e.data['task']} lost the checkpoint it restored (ckpt#{e.data['restored_by_task']}) "
        f"to a prompt clear of slot {e.data['slot']}"
        for e in events_of(events, "prompt_clear")
        if e.data.get("restored_by_task") is not None
    ]
    return out


ALLOWED_ERASURES = ("invalidated", "cap", "too_close", "supersede", "context_shift")


@on_events("ckpt_erase")
def ckpt4_erasure_reasons(srv: Server, events: Sequence[Event]) -> list[str]:
    """Every ``ckpt_erase`` has an allowed reason whose condition held *at that erasure*
    (clears and prompt replacements drop whole lists and are not ``ckpt_erase`` events):

    * ``invalidated``: ``pos_max > pos_next`` or ``n_tokens > n_prefix`` (seed 001), judged on
      the numbers the erasure carries; a contained failure names its ``cause`` instead;
    * ``too_close``: the list was full or about to be (``len + 1 >= cap``) when this one went:
      the C++ walk re-checks its condition before every erasure;
    * ``cap``: the list held at least ``cap`` checkpoints;
    * ``supersede`` and ``context_shift``: allowed as such.
    """
    out: list[str] = []
    cap = srv.cfg.n_ctx_checkpoints
    for e in events_of(events, "ckpt_erase"):
        d = e.data
        what = f"task {d['task']} erased ckpt#{d['ckpt']} (n_tokens={d['n_tokens']}) as {d['reason']}"
        if d["reason"] not in ALLOWED_ERASURES:
            out.append(f"{what}: not an allowed reason ({', '.join(ALLOWED_ERASURES)})")
        elif d["reason"] == "too_close" and d["list_len"] + 1 < cap:
            out.append(f"{what} while the list ({d['list_len']} of {cap}) was not full")
        elif d["reason"] == "cap" and d["list_len"] < cap:
            out.append(f"{what} while the list held {d['list_len']} of {cap}")
        elif (
            d["reason"] == "invalidated"
            and "cause" not in d
            and not (d["pos_max"] > d["pos_next"] or d["n_tokens"] > d["n_prefix"])
        ):
            out.append(
                f"{what} though pos_max {d['pos_max']} <= pos_next {d['pos_next']} and "
                f"n_tokens {d['n_tokens']} <= n_prefix {d['n_prefix']}: it still described the prompt"
            )
    return out


@on_events("prompt_start")
def perf3_extension_resumes(srv: Server, events: Sequence[Event]) -> list[str]:
    """A prompt that strictly extends a recurrent or hybrid slot's live tokens resumes from
    live memory (#24110: no needless restore when the prompt brings new tokens)."""
    if srv.cfg.memory not in (MemoryKind.RECURRENT, MemoryKind.HYBRID):
        return []
    out: list[str] = []
    for e in events_of(events, "prompt_start"):
        d = e.data
        if not 0 < d["n_prefix"] == d["n_slot_tokens"] < len(d["prompt"]):
            continue
        if d["restored"] is not None or d["reprocess"] is not None or d["n_past"] != d["n_prefix"]:
            how = "restored a checkpoint" if d["restored"] is not None else f"re-processed ({d['reprocess']})"
            out.append(
                f"task {d['task']} strictly extends the {d['n_slot_tokens']} live tokens of slot {d['slot']} "
                f"but {how}: n_past {d['n_past']}"
            )
    return out
