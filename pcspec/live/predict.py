"""Run live operations through the model: what the spec says the server does.

The model is ``Server(config, variant)`` with the configuration of the live server
(``pcspec.live.calibrate``). A request is resolved with the *model's* replies (segments, see
``pcspec.live.ops``), so a workload means the same on both sides. A synchronous request is
``request`` then steps until idle; async requests follow a schedule: the number of
``update_slots`` iterations the server ran before each arrival, read from its log (the log is
the schedule, ``pcspec.live.schedule``).

Every operation goes through the one loop (``pcspec.core.loop``: a ``Driver``), which keeps the
trace of what the model ran. Each operation yields its records (the events' ``logged()``,
``pcspec.model.events``) and, for requests, a ``Served`` record (tokens from the cache and tokens
processed), so it can be diffed with the server's.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from dataclasses import dataclass, field

from pcspec.core import ops
from pcspec.core.loop import Driver
from pcspec.core.trace import Trace
from pcspec.live.ops import LiveOp, resolve
from pcspec.live.schedule import Schedule
from pcspec.live.slotfiles import FileView, read_view
from pcspec.model import events as ev
from pcspec.model.config import Config
from pcspec.model.design import Design
from pcspec.model.logged import Logged, Selected, Served, SlotFile
from pcspec.model.server import Server

MAX_STEPS = 100_000


@dataclass
class Prediction:
    index: int
    records: list[Logged] = field(default_factory=list)
    served: Served | None = None
    error: str = ""
    crash: str = ""
    stalled: bool = False  # the task can never finish (the model's livelock)
    slot_file: SlotFile | None = None


def model_records(events: Iterable[ev.Event], pinned: Container[int] = frozenset()) -> list[Logged]:
    """What the server logs of the model's ``events`` (``Event.logged``). ``pinned``: the model's
    ids of tasks sent with ``id_slot``; the server logs "selected slot by id" for them even when
    the similarity scan confirms the slot (server-context.cpp:1537, the LCP line is printed only
    for unpinned tasks, 1581-1584), where the model's ``select`` says ``lcp``."""
    out: list[Logged] = []
    for e in events:
        rec = e.logged()
        if rec is None:
            continue
        if isinstance(e, ev.Select) and e.task in pinned:
            rec = Selected(e.slot, "id")
        out.append(rec)
    return out


class Predictor:
    def __init__(self, cfg: Config, variant: Design) -> None:
        # (the build's rules are the variant's seams: OCTOBER for 0c1e570)
        self.model = Driver(Server(cfg, variant))
        self.srv = self.model.server
        self.prompts: dict[int, list[int]] = {}
        self.replies: dict[int, list[int]] = {}
        self.task_of: dict[int, int] = {}  # model task id -> live request id
        self.served: dict[int, Served] = {}  # live request id -> served
        self.errors: dict[int, str] = {}
        self.slot_results: dict[int, dict[str, object]] = {}  # op index -> last_result
        self.pinned: set[int] = set()  # model task ids sent with id_slot
        self.generated: dict[int, list[int]] = {}  # model task id -> tokens it generated
        self.files: dict[int, FileView | str] = {}  # op index -> the file a save wrote
        self._scanned = 0  # events before this index have been scanned

    @property
    def model_ops(self) -> list[ops.Operation]:
        """The operations the model ran, in order (a pcspec trace's)."""
        return self.model.ops

    def trace(self, n_ops: int | None = None) -> Trace:
        """The pcspec trace of what the model ran (its first ``n_ops`` operations), under the
        variant it ran: ``pcspec replay`` judges it."""
        return self.model.trace(n_ops)

    # -- stepping -------------------------------------------------------------------------------

    def _scan(self, start: int) -> None:
        """Learn, from events since ``start``, what each finished task served and generated.
        The tokens come from the ``generate`` and ``release`` events themselves (``token``):
        later in the same step a cache load may replace the slot's tokens (FINDINGS F1)."""
        start = max(start, self._scanned)  # an arrival's events are scanned once
        self._scanned = len(self.srv.heap.events)
        for e in self.srv.heap.events[start:]:
            if isinstance(e, (ev.Generate, ev.Release)) and e.task in self.task_of and e.token is not None:
                self.generated.setdefault(e.task, []).append(e.token)
            if isinstance(e, ev.PromptStart) and e.task in self.task_of:
                rid = self.task_of[e.task]
                n = len(self.prompts[rid])
                self.served[rid] = Served(e.n_past, n - e.n_past)
            elif isinstance(e, ev.Release) and e.task in self.task_of:
                rid = self.task_of[e.task]
                if e.error:
                    self.errors[rid] = e.error
                    continue
                self.replies[rid] = list(self.generated.get(e.task, []))

    def step(self, n: int = 1) -> None:
        for _ in range(n):
            if self.srv.crash is not None:
                return
            start = len(self.srv.heap.events)
            self.model.apply(ops.Step())
            self._scan(start)

    def run(self) -> None:
        for _ in range(MAX_STEPS):
            if self.srv.idle or self.srv.crash is not None:
                return
            self.step()

    # -- operations ----------------------------------------------------------------------------

    def arrive(self, op: LiveOp) -> None:
        """A request arrives (no steps)."""
        tokens = resolve(op, self.prompts, self.replies)
        self.prompts[op.id] = tokens
        start = len(self.srv.heap.events)
        tid = self.srv.next_task_id  # (the id the request's task gets)
        self.model.apply(ops.Request(tuple(tokens), op.n_predict, id_slot=op.id_slot, cache_prompt=op.cache_prompt))
        self.task_of[tid] = op.id
        if op.id_slot != -1:
            self.pinned.add(tid)
        self._scan(start)

    def _slot_op(self, op: LiveOp) -> None:
        if op.op == "slot_save":
            self.model.apply(ops.SlotSave(op.id_slot, op.filename))
        elif op.op == "slot_restore":
            self.model.apply(ops.SlotRestore(op.id_slot, op.filename))
        else:
            self.model.apply(ops.SlotErase(op.id_slot))

    def _corrupt(self, op: LiveOp) -> None:
        if op.truncate is not None:
            self.model.apply(ops.CorruptFile(op.filename, truncate=op.truncate))
        else:
            self.model.apply(ops.CorruptFile(op.filename, offset=op.offset, data=op.data))

    def follow(self, ops: list[LiveOp], segments: list[list[int]], schedule: Schedule,
               lengths: dict[int, int]) -> list[Prediction]:
        """Run ``ops`` in the order the server's log shows (``schedule``); one prediction per
        segment (a list of op indices that ran together: one synchronous op, or a concurrent
        group and its ``wait``), holding the records of everything that happened from the
        segment's first arrival to the next segment's. ``lengths``: op index -> prompt length
        as sent, to tell which of two requests sent together the server took first (its log
        gives each task's ``task.n_tokens``)."""
        # an empty token array is refused by the HTTP handler before any task exists
        # (server-common.cpp:1015-1028, '"prompt" must not be empty'): no arrival, no model task
        empty = {i for i, op in enumerate(ops) if op.op == "request" and lengths.get(i, 1) == 0}
        for i in sorted(empty):
            self.prompts[ops[i].id] = []
            self.errors[ops[i].id] = '"prompt" must not be empty'
        posting = [i for i, op in enumerate(ops) if op.op in TASK_OPS and i not in empty]
        seg_of = {i: k for k, seg in enumerate(segments) for i in seg}
        marks: dict[int, int] = {}  # segment -> event index where it starts
        applied = 0  # ops before this index have been applied
        k = 0

        def upto(i: int) -> None:
            nonlocal applied
            while applied < i:
                op = ops[applied]
                seg = seg_of.get(applied)
                if seg is not None and seg not in marks:
                    marks[seg] = len(self.srv.heap.events)
                if op.op == "corrupt_file":
                    self._corrupt(op)
                applied += 1

        for action, tid in schedule.actions:
            if action == "step":
                if not self.srv.idle:
                    self.step()
                continue
            if k >= len(posting):
                continue
            # the next op in order, unless the log says the task is another of its group
            want = schedule.n_tokens.get(tid)
            group = [j for j in posting[k:] if seg_of[j] == seg_of[posting[k]]]
            pick = next((j for j in group if want is not None and lengths.get(j) == want), posting[k])
            posting.remove(pick)
            posting.insert(k, pick)
            i = posting[k]
            k += 1
            upto(i)
            seg = seg_of[i]
            if seg not in marks:
                marks[seg] = len(self.srv.heap.events)
            start = len(self.srv.heap.events)
            op = ops[i]
            if op.op == "request":
                self.arrive(op)
            else:
                self._slot_op(op)
                self.slot_results[i] = dict(self.srv.last_result)
                if op.op == "slot_save" and "error" not in self.srv.last_result:
                    self.files[i] = read_view(self.srv.files.get(op.filename, b""), op.filename)
            self._scan(start)
        upto(len(ops))
        self.run()
        out: list[Prediction] = []
        bounds = [marks.get(s, len(self.srv.heap.events)) for s in range(len(segments))]
        for n, group in enumerate(segments):
            lo = bounds[n]
            hi = min([b for b in bounds[n + 1:] if b >= lo] or [len(self.srv.heap.events)])
            events = self.srv.heap.events[lo:hi]
            pred = Prediction(group[0], model_records(events, self.pinned))
            pred.stalled = any(isinstance(e, ev.Stall) for e in events)
            if any(isinstance(e, ev.Crash) for e in events) and self.srv.crash is not None:
                pred.crash = f"{self.srv.crash.where}: {self.srv.crash.message}"
            out.append(pred)
        return out


TASK_OPS = ("request", "slot_save", "slot_restore", "slot_erase")
