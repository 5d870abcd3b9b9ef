"""``pcspec live --matrix`` (pcspec/live/binaries.py): the verdict matrix on the designs' binaries.

The registry is checked without a server: every workload is package data and parses, every
route is one docs/PROPERTIES.md names, and every cell the verdict matrix marks violated on a C++
design is either reproduced by a workload or listed with where it is shown or why it cannot be.
On the binaries (``live``): one cell, PERF-2, on ``baseline``'s build (seen) and ``fixed``'s
(holds), and the verdict a workload gives when the build is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from pcspec.live import binaries
from pcspec.live.binaries import REACHED_ELSEWHERE, REPRO_DIR, REPROS, Cell, render
from pcspec.live.report import read_workload
from pcspec.properties.oracle import ORACLE
from pcspec.properties.routes import ROUTES, routes

CPP = ("baseline", "pr30137", "pr27451")


def test_every_workload_parses_and_names_a_route_of_its_property() -> None:
    for r in REPROS:
        kind, _flags, _seed, ops = read_workload(REPRO_DIR / r.workload)
        assert kind and ops, r
        if not r.violating:  # a workload where the cell holds (FILE-1's round trip): no route of it
            assert r.cell in REACHED_ELSEWHERE, r
            continue
        assert any(r.route in {x.name for x in routes(d, r.cell)} for d in ROUTES), r
        assert any(ORACLE[d].get(r.cell) == "x" for d in CPP), r


def test_every_violated_cell_is_reproduced_or_says_where_it_is_shown() -> None:
    violated = {p for d in CPP for p, mark in ORACLE[d].items() if mark == "x"}
    covered = {r.cell for r in REPROS if r.violating} | set(REACHED_ELSEWHERE)
    assert violated <= covered, violated - covered
    assert not set(REACHED_ELSEWHERE) & {r.cell for r in REPROS if r.violating}


def test_the_table_has_a_column_per_design_and_the_rest_listed() -> None:
    cells = [Cell("PERF-2", "supersede", "baseline", "seen", "task 1 erased"),
             Cell("PERF-2", "supersede", "fixed", "holds"),
             Cell("REUSE-1", "live-memory-test", "baseline", "diverged", "http: request 1")]
    text = render(cells, ["baseline", "fixed"])
    head, perf, reuse = text.splitlines()[:3]
    assert head.split() == ["cell", "(route)", "baseline", "fixed"]
    assert perf.split() == ["PERF-2", "(supersede)", "seen", "holds"]
    assert reuse.split() == ["REUSE-1", "(live-memory-test)", "diverged", "-"]
    assert "diverged: REUSE-1 on baseline: http: request 1" in text
    assert f"  RB-3: {REACHED_ELSEWHERE['RB-3']}" in text and "PERF-2:" not in text.split("reaches:")[1]


@pytest.mark.live
@pytest.mark.parametrize(("design", "verdict"), [("baseline", "seen"), ("fixed", "holds")])
def test_perf_2_on_the_binaries(design: str, verdict: str, tmp_path: Path) -> None:
    pytest.importorskip("gguf", reason="pip install gguf (the live models are made with it)")
    from tests.support.live import build_or_skip

    build_or_skip(design)
    (repro,) = [r for r in REPROS if r.cell == "PERF-2"]
    cell = binaries.observe(repro, design, tmp_path / "models", tmp_path / "run")
    assert cell.verdict == verdict, cell
    if verdict == "seen":
        assert "erased the checkpoint it restored" in cell.detail, cell


def test_a_design_not_built_is_said_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(binaries, "_binary", lambda _d: None)
    cell = binaries.observe(REPROS[0], "pr27451", tmp_path, tmp_path)
    assert (cell.verdict, cell.detail) == ("not built", "pcspec build --design pr27451")


@pytest.mark.parametrize("argv", [["live", "--matrix", "--server", "x"], ["live", "--matrix", "--design", "nope"],
                                  ["live", "--faults", "--requests", "1"]])
def test_bad_matrix_and_faults_arguments_are_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from pcspec.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pcspec"), err
