"""The verdict matrix of the README's `pcspec verify` matches the oracle, every mutant is
caught, every counterexample replays from its saved trace file, and the verdicts are a
function of the commit and the seed alone (not of the hash seed, the load or the install).

The matrix under test is the command's own: it runs as a subprocess with its defaults (plus
``--json`` and ``--out``), so what this suite proves is what a user's first command prints."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pcspec.cli import main
from pcspec.properties.catalogue import CATALOGUE
from pcspec.properties.coverage import DECISIONS, UNREACHABLE
from pcspec.properties.oracle import MUTANT_TARGETS, ORACLE
from pcspec.properties.routes import ROUTES

pytestmark = pytest.mark.slow  # the verdict matrix: one `pcspec verify` run of every design, minutes


def pcspec_command() -> list[str]:
    """The installed ``pcspec`` script (what the README runs), else the module."""
    exe = shutil.which("pcspec")
    return [exe] if exe else [sys.executable, "-m", "pcspec"]


def run_verify(out: Path, hash_seed: int, load: bool = False, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    env = dict(os.environ, PYTHONHASHSEED=str(hash_seed))
    burner = None
    if load:  # another CPU-heavy process for the whole run
        burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        proc = subprocess.run(
            [*pcspec_command(), "verify", "--json", "--out", str(out), *extra],
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
    finally:
        if burner is not None:
            burner.kill()
            burner.wait()
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    data: dict[str, Any] = json.loads(proc.stdout)
    data["exit"] = proc.returncode
    return data


@pytest.fixture(scope="module")
def verified(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("verify")
    return run_verify(out, hash_seed=0), out


def cell(data: dict[str, Any], variant: str, pid: str) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in data["fuzz"] if c["variant"] == variant and c["property"] == pid)
    return found


def test_readme_command_exits_zero(verified: tuple[dict[str, Any], Path]) -> None:
    data, _ = verified
    bad = [(c["variant"], c["property"], c["verdict"]) for c in data["fuzz"] if not c["ok"]]
    assert data["exit"] == 0 and data["ok"] is True, bad


def _without_timings(data: dict[str, Any]) -> Any:
    """The verdict JSON with what may differ between runs removed: wall-clock times, and the
    output directory in trace paths."""

    def strip(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k != "seconds"}
        if isinstance(x, list):
            return [strip(v) for v in x]
        if isinstance(x, str) and x.endswith(".jsonl"):
            return Path(x).name
        return x

    return strip(data)


def test_same_verdicts_with_another_hash_seed_under_load(
    verified: tuple[dict[str, Any], Path], tmp_path: Path
) -> None:
    """The verdicts depend on the commit, the seed and the example budgets only: not on the hash
    seed, nor on a load beside the run (the number of worker processes is
    tests/tools/test_verify_workers.py's). The second run takes two designs (one that hunts) and
    two mutants, each unit as in the whole run."""
    first, out1 = verified
    names = ("pr30137", "fixed", "mutant:no-cap", "mutant:undercount")
    second = run_verify(tmp_path, hash_seed=12345, load=True, extra=tuple(a for n in names for a in ("--variant", n)))

    def mine(data: dict[str, Any]) -> Any:
        return _without_timings({
            "fuzz": [c for c in data["fuzz"] if c["variant"] in names],
            "mutants": [m for m in data["mutants"] if m["mutant"] in names],
            "proofs": [p for p in data["proofs"] if p["variant"] in names],
        })

    assert second["fuzz"] and mine(second) == mine(first)
    for path in sorted(tmp_path.glob("*.jsonl")):
        assert (out1 / path.name).read_text() == path.read_text(), path.name


CELLS = [(v, p.id) for v in ORACLE for p in CATALOGUE]


@pytest.mark.parametrize(("variant", "pid"), CELLS)
def test_cell_matches_oracle(verified: tuple[dict[str, Any], Path], variant: str, pid: str) -> None:
    c = cell(verified[0], variant, pid)
    if ORACLE[variant][pid] == "?":  # extended catalogue: recorded, not expected
        assert c["verdict"] in ("violated", "holds") and c["ok"]
        return
    want = "violated" if ORACLE[variant][pid] == "x" else "holds"
    assert c["verdict"] == want, f"{variant} {pid}: {c['verdict']} ({c['message']})"
    if c["verdict"] == "violated":
        assert c["length"] is not None and c["length"] <= 12, "counterexamples are shrunk"


@pytest.mark.parametrize("mutant", sorted(MUTANT_TARGETS))
def test_mutant_caught(verified: tuple[dict[str, Any], Path], mutant: str) -> None:
    caught = {r["mutant"]: r["caught_by"] for r in verified[0]["mutants"]}
    assert caught[mutant] == list(MUTANT_TARGETS[mutant]), f"{mutant} caught by {caught[mutant]} only"


def test_matrix_json_shape(verified: tuple[dict[str, Any], Path]) -> None:
    data, _ = verified
    assert data["schema"] == 1
    row = data["fuzz"][0]
    assert {"variant", "property", "expected", "verdict", "steps", "seconds", "trace"} <= set(row)
    assert {r["mutant"] for r in data["mutants"]} == set(MUTANT_TARGETS)
    assert any(r["variant"].startswith("mutant:") for r in data["fuzz"])


def test_every_saved_trace_replays(verified: tuple[dict[str, Any], Path]) -> None:
    data, out = verified
    traces = sorted(out.glob("*.jsonl"))
    assert len(traces) == sum(1 for c in data["fuzz"] if c["verdict"] == "violated")
    for path in traces:
        assert main(["replay", str(path), "--json"]) == 0, path.name
    snippets = sorted(out.glob("repro_*.py"))
    assert len(snippets) == len(traces)


def test_every_decision_reached(verified: tuple[dict[str, Any], Path]) -> None:
    """Decision coverage: every decision of properties/coverage.py is reached by
    some design's runs in the default budget, unless ``UNREACHABLE`` excuses it for every
    design (a decision only one design can take, as fixed's kept restore, counts once)."""
    coverage = verified[0]["coverage"]
    assert set(coverage) == set(ORACLE)  # the designs and the upstream build b11549
    never = [
        name
        for name in DECISIONS
        if not any(counts[name] for counts in coverage.values())
        and not all((d, name) in UNREACHABLE for d in coverage)
    ]
    assert never == []


def test_every_property_can_fail(verified: tuple[dict[str, Any], Path]) -> None:
    """A check that cannot fail is a defect: each property is violated by some design or mutant."""
    violated = {c["property"] for c in verified[0]["fuzz"] if c["verdict"] == "violated"}
    assert [p.id for p in CATALOGUE if p.id not in violated] == []


def test_every_counterexample_takes_a_listed_route(verified: tuple[dict[str, Any], Path]) -> None:
    """Each counterexample the README's run prints for a C++ design comes about in a way
    properties/routes.py explains (docs/PROPERTIES.md): the printed trace and the written
    reason tell the same story."""
    rows = [c for c in verified[0]["fuzz"] if c["verdict"] == "violated" and c["variant"] in ROUTES]
    assert rows
    unexplained = [(c["variant"], c["property"], c["trace"]) for c in rows if not c["route"]]
    assert unexplained == [], "counterexamples on routes properties/routes.py does not list"
    others = [c for c in verified[0]["fuzz"] if c["variant"] not in ROUTES]
    assert all(c["route"] is None for c in others)
