"""A model with ~330 MiB checkpoints makes exactly the decisions of one with 1 KiB checkpoints.

The workload and the comparison live in ``benchmarks/size_independence.py`` (which also times
the two runs); this test runs the decision check only, no timing.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

import pytest

from pcspec.model.config import MIB, MemoryKind
from tests.support.paths import ROOT

SCRIPT = ROOT / "benchmarks" / "size_independence.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pcspec_bench_size_independence", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and typing resolve through sys.modules
    spec.loader.exec_module(module)
    return module


def test_checkpoint_sizes(bench: ModuleType) -> None:
    for memory in (MemoryKind.RECURRENT, MemoryKind.SWA):
        assert bench.checkpoint_bytes(memory, bench.SMALL) == 1024
        assert round(bench.checkpoint_bytes(memory, bench.LARGE) / MIB, 3) == 330.0


def test_same_decisions_at_both_sizes(bench: ModuleType) -> None:
    runs = bench.check_decisions(10)  # raises AssertionError naming the first difference
    assert len(runs) == 8  # 2 memory kinds x 4 designs
    for memory, variant, small, large in runs:
        assert small.crash is None and large.crash is None
        kinds = {e.kind for e in small.heap.events}
        # The workload exercises what the claim is about.
        assert {"ckpt_create", "ckpt_restore", "entry_insert", "entry_evict"} <= kinds, (
            memory,
            variant,
        )
        assert large.accounted_bytes > 300_000 * small.accounted_bytes
        if variant == "baseline":
            assert "copy_payload" in kinds


def test_comparison_detects_different_decisions(bench: ModuleType) -> None:
    # The check can fail: the same workload at the same scale with another byte limit makes
    # other decisions, and an unscaled byte count is not taken for a scaled one.
    small = bench.workload(MemoryKind.RECURRENT, bench.SMALL, "pr30137", 10)
    other = bench.workload(MemoryKind.RECURRENT, bench.SMALL, "pr30137", 10, limit_units=20)
    assert bench.decisions_mismatch(small, other, bench.LARGE) is not None
    assert bench.scaled(1024, 16 + 1008 * bench.LARGE, bench.LARGE)
    assert bench.scaled(2048, 32 + 2016 * bench.LARGE, bench.LARGE)
    assert not bench.scaled(1024, 1024 * bench.LARGE + 1, bench.LARGE)
    assert not bench.scaled(20, 21, bench.LARGE)
