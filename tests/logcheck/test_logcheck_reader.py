"""The log reader on line formats the sample logs do not show: older server builds, no prefix,
colours, glued lines, invalid UTF-8, foreign files, a truncated last line, the build line and
the state reader's line. Input that is not a log at all: ``test_logcheck_input``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pcspec.cli import main
from pcspec.logcheck import check_events, check_log, parse_bytes, parse_text, read_log
from pcspec.logcheck import events as ev
from tests.support.paths import DATA


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


# a log in the formats of Feb-June 2026 builds (the older eras of pcspec.logcheck.builds)
OLD_BUILD = (DATA / "logs" / "old-build.log").read_text()


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


def test_other_program(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path, "nginx.log", b'127.0.0.1 - - [01/Oct/2026:10:00:00 +0000] "GET / HTTP/1.1"'
              b" 200 612\nslot machine: jackpot\nsrv  nothing: to see\n" * 100)
    # lines in the server's prefix format, none about the cache: nothing checked (exit 3)
    assert main(["check-log", str(p), "--json"]) == 3
    out = json.loads(capsys.readouterr().out)
    assert out["lines"] == 300 and out["deviations"] == [] and out["nothing_to_check"]
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




def test_build_and_state_read_lines() -> None:
    """The two lines read without an srv/slot prefix (common/common.cpp:402,
    src/llama-kv-cache.cpp:2452), with and without the prefix and colours."""
    text = ("0.00.002.838 I cmn  common_param: common_params_print_info: build 1 (0c1e570) with "
            "GNU 12.2.0 for Linux x86_64\n"
            "0.01.001.981 D state_read_meta: cell_count = 589, dest_seq_id = 0\n"
            "\x1b[90m0.01.002.098\x1b[0m D state_read_meta: cell_count = 32, dest_seq_id = 1\n"
            "state_read_meta: cell_count = 7, dest_seq_id = 2\n"
            "I cmn  common_param: common_params_print_info: verbosity = 2147483647\n"
            "D state_read_meta: not enough cells in kv cache\n")
    events = parse_text(text).events
    assert events == [ev.BuildLine(1, "I", 1, "0c1e570"), ev.StateRead(2, "D", 589, 0),
                      ev.StateRead(3, "D", 32, 1), ev.StateRead(4, "", 7, 2)]


def test_streaming_matches_whole_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Read in blocks of a few bytes (lines, UTF-8 sequences and CRLFs cut anywhere), a log
    gives the same events, line count and notes as parsed whole."""
    from pcspec.logcheck import source

    data = (OLD_BUILD.encode() + b"0.00.000.001 D slot process_toke: id  0 | task 1 | next "
            b"token: 206 '\xce\xa9\xce'\r\n"
            b"0.01.001.981 D state_read_meta: cell_count = 589, dest_seq_id = 0\n"
            b"I slot      release: id  0 | task 2 | stop processing: n_tokens = 31")
    whole = parse_bytes(data)
    p = tmp_path / "a.log"
    p.write_bytes(data)
    for block in (1, 2, 3, 7, 64, 1 << 20):
        monkeypatch.setattr(source, "BLOCK", block)
        read = read_log(p)
        assert (read.events, read.n_lines, read.notes) == (whole.events, whole.n_lines,
                                                           whole.notes), block
    assert whole.notes == [f"line {whole.n_lines}: last line has no line end (truncated?); "
                           "ignored"]


def test_overlong_line_is_cut(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A line longer than MAX_LINE (a dumped request body, a binary blob) is read up to HEAD
    bytes: memory stays bounded, later lines keep their numbers."""
    from pcspec.logcheck import source

    monkeypatch.setattr(source, "BLOCK", 16)
    monkeypatch.setattr(source, "MAX_LINE", 200)
    monkeypatch.setattr(source, "HEAD", 10)
    line = ("I slot create_check: id  0 | task 1 | created context checkpoint 1 of 8 "
            "(pos_min = 0, pos_max = 99, n_tokens = 100, size = 0.016 MiB)\n")
    p = tmp_path / "long.log"
    p.write_bytes(b"x" * 1000 + b"\n" + line.encode() + b"y" * 500)
    read = read_log(p)
    assert [(e.kind, e.line) for e in read.events] == [("checkpoint_created", 2)]
    assert read.n_lines == 3
    assert read.notes == ["line 1: longer than 200 bytes, only its first 10 bytes were read",
                          "line 3: longer than 200 bytes, only its first 10 bytes were read"]
