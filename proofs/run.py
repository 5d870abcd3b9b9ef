"""Running one obligation against one variant: a proof, a replayed counterexample, or unknown.

Both procedures stand on their own. *Prove*: every query of ``Obligation.prove`` is
``unsat``; a ``sat`` query is a counterexample to induction (the state may be unreachable),
so it proves nothing either way. *Search*: the canvas search at depth 1, 2, ... up to
``depth`` finds a violation from the start; its model becomes a trace that the model must
replay with the same property violated. Which runs first follows the expectation (the
search for a paired buggy variant, the proof otherwise), only to save time: a result is
what its own procedure showed, and an unknown (a timeout, a ``sat`` lemma, nothing found
and nothing proved) is never a pass. Nor is ``not covered``: a design that runs code the
encodings do not know at a point the obligation depends on (``pcspec.proofs.encoded``) gets no
proof; only a counterexample the search finds and the model replays with the design itself.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pcspec.core.trace import Trace
from pcspec.proofs.cache_proofs import Bounds
from pcspec.proofs.canvas import Plan
from pcspec.proofs.encoded import encode
from pcspec.proofs.pairs import COUNTEREXAMPLE, NOT_COVERED, PROVED, UNKNOWN, Pair
from pcspec.proofs.query import Query
from pcspec.proofs.replay import replay_plan
from pcspec.proofs.solver import Answer, Settings, solve_blocks
from pcspec.properties.judge import write_counterexample


@dataclass(frozen=True)
class RunConfig:
    settings: Settings = field(default_factory=Settings)
    bounds: Bounds = field(default_factory=Bounds)
    depth: int = 4  # requests after the first, in the counterexample search


@dataclass
class Solved:
    """One distinct query as solved in this run (what ``--smt2`` exports)."""

    obligation: str
    variant: str
    name: str
    text: str
    status: str
    seconds: float


@dataclass
class Row:
    obligation: str
    properties: list[str]
    variant: str
    scope: str
    result: str  # proved | counterexample | unknown | not covered
    seconds: float  # solver time of this row's queries
    wall: float  # building, solving, replaying
    replayed: bool | None
    expected: str | None
    detail: str = ""
    queries: int = 0
    trace: Trace | None = None
    trace_path: str | None = None

    @property
    def ok(self) -> bool:
        if self.result in (UNKNOWN, NOT_COVERED):
            return False
        if self.result == COUNTEREXAMPLE and not self.replayed:
            return False
        return self.expected is None or self.result == self.expected

    def to_json(self) -> dict[str, Any]:
        return {
            "obligation": self.obligation,
            "properties": self.properties,
            "variant": self.variant,
            "scope": self.scope,
            "result": self.result,
            "seconds": round(self.seconds, 4),
            "replayed": self.replayed,
            "expected": self.expected,
            "ok": self.ok,
            "queries": self.queries,
            "detail": self.detail,
            "trace": self.trace_path,
        }


class Runner:
    """Runs pairs; identical query texts (a lemma several obligations share) are solved
    once per run."""

    def __init__(self, cfg: RunConfig, out: Path | None = None) -> None:
        self.cfg = cfg
        self.out = out
        self.memo: dict[str, Answer] = {}
        self.solved: list[Solved] = []

    def _solve(self, pair: Pair, name: str, blocks: list[str], want_model: bool = False) -> tuple[Answer, float]:
        key = "\n".join(blocks)
        hit = self.memo.get(key)
        if hit is not None and (hit.model or not want_model):
            return hit, 0.0
        ans = solve_blocks(blocks, self.cfg.settings, want_model)
        self.memo[key] = ans
        text = blocks[0] if len(blocks) == 1 else _joined(name, blocks)
        self.solved.append(Solved(pair.obligation.id, pair.variant.name, name, text, ans.status, ans.seconds))
        return ans, ans.seconds

    def prove(self, pair: Pair) -> tuple[str, str, float, int]:
        """(result, detail, solver seconds, queries)."""
        total, n = 0.0, 0
        for q in pair.obligation.prove(encode(pair.variant)[0], self.cfg.bounds):
            ans, dt = self._solve(pair, q.name, q.blocks())
            total, n = total + dt, n + 1
            if ans.status == "sat":
                return UNKNOWN, f"not inductive: query {q.name} has a counterexample to induction", total, n
            if ans.status != "unsat":
                return UNKNOWN, f"query {q.name}: {ans.reason or 'unknown'}", total, n
        if n == 0:
            return UNKNOWN, "no proof encoding for this variant", total, n
        return PROVED, f"{n} queries unsat", total, n

    def search(self, pair: Pair) -> tuple[str, str, float, int, Plan | None]:
        """(result, detail, solver seconds, queries, plan) -- the plan of a find."""
        total = 0.0
        for depth in range(1, self.cfg.depth + 1):
            b, goal, _ = pair.obligation.search(encode(pair.variant)[0], depth)
            ans, dt = self._solve(pair, f"search{depth}", [b.smt2(goal)], want_model=True)
            total += dt
            if ans.status == "sat":
                return COUNTEREXAMPLE, "", total, depth, Plan.from_model(ans.model, depth)
            if ans.status != "unsat":
                return UNKNOWN, f"search depth {depth}: {ans.reason or 'unknown'}", total, depth, None
        return UNKNOWN, f"no counterexample within {self.cfg.depth} requests", total, self.cfg.depth, None

    def run(self, pair: Pair) -> Row:
        t0 = time.perf_counter()
        ob, v = pair.obligation, pair.variant
        steps = (self._search_step, self._prove_step)
        if pair.expected != COUNTEREXAMPLE:
            steps = (self._prove_step, self._search_step)
        row = Row(
            ob.id, list(ob.properties), v.name, ob.scope_text(self.cfg.bounds), UNKNOWN, 0.0, 0.0, None, pair.expected
        )
        missing = ob.not_covered(encode(v)[1])
        if missing:
            # No proof of code the encodings do not know; a counterexample still counts if the
            # model, running the design itself, replays it.
            self._search_step(pair, row)
            if row.result != COUNTEREXAMPLE or not row.replayed:
                row.result, row.replayed, row.trace, row.trace_path = NOT_COVERED, None, None, None
                row.scope = "the design's own code at " + ", ".join(missing)
                row.detail = "not covered: " + "; ".join(f"{p} ({where})" for p, where in missing.items())
            row.wall = time.perf_counter() - t0
            return row
        notes: list[str] = []
        for step in steps:
            step(pair, row)
            notes.append(row.detail)
            if row.result != UNKNOWN:
                break
        if row.result == UNKNOWN:
            row.detail = "; ".join(n for n in notes if n)
        row.wall = time.perf_counter() - t0
        return row

    def _prove_step(self, pair: Pair, row: Row) -> None:
        result, detail, dt, n = self.prove(pair)
        row.seconds += dt
        row.queries += n
        row.result, row.detail = result, detail
        if result == PROVED:
            row.scope = pair.obligation.scope_text(self.cfg.bounds)

    def _search_step(self, pair: Pair, row: Row) -> None:
        result, detail, dt, depth, plan = self.search(pair)
        row.seconds += dt
        row.queries += depth
        row.result, row.detail = result, detail
        if plan is None:
            return
        row.scope = f"canvas search from the start: one slot, {depth} request(s) after the first"
        rep = replay_plan(plan, pair.variant, pair.obligation.target)
        row.replayed, row.trace = rep.reproduced, rep.trace
        row.detail = f"{plan.describe()}: {rep.message}"
        if self.out is not None:
            stem = f"proof__{pair.obligation.id.replace('/', '-')}__{pair.variant.name.replace(':', '-')}"
            row.trace_path = str(write_counterexample(rep.trace, self.out, stem))


def _joined(name: str, blocks: list[str]) -> str:
    return Query(name, lambda: blocks).text()
