"""The conformance run ``pcspec conform`` makes: the golden suite, then fuzzed traces, then the
first divergence shrunk. Nothing here prints; ``progress`` gets one line now and then."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

from pcspec.conform import fuzz, golden
from pcspec.conform.case import Case
from pcspec.conform.lower import LoweringError
from pcspec.conform.session import Divergence, Result, Session, sanitizer_findings, shrink
from pcspec.model.design import Design


def golden_cases(variant: Design, suite: Path | None) -> list[Case]:
    """The golden suite for ``variant``: the committed files for ``fixed``, the same scenarios
    lowered under any other variant."""
    if variant.name == golden.VARIANT:
        if suite is not None and suite.is_file():
            return [Case.loads(suite.read_text(encoding="utf-8"), str(suite))]
        return golden.cases(suite)
    return [
        Case.from_trace(s.name, replace(s.trace(), variant=variant), s.purpose, list(s.shows))
        for s in golden.scenarios()
    ]


def fuzz_cases(variant: Design, count: int, seed: int, result: Result) -> Iterator[Case]:
    for k, trace in enumerate(fuzz.traces(variant, count, seed)):
        try:
            case = Case.from_trace(f"fuzz-seed{seed}-{k}", trace, f"fuzzed trace {k} of seed {seed}")
        except LoweringError as exc:  # a gap of the kit, never of the port: say so and go on
            result.notes.append(f"fuzzed trace {k}: the kit could not lower it ({exc})")
            continue
        result.fuzzed += 1
        if not case.ops:
            result.lowering_skipped += 1
            continue
        yield case


def conform(
    cmd: str,
    variant: Design,
    suite: Path | None = None,
    n_fuzz: int = 1000,
    seed: int = 0,
    use_golden: bool = True,
    do_shrink: bool = True,
    timeout: float = 20.0,
    progress: Callable[[str], None] = lambda _m: None,
) -> Result:
    result = Result()
    session = Session(cmd, timeout)
    t0 = time.monotonic()
    try:
        if use_golden:
            cases = golden_cases(variant, suite)
            result.golden = len(cases)
            progress(f"golden suite: {len(cases)} cases")
            session.run(iter(cases), result)
        if result.divergence is None and n_fuzz > 0:
            progress(f"fuzzing: {n_fuzz} traces, seed {seed}")
            step = max(1, n_fuzz // 20)

            def tick(case: Case) -> None:
                if result.fuzzed % step == 0:
                    rate = result.fuzzed / max(1e-9, time.monotonic() - t0)
                    progress(f"{result.fuzzed}/{n_fuzz} fuzzed traces, {result.ops} operations ({rate:.1f} traces/s)")

            session.run(fuzz_cases(variant, n_fuzz, seed, result), result, tick)
        result.port_seconds = session.port_seconds
        if result.divergence is not None and do_shrink and result.divergence.case.source is not None:
            progress("shrinking the divergent trace")
            result.divergence = shrink(session, result.divergence)
    finally:
        at_exit = session.close()
        result.seconds = time.monotonic() - t0
    if at_exit is not None and result.divergence is None and session.last is not None:
        # (a sanitizer that reports at exit, a leak: after the last case)
        result.divergence = Divergence(session.last, -1, None, None, [], sanitizer_findings(str(at_exit)), str(at_exit))
    return result
