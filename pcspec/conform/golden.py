"""The golden suite: every scenario lowered under ``fixed``, one file per case.

``write(DIR)`` regenerates the suite from ``scenarios()``; ``drift(DIR)`` lists what differs
between the files and a regeneration (a test runs it, so that the committed suite follows the
model); ``load(DIR)`` reads the cases for a conformance run. The committed suite is package data
(``SUITE``, ``pcspec/conform/suite/``): an installed pcspec runs it as a checkout does.

Command: ``pcspec conform --write-suite [DIR]`` (regenerate; by default ``SUITE``),
``--check-suite [DIR]`` (drift).
"""

from __future__ import annotations

from pathlib import Path

from pcspec.conform.case import Case
from pcspec.conform.scenarios import Scenario, base_scenarios, fault_scenarios
from pcspec.conform.witnesses import witness_scenarios

VARIANT = "fixed"
SUITE = Path(__file__).resolve().with_name("suite")


def scenarios() -> list[Scenario]:
    """Every scenario of the golden suite: the base ones, one per fault site, the witnesses."""
    return [*base_scenarios(), *fault_scenarios(), *witness_scenarios()]


def case_of(s: Scenario) -> Case:
    return Case.from_trace(s.name, s.trace(), s.purpose, list(s.shows))


def generate() -> list[Case]:
    return [case_of(s) for s in scenarios()]


def write(folder: Path) -> list[Path]:
    """Regenerate the suite in ``folder`` (files of cases that no longer exist are removed)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for case in generate():
        path = folder / f"{case.name}.jsonl"
        path.write_text(case.dumps(), encoding="utf-8")
        written.append(path)
    for old in folder.glob("*.jsonl"):
        if old not in written:
            old.unlink()
    return written


def load(folder: Path) -> list[Case]:
    return [Case.loads(p.read_text(encoding="utf-8"), str(p)) for p in sorted(folder.glob("*.jsonl"))]


def cases(folder: Path | None = None) -> list[Case]:
    """The suite in ``folder`` (default ``SUITE``)."""
    return load(folder or SUITE)


def drift(folder: Path) -> list[str]:
    """What differs between the files in ``folder`` and a regeneration (empty: none)."""
    out = []
    fresh = {c.name: c.dumps() for c in generate()}
    have = {p.stem: p.read_text(encoding="utf-8") for p in folder.glob("*.jsonl")}
    for name in sorted(set(fresh) | set(have)):
        if name not in have:
            out.append(f"{name}: missing")
        elif name not in fresh:
            out.append(f"{name}: no longer generated")
        elif fresh[name] != have[name]:
            a, b = have[name].splitlines(), fresh[name].splitlines()
            line = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
            out.append(f"{name}: differs from line {line + 1} on ({len(a)} lines committed, {len(b)} generated)")
    return out
