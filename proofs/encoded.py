"""What the Z3 encodings can say of a design, and what they cannot.

The encodings (``cache_*``, ``world*``, ``setsum``) model a design by a few facts: how it
shares and initialises buffers, how it saves, how it counts, whether a failure is contained.
Each fact comes from one extension point (``pcspec.model.design``), and only from an
implementation the encodings know: the built-in designs' and the mutants'. ``encode`` reads the
facts off a design and names every point it runs code the encodings do not know there.

An obligation states which points its proof does not depend on (``Obligation.abstracts``: it
holds whatever they decide, because its encoding lets them decide anything). For a design whose
unknown code sits at any other point the obligation's answer is ``not covered``, never
``proved`` (``coverage``). docs/PROOFS.md says how to declare that an override is encoded as a
built-in one (``Design.encoded_as``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pcspec.model import design as d
from pcspec.model.design import AllocScope, Design, Sharing
from pcspec.model.designs import PR30137, Fixed
from pcspec.properties import mutants as m


@dataclass(frozen=True)
class Encoded:
    """The facts of a design the encodings read."""

    name: str
    sharing: Sharing
    zero_init: bool
    save_protocol: str  # append_fill | append_fill_pop | transactional
    alloc_scope: AllocScope
    accounting: str  # per_holder | unique | undercount
    make_room: bool  # False: an entry that would fit after eviction is rejected (no-make-room)
    shrink_limit_on_bad_alloc: bool
    contain_failures: bool  # a failed load drops the entry; a failed snapshot holds nothing
    inplace_update: bool  # the cap's victim's payload is reused in place
    keep_restored: bool

    @property
    def validates_save(self) -> bool:
        return self.save_protocol != "append_fill"


def _f(cls: type[Design], point: str) -> object:
    return cls.__dict__[point]


# point -> {implementation: the fact it gives}; the facts of one point are a (field, value) pair.
KNOWN: dict[str, dict[object, tuple[tuple[str, object], ...]]] = {
    "prompt_save": {
        _f(Design, "prompt_save"): (("save_protocol", "append_fill"),),
        _f(PR30137, "prompt_save"): (("save_protocol", "append_fill_pop"),),
        _f(Fixed, "prompt_save"): (("save_protocol", "transactional"),),
    },
    "entry_sizes": {
        _f(Design, "entry_sizes"): (("accounting", "per_holder"),),
        _f(Fixed, "entry_sizes"): (("accounting", "unique"),),
        _f(m.Undercount, "entry_sizes"): (("accounting", "undercount"),),
    },
    "candidate_size": {
        _f(Design, "candidate_size"): (("accounting", "per_holder"),),
        _f(Fixed, "candidate_size"): (("accounting", "unique"),),
        _f(m.Undercount, "candidate_size"): (("accounting", "undercount"),),
    },
    "is_oversize": {
        _f(Design, "is_oversize"): (("make_room", True),),
        _f(m.NoMakeRoom, "is_oversize"): (("make_room", False),),
    },
    "make_room": {_f(Design, "make_room"): ()},
    "update_evictions": {_f(Design, "update_evictions"): ()},
    "limit_after_bad_alloc": {
        _f(Design, "limit_after_bad_alloc"): (("shrink_limit_on_bad_alloc", True),),
        _f(Fixed, "limit_after_bad_alloc"): (("shrink_limit_on_bad_alloc", False),),
    },
    "load_entry": {
        _f(Design, "load_entry"): (("contain_failures", False),),
        _f(Fixed, "load_entry"): (("contain_failures", True),),
    },
    "checkpoint_create_failed": {
        _f(Design, "checkpoint_create_failed"): (("contain_failures", False),),
        _f(PR30137, "checkpoint_create_failed"): (("contain_failures", False),),
        _f(Fixed, "checkpoint_create_failed"): (("contain_failures", True),),
    },
    "reuse_payload": {
        _f(Design, "reuse_payload"): (("inplace_update", False),),
        _f(m.InplaceUpdate, "reuse_payload"): (("inplace_update", True),),
    },
    "kept_checkpoint": {
        _f(Design, "kept_checkpoint"): (("keep_restored", False),),
        _f(Fixed, "kept_checkpoint"): (("keep_restored", True),),
    },
    "copy_checkpoints": {_f(Design, "copy_checkpoints"): ()},
    "release_evicted": {_f(Design, "release_evicted"): ()},
    "on_contained": {_f(Design, "on_contained"): ()},
}
# Attributes: every value of the attribute's type is encoded.
ATTRIBUTES: dict[str, str] = {"sharing": "sharing", "zero_init": "zero_init", "alloc_scope": "alloc_scope"}


def _built_in_classes() -> tuple[type[Design], ...]:
    from pcspec.model.designs import BUILT_IN

    return (Design, *BUILT_IN.values(), *m.MUTANT_CLASSES)


def _known_elsewhere(point: str, impl: object) -> bool:
    """Whether ``impl`` is what a built-in design or a mutant runs at ``point`` (a point no
    encoding reads: the proofs were made with these, whatever they decide)."""
    return any(point in cls.__dict__ and cls.__dict__[point] is impl for cls in _built_in_classes())


def encode(design: Design) -> tuple[Encoded, dict[str, str]]:
    """The design's facts, and the points where it runs code the encodings do not know (point ->
    the class that defines it; its facts there are those of the nearest known implementation in
    its ancestry, which an obligation that depends on the point never reads). A design may
    declare an override encoded as a built-in class's implementation (``encoded_as``: point ->
    class); pcspec cannot check that claim, and ``prove`` says so beside the result."""
    declared: Mapping[str, type[Design]] = getattr(design, "encoded_as", {}) or {}
    facts: dict[str, object] = {}
    unknown: dict[str, str] = {}
    for point in d.POINTS:
        impl = d.implementation(declared.get(point, design), point)
        if point in ATTRIBUTES:
            facts[ATTRIBUTES[point]] = impl
            continue
        table = KNOWN.get(point)
        if table is None:
            if not _known_elsewhere(point, impl):
                unknown[point] = d.defined_by(design, point).__qualname__
            continue
        if impl not in table:
            unknown[point] = d.defined_by(design, point).__qualname__
            impl = next(k.__dict__[point] for k in type(design).__mro__ if k.__dict__.get(point) in table)
        for field, value in table[impl]:
            if facts.get(field, value) != value:
                unknown[point] = f"{d.defined_by(design, point).__qualname__} (its {field} is not its other points')"
            facts.setdefault(field, value)
    return Encoded(name=design.name, **facts), unknown  # type: ignore[arg-type]
