"""Judging a server after each operation: run the chosen checks over the state and the
events emitted since the previous judgement; and the catalogue's replay and shrinking, which
are the core's loop and shrinker with this judge.

``replay(trace)`` is the path every judged run of a trace takes (``pcspec replay``, the
shrinker, the proofs' counterexamples, the generated pytest files, the tests).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from pcspec.core import loop
from pcspec.core.errors import PcspecError
from pcspec.core.ops import Operation
from pcspec.core.results import Finding, violation
from pcspec.core.shrink import shrink_list, simpler_op
from pcspec.core.snippet import pytest_snippet
from pcspec.core.trace import Trace
from pcspec.model.design import CHOICE_POINTS, EFFECT_POINTS, Design, defined_by
from pcspec.model.designs import get_design
from pcspec.properties.base import (
    DECODE_STEP_KINDS,
    STORAGE_NEUTRAL_KINDS,
    Carry,
    Check,
    Events,
    Property,
    event_kinds,
    events_read,
    history_parts,
    reads_storage_only,
)
from pcspec.properties.catalogue import CATALOGUE, get_property
from pcspec.properties.history import History
from pcspec.properties.view import StateView


class Judge:
    """Holds the position in the server's event history already judged.

    ``shortcuts=False``: no check is skipped after a decode step. The skip rests on the model's
    code (a decode step changes no storage, ``base.on_storage``); the conformance kit judges a
    port's state as its answers show it, which need not keep it.

    ``observed``: the state is seen only after each operation, as a port's observations show
    it (``History.observed``).

    ``incremental`` (by default as ``shortcuts``, which it rests on too): what a check found
    is carried over while the storage it reads stays as it was. A storage check
    (``base.on_storage``) is not run again within a storage epoch
    (``base.STORAGE_NEUTRAL_KINDS``): it reports what it found when it last ran in the epoch,
    which is what it would find; the checks that keep a record of their own read the judge's
    ``Carry`` (``base.carry_of``). ``incremental=False``: every check computes everything
    afresh at every judgement, the same findings (``tests/properties/test_incremental_judge.py``)."""

    def __init__(
        self,
        srv: StateView,
        props: Iterable[Property] = CATALOGUE,
        shortcuts: bool = True,
        incremental: bool | None = None,
        reference: bool | None = None,
        observed: bool = False,
    ) -> None:
        self.srv = srv
        self.props = tuple(props)
        self.seen = len(srv.heap.events)
        # The reference judge (``reference``: by default for a design that runs code of its own
        # at a choice or effect point) runs every check after every operation: no table of event
        # kinds, no storage epochs, no carried findings. Those shortcuts rest on what pcspec's
        # designs do (every change of storage emits an event); a design's own decision points
        # only return values, which the model acts on, so they keep the shortcuts sound.
        self.reference = needs_reference(srv.design) if reference is None else reference
        if self.reference:
            shortcuts, incremental = False, False
        self.incremental = shortcuts if incremental is None else incremental
        # (id, check, after_crash, the event kinds it needs or None, whether it reads only the
        # storage and its findings are carried over, and the events it also reads): read once,
        # since the judge runs after every model operation of every fuzzing step.
        self._plan: tuple[tuple[str, Check, bool, frozenset[str] | None, bool, frozenset[str]], ...] = tuple(
            (
                p.id,
                p.check,
                p.after_crash,
                event_kinds(p.check),
                self.incremental and reads_storage_only(p.check),
                events_read(p.check),
            )
            for p in self.props
        )
        # The state checks alone, for the operations that emit no event any check needs (most
        # of them: a generation step emits ``op`` and ``generate``).
        self._state_plan = tuple(x for x in self._plan if x[3] is None)
        # After a decode step (base.DECODE_STEP_KINDS): the checks that read more than the
        # storage (base.on_storage), and the event checks that a decode step's events feed.
        self._decode_plan = tuple(
            x
            for x in self._plan
            if not shortcuts
            or (not reads_storage_only(x[1]) and (x[3] is None or not x[3].isdisjoint(DECODE_STEP_KINDS)))
        )
        self._watched = frozenset().union(*(x[3] for x in self._plan if x[3] is not None))
        # What the chosen checks compare against, kept as the model runs (properties/history.py).
        self.history = History(srv, frozenset().union(*(history_parts(p.check) for p in self.props)), observed)
        # The storage epoch and what the incremental checks keep (None: everything afresh).
        self.carry: Carry | None = Carry() if self.incremental else None
        # A storage check's findings as of the epoch it last ran in: pid -> (epoch, messages).
        self._found: dict[str, tuple[int, list[str]]] = {}
        self._plans: dict[frozenset[str], tuple[bool, bool, tuple[tuple[str, Check, bool, bool], ...]]] = {}

    def __call__(self) -> list[Finding]:
        try:
            return self._judge()
        finally:
            self.history.done()

    def _judge(self) -> list[Finding]:
        srv = self.srv
        log = srv.heap.events
        new = log[self.seen :]
        self.seen = len(log)
        if len(new) == 1 and new[0].kind == "op" and not self.reference:
            # The operation changed nothing (an idle step, an armed fault): the state is the
            # one already judged, and there are no new events to judge.
            return []
        kinds = frozenset([e.kind for e in new])
        got_plan = self._plans.get(kinds)
        if got_plan is None:
            got_plan = self._plans[kinds] = self._plan_for(kinds)
        neutral, crashed, plan = got_plan
        carry = self.carry
        epoch = 0
        if carry is not None:
            if not neutral:
                carry.epoch += 1  # the storage may have changed: what was found of it is stale
            epoch = carry.epoch
        if srv.crash is not None and not crashed:
            return []  # the process died earlier: nothing more happens
        out: list[Finding] = []
        op = srv.heap.op
        events: Events | None = None  # indexed once, and only if a check runs (a hunt judges one)
        found = self._found
        for pid, check, carried, keep in plan:
            if carried:
                was = found.get(pid)
                if was is not None and was[0] == epoch:
                    msgs = was[1]  # the storage it reads is as it was then: so are its findings
                else:
                    if events is None:
                        events = Events(new, self.history, carry)
                    msgs = check(srv, events)
                    # (found with events of its own: not what the epoch's next judgements find)
                    found[pid] = (epoch if keep else -1, msgs)
            else:
                if events is None:
                    events = Events(new, self.history, carry)
                msgs = check(srv, events)
            for msg in msgs:
                out.append(violation(pid, op, msg))
        return out

    def _plan_for(self, kinds: frozenset[str]) -> tuple[bool, bool, tuple[tuple[str, Check, bool, bool], ...]]:
        """For a judgement whose events have these kinds (the same few sets come back at every
        step, so each is worked out once): whether they are storage-neutral, whether the
        operation crashed, and the checks to run, each as (id, check, whether its findings are
        carried over, whether these findings may be kept for the epoch)."""
        crashed = "crash" in kinds
        if self.reference:
            return False, crashed, tuple((p[0], p[1], False, False) for p in self._plan if p[2] or not crashed)
        if kinds <= DECODE_STEP_KINDS:
            plan = self._decode_plan
        elif self._watched.isdisjoint(kinds):
            plan = self._state_plan
        else:
            plan = self._plan
        chosen = tuple(
            (pid, check, carried, reads.isdisjoint(kinds))
            for pid, check, after_crash, needs, carried, reads in plan
            if (after_crash or not crashed)
            # an event check without its events finds nothing (base.on_events)
            and (needs is None or not needs.isdisjoint(kinds))
        )
        return kinds <= STORAGE_NEUTRAL_KINDS, crashed, chosen


def is_pcspecs(design: object) -> bool:
    """Whether a design is pcspec's own (a built-in, a rule set's model, a mutant): the judge's
    shortcut tables were shown sound for those (tests/properties/test_judge_shortcuts.py)."""
    return type(design).__module__.startswith("pcspec.")


def needs_reference(design: Design) -> bool:
    """Whether ``design`` runs code of its own at a choice or an effect point (where code acts on,
    or reads, the state itself): then it is judged by the reference judge. Its own attributes and
    decision points (pure functions over numbers) leave the model's operations, which emit an
    event for every change of storage, the only ones acting."""
    if is_pcspecs(design):
        return False
    return any(not defined_by(design, p).__module__.startswith("pcspec.") for p in (*CHOICE_POINTS, *EFFECT_POINTS))


def replay(
    trace: Trace,
    props: Iterable[Property] = CATALOGUE,
    on_step: Callable[[loop.Step], None] | None = None,
) -> loop.ReplayResult:
    """``trace`` run through the core's loop, every property of ``props`` judged after every
    model operation."""
    chosen = tuple(props)
    return loop.replay(trace, lambda srv: Judge(srv, chosen), on_step)


def first_violation(trace: Trace, pid: str) -> dict[str, Any] | None:
    """The first violation of ``pid`` a replay of ``trace`` shows, as a trace's ``expect`` entry."""
    for v in replay(trace, [get_property(pid)]).violations:
        if v.rule == pid:
            return {"property": pid, "op": v.at, "message": v.message}
    return None


def base_violates(trace: Trace, pid: str) -> bool:
    """Whether the design a mutant is planted in (``Design.base``) violates ``pid`` on the
    trace's operations too: then the violation is not the mutant's doing, and it does not catch
    the mutant. False for a trace of a design (no base). A trace the base cannot replay (an
    operation ill-formed there) counts as violated: nothing shows the mutant caught."""
    if trace.variant.base is None:
        return False
    try:
        base = replace(trace, variant=get_design(trace.variant.base), expect=[])
        return first_violation(base, pid) is not None
    except PcspecError:
        return True


def shrink_trace(trace: Trace, pid: str, max_replays: int = 3000) -> Trace:
    """The shortest trace found (within ``max_replays`` replays) that still violates ``pid``:
    the core's shrinker over the operations, each candidate replayed with ``pid`` judged. A
    mutant's candidate must also leave its base design clean of ``pid`` (``base_violates``), so
    the shrunk trace still catches the mutant."""
    budget = [max_replays]

    def fails(ops: list[Operation]) -> bool:
        if budget[0] <= 0:
            return False
        budget[0] -= 1
        try:
            candidate = replace(trace, ops=ops)
            return first_violation(candidate, pid) is not None and not base_violates(candidate, pid)
        except PcspecError:
            # A candidate can be ill-formed where the whole trace was not: without the
            # restart that gave the server more slots, a later slot action names a slot
            # that does not exist. Such a candidate does not reproduce the violation.
            return False

    if not fails(list(trace.ops)):
        return trace
    final = replace(trace, ops=shrink_list(list(trace.ops), fails, simpler_op))
    v = first_violation(final, pid)
    return replace(final, expect=[v] if v else trace.expect)


def where_shown(trace: Trace) -> dict[int, str]:
    """Step index -> the expected violations that first show during that step. (``op`` in a
    violation counts model operations, and a ``run`` step is one per server step, so the
    step is found by replaying.)"""
    wanted = {(e["property"], e.get("op")) for e in trace.expect}
    notes: dict[int, list[str]] = {}
    for step in replay(trace).steps:
        for v in step.violations:
            if (v.rule, v.at) in wanted or (v.rule, None) in wanted:
                wanted -= {(v.rule, v.at), (v.rule, None)}
                notes.setdefault(step.index, []).append(f"{v.rule} shows here")
    return {i: ", ".join(ns) for i, ns in notes.items()}


def write_counterexample(trace: Trace, out: Path, stem: str, variant_ref: str | None = None) -> Path:
    """``trace`` as ``STEM.jsonl`` (what ``pcspec replay`` reads) and ``repro_STEM.py`` (the
    pytest file, each expected violation noted on the step where it first shows) in ``out``;
    returns the trace file's path. ``variant_ref``: ``MODULE:NAME`` of a variant of the user's,
    which the pytest file imports (a built-in design is named).

    ``repro_``, not ``test_``: a plain ``pytest`` in the user's project must not collect
    pcspec's output (it fails by design, and two output folders with the same file names would
    clash), while ``pytest pcspec-out/repro_X.py`` still runs it: pytest collects a file named
    on its command line whatever its name."""
    path = out / f"{stem}.jsonl"
    trace.write(path)
    shown = where_shown(trace) if trace.expect else {}
    text = pytest_snippet(trace, stem, shown, variant_ref)
    (out / f"repro_{stem.replace('-', '_')}.py").write_text(text, encoding="utf-8")
    return path


__all__ = ["Judge", "base_violates", "first_violation", "replay", "shrink_trace", "where_shown", "write_counterexample"]
