"""docs/SPEC.md is kept true by the code: its generated blocks are current, and every
operation, property, fault site and extension point the code defines has its place in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pcspec.conform import protocol
from pcspec.conform.judge import JUDGED, NOT_JUDGED
from pcspec.model.design import POINTS
from pcspec.model.heap import Faults
from pcspec.properties.catalogue import CATALOGUE
from pcspec.tools import specgen
from tests.support.paths import ROOT

SPEC = ROOT / "docs" / "SPEC.md"
TEXT = SPEC.read_text(encoding="utf-8")


def test_generated_blocks_are_current() -> None:
    assert specgen.render(TEXT) == TEXT, "docs/SPEC.md drifted from the code: run python -m pcspec.tools.specgen"


def test_every_operation_has_its_section() -> None:
    for op in protocol.OPS:
        assert f"### `{op.name}`" in TEXT, f"docs/SPEC.md has no section for the operation {op.name!r}"


def test_every_property_is_restated() -> None:
    for p in CATALOGUE:
        assert f"#### {p.id}\n" in TEXT, f"docs/SPEC.md does not restate {p.id} over the variables"


def test_every_property_is_judged_or_says_who_sees_it() -> None:
    ids = [p.id for p in CATALOGUE]
    assert set(NOT_JUDGED) <= set(ids), "NOT_JUDGED names a property the catalogue does not have"
    assert [p.id for p in JUDGED] == [i for i in ids if i not in NOT_JUDGED]


def test_every_fault_site_and_extension_point_is_described() -> None:
    assert set(specgen.FAULT_EFFECTS) == set(Faults.SITES)
    core_sites = {s for op in protocol.OPS for s in op.sites}
    assert core_sites <= set(Faults.SITES)
    assert set(specgen.POINT_OPS) == set(POINTS), (
        "an extension point of model/design.py is missing from specgen.POINT_OPS (or gone)")


def test_the_schemas_name_every_operation() -> None:
    schemas = protocol.schemas()
    for op in protocol.OPS:
        assert op.name in schemas
        assert schemas[op.name]["properties"]["op"] == {"const": op.name}
    for k in protocol.CONFIG_FIELDS:
        assert k in schemas["begin"]["properties"]["config"]["properties"]


def test_specgen_cli_checks_and_reports_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # (the repository's docs/SPEC.md, named: an installed pcspec has no docs beside it)
    assert specgen.main(["--check", str(SPEC)]) == 0
    stale = tmp_path / "SPEC.md"
    text = TEXT
    assert specgen.render(text) == text
    stale.write_text(text.replace("\n<!-- end: ", "\nstale line\n<!-- end: "), encoding="utf-8")
    assert specgen.main(["--check", str(stale)]) == 1
    assert specgen.main([str(tmp_path / "missing.md")]) == 2
    assert "cannot read" in capsys.readouterr().err
