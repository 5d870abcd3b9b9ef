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
from dataclasses import dataclass

from pcspec.model.heap import Event
from pcspec.model.ownership import Holder, holders
from pcspec.model.server import Server

Check = Callable[[Server, Sequence[Event]], list[str]]


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


@dataclass(frozen=True)
class Violation:
    property: str
    op: int
    message: str

    def to_json(self) -> dict[str, object]:
        return {"property": self.property, "op": self.op, "message": self.message}


class Events(list[Event]):
    """The events of one operation, indexed by kind once (every check asks for a kind), plus
    the holders of the state after it, listed once for all the checks that walk them."""

    def __init__(self, events: Sequence[Event]) -> None:
        super().__init__(events)
        self.by_kind: dict[str, list[Event]] = {}
        for e in events:
            self.by_kind.setdefault(e.kind, []).append(e)
        self.holders: list[Holder] | None = None


def holders_of(srv: Server, events: Sequence[Event]) -> list[Holder]:
    """``pcspec.model.ownership.holders(srv)``, computed once per judgement."""
    if isinstance(events, Events):
        if events.holders is None:
            events.holders = list(holders(srv))
        return events.holders
    return list(holders(srv))


def events_of(events: Sequence[Event], kind: str) -> list[Event]:
    if isinstance(events, Events):
        return events.by_kind.get(kind, [])
    return [e for e in events if e.kind == kind]
