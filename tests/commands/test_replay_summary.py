"""`pcspec replay`: the --json summary, what "expected violations reproduced" means, and a trace
of a variant of one's own replayed with --variant-module."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pcspec.cli import main
from pcspec.core.trace import parse
from pcspec.properties.judge import replay
from tests.support.common import PERF1_OPS, TRACE_HEADER, trace_text


def perf1_op() -> int:
    """The model operation at which PERF1_OPS shows PERF-1 on baseline."""
    return next(v.op for v in replay(parse(trace_text(*PERF1_OPS))).violations if v.property == "PERF-1")


def write(tmp_path: Path, expect: list[dict[str, Any]] | None = None, **header: Any) -> Path:
    head = TRACE_HEADER | header | ({"expect": expect} if expect is not None else {})
    path = tmp_path / "t.jsonl"
    path.write_text(trace_text(*PERF1_OPS, header=head))
    return path


def json_lines(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_json_ends_with_a_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, [{"property": "PERF-1", "op": perf1_op()}])
    assert main(["replay", str(path), "--json"]) == 0
    *steps, summary = json_lines(capsys)
    assert [s["kind"] for s in steps] == ["step"] * len(PERF1_OPS)
    assert summary["kind"] == "summary"
    assert summary["expected_reproduced"] is True and summary["exit"] == 0
    assert summary["operations"] == len(PERF1_OPS) and "PERF-1" in summary["violated"]
    assert summary["variant"] == "baseline" and summary["crashed"] is None


def test_json_summary_when_not_reproduced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, [{"property": "PERF-1", "op": perf1_op()}])
    assert main(["replay", str(path), "--json", "--variant", "fixed"]) == 1
    summary = json_lines(capsys)[-1]
    assert summary["expected_reproduced"] is False and summary["exit"] == 1 and summary["variant"] == "fixed"


def test_json_summary_without_expectations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path)
    assert main(["replay", str(path), "--json"]) == 1  # violations, none expected
    summary = json_lines(capsys)[-1]
    assert summary["expected_reproduced"] is None and summary["violations"] > 0 and summary["exit"] == 1


@pytest.mark.parametrize(
    ("expect", "code"),
    [
        ([{"property": "PERF-1"}], 0),  # no op: at any operation
        ([{"property": "PERF-1", "op": "AT"}], 0),  # other violations may show too
        ([{"property": "PERF-1", "op": "AT"}, {"property": "RB-1"}], 1),  # every expected one must
        ([{"property": "PERF-1", "op": 0}], 1),  # at its operation
    ],
)
def test_expected_violations_must_be_present(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], expect: list[dict[str, Any]], code: int
) -> None:
    at = perf1_op()
    expect = [e | {"op": at} if e.get("op") == "AT" else e for e in expect]
    path = write(tmp_path, expect)
    assert main(["replay", str(path)]) == code
    assert ("reproduced" if code == 0 else "NOT reproduced") in capsys.readouterr().out


def test_a_trace_of_ones_own_variant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "myvariants.py").write_text(
        "from pcspec.model.designs import Baseline\n\n\n"
        "class Mine(Baseline):\n"
        "    name = 'mine'\n\n\n"
        "MINE = Mine()\n"
    )
    monkeypatch.chdir(tmp_path)  # found from the current folder, as python -m would
    path = write(tmp_path, [{"property": "PERF-1", "op": perf1_op()}], variant="mine")
    assert main(["replay", str(path)]) == 2
    assert "--variant-module" in capsys.readouterr().err
    assert main(["replay", str(path), "--variant-module", "myvariants:MINE"]) == 0
    assert "variant mine:" in capsys.readouterr().out
    assert main(["replay", str(path), "--variant", "fixed", "--variant-module", "myvariants:MINE"]) == 2
    assert "not allowed with argument" in capsys.readouterr().err
