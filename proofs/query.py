"""A query: what one solver call checks, as SMT-LIB text that both solvers read.

Most queries are one script. A lemma query is several *blocks* (one per group of bridge
facts, each with only the facts its group depends on); it holds when every block is
``unsat``. Exported, the blocks are one file, each inside ``(push 1)`` / ``(pop 1)``.
Queries are built lazily: the text of one is built once, when it is first needed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pcspec.proofs.build import Build, Term


@dataclass
class Query:
    name: str
    make: Callable[[], list[str]]
    _blocks: list[str] | None = field(default=None, repr=False)

    def blocks(self) -> list[str]:
        if self._blocks is None:
            self._blocks = self.make()
        return self._blocks

    def text(self) -> str:
        """The exported form: one SMT-LIB 2 script."""
        blocks = self.blocks()
        if len(blocks) == 1:
            return blocks[0]
        out = [f"; pcspec lemma query {self.name}: {len(blocks)} blocks, each must be unsat", "(set-logic ALL)"]
        for blk in blocks:
            body = [ln for ln in blk.splitlines() if not ln.startswith(("(set-logic", "; pcspec"))]
            out += ["(push 1)", *body, "(pop 1)"]
        return "\n".join(out) + "\n"


def claim(name: str, build: Callable[[], tuple[Build, Term]]) -> Query:
    """A query whose ``unsat`` proves a claim: ``build`` returns the facts and the negated
    claim; any bridge the build assumed is proved in blocks of its own."""

    def make() -> list[str]:
        b, goal = build()
        return [b.smt2(goal), *b.lemma_blocks()]

    return Query(name, make)


def lemma(name: str, build: Callable[[], Build]) -> Query | None:
    """The lemma query of an operation: ``build`` runs it in lemma mode. None when the
    operation states no bridge."""
    b = build()
    if not b.bridges:
        return None
    blocks = b.lemma_blocks()
    return Query(name, lambda: blocks)
