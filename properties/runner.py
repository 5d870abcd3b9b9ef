"""Judging a server after each operation: run the chosen checks over the state and the
events emitted since the previous judgement."""

from __future__ import annotations

from collections.abc import Iterable

from pcspec.model.server import Server
from pcspec.properties.base import (
    DECODE_STEP_KINDS,
    Check,
    Events,
    Property,
    Violation,
    event_kinds,
    reads_storage_only,
)
from pcspec.properties.catalogue import CATALOGUE


class Judge:
    """Holds the position in the server's event history already judged."""

    def __init__(self, srv: Server, props: Iterable[Property] = CATALOGUE) -> None:
        self.srv = srv
        self.props = tuple(props)
        self.seen = len(srv.heap.events)
        # (id, check, after_crash, the event kinds it needs or None): read once, since the
        # judge runs after every model operation of every fuzzing step.
        self._plan: tuple[tuple[str, Check, bool, frozenset[str] | None], ...] = tuple(
            (p.id, p.check, p.after_crash, event_kinds(p.check)) for p in self.props
        )
        # The state checks alone, for the operations that emit no event any check needs (most
        # of them: a generation step emits ``op`` and ``generate``).
        self._state_plan = tuple(x for x in self._plan if x[3] is None)
        # After a decode step (base.DECODE_STEP_KINDS): the checks that read more than the
        # storage (base.on_storage), and the event checks that a decode step's events feed.
        self._decode_plan = tuple(
            x
            for x in self._plan
            if not reads_storage_only(x[1]) and (x[3] is None or not x[3].isdisjoint(DECODE_STEP_KINDS))
        )
        self._watched = frozenset().union(*(x[3] for x in self._plan if x[3] is not None))

    def __call__(self) -> list[Violation]:
        srv = self.srv
        history = srv.heap.events
        new = history[self.seen :]
        self.seen = len(history)
        if len(new) == 1 and new[0].kind == "op":
            # The operation changed nothing (an idle step, an armed fault): the state is the
            # one already judged, and there are no new events to judge.
            return []
        kinds = {e.kind for e in new}
        crashed = "crash" in kinds
        if srv.crash is not None and not crashed:
            return []  # the process died earlier: nothing more happens
        out: list[Violation] = []
        op = srv.heap.op
        if kinds <= DECODE_STEP_KINDS:
            plan = self._decode_plan
        elif self._watched.isdisjoint(kinds):
            plan = self._state_plan
        else:
            plan = self._plan
        events: Events | None = None  # indexed once, and only if a check runs (a hunt judges one)
        for pid, check, after_crash, needs in plan:
            if crashed and not after_crash:
                continue
            if needs is not None and needs.isdisjoint(kinds):
                continue  # an event check without its events finds nothing (base.on_events)
            if events is None:
                events = Events(new)
            for msg in check(srv, events):
                out.append(Violation(pid, op, msg))
        return out
