"""The prompt cache as bounded presence masks: up to N entries over K shared checkpoints.

Position ``i`` is the ``i``-th entry of ``server_prompt_cache::states`` (front first); an
absent position is a gap, so the FIFO order is the index order and an insertion goes to a
position after every present one. A *checkpoint* ``k`` is a payload of ``size[k]`` bytes
that the slot and any number of entries may hold (``refs[i][k]``): under ``shared_object``
the same object, under ``shared_payload`` objects sharing buffers. Under ``deep_copy`` an
entry holds its own copies, which no one else holds: their bytes are ``private[i]``.

Which bytes the cache *counts* is the accounting seam (``PromptCache.accounted_sizes``);
``unique`` is what it *holds*: data buffers and distinct checkpoint payloads, each once.
Every size is a symbolic integer.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import z3

from pcspec.model.design import Sharing
from pcspec.proofs.build import Build, Term
from pcspec.proofs.encoded import Encoded


@dataclass
class Cache:
    present: list[Term]
    main: list[Term]  # bytes of data.main (0: no buffer)
    drft: list[Term]
    main_full: list[Term]  # every byte of data.main was filled (RB-1)
    drft_full: list[Term]
    private: list[Term]  # bytes of this entry's own checkpoint copies (deep_copy)
    refs: list[list[Term]]  # refs[i][k]: entry i holds shared checkpoint k
    size: list[Term]  # bytes of checkpoint k
    slot: list[Term]  # the slot holds checkpoint k
    limit: Term  # limit_size (0: no byte limit)

    @property
    def n(self) -> int:
        return len(self.present)

    @property
    def k(self) -> int:
        return len(self.size)

    def with_present(self, present: list[Term]) -> Cache:
        return replace(self, present=present)

    def data(self, i: int) -> Term:
        return self.main[i] + self.drft[i] + self.private[i]


def fresh(b: Build, name: str, n: int, k: int) -> Cache:
    """A cache with every field a free constant; sizes are non-negative."""
    c = Cache(
        present=[b.bool(f"{name}.p{i}") for i in range(n)],
        main=[b.int(f"{name}.main{i}") for i in range(n)],
        drft=[b.int(f"{name}.drft{i}") for i in range(n)],
        main_full=[b.bool(f"{name}.main_full{i}") for i in range(n)],
        drft_full=[b.bool(f"{name}.drft_full{i}") for i in range(n)],
        private=[b.int(f"{name}.private{i}") for i in range(n)],
        refs=[[b.bool(f"{name}.r{i}_{j}") for j in range(k)] for i in range(n)],
        size=[b.int(f"{name}.s{j}") for j in range(k)],
        slot=[b.bool(f"{name}.h{j}") for j in range(k)],
        limit=b.int(f"{name}.limit"),
    )
    b.assume(c.limit >= 0, *(x >= 0 for x in (*c.main, *c.drft, *c.private, *c.size)))
    return c


def well_formed(b: Build, v: Encoded, c: Cache) -> Term:
    """What every cache of this design satisfies by construction: deep copies are private,
    shared checkpoints are never private bytes."""
    if v.sharing == Sharing.DEEP_COPY:
        return b.all(z3.Not(r) for row in c.refs for r in row)
    return b.all(p == 0 for p in c.private)


def empty(b: Build, name: str, n: int, k: int, limit: Term) -> Cache:
    """The cache at start: no entry, no checkpoint held."""
    zero, no = b.val(0), b.false
    return Cache(
        present=[no] * n,
        main=[zero] * n,
        drft=[zero] * n,
        main_full=[b.true] * n,
        drft_full=[b.true] * n,
        private=[zero] * n,
        refs=[[no] * k for _ in range(n)],
        size=[b.int(f"{name}.s{j}") for j in range(k)],
        slot=[no] * k,
        limit=limit,
    )


# -- what the cache holds --------------------------------------------------------------------


@dataclass
class Holdings:
    """What the entries from each position on hold, plus ``seen`` (the candidate's shared
    checkpoints): ``held[i][k]``, its bytes ``heldb[i][k]``, each position's data bytes
    ``data[i]`` and the unique bytes ``uniq[i]``; row ``n`` is ``seen`` alone. Every cell is
    a constant of its own (suffix ORs, suffix sums), so sums over them are linear."""

    seen: list[Term]
    seenb: list[Term]  # bytes of a seen checkpoint (0 if not seen)
    held: list[list[Term]]
    heldb: list[list[Term]]
    data: list[Term]
    uniq: list[Term]


def holdings(b: Build, name: str, c: Cache, seen: list[Term] | None = None) -> Holdings:
    """The holdings of ``c`` (memoized per cache object when ``seen`` is None, so that every
    property judging one state talks about the same constants as the bridges to it)."""
    if seen is None:
        known = b.recall(c)
        if isinstance(known, Holdings):
            return known
    base = seen if seen is not None else [b.false] * c.k
    held: list[list[Term]] = [list(base)]
    for i in range(c.n - 1, -1, -1):
        prev = held[0]
        held.insert(
            0, [b.bool(f"{name}.held{i}_{j}", z3.Or(prev[j], z3.And(c.present[i], c.refs[i][j]))) for j in range(c.k)]
        )
    heldb = [
        [b.int(f"{name}.heldb{i}_{j}", z3.If(row[j], c.size[j], 0)) for j in range(c.k)] for i, row in enumerate(held)
    ]
    if seen is None:
        seenb = [b.val(0)] * c.k
    else:
        seenb = [b.int(f"{name}.seenb{j}", z3.If(base[j], c.size[j], 0)) for j in range(c.k)]
    data = [b.int(f"{name}.data{i}", z3.If(c.present[i], c.data(i), 0)) for i in range(c.n)]
    uniq = [b.int(f"{name}.uniq{i}", b.sum(data[i:] + heldb[i])) for i in range(c.n + 1)]
    h = Holdings(base, seenb, held, heldb, data, uniq)
    if seen is None:
        b.remember(c, h)
    return h


def unique(b: Build, name: str, c: Cache) -> Term:
    """``unique_bytes(entries)``: distinct buffers reachable from the cache, each once."""
    return holdings(b, name, c).uniq[0]


# -- what the cache counts (the accounting seam) --------------------------------------------


def object_refs(b: Build, v: Encoded, c: Cache, k: int) -> Term:
    """``ck.refs`` of checkpoint k's object: its holders under ``shared_object``; otherwise
    every holder has an object of its own."""
    if v.sharing != Sharing.SHARED_OBJECT:
        return b.val(1)
    return z3.If(c.slot[k], 1, 0) + b.sum([z3.If(z3.And(c.present[i], c.refs[i][k]), 1, 0) for i in range(c.n)])


def accounted(b: Build, name: str, v: Encoded, c: Cache, h: Holdings) -> list[Term]:
    """``PromptCache.accounted_sizes(new_bufs)`` with ``new_bufs`` = ``h.seen``: each present
    entry's size as counted (0 for a gap). Unique accounting counts, for each entry, the
    checkpoints no later entry (and not the candidate) holds; per-holder counts all of them;
    the ``undercount`` mutant skips a checkpoint whose object has another holder.

    Each (entry, checkpoint) cell is a constant of its own. Under unique accounting two
    bridge facts per cell (``Build.bridge``, proved by the operation's lemma query) relate
    them linearly to ``once[i][k]``, the size of checkpoint k if someone from position i on
    holds it and the candidate does not (else 0): ``cell[i][k] = once[i][k] -
    once[i+1][k]`` and ``once[i][k] + seenb[k] = heldb[i][k]``. Each is local to one
    position; summed, they telescope into "accounted equals unique", which is then linear
    arithmetic. Without them the solver rediscovers it by case splits, exponentially in the
    number of checkpoints."""
    if v.accounting == "undercount":
        alone = [b.bool(f"{name}.alone{j}", object_refs(b, v, c, j) <= 1) for j in range(c.k)]
    cells: list[list[Term]] = []
    for i in range(c.n):
        row: list[Term] = []
        for j in range(c.k):
            counted = z3.And(c.present[i], c.refs[i][j])
            if v.accounting == "unique":
                counted = z3.And(counted, z3.Not(h.held[i + 1][j]))
            elif v.accounting == "undercount":
                counted = z3.And(counted, alone[j])
            row.append(b.int(f"{name}.cell{i}_{j}", z3.If(counted, c.size[j], 0)))
        cells.append(row)
    if v.accounting == "unique":
        for j in range(c.k):
            once = [
                b.int(f"{name}.once{i}_{j}", z3.If(z3.And(h.held[i][j], z3.Not(h.seen[j])), c.size[j], 0))
                for i in range(c.n + 1)
            ]
            b.bridge(once[c.n] == 0, group=j)
            for i in range(c.n):
                b.bridge(cells[i][j] + once[i + 1] == once[i], once[i] + h.seenb[j] == h.heldb[i][j], group=j)
    return [b.int(f"{name}.acc{i}", z3.If(c.present[i], c.data(i), 0) + b.sum(cells[i])) for i in range(c.n)]


def size(b: Build, name: str, v: Encoded, c: Cache) -> Term:
    """``server_prompt_cache::size()``: the sum of the accounted sizes."""
    return b.int(f"{name}.size", b.sum(accounted(b, name, v, c, holdings(b, name, c))))
