"""Long walker campaigns: seed ranges split over worker processes, results merged.

A campaign walks the example seeds ``A..B-1`` of one variant (``pcspec.engines.walker``: example seed
``s`` is one configuration, one swarm, one walk), judging the chosen properties after every
model operation, nothing failing (a survey). The range is cut into one contiguous block per
worker by the one campaign runner (``pcspec.core.campaign``, which live campaigns use too); a
worker walks its block in order and stops between two examples once the time cap passes, so
what it covered is always a prefix of its block, and every covered example ran whole.

Per property a worker keeps the ``keep`` shortest first-violation traces it met, ranked by
(operations, example seed). Merging keeps the ``keep`` best of the union, which are the
``keep`` best of the whole range whatever the split (the best of a union are among the best of
its parts), then shrinks each (``pcspec.core.shrink``) and reports the shortest shrunk trace, ties
to the lower example seed. So a campaign's result is a function of (variant, properties, the
seeds covered, steps, keep): one process, N processes or N machines whose results are merged
with ``--merge`` give the same JSON (timings aside).

A property no covered example violated ``holds`` after the steps examined when every seed of
the range was covered, and is ``unknown`` when the time cap left some out (never a pass). A
block whose worker process died (``pcspec.core.pool``) covered nothing: it is named in ``lost``,
and the properties it might have violated are unknown too.
"""

from __future__ import annotations

import bisect
import functools
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pcspec.core.campaign import Lost, cover, join_disjoint, joined, run_blocks
from pcspec.core.errors import PcspecError
from pcspec.core.trace import Trace, parse
from pcspec.engines.walker import STEPS, Walker
from pcspec.model.designs import current_name, get_design
from pcspec.properties.catalogue import CATALOGUE, get_property
from pcspec.properties.judge import shrink_trace as shrink
from pcspec.properties.judge import write_counterexample

SCHEMA = 1
KIND = "pcspec-campaign"


@dataclass(frozen=True)
class Spec:
    """What a campaign is: everything its result depends on, except the seeds."""

    variant: str
    properties: tuple[str, ...]
    steps: int = STEPS  # rules per example at most (the walker's ``steps``)
    keep: int = 3  # traces kept per property for the final shrink

    def to_json(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "properties": list(self.properties),
            "rules_per_example": self.steps,
            "keep": self.keep,
        }

    @staticmethod
    def of(variant: str, properties: Sequence[str] | None, steps: int = STEPS, keep: int = 3) -> Spec:
        pids = [get_property(p).id for p in properties] if properties else [p.id for p in CATALOGUE]
        return Spec(get_design(variant).name, tuple(pids), steps, keep)


@dataclass(order=True, frozen=True)
class Candidate:
    """A first violation of one property in one example, ranked by (length, seed)."""

    length: int
    seed: int
    trace: str = field(compare=False)  # the trace file's text (Trace.dumps)


@dataclass
class Part:
    """What one worker (or one merged campaign) covered and found."""

    covered: list[tuple[int, int]] = field(default_factory=list)  # [start, stop) ranges, sorted
    examples: int = 0
    steps: int = 0
    seconds: float = 0.0  # worker seconds, summed over workers
    candidates: dict[str, list[Candidate]] = field(default_factory=dict)  # best first, at most keep
    lost: list[str] = field(default_factory=list)  # the blocks whose worker died, each a message

    def wants(self, pid: str, length: int, seed: int, keep: int) -> bool:
        """Whether a candidate ranked (length, seed) would be kept (checked before its trace
        is written out: most first violations of a long campaign are not)."""
        best = self.candidates.get(pid, [])
        return len(best) < keep or (length, seed) < (best[-1].length, best[-1].seed)

    def offer(self, pid: str, cand: Candidate, keep: int) -> None:
        if not self.wants(pid, cand.length, cand.seed, keep):
            return
        best = self.candidates.setdefault(pid, [])
        bisect.insort(best, cand)
        del best[keep:]

    def absorb(self, other: Part, keep: int) -> None:
        self.covered = join_disjoint(self.covered, other.covered)
        self.examples += other.examples
        self.steps += other.steps
        self.seconds += other.seconds
        self.lost += other.lost
        for pid, cands in other.candidates.items():
            for c in cands:
                self.offer(pid, c, keep)


def walk_block(spec: Spec, start: int, stop: int, deadline: float) -> Part:
    """One worker: example seeds ``start..stop-1`` in order, until ``deadline`` (time.time())."""
    variant = get_design(spec.variant)
    walker = Walker(variant, [get_property(p) for p in spec.properties])
    part = Part()
    t0 = time.monotonic()

    def example(seed: int) -> int:
        fuzz = walker.example(seed, spec.steps).fuzz
        part.examples += 1
        part.steps += fuzz.judged
        for pid, (v, ops, cfg) in fuzz.first.items():
            if part.wants(pid, len(ops), seed, spec.keep):
                expect = [{"property": pid, "op": v.op, "message": v.message}]
                text = Trace(variant, cfg, list(ops), seed, expect).dumps()
                part.offer(pid, Candidate(len(ops), seed, text), spec.keep)
        return seed + 1

    part.covered = joined([(start, cover(start, stop, deadline, example))])
    part.seconds = time.monotonic() - t0
    return part


def run(spec: Spec, start: int, stop: int, workers: int, seconds: float) -> Part:
    """Walk ``[start, stop)`` on ``workers`` processes (in this one when 1) for at most
    ``seconds``; the merged part."""
    if stop <= start:
        raise PcspecError(f"empty seed range {start}:{stop}")
    out = Part()
    for p in run_blocks(functools.partial(walk_block, spec), start, stop, workers, seconds):
        out.absorb(Part(lost=[p.message]) if isinstance(p, Lost) else p, spec.keep)
    return out


@dataclass
class Verdict:
    property: str
    verdict: str  # violated | holds | unknown
    trace: Trace | None = None  # shrunk
    seed: int | None = None
    message: str | None = None


def _shrunk(spec: Spec, pid: str, cand: Candidate) -> Trace:
    return shrink(parse(cand.trace, f"<example seed {cand.seed}>", get_design(spec.variant)), pid)


def verdicts(spec: Spec, part: Part, requested: tuple[int, int]) -> list[Verdict]:
    """Per property: violated (the shortest shrunk trace of the kept ones, ties to the lower
    seed), holds (every requested seed covered), or unknown."""
    complete = part.covered == [requested]
    out: list[Verdict] = []
    for pid in spec.properties:
        cands = part.candidates.get(pid, [])
        if not cands:
            out.append(Verdict(pid, "holds" if complete else "unknown"))
            continue
        shrunk = [(len(t.ops), c.seed, t) for c in cands for t in [_shrunk(spec, pid, c)]]
        _n, seed, trace = min(shrunk, key=lambda x: (x[0], x[1]))
        message = trace.expect[0]["message"] if trace.expect else None
        out.append(Verdict(pid, "violated", trace, seed, message))
    return out


def to_json(spec: Spec, requested: tuple[int, int], part: Part) -> dict[str, Any]:
    """The mergeable record of a campaign (its candidates included)."""
    return {
        "schema": SCHEMA,
        "kind": KIND,
        **spec.to_json(),
        "seeds": {"requested": list(requested), "covered": [list(r) for r in part.covered]},
        "examples": part.examples,
        "steps": part.steps,
        "seconds": round(part.seconds, 3),
        "candidates": {
            pid: [{"length": c.length, "seed": c.seed, "trace": c.trace} for c in cands]
            for pid, cands in sorted(part.candidates.items())
        },
        # (only when a worker died: a record of a whole run reads as it always has)
        **({"lost": list(part.lost)} if part.lost else {}),
    }


def from_json(data: Any, where: str) -> tuple[Spec, tuple[int, int], Part]:
    if not isinstance(data, dict) or data.get("kind") != KIND or data.get("schema") != SCHEMA:
        raise PcspecError(f'not a pcspec campaign record (expected "kind": "{KIND}", "schema": {SCHEMA})', where)
    try:
        # (a record written before a design was renamed names it by its old name: master)
        spec = Spec(current_name(data["variant"]), tuple(data["properties"]), int(data["rules_per_example"]),
                    int(data["keep"]))
        req = data["seeds"]["requested"]
        part = Part(
            [(int(a), int(b)) for a, b in data["seeds"]["covered"]],
            int(data["examples"]),
            int(data["steps"]),
            float(data["seconds"]),
            {
                pid: [Candidate(int(c["length"]), int(c["seed"]), str(c["trace"])) for c in cands]
                for pid, cands in data["candidates"].items()
            },
            [str(x) for x in data.get("lost", [])],
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise PcspecError(f"malformed campaign record ({exc!r})", where) from None
    return spec, (int(req[0]), int(req[1])), part


def write(out: Path, spec: Spec, requested: tuple[int, int], part: Part, results: list[Verdict]) -> dict[str, Any]:
    """Write the record (``campaign.json``) and one trace file per violated property."""
    out.mkdir(parents=True, exist_ok=True)
    record = to_json(spec, requested, part)
    rows = []
    for r in results:
        row: dict[str, Any] = {"property": r.property, "verdict": r.verdict}
        if r.trace is not None:
            stem = f"{spec.variant.replace(':', '-')}__{r.property}"
            path = write_counterexample(r.trace, out, stem)
            row |= {"seed": r.seed, "length": len(r.trace.ops), "trace": str(path), "message": r.message}
        rows.append(row)
    record["results"] = rows
    (out / "campaign.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return record
