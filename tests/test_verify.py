"""The verdict matrix of `pcspec verify` (ci profile) matches the oracle, every mutant is
caught, and every counterexample replays from its saved trace file."""

from __future__ import annotations

from pathlib import Path

import pytest

from pcspec.cli import main
from pcspec.properties.catalogue import CATALOGUE
from pcspec.properties.oracle import MUTANT_TARGETS, ORACLE
from pcspec.verdicts import Budget, Matrix, verify


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> tuple[Matrix, Path]:
    out = tmp_path_factory.mktemp("verify")
    # Example counts bound the work; the time budgets are set far out of reach so that the
    # verdicts depend only on the seed, never on how fast the machine is (deterministic).
    budget = Budget(survey_examples=600, survey_seconds=3600, hunt_examples=1500, hunt_seconds=3600)
    return verify(budget, out), out


CELLS = [(v, p.id) for v in ORACLE for p in CATALOGUE]


@pytest.mark.parametrize(("variant", "pid"), CELLS)
def test_cell_matches_oracle(matrix: tuple[Matrix, Path], variant: str, pid: str) -> None:
    m, _ = matrix
    cell = next(c for c in m.cells if c.variant == variant and c.property == pid)
    if ORACLE[variant][pid] == "?":  # extended catalogue: recorded, not expected
        assert cell.verdict in ("violated", "holds") and cell.ok
        return
    want = "violated" if ORACLE[variant][pid] == "x" else "holds"
    assert cell.verdict == want, f"{variant} {pid}: {cell.verdict} ({cell.message})"
    if cell.verdict == "violated":
        assert cell.length is not None and cell.length <= 12, "counterexamples are shrunk"


@pytest.mark.parametrize("mutant", sorted(MUTANT_TARGETS))
def test_mutant_caught(matrix: tuple[Matrix, Path], mutant: str) -> None:
    m, _ = matrix
    assert m.mutants[mutant] == list(MUTANT_TARGETS[mutant]), f"{mutant} caught by {m.mutants[mutant]} only"


def test_matrix_ok_and_json_shape(matrix: tuple[Matrix, Path]) -> None:
    m, _ = matrix
    data = m.to_json()
    assert data["schema"] == 1 and data["ok"] is True
    row = data["fuzz"][0]
    assert {"variant", "property", "expected", "verdict", "steps", "seconds", "trace"} <= set(row)
    assert {r["mutant"] for r in data["mutants"]} == set(MUTANT_TARGETS)
    assert any(r["variant"].startswith("mutant:") for r in data["fuzz"])


def test_every_saved_trace_replays(matrix: tuple[Matrix, Path]) -> None:
    m, out = matrix
    traces = sorted(out.glob("*.jsonl"))
    assert len(traces) == sum(1 for c in m.cells if c.verdict == "violated")
    for path in traces:
        assert main(["replay", str(path), "--json"]) == 0, path.name
    snippets = sorted(out.glob("test_*.py"))
    assert len(snippets) == len(traces)


def test_every_property_can_fail(matrix: tuple[Matrix, Path]) -> None:
    """A check that cannot fail is a defect: each property is violated by some design or mutant."""
    m, _ = matrix
    violated = {c.property for c in m.cells if c.verdict == "violated"}
    assert [p.id for p in CATALOGUE if p.id not in violated] == []
