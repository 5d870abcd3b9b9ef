"""The tests mirror the packages: a folder per package of pcspec (and tests/project for the
documents and the packaging), each a package of its own, the shared helpers in tests/support,
no test module at the top of tests/; and every marker a test uses is registered in
pyproject.toml, so that the quick loop (``pytest -m "not slow and not live and not cpp"``)
deselects what it names and nothing else. docs/ARCHITECTURE.md, "Tests"."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support.paths import ROOT, TESTS

QUICK = 'not slow and not live and not cpp'
TIERS = {"slow", "live", "cpp"}
# The folders of pcspec whose tests have a folder of their own (pcspec/model, properties and
# proofs link to the top-level folders of the same names), and the two that mirror no package.
PACKAGES = {p.name for p in (ROOT / "pcspec").iterdir() if (p / "__init__.py").exists()}
NOT_PACKAGES = {"project", "support", "data"}
BUILTIN = {"parametrize", "skip", "skipif", "xfail", "usefixtures", "filterwarnings"}


def _folders() -> list[Path]:
    return sorted(p for p in TESTS.iterdir() if p.is_dir() and p.name != "__pycache__")


def test_no_test_module_at_the_top_of_tests() -> None:
    top = sorted(p.name for p in TESTS.glob("*.py") if p.name != "__init__.py")
    assert not top, f"move these into the folder of the package they test (tests/<package>/): {top}"


def test_each_folder_mirrors_a_package_and_is_one() -> None:
    names = {p.name for p in _folders()}
    assert names - PACKAGES - NOT_PACKAGES == set(), "a test folder that is no package of pcspec"
    for folder in _folders():
        if folder.name != "data":
            assert (folder / "__init__.py").exists(), f"{folder.relative_to(ROOT)} needs an __init__.py"
        nested = [p for p in folder.rglob("test_*.py") if p.parent != folder]
        assert not nested, f"one level: {nested}"
    assert not list((TESTS / "support").glob("test_*.py")), "tests/support holds helpers, not tests"


def test_no_module_imports_conftest() -> None:
    bad = [p.relative_to(ROOT) for p in TESTS.rglob("*.py")
           if re.search(r"^\s*(from conftest import|import conftest)", p.read_text(encoding="utf-8"), re.M)]
    assert not bad, f"import helpers from tests.support (or use a fixture): {bad}"


def _registered() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    assert "--strict-markers" in config["addopts"].split()
    return {line.split(":", 1)[0].strip() for line in config["markers"]}


def test_every_marker_used_is_registered() -> None:
    registered = _registered()
    assert registered >= TIERS
    used = {m for p in TESTS.rglob("test_*.py")
            for m in re.findall(r"pytest\.mark\.(\w+)", p.read_text(encoding="utf-8"))}
    assert used - BUILTIN - registered == set()
    assert used >= TIERS, "each tier marks at least one test"


def _pytest(tmp_path: Path, source: str, *args: str) -> subprocess.CompletedProcess[str]:
    """pytest with the project's configuration on one test file of ``source``."""
    (tmp_path / "test_marked.py").write_text(source, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path),
         "-p", "no:cacheprovider", str(tmp_path / "test_marked.py"), *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )


def test_an_unregistered_marker_is_an_error(tmp_path: Path) -> None:
    typo = "slwo"  # not spelt out after pytest.mark here, or the scan above would find it
    done = _pytest(tmp_path, f"import pytest\n\n@pytest.mark.{typo}\ndef test_x():\n    pass\n")
    assert done.returncode != 0
    assert f"'{typo}' not found in `markers` configuration option" in done.stdout + done.stderr


@pytest.mark.parametrize("marker", sorted(TIERS))
def test_the_quick_loop_deselects_each_tier(tmp_path: Path, marker: str) -> None:
    source = f"import pytest\n\n@pytest.mark.{marker}\ndef test_tier():\n    pass\n\ndef test_quick():\n    pass\n"
    done = _pytest(tmp_path, source, "-m", QUICK)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 1 deselected" in done.stdout


def test_the_documents_give_the_quick_loop() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    # the README's command runs everything, on two workers (pytest-xdist), each test file on one
    # worker (its module fixtures built once); .ci/run runs it verbatim
    command = "pip install '.[dev]' && pytest -n 2 --dist loadfile\n"
    assert f"    {command}" in readme
    assert command in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert f'pytest -m "{QUICK}"' in readme
    assert f'-m "{QUICK}"' in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()[-1]
    architecture = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    for folder in _folders():
        if folder.name != "data":
            assert f"`tests/{folder.name}/`" in architecture, f"docs/ARCHITECTURE.md: no tests/{folder.name}/"
