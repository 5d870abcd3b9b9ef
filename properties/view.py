"""What the judge reads of a server: a read-only view of its state (``StateView``).

The catalogue's checks (``properties/<family>.py``), the judge's history and the judge read
the state through this protocol and nothing else, so that two things can be judged by the
same checks: the model's ``Server``, which provides it as it is (structurally: nothing in the
model names it, and the model imports no checker), and a port's state as its observations show
it (``pcspec.conform.judge.ObservedState``, a class of its own, no ``Server``).

Each member is what some check or the history reads, and no more; the values are the model's
own (``Slot``, ``Checkpoint``, ``CacheEntry``, ``Buffer``), which the checks read and never
change. Read-only: every member is a property or a method, and every collection a ``Sequence``
or a ``Mapping``, so that a check that assigns through the view is a type error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from pcspec.model.cache import CacheEntry
from pcspec.model.config import Config
from pcspec.model.context import Context
from pcspec.model.design import Design
from pcspec.model.events import Event
from pcspec.model.heap import Buffer
from pcspec.model.slot import Slot


class HeapView(Protocol):
    """The event log the judge reads and watches, and the buffers alive (REF-1's leaks)."""

    @property
    def events(self) -> Sequence[Event]:
        """Every event so far, in order (the judge reads those since its last judgement)."""

    @property
    def op(self) -> int:
        """The index of the current operation (what a violation is reported at)."""

    @property
    def live(self) -> Mapping[int, Buffer]:
        """Buffer id -> every buffer not freed."""

    def watch(self, kind: str, callback: Callable[[Event], None]) -> None:
        """Call ``callback`` with every event of ``kind`` as it is emitted (the judge's history)."""


class CacheView(Protocol):
    """The prompt cache: its entries and limits."""

    @property
    def entries(self) -> Sequence[CacheEntry]:
        """Oldest first."""

    @property
    def limit_size(self) -> int:
        """The byte limit (0: none)."""

    @property
    def limit_tokens(self) -> int:
        """The token limit (0: none)."""

    def n_tokens(self) -> int:
        """The tokens of every entry."""


class StateView(Protocol):
    """A server's state as the checks read it (the members of ``pcspec.model.state.VARIABLES``
    they read, and the two byte counts ACC-1 and LIMIT-1 compare)."""

    @property
    def cfg(self) -> Config:
        """The flags (the cap, the memory kind, the batch sizes, the limits)."""

    @property
    def design(self) -> Design:
        """Whether it runs code of its own (the reference judge) and how it resumes (RESTORE-2)."""

    @property
    def heap(self) -> HeapView: ...

    @property
    def slots(self) -> Sequence[Slot]:
        """Slot i at index i."""

    @property
    def cache(self) -> CacheView | None:
        """None: no prompt cache."""

    @property
    def crash(self) -> object:
        """The abort that ended the process, or None."""

    @property
    def files(self) -> Mapping[str, bytes]:
        """The slot-save directory."""

    def contexts(self) -> Sequence[Context]:
        """The contexts whose memory holds the slots' sequences (none: no memory to judge)."""

    @property
    def unique_bytes(self) -> int:
        """The distinct bytes the cache's entries hold, each buffer once."""

    @property
    def accounted_bytes(self) -> int:
        """What the cache believes it holds (``server_prompt_cache::size``; 0 with no cache)."""


__all__ = ["CacheView", "HeapView", "StateView"]
