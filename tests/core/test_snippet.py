"""Counterexample pytest files: readable steps (no embedded JSON string), replayed by the same
code as every replay, failing while the violation reproduces, and editable."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pcspec.core.snippet import pytest_snippet as _bare_snippet
from pcspec.core.trace import Trace, parse
from pcspec.model.config import Config, MemoryKind
from pcspec.model.designs import DESIGNS, Baseline, Fixed
from pcspec.model.rulesets import OCTOBER
from pcspec.properties.judge import replay, where_shown
from tests.support.common import PERF1_OPS, trace_text

BASELINE = DESIGNS["baseline"]


class Mine(Baseline):
    """baseline with fixed's unique accounting and transactional save."""

    name = "mine"
    entry_sizes = Fixed.entry_sizes
    candidate_size = Fixed.candidate_size
    prompt_save = Fixed.prompt_save


def pytest_snippet(trace, name):  # type: ignore[no-untyped-def]
    """The snippet as pcspec writes it: each expected violation noted where it shows."""
    return _bare_snippet(trace, name, where_shown(trace) if trace.expect else {})


def perf1_trace(variant: Any = None) -> Trace:
    trace = parse(trace_text(*PERF1_OPS), variant=variant)
    v = next(v for v in replay(trace).violations if v.property == "PERF-1")
    trace.expect = [{"property": "PERF-1", "op": v.op, "message": v.message}]
    return trace


def load(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(source, "<snippet>", "exec"), namespace)
    return namespace


def test_the_steps_are_python_not_a_json_string() -> None:
    source = pytest_snippet(perf1_trace(), "baseline__PERF-1")
    assert "TRACE = " not in source and "parse(" not in source
    assert 'VARIANT = get_design("baseline")' in source
    assert "memory=MemoryKind.RECURRENT" in source
    assert '{"op": "request", "spans": [8], "tokens": [*range(1, 20)]},  # 0\n' in source
    assert '{"op": "request", "tokens": [*range(100, 110)]},  # 2  <- PERF-1 shows here' in source
    assert '{"op": "run"},  # 1' in source
    ns = load(source)
    assert ns["STEPS"] == list(PERF1_OPS) and ns["CONFIG"] == perf1_trace().config


def test_it_replays_to_the_same_violations() -> None:
    trace = perf1_trace()
    ns = load(pytest_snippet(trace, "baseline__PERF-1"))
    again = replay(Trace(ns["VARIANT"], ns["CONFIG"], ns["STEPS"]))
    assert [(v.property, v.op, v.message) for v in again.violations] == [
        (v.property, v.op, v.message) for v in replay(trace).violations
    ]


def test_a_design_of_ones_own_is_written_as_its_class() -> None:
    """The file imports the design's class from its module and makes it as the trace has it:
    under its own rule set, or under another one named."""
    mine = Mine()
    source = pytest_snippet(perf1_trace(mine), "mine__PERF-1")
    assert "from tests.core.test_snippet import Mine\n" in source and "VARIANT = Mine()\n" in source
    assert "get_design(" not in source and "get_rule_set" not in source
    back = load(source)["VARIANT"]
    assert type(back) is Mine and back.name == mine.name and back.rules is mine.rules
    october = Mine(OCTOBER)
    source = pytest_snippet(perf1_trace(october), "mine__PERF-1")
    assert "from pcspec.model.rulesets import get_rule_set\n" in source
    assert "VARIANT = Mine(get_rule_set('october'))\n" in source
    back = load(source)["VARIANT"]
    assert type(back) is Mine and back.name == "mine" and back.rules is OCTOBER


def test_long_token_lists_wrap() -> None:
    tokens = list(range(0, 400, 3))
    trace = Trace(BASELINE, Config(memory=MemoryKind.KV), [{"op": "request", "tokens": tokens}])
    source = pytest_snippet(trace, "long")
    assert max(len(line) for line in source.splitlines()) <= 100
    assert load(source)["STEPS"][0]["tokens"] == tokens


@pytest.mark.slow
def test_the_file_fails_while_the_violation_reproduces_and_passes_once_edited(tmp_path: Path) -> None:
    path = tmp_path / "test_baseline__PERF_1.py"
    path.write_text(pytest_snippet(perf1_trace(), "baseline__PERF-1"))

    def pytest_exit() -> int:
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(path)]
        return subprocess.run(cmd, cwd=tmp_path, capture_output=True, timeout=120).returncode

    assert pytest_exit() == 1
    # Editing it as a person would: the baseline design becomes fixed, which has no PERF-1.
    path.write_text(path.read_text().replace('get_design("baseline")', 'get_design("fixed")'))
    assert pytest_exit() == 0
