"""docs/PROOFS.md: its worked example runs as written, and it lists every obligation."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from pcspec.proofs.obligations import OBLIGATIONS
from pcspec.proofs.pairs import paired
from tests.support.paths import ROOT

DOC = ROOT / "docs" / "PROOFS.md"
BLOCK = re.compile(r"^```(\S+)([^\n]*)\n(.*?)^```", re.M | re.S)


@pytest.mark.slow
def test_the_worked_example_runs(tmp_path: Path) -> None:
    text = DOC.read_text(encoding="utf-8")
    files = {m.group(2).strip()[5:]: m.group(3) for m in BLOCK.finditer(text) if m.group(2).strip().startswith("file=")}
    commands = [m.group(3).strip() for m in BLOCK.finditer(text) if m.group(1) == "sh"]
    assert files and commands == ["python my_proofs.py"]
    for name, body in files.items():
        (tmp_path / name).write_text(body, encoding="utf-8")
    run = subprocess.run([sys.executable, "my_proofs.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "RB-1 on fixed-with-pop: proved" in run.stdout
    assert "RB-2 on fixed-with-pop: counterexample, replayed True" in run.stdout
    assert run.stdout.count(": unsat") == 5


def test_every_obligation_and_pair_is_in_the_doc() -> None:
    text = DOC.read_text(encoding="utf-8")
    for ob in OBLIGATIONS:
        row = next((ln for ln in text.splitlines() if ln.startswith(f"| {ob.id} |")), None)
        assert row is not None, f"docs/PROOFS.md does not list {ob.id}"
        for v in paired(ob)[1:]:
            assert f"`{v.name}`" in row, f"docs/PROOFS.md: {ob.id} is paired with {v.name}"
