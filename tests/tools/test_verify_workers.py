"""``pcspec verify --workers N`` (pcspec/tools/workers.py): the matrix of N worker processes is
the matrix of one, byte for byte apart from the timings, with the same trace files; progress
names the units in one worker's order whatever order they finish in; a worker that dies is
reported by the unit it lost, not waited for, never passes, and the other units run on."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from pcspec.cli import main
from pcspec.commands.verify import print_matrix
from pcspec.tools.verdicts import Budget, Cell, Matrix, Tick, verify
from pcspec.tools.workers import Job, Result, Unit, run_unit, verify_in_workers

# Small budgets: the surveys see few violations, so the designs' hunts run too (every kind of
# unit is exercised), in seconds rather than minutes. The verdicts need not match the oracle.
SMALL = Budget(seed=1, survey_examples=20, hunt_examples=300)
SUBSET = ["pr30137", "mutant:no-cap", "mutant:sweep-always", "mutant:keep-invalidated"]
TIMINGS = {"seconds"}  # the only fields that may differ: cells', proof rows' and the run's own


def comparable(m: Matrix | dict[str, Any], out: Path) -> str:
    """The JSON with the timing fields removed and the output folder named ``OUT``."""
    data = m.to_json() if isinstance(m, Matrix) else m

    def strip(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in TIMINGS}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x

    return json.dumps(strip(data), indent=1).replace(str(out), "OUT")


def files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.mark.slow  # (three runs of a design and three mutants: about 30 s of CPU)
def test_two_and_three_workers_make_the_matrix_of_one(tmp_path: Path) -> None:
    runs: dict[int, tuple[Matrix, Path, list[str]]] = {}
    for workers in (1, 2, 3):
        out = tmp_path / f"w{workers}"
        ticks: list[Tick] = []
        if workers == 1:
            m = verify(SMALL, out, SUBSET, ticks.append, proofs=None)
        else:
            m = verify_in_workers(SMALL, out, SUBSET, ticks.append, proofs=None, workers=workers)
        runs[workers] = (m, out, [t.message for t in ticks])
    one, out1, _ = runs[1]
    assert any(c.verdict == "violated" for c in one.cells)
    # (the design must hunt too: a unit only known once its survey is settled)
    assert any(msg.startswith("pr30137: hunt") for msg in runs[1][2])
    for workers in (2, 3):
        m, out, _ = runs[workers]
        assert comparable(m, out) == comparable(one, out1), f"{workers} workers"
        assert files(out) == files(out1), f"{workers} workers"
    # Progress: each unit once, in one worker's order, whichever worker finished it first.
    assert runs[2][2][1:] == runs[3][2][1:]  # (the first line names the number of workers)
    settled = [msg.removeprefix("settled ") for msg in runs[2][2] if msg.startswith("settled ")]
    assert settled == [msg for msg in runs[1][2] if msg != "done"]  # (one worker names each as it starts)


def test_the_command_gives_the_same_json_with_one_and_two_workers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command line itself (``--json``, ``--out``), on mutants (their hunts are short);
    exit 0 both times: every mutant caught."""
    datas = []
    for workers in ("1", "2"):
        out = tmp_path / workers
        args = ["verify", "--variant", "mutant:no-cap", "--variant", "mutant:sweep-always", "--workers", workers]
        assert main([*args, "--json", "--out", str(out)]) == 0
        datas.append((json.loads(capsys.readouterr().out), out))
    (one, out1), (two, out2) = datas
    assert comparable(two, out2) == comparable(one, out1)
    assert files(out2) == files(out1) and len(files(out1)) == 4  # two traces and their pytest files
    assert one["crashed"] == [] and two["crashed"] == []


# -- a worker that dies -------------------------------------------------------------------------


def dies_on_a_mutant(job: Job, unit: Unit) -> Result:
    """A unit's work that kills its worker (as the kernel's out-of-memory killer would) at the
    first mutant target; runs the others as verify does."""
    if unit.variant == "mutant:no-cap":
        os._exit(9)
    return run_unit(job, unit)


def raises_on_a_mutant(job: Job, unit: Unit) -> Result:
    if unit.variant == "mutant:no-cap":
        raise RuntimeError("a bug in a unit")
    return run_unit(job, unit)


def test_a_worker_that_dies_loses_its_unit_and_the_others_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    variants = ["mutant:no-cap", "mutant:sweep-always", "mutant:keep-invalidated"]
    t0 = time.monotonic()
    m = verify_in_workers(SMALL, tmp_path, variants, workers=2, work=dies_on_a_mutant)
    assert time.monotonic() - t0 < 120  # (not hung: the lost unit is not waited for)
    assert m.crashed == ["mutant:no-cap: hunt CKPT-1"]  # (the one unit whose worker died)
    lost = [c for c in m.cells if c.verdict == "unknown"]
    assert {(c.variant, c.property) for c in lost} == {("mutant:no-cap", "CKPT-1")}
    assert all(c.message and "lost unit mutant:no-cap: hunt CKPT-1" in c.message for c in lost)
    assert all(c.message and "exit code 9" in c.message for c in lost)
    assert "mutant:no-cap" not in m.mutants  # neither caught nor missed: not run
    # the units after it ran on the pool's fresh worker: their mutants are settled
    assert set(m.mutants) == {"mutant:sweep-always", "mutant:keep-invalidated"}
    assert m.exit_code == 3 and m.ok is False
    assert m.to_json()["crashed"] == m.crashed
    print_matrix(m)
    shown = capsys.readouterr().out
    assert "CRASHED: a worker process died" in shown and "lost unit mutant:no-cap: hunt CKPT-1" in shown
    assert "UNKNOWN" not in shown  # (no time cap was involved)


def test_an_exception_in_a_worker_reaches_the_caller(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="a bug in a unit"):
        verify_in_workers(SMALL, tmp_path, ["mutant:no-cap"], workers=2, work=raises_on_a_mutant)


def test_one_process_reports_no_crash() -> None:
    assert Matrix(cells=[Cell("fixed", "ACC-1", ".", "holds", 1, 0.0)]).exit_code == 0
    assert Matrix(cells=[Cell("fixed", "ACC-1", ".", "holds", 1, 0.0)], crashed=["fixed: survey"]).exit_code == 3
