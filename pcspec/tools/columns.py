"""What each column of the verdict matrix is, in one line: its design, its rule set, where its
code comes from (an upstream tree, a pull request, pcspec's patches, a module of the user's).

``pcspec verify`` prints these under the matrix, so that a reader can tell which column is the
branch they start from: ``pr30137`` under the ``november`` rules is today's upstream master; the
``baseline`` design is the code #30137 changed (upstream before #30137).
"""

from __future__ import annotations

from pcspec.live.build import TREES
from pcspec.live.designs import DESIGNS as BUILDS
from pcspec.model.design import Design
from pcspec.model.designs import BUILT_IN, RULE_SET_MODELS

# Where each built-in design's change comes from.
CHANGES = {
    "baseline": "the code #30137 and #27451 change (upstream before #30137)",
    "pr30137": "#30137 as merged (upstream since November 2026)",
    "pr27451": "#27451, the competing change (head 5c7018ed7, not merged)",
    "fixed": "pcspec's proposal (docs/DESIGNS.md), on #30137",
}


def _tree(name: str) -> str:
    t = TREES.get(name)
    return f"{name} ({t.sdist}=={t.version})" if t is not None else name or "no tree to be had"


def describe(design: Design) -> str:
    """The column's line: ``NAME: what it is; rules R; built as ...``."""
    rules = design.rules
    if design.name in RULE_SET_MODELS:
        return (f"{design.name}: the model of an upstream build: the baseline design under rule set {rules.name} "
                f"(docs/RULESETS.md); tree {_tree(rules.tree)}")
    if design.name in BUILT_IN:
        build = BUILDS.get(design.name)
        how = "the tree as it is" if build is not None and not build.patches else f"patches/{design.name}"
        where = f"built as {how} on {_tree(build.tree)}" if build is not None else "no build"
        return f"{design.name}: {CHANGES.get(design.name, design.summary)}; rules {rules.name}; {where}"
    parent = next((c.name for c in type(design).__mro__[1:] if issubclass(c, Design) and c in BUILT_IN.values()),
                  "Design")
    origin = design.origin or type(design).__qualname__
    return (f"{design.name}: yours ({origin}), on {parent}: {design.summary}; rules {rules.name}; "
            "judged against the violations you declared (--expect, PCSPEC_EXPECT)")
