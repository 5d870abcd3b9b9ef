"""Judging a server after each operation: run the chosen checks over the state and the
events emitted since the previous judgement."""

from __future__ import annotations

from collections.abc import Iterable

from pcspec.model.server import Server
from pcspec.properties.base import Events, Property, Violation
from pcspec.properties.catalogue import CATALOGUE


class Judge:
    """Holds the position in the server's event history already judged."""

    def __init__(self, srv: Server, props: Iterable[Property] = CATALOGUE) -> None:
        self.srv = srv
        self.props = tuple(props)
        self.seen = len(srv.heap.events)

    def __call__(self) -> list[Violation]:
        srv = self.srv
        events = Events(srv.heap.events[self.seen :])
        self.seen = len(srv.heap.events)
        if len(events) == 1 and events[0].kind == "op":
            # The operation changed nothing (an idle step, an armed fault): the state is the
            # one already judged, and there are no new events to judge.
            return []
        crashed = any(e.kind == "crash" for e in events)
        if srv.crash is not None and not crashed:
            return []  # the process died earlier: nothing more happens
        out: list[Violation] = []
        for p in self.props:
            if crashed and not p.after_crash:
                continue
            for msg in p.check(srv, events):
                out.append(Violation(p.id, srv.heap.op, msg))
        return out
