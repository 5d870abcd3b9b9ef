"""Which variants each obligation runs against, and what each must give.

``fixed`` must be ``proved``. Every design the oracle (``properties/oracle.py``) expects to
violate the obligation's property, and every mutant built to be caught by it, is its paired
buggy variant: there a counterexample must be found and replayed. Other variants can be run
by name; their expectation is the oracle's (``.`` proved, ``x`` counterexample; none for a
cell the oracle leaves open); a variant of the user's must be proved for every obligation
except those whose property its author declared violated (``oracle.expected``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from pcspec.model.design import Design
from pcspec.model.designs import DESIGNS
from pcspec.proofs.obligations import OBLIGATIONS, Obligation
from pcspec.properties.mutants import MUTANTS
from pcspec.properties.oracle import MUTANT_TARGETS, ORACLE, expected

PROVED, COUNTEREXAMPLE, UNKNOWN = "proved", "counterexample", "unknown"
# A design that runs code the encodings do not know where the obligation depends on it
# (pcspec.proofs.encoded): counted like unknown, never a pass.
NOT_COVERED = "not covered"


@dataclass(frozen=True)
class Pair:
    obligation: Obligation
    variant: Design
    expected: str | None  # PROVED | COUNTEREXAMPLE | None (no expectation)


def expectation(ob: Obligation, v: Design, declared: Collection[str] = ()) -> str | None:
    return {"x": COUNTEREXAMPLE, ".": PROVED}.get(expected(v.name, ob.target, declared))


def paired(ob: Obligation) -> list[Design]:
    """``fixed`` first, then the designs and mutants expected to violate the property."""
    out = [DESIGNS["fixed"]]
    out += [v for n, v in DESIGNS.items() if ORACLE.get(n, {}).get(ob.target) == "x"]
    out += [v for n, v in MUTANTS.items() if ob.target in MUTANT_TARGETS.get(n, ())]
    return out


def suite(
    obligations: tuple[Obligation, ...] = OBLIGATIONS,
    variants: list[Design] | None = None,
    declared: Mapping[str, Collection[str]] | None = None,
) -> list[Pair]:
    """The default suite (each obligation with ``fixed`` and its paired buggy variants), or
    each obligation against the given variants (``declared``: variant name -> the violations
    a variant of the user's is meant to show)."""
    out: list[Pair] = []
    for ob in obligations:
        for v in variants if variants is not None else paired(ob):
            out.append(Pair(ob, v, expectation(ob, v, (declared or {}).get(v.name, ()))))
    return out
