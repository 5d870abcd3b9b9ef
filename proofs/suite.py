"""The proof suite: every pair run, the summary, and the SMT-LIB export.

``run_suite`` is what ``pcspec prove`` and ``pcspec verify`` call. ``export`` writes every
distinct query a run solved as an SMT-LIB 2 file, with a manifest of Z3's verdicts that a
second solver is checked against (``pcspec.proofs.recheck``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pcspec.model.design import Design
from pcspec.proofs.obligations import OBLIGATIONS, Obligation
from pcspec.proofs.pairs import suite
from pcspec.proofs.run import Row, RunConfig, Runner, Solved
from pcspec.proofs.solver import MEASURED_Z3, z3_version

MANIFEST = "manifest.json"


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)
    solved: list[Solved] = field(default_factory=list)
    cfg: RunConfig = field(default_factory=RunConfig)

    @property
    def ok(self) -> bool:
        return bool(self.rows) and all(r.ok for r in self.rows)

    @property
    def exit_code(self) -> int:
        """0: every row as expected; 1: a row settled otherwise (or a counterexample that did
        not replay); 3: nothing contradicts the expectations but some rows are unknown or not
        covered (as ``pcspec verify`` reports a time cap)."""
        open_ = ("unknown", "not covered")
        if any(not r.ok and r.result not in open_ for r in self.rows):
            return 1
        return 3 if any(r.result in open_ for r in self.rows) or not self.rows else 0

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.rows)

    def solver(self) -> dict[str, Any]:
        s = self.cfg.settings
        return {
            "name": "z3",
            "version": z3_version(),
            "measured_with": MEASURED_Z3,
            "seed": s.seed,
            "timeout_ms": s.timeout_ms,
            "rlimit": s.rlimit,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": 1,
            "ok": self.ok,
            "solver": self.solver(),
            "seconds": round(self.seconds, 3),
            "proofs": [r.to_json() for r in self.rows],
        }


def run_suite(
    cfg: RunConfig,
    obligations: tuple[Obligation, ...] = OBLIGATIONS,
    variants: list[Design] | None = None,
    out: Path | None = None,
    progress: Callable[[Row], None] | None = None,
    only: Sequence[str] | None = None,
    declared: Mapping[str, Collection[str]] | None = None,
) -> Report:
    """Each obligation against its pairs (or against ``variants``); ``only`` keeps the pairs
    whose variant it names (``pcspec verify --variant``); ``declared``: the violations a
    variant of the user's is meant to show (``pairs.suite``)."""
    runner = Runner(cfg, out)
    report = Report(cfg=cfg)
    for pair in suite(obligations, variants, declared):
        if only is not None and pair.variant.name not in only:
            continue
        row = runner.run(pair)
        report.rows.append(row)
        if progress is not None:
            progress(row)
    report.solved = runner.solved
    return report


def export(report: Report, directory: Path) -> list[Path]:
    """One ``.smt2`` file per distinct query solved, and ``manifest.json``: for each file, the
    obligation, variant, query and Z3's verdict."""
    directory.mkdir(parents=True, exist_ok=True)
    entries: list[dict[str, Any]] = []
    paths: list[Path] = []
    for i, s in enumerate(report.solved):
        name = f"{i:03d}__{_safe(s.obligation)}__{_safe(s.variant)}__{_safe(s.name)}.smt2"
        path = directory / name
        path.write_text(s.text, encoding="utf-8")
        paths.append(path)
        entries.append(
            {"file": name, "obligation": s.obligation, "variant": s.variant, "query": s.name, "z3": s.status}
        )
    manifest = {"schema": 1, "solver": report.solver(), "queries": entries}
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return paths


def _safe(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "-", s).strip("-")
