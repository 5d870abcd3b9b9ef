"""The one worker pool: units of work on worker processes, which survives a worker that dies.

``pcspec verify --workers N`` (its cells), ``pcspec campaign --workers N`` (its seed blocks) and
live campaigns (``pcspec.core.campaign``) run their units here. A unit is anything picklable
with a name; ``work(unit)`` runs it in a worker and its result comes back to the caller.

Each worker runs one unit at a time, so when a worker dies (``os._exit``, a segfault, the
kernel's out-of-memory killer) the pool knows the one unit it lost: that unit settles as
``Lost`` (its name and how the worker ended), a fresh worker takes the dead one's place, and
the other units run on. A lost unit has no result: the caller counts it as unknown, never as a
pass. A unit that raises gives its exception to the caller, as it would in one process.

The standard library's pools do not serve: ``concurrent.futures`` breaks as a whole when one
worker dies and cannot say which unit killed it; ``multiprocessing.Pool`` replaces the worker
but waits for the lost unit for ever.

Workers are spawned, not forked: the same start-up on every platform, and no copy of the
parent's state, locks or Hypothesis's globals into them. They ignore Ctrl-C, which reaches the
whole process group: the parent stops them itself, so a worker prints no traceback of its own.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from types import TracebackType
from typing import Any, Generic, TypeVar, cast

U = TypeVar("U")
R = TypeVar("R")


@dataclass(frozen=True)
class Lost:
    """A unit whose worker process died before it answered."""

    unit: str  # the unit's name
    why: str  # how the worker ended: "exit code 1", "killed by SIGKILL"

    @property
    def message(self) -> str:
        return f"lost unit {self.unit}: its worker process died ({self.why})"


@dataclass(frozen=True)
class Settled(Generic[U, R]):
    """A unit's end: its result, or ``lost`` (and no result) when its worker died."""

    unit: U
    result: R | None
    lost: Lost | None = None


def _ended(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _serve(work: Callable[[Any], Any], conn: Connection) -> None:
    """A worker: units in, results (or the unit's exception) out, until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            unit = conn.recv()
        except EOFError:  # (the parent is gone)
            return
        if unit is None:
            return
        try:
            answer: tuple[bool, Any] = (True, work(unit))
        except BaseException as exc:  # (the caller gets it, as in one process)
            exc.add_note("in a worker process:\n" + "".join(traceback.format_exception(exc)).rstrip())
            answer = (False, exc)
        try:
            conn.send(answer)
        except Exception as exc:  # (a result or exception that does not pickle)
            conn.send((False, RuntimeError(f"a unit's answer cannot be sent back: {exc!r}")))


class _Worker:
    def __init__(self, ctx: Any, work: Callable[[Any], Any]) -> None:
        self.conn, theirs = multiprocessing.Pipe()
        self.proc: BaseProcess = ctx.Process(target=_serve, args=(work, theirs), daemon=True)
        self.proc.start()
        theirs.close()
        self.unit: Any = None  # the unit it runs, if any
        self.busy = False
        self.served = 0  # units it was given


class Pool(Generic[U, R]):
    """At most ``workers`` processes running ``work`` over the units submitted. ``name`` names a
    unit in a ``Lost``; ``priority`` picks which waiting unit starts when a worker is free (the
    first submitted of the lowest key). ``work`` is pickled: a module-level function, or a
    ``functools.partial`` of one. Use it as a context manager: leaving it stops every worker
    (terminated when an exception leaves it)."""

    def __init__(
        self,
        work: Callable[[U], R],
        workers: int,
        name: Callable[[U], str] = str,
        priority: Callable[[U], int] = lambda _u: 0,
    ) -> None:
        self.work, self.size, self.name, self.priority = work, max(1, workers), name, priority
        self.ctx = multiprocessing.get_context("spawn")
        self.waiting: list[U] = []
        self.workers: list[_Worker] = []

    def submit(self, unit: U) -> None:
        """Queue ``unit``; it starts when a worker is free (on ``next``)."""
        self.waiting.append(unit)

    @property
    def pending(self) -> int:
        """Units submitted and not yet settled."""
        return len(self.waiting) + sum(w.busy for w in self.workers)

    def _start_waiting(self) -> None:
        while self.waiting:
            idle = next((w for w in self.workers if not w.busy), None)
            if idle is None and len(self.workers) < self.size:
                idle = _Worker(self.ctx, self.work)
                self.workers.append(idle)
            if idle is None:
                return
            unit = min(self.waiting, key=self.priority)  # (min: the first of the lowest key)
            try:
                idle.conn.send(unit)
            except OSError:  # (it died idle: nothing is lost, a fresh worker takes the unit)
                idle.proc.join()
                self.workers.remove(idle)
                if not idle.served:  # (it never started: a fresh one would not either)
                    raise RuntimeError(f"a worker process did not start ({_ended(idle.proc.exitcode)})") from None
                continue
            self.waiting.remove(unit)
            idle.unit, idle.busy = unit, True
            idle.served += 1

    def next(self) -> Settled[U, R]:
        """Wait for a unit to settle; its result (raised, if it raised) or its loss."""
        self._start_waiting()
        busy = [w for w in self.workers if w.busy]
        if not busy:
            raise ValueError("no unit is pending")
        by_handle: dict[Any, _Worker] = {}
        for w in busy:
            by_handle[w.conn] = w
            by_handle[w.proc.sentinel] = w
        ready = wait(list(by_handle))
        worker = by_handle[ready[0]]
        unit: U = worker.unit
        worker.unit, worker.busy = None, False
        answer: tuple[bool, Any] | None = None
        try:
            # (a worker that answered and then died still answered: its answer is read first)
            if worker.conn.poll():
                answer = worker.conn.recv()
        except (EOFError, OSError):
            answer = None
        if answer is not None:
            ok, value = answer
            if not ok:
                raise value
            return Settled(unit, value)
        # the worker died mid-unit: that unit is lost, a fresh worker will take its place
        worker.proc.join()
        self.workers.remove(worker)
        worker.conn.close()
        return Settled(unit, None, Lost(self.name(unit), _ended(worker.proc.exitcode)))

    def close(self, terminate: bool = False) -> None:
        """Stop the workers: told to finish (``terminate``: killed, without waiting for the
        units they run)."""
        for w in self.workers:
            if terminate:
                w.proc.terminate()
            else:
                with contextlib.suppress(OSError):  # (it died meanwhile)
                    w.conn.send(None)
        for w in self.workers:
            w.proc.join()
            w.conn.close()
        self.workers, self.waiting = [], []

    def __enter__(self) -> Pool[U, R]:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close(terminate=kind is not None)


def run_all(
    work: Callable[[U], R], units: list[U], workers: int, name: Callable[[U], str] = str
) -> list[R | Lost]:
    """Every unit on ``workers`` processes: each one's result, or its ``Lost``, in the units'
    order."""
    out: dict[int, R | Lost] = {}
    with Pool[tuple[int, U], R](_Indexed(work), workers, lambda iu: name(iu[1])) as pool:
        for iu in enumerate(units):
            pool.submit(iu)
        while pool.pending:
            s = pool.next()
            out[s.unit[0]] = s.lost if s.lost is not None else cast(R, s.result)
    return [out[i] for i in range(len(units))]


@dataclass(frozen=True)
class _Indexed(Generic[U, R]):
    """``work`` of a unit numbered by its place (a closure that pickles)."""

    work: Callable[[U], R]

    def __call__(self, iu: tuple[int, U]) -> R:
        return self.work(iu[1])


__all__ = ["Lost", "Pool", "Settled", "run_all"]
