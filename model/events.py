"""The event vocabulary: what happens inside the model, one class per kind.

The model emits events (``Event``) while it runs an operation, one frozen dataclass per kind
(``Alloc``, ``Select``, ``CkptCreate``, ...). The class attribute ``kind``, given as a class
keyword (``class Alloc(Event, kind="alloc")``), is the kind's name (in ``pcspec replay`` output,
coverage and the conformance protocol); the fields are typed and named
as the model records them; each class names the C++ place it mirrors (``file:line`` of the
October tree 0c1e570, ``tools/server/`` unless a path is given; docs/SOURCES.md), or
says that it is the model's own (bookkeeping of its symbolic heap, a fault it injected, a
judgement a property needs).

What the server logs of such a happening is a logged record (``pcspec.model.logged``:
``Selected``, ``CacheSaved``, ``CkptCreated``, ...). The two meet in ``Event.logged()``: an
event the server logs too returns its record (``Select`` -> ``Selected``, ``CkptCreate`` ->
``CkptCreated``, ``EntryEvict`` -> ``CacheEvicted`` or ``CacheLoaded``, ...), defined next to
the event; every other event returns None. The log checker yields the same record classes from
its typed line events (``pcspec.logcheck.logged``), so comparing the server with the model
(``pcspec live``) is a diff of two streams of the same classes (``pcspec.live.compare``). The
events themselves stay richer than the records: the properties read the model's own fields (a
checkpoint's id, the prompt, the checkpoints a prompt start kept), which no log shows.

``op``, the index of the model operation an event belongs to, is not a dataclass field: the
heap stamps it when the event is emitted (``Heap.emit``), through the slot's descriptor, so an
emission site constructs only what it knows (``heap.emit(CkptCreate(slot=..., ...))``) and
two events compare equal by their fields alone.

Fields some emissions leave out (``CkptErase.cause``, ``EntryEvict.unique_total``, ...) are
``None`` when left out, and ``to_json`` omits them (``_OPTIONAL``): the JSON form of every
event is what it was when events were a kind and a dictionary, in emission order.

The model imports nothing of the checkers; the log checker and ``pcspec live`` import this.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar

from pcspec.model.logged import (
    CacheEvicted,
    CacheLoaded,
    CacheLoadFailed,
    CacheSaved,
    CacheSkipped,
    CkptCreated,
    CkptErased,
    CkptRestored,
    FullReprocess,
    Logged,
    PromptCleared,
    Released,
    Selected,
)

if TYPE_CHECKING:
    from pcspec.model.checkpoint import Checkpoint
    from pcspec.model.memory import Tokens


class Event:
    """One thing that happened inside a model operation (``op``: its index in the trace)."""

    __slots__ = ("op",)
    op: int
    kind: ClassVar[str] = "event"
    _OPTIONAL: ClassVar[frozenset[str]] = frozenset()  # fields ``to_json`` omits when None
    _OBJECTS: ClassVar[frozenset[str]] = frozenset()  # model objects, never in the JSON form

    def __init_subclass__(cls, kind: str | None = None) -> None:
        # ``class Alloc(Event, kind=...)`` names the kind. ``dataclass(slots=True)`` builds a new
        # class and comes here again without ``kind``: the one set on the first pass stays.
        if kind is not None:
            cls.kind = kind

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.op, "kind": self.kind}
        optional, objects = self._OPTIONAL, self._OBJECTS
        for f in fields(self):  # type: ignore[arg-type]  # (every concrete event is a dataclass)
            if f.name in objects:
                continue
            value = getattr(self, f.name)
            if value is None and f.name in optional:
                continue
            out[f.name] = value
        return out

    def logged(self) -> Logged | None:
        """What the server logs of this event (the shared record), or None: not logged."""
        return None

    def __reduce__(self) -> tuple[Any, ...]:
        # A frozen dataclass with slots pickles (and copies) its fields only: keep ``op`` too
        # (a deep copy of a ``Server`` copies its event history).
        values = tuple(getattr(self, f.name) for f in fields(self))  # type: ignore[arg-type]
        return (_rebuild, (type(self), getattr(self, "op", None), values))


stamp: Callable[[Event, int], None] = Event.__dict__["op"].__set__
"""Sets an event's ``op`` (``Heap.emit``): the slot's own setter, which a frozen dataclass's
``__setattr__`` does not stand in front of."""


def _rebuild(cls: type[Event], op: int | None, values: tuple[Any, ...]) -> Event:
    e = cls(*values)
    if op is not None:
        stamp(e, op)
    return e


def logged(events: Iterable[Event]) -> list[Logged]:
    """The records of the events the server logs too, in emission order."""
    out: list[Logged] = []
    for e in events:
        rec = e.logged()
        if rec is not None:
            out.append(rec)
    return out


# --------------------------------------------------------------------------------------------
# the symbolic heap (model/heap.py): the model's own bookkeeping


@dataclass(frozen=True, slots=True)
class Alloc(Event, kind="alloc"):
    """Model-only: a buffer of the symbolic heap was allocated (the ``resize`` or
    ``make_shared`` of a state buffer; ``zeroed``: value-initialized)."""

    buf: int
    size: int
    role: str
    zeroed: bool


@dataclass(frozen=True, slots=True)
class AllocFailed(Event, kind="alloc_failed"):
    """An allocation threw ``std::bad_alloc`` (an injected fault at ``site``, or beyond the
    model's ``host_ram``). Model-only as such: the C++ logs the ``catch`` that handles it
    (``SaveBadAlloc``, ``CkptCreateFailed``)."""

    size: int
    role: str
    site: str | None


@dataclass(frozen=True, slots=True)
class Fill(Event, kind="fill"):
    """Model-only: a state read wrote ``n`` bytes of a buffer from offset 0
    (``llama_state_seq_get_data_ext``, src/llama-context.cpp:3191-3240)."""

    buf: int
    n: int
    complete: bool


@dataclass(frozen=True, slots=True)
class CopyPayload(Event, kind="copy_payload"):
    """A checkpoint payload deep-copied (the ``std::vector`` copy of ``states.push_back``'s
    checkpoint list, server-task.cpp:1779)."""

    src: int
    dst: int
    bytes: int
    role: str


@dataclass(frozen=True, slots=True)
class Free(Event, kind="free"):
    """Model-only: the last reference to a buffer went away."""

    buf: int
    size: int


@dataclass(frozen=True, slots=True)
class FaultHit(Event, kind="fault_hit"):
    """Model-only: an armed fault fired at ``site`` (``Faults.SITES``)."""

    site: str


# --------------------------------------------------------------------------------------------
# checkpoint lists (model/checkpoint.py)


@dataclass(frozen=True, slots=True)
class PublishCkpt(Event, kind="publish_ckpt"):
    """Model-only: a checkpoint's first holder took it (``emplace_back``,
    server-context.cpp:2334; #30137: ``push_back`` after the fill): from now on later
    operations can reach it. ``checkpoint`` is the object itself, for an observer that
    watches the run (it is not part of the JSON form or of equality)."""

    ckpt: int
    checkpoint: Checkpoint = field(compare=False, repr=False)
    _OBJECTS: ClassVar[frozenset[str]] = frozenset({"checkpoint"})


# --------------------------------------------------------------------------------------------
# the prompt cache (model/cache.py; server-task.cpp: server_prompt_cache)


@dataclass(frozen=True, slots=True)
class EntryInsert(Event, kind="entry_insert"):
    """``states.push_back`` (server-task.cpp:1779): an entry joined the cache, with the unique
    bytes it brings and the cache's after it."""

    entry: int
    n_tokens: int
    own_unique: int
    unique_after: int
    limit: int


@dataclass(frozen=True, slots=True)
class EntryEvict(Event, kind="entry_evict"):
    """An entry left the cache. ``reason``: ``obsolete`` (alloc, server-task.cpp:1742-1744),
    ``make_room`` (1753-1756), ``limit_bytes`` (update, 1873-1875), ``limit_tokens``
    (1887-1890), ``loaded`` (load, 1864: ``loaded_tokens`` is its length), ``pop_back``
    (#30137's prompt_save), ``load_failed`` (``fixed``), ``wake`` (a sleep loses the cache).
    ``unique_total`` and ``limit``: unique accounting at a make-room or byte-limit eviction
    (what the eviction is judged on)."""

    entry: int
    reason: str
    n_tokens: int
    loaded_tokens: int | None = None
    unique_total: int | None = None
    limit: int | None = None
    _OPTIONAL: ClassVar[frozenset[str]] = frozenset({"loaded_tokens", "unique_total", "limit"})

    def logged(self) -> Logged | None:
        if self.reason == "loaded":
            return CacheLoaded(self.loaded_tokens)
        if self.reason in ("obsolete", "make_room", "limit_bytes", "limit_tokens"):
            return CacheEvicted(self.reason, self.n_tokens)
        return None


@dataclass(frozen=True, slots=True)
class SaveSkipContained(Event, kind="save_skip_contained"):
    """``- prompt is already in the cache, skipping`` (alloc step 1, server-task.cpp:1717)."""

    entry: int

    def logged(self) -> Logged | None:
        return CacheSkipped("contained")


@dataclass(frozen=True, slots=True)
class EntryRefresh(Event, kind="entry_refresh"):
    """Model-only: an entry moved to the back of the cache (the newest), as a design that
    counts a use may do (``PromptCache.refresh``; the C++ never reorders)."""

    entry: int


@dataclass(frozen=True, slots=True)
class SaveRejectOversize(Event, kind="save_reject_oversize"):
    """``- prompt state size ... exceeds cache size limit ..., skipping``
    (server-task.cpp:1732): ``size`` as the variant counts it, ``own_unique`` what the entry
    alone holds."""

    size: int
    own_unique: int
    limit: int

    def logged(self) -> Logged | None:
        return CacheSkipped("oversize")


@dataclass(frozen=True, slots=True)
class SaveBadAlloc(Event, kind="save_bad_alloc"):
    """``failed to allocate memory for prompt cache state`` (alloc's ``catch
    (std::bad_alloc)``, server-task.cpp:1768)."""

    site: str


@dataclass(frozen=True, slots=True)
class LimitChange(Event, kind="limit_change"):
    """``- cache size limit reduced to ... MiB`` (server-task.cpp:1770-1772), for good."""

    old: int
    new: int


@dataclass(frozen=True, slots=True)
class SaveFillShort(Event, kind="save_fill_short"):
    """A save's state read came up short: #30137's ``failed to save complete prompt state``
    (its prompt_save pops the entry; not in 0c1e570), or ``fixed``'s transactional save."""

    entry: int


@dataclass(frozen=True, slots=True)
class LoadScan(Event, kind="load_scan"):
    """The load's look for a better prompt (server-task.cpp:1793-1826): the slot's load
    baseline ``(f_keep, f_sim)``, each entry's (front first), the entry chosen (None: none better)."""

    base: tuple[float, float]
    candidates: list[tuple[float, float]]
    chosen: int | None


@dataclass(frozen=True, slots=True)
class LoadFailed(Event, kind="load_failed"):
    """``failed to restore state with size %zu`` (server-task.cpp:1834 for the target, 1852
    for the draft; ``ctx`` says which)."""

    entry: int
    ctx: str

    def logged(self) -> Logged | None:
        return CacheLoadFailed()


@dataclass(frozen=True, slots=True)
class CacheState(Event, kind="cache_state"):
    """``- cache state: %zu prompts, %.3f MiB (limits ...)`` at the end of update
    (server-task.cpp:1894)."""

    n: int
    size: int
    limit: int
    n_tokens: int


# --------------------------------------------------------------------------------------------
# a slot (model/slot.py; server-context.cpp: server_slot)


@dataclass(frozen=True, slots=True)
class SaveBegin(Event, kind="save_begin"):
    """``- saving prompt with length %d, total state size ...`` (prompt_save,
    server-context.cpp:268), before alloc."""

    slot: int
    n_tokens: int

    def logged(self) -> Logged | None:
        return CacheSaved(self.n_tokens)


@dataclass(frozen=True, slots=True)
class SaveEnd(Event, kind="save_end"):
    """Model-only: prompt_save returned ``ok`` (server-context.cpp:258-282); what it built
    is published from here on."""

    slot: int
    ok: bool


@dataclass(frozen=True, slots=True)
class PromptLoadFailed(Event, kind="prompt_load_failed"):
    """``failed to load prompt from cache`` (prompt_load, server-context.cpp:287): the slot
    is cleared next."""

    slot: int


@dataclass(frozen=True, slots=True)
class PromptClear(Event, kind="prompt_clear"):
    """``clearing prompt with %zu tokens`` (prompt_clear, server-context.cpp:294): tokens and
    checkpoints. ``restored_by_task``: the id of the checkpoint the running task restored,
    lost with them, else None."""

    slot: int
    n_tokens: int
    task: int
    restored_by_task: int | None

    def logged(self) -> Logged | None:
        return PromptCleared(self.slot, self.n_tokens)


@dataclass(frozen=True, slots=True)
class Release(Event, kind="release"):
    """``stop processing: n_tokens = %d, truncated = %d`` (release, server-context.cpp:518).
    ``error``: what ``send_error`` answered the task with; ``token``: the last one sampled
    (sent in the reply, never decoded; None after an error)."""

    slot: int
    task: int
    n_tokens: int
    error: str | None
    token: int | None

    def logged(self) -> Logged | None:
        return Released(self.slot, self.n_tokens)


# --------------------------------------------------------------------------------------------
# the server (model/server.py; server-context.cpp, server-queue.cpp)


@dataclass(frozen=True, slots=True)
class Op(Event, kind="op"):
    """Model-only: an operation of the trace begins (``name``, with its arguments; the JSON
    form has them as fields of their own, as the trace line does)."""

    name: str
    args: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "kind": self.kind, "name": self.name, **self.args}


@dataclass(frozen=True, slots=True)
class IgnoredAfterCrash(Event, kind="ignored_after_crash"):
    """Model-only: an operation sent to a server that crashed does nothing."""

    op_name: str


@dataclass(frozen=True, slots=True)
class DecodeRefused(Event, kind="decode_refused"):
    """``the tokens of sequence %d in the input batch have inconsistent sequence positions``
    (llama_batch_allocr::init, src/llama-batch.cpp:322-346 of the October tree): the batch puts
    sequence ``seq`` at ``start`` while its memory in context ``context`` ("tgt" or "dft") ends
    at ``pos_max`` (not -1, and not ``start - 1``). The decode of that context returns -1."""

    context: str
    seq: int
    pos_max: int
    start: int


@dataclass(frozen=True, slots=True)
class Crash(Event, kind="crash"):
    """The process died at ``where``: a ``GGML_ABORT`` (``pos_min == -1`` at prompt start,
    server-context.cpp:3284; a refused ``seq_rm``, common/common.cpp:1536-1562; ...) or an
    uncaught exception. Nothing more is logged."""

    where: str
    message: str


@dataclass(frozen=True, slots=True)
class SleepSkipped(Event, kind="sleep_skipped"):
    """A busy server never sleeps (server-queue.cpp:290-297, server-context.cpp:2806-2811)."""


@dataclass(frozen=True, slots=True)
class Restart(Event, kind="restart"):
    """Model-only: the process started again with the flags in ``changes`` (the JSON form
    has them as fields of their own)."""

    changes: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "kind": self.kind, **self.changes}


@dataclass(frozen=True, slots=True)
class Deferred(Event, kind="deferred"):
    """``queue_tasks.defer`` (server-context.cpp:2388-2405 for a task, 2537, 2587, 2652 for a
    slot action: ``action``): no slot now (``slot`` None) or the slot is busy."""

    task: int
    slot: int | None
    action: str | None = None
    _OPTIONAL: ClassVar[frozenset[str]] = frozenset({"action"})


@dataclass(frozen=True, slots=True)
class Requeued(Event, kind="requeued"):
    """``pop_deferred_task`` (server-queue.cpp:90-113, called on ``released``'s release,
    server-context.cpp:1282-1284): one deferred task goes back to the queue's front."""

    task: int
    released: int


@dataclass(frozen=True, slots=True)
class IdleSave(Event, kind="idle_save"):
    """``saving idle slot to prompt cache`` (process_single_task, server-context.cpp:2420)."""

    slot: int


@dataclass(frozen=True, slots=True)
class Launch(Event, kind="launch"):
    """``processing task, is_child = %d`` (launch_slot_with_task, server-context.cpp:1810)."""

    slot: int
    task: int


@dataclass(frozen=True, slots=True)
class Group(Event, kind="group"):
    """``server_decision_group_tasks`` made a parent task of ``children`` sharing its first
    ``n_shared`` tokens (server-decision.cpp:1139-1169 of b11549, 810-840 of b11434)."""

    task: int
    children: tuple[int, ...]
    n_shared: int


@dataclass(frozen=True, slots=True)
class DeferredChildren(Event, kind="deferred_children"):
    """``not enough free slots for child tasks ... defer task`` (server-context.cpp:2761-2769 of
    b11549): the parent's slot is free but ``get_free_slots`` found ``n_free`` of the
    ``n_children`` slots its children need."""

    task: int
    slot: int
    n_free: int
    n_children: int


@dataclass(frozen=True, slots=True)
class CopyPrompt(Event, kind="copy_prompt"):
    """``copying shared prompt (%d tokens) to child %d`` (server-context.cpp:3840-3842 of b11549):
    ``slot``'s memory and prompt copied to ``other`` (``copy_prompt_to``, 761-766); ``ckpts``: the
    checkpoints the copied list holds (new objects, or the parent's own under ``shared_object``)."""

    slot: int
    other: int
    task: int
    n_tokens: int
    ckpts: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Cancel(Event, kind="cancel"):
    """A ``SERVER_TASK_TYPE_CANCEL`` of ``task`` (server-context.cpp:2797-2805 of b11549), which
    ``server_response_reader::stop`` posts for every unfinished task of a request once one of
    them failed (server-queue.cpp:580-621 of b11549); ``slot`` None: no slot held it any more."""

    task: int
    slot: int | None


@dataclass(frozen=True, slots=True)
class Select(Event, kind="select"):
    """get_available_slot's choice (server-context.cpp:1528-1640): ``how`` is ``pinned`` (the
    task's ``id_slot``, logged "selected slot by id", 1537), ``lcp`` (1582) or ``lru`` (1611);
    ``slot`` None: no idle slot, nothing logged. ``update_cache``: the slot is saved and a
    better prompt loaded (1615-1636); only a completion task (``task_type``) touches the
    cache. ``prompt``: the task's tokens."""

    task: int
    slot: int | None
    how: str
    update_cache: bool
    prompt: Tokens
    task_type: str

    def logged(self) -> Logged | None:
        # A task pinned by id is logged "by id" even when the similarity scan confirms the slot
        # (1537; the LCP line is printed only for unpinned tasks, 1581-1584): the event says
        # ``lcp`` then, and the caller, who knows which tasks were pinned, says ``id``.
        if self.slot is None:
            return None
        return Selected(self.slot, "id" if self.how == "pinned" else self.how)


@dataclass(frozen=True, slots=True)
class FileMissing(Event, kind="file_missing"):
    """Model-only: a corruption of a slot file that does not exist does nothing."""

    filename: str


@dataclass(frozen=True, slots=True)
class FileFieldMissing(Event, kind="file_field_missing"):
    """Model-only: a corruption of a named field the file does not have does nothing."""

    filename: str
    field: str


@dataclass(frozen=True, slots=True)
class FileCorrupted(Event, kind="file_corrupted"):
    """Model-only: a slot file was changed on disk (``size``: its bytes after)."""

    filename: str
    size: int


# --------------------------------------------------------------------------------------------
# prompt processing and checkpoints (model/processing.py; server-context.cpp: update_slots)


@dataclass(frozen=True, slots=True)
class CkptErase(Event, kind="ckpt_erase"):
    """A checkpoint left a slot's list. ``reason``: ``too_close`` (create_checkpoint's sweep,
    server-context.cpp:2301; ``full``: the list was full when the sweep began), ``cap``
    (2316), ``supersede`` (2327, November), ``invalidated`` (prompt start, 3374: with the
    ``pos_max``, ``pos_next`` and ``n_prefix`` it is judged on, or a contained failure's
    ``cause``), ``context_shift`` (``prompt.clear()``, 2928-2950). ``restored_by_task``: the
    running task restored it; ``list_len``: the list's length before."""

    slot: int
    ckpt: int
    reason: str
    task: int
    restored_by_task: bool
    n_tokens: int
    list_len: int
    pos_max: int | None = None
    pos_next: int | None = None
    n_prefix: int | None = None
    cause: str | None = None
    full: bool | None = None
    _OPTIONAL: ClassVar[frozenset[str]] = frozenset({"pos_max", "pos_next", "n_prefix", "cause", "full"})

    def logged(self) -> Logged | None:
        return CkptErased(self.slot, self.reason, self.n_tokens)


@dataclass(frozen=True, slots=True)
class CkptRestore(Event, kind="ckpt_restore"):
    """``restored context checkpoint (pos_min, pos_max, n_tokens, n_past, size)``
    (server-context.cpp:3357)."""

    slot: int
    ckpt: int
    task: int
    n_tokens: int
    n_past: int

    def logged(self) -> Logged | None:
        return CkptRestored(self.slot, self.n_tokens, None, None, self.n_past)


@dataclass(frozen=True, slots=True)
class EmptyPrompt(Event, kind="empty_prompt"):
    """``empty prompt - releasing slot`` (server-context.cpp:3145-3147)."""

    slot: int
    task: int


@dataclass(frozen=True, slots=True)
class SeqRmRefused(Event, kind="seq_rm_refused"):
    """Model-only (``fixed``): the memory refused ``seq_rm`` at ``p0`` and the prompt is
    re-processed; the C++ aborts there (common/common.cpp:1536-1562)."""

    slot: int
    ctx: str
    p0: int


@dataclass(frozen=True, slots=True)
class PromptBegin(Event, kind="prompt_begin"):
    """Model-only: the ``SLOT_STATE_STARTED`` branch of ``update_slots`` begins for this
    slot's task (server-context.cpp:3121): nothing of the slot has changed yet."""

    slot: int
    task: int


@dataclass(frozen=True, slots=True)
class PromptStart(Event, kind="prompt_start"):
    """A task's prompt starts (``SLOT_STATE_STARTED``, server-context.cpp:3121-3407): the
    shared prefix, the tokens kept (``n_past``), the checkpoint restored or why the prompt is
    re-processed (``forcing full prompt re-processing``, 3361), and the prompt."""

    slot: int
    task: int
    n_prefix: int
    n_slot_tokens: int
    n_past: int
    restored: int | None
    reprocess: str | None
    pos_next: int
    prompt: Tokens
    cache_prompt: bool

    def logged(self) -> Logged | None:
        if self.reprocess is not None and self.n_prefix > 0:
            return FullReprocess(self.slot)
        return None


@dataclass(frozen=True, slots=True)
class Batch(Event, kind="batch"):
    """A slot's share of one batch (server-context.cpp:3409-3616: the fill, its breaks, the
    ``do_checkpoint`` decision) and the inputs of the creation rules: whether the
    task makes checkpoints (``needs``), its prompt's length and message spans, the list and
    ``pos_min`` at the fill. ``room`` is what was left of ``n_batch`` when the slot's fill
    began (the loop's ``batch.size() < n_batch``, 3505): a fill that put fewer tokens and did
    not reach the prompt's end stopped at a break. ``wait_shared``: the parent of shared-prefix
    children still waiting, whose fill stops at ``n_tokens_shared`` (3945-3948 of b11549)."""

    slot: int
    task: int
    start: int
    n: int
    room: int
    checkpoint: bool
    needs: bool
    n_prompt: int
    spans: tuple[int, ...]
    last_user: int
    listed: tuple[int, ...]
    pos_min: int
    wait_shared: int | None = None
    _OPTIONAL: ClassVar[frozenset[str]] = frozenset({"wait_shared"})


@dataclass(frozen=True, slots=True)
class Stall(Event, kind="stall"):
    """A pass in which a prompt-processing slot added no token: it holds more tokens than
    its prompt. Measured on a real server: a livelock, not the assert the source suggests
    (no progress is made)."""

    slot: int
    task: int
    n_tokens: int
    n_prompt: int


@dataclass(frozen=True, slots=True)
class CkptCreateSkipped(Event, kind="ckpt_create_skipped"):
    """Model-only (``fixed``): the list is full of the checkpoint this task restored; none is
    made."""

    slot: int
    task: int
    n_tokens: int
    ckpt: int


@dataclass(frozen=True, slots=True)
class CkptKeptRestored(Event, kind="ckpt_kept_restored"):
    """Model-only (``fixed``): the restored checkpoint is kept instead of being superseded
    by a byte-identical one."""

    slot: int
    ckpt: int
    task: int
    n_tokens: int


@dataclass(frozen=True, slots=True)
class CkptCreateFailed(Event, kind="ckpt_create_failed"):
    """create_checkpoint threw ``std::bad_alloc``: caught per slot by ``iterate``
    (server-context.cpp:2711-2720), which releases the slot; ``fixed`` contains it."""

    slot: int
    task: int
    reason: str


@dataclass(frozen=True, slots=True)
class CkptCreate(Event, kind="ckpt_create"):
    """``created context checkpoint %d of %d (pos_min, pos_max, n_tokens, size)``
    (create_checkpoint, server-context.cpp:2350). ``identical_to_restored``: byte-identical
    to the checkpoint the task restored."""

    slot: int
    ckpt: int
    task: int
    n_tokens: int
    pos_min: int
    pos_max: int
    identical_to_restored: bool

    def logged(self) -> Logged | None:
        return CkptCreated(self.slot, self.n_tokens, self.pos_min, self.pos_max)


@dataclass(frozen=True, slots=True)
class Generate(Event, kind="generate"):
    """A sampled ``token`` decoded (handle_last_sampled_token, server-context.cpp:475-511:
    added to the batch at 484 and to the prompt at 509)."""

    slot: int
    task: int
    n_tokens: int
    token: int


@dataclass(frozen=True, slots=True)
class Truncated(Event, kind="truncated"):
    """Generation stops at ``n_ctx`` with context shift off (process_token,
    server-context.cpp:1866)."""

    slot: int
    task: int
    n_tokens: int


@dataclass(frozen=True, slots=True)
class ContextShift(Event, kind="context_shift"):
    """``slot context shift, n_keep = %d, n_left = %d, n_discard = %d`` (pre_decode,
    server-context.cpp:2928)."""

    slot: int
    n_keep: int
    n_left: int
    n_discard: int


# --------------------------------------------------------------------------------------------
# the llama context (model/context.py; src/llama-context.cpp)


@dataclass(frozen=True, slots=True)
class StateReadShort(Event, kind="state_read_short"):
    """``llama_state_seq_get_data_ext`` wrote fewer bytes than ``get_size`` said
    (src/llama-context.cpp:3191-3240): nothing (the write threw) or ``written`` bytes."""

    ctx: str
    seq: int
    buf: int
    size: int
    written: int | None = None
    _OPTIONAL: ClassVar[frozenset[str]] = frozenset({"written"})


@dataclass(frozen=True, slots=True)
class StateWriteFailed(Event, kind="state_write_failed"):
    """``llama_state_seq_set_data_ext`` failed (src/llama-context.cpp:4339-4352): ``cause``
    is ``fault``, ``magic`` (a zero-filled buffer) or ``corrupt``."""

    ctx: str
    seq: int
    buf: int
    cause: str


@dataclass(frozen=True, slots=True)
class UninitLoaded(Event, kind="uninit_loaded"):
    """Model-only: ``set_data_ext`` read a buffer with ``unwritten`` bytes, which nothing in
    the C++ checks."""

    ctx: str
    seq: int
    buf: int
    unwritten: int


# --------------------------------------------------------------------------------------------
# slot files (model/slot_files.py; server-context.cpp: /slots)


@dataclass(frozen=True, slots=True)
class FileWrite(Event, kind="file_write"):
    """A slot saved to a file (server-context.cpp:2526-2575): the counts reported, the file's
    bytes, its unwritten bytes and its appendix's ``(n_tokens, pos_min, pos_max)``."""

    slot: int
    filename: str
    n_saved: int
    n_written: int
    size: int
    unwritten: int
    checkpoints: list[tuple[int, int, int]]


@dataclass(frozen=True, slots=True)
class FileRestoreBegin(Event, kind="file_restore_begin"):
    """Model-only: a slot restore begins (server-context.cpp:2576): nothing of the slot has
    changed yet. A restore a release re-queued runs right after what re-queued it (the idle-slot
    save of a task re-queued by the same release, which may have just cleared this slot); the
    conformance kit observes what came before at this event, before the file is installed."""

    slot: int
    filename: str


@dataclass(frozen=True, slots=True)
class FileRestoreFailed(Event, kind="file_restore_failed"):
    """``Unable to restore slot: <reason>`` (server-context.cpp:2624): the slot is cleared."""

    slot: int
    filename: str
    reason: str


@dataclass(frozen=True, slots=True)
class FileSemanticMismatch(Event, kind="file_semantic_mismatch"):
    """Model-only: the restored tokens are not what the state describes (the blob is opaque to
    the server, which installs them as written)."""

    filename: str


@dataclass(frozen=True, slots=True)
class FileRestore(Event, kind="file_restore"):
    """A slot restored from a file (server-context.cpp:2576-2640; the appendix as #26004
    merged it): the counts reported and the reader's, the file's size, what became of its
    appendix."""

    slot: int
    filename: str
    n_restored: int
    n_read: int
    consumed: int
    size: int
    appendix: str


@dataclass(frozen=True, slots=True)
class FileAppendixIgnored(Event, kind="file_appendix_ignored"):
    """``... context checkpoint appendix ... - ignored`` (#30137's merged diff, #26004): a
    damaged or (``fixed``) implausible appendix; the tokens are restored without checkpoints."""

    filename: str
    reason: str | None


@dataclass(frozen=True, slots=True)
class FileDraftDropped(Event, kind="file_draft_dropped"):
    """The test load of a draft checkpoint failed (#30137's merged diff): the draft data is dropped."""

    filename: str


EVENT_TYPES: tuple[type[Event], ...] = (
    Alloc, AllocFailed, Fill, CopyPayload, Free, FaultHit, PublishCkpt, EntryInsert, EntryEvict,
    SaveSkipContained, SaveRejectOversize, SaveBadAlloc, LimitChange, SaveFillShort, LoadScan, LoadFailed,
    CacheState, SaveBegin, SaveEnd, PromptLoadFailed, PromptClear, Release, Op, IgnoredAfterCrash, Crash,
    SleepSkipped, Restart, Deferred, Requeued, IdleSave, Launch, Group, DeferredChildren, CopyPrompt, Cancel,
    Select, FileMissing, FileFieldMissing,
    FileCorrupted, CkptErase, CkptRestore, EmptyPrompt, SeqRmRefused, PromptBegin, PromptStart, Batch, Stall,
    CkptCreateSkipped, CkptKeptRestored, CkptCreateFailed, CkptCreate, Generate, Truncated, ContextShift,
    StateReadShort, StateWriteFailed, UninitLoaded, FileWrite, FileRestoreBegin, FileRestoreFailed,
    FileSemanticMismatch,
    FileRestore, FileAppendixIgnored, FileDraftDropped,
)  # fmt: skip
"""Every event kind the model emits."""

BY_KIND: dict[str, type[Event]] = {t.kind: t for t in EVENT_TYPES}
