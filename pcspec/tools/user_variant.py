"""A variant of one's own on the command line: ``--variant-module pkg.mod:NAME``.

A user binds the Hypothesis machine to a ``Design`` they built (a subclass of a built-in design
that overrides some extension points) in their own module; its counterexamples name that
design, which ``--variant`` cannot find among the built-in ones. ``--variant-module`` imports the module and
takes the ``Design`` object it names, as ``python -m`` would find it: the current folder is
searched first (a console script's own ``sys.path`` does not hold it).

A variant of one's own has no entry in pcspec's oracle: it must hold every property, so that a
violation fails the run (exit 1), unless its author declares the violations it is meant to
show: ``--expect PROPERTY`` on the command line, or in the module a mapping
``PCSPEC_EXPECT = {"NAME": ["RB-2", ...]}`` (``declared``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Sequence

from pcspec.core.errors import PcspecError
from pcspec.model.design import Design
from pcspec.model.designs import RENAMED, named, register, renamed_error
from pcspec.properties.catalogue import get_property

OPTION = "--variant-module"


def _where_raised(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    return f" ({frames[-1].filename}, line {frames[-1].lineno})" if frames else ""


def load_variant(spec: str) -> Design:
    """The design named by ``"pkg.mod:NAME"``: a ``Design`` subclass (made under its own rule
    set) or an instance of one, checked and made known by its name (so that the traces it
    gives replay by name in this process); every failure is one ``PcspecError``."""
    where = f"{OPTION} {spec}"
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise PcspecError("expected MODULE:NAME, e.g. mydesigns:LargestFirst (a module on the path, a Design in it)",
                          where)
    value = _import(module_name, attr, where)
    if isinstance(value, type) and issubclass(value, Design):
        try:
            value = value()
        except Exception as exc:  # the user's constructor
            raise PcspecError(f"making {module_name}.{attr}() failed: {type(exc).__name__}: {exc}"
                              f"{_where_raised(exc)}", where) from None
    if not isinstance(value, Design):
        found = "nothing" if value is None else f"a {type(value).__name__}"
        raise PcspecError(f"{module_name}.{attr} is {found}, not a pcspec Design (a subclass of "
                          "pcspec.model.designs.Baseline, Fixed, ... or an instance of one)", where)
    check_name(value, where)
    register(value)
    return value


def check_name(design: Design, where: str) -> None:
    """A design's name goes into file names and trace headers: no path separator; and it may
    not shadow a design pcspec knows (a built-in, a rule set's model, a mutant) unless it is
    that very design."""
    name = design.name
    if not name or any(sep in name for sep in ("/", "\\", os.sep)) or name in (".", ".."):
        raise PcspecError(f"design name {name!r} is not a plain name (no path separator); set `name` in the class",
                          where)
    if name in RENAMED:
        raise PcspecError(f"design name {name!r} is the old name of pcspec's {RENAMED[name]!r} (a trace naming "
                          "it reads as that design); give your design a name of its own (`name = ...` in the class)",
                          where)
    known = named().get(name)
    if known is None or f"{type(known).__module__}:{type(known).__qualname__}" == (
            f"{type(design).__module__}:{type(design).__qualname__}"):
        return  # (new, or the same class imported again)
    whose = "pcspec's own" if type(known).__module__.startswith("pcspec.") else (
        f"taken by {type(known).__module__}:{type(known).__qualname__}")
    raise PcspecError(f"design name {name!r} is {whose} ({known.summary}); give your design a name of its own "
                      "(`name = ...` in the class)", where)


def _import(module_name: str, attr: str, where: str) -> object:
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise PcspecError(
                f"no module named {exc.name!r} (run from the folder that holds it, or add that folder to PYTHONPATH)",
                where,
            ) from None
        raise PcspecError(f"importing {module_name} failed: {exc}{_where_raised(exc)}", where) from None
    except Exception as exc:  # the user's code: whatever it raises is reported, in one line
        raise PcspecError(
            f"importing {module_name} failed: {type(exc).__name__}: {exc}{_where_raised(exc)}", where
        ) from None
    return getattr(module, attr, None)


EXPECT_ATTRIBUTE = "PCSPEC_EXPECT"


def declared(spec: str) -> frozenset[str]:
    """The violations the module of ``MODULE:NAME`` declares for NAME (``PCSPEC_EXPECT``)."""
    module_name, _, attr = spec.partition(":")
    table = getattr(sys.modules.get(module_name) or importlib.import_module(module_name), EXPECT_ATTRIBUTE, {})
    where = f"{OPTION} {spec}: {module_name}.{EXPECT_ATTRIBUTE}"
    if not isinstance(table, dict):
        raise PcspecError("must map variant names to lists of property IDs", where)
    ids = table.get(attr, ())
    if isinstance(ids, str) or not all(isinstance(i, str) for i in ids):
        raise PcspecError(f"{attr!r} must map to a list of property IDs", where)
    return frozenset(ids)


def declared_violations(expect: list[str], refs: Sequence[str]) -> dict[str, frozenset[str]]:
    """The violations each variant of one's own (by ``MODULE:NAME``) is meant to show: the
    ``--expect`` properties and its module's ``PCSPEC_EXPECT``. ``--expect`` with no variant of
    one's own is refused: pcspec's oracle knows what its own variants show."""
    ids = frozenset(get_property(p).id for p in expect)
    if ids and not refs:
        raise PcspecError("--expect is for a variant of your own (--variant-module): pcspec knows its own", "--expect")
    return {ref: ids | {get_property(p).id for p in declared(ref)} for ref in refs}


def add_variant_options(parser: argparse.ArgumentParser, variant_help: str, default: str | None = None) -> None:
    """``--variant NAME`` (built-in) or ``--variant-module MODULE:NAME`` (one's own)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--variant", default=default, help=variant_help)
    group.add_argument(
        OPTION,
        metavar="MODULE:NAME",
        help="a Design of your own: the object NAME in the module MODULE (found from the current folder)",
    )


def add_expect_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--expect",
        action="append",
        default=[],
        metavar="PROPERTY",
        help="a violation your own variant is meant to show (repeatable; also PCSPEC_EXPECT in its module);"
        " any other violation fails the run",
    )


def chosen_variant(args: argparse.Namespace) -> str | Design | None:
    """What the options chose: a Design object, a built-in's name, or None (neither given)."""
    spec: str | None = getattr(args, "variant_module", None)
    if spec is not None:
        return load_variant(spec)
    name: str | None = args.variant
    renamed = renamed_error(name) if name is not None else None
    if renamed is not None:  # an old design name (``master``): what it is called now
        raise PcspecError(renamed.why, "--variant")
    return name
