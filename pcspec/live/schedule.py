"""The log is the schedule: the order in which the server took tasks and ran ``update_slots``.

The server's loop (server-queue.cpp:299-317 at 0c1e570) prints, at DEBUG level, ``processing
task, id = N`` for each task it takes from the queue and ``update slots`` before each
``update_slots`` call. Read in order, these lines say when each request arrived relative to the
iterations, which is what the model needs to interleave concurrent requests as the server did.
A task id seen again is a deferred task the server took back (the model re-queues it itself).
A task offered while a decode runs (``yield_to_queue``, server-queue.cpp:222-279) is declined
(``decoding, decline task``, server-context.cpp:2357-2360) and offered again after it: only the
offer that was not declined is its arrival. ``update_slots`` posts a task of its own each
iteration (``posting NEXT_RESPONSE``, server-context.cpp:2805-2811), and a failed task posts a
cancel task at the front of the queue (``front = 1``): their ids are not requests.

Server facts the model's configuration needs are read from the same log: the slot context
(``initializing, n_slots = %d, n_ctx_slot = %d``) and the SWA cache's cells (``creating SWA KV
cache, size = %u cells``, src/llama-kv-cache-iswa.cpp:100).

Every line is read as the log checker's typed event (``pcspec.logcheck.read_events``), the one
place that knows the lines' formats.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pcspec.logcheck import events as ev
from pcspec.logcheck import read_events


@dataclass
class Schedule:
    """``actions``: ("arrive", task id) for a task taken for the first time, ("step", 0) for
    an ``update_slots`` call."""

    actions: list[tuple[str, int]] = field(default_factory=list)
    n_tasks: int = 0
    n_tokens: dict[int, int] = field(default_factory=dict)  # task id -> its prompt's length


def read_schedule(text: str) -> Schedule:
    seen: set[int] = set()
    internal: set[int] = set()
    next_internal = False
    s = Schedule()
    for e in read_events(text):
        if isinstance(e, ev.NewPrompt):
            s.n_tokens.setdefault(e.task, e.n_tokens)
        elif isinstance(e, ev.NextResponsePosted):
            next_internal = True
        elif isinstance(e, ev.TaskPosted):
            if next_internal or e.front:
                internal.add(e.task)
            next_internal = False
        elif isinstance(e, ev.TaskDeclined):
            if s.actions and s.actions[-1] == ("arrive", e.task):
                s.actions.pop()
                seen.discard(e.task)
                s.n_tasks -= 1
        elif isinstance(e, ev.TaskTaken):
            if e.task not in seen and e.task not in internal:
                seen.add(e.task)
                s.actions.append(("arrive", e.task))
                s.n_tasks += 1
        elif isinstance(e, ev.UpdateSlots):
            s.actions.append(("step", 0))
    return s


@dataclass(frozen=True)
class ServerFacts:
    n_slots: int
    n_ctx_slot: int
    swa_cells: int | None


def read_facts(text: str) -> ServerFacts | None:
    """The first server start's slots and slot context, and the first SWA cache's cells."""
    events = read_events(text)
    init = next((e for e in events if isinstance(e, ev.ServerInit)), None)
    if init is None:
        return None
    swa = next((e for e in events if isinstance(e, ev.SwaCacheCreated)), None)
    return ServerFacts(init.n_slots, init.n_ctx_slot, swa.cells if swa is not None else None)
