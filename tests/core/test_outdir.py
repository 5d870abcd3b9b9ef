"""pcspec.outdir and pcspec.commands.argtypes: output paths and option values checked before the work."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pytest

from pcspec.commands.argtypes import count, seconds
from pcspec.core.errors import PcspecError
from pcspec.core.outdir import check_output_file, ensure_writable_dir, write_output


def test_a_missing_folder_is_created_with_its_parents(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b"
    assert ensure_writable_dir(out) == out and out.is_dir()
    assert list(out.iterdir()) == []  # the write check leaves nothing behind
    assert ensure_writable_dir(out) == out  # an existing folder is fine


@pytest.mark.parametrize(
    ("relative", "needle"),
    [("f", "is a file, not a folder"), ("f/sub/deeper", "f is a file, so no folder can be created under it")],
    ids=["a file", "under a file"],
)
def test_refused_paths_name_the_option(tmp_path: Path, relative: str, needle: str) -> None:
    (tmp_path / "f").write_text("")
    path = tmp_path / relative
    with pytest.raises(PcspecError, match=needle) as exc:
        ensure_writable_dir(path, "--out")
    assert exc.value.where == f"--out {path}"


def test_a_folder_that_refuses_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # What a read-only mount does (root ignores permission bits, so this is simulated here;
    # tests/commands/test_bad_input.py uses a real one where the machine has it).
    def refuse(*_a: object, **_k: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("pcspec.core.outdir.tempfile.TemporaryFile", refuse)
    with pytest.raises(PcspecError, match=r"cannot write in this folder \(Permission denied\)"):
        ensure_writable_dir(tmp_path, "--out")


def test_output_files(tmp_path: Path) -> None:
    with pytest.raises(PcspecError, match="is a folder"):
        check_output_file(tmp_path, "--dot")
    with pytest.raises(PcspecError, match="does not exist"):
        check_output_file(tmp_path / "no" / "g.dot", "--dot")
    (tmp_path / "f").write_text("")
    with pytest.raises(PcspecError, match="is a file"):
        check_output_file(tmp_path / "f" / "g.dot", "--dot")
    target = check_output_file(tmp_path / "g.dot", "--dot")
    write_output(target, "digraph {}", "--dot")
    assert target.read_text() == "digraph {}"
    with pytest.raises(PcspecError, match=r"--dot .*: cannot write"):
        write_output(tmp_path / "gone" / "g.dot", b"x", "--dot")


@pytest.mark.parametrize("text", ["1", "0.5", "300", "1e3"])
def test_seconds_accepts_finite_positive_numbers(text: str) -> None:
    assert seconds(text) == float(text) and math.isfinite(seconds(text))


@pytest.mark.parametrize("text", ["-1", "0", "nan", "NaN", "inf", "-inf", "1e400", "ten", ""])
def test_seconds_refuses_the_rest(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        seconds(text)


def test_count() -> None:
    assert count("0") == 0 and count("32") == 32
    for text in ("-1", "1.5", "x", "9" * 5000):
        with pytest.raises(argparse.ArgumentTypeError) as exc:
            count(text)
        assert len(str(exc.value)) < 120  # a 5000-digit value is not echoed whole
