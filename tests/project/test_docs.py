"""docs/PROPERTIES.md is generated from the catalogue and the oracle, and kept in step."""

from __future__ import annotations

from pcspec.properties.catalogue import CATALOGUE
from pcspec.tools.docgen import render
from tests.support.paths import ROOT

DOCS = ROOT / "docs"


def test_properties_doc_is_current() -> None:
    text = (DOCS / "PROPERTIES.md").read_text(encoding="utf-8")
    assert text == render(), "regenerate with: python -m pcspec.tools.docgen > docs/PROPERTIES.md"
    for p in CATALOGUE:
        assert f"### {p.id}" in text


def test_architecture_names_every_model_module() -> None:
    text = (DOCS / "ARCHITECTURE.md").read_text(encoding="utf-8")
    for f in sorted((ROOT / "model").glob("*.py")):
        if f.name != "__init__.py":
            assert f"`{f.name}`" in text, f"docs/ARCHITECTURE.md does not mention model/{f.name}"
