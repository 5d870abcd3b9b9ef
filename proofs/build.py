"""Where one query is built: its own Z3 context, fresh names, and the facts asserted so far.

Every intermediate value of an encoding gets a fresh constant with a defining equality
(``Build.int("total", expr)``) instead of being nested into the next term: the C++ loops
are unrolled, and nested terms made the same queries about 100 times slower. Names are
readable (``s2.room.pop3``) because a counterexample is read back by name, and because the
exported SMT-LIB text is what a second solver and a person look at.

A ``Build`` owns a private ``z3.Context``: nothing leaks between queries, and the text of a
query does not depend on what was built before it.

Bridges. Some facts follow from the definitions but a solver finds them only by case splits,
exponentially in the number of checkpoints (that the bytes one checkpoint column counts add
up to what it holds, for instance). An encoding states them with ``bridge``: a normal build
assumes them; a build in *lemma mode* (same code, same inputs) collects them instead, and its
lemma query proves them. Each group of bridges (one checkpoint column, say) is proved in a
block of its own holding only the definitions the group depends on (its cone of influence):
dropping facts can only make a block easier to satisfy, so an ``unsat`` block is a proof.
"""

from __future__ import annotations

import builtins
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import z3

Term = Any  # a z3 expression (z3 ships no type information)
# (facts, bridges, definitions, memo, names used): a Build as it was (``Build.mark``)
Mark = tuple[int, int, dict[str, Term], dict[int, tuple[object, object]], Counter[str]]


class Build:
    """The constants and facts of one query (see the module docstring)."""

    def __init__(self, name: str, lemma_mode: bool = False) -> None:
        self.name = name
        self.ctx = z3.Context()
        self.facts: list[Term] = []
        self.lemma_mode = lemma_mode
        self.bridges: list[tuple[object, Term]] = []  # (group, fact), in the order stated
        self.memo: dict[int, tuple[object, object]] = {}
        self._used: Counter[str] = Counter()
        self._defs: dict[str, Term] = {}  # constant name -> its defining fact
        self._deps = _Constants(self.ctx)

    # -- constants -------------------------------------------------------------------------

    def _fresh(self, name: str) -> str:
        n = self._used[name]
        self._used[name] += 1
        return name if n == 0 else f"{name}.{n}"

    def _define(self, c: Term, value: Term | builtins.int | builtins.bool | None) -> Term:
        if value is not None:
            fact = c == value
            self.facts.append(fact)
            self._defs[c.decl().name()] = fact
        return c

    def int(self, name: str, value: Term | int | None = None) -> Term:
        """A fresh integer constant, equal to ``value`` when one is given."""
        return self._define(z3.Int(self._fresh(name), self.ctx), value)

    def bool(self, name: str, value: Term | bool | None = None) -> Term:
        """A fresh Boolean constant, equal to ``value`` when one is given."""
        return self._define(z3.Bool(self._fresh(name), self.ctx), value)

    def const(self, name: str, sort: Term) -> Term:
        return z3.Const(self._fresh(name), sort)

    def sort(self, name: str) -> Term:
        """An uninterpreted sort: as many elements as any model likes."""
        return z3.DeclareSort(name, self.ctx)

    # -- values and connectives in this context ---------------------------------------------

    def val(self, v: builtins.int | builtins.bool) -> Term:
        return z3.BoolVal(v, self.ctx) if isinstance(v, bool) else z3.IntVal(v, self.ctx)

    @property
    def true(self) -> Term:
        return z3.BoolVal(True, self.ctx)

    @property
    def false(self) -> Term:
        return z3.BoolVal(False, self.ctx)

    def all(self, terms: Iterable[Term]) -> Term:
        ts = list(terms)
        return z3.And(*ts) if ts else self.true

    def any(self, terms: Iterable[Term]) -> Term:
        ts = list(terms)
        return z3.Or(*ts) if ts else self.false

    def sum(self, terms: Sequence[Term]) -> Term:
        # (+ x) with one argument is Z3's, not SMT-LIB that cvc5 reads
        if len(terms) == 1:
            return terms[0] + 0 if isinstance(terms[0], int) else terms[0]
        return z3.Sum(*terms) if terms else self.val(0)

    # -- facts -----------------------------------------------------------------------------

    def assume(self, *facts: Term) -> None:
        for f in facts:
            # Top-level conjunctions split, so that a lemma block can take the parts it needs.
            self.facts.extend(f.children() if z3.is_and(f) else [f])

    def bridge(self, *facts: Term, group: object = 0) -> None:
        """Facts that follow from the definitions (see the module docstring): recorded under
        ``group`` to be proved (``lemma_blocks``) and, unless in lemma mode, assumed."""
        self.bridges.extend((group, f) for f in facts)
        if not self.lemma_mode:
            self.facts.extend(facts)

    def mark(self) -> Mark:
        """The build as it is now: ``restore`` forgets everything added since. One operation
        is built once and each claim about it added, serialized and forgotten in turn, so a
        query's text does not depend on which other claims were built before it."""
        return len(self.facts), len(self.bridges), dict(self._defs), dict(self.memo), Counter(self._used)

    def restore(self, mark: Mark) -> None:
        n, nb, defs, memo, used = mark
        del self.facts[n:]
        del self.bridges[nb:]
        self._defs, self.memo, self._used = defs, memo, used

    def remember(self, key: object, value: object) -> None:
        self.memo[id(key)] = (key, value)

    def recall(self, key: object) -> object | None:
        hit = self.memo.get(id(key))
        return hit[1] if hit is not None and hit[0] is key else None

    # -- the query -------------------------------------------------------------------------

    def smt2(self, goal: Term) -> str:
        """The facts and ``goal`` as an SMT-LIB 2 script (``unsat`` means the goal, the
        negation of a claim, is impossible). Both solvers read this exact text."""
        return _script(self.name, self.facts, goal)

    def lemma_blocks(self, start: builtins.int = 0) -> list[str]:
        """One script per group of the bridges stated from the ``start``-th on, each holding
        the negated group and the facts in its cone of influence -- never a bridge: each
        group is proved from the definitions alone. All ``unsat``: every bridge holds."""
        groups: dict[object, list[Term]] = {}
        for group, fact in self.bridges[start:]:
            groups.setdefault(group, []).append(fact)
        out: list[str] = []
        for group, facts in groups.items():
            goal = z3.Not(self.all(facts))
            out.append(_script(f"{self.name} [{group}]", self._cone(goal), goal))
        return out

    def _cone(self, goal: Term) -> list[Term]:
        """The definitions the goal depends on (transitively), and every other fact all of
        whose constants are among them."""
        deps = self._deps
        cone: set[str] = set()
        todo = list(deps.of(goal))
        while todo:
            c = todo.pop()
            if c in cone:
                continue
            cone.add(c)
            d = self._defs.get(c)
            if d is not None:
                todo.extend(deps.of(d.arg(1)) - cone)
        every_def = {id(d) for d in self._defs.values()}
        bridges = {id(f) for _, f in self.bridges}
        used = {id(d) for name, d in self._defs.items() if name in cone}
        return [
            f
            for f in self.facts
            if id(f) in used or (id(f) not in every_def and id(f) not in bridges and deps.of(f) <= cone)
        ]


class _Constants:
    """Uninterpreted constants of terms, memoized by AST id (terms share subterms). Walks the
    raw AST through the C API: the Python wrappers cost ten times more per node."""

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx.ref()
        self._memo: dict[int, frozenset[str]] = {}
        self._alive: list[Term] = []

    def of(self, t: Term) -> frozenset[str]:
        # The memo is keyed by AST id, and Z3 reuses the id of a freed AST: every term
        # walked is kept alive as long as the memo is.
        self._alive.append(t)
        return self._of(t.as_ast())

    def _of(self, a: Any) -> frozenset[str]:
        c = self._ctx
        key = z3.Z3_get_ast_id(c, a)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        kind = z3.Z3_get_ast_kind(c, a)
        out: frozenset[str] = frozenset()
        if kind == z3.Z3_APP_AST:
            n = z3.Z3_get_app_num_args(c, a)
            if n == 0:
                d = z3.Z3_get_app_decl(c, a)
                if z3.Z3_get_decl_kind(c, d) == z3.Z3_OP_UNINTERPRETED:
                    out = frozenset([z3.Z3_get_symbol_string(c, z3.Z3_get_decl_name(c, d))])
            else:
                out = frozenset().union(*(self._of(z3.Z3_get_app_arg(c, a, i)) for i in range(n)))
        elif kind == z3.Z3_QUANTIFIER_AST:
            out = self._of(z3.Z3_get_quantifier_body(c, a))
        self._memo[key] = out
        return out


def _script(name: str, facts: list[Term], goal: Term) -> str:
    s = z3.Solver(ctx=goal.ctx)
    s.add(*facts)
    s.add(goal)
    return f"; pcspec query {name}\n(set-logic ALL)\n{s.to_smt2()}"
