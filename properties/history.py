"""The judge's history: what some checks compare against, kept by the judge, not the model.

A few properties compare the state with an earlier one: a published checkpoint with itself
when it was published (IMM-1), a cache entry with itself when its save returned (IMM-2), the
cache before and after a failed save (RB-2), a prompt start with what the slot held when it
began (REUSE-1, PERF-3, RESTORE-2), the checkpoints a prompt start kept (RESTORE-1), the entries a load
decision saw (REUSE-2). The model keeps none of it: it holds the server's state only, like the
C++. The judge subscribes to the model's events as they are emitted (``Heap.watch``) and takes
each snapshot at the moment it names, reading the server's state then (TigerBeetle's checkers
keep their history the same way, apart from the system they check).

Each part is kept only when a judged check needs it (``base.needs``), so a hunt that judges one
property pays for its history alone. The checks of a judgement read what the operation left
here; ``done`` ends the judgement (the records of that operation are dropped, the seals kept).
"""

from __future__ import annotations

from copy import copy
from dataclasses import dataclass, field, replace
from typing import Any

from pcspec.model import events as ev
from pcspec.model.cache import CacheEntry, lcp, unique_bytes
from pcspec.model.checkpoint import Checkpoint
from pcspec.model.events import Event
from pcspec.model.heap import Buffer
from pcspec.model.memory import FULL, SeqMemory, Tokens
from pcspec.model.slot import Slot, TaskType
from pcspec.properties.view import StateView

# The parts of the history, and the events each listens to.
PARTS: dict[str, tuple[type[Event], ...]] = {
    "seals": (ev.PublishCkpt, ev.SaveEnd),  # IMM-1, IMM-2
    "saves": (ev.SaveBegin, ev.SaveEnd, ev.SaveSkipContained),  # RB-2
    "starts": (ev.PromptBegin, ev.PromptStart),  # REUSE-1, PERF-3, RESTORE-1, RESTORE-2
    "loads": (ev.Select, ev.LoadScan),  # REUSE-2
    "files": (ev.FileWrite, ev.FileRestore),  # FILE-1
    # ACC-2, ACC-3, LIMIT-1
    "cache": (ev.Op, ev.SaveBegin, ev.SaveEnd, ev.EntryInsert, ev.EntryEvict, ev.SaveRejectOversize),
}


def buffer_fingerprint(b: Buffer) -> tuple[int, int, int]:
    """A buffer as a comparison sees it: which one, its size, and how many writes it took."""
    return (b.id, b.size, b.version)


def checkpoint_fingerprint(ck: Checkpoint) -> tuple[object, ...]:
    # (a list, not a generator, and no ``buffers()`` call: compared for every published
    # checkpoint after every operation)
    return (
        ck.n_tokens,
        ck.pos_min,
        ck.pos_max,
        tuple([(b.id, b.size, b.version) for b in (ck.tgt, ck.dft, ck.spec) if b is not None]),
    )


def entry_fingerprint(e: CacheEntry) -> tuple[object, ...]:
    return (
        e.prompt.tokens,
        tuple([(b.id, b.size, b.version) for b in (e.main, e.drft) if b is not None]),
        tuple([checkpoint_fingerprint(ck) for ck in e.prompt.checkpoints]),
    )


def file_summary(slot: Slot) -> tuple[Any, ...]:
    """What a slot file must bring back: the tokens and each checkpoint's metadata and
    payloads."""
    return (
        slot.prompt.tokens,
        tuple(
            (ck.n_tokens, ck.pos_min, ck.pos_max, tuple(b.content for b in ck.buffers()))
            for ck in slot.prompt.checkpoints
        ),
    )


def cache_fingerprint(srv: StateView) -> tuple[Any, ...]:
    """What a failed save must leave as it was: the limit and which entries, with which data
    buffers, in which order (changes inside an entry's buffers are IMM-2's business)."""
    if srv.cache is None:
        return ()
    return (
        srv.cache.limit_size,
        tuple(
            (e.id, e.main.id if e.main else 0, e.drft.id if e.drft else 0, len(e.prompt.checkpoints))
            for e in srv.cache.entries
        ),
    )


@dataclass(frozen=True)
class Save:
    """One ``prompt_save``: the cache before it began and after it returned."""

    slot: int
    ok: bool
    before: tuple[Any, ...]
    after: tuple[Any, ...]
    skipped: bool = False  # the prompt was in the cache already (alloc step 1)


@dataclass(frozen=True)
class Start:
    """One prompt start: what the slot held when it began (its checkpoints, copies of each
    context's memory of it) and the checkpoints it kept."""

    slot: int
    task: int
    held: tuple[Checkpoint, ...]
    memories: tuple[tuple[str, SeqMemory], ...]
    kept: tuple[Checkpoint, ...]


@dataclass(frozen=True)
class Load:
    """One load decision a completion task on a slot sharing nothing with its prompt: the
    prompt, the slot's tokens and the entries present when it was made (at the load scan, or
    at the selection when no scan ran), and the entry the scan chose (None: no scan)."""

    task: int
    slot: int
    prompt: Tokens
    slot_tokens: Tokens
    entries: tuple[tuple[int, Tokens], ...]
    scanned: bool
    chosen: int | None


@dataclass(frozen=True)
class Restore:
    """One slot restored from a file: what the file held when the server wrote it (None: the
    file changed since, or the server never wrote it) and what the slot holds now."""

    slot: int
    filename: str
    saved: tuple[Any, ...] | None
    restored: tuple[Any, ...]


@dataclass(frozen=True)
class Eviction:
    """An entry that left the cache, as the judge saw it at that moment (its own numbers, none
    the design reported): ``why`` is the reason it was given, or ``None`` where the judge found
    that reason false; ``unique`` the cache's unique bytes with the entry still in it (and the
    candidate a save was making room for), ``limit`` the byte limit then."""

    entry: int
    reason: str
    why: str | None
    unique: int
    limit: int
    n_tokens: int  # the cache's tokens with the entry still in it
    limit_tokens: int


@dataclass(frozen=True)
class Admission:
    """A save's outcome at the cache's door, by the judge's numbers: an entry ``rejected`` as
    oversize, or published (``entry``), with its own unique bytes, the cache's unique bytes
    after it (published) and the limit then."""

    rejected: bool
    entry: int | None
    own_unique: int
    unique_after: int
    limit: int
    counted: int = 0  # what the design counted it as (shown, never judged)


# The reasons an entry may leave the cache that are not about room (each checked against the
# state where the state can tell: ``Eviction.why``).
EXCUSED_EVICTIONS = ("obsolete", "loaded", "pop_back", "load_failed", "wake")


@dataclass
class History:
    srv: StateView
    parts: frozenset[str]
    # Whether the state is only seen after each operation (a port's observations): the cache at
    # an eviction is gone by then, so an eviction's numbers are the ones its event reports,
    # which the kit's session holds to the model's (pcspec/conform/judge.py).
    observed: bool = False
    sealed_ckpts: dict[int, tuple[object, ...]] = field(default_factory=dict)
    sealed_entries: dict[int, tuple[object, ...]] = field(default_factory=dict)
    saves: list[Save] = field(default_factory=list)
    starts: list[Start] = field(default_factory=list)
    loads: list[Load] = field(default_factory=list)
    restores: list[Restore] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    admissions: list[Admission] = field(default_factory=list)
    # the save in progress: its slot and the entries the cache held when it began
    _saving: list[tuple[int, frozenset[int]]] = field(default_factory=list)
    # every entry object the judge has seen in the cache, by id (an evicted one is gone from
    # the cache's list when its eviction is announced)
    _entries: dict[int, CacheEntry] = field(default_factory=dict)
    _op: str = ""
    # file name -> the bytes the server last wrote there and what they hold (file_summary)
    _written: dict[str, tuple[bytes, tuple[Any, ...]]] = field(default_factory=dict)
    _save_began: list[tuple[int, tuple[Any, ...]]] = field(default_factory=list)
    _skipped: set[int] = field(default_factory=set)  # depths of the saves skipped as contained
    _began: dict[int, tuple[tuple[Checkpoint, ...], tuple[tuple[str, SeqMemory], ...]]] = field(default_factory=dict)
    _pending: Load | None = None  # a selection whose load decision is still to come

    def __post_init__(self) -> None:
        handlers: dict[str, Any] = {
            "seals": {ev.PublishCkpt: self._on_publish, ev.SaveEnd: self._seal_entries},
            "saves": {ev.SaveBegin: self._on_save_begin, ev.SaveEnd: self._on_save_end,
                      ev.SaveSkipContained: self._on_skip},
            "starts": {ev.PromptBegin: self._on_prompt_begin, ev.PromptStart: self._on_prompt_start},
            "loads": {ev.Select: self._on_select, ev.LoadScan: self._on_load_scan},
            "files": {ev.FileWrite: self._on_file_write, ev.FileRestore: self._on_file_restore},
            "cache": {ev.Op: self._on_op, ev.SaveBegin: self._on_cache_save_begin, ev.SaveEnd: self._on_cache_save_end,
                      ev.EntryInsert: self._on_insert, ev.EntryEvict: self._on_evict,
                      ev.SaveRejectOversize: self._on_reject},
        }
        for part in sorted(self.parts):
            for kind, handler in handlers[part].items():
                self.srv.heap.watch(kind.kind, handler)

    def done(self) -> None:
        """The judgement of an operation is over: its records are done with."""
        if self.saves:
            self.saves = []
        if self.starts:
            self.starts = []
        self._settle_pending()
        if self.loads:
            self.loads = []
        if self.restores:
            self.restores = []
        if self.evictions:
            self.evictions = []
        if self.admissions:
            self.admissions = []
        if "cache" in self.parts:
            self._saving.clear()
            self._entries = {e.id: e for e in self.srv.cache.entries} if self.srv.cache is not None else {}
        # (a save or a prompt start an abort cut short never ends)
        self._save_began.clear()
        self._skipped.clear()
        self._began.clear()

    def settled_loads(self) -> list[Load]:
        self._settle_pending()
        return self.loads

    # -- seals (IMM-1, IMM-2) -----------------------------------------------------------------

    def _on_publish(self, e: Event) -> None:
        assert isinstance(e, ev.PublishCkpt)
        self.sealed_ckpts[e.ckpt] = checkpoint_fingerprint(e.checkpoint)

    def _seal_entries(self, e: Event) -> None:
        # What the save built is published now that it returned.
        if self.srv.cache is not None:
            sealed = self.sealed_entries
            for entry in self.srv.cache.entries:
                if entry.id not in sealed:
                    sealed[entry.id] = entry_fingerprint(entry)

    # -- saves (RB-2) ---------------------------------------------------------------------------

    def _on_save_begin(self, e: Event) -> None:
        assert isinstance(e, ev.SaveBegin)
        self._save_began.append((e.slot, cache_fingerprint(self.srv)))

    def _on_skip(self, e: Event) -> None:
        if self._save_began:
            self._skipped.add(len(self._save_began))

    def _on_save_end(self, e: Event) -> None:
        assert isinstance(e, ev.SaveEnd)
        depth = len(self._save_began)
        slot, before = self._save_began.pop()
        skipped = depth in self._skipped
        self._skipped.discard(depth)
        self.saves.append(Save(slot, e.ok, before, cache_fingerprint(self.srv), skipped))

    # -- prompt starts (REUSE-1, PERF-3, RESTORE-1, RESTORE-2) --------------------------------------

    def _on_prompt_begin(self, e: Event) -> None:
        assert isinstance(e, ev.PromptBegin)
        # The checkpoints are immutable objects; the memories are copied.
        held = tuple(self.srv.slots[e.slot].prompt.checkpoints)
        memories = tuple((ctx.name, copy(ctx.seqs[e.slot])) for ctx in self.srv.contexts())
        self._began[e.slot] = (held, memories)

    def _on_prompt_start(self, e: Event) -> None:
        assert isinstance(e, ev.PromptStart)
        held, memories = self._began.pop(e.slot)
        self.starts.append(Start(e.slot, e.task, held, memories, tuple(self.srv.slots[e.slot].prompt.checkpoints)))

    # -- load decisions (REUSE-2) ---------------------------------------------------------------

    def _on_select(self, e: Event) -> None:
        assert isinstance(e, ev.Select)
        self._settle_pending()
        srv = self.srv
        if e.slot is None or srv.cache is None or e.task_type != TaskType.COMPLETION or not e.prompt:
            return
        slot = srv.slots[e.slot]
        if slot.is_processing or lcp(slot.prompt.tokens, e.prompt) != 0:
            return
        entries = tuple((x.id, x.prompt.tokens) for x in srv.cache.entries)
        self._pending = Load(e.task, e.slot, e.prompt, slot.prompt.tokens, entries, False, None)

    def _on_load_scan(self, e: Event) -> None:
        assert isinstance(e, ev.LoadScan)
        p = self._pending
        if p is None or self.srv.cache is None:
            return
        # A selection's load scan (if any) follows it inside the same get_available_slot; a
        # save right before it may have evicted entries (make room): judged on what is left.
        entries = tuple((x.id, x.prompt.tokens) for x in self.srv.cache.entries)
        tokens = self.srv.slots[p.slot].prompt.tokens
        self.loads.append(replace(p, slot_tokens=tokens, entries=entries, scanned=True, chosen=e.chosen))
        self._pending = None

    # -- slot files (FILE-1) ------------------------------------------------------------------

    def _on_file_write(self, e: Event) -> None:
        assert isinstance(e, ev.FileWrite)
        self._written[e.filename] = (self.srv.files[e.filename], file_summary(self.srv.slots[e.slot]))

    def _on_file_restore(self, e: Event) -> None:
        assert isinstance(e, ev.FileRestore)
        written = self._written.get(e.filename)
        pristine = written is not None and written[0] == self.srv.files.get(e.filename)
        saved = written[1] if written is not None and pristine else None
        self.restores.append(Restore(e.slot, e.filename, saved, file_summary(self.srv.slots[e.slot])))

    # -- the cache's door (ACC-2, ACC-3, LIMIT-1): the judge's own numbers --------------------------

    def _on_op(self, e: Event) -> None:
        assert isinstance(e, ev.Op)
        self._op = e.name
        if "cache" in self.parts and self.srv.cache is not None:
            self._entries.update((x.id, x) for x in self.srv.cache.entries)

    def _on_cache_save_begin(self, e: Event) -> None:
        assert isinstance(e, ev.SaveBegin)
        cache = self.srv.cache
        held = frozenset(x.id for x in cache.entries) if cache is not None else frozenset()
        if cache is not None:
            self._entries.update((x.id, x) for x in cache.entries)
        self._saving.append((e.slot, held))

    def _on_cache_save_end(self, e: Event) -> None:
        if self._saving:
            self._saving.pop()

    def _candidate(self) -> tuple[int, list[Buffer]]:
        """What the save in progress would add: the saving slot's state sizes (the contexts'
        own ``get_size``) and its checkpoints' buffers (a copy of a list shares them or is
        made of new ones: either way none the cache holds already, unless shared)."""
        if not self._saving:
            return 0, []
        slot = self.srv.slots[self._saving[-1][0]]
        data = sum(ctx.get_size(slot.id, FULL) for ctx in self.srv.contexts())
        return data, [b for ck in slot.prompt.checkpoints for b in ck.buffers()]

    def _on_insert(self, e: Event) -> None:
        assert isinstance(e, ev.EntryInsert)
        cache = self.srv.cache
        if cache is None:
            return
        entry = next((x for x in cache.entries if x.id == e.entry), None)
        if entry is not None:
            self._entries[entry.id] = entry
        own = unique_bytes([entry]) if entry is not None else 0
        self.admissions.append(Admission(False, e.entry, own, unique_bytes(cache.entries), cache.limit_size))

    def _on_reject(self, e: Event) -> None:
        assert isinstance(e, ev.SaveRejectOversize)
        cache = self.srv.cache
        if cache is None:
            return
        data, bufs = self._candidate()
        self.admissions.append(Admission(True, None, data + sum({b.id: b.size for b in bufs}.values()), 0,
                                         cache.limit_size, e.size))

    def _on_evict(self, e: Event) -> None:
        assert isinstance(e, ev.EntryEvict)
        cache = self.srv.cache
        if cache is None:
            return
        gone = self._entries.get(e.entry)
        with_it = [*cache.entries, *([gone] if gone is not None else [])]
        unique = unique_bytes(with_it)
        if self.observed and e.unique_total is not None and e.limit is not None:
            self.evictions.append(Eviction(e.entry, e.reason, e.reason, e.unique_total, e.limit, 0, 0))
            return
        why: str | None = e.reason
        saving = self._saving[-1] if self._saving else None
        slot = self.srv.slots[saving[0]] if saving is not None else None
        if e.reason == "make_room":
            data, bufs = self._candidate()
            unique = unique_bytes(with_it, bufs) + data if saving is not None else unique
        elif e.reason == "obsolete":
            tokens = gone.prompt.tokens if gone is not None else None
            if slot is None or tokens is None or lcp(tokens, slot.prompt.tokens) != len(tokens):
                why = None  # not a prefix of the prompt being saved
        elif e.reason == "pop_back":
            if saving is None or e.entry in saving[1]:
                why = None  # not the entry this save published
        elif e.reason == "loaded":
            if gone is not None and gone.prompt.tokens:
                why = None  # its prompt did not go to a slot
        elif e.reason == "wake":
            if self._op != "sleep_wake":
                why = None  # only a sleep loses the cache
        elif e.reason not in ("limit_bytes", "limit_tokens", "load_failed"):
            why = None
        n_tokens = sum(x.prompt.n_tokens for x in with_it)
        self.evictions.append(Eviction(e.entry, e.reason, why, unique, cache.limit_size, n_tokens, cache.limit_tokens))

    def _settle_pending(self) -> None:
        if self._pending is not None:
            self.loads.append(self._pending)
            self._pending = None


__all__ = [
    "EXCUSED_EVICTIONS",
    "PARTS",
    "Admission",
    "Eviction",
    "History",
    "Load",
    "Restore",
    "Save",
    "Start",
    "buffer_fingerprint",
    "cache_fingerprint",
    "checkpoint_fingerprint",
    "entry_fingerprint",
    "file_summary",
]
