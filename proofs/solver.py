"""Solving one query: its SMT-LIB text in a fresh Z3 context, with a seed, a timeout, a
resource limit and a wall-clock watchdog.

A fresh context per query because a shared one made the time of the same query vary 100x
with what was solved before it. The three limits because each was once seen ignored on its
own: the timeout (Z3's own clock), the resource limit (deterministic work units), and a
watchdog thread that interrupts the context. Whatever stops the solver, the answer is
``unknown``: never ``unsat``, never a proof; and its ``reason`` names the limit that ran out
and the option that raises it (``pcspec prove --proof-timeout`` / ``--proof-rlimit``).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import z3

# The solver the figures of docs/PROOFS.md were measured with. pyproject.toml allows a range;
# the verdicts are the same at both of its ends (tests/proofs/test_proofs.py runs on each in CI), the
# seconds may not be.
MEASURED_Z3 = "5.4.1"


@dataclass(frozen=True)
class Settings:
    seed: int = 0
    timeout_ms: int = 5000  # per query
    rlimit: int = 50_000_000  # per query, in Z3 resource units
    watchdog_s: float = 10.0  # wall clock, per query


@dataclass
class Answer:
    status: str  # "sat" | "unsat" | "unknown"
    seconds: float
    reason: str = ""  # why unknown
    model: dict[str, int | bool | str] = field(default_factory=dict)


def z3_version() -> str:
    return str(z3.get_version_string())


def version_measured() -> bool:
    return z3_version() == MEASURED_Z3


def why_unknown(reason: str, seconds: float, settings: Settings, watchdog_fired: bool) -> str:
    """What stopped the solver, in words a user can act on."""
    if watchdog_fired:
        return (
            f"the wall-clock watchdog ({settings.watchdog_s:g} s) interrupted the solver: raise --proof-timeout"
            " (the watchdog is twice it plus one second)"
        )
    if reason == "timeout" or seconds * 1000 >= 0.95 * settings.timeout_ms:
        return f"the per-query timeout ({settings.timeout_ms} ms) ran out ({reason}): raise --proof-timeout"
    if "canceled" in reason or "resource" in reason or "rlimit" in reason:
        return f"the solver's resource limit ({settings.rlimit:,} units) ran out ({reason}): raise --proof-rlimit"
    return f"the solver gave up ({reason})"


def solve(text: str, settings: Settings, want_model: bool = False) -> Answer:
    """Solve the SMT-LIB ``text`` (one ``check-sat``)."""
    return solve_blocks([text], settings, want_model)


def solve_blocks(blocks: list[str], settings: Settings, want_model: bool = False) -> Answer:
    """Solve a query's blocks in one fresh context, each with its own solver and the limits
    of the whole query (the timeout and the watchdog span all blocks). ``unsat`` when every
    block is; the first ``sat`` block answers ``sat``; otherwise ``unknown``."""
    ctx = z3.Context()
    fired: list[bool] = []

    def watchdog() -> None:
        fired.append(True)
        ctx.interrupt()

    timer = threading.Timer(settings.watchdog_s, watchdog)
    timer.daemon = True
    t0 = time.perf_counter()
    timer.start()

    def unknown(reason: str) -> Answer:
        dt = time.perf_counter() - t0
        return Answer("unknown", dt, why_unknown(reason, dt, settings, bool(fired)))

    try:
        for text in blocks:
            left = settings.timeout_ms - int(1000 * (time.perf_counter() - t0))
            if left <= 0:
                return unknown("timeout")
            s = z3.Solver(ctx=ctx)
            s.set(timeout=left, rlimit=settings.rlimit, random_seed=settings.seed)
            s.from_string(text)
            try:
                r = s.check()
            except z3.Z3Exception as exc:  # an interrupted check may raise instead of answering
                return unknown(f"interrupted: {exc}")
            if r == z3.sat:
                return Answer("sat", time.perf_counter() - t0, model=_values(s.model()) if want_model else {})
            if r != z3.unsat:
                return unknown(str(s.reason_unknown()))
    finally:
        timer.cancel()
    return Answer("unsat", time.perf_counter() - t0)


def _values(m: object) -> dict[str, int | bool | str]:
    """The model's constants by name: integers, Booleans, anything else as text."""
    out: dict[str, int | bool | str] = {}
    for d in m.decls():  # type: ignore[attr-defined]
        if d.arity() != 0:
            continue
        val = m[d]  # type: ignore[index]
        if z3.is_int_value(val):
            out[d.name()] = val.as_long()
        elif z3.is_true(val) or z3.is_false(val):
            out[d.name()] = z3.is_true(val)
        else:
            out[d.name()] = str(val)
    return out
