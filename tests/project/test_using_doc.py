"""docs/USING.md runs as written: its code blocks, in order, in a fresh folder.

A block whose info string has ``file=NAME`` is saved as NAME; each line of a ``sh`` block is a
command, run with the exit status its ``# exit N`` comment gives (0 without one). ``pcspec`` and
``python`` (at the start of a line or of a ``$(...)``) are this interpreter's, so the guide runs
against the code under test. A block whose info string is ``output`` shows what the command run
just before it printed, and must match it (``matches``): the figures the guide quotes (the steps
a counterexample is shrunk to, the properties, the bytes of a file) are those of this run; the
times it prints are left out as ``...``.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import shutil
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


ELIDED_FIELD = re.compile(r'"\w+":\s*(\[\.\.\.\]|\{\.\.\.\})')


def _shown_object(block: str) -> dict[str, object]:
    """The fields a JSON object shown with elisions gives (``..., `` for fields left out,
    ``"key": [...]`` for a value left out)."""
    text = ELIDED_FIELD.sub("...", " ".join(block.split()))
    text = re.sub(r",\s*\.\.\.(?=\s*[,}])", "", text)
    text = re.sub(r"\{\s*\.\.\.\s*,\s*", "{", text)
    shown = json.loads(text)
    assert isinstance(shown, dict)
    return shown


def _line_pattern(line: str) -> re.Pattern[str]:
    parts = [r"\s+".join(re.escape(w) for w in part.split()) for part in line.split("...")]
    return re.compile(r"\s*" + ".*".join(parts) + r"\s*")


def matches(block: str, printed: str) -> str | None:
    """Why ``printed`` (a command's standard output) is not what an ``output`` block shows, or None.

    A block that starts with ``{`` is one JSON object: each field it gives must have that value in
    the printed object of the same ``kind``. Otherwise each line of the block must match a line of
    the output, in order: ``...`` stands for any text (a line of its own, for any lines), a run of
    spaces for any run of spaces."""
    if block.lstrip().startswith("{"):
        shown = _shown_object(block)
        objects = [json.loads(x) for x in printed.splitlines() if x.startswith("{")]
        same = [o for o in objects if isinstance(o, dict) and o.get("kind") == shown.get("kind")]
        if not same:
            return f"no object of kind {shown.get('kind')!r} printed"
        wrong = {k: (v, same[-1].get(k)) for k, v in shown.items() if same[-1].get(k) != v}
        return f"shown != printed: {wrong}" if wrong else None
    lines = iter(printed.splitlines())
    for want in block.splitlines():
        if want.strip() in ("", "..."):
            continue
        pattern = _line_pattern(want)
        if not any(pattern.fullmatch(line) for line in lines):
            return f"no line (after the lines before) matches {want.strip()!r}"
    return None


def test_the_guide_has_files_and_commands() -> None:
    kinds = [(lang, "file=" in info) for lang, info, _ in blocks()]
    assert ("python", True) in kinds and ("sh", False) in kinds


def test_each_output_block_follows_a_command() -> None:
    seen = [(lang, info) for lang, info, _ in blocks()]
    outputs = [i for i, (_, info) in enumerate(seen) if info == "output"]
    assert outputs, "the guide quotes no output"
    for i in outputs:
        assert i > 0 and seen[i - 1][0] == "sh", "an output block comes right after the commands it shows"


def test_an_output_block_is_held_to_the_output() -> None:
    printed = ('ACC-3      x violated  (expected .) 5 ops, out/x.jsonl, 38.3s\n'
               '{"kind": "summary", "operations": 5, "violated": ["ACC-3"], "expected": [1], "exit": 0}\n')
    assert matches("ACC-3 x violated (expected .) 5 ops, out/x.jsonl, ...", printed) is None
    assert matches("ACC-3 x violated (expected .) 4 ops, out/x.jsonl, ...", printed) is not None
    assert matches('{"kind": "summary", "operations": 5,\n "expected": [...], ..., "exit": 0}', printed) is None
    assert matches('{"kind": "summary", "operations": 4, ..., "exit": 0}', printed) is not None
    assert matches('{"kind": "summary", ..., "violated": ["ACC-1"]}', printed) is not None


# the lines of section 6 that build and drive a llama-server, and read what it wrote
NEEDS_A_SERVER = re.compile(r"pcspec\.live\.build|pcspec live |live-mine/")


def _no_server_here() -> str:
    """Why this machine cannot run section 6's server (the gguf package makes its models, CMake
    builds it; .ci/run has both), or ""."""
    if importlib.util.find_spec("gguf") is None:
        return "no gguf package (pip install 'pcspec[live]')"
    return "" if shutil.which("cmake") and shutil.which("g++") else "no cmake and g++"


@pytest.mark.slow
def test_the_guide_runs_as_written(tmp_path: Path) -> None:
    printed = ""
    no_server, left_out = _no_server_here(), 0
    for lang, info, body in blocks():
        if info.startswith("file="):
            (tmp_path / info.removeprefix("file=")).write_text(body, encoding="utf-8")
        elif info == "output":
            why = matches(body, printed)
            assert why is None, f"docs/USING.md shows an output this run did not print: {why}\n{printed[-2000:]}"
        elif lang == "sh":
            for line in body.splitlines():
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                if no_server and NEEDS_A_SERVER.search(line):
                    left_out += 1
                    continue
                cmd, expected = command(line)
                done = subprocess.run(cmd, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=600)
                assert done.returncode == expected, f"{line}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
                assert "Traceback" not in done.stderr, done.stderr
                printed = done.stdout
    if left_out:
        pytest.skip(f"docs/USING.md ran as written but for the {left_out} lines that need a server: {no_server}")


def test_the_guide_lists_every_configuration_bound() -> None:
    from pcspec.model.config import UPPER

    rows = [line for line in GUIDE.read_text(encoding="utf-8").splitlines() if line.startswith("| `")]
    for name, (hi, _why) in UPPER.items():
        row = next((r for r in rows if f"`{name}`" in r.split("|")[1]), None)
        assert row is not None and str(hi) in row.split("|")[2], f"docs/USING.md: no row {name} | {hi}"
