"""Which variants each obligation runs against, and what each must give.

``fixed`` must be ``proved``. Every design the oracle (``properties/oracle.py``) expects to
violate the obligation's property, and every mutant built to be caught by it, is its paired
buggy variant: there a counterexample must be found and replayed. Other variants can be run
by name; their expectation is the oracle's (``.`` proved, ``x`` counterexample) or none.
"""

from __future__ import annotations

from dataclasses import dataclass

from pcspec.model.variants import DESIGNS, MUTANTS, Variant
from pcspec.proofs.obligations import OBLIGATIONS, Obligation
from pcspec.properties.oracle import MUTANT_TARGETS, ORACLE

PROVED, COUNTEREXAMPLE, UNKNOWN = "proved", "counterexample", "unknown"


@dataclass(frozen=True)
class Pair:
    obligation: Obligation
    variant: Variant
    expected: str | None  # PROVED | COUNTEREXAMPLE | None (no expectation)


def expectation(ob: Obligation, v: Variant) -> str | None:
    if v.name in ORACLE:
        mark = ORACLE[v.name].get(ob.target, "?")
        return {"x": COUNTEREXAMPLE, ".": PROVED}.get(mark)
    if ob.target in MUTANT_TARGETS.get(v.name, ()):
        return COUNTEREXAMPLE
    return None


def paired(ob: Obligation) -> list[Variant]:
    """``fixed`` first, then the designs and mutants expected to violate the property."""
    out = [DESIGNS["fixed"]]
    out += [v for n, v in DESIGNS.items() if ORACLE.get(n, {}).get(ob.target) == "x"]
    out += [v for n, v in MUTANTS.items() if ob.target in MUTANT_TARGETS.get(n, ())]
    return out


def suite(obligations: tuple[Obligation, ...] = OBLIGATIONS, variants: list[Variant] | None = None) -> list[Pair]:
    """The default suite (each obligation with ``fixed`` and its paired buggy variants), or
    each obligation against the given variants."""
    out: list[Pair] = []
    for ob in obligations:
        for v in variants if variants is not None else paired(ob):
            out.append(Pair(ob, v, expectation(ob, v)))
    return out
