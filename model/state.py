"""The server's state, in one place: every variable of the model and its type invariant.

A TLA+ module opens with its VARIABLES and a type invariant, so that the state reads at a
glance; this module does the same for the model. ``VARIABLES`` lists, per class, every
attribute its objects hold, each with what it is (and, where it mirrors one, the C++ member);
nothing else may hold state. ``type_invariant(server)`` is TypeOK: every object reachable from
a ``Server`` has exactly its declared variables, each of its type and within its range. It
states no property (those are the catalogue's, in ``pcspec.properties``): it holds on every
design and mutant after every operation, which the tests check on fuzzed runs.

The model keeps no history for a checker. What a property compares against an earlier moment
(a published checkpoint as it was, the cache before a save, a file as it was written) is the
judge's to remember (``pcspec.properties.history``); an attribute added for that here would be
an undeclared variable, and ``type_invariant`` names it.

    Server      (server_context)                 one llama-server process
      cfg, design                                the flags and the design (its points, its rule set)
      heap        -> Heap                        every live buffer, the event log, the faults
      ctx_tgt, ctx_dft -> Context                the target and draft contexts
      slots       -> [Slot]                      the slots, by id
      cache       -> PromptCache | None          the host-RAM prompt cache (--cache-ram)
      deferred, requeued, clock, next_task_id, crash, files, last_result
    Task        (server_task)                    the prompt, its type; a group's id_parent, children
    Slot        (server_slot)      prompt -> Prompt {tokens, checkpoints -> [Checkpoint]}
    Checkpoint  (common_prompt_checkpoint)       metadata, tgt/dft/spec -> Buffer, refs
    PromptCache (server_prompt_cache)            entries -> [CacheEntry], limits
    CacheEntry  (server_prompt_cache_state)      prompt -> Prompt, main/drft -> Buffer
    Context     (llama_context)                  seqs -> [SeqMemory], swa -> SwaCache
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any

from pcspec.model.cache import CacheEntry, PromptCache
from pcspec.model.checkpoint import Checkpoint, Prompt
from pcspec.model.config import Config, MemoryKind
from pcspec.model.context import Context
from pcspec.model.design import Design
from pcspec.model.heap import Buffer, Faults, Heap
from pcspec.model.memory import SeqMemory
from pcspec.model.server import Cancel, Crash, Server, SlotAction
from pcspec.model.slot import Slot, SlotState, Task
from pcspec.model.swa_ring import Stream, SwaCache

VARIABLES: dict[type, dict[str, str]] = {
    Server: {
        "cfg": "the flags and sizes the process runs with (a restart may change some)",
        "design": "the design under test: its extension points and its rule set (constant)",
        "heap": "the symbolic heap: every live buffer, the event log, the armed faults",
        "ctx_tgt": "the target context (llama_context)",
        "ctx_dft": "the draft context, or None (speculative decoding off)",
        "slots": "the slots, slot i at index i",
        "cache": "the prompt cache, or None (--cache-ram 0)",
        "deferred": "server_queue: tasks waiting for a slot (queue_tasks_deferred)",
        "requeued": "tasks a slot release moved back to the front of the queue, and cancels a failure posted",
        "clock": "the release counter: the t_last_used of the next release (LRU order)",
        "next_task_id": "the id of the next task (server_queue::get_new_id)",
        "crash": "the abort that ended the process, or None",
        "files": "the slot-save directory: file name -> bytes",
        "last_result": "the answer of the last /slots action (n_saved, n_restored, error, ...)",
    },
    Heap: {
        "host_ram": "the bytes the host can allocate at most",
        "faults": "the armed one-shot faults",
        "events": "the event log: what happened, in order (the model's output, read by observers)",
        "live": "buffer id -> every buffer not freed",
        "op": "the index of the current model operation",
        "_next_id": "the next object id",
        "_live_bytes": "the bytes of every live buffer",
        "watchers": "event kind -> the observers called as such an event is emitted",
        "everything": "the observers called as any event is emitted",
    },
    Faults: {
        "armed": "fault site -> how many times it fails next",
        "on_hit": "what a consumed fault tells the heap (it logs the hit)",
    },
    Buffer: {
        "id": "the buffer's identity",
        "size": "its size in bytes",
        "role": "what it holds: main, drft (an entry's state), ckpt_tgt, ckpt_dft, ckpt_spec, file",
        "zeroed": "zero-filled when allocated (value-initialized)",
        "filled": "how many bytes from offset 0 the last fill wrote",
        "content": "the identity of what the fill wrote (a StateImage); meaningful when complete",
        "refs": "its reference count (shared_ptr use_count)",
        "freed": "returned to the allocator",
        "version": "how many writes it took",
    },
    Slot: {
        "id": "the slot id",
        "prompt": "server_slot::prompt: the tokens in memory and the checkpoints",
        "state": "SLOT_STATE_*",
        "task": "the task it processes, or None when idle",
        "t_last_used": "when it was last released (-1: never): the LRU pick",
        "n_gen": "tokens generated for the task so far",
        "next_token": "the last token sampled (-1: none yet)",
        "restored": "the checkpoint the task restored at its prompt start, or None",
        "n_prompt_cached": "n_past at the prompt start: prompt tokens taken from memory",
        "truncated": "the prompt was cut to fit the context",
        "stalled": "the slot holds more tokens than its prompt: no pass adds one (a livelock)",
    },
    Task: {
        "id": "server_task::id",
        "tokens": "the prompt",
        "spans": "user-message start positions (message_spans)",
        "n_predict": "tokens to generate",
        "id_slot": "the slot it is pinned to (-1: any)",
        "cache_prompt": "the request's cache_prompt",
        "type": "SERVER_TASK_TYPE_*",
        "id_parent": "server_task::id_parent: the parent of a shared-prefix child (-1: none)",
        "children": "server_task::child_tasks: the children a parent launches with it",
        "n_tokens_shared": "server_task::n_tokens_shared: the leading tokens a parent's children share",
    },
    Cancel: {
        "id_target": "the task a SERVER_TASK_TYPE_CANCEL releases",
    },
    SlotAction: {
        "id": "the action's task id",
        "action": "save, restore or erase",
        "slot": "the slot acted on",
        "filename": "the file",
        "id_slot": "server_task::id_slot: always -1 (the slot is in the action)",
    },
    Crash: {
        "op": "the model operation that aborted",
        "where": "the C++ function that aborted",
        "message": "the abort's message",
    },
    Prompt: {
        "tokens": "the tokens in the sequence's memory (as bookkept)",
        "checkpoints": "the checkpoint list (std::list), oldest first",
    },
    Checkpoint: {
        "id": "the object's identity (shared_ptr target)",
        "n_tokens": "tokens in memory when it was taken",
        "id_task": "the task that made it (-1: restored from a slot file)",
        "pos_min": "the memory's pos_min as recorded",
        "pos_max": "the memory's pos_max as recorded",
        "tgt": "data_tgt: the target payload, or None",
        "dft": "data_dft: the draft payload, or None",
        "spec": "data_spec: the speculative state, or None",
        "refs": "how many lists hold it",
    },
    PromptCache: {
        "cfg": "the flags (the process's)",
        "design": "the design (its accounting, eviction and save points)",
        "heap": "the heap it allocates from",
        "entries": "server_prompt_cache::states, oldest first",
        "limit_size": "the byte limit (0: none); a bad_alloc may lower it",
        "limit_tokens": "the token limit",
    },
    CacheEntry: {
        "id": "the entry's identity",
        "prompt": "its tokens and checkpoints",
        "main": "data.main: the target state, or None (emptied, or of size 0)",
        "drft": "data.drft: the draft state, or None",
    },
    Context: {
        "name": "tgt or dft",
        "kind": "the memory kind",
        "seqs": "one SeqMemory per sequence (slot)",
        "swa": "the SWA cache's cells (iSWA only), else None",
    },
    SeqMemory: {
        "kind": "the memory kind",
        "n_swa": "the sliding window (iSWA), else 0",
        "n_rs": "recurrent rollback snapshots kept (--n-rs-seq)",
        "cell_bytes": "bytes per attention cell",
        "rs_bytes": "bytes of a recurrent state",
        "state_overhead": "constant bytes of a full state image",
        "ckpt_overhead": "constant bytes of a partial (checkpoint) image",
        "attn": "the tokens whose attention cells are present",
        "part": "the tokens the non-rollbackable part derives from",
        "part_lo": "the first position the SWA window holds",
        "garbage": "the memory holds bytes that are no token state",
        "tail_with": "the other sequences sharing its recurrent tail cell (after a seq_cp)",
        "has_attn": "the kind has attention cells (fixed at construction)",
        "has_part": "the kind has a non-rollbackable part (fixed at construction)",
    },
    SwaCache: {
        "n_swa": "the window",
        "size": "cells per stream",
        "unified": "one stream for all sequences (--kv-unified)",
        "n_ubatch": "the ubatch size batches are split by",
        "streams": "the streams' cells",
    },
    Stream: {
        "cells": "(seq_id, pos) per cell, None for an empty one",
        "head": "where find_slot starts looking",
    },
}

_ROLES = frozenset({"main", "drft", "ckpt_tgt", "ckpt_dft", "ckpt_spec", "file"})


def _attributes(obj: object) -> set[str]:
    if hasattr(obj, "__dict__"):
        return set(vars(obj))
    return {name for c in type(obj).__mro__ for name in getattr(c, "__slots__", ())}


def _declared(obj: object, where: str) -> Iterator[str]:
    """Every attribute of ``obj`` is a declared variable of its class, and every declared
    variable is there."""
    names = VARIABLES.get(type(obj))
    if names is None:
        yield f"{where}: {type(obj).__name__} is not a class of the state"
        return
    have = _attributes(obj)
    for extra in sorted(have - names.keys()):
        yield f"{where}: {type(obj).__name__}.{extra} is not a declared variable of the state"
    for missing in sorted(names.keys() - have):
        yield f"{where}: {type(obj).__name__}.{missing} is missing"


def _is_tokens(t: Any) -> bool:
    return isinstance(t, tuple) and all(type(x) is int and x >= 0 for x in t)


def _buffer(b: Any, where: str, live: dict[int, Buffer]) -> Iterator[str]:
    if not isinstance(b, Buffer):
        yield f"{where}: not a Buffer ({type(b).__name__})"
        return
    yield from _declared(b, where)
    if b.role not in _ROLES:
        yield f"{where}: role {b.role!r}"
    if not 0 <= b.filled <= b.size or b.size < 0 or b.version < 0:
        yield f"{where}: filled {b.filled} of {b.size} bytes, version {b.version}"
    if not b.freed and live.get(b.id) is not b:
        yield f"{where}: buffer #{b.id} is not freed but not among the heap's live buffers"


def _checkpoint(ck: Any, where: str, live: dict[int, Buffer]) -> Iterator[str]:
    if not isinstance(ck, Checkpoint):
        yield f"{where}: not a Checkpoint ({type(ck).__name__})"
        return
    yield from _declared(ck, where)
    for name in ("n_tokens", "id_task", "pos_min", "pos_max", "refs"):
        if type(getattr(ck, name)) is not int:
            yield f"{where}: {name} is not an integer"
    if ck.n_tokens < 0 or ck.id_task < -1:
        yield f"{where}: n_tokens {ck.n_tokens}, id_task {ck.id_task}"
    for part in ("tgt", "dft", "spec"):
        b = getattr(ck, part)
        if b is not None:
            yield from _buffer(b, f"{where}.{part}", live)


def _prompt(p: Any, where: str, live: dict[int, Buffer]) -> Iterator[str]:
    if not isinstance(p, Prompt):
        yield f"{where}: not a Prompt ({type(p).__name__})"
        return
    yield from _declared(p, where)
    if not _is_tokens(p.tokens):
        yield f"{where}.tokens: not a tuple of token ids"
    if not isinstance(p.checkpoints, list):
        yield f"{where}.checkpoints: not a list"
        return
    for i, ck in enumerate(p.checkpoints):
        yield from _checkpoint(ck, f"{where}.checkpoints[{i}]", live)


def _memory(m: Any, where: str, ctx: Context) -> Iterator[str]:
    if not isinstance(m, SeqMemory):
        yield f"{where}: not a SeqMemory ({type(m).__name__})"
        return
    yield from _declared(m, where)
    if m.kind != ctx.kind:
        yield f"{where}: a {m.kind} memory in a {ctx.kind} context"
    if not _is_tokens(m.attn) or not _is_tokens(m.part) or not m.part_lo >= 0:
        yield f"{where}: attn, part must be token tuples and part_lo >= 0"
    if type(m.garbage) is not bool:
        yield f"{where}.garbage: not a boolean"
    if not isinstance(m.tail_with, frozenset) or (
            m.tail_with and m.kind not in (MemoryKind.RECURRENT, MemoryKind.HYBRID)):
        yield f"{where}.tail_with: a set of sequences sharing a recurrent tail cell, only for a recurrent part"


def _context(c: Any, where: str, cfg: Config) -> Iterator[str]:
    if not isinstance(c, Context):
        yield f"{where}: not a Context ({type(c).__name__})"
        return
    yield from _declared(c, where)
    if not isinstance(c.kind, MemoryKind) or len(c.seqs) != cfg.n_slots:
        yield f"{where}: kind {c.kind!r}, {len(c.seqs)} sequences for {cfg.n_slots} slots"
    for i, m in enumerate(c.seqs):
        yield from _memory(m, f"{where}.seqs[{i}]", c)
        for j in getattr(m, "tail_with", frozenset()):
            # one tail cell: the sharing is symmetric, between sequences of the same state
            if not (type(j) is int and 0 <= j < len(c.seqs) and j != i and i in c.seqs[j].tail_with
                    and c.seqs[j].part == m.part):
                yield f"{where}.seqs[{i}].tail_with: {j} does not share its tail cell"
    if (c.swa is None) != (c.kind != MemoryKind.SWA):
        yield f"{where}.swa: an SWA cache goes with an SWA memory, and only with one"
    if c.swa is not None:
        yield from _declared(c.swa, f"{where}.swa")
        for i, s in enumerate(c.swa.streams):
            yield from _declared(s, f"{where}.swa.streams[{i}]")
            if len(s.cells) != c.swa.size or not 0 <= s.head <= c.swa.size:  # (find_slot wraps it lazily)
                yield f"{where}.swa.streams[{i}]: {len(s.cells)} cells of {c.swa.size}, head {s.head}"


def _task(t: Any, where: str) -> Iterator[str]:
    if not isinstance(t, Task):
        yield f"{where}: not a Task ({type(t).__name__})"
        return
    yield from _declared(t, where)
    if not _is_tokens(t.tokens):
        yield f"{where}.tokens: not a tuple of token ids"
    if not isinstance(t.children, tuple) or type(t.n_tokens_shared) is not int or type(t.id_parent) is not int:
        yield f"{where}: children a tuple, n_tokens_shared and id_parent integers"
        return
    # server_decision_group_tasks: a parent shares 1 .. n_tokens - 1 tokens with children that
    # name it, and is no child; a task that is no parent shares nothing
    if bool(t.children) != (t.n_tokens_shared > 0) or not 0 <= t.n_tokens_shared < max(1, t.n_tokens):
        yield f"{where}: {len(t.children)} children with n_tokens_shared {t.n_tokens_shared}"
    if t.children and t.id_parent != -1:
        yield f"{where}: a parent that is a child"
    for k, c in enumerate(t.children):
        if not isinstance(c, Task) or c.id_parent != t.id or c.children or c.tokens[: t.n_tokens_shared] != t.tokens[
                : t.n_tokens_shared] or c.n_tokens <= t.n_tokens_shared:
            yield f"{where}.children[{k}]: not a child of {t.id} sharing its first {t.n_tokens_shared} tokens"


def _slot(s: Any, i: int, live: dict[int, Buffer]) -> Iterator[str]:
    where = f"slots[{i}]"
    if not isinstance(s, Slot):
        yield f"{where}: not a Slot ({type(s).__name__})"
        return
    yield from _declared(s, where)
    if s.id != i:
        yield f"{where}: id {s.id}"
    if not isinstance(s.state, SlotState):
        yield f"{where}: state {s.state!r}"
    if (s.task is None) != (s.state == SlotState.IDLE):
        yield f"{where}: a task goes with a busy slot, and only with one (state {s.state}, task {s.task})"
    if s.task is not None:
        yield from _task(s.task, f"{where}.task")
    if s.state == SlotState.WAIT_OTHER and (s.task is None or not s.task.is_child or s.stalled or s.n_gen):
        yield f"{where}: a slot waits for a parent only with a child task, before it does anything"
    if s.restored is not None and not isinstance(s.restored, Checkpoint):
        yield f"{where}.restored: not a Checkpoint"
    yield from _prompt(s.prompt, f"{where}.prompt", live)


def _heap(h: Any) -> Iterator[str]:
    if not isinstance(h, Heap):
        yield f"heap: not a Heap ({type(h).__name__})"
        return
    yield from _declared(h, "heap")
    yield from _declared(h.faults, "heap.faults")
    if any(type(n) is not int or n <= 0 for n in h.faults.armed.values()):
        yield "heap.faults.armed: every count must be a positive integer"
    total = 0
    for bid, b in h.live.items():
        yield from _buffer(b, f"heap.live[{bid}]", h.live)
        if b.id != bid or b.freed:
            yield f"heap.live[{bid}]: buffer #{b.id}, freed {b.freed}"
        total += b.size
    if total != h._live_bytes:
        yield f"heap: {h._live_bytes} live bytes counted, {total} in the live buffers"
    if not isinstance(h.events, list) or h.op < 0:
        yield "heap: the event log must be a list and op >= 0"


def _cache(c: Any, srv: Server) -> Iterator[str]:
    if not isinstance(c, PromptCache):
        yield f"cache: not a PromptCache ({type(c).__name__})"
        return
    yield from _declared(c, "cache")
    if type(c.limit_size) is not int or c.limit_size < 0 or type(c.limit_tokens) is not int:
        yield f"cache: limits {c.limit_size!r}, {c.limit_tokens!r}"
    ids = [e.id for e in c.entries]
    if len(set(ids)) != len(ids):
        yield f"cache: entry ids {ids} repeat"
    for i, e in enumerate(c.entries):
        where = f"cache.entries[{i}]"
        if not isinstance(e, CacheEntry):
            yield f"{where}: not a CacheEntry ({type(e).__name__})"
            continue
        yield from _declared(e, where)
        yield from _prompt(e.prompt, f"{where}.prompt", srv.heap.live)
        for part in ("main", "drft"):
            b = getattr(e, part)
            if b is not None:
                yield from _buffer(b, f"{where}.{part}", srv.heap.live)


def type_invariant(srv: Server) -> list[str]:
    """TypeOK: every variable of the state reachable from ``srv`` is declared and of its type
    and range (the messages name each one that is not)."""
    out: list[str] = list(_declared(srv, "server"))
    if not isinstance(srv.cfg, Config) or not isinstance(srv.design, Design):
        out.append("server: cfg must be a Config and design a Design")
        return out
    out += _heap(srv.heap)
    live = srv.heap.live if isinstance(srv.heap, Heap) else {}
    out += _context(srv.ctx_tgt, "ctx_tgt", srv.cfg)
    if srv.ctx_dft is not None:
        out += _context(srv.ctx_dft, "ctx_dft", srv.cfg)
    if (srv.ctx_dft is None) == srv.cfg.has_draft:
        out.append("ctx_dft: a draft context goes with --draft, and only with it")
    if len(srv.slots) != srv.cfg.n_slots:
        out.append(f"slots: {len(srv.slots)} for n_slots {srv.cfg.n_slots}")
    for i, s in enumerate(srv.slots):
        out += _slot(s, i, live)
    if (srv.cache is None) == srv.cfg.cache_enabled:
        out.append("cache: a prompt cache goes with --cache-ram, and only with it")
    if srv.cache is not None:
        out += _cache(srv.cache, srv)
    for name, kinds in (("deferred", Task | SlotAction), ("requeued", Task | SlotAction | Cancel)):
        q = getattr(srv, name)
        if not isinstance(q, deque) or not all(isinstance(t, kinds) for t in q):
            out.append(f"{name}: a queue of tasks and slot actions" + (" and cancels" if name == "requeued" else ""))
    if type(srv.clock) is not int or type(srv.next_task_id) is not int or srv.clock < 0 or srv.next_task_id < 0:
        out.append(f"clock {srv.clock!r}, next_task_id {srv.next_task_id!r}")
    if srv.crash is not None and not isinstance(srv.crash, Crash):
        out.append("crash: a Crash or None")
    if not all(isinstance(k, str) and isinstance(v, bytes) for k, v in srv.files.items()):
        out.append("files: file name -> bytes")
    if not isinstance(srv.last_result, dict):
        out.append("last_result: a dict")
    return out


__all__ = ["VARIABLES", "type_invariant"]
