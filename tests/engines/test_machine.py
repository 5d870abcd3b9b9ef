"""The Hypothesis machine as users bind it: `fixed` holds every property in the ci profile,
and a design of one's own with a point broken is caught; runs return what they found."""

from __future__ import annotations

import pytest
from hypothesis.stateful import run_state_machine_as_test

from pcspec.engines.hypothesis import PROFILES, machine_for
from pcspec.model.design import Design
from pcspec.model.designs import DESIGNS, Fixed
from pcspec.properties.catalogue import CATALOGUE

FIXED = DESIGNS["fixed"]


class Mine(Fixed):
    """fixed without its kept checkpoint: the restored checkpoint is swept and re-created like any other."""

    name = "mine"
    kept_checkpoint = Design.kept_checkpoint


TestFixedHoldsEverything = machine_for(FIXED, targets=[p.id for p in CATALOGUE]).TestCase
TestFixedHoldsEverything.settings = PROFILES["ci"]


def test_user_variant_without_keep_restored_is_caught() -> None:
    mine = Mine()
    machine = machine_for(mine, targets=["PERF-2"])
    with pytest.raises(AssertionError, match="PERF-2"):
        run_state_machine_as_test(machine, settings=PROFILES["ci"])  # type: ignore[no-untyped-call]
    assert machine.record.last is not None and machine.record.last[0].rule == "PERF-2"
    assert machine.record.steps > 0 and machine.record.coverage


def test_no_hypothesis_internals_anywhere() -> None:
    """pcspec runs on Hypothesis's public API only (so it installs beside any Hypothesis of its
    range): no module of the package names an internal module or attribute."""
    import pathlib

    import pcspec

    root = pathlib.Path(pcspec.__file__).parent
    bad = [
        str(p)
        for p in root.rglob("*.py")
        if "hypothesis.internal" in p.read_text() or "strategies._internal" in p.read_text()
        or "_hypothesis_internal" in p.read_text()
    ]
    assert not bad
