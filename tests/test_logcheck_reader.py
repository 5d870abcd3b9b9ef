"""The log reader on line formats the sample logs do not show, and on bad input: older server
builds, no prefix, colours, glued lines, invalid UTF-8, empty, binary and foreign files, a
truncated last line. Bad input gives a clear message (exit 2) or an empty report, never a
traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pcspec.cli import main
from pcspec.errors import PcspecError
from pcspec.logcheck import check_events, check_log, parse_bytes, parse_text, read_log
from pcspec.logcheck import events as ev


def kinds(text: str) -> list[str]:
    return [e.kind for e in parse_text(text).events]


def test_prefix_forms() -> None:
    msg = "created context checkpoint 1 of 8 (pos_min = 0, pos_max = 9, n_tokens = 10, " \
          "size = 0.016 MiB)"
    for prefix in ("12.34.567.890 I ", "I ", "", "\x1b[90m0.00.001.000\x1b[0m \x1b[32mI\x1b[0m "):
        read = parse_text(f"{prefix}slot create_check: id  3 | task 17 | {msg}\n")
        assert len(read.events) == 1, prefix
        e = read.events[0]
        assert isinstance(e, ev.CheckpointCreated)
        assert (e.slot, e.task, e.index, e.cap, e.n_tokens) == (3, 17, 1, 8, 10)


def test_glued_line() -> None:
    """A message printed without "\\n" followed by a complete one (03-eviction.log line 2496)."""
    text = ("0.00.810.924 D No parser definition detected, assuming pure content parser."
            "0.00.810.936 I slot      release: id  0 | task 62 | stop processing: n_tokens = 612, "
            "truncated = 0\n")
    read = parse_text(text)
    assert [(e.kind, e.line) for e in read.events] == [("slot_released", 1)]


def test_invalid_utf8_and_crlf() -> None:
    data = (b"0.00.000.001 D slot process_toke: id  0 | task 1 | next token: 206 '\xce'\r\n"
            b"0.00.000.002 I slot   operator(): id  0 | task 1 | new prompt, n_ctx_slot = 4096, "
            b"n_keep = 0, task.n_tokens = 12\r\n"
            b"\xff\xfe garbage \xc3\r\n")
    read = parse_bytes(data)
    assert [(e.kind, e.line) for e in read.events] == [("new_prompt", 2)]
    assert read.n_lines == 3


# a log in the formats of Feb-June 2026 builds (llama-server-behavior.md 5.5 "Older builds")
OLD_BUILD = (Path(__file__).parent / "data" / "logs" / "old-build.log").read_text()


def test_older_build_formats() -> None:
    """Feb-June 2026 formats: WARN levels, no n_tokens / pos_next, ``Checking``, ``sim =``,
    ``sim_best``, the ``update_slots`` tag."""
    read = parse_text(OLD_BUILD)
    assert len(read.events) == 21
    created = [e for e in read.events if isinstance(e, ev.CheckpointCreated)]
    assert [c.n_tokens for c in created] == [None, None]
    looked = [e for e in read.events if isinstance(e, ev.LoadLookup)]
    assert looked[0].legacy
    result = check_events(read.events)
    assert result.deviations == []
    assert result.runs[0].era == "pre-20287"
    assert (result.runs[0].sweep, result.runs[0].invalidation) == ("none", "pos-max")
    assert result.stats.ckpt_created == 2 and result.stats.ckpt_invalidated == 2
    assert result.stats.full_reprocess == 1 and result.stats.cache_saves == 1


def test_era_markers() -> None:
    pre_25078 = OLD_BUILD.replace("(pos_min = 0, pos_max = 99, size", "(pos_min = 0, pos_max = 99, "
                                  "n_tokens = 100, size").replace(
        "(pos_min = 0, pos_max = 199, size", "(pos_min = 0, pos_max = 199, n_tokens = 200, size")
    assert check_events(parse_text(pre_25078).events).runs[0].era == "pre-25078"
    pre_26271 = "\n".join(line for line in pre_25078.splitlines()
                          if "update_slots" not in line or "cached" in line or "new prompt" in
                          line) + "\n"
    assert check_events(parse_text(pre_26271).events).runs[0].era == "pre-26271"


def test_log_starting_mid_way() -> None:
    """No start-up lines: lists and cache are learnt as the log reveals them; nothing is
    judged on what the log did not show."""
    text = "\n".join(OLD_BUILD.splitlines()[4:]) + "\n"
    result = check_events(parse_text(text).events)
    assert result.deviations == []
    assert any("starts after the server did" in n for n in result.notes)


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def test_empty_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path, "empty.log", b"")
    result = check_log(p)
    assert result.n_lines == 0 and result.events == [] and result.deviations == []
    assert main(["check-log", str(p)]) == 0
    assert "no llama-server prompt-cache or checkpoint lines found" in capsys.readouterr().out


def test_binary_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path, "blob.bin", bytes(range(256)) * 64)
    with pytest.raises(PcspecError, match="binary"):
        read_log(p)
    assert main(["check-log", str(p)]) == 2
    assert "binary data" in capsys.readouterr().err


def test_other_program(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path, "nginx.log", b'127.0.0.1 - - [01/Oct/2026:10:00:00 +0000] "GET / HTTP/1.1"'
              b" 200 612\nslot machine: jackpot\nsrv  nothing: to see\n" * 100)
    assert main(["check-log", str(p), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["lines"] == 300 and out["deviations"] == []
    assert out["events"]["checkpoint_created"] == 0


def test_truncated_last_line(tmp_path: Path) -> None:
    full = ("0.00.000.001 I slot create_check: id  0 | task 1 | created context checkpoint 1 of 8 "
            "(pos_min = 0, pos_max = 99, n_tokens = 100, size = 0.016 MiB)\n")
    cut = full + full.replace("0.00.000.001", "0.00.000.002")[:-20]
    result = check_log(write(tmp_path, "cut.log", cut.encode()))
    assert result.stats.ckpt_created == 1
    assert any("line 2" in n and "truncated" in n for n in result.notes)
    # a foreign last line without "\n" is simply not a server line
    other = full + "some other program's output"
    result = check_log(write(tmp_path, "ok.log", other.encode()))
    assert result.stats.ckpt_created == 1
    assert not any("truncated" in n for n in result.notes)


def test_missing_and_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-log", str(tmp_path / "nope.log")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["check-log", str(tmp_path)]) == 2
    assert "directory" in capsys.readouterr().err


def test_bad_option_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path, "empty.log", b"")
    assert main(["check-log", str(p), "--option", "sweep=maybe"]) == 2
    assert "sweep" in capsys.readouterr().err


def test_deviation_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = ("I slot create_check: id  0 | task 1 | created context checkpoint 9 of 8 "
            "(pos_min = 0, pos_max = 99, n_tokens = 100, size = 0.016 MiB)\n")
    p = write(tmp_path, "bad.log", line.encode())
    assert main(["check-log", str(p)]) == 1
    out = capsys.readouterr().out
    assert "line 1: [ckpt-cap]" in out


def test_trace_of_unreadable_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path, "empty.log", b"")
    assert main(["check-log", str(p), "--trace", str(tmp_path / "no" / "dir.jsonl")]) == 2
    assert "cannot write the trace" in capsys.readouterr().err
