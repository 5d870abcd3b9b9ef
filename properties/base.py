"""What a property is: a stable ID, a statement, a family, the C++ it concerns, and a pure
check over (state, the events of the last operation).

A check never changes the server. It returns messages that explain themselves (which holder,
which buffer, which bytes); the runner attaches the property ID and the operation index.
Checks are split by family into modules (``immutability``, ``uninit``, ``rollback``,
``accounting``, ``ownership``, ``checkpoints``, ``state``, ``files``), each importing the
model and nothing of the others.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from pcspec.model.checkpoint import Checkpoint
from pcspec.model.events import Event
from pcspec.model.ownership import Holder, entry_holder, slot_holder
from pcspec.properties.view import StateView

if TYPE_CHECKING:
    from pcspec.properties.history import History

Check = Callable[[StateView, Sequence[Event]], list[str]]
C = TypeVar("C", bound=Check)
T = TypeVar("T")
E = TypeVar("E", bound=Event)


# check -> the event kinds it needs (``on_events``). Kept here rather than as an attribute
# of the function, which ``functools.wraps`` would copy onto a wrapper that may judge more.
_EVENT_KINDS: dict[Check, frozenset[str]] = {}


def on_events(*kinds: type[Event] | str) -> Callable[[C], C]:
    """Declares that a check finds nothing unless an event of one of ``kinds`` (event classes
    of ``pcspec.model.events``, or their kind names) is among the events judged (whatever the
    state). The judge then skips it when none is: most model
    operations emit only an ``op`` and a ``generate`` event, and these checks are most of
    the catalogue. The declaration sits on the check so that it changes with the code it
    describes; ``tests/properties/test_judge_shortcuts.py`` runs every declared check without its events
    over fuzzed states and requires nothing found."""

    names = frozenset(k if isinstance(k, str) else k.kind for k in kinds)

    def mark(check: C) -> C:
        _EVENT_KINDS[check] = names
        return check

    return mark


# The event kinds of a *decode step*: an operation that decoded tokens into the slots'
# memories (a prompt batch with no checkpoint, a generation step) and did nothing else.
# ``processing.prompt_batch`` and ``processing.generate_step`` emit ``batch`` and ``generate``
# for that, and anything else they do (a checkpoint, a release, a save, an allocation, a
# fill, a free, an erase, a clear) emits an event of its own.
DECODE_STEP_KINDS = frozenset({"op", "batch", "generate"})

# The event kinds of a *storage-neutral* operation: one that changed no storage (what
# ``on_storage`` lists: heap buffers, the cache's entries and limits, the holders' checkpoint
# lists), a decode step's kinds and those of the operations that route tasks, start prompts
# without erasing or restoring a checkpoint, release slots, write or fail to read slot files,
# or try a save the cache skips or rejects. Every change of the storage emits an event of
# another kind: an allocation, a fill, a copy or a free (``Heap``), a checkpoint created,
# erased, published or restored, an entry inserted or evicted, a prompt cleared, a limit
# changed, a file restored, a restart, a crash, a fault hit. (A reference taken or dropped,
# a list that gains or loses a checkpoint, never comes alone: it is part of one of these.)
# The judge counts a *storage epoch* (``Carry.epoch``), which every operation with an event
# outside this set ends; ``tests/properties/test_judge_shortcuts.py`` compares the whole
# storage before and after every storage-neutral judgement of fuzzed runs of every design and
# mutant and requires it unchanged. A whitelist: a kind added to the model later counts as
# changing the storage until it is listed here.
STORAGE_NEUTRAL_KINDS = DECODE_STEP_KINDS | frozenset({
    "select", "deferred", "requeued", "launch", "load_scan", "cache_state", "release",
    "prompt_begin", "prompt_start", "empty_prompt", "stall", "truncated",
    "save_begin", "save_end", "save_skip_contained", "save_reject_oversize", "idle_save",
    "file_write", "file_corrupted", "file_missing", "file_field_missing",
    "sleep_skipped", "ignored_after_crash",
})

# checks declared ``on_storage``
_ON_STORAGE: set[Check] = set()


def on_storage(check: C) -> C:
    """Declares that a state check reads only the *storage*: heap buffers (sizes, fills,
    contents, reference counts, versions), the cache's entries and limits, and the checkpoint
    lists of the holders; never a slot's tokens or a context's memory. A decode step (the
    events of ``DECODE_STEP_KINDS`` only) changes none of these, so after one the check
    finds what it found at the previous judgement, already reported: the judge skips it
    (half of all judgements are decode steps). ``tests/properties/test_judge_shortcuts.py`` runs every
    declared check after every decode step of fuzzed runs of every design and mutant and
    requires exactly the previous judgement's findings."""
    _ON_STORAGE.add(check)
    return check


# storage check -> the event kinds it reads besides the storage (``also_reads``)
_ALSO_READS: dict[Check, frozenset[str]] = {}


def also_reads(*kinds: type[Event] | str) -> Callable[[C], C]:
    """Declares that a storage check (``on_storage``) reads the events of ``kinds`` too, besides
    the storage: what it found in a judgement with such an event is not carried over to the
    next judgements of the storage epoch (``Judge``'s ``incremental``), since they have no such
    event to find anything in."""
    names = frozenset(k if isinstance(k, str) else k.kind for k in kinds)

    def mark(check: C) -> C:
        _ALSO_READS[check] = names
        return check

    return mark


def events_read(check: Check) -> frozenset[str]:
    """The kinds a storage check declared with ``also_reads`` (none: it reads the storage only)."""
    return _ALSO_READS.get(check, frozenset())


# check -> the parts of the judge's history it reads (``needs``)
_NEEDS: dict[Check, frozenset[str]] = {}


def needs(*parts: str) -> Callable[[C], C]:
    """Declares that a check reads these parts of the judge's history
    (``pcspec.properties.history.PARTS``): the judge keeps only the parts its checks need."""

    def mark(check: C) -> C:
        _NEEDS[check] = frozenset(parts)
        return check

    return mark


def history_parts(check: Check) -> frozenset[str]:
    return _NEEDS.get(check, frozenset())


def history_of(events: Sequence[Event]) -> History:
    """The judge's history, for a check that declared ``needs`` (only a judge's judgement
    carries one: the history is what the judge saw as the operation ran)."""
    history: History | None = getattr(events, "history", None)
    if history is None:
        raise TypeError("this check reads the judge's history: run it through pcspec.properties.judge.Judge")
    return history


def reads_storage_only(check: Check) -> bool:
    return check in _ON_STORAGE


def event_kinds(check: Check) -> frozenset[str] | None:
    """The kinds ``on_events`` declared for ``check``, or None: judged after every operation."""
    return _EVENT_KINDS.get(check)


@dataclass(frozen=True)
class Property:
    id: str
    statement: str
    family: str
    cpp: str  # the C++ places it concerns
    check: Check
    # Whether the check still means something after the operation crashed (the process is
    # gone; state checks would judge a half-finished operation).
    after_crash: bool = False
    advisory: bool = False
    extended: bool = False  # extended catalogue: no expectation preset except for `fixed`


@dataclass
class Carry:
    """What a judge keeps between its judgements for the checks that are incremental: the
    storage epoch of the judgement (``STORAGE_NEUTRAL_KINDS``: the same number means the same
    storage) and each such check's own record, under its property's name. Only a judge made
    ``incremental`` carries one; a check given none computes everything afresh, so that
    every incremental check is its own from-scratch definition too
    (``tests/properties/test_incremental_judge.py`` compares the two on fuzzed walks)."""

    epoch: int = 0
    kept: dict[str, object] = field(default_factory=dict)


def carry_of(events: Sequence[Event]) -> Carry | None:
    """The judge's carry, or None: compute afresh (a plain list of events, a judge that is
    not incremental)."""
    return getattr(events, "carry", None)


class Events(list[Event]):
    """The events of one operation, indexed by kind once (every check asks for a kind), plus
    what several checks derive from the state after it (the holders, the checkpoints they
    hold, the cache's byte counts), computed once per judgement: the checks are pure and the
    state does not change while they run."""

    def __init__(self, events: Sequence[Event], history: History | None = None, carry: Carry | None = None) -> None:
        super().__init__(events)
        self.history = history
        self.carry = carry
        self._by_kind: dict[str, list[Event]] | None = None
        self.holders: list[Holder] | None = None
        self.checkpoints: dict[int, tuple[Checkpoint, list[str]]] | None = None
        self.memo: dict[str, object] = {}

    @property
    def by_kind(self) -> dict[str, list[Event]]:
        """The events by kind, indexed at the first check that asks (most judgements run only
        state checks, which ask for none)."""
        by_kind = self._by_kind
        if by_kind is None:
            by_kind = self._by_kind = {}
            for e in self:
                k = e.kind
                if k in by_kind:
                    by_kind[k].append(e)
                else:
                    by_kind[k] = [e]
        return by_kind


def holders_of(srv: StateView, events: Sequence[Event]) -> list[Holder]:
    """Every holder (``pcspec.model.ownership.holders``, over the view): the slots in order, then
    the cache's entries front first; computed once per judgement."""
    if isinstance(events, Events) and events.holders is not None:
        return events.holders
    out = [slot_holder(s) for s in srv.slots]
    if srv.cache is not None:
        out += [entry_holder(e) for e in srv.cache.entries]
    if isinstance(events, Events):
        events.holders = out
    return out


def held_checkpoints(srv: StateView, events: Sequence[Event]) -> dict[int, tuple[Checkpoint, list[str]]]:
    """Every checkpoint object the holders hold, by id, in the order the holder walk first
    meets it, with the names of its holders in walk order (once per holding)."""
    if isinstance(events, Events) and events.checkpoints is not None:
        return events.checkpoints
    out: dict[int, tuple[Checkpoint, list[str]]] = {}
    for h in holders_of(srv, events):
        name = h.name
        for ck in h.checkpoints:
            got = out.get(ck.id)
            if got is None:
                out[ck.id] = (ck, [name])
            else:
                got[1].append(name)
    if isinstance(events, Events):
        events.checkpoints = out
    return out


def memo(events: Sequence[Event], key: str, compute: Callable[[], T]) -> T:
    """``compute()``, once per judgement under ``key`` (for values of the state that several
    checks read, such as the cache's unique bytes)."""
    if not isinstance(events, Events):
        return compute()
    cache = events.memo
    if key in cache:
        return cache[key]  # type: ignore[return-value]
    value = compute()
    cache[key] = value
    return value


def events_of(events: Sequence[Event], kind: type[E]) -> list[E]:
    """The events of class ``kind``, in order."""
    if isinstance(events, Events):
        return events.by_kind.get(kind.kind, [])  # type: ignore[return-value]  # (keyed by kind)
    return [e for e in events if isinstance(e, kind)]
