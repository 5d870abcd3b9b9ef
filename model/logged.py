"""The logged records: what the server logs of a happening, one class per log kind.

Each record (``Logged``) is a frozen dataclass with the fields the C++ prints of one kind of
line (``Selected``, ``CacheSaved``, ``CkptCreated``, ...), or, for ``Served`` and ``SlotFile``,
of the HTTP reply; each class names the C++ place it mirrors (``file:line`` of the October tree
0c1e570, ``tools/server/`` unless a path is given; docs/SOURCES.md). A field one side
cannot know is ``None`` and matches anything (the log's cache-load line has no length; the
model has no MiB sizes).

These are what the server's log shows and what the model's events are compared to: an event the
server logs too returns its record from ``Event.logged()`` (``pcspec.model.events``: ``Select``
-> ``Selected``, ``CkptCreate`` -> ``CkptCreated``, ``EntryEvict`` -> ``CacheEvicted`` or
``CacheLoaded``, ...), and the log checker yields the same classes from a real log's typed line
events (``pcspec.logcheck.logged``). Comparing the server with the model (``pcspec live``) is a
diff of two streams of these records (``pcspec.live.compare``).

The records import nothing of the events, the model or the checkers.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar


@dataclass(frozen=True, slots=True)
class Logged:
    """A record of what the server logs (or, for ``Served`` and ``SlotFile``, answers).
    Records of one kind are compared field by field; ``None`` on either side matches
    anything."""

    kind: ClassVar[str] = "logged"

    def __init_subclass__(cls, kind: str | None = None) -> None:
        # ``class Selected(Logged, kind=...)`` names the kind. ``dataclass(slots=True)`` builds a new
        # class and comes here again without ``kind``: the one set on the first pass stays.
        # (No ``super()``: object's takes nothing, and in a slots dataclass it would name the
        # class before the rebuild.)
        if kind is not None:
            cls.kind = kind

    def key(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))

    def matches(self, other: Logged) -> bool:
        if type(self) is not type(other):
            return False
        return all(a is None or b is None or a == b for a, b in zip(self.key(), other.key(), strict=True))

    def show(self) -> str:
        parts = [f"{f.name}={getattr(self, f.name)}" for f in fields(self) if getattr(self, f.name) is not None]
        return f"{self.kind}({', '.join(parts)})"


@dataclass(frozen=True, slots=True)
class Selected(Logged, kind="selected"):
    """``selected slot by id (%d)`` / ``by LCP similarity ...`` / ``by LRU ...``
    (get_available_slot, server-context.cpp:1537, 1582, 1611): ``how`` is id, lcp or lru."""

    slot: int | None
    how: str


@dataclass(frozen=True, slots=True)
class CacheSaved(Logged, kind="cache_saved"):
    """``- saving prompt with length %d, ...`` (prompt_save, server-context.cpp:268). A cache
    line carries no slot id."""

    n_tokens: int


@dataclass(frozen=True, slots=True)
class CacheSkipped(Logged, kind="cache_skipped"):
    """alloc refused: ``why`` is ``contained`` (``- prompt is already in the cache``,
    server-task.cpp:1717) or ``oversize`` (``... exceeds cache size limit``, 1732)."""

    why: str


@dataclass(frozen=True, slots=True)
class CacheEvicted(Logged, kind="cache_evicted"):
    """An entry left the cache: ``why`` is ``obsolete`` (``- removing obsolete cached prompt
    with length %d``, server-task.cpp:1742), ``make_room`` (1753), ``limit_bytes`` (1873) or
    ``limit_tokens`` (1887); only the first line prints the length."""

    why: str
    n_tokens: int | None


@dataclass(frozen=True, slots=True)
class CacheLoaded(Logged, kind="cache_loaded"):
    """``- found better prompt with f_keep = %.3f, f_sim = %.3f`` (server-task.cpp:1826): an
    entry was loaded into the slot (and left the cache). The line has no length: the log
    checker takes it from the candidate line whose fractions it repeats."""

    n_tokens: int | None


@dataclass(frozen=True, slots=True)
class CacheLoadFailed(Logged, kind="cache_load_failed"):
    """``failed to restore state with size %zu`` (server-task.cpp:1834, 1852)."""


@dataclass(frozen=True, slots=True)
class CkptRestored(Logged, kind="ckpt_restored"):
    """``restored context checkpoint (pos_min = %d, pos_max = %d, n_tokens = %d, n_past = %d,
    size = %.3f MiB)`` (server-context.cpp:3357)."""

    slot: int | None
    n_tokens: int | None
    pos_min: int | None
    pos_max: int | None
    n_past: int | None


@dataclass(frozen=True, slots=True)
class FullReprocess(Logged, kind="full_reprocess"):
    """``forcing full prompt re-processing due to lack of cache data ...``
    (server-context.cpp:3361)."""

    slot: int | None


@dataclass(frozen=True, slots=True)
class CkptCreated(Logged, kind="ckpt_created"):
    """``created context checkpoint %d of %d (pos_min = %d, pos_max = %d, n_tokens = %d,
    size = %.3f MiB)`` (server-context.cpp:2350)."""

    slot: int | None
    n_tokens: int | None
    pos_min: int | None
    pos_max: int | None


@dataclass(frozen=True, slots=True)
class CkptErased(Logged, kind="ckpt_erased"):
    """A checkpoint erased; ``why``: ``cap`` (``erasing old context checkpoint``,
    server-context.cpp:2316), ``too_close`` (2301), ``supersede`` (2327), ``invalidated``
    (3374) or ``context_shift`` (``slot context shift``, 2928: every checkpoint goes)."""

    slot: int | None
    why: str
    n_tokens: int | None


@dataclass(frozen=True, slots=True)
class PromptCleared(Logged, kind="prompt_cleared"):
    """``clearing prompt with %zu tokens`` (prompt_clear, server-context.cpp:294)."""

    slot: int | None
    n_tokens: int | None


@dataclass(frozen=True, slots=True)
class Released(Logged, kind="released"):
    """``stop processing: n_tokens = %d, truncated = %d`` (release, server-context.cpp:518)."""

    slot: int | None
    n_tokens: int


@dataclass(frozen=True, slots=True)
class Served(Logged, kind="served"):
    """What the HTTP reply (server: ``tokens_cached``, server-task.cpp:356, and the timings'
    ``cache_n``, server-common.cpp:86) or the task's prompt start (model:
    ``PromptStart.n_past``) says of a request: tokens taken from the cache and tokens
    processed."""

    cache_n: int
    prompt_n: int


@dataclass(frozen=True, slots=True)
class SlotFile(Logged, kind="slot_file"):
    """A slot file: tokens saved, restored or erased, as the reply to ``/slots`` says
    (``n_saved``, ``n_restored``, ``n_erased``: server-task.cpp:1627, 1638, 1652) or the
    model operation's result (the October format has no checkpoint appendix)."""

    action: str  # save | restore | erase | failed
    n_tokens: int | None


LOGGED_TYPES: tuple[type[Logged], ...] = (
    Selected, CacheSaved, CacheSkipped, CacheEvicted, CacheLoaded, CacheLoadFailed, CkptRestored,
    FullReprocess, CkptCreated, CkptErased, PromptCleared, Released, Served, SlotFile,
)  # fmt: skip
"""The record kinds, in the order ``pcspec live`` reports differences."""
