"""A conformance run: cases through a port, each answer compared with the model's.

``check(port, case)`` sends a case and compares every answer, canonically, with the expected
observation; the first difference is a ``Divergence``, with the properties the port's own
observations violate up to it (``judge``). ``Session`` runs the golden suite, then fuzzed
traces, pipelined: the port works on one trace while the kit lowers the next. The first
divergence ends the run; ``shrink`` then cuts its model trace down while the port still
diverges on it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from pcspec.conform.canon import Canon, differences
from pcspec.conform.case import Case
from pcspec.conform.judge import Judge
from pcspec.conform.port import Port, PortError
from pcspec.core.ops import Operation
from pcspec.core.results import Finding, violation
from pcspec.core.shrink import shrink_list, simpler_op


@dataclass
class Divergence:
    case: Case
    index: int  # the core operation whose answer differs (-1: the port failed before any)
    want: dict[str, Any] | None
    got: dict[str, Any] | None
    diffs: list[Finding]  # divergences: each field that differs
    findings: list[Finding]  # violations: the properties the port's answers break
    error: str | None = None  # the port's own error line, or how it failed
    shrunk_from: int | None = None  # model operations before shrinking

    @property
    def properties(self) -> list[str]:
        return sorted({f.property for f in self.findings})


@dataclass
class Result:
    cases: int = 0
    golden: int = 0
    fuzzed: int = 0
    ops: int = 0
    seconds: float = 0.0
    port_seconds: float = 0.0
    divergence: Divergence | None = None
    lowering_skipped: int = 0  # fuzzed traces the model crashed on before any core operation
    notes: list[str] = field(default_factory=list)


def compare(case: Case, answers: list[dict[str, Any]]) -> Divergence | None:
    """The first answer that differs from the case's expectation, judged."""
    mine = Canon()
    for i, (want, got) in enumerate(zip(case.expect, answers, strict=True)):
        if "error" in got:
            return _diverged(case, i, answers, want, got, [], error=str(got["error"]))
        cgot = mine(got)
        if cgot != want:
            diffs = differences(want, cgot, i)
            if diffs:
                return _diverged(case, i, answers, want, cgot, diffs)
    return None


def _diverged(
    case: Case,
    index: int,
    answers: list[dict[str, Any]],
    want: dict[str, Any],
    got: dict[str, Any],
    diffs: list[Finding],
    error: str | None = None,
) -> Divergence:
    judge, canon = Judge(case.config, case.tags), Canon()
    findings: list[Finding] = []
    for i in range(index + (0 if error else 1)):
        findings += judge(i, case.ops[i], canon(answers[i]))
    return Divergence(case, index, want, got, diffs, findings, error)


def check(port: Port, case: Case) -> Divergence | None:
    port.begin(case.begin(), case.ops)
    return compare(case, port.answers(len(case.ops)))


# What a sanitizer or valgrind says on the port's standard error, as the property it breaks.
SANITIZER_FINDINGS = (
    ("depends on uninitialised value", "llama_state_seq_set_data_ext", "UNINIT-2",
     "an unwritten byte was loaded into a context"),
    ("depends on uninitialised value", "", "UNINIT-1", "a buffer a holder keeps has unwritten bytes (read back)"),
    ("uninitialised byte", "", "UNINIT-1", "a buffer a holder keeps has unwritten bytes"),
    ("heap-use-after-free", "", "REF-1", "a buffer was used after it was freed (a holder still referenced it)"),
    ("double-free", "", "REF-1", "a buffer was freed twice"),
    ("LeakSanitizer", "", "REF-1", "memory nothing references stayed allocated (a leak)"),
    ("definitely lost", "", "REF-1", "memory nothing references stayed allocated (a leak)"),
    ("runtime error:", "", "NOABORT-1", "undefined behaviour (UBSan)"),
    ("AddressSanitizer", "", "NOABORT-1", "a memory error (ASan)"),
)


def sanitizer_findings(text: str) -> list[Finding]:
    for needle, also, pid, what in SANITIZER_FINDINGS:
        if needle in text and also in text:
            return [violation(pid, -1, f"{what} (the port's standard error says so)")]
    return []


def _failed(case: Case, exc: PortError) -> Divergence:
    return Divergence(case, -1, None, None, [], sanitizer_findings(str(exc)), error=str(exc))


class Session:
    """One port process for the whole run (restarted after it fails)."""

    def __init__(self, cmd: str, timeout: float = 20.0) -> None:
        self.cmd = cmd
        self.timeout = timeout
        self.port = Port(cmd, timeout)
        self.port_seconds = 0.0
        self.last: Case | None = None  # the last case answered

    def close(self) -> PortError | None:
        """End the port; a non-zero exit status (a sanitizer's report at exit, a leak) is an error."""
        code = self.port.close()
        if code:
            return PortError(f"the port exited with code {code} at the end of the run{self.port.tail()}")
        return None

    def _restart(self) -> None:
        self.port.kill()
        self.port = Port(self.cmd, self.timeout)

    def run_one(self, case: Case) -> Divergence | None:
        try:
            return check(self.port, case)
        except PortError as exc:
            self._restart()
            return _failed(case, exc)

    def run(self, cases: Iterator[Case], result: Result, on_case: Callable[[Case], None] | None = None) -> None:
        """Run cases pipelined (send one, then compare the one before) until one diverges."""
        t0 = time.monotonic()
        pending: Case | None = None
        try:
            for case in cases:
                self.port.begin(case.begin(), case.ops)
                if pending is not None and self._settle(pending, result, on_case):
                    break
                pending = case
            else:
                if pending is not None:
                    self._settle(pending, result, on_case)
        except PortError as exc:
            result.divergence = _failed(pending or case, exc)
            self._restart()
        finally:
            result.seconds += time.monotonic() - t0
        if self.port.pending:
            self._restart()  # answers of a trace sent ahead are still on their way

    def _settle(self, case: Case, result: Result, on_case: Callable[[Case], None] | None) -> bool:
        t = time.monotonic()
        answers = self.port.answers(len(case.ops))
        self.last = case
        self.port_seconds += time.monotonic() - t
        result.cases += 1
        result.ops += len(case.ops)
        if on_case is not None:
            on_case(case)
        d = compare(case, answers)
        if d is not None:
            result.divergence = d
            return True
        return False


# -- shrinking -----------------------------------------------------------------------------------------


def shrink(session: Session, div: Divergence, max_runs: int = 400) -> Divergence:
    """The shortest model trace found (within ``max_runs`` port runs) on which the port still
    diverges; the divergence it shows then (possibly another field, never none)."""
    source = div.case.source
    if source is None:
        return div
    budget = [max_runs]
    best = [div]

    def diverges(ops: list[Operation]) -> bool:
        if budget[0] <= 0 or not ops:
            return False
        budget[0] -= 1
        try:
            case = Case.from_trace(div.case.name, replace(source, ops=ops), div.case.purpose, div.case.shows)
        except Exception:  # a cut the model refuses (an unknown slot after a restart, ...)
            return False
        found = session.run_one(case)
        if found is not None:
            best[0] = found
        return found is not None

    # The core's shrinker (pcspec/core/shrink.py): the same candidates as a property's shrinking.
    ops = shrink_list(list(source.ops), diverges, simpler_op)
    out = best[0]
    # The last divergent run is the shortest: re-run it so that the report matches the trace.
    final = Case.from_trace(div.case.name, replace(source, ops=ops), div.case.purpose, div.case.shows)
    again = session.run_one(final) or out
    again.shrunk_from = len(source.ops)
    return again

