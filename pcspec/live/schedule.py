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
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TASK = re.compile(r"que +\S{1,12}: processing task, id = (\d+)")
_DECLINE = re.compile(r"decoding, decline task, id_task = (\d+)")
_POST = re.compile(r"que +post: new task, id = (\d+)(?:/\d+)?, front = (\d)")
_NEXT_RESPONSE = "posting NEXT_RESPONSE"
_UPDATE = re.compile(r"que +start_loop: update slots")
_NEW_PROMPT = re.compile(r"\| task (\d+) \| new prompt, .*task\.n_tokens = (\d+)")
_INIT = re.compile(r"initializing, n_slots = (\d+), n_ctx_slot = (\d+)")
_SWA = re.compile(r"creating +SWA KV cache, size = (\d+) cells")


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
    for line in text.splitlines():
        np_ = _NEW_PROMPT.search(line)
        if np_ is not None:
            s.n_tokens.setdefault(int(np_.group(1)), int(np_.group(2)))
            continue
        if _NEXT_RESPONSE in line:
            next_internal = True
            continue
        p = _POST.search(line)
        if p is not None:
            if next_internal or p.group(2) == "1":
                internal.add(int(p.group(1)))
            next_internal = False
            continue
        d = _DECLINE.search(line)
        if d is not None:
            tid = int(d.group(1))
            if s.actions and s.actions[-1] == ("arrive", tid):
                s.actions.pop()
                seen.discard(tid)
                s.n_tasks -= 1
            continue
        if "que " not in line:
            continue
        m = _TASK.search(line)
        if m is not None:
            tid = int(m.group(1))
            if tid not in seen and tid not in internal:
                seen.add(tid)
                s.actions.append(("arrive", tid))
                s.n_tasks += 1
            continue
        if _UPDATE.search(line):
            s.actions.append(("step", 0))
    return s


@dataclass(frozen=True)
class ServerFacts:
    n_slots: int
    n_ctx_slot: int
    swa_cells: int | None


def read_facts(text: str) -> ServerFacts | None:
    m = _INIT.search(text)
    if m is None:
        return None
    swa = _SWA.search(text)
    return ServerFacts(int(m.group(1)), int(m.group(2)), int(swa.group(1)) if swa else None)
