"""What gets installed, and how the package is laid out.

* A wheel built in a checkout where `pcspec verify` wrote pcspec-out/ (and an earlier build left
  build/ and pcspec.egg-info/ behind) holds ``pcspec/`` and its metadata, nothing else (the golden
  suite of ``pcspec conform`` included).
* ``pcspec --version``; the model imports nothing of pcspec outside ``pcspec.model``; ``import
  model`` from the repository root is refused; a copy made without symbolic links says so.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import setuptools

import pcspec
from pcspec.cli import main
from pcspec.core.snippet import pytest_snippet as _bare_snippet
from pcspec.core.trace import Trace
from pcspec.model.config import Config
from pcspec.model.designs import get_design
from pcspec.properties.judge import where_shown
from tests.support.paths import ROOT


def pytest_snippet(trace, name):  # type: ignore[no-untyped-def]
    """The snippet as pcspec writes it: each expected violation noted where it shows."""
    return _bare_snippet(trace, name, where_shown(trace) if trace.expect else {})

LINKS = ("model", "properties", "proofs")
# What a checkout holds that is not needed to build, and slow to copy.
_CACHES = shutil.ignore_patterns(".git", ".mypy_cache", ".ruff_cache", ".hypothesis", ".pytest_cache", "__pycache__")


def NOT_COPIED(folder: str, names: list[str]) -> set[str]:
    """Caches anywhere, and the checkout's own ``build/`` (CI builds the C++ port there, tens
    of MB; this test makes the stale build it needs itself)."""
    skipped = set(_CACHES(folder, names))
    if Path(folder) == ROOT:
        skipped.add("build")
    return skipped


def verify_like_run(checkout: Path) -> None:
    """What `pcspec verify` leaves in the working tree: pcspec-out/ with a trace and its pytest
    file (written by the same code), and what an earlier `pip install .` of the old layout
    left: build/lib/pcspec-out/ and a pcspec.egg-info/ naming pcspec-out a top-level package."""
    out = checkout / "pcspec-out"
    out.mkdir(exist_ok=True)
    trace = Trace(get_design("pr30137"), Config(), [{"op": "step"}])
    trace.write(out / "pr30137__ACC-1.jsonl")
    (out / "repro_pr30137__ACC_1.py").write_text(pytest_snippet(trace, "pr30137__ACC-1"))
    stale = checkout / "build" / "lib" / "pcspec-out"
    stale.mkdir(parents=True, exist_ok=True)
    (stale / "test_old.py").write_text("")
    egg = checkout / "pcspec.egg-info"
    egg.mkdir(exist_ok=True)
    (egg / "top_level.txt").write_text("pcspec\npcspec-out\n")


def can_build_offline() -> bool:
    # setuptools builds wheels itself from 70.1 (before, the `wheel` package did); the dev
    # extra asks for >= 77, which pyproject.toml's build-system needs too.
    major, minor = (int(x) for x in setuptools.__version__.split(".")[:2])
    return (major, minor) >= (77, 0)


@pytest.mark.skipif(not can_build_offline(), reason="needs setuptools >= 77 (pip install '.[dev]')")
def test_the_wheel_holds_only_the_package(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT, checkout, symlinks=True, ignore=NOT_COPIED)
    verify_like_run(checkout)
    dist = tmp_path / "dist"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), "."],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    (wheel,) = dist.glob("pcspec-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    meta = f"pcspec-{pcspec.__version__}.dist-info"
    assert {n.split("/")[0] for n in names} == {"pcspec", meta}, sorted(names)
    top_level = zipfile.ZipFile(wheel).read(f"{meta}/top_level.txt").decode().split()
    assert top_level == ["pcspec"]
    packages = {n.rsplit("/", 1)[0] for n in names if n.endswith("/__init__.py")}
    expected = {"pcspec", "pcspec/commands", "pcspec/logcheck", *(f"pcspec/{link}" for link in LINKS)}
    assert expected <= packages, sorted(packages)  # the linked sub-packages are in, as packages
    assert "pcspec/py.typed" in names
    assert "pcspec/conform/suite/base.jsonl" in names  # the golden suite, for pcspec conform


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"pcspec {pcspec.__version__}"


def test_the_model_depends_on_nothing_of_pcspec_but_itself() -> None:
    # The spec must not import the glue (pcspec.errors was the one case: the model has its own).
    for path in sorted((ROOT / "model").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert not name.startswith("pcspec") or name.startswith("pcspec.model"), f"{path.name}: {name}"


def test_the_glue_error_is_the_model_error() -> None:
    from pcspec.core.errors import PcspecError
    from pcspec.model.errors import PcspecError as ModelError

    assert PcspecError is ModelError  # one except clause catches both


def test_import_model_from_the_repository_root_is_refused() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import model"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert "imported as 'pcspec.model', not 'model'" in done.stderr.strip().splitlines()[-1]


def test_a_copy_without_symbolic_links_says_so(tmp_path: Path) -> None:
    # What git writes for a link where it cannot make one (Windows without core.symlinks): a
    # file holding the link's target.
    copy = tmp_path / "pcspec"
    shutil.copytree(ROOT / "pcspec", copy, symlinks=True, ignore=NOT_COPIED)
    for link in LINKS:
        (copy / link).unlink()
        (copy / link).write_text(f"../{link}")
    # -S: no site-packages, so no installed pcspec; the copy in the current folder is imported.
    done = subprocess.run(
        [sys.executable, "-S", "-c", "import pcspec"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert "made without symbolic links" in done.stderr.strip().splitlines()[-1]
