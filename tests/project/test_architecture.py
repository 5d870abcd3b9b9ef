"""The dependency contract of docs/ARCHITECTURE.md, checked with import-linter (pyproject.toml,
``[tool.importlinter]``): it holds for the package, and it is broken by a layer reached upward,
by a cycle between two files of one package, by the model calling the state codec, by the codec
leaning on the core and by the package importing the tests (each shown on a copy of the
package)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

PACKAGE = ROOT / "pcspec"


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports with the project's contract, the package imported from ``tree``."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    return subprocess.run(
        [sys.executable, "-c", code, "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=tree, env=env, capture_output=True, text=True, check=False,
    )


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    shutil.copytree(PACKAGE, tmp_path / "pcspec", symlinks=False, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def test_the_package_keeps_the_contract(copy: Path) -> None:
    out = _lint(copy)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "5 kept, 0 broken" in out.stdout


def _add_import(copy: Path, module: str, line: str) -> None:
    path = copy / "pcspec" / module
    path.write_text(path.read_text(encoding="utf-8") + f"\n{line}  # noqa\n", encoding="utf-8")


def test_the_model_reaching_up_breaks_the_layers(copy: Path) -> None:
    _add_import(copy, "model/policy.py", "import pcspec.tools.verdicts")
    out = _lint(copy)
    assert out.returncode != 0 and "BROKEN" in out.stdout
    assert "pcspec.model.policy -> pcspec.tools.verdicts" in out.stdout


def test_a_cycle_between_two_files_breaks_the_contract(copy: Path) -> None:
    _add_import(copy, "core/errors.py", "import pcspec.core.trace")  # trace imports errors
    out = _lint(copy)
    assert out.returncode != 0
    assert "No cycles are allowed in pcspec.core" in out.stdout


def test_the_model_calling_the_codec_breaks_the_contract(copy: Path) -> None:
    _add_import(copy, "model/slotfile.py", "import pcspec.codec.reader")
    out = _lint(copy)
    assert out.returncode != 0
    assert "the spec never calls the slot-file state codec BROKEN" in " ".join(out.stdout.split())
    assert "pcspec.model.slotfile -> pcspec.codec.reader" in out.stdout


def test_the_codec_and_the_core_are_independent(copy: Path) -> None:
    _add_import(copy, "codec/layout.py", "import pcspec.core.errors")
    out = _lint(copy)
    assert out.returncode != 0 and "BROKEN" in out.stdout
    assert "pcspec.codec.layout -> pcspec.core.errors" in out.stdout


def test_the_package_importing_the_tests_breaks_the_contract(copy: Path) -> None:
    _add_import(copy, "tools/verdicts.py", "import tests.support.paths")
    out = _lint(copy)
    assert out.returncode != 0
    assert "the package imports nothing of the tests BROKEN" in " ".join(out.stdout.split())
    assert "pcspec.tools.verdicts -> tests" in out.stdout
