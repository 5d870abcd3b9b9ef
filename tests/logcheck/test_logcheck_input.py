"""``pcspec check-log`` on input that is not a readable log, and on a bad ``--trace`` path: one
line on stderr naming the file, exit 2, never a traceback. One test per case."""

from __future__ import annotations

import os
import random
import threading
from pathlib import Path

import pytest

from pcspec.cli import main
from pcspec.core.errors import PcspecError
from pcspec.logcheck import check_log, read_log
from tests.support.paths import DATA

LOGS = DATA / "real"
GOOD = (b"0.00.000.001 I slot create_check: id  0 | task 1 | created context checkpoint 1 of 8 "
        b"(pos_min = 0, pos_max = 99, n_tokens = 100, size = 0.016 MiB)\n")


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["check-log", *args])
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str, path: Path, why: str) -> None:
    assert err == f"pcspec: error: {path}: {why}\n"


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "nope.log"
    code, out, err = run_cli([str(p)], capsys)
    assert (code, out) == (2, "")
    one_error_line(err, p, "no such file")


def test_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli([str(tmp_path)], capsys)
    assert (code, out) == (2, "")
    one_error_line(err, tmp_path, "is a directory, not a log file")


def test_binary_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "blob.bin"
    p.write_bytes(bytes(range(256)) * 64)
    with pytest.raises(PcspecError, match="binary"):
        read_log(p)
    code, out, err = run_cli([str(p)], capsys)
    assert (code, out) == (2, "")
    one_error_line(err, p, "binary data, not a llama-server log")


def test_binary_file_holding_server_lines_is_read(tmp_path: Path) -> None:
    """NUL bytes before the server started writing (a log file reused after a crash): the lines
    after them are still a log."""
    p = tmp_path / "holes.log"
    p.write_bytes(b"\x00" * 4096 + b"\n" + GOOD)
    assert check_log(p).stats.ckpt_created == 1


def test_invalid_utf8_in_a_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Token pieces cut mid-character are common in real logs: replaced, the line count kept."""
    p = tmp_path / "pieces.log"
    p.write_bytes(b"0.00.000.000 D slot process_toke: id  0 | task 1 | next token: 206 '\xce'\n"
                  + GOOD + b"\xff\xfe\xc3 garbage\n")
    code, out, err = run_cli([str(p), "--json"], capsys)
    assert (code, err) == (0, "")
    assert '"lines": 3' in out and '"checkpoint_created": 1' in out


def test_not_utf8_at_all(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Bytes that are mostly not UTF-8 (and hold no server line) are not a log."""
    rng = random.Random(0)
    p = tmp_path / "latin.bin"
    p.write_bytes(bytes(rng.randrange(128, 256) for _ in range(20000)))
    code, out, err = run_cli([str(p)], capsys)
    assert (code, out) == (2, "")
    one_error_line(err, p, "binary data, not a llama-server log")


def test_empty_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "empty.log"
    p.write_bytes(b"")
    with pytest.raises(PcspecError, match="empty file"):
        check_log(p)
    code, out, err = run_cli([str(p)], capsys)
    assert (code, out) == (2, "")
    one_error_line(err, p, "empty file, not a llama-server log")


def test_device(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli([os.devnull], capsys)
    assert (code, out) == (2, "")
    one_error_line(err, Path(os.devnull), "not a regular file or a pipe")


def test_unreadable_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    p = tmp_path / "secret.log"
    p.write_bytes(GOOD)
    p.chmod(0)
    code, out, err = run_cli([str(p)], capsys)
    assert (code, out) == (2, "")
    one_error_line(err, p, "cannot read: Permission denied")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_pipe_is_read_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A FIFO (``<(ssh host cat server.log)``) cannot be read twice: it is spooled to a
    temporary file and checked like the file itself."""
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    data = (LOGS / "03-eviction.log").read_bytes()

    def writer() -> None:
        with open(fifo, "wb") as f:
            f.write(data)

    t = threading.Thread(target=writer, daemon=True)  # never blocks the test run
    t.start()
    code, out, err = run_cli([str(fifo)], capsys)
    t.join()
    assert (code, err) == (0, "")
    assert "forced 13 (no usable checkpoint 13" in out


def test_trace_path_is_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "ok.log"
    log.write_bytes(GOOD)
    code, out, err = run_cli([str(log), "--trace", str(tmp_path)], capsys)
    assert (code, out) == (2, "")
    one_error_line(err, tmp_path, "cannot write the trace: Is a directory")


def test_trace_in_a_missing_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "ok.log"
    log.write_bytes(GOOD)
    trace = tmp_path / "no" / "events.jsonl"
    code, out, err = run_cli([str(log), "--trace", str(trace)], capsys)
    assert (code, out) == (2, "")
    one_error_line(err, trace, "cannot write the trace: No such file or directory")
    assert not trace.parent.exists()


def test_trace_fails_before_any_log_is_read(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The trace is opened first: a bad path is reported even when a log is bad too."""
    trace = tmp_path / "no" / "events.jsonl"
    code, _, err = run_cli([str(tmp_path / "missing.log"), "--trace", str(trace)], capsys)
    assert code == 2 and "cannot write the trace" in err


def test_trace_over_the_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Writing the trace over an input log would destroy the log before it is read."""
    log = tmp_path / "ok.log"
    log.write_bytes(GOOD)
    code, out, err = run_cli([str(log), "--trace", str(log)], capsys)
    assert (code, out) == (2, "")
    one_error_line(err, log, "the trace file is one of the logs")
    assert log.read_bytes() == GOOD
