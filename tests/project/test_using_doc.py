"""docs/USING.md runs as written: its code blocks, in order, in a fresh folder.

A block whose info string has ``file=NAME`` is saved as NAME; each line of a ``sh`` block is a
command, run with the exit status its ``# exit N`` comment gives (0 without one). ``pcspec`` and
``python`` (at the start of a line or of a ``$(...)``) are this interpreter's, so the guide runs
against the code under test.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

GUIDE = ROOT / "docs" / "USING.md"
BLOCK = re.compile(r"^```(\S+)([^\n]*)\n(.*?)^```", re.M | re.S)
EXIT = re.compile(r"\s+#\s*exit\s+(\d+)\b.*$")


def blocks() -> list[tuple[str, str, str]]:
    """(language, info string, body) of every fenced block, in order."""
    return [(m.group(1), m.group(2).strip(), m.group(3)) for m in BLOCK.finditer(GUIDE.read_text(encoding="utf-8"))]


def command(line: str) -> tuple[str, int]:
    """A sh line as this interpreter runs it, and the exit status it must give."""
    expected = 0
    m = EXIT.search(line)
    if m:
        expected, line = int(m.group(1)), line[: m.start()]
    exe = shlex.quote(sys.executable)
    # (at the start of the line and of a command substitution)
    line = re.sub(r"(^|\$\()\s*(pcspec|python) ", lambda m: m.group(1) + (f"{exe} -m pcspec " if m.group(2) == "pcspec"
                                                                         else f"{exe} "), line.strip())
    return line, expected


def test_the_guide_has_files_and_commands() -> None:
    kinds = [(lang, "file=" in info) for lang, info, _ in blocks()]
    assert ("python", True) in kinds and ("sh", False) in kinds


@pytest.mark.slow
def test_the_guide_runs_as_written(tmp_path: Path) -> None:
    for lang, info, body in blocks():
        if info.startswith("file="):
            (tmp_path / info.removeprefix("file=")).write_text(body, encoding="utf-8")
        elif lang == "sh":
            for line in body.splitlines():
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                cmd, expected = command(line)
                done = subprocess.run(cmd, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=600)
                assert done.returncode == expected, f"{line}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
                assert "Traceback" not in done.stderr, done.stderr


def test_the_guide_lists_every_configuration_bound() -> None:
    from pcspec.model.config import UPPER

    rows = [line for line in GUIDE.read_text(encoding="utf-8").splitlines() if line.startswith("| `")]
    for name, (hi, _why) in UPPER.items():
        row = next((r for r in rows if f"`{name}`" in r.split("|")[1]), None)
        assert row is not None and str(hi) in row.split("|")[2], f"docs/USING.md: no row {name} | {hi}"
