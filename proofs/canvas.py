"""The canvas: the one concrete setting every counterexample is searched in and replayed on.

One slot, recurrent memory (every state and every checkpoint is ``STATE_HEADER + rs_bytes``
bytes, plus ``STATE_HEADER + draft_rs_bytes`` with a draft), ``--slot-prompt-similarity 0`` (so every request is an
LRU pick that first saves the slot's prompt to the cache, then tries a load), ``n_predict`` 1
(the slot ends holding exactly the prompt), batches of 16 with micro-batches of 4 (so each
request creates exactly one checkpoint, 4 tokens before its end), a checkpoint spacing of 4
with prompts growing by 10 (so the spacing sweep never fires).

A request is one of four moves, each a prompt built from the slot's last prompt ``T``:

* ``new``: 10 fresh tokens (every checkpoint is invalidated);
* ``extend``: ``T`` + 10 fresh tokens (the slot resumes from its memory, keeps its list);
* ``fork``: ``T`` cut right after its oldest checkpoint, + 10 fresh tokens (that checkpoint
  is restored and kept, the later ones invalidated; the saved ``T`` is not a prefix);
* ``back(a)``: the prompt of step ``a`` + 10 fresh tokens (the cache entry saved from step
  ``a`` is loaded, if it is still there);

optionally preceded by a fault armed at one site. What a move does to the cache and the
checkpoints is encoded by the searches (``search_cache``, ``search_world``) with the same
builders the proofs use; what it does in the model is what ``realize`` writes as a trace.
The two must agree: ``pcspec.proofs.replay`` replays every trace and judges it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import z3

from pcspec.core import ops
from pcspec.core.loop import Driver
from pcspec.core.trace import Trace
from pcspec.model.config import STATE_HEADER, Config, MemoryKind
from pcspec.model.design import Design
from pcspec.model.server import Server
from pcspec.proofs import cache_ops
from pcspec.proofs.build import Build, Term

MOVES = ("new", "extend", "fork", "back")
NEW, EXTEND, FORK, BACK = range(4)
# Fault sites by code: the save's (pcspec.proofs.cache_ops.FAULTS), then the load's.
FAULTS = (*cache_ops.FAULTS, "load.write.tgt", "load.write.dft")
LOAD_TGT, LOAD_DFT = 6, 7
GROWTH = 10  # fresh tokens per request
FIRST_TOKEN = 100


@dataclass
class Controls:
    """The search's choices, as named constants (a model is read back by these names)."""

    kind: list[Term]  # per step (step 0 is always ``new``)
    back: list[Term]  # the step a ``back`` move returns to
    fault: list[Term]
    draft: Term
    rs: Term
    draft_rs: Term
    cap: Term
    limit: Term  # the byte limit (0: none, ``--cache-ram -1``)

    def tgt(self) -> Term:
        """``llama_state_seq_get_size_ext`` of the target (full or partial: recurrent)."""
        return STATE_HEADER + self.rs

    def dft(self) -> Term:
        return z3.If(self.draft, STATE_HEADER + self.draft_rs, 0)


def controls(
    b: Build, depth: int, moves: tuple[int, ...], faults: tuple[int, ...], limit: bool, cap: int | None
) -> Controls:
    """Free choices for ``depth`` requests after the first, within the given moves and
    faults; sizes small enough to read (and symbolic: any solution is realizable)."""
    c = Controls(
        kind=[b.int(f"kind.{t}") for t in range(depth + 1)],
        back=[b.int(f"back.{t}") for t in range(depth + 1)],
        fault=[b.int(f"fault.{t}") for t in range(depth + 1)],
        draft=b.bool("draft"),
        rs=b.int("rs"),
        draft_rs=b.int("draft_rs"),
        cap=b.int("cap"),
        limit=b.int("limit"),
    )
    b.assume(c.kind[0] == NEW, c.fault[0] == 0, c.back[0] == 0)
    for t in range(1, depth + 1):
        b.assume(b.any(c.kind[t] == m for m in moves), b.any(c.fault[t] == f for f in faults))
        b.assume(z3.Implies(c.kind[t] == BACK, z3.And(c.back[t] >= 0, c.back[t] <= t - 2)))
        b.assume(z3.Implies(c.kind[t] != BACK, c.back[t] == 0))
    b.assume(c.rs >= 1, c.rs <= 4096, c.draft_rs >= 1, c.draft_rs <= 4096, c.limit >= 0, c.limit <= 1 << 20)
    if not limit:
        b.assume(c.limit == 0)
    b.assume(c.cap == cap if cap is not None else z3.And(c.cap >= 1, c.cap <= 3))
    return c


def ancestry(b: Build, ctl: Controls, depth: int) -> list[list[Term]]:
    """``anc[a][t]``: the prompt of step ``a`` is a prefix of the prompt of step ``t`` -- the
    request of ``t`` extended step ``t - 1``'s or went back to step ``a``'s (a ``back``
    prompt is built from step ``a``'s even when the load fails), transitively. ``new`` and
    ``fork`` prompts extend nothing saved: a fork's stem is shorter than any earlier prompt
    of its line."""
    anc = [[b.false] * (depth + 1) for _ in range(depth + 1)]
    for t in range(1, depth + 1):
        ext, back = ctl.kind[t] == EXTEND, ctl.kind[t] == BACK
        for a in range(t):
            via_ext = z3.And(ext, b.val(True) if a == t - 1 else anc[a][t - 1])
            via_back = z3.And(
                back, b.any(z3.And(ctl.back[t] == x, b.val(True) if x == a else anc[a][x]) for x in range(a, t - 1))
            )
            anc[a][t] = b.bool(f"anc{a}.{t}", z3.Or(via_ext, via_back))
    return anc


@dataclass
class Move:
    kind: str
    fault: str = "none"
    back: int = 0


@dataclass
class Plan:
    """A counterexample as the canvas realizes it."""

    draft: bool
    rs: int
    draft_rs: int
    cap: int
    limit: int
    moves: list[Move] = field(default_factory=list)

    @classmethod
    def from_model(cls, values: dict[str, Any], depth: int) -> Plan:
        def num(name: str, default: int = 0) -> int:
            v = values.get(name, default)
            return int(v) if isinstance(v, int | bool) else default

        return cls(
            draft=bool(values.get("draft", False)),
            rs=num("rs", 1),
            draft_rs=num("draft_rs", 1),
            cap=num("cap", 1),
            limit=num("limit"),
            moves=[
                Move(MOVES[num(f"kind.{t}")], FAULTS[num(f"fault.{t}")], num(f"back.{t}")) for t in range(depth + 1)
            ],
        )

    def describe(self) -> str:
        steps = []
        for m in self.moves:
            s = m.kind + (f"({m.back})" if m.kind == "back" else "")
            steps.append(s + (f" [{m.fault}]" if m.fault != "none" else ""))
        limit = f"cache_ram {self.limit}" if self.limit else "no byte limit"
        draft = f", draft rs {self.draft_rs}" if self.draft else ""
        return f"{', '.join(steps)} (rs {self.rs}{draft}, {limit}, cap {self.cap})"


def config(plan: Plan) -> Config:
    return Config(
        n_slots=1,
        n_ctx_slot=1024,
        n_batch=16,
        n_ubatch=4,
        memory=MemoryKind.RECURRENT,
        rs_bytes=plan.rs,
        has_draft=plan.draft,
        draft_memory=MemoryKind.RECURRENT,
        draft_rs_bytes=plan.draft_rs,
        n_ctx_checkpoints=plan.cap,
        checkpoint_min_step=4,
        cache_ram=plan.limit if plan.limit > 0 else -1,
        slot_prompt_similarity=0.0,
    ).validate()


def realize(plan: Plan, variant: Design) -> Trace:
    """The plan as a trace of ``pcspec.core.ops``. The prompts depend on where the slot's
    oldest checkpoint is (a fork cuts there), so the trace is written while a model server
    runs it; the trace is then replayed from scratch by the caller, which judges it."""
    cfg = config(plan)
    model = Driver(Server(cfg, variant))  # (the one loop: the ops it runs are the trace's)
    srv = model.server
    prompts: list[tuple[int, ...]] = []
    fresh = iter(range(FIRST_TOKEN, 1_000_000))

    def grow() -> tuple[int, ...]:
        return tuple(next(fresh) for _ in range(GROWTH))

    for m in plan.moves:
        slot = srv.slots[0]
        last = prompts[-1] if prompts else ()
        if m.kind == "extend":
            prompt = last + grow()
        elif m.kind == "fork" and slot.prompt.checkpoints:
            prompt = last[: slot.prompt.checkpoints[0].n_tokens] + grow()
        elif m.kind == "back" and m.back < len(prompts):
            prompt = prompts[m.back] + grow()
        else:
            prompt = grow()
        step: list[ops.Operation] = []
        if m.fault != "none":
            step.append(ops.Inject(m.fault))
        step.append(ops.Request(tuple(prompt), 1))
        step.append(ops.Run(100))
        for op in step:
            model.apply(op)
        prompts.append(prompt)
    return Trace(variant, cfg, model.ops)
