"""The example project of docs/examples/ci-gate: each of its three CI gates fails (exit 1) on
the broken design it describes, as its README says."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

EXAMPLE = ROOT / "docs" / "examples" / "ci-gate"


def _gates() -> list[str]:
    """The commands of ci.sh, in order (each line that ends in ``|| status=1``)."""
    return [ln.removesuffix("|| status=1").strip() for ln in (EXAMPLE / "ci.sh").read_text().splitlines()
            if ln.endswith("|| status=1")]


def test_there_are_three_gates() -> None:
    gates = _gates()
    assert len(gates) == 3
    assert gates[0].startswith("python -m pytest") and "--pcspec-variant" in gates[0]
    assert gates[1].startswith("pcspec fuzz") and gates[2].startswith("pcspec prove")


@pytest.mark.slow
@pytest.mark.parametrize("gate", _gates())
def test_each_gate_fails_the_job(gate: str, tmp_path: Path) -> None:
    shutil.copytree(EXAMPLE, tmp_path / "project")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    done = subprocess.run(gate.replace("python ", f"{sys.executable} ", 1), shell=True, cwd=tmp_path / "project",
                          capture_output=True, text=True, env=env, timeout=900, check=False)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
