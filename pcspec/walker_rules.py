"""A state machine's rules read as a table the walker can draw from without Hypothesis.

The walker (``pcspec.walker``) runs the *same* rule methods as the Hypothesis machine
(``pcspec.properties.machine.CacheMachine``): it reads the rules, their preconditions and their
argument strategies from the class, as Hypothesis itself does (``setup_state``), and turns each
argument strategy into a plain function of a ``random.Random``. Nothing of the machine is
copied, so the two cannot drift: a rule added to the machine is walked the next run, a range
changed there is the walker's range too, including ``configs()``, whose body is run with a draw
function of our own.

The strategies understood are the closed set the machine uses: ``integers(a, b)``,
``sampled_from(...)``, ``booleans()``, ``just(x)``, ``lists(...)`` (bounded; ``unique`` too) and
``@composite`` strategies built from these. Anything else (a ``.map``, a ``Bundle``, an
unbounded list) is refused when the table is built, naming the rule and the strategy, so a
change to the machine the walker cannot follow fails the walker's tests instead of being
walked wrongly.

Distributions are the walker's own: integers and list sizes are uniform, ``sampled_from`` picks
each listed element with the same chance (so the machine's repeated elements, such as the three
``-1`` of ``FAULT``, weigh as they do there). Every draw goes through ``Random.random()``, whose
sequence for a given integer seed is the same on every platform and Python 3 version.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis.stateful import RuleBasedStateMachine
from hypothesis.strategies import SearchStrategy
from hypothesis.strategies._internal.collections import ListStrategy, UniqueListStrategy, UniqueSampledListStrategy
from hypothesis.strategies._internal.core import CompositeStrategy
from hypothesis.strategies._internal.misc import BooleansStrategy, JustStrategy
from hypothesis.strategies._internal.numbers import IntegersStrategy
from hypothesis.strategies._internal.strategies import SampledFromStrategy

Drawer = Callable[[random.Random], Any]


class WalkerError(Exception):
    """The machine uses something the walker cannot draw (named with the rule)."""


def below(rng: random.Random, n: int) -> int:
    """A uniform integer in ``[0, n)``. ``int(random() * n)`` rather than ``randrange``: the
    same on every platform (IEEE doubles), and a third of the cost (this is the hot path)."""
    return int(rng.random() * n)


def _unwrap(s: SearchStrategy[Any]) -> SearchStrategy[Any]:
    # st.integers(...) and friends are LazyStrategy wrappers around the real strategy.
    while hasattr(s, "wrapped_strategy"):
        s = s.wrapped_strategy
    return s


def drawer(strategy: SearchStrategy[Any]) -> Drawer:
    """A function ``rng -> value`` drawing from ``strategy``'s values (see the module doc)."""
    s = _unwrap(strategy)
    if isinstance(s, IntegersStrategy):
        lo, hi = s.start, s.end
        if lo is None or hi is None:
            raise WalkerError(f"unbounded {strategy!r}")
        span = hi - lo + 1
        return lambda rng: lo + int(rng.random() * span)
    if isinstance(s, SampledFromStrategy):
        if s._transformations:
            raise WalkerError(f"a mapped or filtered {strategy!r}")
        elements = tuple(s.elements)
        n = len(elements)
        return lambda rng: elements[int(rng.random() * n)]
    if isinstance(s, BooleansStrategy):
        return lambda rng: rng.random() < 0.5
    if isinstance(s, JustStrategy):
        value = s.value
        return lambda rng: value
    if isinstance(s, ListStrategy):
        return _list_drawer(strategy, s)
    if isinstance(s, CompositeStrategy):
        definition, args, kwargs = s.definition, s.args, s.kwargs

        def composite(rng: random.Random) -> Any:
            # The composite's body runs as written; each strategy it draws from is drawn here.
            return definition(lambda inner: drawer(inner)(rng), *args, **kwargs)

        return composite
    raise WalkerError(f"cannot draw from {strategy!r} ({type(s).__name__})")


def _list_drawer(strategy: SearchStrategy[Any], s: ListStrategy[Any]) -> Drawer:
    lo, hi = s.min_size, s.max_size
    if hi == float("inf"):
        raise WalkerError(f"unbounded {strategy!r}")
    span = int(hi) - lo + 1
    element = drawer(s.element_strategy)
    if not isinstance(s, UniqueSampledListStrategy | UniqueListStrategy):
        return lambda rng: [element(rng) for _ in range(lo + int(rng.random() * span))]
    el = _unwrap(s.element_strategy)
    if not isinstance(el, SampledFromStrategy) or len(set(el.elements)) < hi:
        raise WalkerError(f"unique lists only of sampled_from with enough elements: {strategy!r}")
    pool = tuple(dict.fromkeys(el.elements))

    def unique(rng: random.Random) -> list[Any]:
        # A partial Fisher-Yates shuffle: distinct elements, each order equally likely.
        left = list(pool)
        out = []
        for _ in range(lo + int(rng.random() * span)):
            out.append(left.pop(int(rng.random() * len(left))))
        return out

    return unique


@dataclass(frozen=True)
class Rule:
    """One rule of the machine: its method, precondition functions and argument drawers."""

    name: str
    function: Callable[..., Any]
    preconditions: tuple[Callable[[Any], bool], ...]
    arguments: tuple[tuple[str, Drawer], ...]

    def enabled(self, machine: RuleBasedStateMachine) -> bool:
        for p in self.preconditions:  # noqa: SIM110  (a loop: asked of every rule at every step of a walk)
            if not p(machine):
                return False
        return True

    def draw(self, rng: random.Random) -> dict[str, Any]:
        # In the order the machine's decorator lists them: the draw order is part of the seed's
        # meaning, so it must not depend on a dict's hashing (the names are str).
        return {name: d(rng) for name, d in self.arguments}


@dataclass(frozen=True)
class RuleTable:
    initializers: tuple[Rule, ...]
    rules: tuple[Rule, ...]  # sorted by name, as Hypothesis lists them
    invariants: tuple[Callable[[Any], Any], ...]


def _rule(r: Any, kind: str) -> Rule:
    name = r.function.__name__
    if getattr(r, "targets", ()) or getattr(r, "bundle", None) is not None:
        raise WalkerError(f"{kind} {name}: bundles are not supported")
    try:
        args = tuple((k, drawer(v)) for k, v in r.arguments.items())
    except WalkerError as exc:
        raise WalkerError(f"{kind} {name}: {exc}") from None
    return Rule(name, r.function, tuple(getattr(r, "preconditions", ())), args)


def rule_table(cls: type[RuleBasedStateMachine]) -> RuleTable:
    """The machine class's rules, read the way Hypothesis reads them."""
    state = cls.setup_state()  # type: ignore[no-untyped-call]
    for inv in state.invariants:
        if inv.preconditions:
            raise WalkerError(f"invariant {inv.function.__name__}: preconditions are not supported")
    return RuleTable(
        tuple(_rule(r, "initialize rule") for r in state.initializers),
        tuple(sorted((_rule(r, "rule") for r in state.rules), key=lambda r: r.name)),
        tuple(inv.function for inv in state.invariants),
    )


def names(rules: Sequence[Rule]) -> list[str]:
    return [r.name for r in rules]
