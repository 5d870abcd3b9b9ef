"""The conformance kit end to end with the Python port (no compiler needed).

The Python port (``tests/support/pyport.py``) is written from docs/SPEC.md; it must conform on the
golden suite and on fuzzed traces, and each of its broken builds must diverge with the property
it breaks named. The command line is exercised with the port as a child process.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pcspec.cli import main
from pcspec.conform import golden
from pcspec.conform.case import Case
from pcspec.conform.fuzz import traces
from pcspec.conform.session import Divergence, compare
from pcspec.model.designs import DESIGNS
from tests.support.paths import TESTS
from tests.support.pyport import BREAKS, Core

CASES = golden.load(golden.SUITE)
PORT = f"{sys.executable} {TESTS / 'support' / 'pyport.py'}"

# The property each broken seam must be caught as (docs/SPEC.md section 8).
CAUGHT_AS = {
    "inplace-update": "IMM-1",
    "publish-before-validate": "RB-1",
    "per-holder": "ACC-1",
    "forget-restored": "PERF-2",
}


def run_in_process(case: Case, broken: str = "") -> Divergence | None:
    core = Core(case.config, broken)
    return compare(case, [core.apply(op) for op in case.ops])


def test_python_port_conforms_on_the_golden_suite() -> None:
    for case in CASES:
        d = run_in_process(case)
        assert d is None, f"{case.name}: operation {d.index}: {d.diffs[:3]}"


@pytest.mark.slow
def test_python_port_conforms_on_fuzzed_traces() -> None:
    n = 0
    for trace in traces(DESIGNS["fixed"], 25, seed=11):
        case = Case.from_trace("fuzz", trace)
        d = run_in_process(case)
        assert d is None, f"fuzzed trace {n}: operation {d.index}: {d.diffs[:3]}"
        n += 1
    assert n == 25


@pytest.mark.parametrize("broken", BREAKS)
def test_each_broken_seam_is_caught_and_named(broken: str) -> None:
    found = next((d for d in (run_in_process(c, broken) for c in CASES) if d is not None), None)
    assert found is not None, f"the golden suite does not catch the broken seam {broken}"
    assert CAUGHT_AS[broken] in found.properties, (broken, found.properties, found.diffs[:2])


def test_command_line_conforms(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["conform", "--cmd", PORT, "--fuzz", "3", "--seed", "5", "--json", "--out", str(tmp_path)])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    assert out["ok"] and out["golden"] == len(CASES) and out["fuzzed"] == 3


def test_command_line_reports_a_divergence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["conform", "--cmd", PORT + " --break per-holder", "--fuzz", "0", "--json", "--out", str(tmp_path)])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    d = out["divergence"]
    assert "ACC-1" in d["properties"]
    assert d["trace"][0]["op"] == "begin" and len(d["trace"]) == d["index"] + 2
    assert d["shrunk_from"] is not None and len(d["source"]) <= d["shrunk_from"]
    written = Case.loads(Path(d["file"]).read_text(encoding="utf-8"))
    assert len(written.ops) == d["index"] + 1


def test_command_line_text_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["conform", "--cmd", PORT + " --break forget-restored", "--fuzz", "0", "--out", str(tmp_path)])
    text = capsys.readouterr().out
    assert code == 1
    assert "DIVERGES" in text and "violates PERF-2" in text and "expected" in text and '"op":"begin"' in text


def test_suite_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conform", "--write-suite", str(tmp_path)]) == 0
    assert len(list(tmp_path.glob("*.jsonl"))) == len(CASES)
    assert main(["conform", "--check-suite", str(tmp_path)]) == 0
    next(tmp_path.glob("*.jsonl")).write_text("{}\n", encoding="utf-8")
    assert main(["conform", "--check-suite", str(tmp_path)]) == 1
    assert "drifted" in capsys.readouterr().out
