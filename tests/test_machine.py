"""The Hypothesis machine as users bind it: `fixed` holds every property in the ci profile,
and a variant of one's own with a seam broken is caught."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis.stateful import run_state_machine_as_test

from pcspec.model.variants import FIXED
from pcspec.properties.catalogue import CATALOGUE
from pcspec.properties.machine import PROFILES, machine_for

TestFixedHoldsEverything = machine_for(FIXED, targets=[p.id for p in CATALOGUE]).TestCase
TestFixedHoldsEverything.settings = PROFILES["ci"]


def test_user_variant_without_keep_restored_is_caught() -> None:
    mine = dataclasses.replace(FIXED, name="mine", keep_restored=False)
    machine = machine_for(mine, targets=["PERF-2"])
    with pytest.raises(AssertionError, match="PERF-2"):
        run_state_machine_as_test(machine, settings=PROFILES["ci"])  # type: ignore[no-untyped-call]
    assert machine.found.last is not None and machine.found.last[0].property == "PERF-2"
