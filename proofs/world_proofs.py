"""The proof queries of the IMM and UNINIT obligations: an inductive invariant, checked once
per operation, over worlds of any size.

For an invariant ``I`` and property ``P``: the server at start satisfies ``I`` (``init``);
``I`` implies ``P`` (``implies``); and for every operation that touches checkpoints or
cache entries, a world satisfying ``I`` steps to one that does too, unless the process died
(one query each; all inputs free, the new objects fresh). UNINIT-2 adds one query per read
(a load, a checkpoint restore, a slot-file write): from ``I`` no read meets an unwritten
byte.
"""

from __future__ import annotations

from collections.abc import Callable

import z3

from pcspec.model.design import Sharing
from pcspec.proofs import world_ops as ops
from pcspec.proofs.build import Build, Term
from pcspec.proofs.encoded import Encoded
from pcspec.proofs.query import Query, claim
from pcspec.proofs.world import Sorts, World, fresh, initial, sorts

Formula = Callable[[Build, Sorts, World], Term]


def operations(v: Encoded) -> tuple[str, ...]:
    copy = () if v.sharing == Sharing.SHARED_OBJECT else ("entry_copy",)
    return ("create", "create_short", "drop", "clear", "entry_build", *copy, "entry_publish", "load", "evict")


def _step(b: Build, v: Encoded, so: Sorts, w: World, op: str) -> ops.Did:
    def h(n: str) -> Term:
        return b.const(n, so.H)

    def c(n: str) -> Term:
        return b.const(n, so.C)

    def buf(n: str) -> Term:
        return b.const(n, so.B)

    if op in ("create", "create_short"):
        return ops.create(
            b, v, w, h("s"), c("c"), buf("buf"), b.int("meta"), op == "create", c("victim"), b.bool("has_victim")
        )
    if op == "drop":
        return ops.drop(b, w, h("s"), c("c"))
    if op == "clear":
        return ops.clear(b, so, w, h("s"))
    if op == "entry_build":
        return ops.entry_build(
            b,
            v,
            so,
            w,
            h("s"),
            h("e"),
            buf("main"),
            buf("drft"),
            b.bool("has_drft"),
            b.bool("ok_main"),
            b.bool("ok_drft"),
        )
    if op == "entry_copy":
        return ops.entry_copy(b, v, w, h("s"), h("e"), c("c"), c("x"), buf("xb"))
    if op == "entry_publish":
        return ops.entry_publish(b, v, so, w, h("e"))
    if op == "load":
        return ops.load(b, v, so, w, h("e"), h("s"), b.bool("fail_tgt"), b.bool("fail_dft"))
    if op == "evict":
        return ops.evict(b, so, w, h("e"))
    if op == "restore":
        return ops.restore(b, w, h("s"), c("c"))
    return ops.file_write(b, w, h("s"), c("c"))


def invariant(v: Encoded, inv: Formula, prop: Formula) -> list[Query]:
    """``init``, ``implies`` and one query per operation (see the module docstring)."""

    def base() -> tuple[Build, Term]:
        b = Build(f"{v.name} init")
        so = sorts(b)
        return b, z3.Not(inv(b, so, initial(b, so, [b.const("slot", so.H)])))

    def implies() -> tuple[Build, Term]:
        b = Build(f"{v.name} implies")
        so = sorts(b)
        w = fresh(b, "w", so)
        return b, z3.And(inv(b, so, w), z3.Not(prop(b, so, w)))

    out = [claim("init", base), claim("implies", implies)]
    for op in operations(v):

        def step(op: str = op) -> tuple[Build, Term]:
            b = Build(f"{v.name} {op}")
            so = sorts(b)
            pre = fresh(b, "pre", so)
            b.assume(inv(b, so, pre))
            post = _step(b, v, so, pre, op).world
            return b, z3.And(z3.Not(post.crash), z3.Not(inv(b, so, post)))

        out.append(claim(op, step))
    return out


def reads(v: Encoded, inv: Formula) -> list[Query]:
    """UNINIT-2's reads: from a world satisfying ``inv``, none meets an unwritten byte."""
    out = []
    for op in ("load", "restore", "file_write"):

        def read(op: str = op) -> tuple[Build, Term]:
            b = Build(f"{v.name} read {op}")
            so = sorts(b)
            pre = fresh(b, "pre", so)
            b.assume(inv(b, so, pre))
            return b, _step(b, v, so, pre, op).unwritten_read

        out.append(claim(f"read:{op}", read))
    return out
