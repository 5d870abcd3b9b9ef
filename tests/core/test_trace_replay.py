"""Trace files and replay: parsing errors name the line, replays are exact, and the CLI
answers bad input with a message (exit 2), never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pcspec.cli import main
from pcspec.core.errors import PcspecError
from pcspec.core.ops import Step
from pcspec.core.trace import Trace, parse
from pcspec.model.config import Config, MemoryKind
from pcspec.model.designs import DESIGNS
from pcspec.properties.judge import replay
from pcspec.properties.judge import shrink_trace as shrink
from tests.support.common import PERF1_OPS, TRACE_HEADER, trace_text
from tests.support.paths import DATA


def test_replay_is_exact_and_deterministic() -> None:
    trace = parse(trace_text(*PERF1_OPS))
    a, b = replay(trace), replay(trace)
    assert [(v.property, v.op, v.message) for v in a.violations] == [
        (v.property, v.op, v.message) for v in b.violations
    ]
    assert any(v.property == "PERF-1" for v in a.violations)
    assert not replay(
        parse(trace_text(*PERF1_OPS)),
    ).server.crash


def test_same_trace_holds_under_fixed() -> None:
    trace = parse(trace_text(*PERF1_OPS), variant="fixed")
    assert not replay(trace).violations


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "empty trace"),
        ("not json\n", "line 1 is not JSON"),
        (json.dumps({"schema": 1}) + "\n", "not a pcspec trace header"),
        (json.dumps(TRACE_HEADER | {"schema": 99}) + "\n", "unsupported trace schema 99"),
        (json.dumps(TRACE_HEADER | {"variant": "nope"}) + "\n", "valid variants: baseline"),
        (json.dumps(TRACE_HEADER | {"config": {"bogus": 1}}) + "\n", "unknown configuration key(s) bogus"),
        (trace_text({"op": "fly"}), "line 2: unknown op 'fly'"),
        (trace_text({"op": "request", "tokens": "abc"}), "line 2: field 'tokens' must be a list of integers"),
        (trace_text({"op": "inject", "site": "nowhere"}), "valid sites: save.alloc.main"),
        (trace_text({"op": "run"}, {"op": "request", "tokens": [1], "spans": [3, 1]}), "line 3: field 'spans'"),
    ],
)
def test_malformed_traces_name_line_and_reason(text: str, needle: str) -> None:
    with pytest.raises(PcspecError) as exc:
        parse(text, "t.jsonl")
    assert needle in str(exc.value)


def test_cli_replay_reports_bad_input_without_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(trace_text({"op": "request", "tokens": [1, 2], "n_predict": 0}))
    assert main(["replay", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "line 2" in err and "n_predict" in err and "Traceback" not in err
    assert main(["replay", str(tmp_path / "missing.jsonl")]) == 2
    assert main(["fuzz", "--variant", "nope"]) == 2
    assert "valid variants" in capsys.readouterr().err
    assert main(["fuzz", "--property", "NOPE-9"]) == 2
    assert "valid properties: IMM-1" in capsys.readouterr().err


def test_cli_replay_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(trace_text(*PERF1_OPS))
    assert main(["replay", str(path)]) == 1  # violations, none expected
    out = capsys.readouterr().out
    assert "VIOLATED PERF-1" in out
    assert main(["replay", str(path), "--variant", "fixed"]) == 0
    trace = parse(path.read_text())
    v = next(v for v in replay(trace).violations if v.property == "PERF-1")
    trace.expect = [{"property": "PERF-1", "op": v.op}]
    trace.write(path)
    assert main(["replay", str(path), "--property", "PERF-1", "--dot", str(tmp_path / "g.dot")]) == 0
    assert "digraph ownership" in (tmp_path / "g.dot").read_text()
    assert main(["replay", str(path), "--json", "--property", "PERF-1"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    assert lines and all("violations" in x for x in lines)


def test_shrink_keeps_the_violation_and_drops_noise() -> None:
    noise = [{"op": "step"}, {"op": "inject", "site": "ckpt.write.dft"}, {"op": "sleep_wake"}]
    trace = parse(trace_text(*noise, *PERF1_OPS, *noise))
    small = shrink(trace, "PERF-1")
    assert len(small.ops) < len(trace.ops)
    assert all(op.OP in ("request", "run", "step") for op in small.ops)
    assert replay(small).matches(small.expect) and small.expect[0]["property"] == "PERF-1"


def test_trace_round_trip_keeps_config_and_variant() -> None:
    cfg = Config(memory=MemoryKind.HYBRID, n_slots=2, has_draft=True, spec_bytes=8)
    t = Trace(DESIGNS["pr27451"], cfg, [{"op": "step"}], seed=5)
    back = parse(t.dumps())
    assert back.config == cfg and back.variant.name == "pr27451" and back.seed == 5 and back.ops == [Step()]


def test_replay_accepts_check_log_event_traces(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = DATA / "real" / "01-growing.log"
    out = tmp_path / "events.jsonl"
    assert main(["check-log", str(log), "--trace", str(out)]) == 0
    capsys.readouterr()
    assert main(["replay", str(out)]) == 0
    assert "0 deviation(s)" in capsys.readouterr().out


# -- the design once named master --------------------------------------------------------------------


def test_a_trace_naming_master_replays_as_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``baseline`` was named ``master`` before (the upstream code before #30137): a trace whose
    header says so replays under ``baseline``, its expected violation and its name as written."""
    old = trace_text(*PERF1_OPS, header=TRACE_HEADER | {"variant": "master"})
    trace = parse(old)
    assert trace.variant is DESIGNS["baseline"]
    assert [v.property for v in replay(trace).violations] == [v.property for v in replay(parse(trace_text(
        *PERF1_OPS))).violations]
    assert parse(trace.dumps()).variant is DESIGNS["baseline"]  # written back under the new name
    assert '"variant": "baseline"' in trace.dumps().splitlines()[0]
    at_tree = parse(trace_text(header=TRACE_HEADER | {"variant": "master@0c1e570"}))
    assert at_tree.variant.name == "baseline@0c1e570" and at_tree.variant.rules.name == "october"
    path = tmp_path / "old.jsonl"
    path.write_text(old)
    assert main(["replay", str(path)]) == 1  # PERF-1, not expected by the header: found as before
    assert "variant baseline:" in capsys.readouterr().out


def test_the_committed_traces_naming_master_still_replay() -> None:
    # (traces written before the rename, kept as they were)
    from pcspec.core.trace import load

    old = [p for p in (DATA / "live" / "found").glob("*.trace.jsonl") if '"variant": "master"' in p.read_text()]
    assert old
    for p in old:
        assert load(p).variant is DESIGNS["baseline"]


def test_replay_variant_master_names_the_new_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(trace_text(*PERF1_OPS))
    assert main(["replay", str(path), "--variant", "master"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "--variant: design 'master' is now 'baseline' (the upstream design before #30137)" in err
    assert "today's upstream master is 'pr30137' under the 'november' rule set" in err
    with pytest.raises(PcspecError, match="is now 'baseline'"):
        parse(trace_text(*PERF1_OPS), variant="master")  # (the API's override too)
