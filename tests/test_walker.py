"""The seeded swarm walker: it walks the machine's own rules, over the same configuration
space, deterministically from the seed, and its finds shrink and replay like the machine's."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from typing import Any

from hypothesis import given, settings

from pcspec import walker
from pcspec.hunts import first_hunt, walker_hunt
from pcspec.model.config import Config
from pcspec.model.variants import ALL, FIXED
from pcspec.properties.catalogue import get_property
from pcspec.properties.machine import configs, machine_for
from pcspec.replay import replay
from pcspec.shrink import shrink
from pcspec.walker_rules import drawer, rule_table


def test_the_walker_walks_every_rule_of_the_machine() -> None:
    cls = machine_for(FIXED)
    state = cls.setup_state()  # type: ignore[no-untyped-call]
    table = rule_table(cls)
    assert sorted(r.name for r in table.rules) == sorted(r.function.__name__ for r in state.rules)
    assert [r.name for r in table.initializers] == [r.function.__name__ for r in state.initializers]
    by_function = {x.function: x for x in state.rules}
    for r in table.rules:  # the argument names the rule takes, in its decorator's order
        assert [name for name, _ in r.arguments] == list(by_function[r.function].arguments)


def _field_values(cfgs: list[Config]) -> dict[str, set[Any]]:
    out: dict[str, set[Any]] = {}
    for c in cfgs:
        for k, v in c.to_json().items():
            out.setdefault(k, set()).add(v)
    return out


def test_configurations_come_from_the_machines_space() -> None:
    """configs() is run by the walker itself: every field takes the values Hypothesis draws."""
    seen: list[Config] = []

    @settings(max_examples=300, derandomize=True, database=None)
    @given(configs())
    def collect(cfg: Config) -> None:
        seen.append(cfg)

    collect()
    draw = drawer(configs())
    rng = random.Random(0)
    mine = [draw(rng) for _ in range(600)]
    assert _field_values(mine) == _field_values(seen)


def _allowed(strategy: Any, value: Any) -> bool:
    """Whether ``value`` is one the strategy can produce (the kinds the machine uses)."""
    s = strategy
    while hasattr(s, "wrapped_strategy"):
        s = s.wrapped_strategy
    name = type(s).__name__
    if name == "IntegersStrategy":
        return isinstance(value, int) and s.start <= value <= s.end
    if name == "SampledFromStrategy":
        return value in s.elements
    if name == "BooleansStrategy":
        return isinstance(value, bool)
    if name.endswith("ListStrategy"):
        unique = "Unique" in name
        return (
            s.min_size <= len(value) <= s.max_size
            and all(_allowed(s.element_strategy, x) for x in value)
            and (not unique or len(set(value)) == len(value))
        )
    raise AssertionError(f"no check for {name}")


def test_argument_draws_stay_in_their_strategies() -> None:
    rng = random.Random(1)
    for r in machine_for(FIXED).setup_state().rules:  # type: ignore[no-untyped-call]
        for name, strategy in r.arguments.items():
            d = drawer(strategy)
            values = [d(rng) for _ in range(200)]
            assert all(_allowed(strategy, v) for v in values), (r.function.__name__, name)


def _digest(w: walker.Walker, seeds: range) -> list[str]:
    return [json.dumps(w.example(s).ops, sort_keys=True) for s in seeds]


def test_same_seed_same_trace() -> None:
    w = walker.Walker(ALL["pr30137"])
    assert _digest(w, range(5)) == _digest(walker.Walker(ALL["pr30137"]), range(5))
    assert _digest(w, range(5)) != _digest(w, range(5, 10))


def test_same_trace_under_another_hash_seed() -> None:
    code = (
        "import json; from pcspec import walker; from pcspec.model.variants import ALL;"
        "w = walker.Walker(ALL['master']);"
        "print(json.dumps([w.example(s).ops for s in range(4)], sort_keys=True))"
    )
    outs = []
    for hash_seed in ("0", "4242"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        outs.append(proc.stdout)
    assert outs[0] == outs[1] and len(outs[0]) > 100


def test_a_walk_is_a_function_of_seed_and_budget() -> None:
    a = walker.Walker(ALL["mutant:undercount"]).walk(0, 30)
    b = walker.Walker(ALL["mutant:undercount"]).walk(0, 30)
    assert (a.examples, a.rules, a.steps) == (b.examples, b.rules, b.steps)
    assert {p: (f.example_seed, f.ops) for p, f in a.first.items()} == {
        p: (f.example_seed, f.ops) for p, f in b.first.items()
    }
    # walk seed s runs example seeds s * STRIDE + i
    c = walker.Walker(ALL["mutant:undercount"]).run_seeds([walker.example_seed(0, i) for i in range(30)])
    assert c.steps == a.steps


def test_a_hunt_finds_shrinks_and_replays() -> None:
    v = ALL["mutant:undercount"]
    w = walker.hunt(v, "ACC-1", seed=0, examples=200)
    assert w.hit is not None and w.complete
    trace = shrink(w.hit.trace(v), "ACC-1")
    assert len(trace.ops) <= 8
    assert replay(trace, [get_property("ACC-1")]).matches(trace.expect)
    assert trace.seed == w.hit.example_seed


def test_a_time_cap_leaves_the_walk_incomplete() -> None:
    w = walker.Walker(FIXED).walk(0, 10_000, seconds=0.05)
    assert not w.complete and w.examples < 10_000 and not w.first


def test_verify_hunts_with_the_walker_first_then_hypothesis() -> None:
    v = ALL["mutant:undercount"]
    run, hit = first_hunt(v, "ACC-1", "ci", 0, 200, 100, 60.0)
    assert hit is not None and run.complete
    assert hit.trace.seed is not None and hit.trace.seed >= 0  # an example seed of walk seed 0
    # no walker budget: the Hypothesis hunt alone, as before the walker
    _run, hit2 = first_hunt(v, "ACC-1", "ci", 0, 0, 100, 60.0)
    assert hit2 is not None and hit2.trace.seed == 0


def test_a_verify_hunt_keeps_the_shortest_of_its_finds() -> None:
    """Seed 0's first UNINIT-1 find on noinit-unchecked needs a dozen server steps at the
    right moments (15 operations once shrunk); the next finds show it in four."""
    v = ALL["mutant:noinit-unchecked"]
    run, hit = walker_hunt(v, "UNINIT-1", 0, 4000, 120.0)
    assert hit is not None and hit.shrunk and run.complete
    assert len(hit.trace.ops) <= 6
    assert replay(hit.trace).matches(hit.trace.expect)
