"""Shrink a live workload that shows a finding, by re-running both sides.

The workload is cut into units (one synchronous operation, or a concurrent group with its
``wait``). What ran after the finding's operation cannot have caused it, so the first attempt
drops it (one run instead of the several halvings that would get there). Then the one shrinker
(``pcspec.core.shrink.shrink_list``) removes units while a fresh run still shows a finding of
the same class (delta debugging: halves, then quarters, ..., then single units), and the
requests left ask for one generated token. Requests that referred to a removed request lose
those segments (``ops.renumber``); a request left with no prompt is dropped. Every attempt is a
real run on a fresh server (each workload once), bounded in time and in attempts.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from pcspec.core.results import Finding
from pcspec.core.shrink import shrink_list
from pcspec.live.analyze import is_bug, is_observation
from pcspec.live.driver import Observation
from pcspec.live.ops import LiveOp, renumber, together
from pcspec.live.session import Outcome

Runner = Callable[[list[LiveOp], Path], Outcome]


def units(ops: list[LiveOp]) -> list[list[LiveOp]]:
    """The operations that run together (``ops.together``), a last concurrent group with its
    ``wait``."""
    out = [[ops[i] for i in g] for g in together(ops)]
    if out and out[-1][-1].is_async:
        out[-1].append(LiveOp("wait"))
    return out


def _flatten(us: list[list[LiveOp]]) -> list[LiveOp]:
    """The units as one workload: requests numbered 0..n-1, references to removed requests
    dropped, requests left without a prompt dropped (until nothing changes)."""
    ops = [op for u in us for op in u]
    while True:
        ops = renumber(ops)
        kept = [op for op in ops if op.op != "request" or op.segments]
        if len(kept) == len(ops):
            return ops
        ops = kept


def literal_ok(f: Finding) -> bool:
    """Whether the server shows ``f`` by itself (see ``shrink``'s ``sent``)."""
    return is_bug(f) or is_observation(f) or f.rule.startswith("logcheck:")


def same_class(cls: str) -> Callable[[Outcome], Finding | None]:
    def pred(o: Outcome) -> Finding | None:
        return next((f for f in o.analysis.findings if f.rule == cls), None)
    return pred


def through(us: list[list[LiveOp]], op: int) -> list[list[LiveOp]]:
    """The units up to the one holding operation index ``op`` of their concatenation."""
    seen = 0
    for i, u in enumerate(us):
        seen += len(u)
        if op < seen:
            return us[: i + 1]
    return us


def literal(ops: list[LiveOp], sent: list[Observation]) -> list[LiveOp]:
    """Every request of ``ops`` that ran with its prompt as the server received it, as literal
    tokens (``sent``: the run's observations, one per operation)."""
    out = list(ops)
    for obs in sent:
        if obs.index < len(out) and obs.op.op == "request" and out[obs.index] == obs.op:
            out[obs.index] = replace(obs.op, segments=(("lit", tuple(obs.tokens)),), cut=None)
    return out


def shrink(ops: list[LiveOp], runner: Runner, keep: Callable[[Outcome], Finding | None], workdir: Path,
           *, seconds: float = 180.0, max_attempts: int = 200, upto: int | None = None,
           sent: list[Observation] | None = None,
           log: Callable[[str], None] | None = None) -> tuple[list[LiveOp], Outcome | None, int]:
    """(smallest workload found, its outcome, attempts made). ``upto``: the index of the
    operation where the finding showed. Time is the bound that matters (every attempt is a
    server run); ``max_attempts`` only stops a runner that returns at once.

    ``sent`` (the observations of the run that showed the finding) makes the requests literal
    first: a request built from earlier prompts and replies loses its prompt when they are
    removed, so a chain of references keeps the whole chain; literal prompts let each request
    go on its own. Only for a finding the server shows by itself (a server bug, waste, the
    log checker): the model resolves references with its own replies, and literal copies of
    the server's replies would make it diverge where the server did nothing wrong."""
    deadline = time.monotonic() + seconds
    us = units(ops)
    best: Outcome | None = None
    attempts = 0
    tried: dict[tuple[LiveOp, ...], Outcome | None] = {}  # a candidate is run once

    def attempt(cand: list[list[LiveOp]]) -> bool:
        nonlocal best, attempts
        flat = _flatten(cand)
        key = tuple(flat)
        if key not in tried:
            attempts += 1
            out = runner(flat, workdir / f"attempt-{attempts:03d}")
            tried[key] = out if keep(out) is not None else None
            if log is not None:
                what = "kept" if tried[key] else "gone"
                log(f"  shrink attempt {attempts}: {sum(len(u) for u in cand)} ops -> {what}")
        kept = tried[key]
        if kept is not None:
            best = kept
        return kept is not None

    def fails(cand: list[list[LiveOp]]) -> bool:
        """``attempt`` within the budget; False once it is spent (which ends the shrink)."""
        return attempts < max_attempts and time.monotonic() <= deadline and attempt(cand)

    head = us if upto is None else through(us, upto)
    if sent is not None:
        flat = units(literal([op for u in head for op in u], sent))
        if attempt(flat):
            us = flat
    if len(head) < len(us) and attempt(head):
        us = head
    return _flatten(shrink_list(us, fails, _one_token)), best, attempts


def _one_token(u: list[LiveOp]) -> list[list[LiveOp]]:
    """A simpler unit: a lone request asking for one generated token."""
    if len(u) == 1 and u[0].op == "request" and u[0].n_predict > 1:
        return [[replace(u[0], n_predict=1)]]
    return []
