"""The dependency contract of docs/ARCHITECTURE.md, checked with import-linter (pyproject.toml,
``[tool.importlinter]``): it holds for the package, and it is broken by a layer reached upward,
by a cycle between two files of one package, by the model calling the state codec, by the codec
leaning on the core, by the package importing the tests, by a check importing the model's
``Server``, or by the log checker running the model (each shown on a copy of the package). And
what import-linter cannot state: no class outside ``model/`` subclasses the model's ``Server``
(the judge reads a state through ``properties/view.py``, which a port's observed state provides
as a class of its own)."""

from __future__ import annotations

import ast
import importlib
import os
import pkgutil
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
    assert "7 kept, 0 broken" in out.stdout


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


def test_a_check_importing_the_server_breaks_the_contract(copy: Path) -> None:
    _add_import(copy, "properties/refs.py", "import pcspec.model.server")
    out = _lint(copy)
    assert out.returncode != 0
    assert "pcspec.properties.refs -> pcspec.model.server" in out.stdout


def test_the_log_checker_running_the_model_breaks_the_contract(copy: Path) -> None:
    _add_import(copy, "logcheck/stats.py", "import pcspec.model.server")
    out = _lint(copy)
    assert out.returncode != 0
    assert "runs no model BROKEN" in " ".join(out.stdout.split())
    assert "pcspec.logcheck.stats -> pcspec.model.server" in out.stdout


def _names_of_server(tree: ast.Module) -> tuple[set[str], set[str]]:
    """The names a module binds to the model's ``Server`` class, and to its module."""
    classes, modules = set(), {"pcspec.model.server"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            for alias in node.names:
                bound = alias.asname or alias.name
                if node.module.endswith("model.server") and alias.name == "Server":
                    classes.add(bound)
                elif node.module.endswith("model") and alias.name == "server":
                    modules.add(bound)
        elif isinstance(node, ast.Import):
            modules.update(a.asname for a in node.names if a.name.endswith("model.server") and a.asname)
    return classes, modules


def server_subclasses_in_source(root: Path) -> list[str]:
    """Every class written outside ``model/`` whose bases name the model's ``Server`` (under any
    alias of the class or of its module), as ``file:line``. The folders pcspec/model, properties
    and proofs are symbolic links to the top-level ones, which are read once, as they are."""
    found = []
    for folder, dirs, files in os.walk(root):  # (symbolic links to folders are not followed)
        here = Path(folder)
        dirs[:] = [d for d in dirs if not d.startswith(".") and not (here == root and d == "model")]
        for name in files:
            if not name.endswith(".py"):
                continue
            path = here / name
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            classes, modules = _names_of_server(tree)
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and any(
                    (isinstance(b, ast.Name) and b.id in classes)
                    or (isinstance(b, ast.Attribute) and b.attr == "Server" and ast.unparse(b.value) in modules)
                    for b in node.bases
                ):
                    found.append(f"{path.relative_to(root)}:{node.lineno}: class {node.name}")
    return found


def test_no_class_outside_the_model_subclasses_server() -> None:
    """A state the judge reads is a ``properties/view.py: StateView``; a class that is a ``Server``
    without being the model's (one that skips its constructor, adds variables the state does not
    declare, overrides what it measures) is what the view replaced."""
    assert server_subclasses_in_source(ROOT) == []


def test_no_module_of_the_package_makes_a_server_subclass() -> None:
    """The same, of the classes that exist once every module of the package is imported (one made
    at run time too): every subclass of ``Server``, at any depth, is the model's."""
    from pcspec.model.server import Server

    for m in pkgutil.walk_packages([str(PACKAGE)], "pcspec."):
        if not m.name.endswith("__main__"):
            try:
                importlib.import_module(m.name)
            except ImportError:  # an optional extra not installed (gguf): its modules are read above
                continue
    todo, outside = list(Server.__subclasses__()), []
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if not cls.__module__.startswith("pcspec.model."):
            outside.append(f"{cls.__module__}.{cls.__qualname__}")
    assert outside == []
