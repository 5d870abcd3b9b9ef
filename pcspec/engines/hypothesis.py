"""The fuzzing rules as a Hypothesis state machine, through Hypothesis's public API only.

``machine_for(variant)`` builds a ``RuleBasedStateMachine`` whose rules are the rules of
``pcspec.properties.rules``: one ``@rule`` per rule, each argument's domain turned into the
public strategy that draws the same values (``strategy``), each precondition a
``@precondition``. A rule's body runs on the example's ``Fuzz``; when a *target* property is
violated the rule fails the example (``AssertionError``, which is how a Hypothesis test fails),
so Hypothesis shrinks it; other violations are only recorded in the run's ``Record``, so one
run can survey a variant. The decisions each operation reached are reported with
``hypothesis.event`` (``pytest --hypothesis-show-statistics`` shows them).

Binding to your own variant::

    from pcspec.engines.hypothesis import machine_for
    from pcspec.model.design import Design
    from pcspec.model.designs import Fixed

    class Mine(Fixed):                          # fixed without keeping the restored checkpoint
        name = "mine"
        kept_checkpoint = Design.kept_checkpoint

    TestMine = machine_for(Mine(), targets=["PERF-2"]).TestCase   # a unittest class for pytest

``pcspec verify`` does not use this engine (its verdicts come from the walker's own PRNG, the
same on every Hypothesis version); the pytest plugin and a user's own tests do.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from hypothesis import HealthCheck, Phase, event, settings, stateful
from hypothesis import strategies as st

from pcspec.core.draw import Bool, Choice, Composite, Domain, Int, Lists
from pcspec.core.ops import Operation
from pcspec.core.results import Finding
from pcspec.core.trace import Trace
from pcspec.model.config import Config
from pcspec.model.design import Design
from pcspec.properties.base import Property
from pcspec.properties.catalogue import CATALOGUE
from pcspec.properties.judge import write_counterexample
from pcspec.properties.rules import RULES, SETUP, Fuzz, Rule, rules_for

T = TypeVar("T")
# (``rule(**strategies)`` with the strategies in a dict: mypy cannot tell the dict's keys from
# the decorators' ``target``/``targets`` keywords, so the decorators are called untyped)
_rule: Any = stateful.rule
_initialize: Any = stateful.initialize
_precondition: Any = stateful.precondition


class DrawnBy:
    """The draw interface over a Hypothesis ``draw`` function (inside ``st.composite``)."""

    def __init__(self, draw: st.DrawFn) -> None:
        self._draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return self._draw(st.integers(lo, hi))

    def choice(self, options: Sequence[T]) -> T:
        return self._draw(st.sampled_from(options))

    def boolean(self) -> bool:
        return self._draw(st.booleans())

    def sample(self, options: Sequence[T], min_size: int, max_size: int, unique: bool) -> list[T]:
        return self._draw(st.lists(st.sampled_from(options), min_size=min_size, max_size=max_size, unique=unique))


def strategy(domain: Domain) -> st.SearchStrategy[Any]:
    """The public strategy drawing ``domain``'s values."""
    if isinstance(domain, Int):
        return st.integers(domain.lo, domain.hi)
    if isinstance(domain, Choice):
        return st.sampled_from(domain.options)
    if isinstance(domain, Bool):
        return st.booleans()
    if isinstance(domain, Lists):
        return st.lists(
            st.sampled_from(domain.options), min_size=domain.min_size, max_size=domain.max_size, unique=domain.unique
        )
    if isinstance(domain, Composite):
        build = domain.build
        return st.composite(lambda draw: build(DrawnBy(draw)))()
    raise TypeError(f"no strategy for {domain!r}")


@dataclass
class Record:
    """What a run of a bound machine found, over all its examples (the run's return value:
    ``run_state_machine_as_test`` returns nothing, so the class keeps a reference to it)."""

    first: dict[str, tuple[Finding, list[Operation], Config]] = field(default_factory=dict)
    steps: int = 0
    # The last failing example of a target property: after shrinking, the minimal one.
    last: tuple[Finding, list[Operation], Config] | None = None
    coverage: Counter[str] = field(default_factory=Counter)


class CacheMachine(stateful.RuleBasedStateMachine):
    """The rules of ``pcspec.properties.rules`` on ``Server(config, variant)``; bound to a
    variant by ``machine_for``, which adds one method per rule."""

    variant: Design
    targets: frozenset[str] = frozenset()
    props: tuple[Property, ...] = CATALOGUE
    record: Record
    out: Path | None = None  # where a failing example's trace is written (machine_for)

    def __init__(self) -> None:
        super().__init__()
        self.fuzz = Fuzz(self.variant, self.props, self.targets)

    def setup(self, **drawn: Any) -> None:
        self.fuzz.setup(**drawn)

    setup = _initialize(**{name: strategy(d) for name, d in SETUP})(setup)

    def after(self) -> None:
        """After a rule: count what it did, fail the example on a target's violation."""
        fuzz, rec = self.fuzz, self.record
        rec.steps += fuzz.judged
        fuzz.judged = 0
        rec.coverage.update(fuzz.coverage)
        for name in fuzz.coverage:
            event(name)
        fuzz.coverage.clear()
        for pid, found in fuzz.first.items():
            rec.first.setdefault(pid, found)
        if fuzz.hit is not None:
            rec.last = fuzz.hit
            v, ops, cfg = fuzz.hit
            where = ""
            if self.out is not None:
                # (each failing example overwrites it: the last one is what Hypothesis shrank to)
                trace = Trace(self.variant, cfg, list(ops), None,
                              [{"property": v.rule, "op": v.at, "message": v.message}])
                stem = f"{self.variant.name.replace(':', '-')}__{v.rule}"
                path = write_counterexample(trace, self.out, stem)
                where = f"\ntrace: {path}   (pcspec replay {path})"
            raise AssertionError(f"{v.rule} violated at model operation {v.at}: {v.message}{where}")


def _method(r: Rule) -> Callable[..., None]:
    def run(self: CacheMachine, **drawn: Any) -> None:
        r.body(self.fuzz, **drawn)
        self.after()

    run.__name__ = run.__qualname__ = r.name
    run.__doc__ = r.body.__doc__
    m: Callable[..., None] = _rule(**{name: strategy(d) for name, d in r.arguments})(run)
    for pred in r.preconditions:
        m = _precondition(_on_fuzz(pred))(m)
    return m


def _on_fuzz(pred: Callable[[Fuzz], bool]) -> Callable[[CacheMachine], bool]:
    return lambda machine: pred(machine.fuzz)


_RULE_METHODS = {r.name: _method(r) for r in RULES}


def machine_for(
    variant: Design, targets: Iterable[str] = (), props: Sequence[Property] = CATALOGUE,
    out: Path | None = Path("pcspec-out"),
) -> type[CacheMachine]:
    """A fresh machine class bound to ``variant``; violations of ``targets`` fail examples.
    Its ``record`` holds what every example of it found. A failing example's trace is written
    to ``out`` (``pcspec replay`` reads it; the failure names it), None: not written."""
    name = "Machine_" + "".join(ch if ch.isalnum() else "_" for ch in variant.name)
    attrs: dict[str, Any] = {
        "variant": variant,
        "targets": frozenset(targets),
        "props": tuple(props),
        "record": Record(),
        "out": out,
        **{r.name: _RULE_METHODS[r.name] for r in rules_for(variant)},
    }
    return type(name, (CacheMachine,), attrs)


# No "explain" phase: it re-runs the shrunk example hundreds of times to annotate the report,
# which costs more than finding and shrinking together, and our report is the trace itself.
_PHASES = [Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink]

def _profile(examples: int, steps: int, **more: Any) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=_PHASES,
        **more,
    )


PROFILES = {
    "ci": _profile(60, 25, derandomize=True, print_blob=False),  # deterministic, bounded: the test suite's
    "dev": _profile(300, 40),
    "campaign": _profile(5000, 60),
}

__all__ = ["PROFILES", "CacheMachine", "DrawnBy", "Record", "machine_for", "strategy"]
