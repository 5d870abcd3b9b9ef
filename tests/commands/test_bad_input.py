"""Bad input is one line on stderr and exit 2, never a traceback: one test per case.

Each case runs the CLI in-process (an exception escaping ``main`` would fail the test) and checks
the exit status, that stderr is exactly one line, and that the line names the place (file and
line, or the option or field). A few also run as a real process, where a traceback would print.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from pcspec.cli import main
from pcspec.model.config import UPPER, Config
from tests.support.common import TRACE_HEADER, trace_text


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str], *needles: str) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # nothing a failing case writes lands in the checkout
    return tmp_path


def write_trace(path: Path, *ops: dict[str, Any], header: dict[str, Any] | None = None) -> Path:
    path.write_text(trace_text(*ops, header=header), encoding="utf-8")
    return path


# -- traces ------------------------------------------------------------------------------------------


def test_a_line_nested_100000_levels_deep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "deep.jsonl"
    path.write_text(json.dumps(TRACE_HEADER) + "\n" + "[" * 100_000 + "]" * 100_000 + "\n")
    one_line_error(capsys, ["replay", str(path)], "deep.jsonl: line 2", "nested too deeply")


def test_an_integer_of_5000_digits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "big.jsonl"
    path.write_text(json.dumps(TRACE_HEADER) + '\n{"op": "request", "tokens": [' + "9" * 5000 + "]}\n")
    one_line_error(capsys, ["replay", str(path)], "big.jsonl: line 2", "integer of more than")


@pytest.mark.parametrize("token", [2**31, 2**40, -1, -(2**31)])
def test_token_ids_out_of_range_are_refused_when_the_trace_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], token: int
) -> None:
    # Before: 2**31 and more crashed the slot save with struct.error; a negative id was refused
    # only at the save, without file or line.
    path = write_trace(
        tmp_path / "t.jsonl",
        {"op": "request", "tokens": [1, 2, token], "n_predict": 1},
        {"op": "run"},
        {"op": "slot_save", "id_slot": 0, "filename": "a.bin"},
    )
    one_line_error(capsys, ["replay", str(path)], "t.jsonl: line 2", "'tokens'", str(token), "index 2")


def test_a_config_with_negative_n_ctx_checkpoints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    header = TRACE_HEADER | {"config": {"n_ctx_checkpoints": -1}}
    path = write_trace(tmp_path / "t.jsonl", header=header)
    one_line_error(capsys, ["replay", str(path)], "t.jsonl: line 1", "n_ctx_checkpoints must be >= 0")


def test_an_unknown_property_in_expect(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_trace(tmp_path / "t.jsonl", header=TRACE_HEADER | {"expect": [{"property": "NOPE-1", "op": 3}]})
    one_line_error(capsys, ["replay", str(path)], "t.jsonl: line 1", '"expect"', "NOPE-1", "valid properties: IMM-1")


@pytest.mark.parametrize("op", [-1, "3", True])
def test_a_bad_op_index_in_expect(tmp_path: Path, capsys: pytest.CaptureFixture[str], op: object) -> None:
    path = write_trace(tmp_path / "t.jsonl", header=TRACE_HEADER | {"expect": [{"property": "RB-1", "op": op}]})
    one_line_error(capsys, ["replay", str(path)], "t.jsonl: line 1", '"op" must be an operation index')


def test_not_utf8_and_a_header_line_too_long(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    binary = tmp_path / "model.gguf"
    binary.write_bytes(b"GGUF\xff\xfe\x00\x01" * 100)
    one_line_error(capsys, ["replay", str(binary)], "model.gguf: line 1 is not UTF-8")
    long = tmp_path / "long.log"
    long.write_text("x" * (2 << 20))
    one_line_error(capsys, ["replay", str(long)], "long.log: line 1 is longer than")


def test_a_variant_of_ones_own_needs_variant_module(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_trace(tmp_path / "t.jsonl", header=TRACE_HEADER | {"variant": "mine"})
    one_line_error(capsys, ["replay", str(path)], "unknown variant 'mine'", "--variant-module MODULE:NAME")


@pytest.mark.parametrize(
    ("spec", "source", "needle"),
    [
        ("nocolon", None, "expected MODULE:NAME"),
        ("absent_module:X", None, "no module named 'absent_module'"),
        ("good:NOT_THERE", "X = 1\n", "good.NOT_THERE is nothing, not a pcspec Design"),
        ("good:X", "X = 1\n", "good.X is a int, not a pcspec Design"),
        ("broken:X", "raise RuntimeError('boom')\n", "RuntimeError: boom (" ),
    ],
)
def test_bad_variant_modules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str, source: str | None, needle: str
) -> None:
    if source is not None:
        (tmp_path / f"{spec.partition(':')[0]}.py").write_text(source)
    path = write_trace(tmp_path / "t.jsonl")
    one_line_error(capsys, ["replay", str(path), "--variant-module", spec], "--variant-module", needle)


# -- the design once named master ---------------------------------------------------------------------

RENAMED = ("is now 'baseline", "(the upstream design before #30137)",
           "today's upstream master is 'pr30137' under the 'november' rule set")


@pytest.mark.parametrize(
    "argv",
    [
        ["fuzz", "--variant", "master"],
        ["replay", "TRACE", "--variant", "master"],
        ["prove", "--variant", "master"],
        ["conform", "--cmd", "true", "--variant", "master"],
        ["check-log", "LOG", "--design", "master"],
        ["bench", "grown", "--model-only", "--design", "master"],
        ["live", "--design", "master"],
        ["live", "--matrix", "--design", "master"],
        ["live", "--server", "SERVER", "--variant", "master@0c1e570"],
    ],
    ids=lambda argv: " ".join(argv),
)
def test_the_old_design_name_master_says_what_it_is_now(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """``master`` was the upstream code before #30137, now ``baseline``; a command line that names
    it (a model's design: pcspec.model.designs.get_design; a build: pcspec.live.designs.design_of)
    is refused, saying both names, before anything runs (a trace header naming it still reads)."""
    server = tmp_path / "llama-server"
    server.write_text("#!/bin/sh\nexit 0\n")
    server.chmod(0o755)
    (tmp_path / "server.log").write_text("")
    files = {"TRACE": str(write_trace(tmp_path / "t.jsonl")), "LOG": str(tmp_path / "server.log"),
             "SERVER": str(server)}
    line = one_line_error(capsys, [files.get(a, a) for a in argv], *RENAMED)
    assert "'master" in line


def test_a_design_of_ones_own_may_not_take_the_old_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # (a trace naming master reads as baseline: a design of one's own by that name would be lost)
    (tmp_path / "olds.py").write_text("from pcspec.model.designs import Fixed\n\n\n"
                                      "class Mine(Fixed):\n    name = 'master'\n")
    one_line_error(capsys, ["fuzz", "--variant-module", "olds:Mine"], "--variant-module olds:Mine",
                   "'master' is the old name of pcspec's 'baseline'")


def test_a_build_named_master_says_what_it_is_now() -> None:
    from pcspec.live.designs import DesignUnavailable, design_of

    with pytest.raises(DesignUnavailable, match="design 'master' is now 'baseline'"):
        design_of("master")
    assert design_of("baseline").tree == "0c1e570" and design_of("baseline").patches == ()


# -- output paths -------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["a folder", "a missing folder"])
def test_replay_dot_to_a_folder_or_into_a_missing_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    path = write_trace(tmp_path / "t.jsonl", {"op": "step"})
    dot = tmp_path if where == "a folder" else tmp_path / "missing" / "g.dot"
    needle = "is a folder" if where == "a folder" else "does not exist"
    one_line_error(capsys, ["replay", str(path), "--dot", str(dot)], f"--dot {dot}", needle)


def read_only_folder(tmp_path: Path) -> Path:
    """A folder in which no file can be created, for this user: chmod for a user, /sys for root
    (root ignores permission bits)."""
    if os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        return ro
    if Path("/sys").is_dir() and not os.access("/sys/pcspec-probe", os.F_OK):
        try:
            (Path("/sys") / "pcspec-probe").write_bytes(b"")
        except OSError:
            return Path("/sys")
    pytest.skip("no read-only folder for root on this machine")


@contextmanager
def no_fuzzing(monkeypatch: pytest.MonkeyPatch, module: str, name: str) -> Iterator[None]:
    """The command must refuse before it fuzzes: the fuzzing entry point must not be called."""

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("fuzzing started before the output folder was checked")

    monkeypatch.setattr(f"{module}.{name}", refuse)
    yield


OUT_CASES = ["a file", "under a file", "read-only"]


def out_path(tmp_path: Path, case: str) -> tuple[Path, str]:
    afile = tmp_path / "afile"
    afile.write_text("")
    if case == "a file":
        return afile, "is a file, not a folder"
    if case == "under a file":
        return afile / "out", "afile is a file"
    return read_only_folder(tmp_path), "cannot write in this folder"


@pytest.mark.parametrize("case", OUT_CASES)
def test_fuzz_out_that_cannot_be_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    out, needle = out_path(tmp_path, case)
    with no_fuzzing(monkeypatch, "pcspec.commands.fuzz", "fuzz_variant"):
        one_line_error(capsys, ["fuzz", "--out", str(out)], f"--out {out}", needle)


@pytest.mark.parametrize("case", OUT_CASES)
def test_verify_out_that_cannot_be_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    out, needle = out_path(tmp_path, case)
    with no_fuzzing(monkeypatch, "pcspec.commands.verify", "verify"):
        one_line_error(capsys, ["verify", "--out", str(out)], f"--out {out}", needle)


BAD_SECONDS = [
    (option, value) for option in ("--hunt-seconds", "--survey-seconds") for value in ("-1", "nan", "inf", "0", "x")
]


@pytest.mark.parametrize(("option", "value"), BAD_SECONDS)
def test_fuzz_time_budget_must_be_finite_and_positive(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, option: str, value: str
) -> None:
    with no_fuzzing(monkeypatch, "pcspec.commands.fuzz", "fuzz_variant"):
        one_line_error(capsys, ["fuzz", option, value], f"argument {option}", repr(value))


@pytest.mark.parametrize(("option", "value"), BAD_SECONDS)
def test_verify_time_budget_must_be_finite_and_positive(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, option: str, value: str
) -> None:
    with no_fuzzing(monkeypatch, "pcspec.commands.verify", "verify"):
        one_line_error(capsys, ["verify", option, value], f"argument {option}", repr(value))


@pytest.mark.parametrize("value", ["0", "-1", "-8", "x", "1.5", ""])
def test_verify_workers_must_be_a_whole_number_of_at_least_one(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    # (0 would start no worker and settle nothing; a negative count means nothing)
    with (
        no_fuzzing(monkeypatch, "pcspec.commands.verify", "verify"),
        no_fuzzing(monkeypatch, "pcspec.commands.verify", "verify_in_workers"),
    ):
        line = one_line_error(capsys, ["verify", "--workers", value], "argument --workers", repr(value))
    assert "at least 0" not in line


# -- slot files -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("option", "value"), [("--n-ctx-checkpoints", "-1"), ("--state-size", "-4")])
def test_slotfile_inspect_negative_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    (tmp_path / "s.bin").write_bytes(b"")
    one_line_error(capsys, ["slotfile", "inspect", "s.bin", option, value], f"argument {option}", "at least 0")


def test_slotfile_write_token_ids_out_of_range(capsys: pytest.CaptureFixture[str]) -> None:
    one_line_error(capsys, ["slotfile", "write", "s.bin", "--tokens", "1", "2147483648"], "--tokens", "index 1")


def test_slotfile_write_bad_config(capsys: pytest.CaptureFixture[str]) -> None:
    one_line_error(capsys, ["slotfile", "write", "s.bin", "--tokens", "1", "--config", "{"], "--config", "JSON")
    argv = ["slotfile", "write", "s.bin", "--tokens", "1", "--config", '{"n_slots": 2000}']
    one_line_error(capsys, argv, "--config", "n_slots must be at most")


# -- bounded configurations -------------------------------------------------------------------------------


@pytest.mark.parametrize("n_slots", [10**7, 10**18])
def test_huge_n_slots_is_refused_up_front(tmp_path: Path, capsys: pytest.CaptureFixture[str], n_slots: int) -> None:
    # Before: 10**7 slots took 153 s and 10.4 GB, 10**18 never finished.
    path = write_trace(tmp_path / "t.jsonl", {"op": "step"}, header=TRACE_HEADER | {"config": {"n_slots": n_slots}})
    t0 = time.monotonic()
    one_line_error(capsys, ["replay", str(path)], "t.jsonl: line 1", "n_slots must be at most 1024", str(n_slots))
    assert time.monotonic() - t0 < 5


@pytest.mark.parametrize("name", sorted(UPPER))
def test_every_size_has_an_upper_bound_naming_the_field(name: str) -> None:
    hi, why = UPPER[name]
    kwargs: dict[str, Any] = {name: hi + 1}
    if name == "spec_bytes":
        kwargs["has_draft"] = True
    with pytest.raises(Exception, match=rf"{name} must be at most {hi}") as exc:
        Config.from_json(kwargs)
    assert why in str(exc.value)


def test_the_product_of_context_and_slots_fits_a_uint32() -> None:
    with pytest.raises(Exception, match=r"n_ctx_slot x n_slots must be at most 4294967295"):
        Config(n_slots=2, n_ctx_slot=2**31 + 1).validate()
    Config(n_slots=1024, n_ctx_slot=2**22 - 1).validate()  # 2**32 - 1024 tokens: fits
    with pytest.raises(Exception, match=r"\(got 4194304 x 1024\)"):
        Config(n_slots=1024, n_ctx_slot=2**22).validate()  # 2**32: one too many


# -- streaming: a bad start fails without reading the rest --------------------------------------------------


@contextmanager
def fifo_serving(path: Path, first: bytes, hold: float) -> Iterator[None]:
    """A named pipe that gives ``first`` and then holds its end open for ``hold`` seconds: a
    reader that needs only ``first`` returns at once, one that reads to the end waits."""
    os.mkfifo(path)
    release = threading.Event()

    def serve() -> None:
        with path.open("wb") as w:
            w.write(first)
            w.flush()
            release.wait(hold)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield
    finally:
        release.set()
        thread.join(5)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
@pytest.mark.parametrize(
    ("first", "needle"),
    [
        (b'{"kind": "something else"}\n', "line 1: not a pcspec trace header"),
        (json.dumps(TRACE_HEADER).encode() + b'\n{"op": "fly"}\n', "line 2: unknown op 'fly'"),
    ],
    ids=["header", "first operation"],
)
def test_replay_fails_at_a_bad_start_without_reading_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], first: bytes, needle: str
) -> None:
    pipe = tmp_path / "t.jsonl"
    with fifo_serving(pipe, first, hold=30):
        t0 = time.monotonic()
        one_line_error(capsys, ["replay", str(pipe)], needle)
        assert time.monotonic() - t0 < 10  # reading to the end would wait the 30 s


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_slotfile_inspect_fails_at_a_bad_header_without_reading_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pipe = tmp_path / "s.bin"
    with fifo_serving(pipe, b"GGUF\x03\x00\x00\x00\x00\x00\x00\x00", hold=30):
        t0 = time.monotonic()
        one_line_error(capsys, ["slotfile", "inspect", str(pipe)], "s.bin: byte 0: bad magic")
        assert time.monotonic() - t0 < 10


# -- a real process ----------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_console_command_prints_one_line(tmp_path: Path) -> None:
    deep = tmp_path / "deep.jsonl"
    deep.write_text(json.dumps(TRACE_HEADER) + "\n" + "[" * 100_000 + "]" * 100_000 + "\n")
    for argv in (["replay", str(deep)], ["fuzz", "--hunt-seconds", "nan"], ["replay", str(deep), "--dot", "/"]):
        done = subprocess.run([sys.executable, "-m", "pcspec", *argv], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "Traceback" not in done.stderr


# -- pcspec live: what a user's machine and build bring ------------------------------------------------

def _fake_server(folder: Path, *, says: str) -> Path:
    """A stand-in ``llama-server``: ``--version`` prints the b11549 build line (on stderr, as
    common/build-info does); anything else prints ``says`` and exits 1, as a build that rejects
    a flag does."""
    path = folder / "llama-server"
    path.write_text("#!/bin/sh\n"
                    'if [ "$1" = "--version" ]; then\n'
                    '    echo "version: 11549 (build 11549, commit b11549)" >&2; exit 0\nfi\n'
                    f'echo "{says}" >&2\nexit 1\n', encoding="utf-8")
    path.chmod(0o755)
    return path


def test_live_without_gguf_names_the_pip_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "gguf" else real(name, *a))
    server = _fake_server(tmp_path, says="unused")
    one_line_error(capsys, ["live", "--server", str(server), "--kind", "kv", "--rules", "october"],
                   "gguf", "pip install 'pcspec[live]'")


def test_live_takes_a_relative_server_path_and_its_version(tmp_path: Path) -> None:
    """``./llama-server`` is the file in the working folder, not a name looked up on PATH: the
    version probe reads its build (b11549), where it used to fail and fall back to october."""
    from pcspec.live.buildinfo import rules_for_server

    _fake_server(tmp_path, says="unused")  # (the autouse fixture made tmp_path the working folder)
    assert rules_for_server(Path("./llama-server")).rule_set == "b11549"
    assert rules_for_server(Path("llama-server")).rule_set == "b11549"


@pytest.mark.slow
def test_live_with_a_server_that_will_not_start_is_one_line_with_its_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("gguf")
    _fake_server(tmp_path, says="error: invalid argument: --ctx-checkpoints")
    line = one_line_error(capsys, ["live", "--server", "./llama-server", "--kind", "kv", "--requests", "1",
                                   "--out", str(tmp_path / "out")],
                          "invalid argument: --ctx-checkpoints", "log")
    assert "No such file" not in line


@pytest.mark.parametrize(("line", "needles"), [
    ('{"op": "request", "id": 0,', ("w.jsonl: line 3", "not JSON")),
    ('{"op": "request", "id": 0, "segments": [], "id_slto": 1}', ("w.jsonl: line 3", "has no field 'id_slto'")),
    ('{"op": "teleport"}', ("w.jsonl: line 3", "not a live operation")),
])
def test_a_damaged_live_workload_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str,
                                      needles: tuple[str, ...]) -> None:
    """A workload's damaged line is named by its number (blank lines counted), before any server starts."""
    head = {"schema": 1, "kind": "pcspec-live-workload", "model": "kv", "flags": {}}
    path = tmp_path / "w.jsonl"
    path.write_text(json.dumps(head) + "\n\n" + line + "\n", encoding="utf-8")
    one_line_error(capsys, ["live", "--replay", str(path), "--design", "baseline"], *needles)
