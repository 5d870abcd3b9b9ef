"""A design's extension points (model/design.py): every public member of ``Design`` is a point of
exactly one kind (an attribute, a decision, a choice or an effect) but the design's own facts
(its name, summary, rule set, and what makes a mutant); each point's docstring says its kind;
and ``implementation``, ``runs`` and ``defined_by`` say what a design runs at a point."""

from __future__ import annotations

import inspect

import pytest

from pcspec.model.design import (
    ATTRIBUTE_POINTS,
    CHOICE_POINTS,
    DECISION_POINTS,
    EFFECT_POINTS,
    POINTS,
    Design,
    Sharing,
    defined_by,
    implementation,
    runs,
)
from pcspec.model.designs import DESIGNS, PR30137, Baseline, Fixed
from pcspec.model.rulesets import OCTOBER, SPEC

# What a design is, not what it decides.
FACTS = {"name", "summary", "rules", "mutant", "base", "origin"}


def test_every_public_member_is_one_point() -> None:
    kinds = (ATTRIBUTE_POINTS, DECISION_POINTS, CHOICE_POINTS, EFFECT_POINTS)
    assert sum(kinds, ()) == POINTS
    assert len(POINTS) == len(set(POINTS)), "a point is listed twice"
    public = {n for n in dir(Design) if not n.startswith("_")}
    assert public - FACTS == set(POINTS)


@pytest.mark.parametrize("point", DECISION_POINTS + CHOICE_POINTS + EFFECT_POINTS)
def test_a_points_docstring_says_its_kind(point: str) -> None:
    doc = inspect.getdoc(getattr(Design, point)) or ""
    kind = "DECISION." if point in DECISION_POINTS else "EFFECT"
    assert doc.startswith(kind), (point, doc[:40])


def test_what_a_design_runs_at_a_point() -> None:
    fixed, baseline, pr30137 = DESIGNS["fixed"], DESIGNS["baseline"], DESIGNS["pr30137"]
    assert runs(fixed, "prompt_save", Fixed) and not runs(baseline, "prompt_save", Fixed)
    assert runs(fixed, "make_room", Baseline)  # inherited from Design through every class
    assert defined_by(fixed, "sharing") is PR30137 and defined_by(baseline, "make_room") is Design
    assert implementation(pr30137, "sharing") is Sharing.SHARED_OBJECT
    assert implementation(Fixed, "kept_checkpoint") is Fixed.__dict__["kept_checkpoint"]
    with pytest.raises(AttributeError):
        implementation(fixed, "no_such_point")


class Assigned(Baseline):
    """baseline with fixed's accounting, assigned rather than written."""

    entry_sizes = Fixed.entry_sizes
    candidate_size = Fixed.candidate_size


def test_a_subclass_names_itself_and_runs_what_it_assigns() -> None:
    mine = Assigned()
    assert mine.name == "Assigned" and mine.summary == "baseline with fixed's accounting, assigned rather than written."
    assert mine.rules is SPEC and Assigned(OCTOBER).rules is OCTOBER
    assert runs(mine, "entry_sizes", Fixed) and runs(mine, "candidate_size", Fixed)
    assert not runs(mine, "prompt_save", Fixed) and defined_by(mine, "entry_sizes") is Assigned
    assert mine.origin == f"{__name__}:Assigned" and DESIGNS["fixed"].origin is None
