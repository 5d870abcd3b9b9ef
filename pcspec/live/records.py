"""One event vocabulary for the server and the model: typed records, one class per kind.

The model emits ``pcspec.model.heap.Event`` (a kind and a dict); the log checker reads
``pcspec.logcheck.events`` (one class per log line). Both become the records below, with the
fields the C++ logs; comparing the server with the model is then a diff of two record lists.
A field one side cannot know is ``None`` and matches anything (the log's cache-load line has no
length; the model has no MiB sizes).

This is the comparison layer of ``pcspec live``; folding the model's and the log checker's
event types into these classes (one vocabulary in the whole code base) is pending: the model
and the log checker are owned elsewhere (docs/LIVE.md, "Event vocabulary").
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar


@dataclass(frozen=True)
class Record:
    kind: ClassVar[str] = "record"
    # records the comparison looks at per slot carry ``slot`` (None: unknown or a srv line)

    def key(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))

    def matches(self, other: Record) -> bool:
        if type(self) is not type(other):
            return False
        return all(a is None or b is None or a == b for a, b in zip(self.key(), other.key(), strict=True))

    def show(self) -> str:
        parts = [f"{f.name}={getattr(self, f.name)}" for f in fields(self) if getattr(self, f.name) is not None]
        return f"{self.kind}({', '.join(parts)})"


@dataclass(frozen=True)
class Selected(Record):
    """get_available_slot's choice: ``how`` is id, lcp or lru."""

    slot: int | None
    how: str
    kind: ClassVar[str] = "selected"


@dataclass(frozen=True)
class CacheSaved(Record):
    """A prompt saved into the cache (" - saving prompt with length N")."""

    n_tokens: int
    kind: ClassVar[str] = "cache_saved"


@dataclass(frozen=True)
class CacheSkipped(Record):
    """alloc refused: ``why`` is contained (already cached) or oversize."""

    why: str
    kind: ClassVar[str] = "cache_skipped"


@dataclass(frozen=True)
class CacheEvicted(Record):
    """An entry left the cache: ``why`` is obsolete, make_room, limit_bytes or limit_tokens."""

    why: str
    n_tokens: int | None
    kind: ClassVar[str] = "cache_evicted"


@dataclass(frozen=True)
class CacheLoaded(Record):
    """An entry was loaded into the slot (and left the cache)."""

    n_tokens: int | None
    kind: ClassVar[str] = "cache_loaded"


@dataclass(frozen=True)
class CacheLoadFailed(Record):
    kind: ClassVar[str] = "cache_load_failed"


@dataclass(frozen=True)
class CkptRestored(Record):
    slot: int | None
    n_tokens: int | None
    pos_min: int | None
    pos_max: int | None
    n_past: int | None
    kind: ClassVar[str] = "ckpt_restored"


@dataclass(frozen=True)
class FullReprocess(Record):
    slot: int | None
    kind: ClassVar[str] = "full_reprocess"


@dataclass(frozen=True)
class CkptCreated(Record):
    slot: int | None
    n_tokens: int | None
    pos_min: int | None
    pos_max: int | None
    kind: ClassVar[str] = "ckpt_created"


@dataclass(frozen=True)
class CkptErased(Record):
    """``why``: cap (old), too_close, supersede, invalidated, context_shift."""

    slot: int | None
    why: str
    n_tokens: int | None
    kind: ClassVar[str] = "ckpt_erased"


@dataclass(frozen=True)
class PromptCleared(Record):
    slot: int | None
    n_tokens: int | None
    kind: ClassVar[str] = "prompt_cleared"


@dataclass(frozen=True)
class Released(Record):
    slot: int | None
    n_tokens: int
    kind: ClassVar[str] = "released"


@dataclass(frozen=True)
class Served(Record):
    """What the HTTP reply (server) or the task's prompt start (model) says of a request:
    tokens taken from the cache and tokens processed."""

    cache_n: int
    prompt_n: int
    kind: ClassVar[str] = "served"


@dataclass(frozen=True)
class SlotFile(Record):
    """A slot file: tokens saved or restored (the October format has no checkpoint appendix)."""

    action: str  # save | restore | erase | failed
    n_tokens: int | None
    kind: ClassVar[str] = "slot_file"


RECORD_TYPES: tuple[type[Record], ...] = (
    Selected, CacheSaved, CacheSkipped, CacheEvicted, CacheLoaded, CacheLoadFailed, CkptRestored,
    FullReprocess, CkptCreated, CkptErased, PromptCleared, Released, Served, SlotFile,
)
