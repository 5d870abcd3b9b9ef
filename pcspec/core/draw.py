"""The draw interface the fuzzing rules are written against, and the argument domains.

The rules (``pcspec.properties.rules``) are written once. They never call a random generator
or a Hypothesis strategy themselves: each rule declares the *domain* of every argument
(``Int``, ``Choice``, ``Bool``, ``Lists``, or ``Composite`` for a value built from several
draws, such as a configuration), and a domain draws its value through a ``Draw``: four
questions (an integer in a range, one of some options, a boolean, a list of options). Two
backends answer them:

* the seeded walker (``pcspec.engines.walker.RandomDraw``): a ``random.Random``, so a run is
  a function of its seed alone, on every platform and every Hypothesis version;
* Hypothesis (``pcspec.engines.hypothesis``): each domain becomes the public strategy that
  draws the same values (``st.integers``, ``st.sampled_from``, ``st.booleans``, ``st.lists``;
  a composite runs through ``st.composite``), so Hypothesis generates, shrinks and reports as
  it does for any state machine.

Nothing here depends on either backend.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Draw(Protocol):
    """What a domain may ask. Bounds are inclusive; options are drawn with equal chances
    (an option listed twice weighs twice)."""

    def integer(self, lo: int, hi: int) -> int: ...

    def choice(self, options: Sequence[T]) -> T: ...

    def boolean(self) -> bool: ...

    def sample(self, options: Sequence[T], min_size: int, max_size: int, unique: bool) -> list[T]:
        """A list of ``min_size`` to ``max_size`` options (distinct ones when ``unique``)."""
        ...


class Domain:
    """The values one argument of a rule takes."""

    def draw(self, d: Draw) -> Any:
        raise NotImplementedError


@dataclass(frozen=True)
class Int(Domain):
    lo: int
    hi: int

    def draw(self, d: Draw) -> int:
        return d.integer(self.lo, self.hi)


@dataclass(frozen=True)
class Choice(Domain):
    options: tuple[Any, ...]

    def __init__(self, options: Sequence[Any]) -> None:
        if not options:
            raise ValueError("a choice needs at least one option")
        object.__setattr__(self, "options", tuple(options))

    def draw(self, d: Draw) -> Any:
        return d.choice(self.options)


@dataclass(frozen=True)
class Bool(Domain):
    def draw(self, d: Draw) -> bool:
        return d.boolean()


@dataclass(frozen=True)
class Lists(Domain):
    """A list of options (``unique``: distinct ones; there must be enough of them)."""

    options: tuple[Any, ...]
    min_size: int
    max_size: int
    unique: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.min_size <= self.max_size:
            raise ValueError(f"list sizes {self.min_size}..{self.max_size}")
        if self.unique and len(set(self.options)) < self.max_size:
            raise ValueError("a unique list needs at least max_size distinct options")

    def draw(self, d: Draw) -> list[Any]:
        return d.sample(self.options, self.min_size, self.max_size, self.unique)


@dataclass(frozen=True)
class Composite(Domain):
    """A value built by a function of the draw interface (a configuration, say)."""

    build: Callable[[Draw], Any]

    def draw(self, d: Draw) -> Any:
        return self.build(d)


__all__ = ["Bool", "Choice", "Composite", "Domain", "Draw", "Int", "Lists"]
