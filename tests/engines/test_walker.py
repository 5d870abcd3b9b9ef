"""The seeded swarm walker: it walks the rules both engines share, over the same configuration
space as the Hypothesis engine, deterministically from the seed, and its finds shrink and
replay; nothing of it depends on Hypothesis."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from typing import Any

from hypothesis import given, settings
from hypothesis.stateful import run_state_machine_as_test

from pcspec.core.draw import Bool, Choice, Domain, Int, Lists
from pcspec.engines import walker
from pcspec.engines.hypothesis import PROFILES, machine_for, strategy
from pcspec.engines.search import hunt
from pcspec.model.config import Config
from pcspec.model.designs import DESIGNS, RULE_SET_MODELS
from pcspec.properties.catalogue import get_property
from pcspec.properties.judge import replay, shrink_trace
from pcspec.properties.mutants import MUTANTS
from pcspec.properties.rules import RULES, SETUP, configs, rules_for

FIXED = DESIGNS["fixed"]


def test_both_engines_run_the_same_rules() -> None:
    """The Hypothesis machine has one rule method per rule of properties/rules.py (named after
    it, documented by it), and a short run of it judges operations."""
    machine = machine_for(FIXED)
    for r in RULES:
        if not r.applies(FIXED):  # (a rule of other variants only: decide, for the builds with decisions)
            assert not hasattr(machine, r.name)
            continue
        method = getattr(machine, r.name)
        assert callable(method) and method.__name__ == r.name and method.__doc__ == r.body.__doc__
    assert {r.name for r in rules_for(FIXED)} == {d.rule.name for d in walker.Walker(FIXED).table}
    assert "decide" in vars(machine_for(RULE_SET_MODELS["b11549"]))
    run_state_machine_as_test(machine, settings=settings(PROFILES["ci"], max_examples=20))  # type: ignore[no-untyped-call]
    assert machine.record.steps > 0 and machine.record.coverage


def _field_values(cfgs: list[Config]) -> dict[str, set[Any]]:
    out: dict[str, set[Any]] = {}
    for c in cfgs:
        for k, v in c.to_json().items():
            out.setdefault(k, set()).add(v)
    return out


def test_configurations_are_the_same_space_in_both_engines() -> None:
    """configs() drawn by Hypothesis (through the public st.composite) and by the walker's
    PRNG: every field takes the same values."""
    seen: list[Config] = []
    (cfg_domain,) = [d for n, d in SETUP if n == "cfg"]

    @settings(max_examples=300, derandomize=True, database=None)
    @given(strategy(cfg_domain))
    def collect(cfg: Config) -> None:
        seen.append(cfg)

    collect()
    rng = random.Random(0)
    mine = [configs(walker.RandomDraw(rng)) for _ in range(600)]
    assert _field_values(mine) == _field_values(seen)


def _allowed(domain: Domain, value: Any) -> bool:
    if isinstance(domain, Int):
        return isinstance(value, int) and domain.lo <= value <= domain.hi
    if isinstance(domain, Choice):
        return value in domain.options
    if isinstance(domain, Bool):
        return isinstance(value, bool)
    if isinstance(domain, Lists):
        return (
            domain.min_size <= len(value) <= domain.max_size
            and all(x in domain.options for x in value)
            and (not domain.unique or len(set(value)) == len(value))
        )
    raise AssertionError(f"no check for {domain!r}")


def test_argument_draws_stay_in_their_domains() -> None:
    rng = random.Random(1)
    for r in RULES:
        for name, domain in r.arguments:
            d = walker.drawer(domain)
            values = [d(rng) for _ in range(200)]
            assert all(_allowed(domain, v) for v in values), (r.name, name)


def _digest(w: walker.Walker, seeds: range) -> list[str]:
    return [json.dumps([op.to_json() for op in w.example(s).ops], sort_keys=True) for s in seeds]


def test_same_seed_same_trace() -> None:
    w = walker.Walker(DESIGNS["pr30137"])
    assert _digest(w, range(5)) == _digest(walker.Walker(DESIGNS["pr30137"]), range(5))
    assert _digest(w, range(5)) != _digest(w, range(5, 10))


def test_same_trace_under_another_hash_seed_and_without_hypothesis() -> None:
    """A walk is the same in another process, under another string hash, and with Hypothesis
    unimportable: the verdicts of ``pcspec verify`` cannot depend on the Hypothesis a user
    has installed."""
    code = (
        "import sys; sys.modules['hypothesis'] = None;"
        "import json; from pcspec.engines import walker; from pcspec.model.designs import DESIGNS;"
        "w = walker.Walker(DESIGNS['baseline']);"
        "print(json.dumps([[op.to_json() for op in w.example(s).ops] for s in range(4)], sort_keys=True))"
    )
    outs = []
    for hash_seed in ("0", "4242"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        outs.append(proc.stdout)
    assert outs[0] == outs[1] and len(outs[0]) > 100


def test_a_walk_is_a_function_of_seed_and_budget() -> None:
    a = walker.Walker(MUTANTS["mutant:undercount"]).walk(0, 30)
    b = walker.Walker(MUTANTS["mutant:undercount"]).walk(0, 30)
    assert (a.examples, a.rules, a.steps) == (b.examples, b.rules, b.steps)
    assert {p: (f.example_seed, f.ops) for p, f in a.first.items()} == {
        p: (f.example_seed, f.ops) for p, f in b.first.items()
    }
    # walk seed s runs example seeds s * STRIDE + i
    c = walker.Walker(MUTANTS["mutant:undercount"]).run_seeds([walker.example_seed(0, i) for i in range(30)])
    assert c.steps == a.steps


def test_a_hunt_finds_shrinks_and_replays() -> None:
    v = MUTANTS["mutant:undercount"]
    w = walker.hunt(v, "ACC-1", seed=0, examples=200)
    assert w.hit is not None and w.complete
    trace = shrink_trace(w.hit.trace(v), "ACC-1")
    assert len(trace.ops) <= 8
    assert replay(trace, [get_property("ACC-1")]).matches(trace.expect)
    assert trace.seed == w.hit.example_seed


def test_a_hunts_trace_ends_at_its_targets_violation() -> None:
    """A target's violation ends the example where it shows: the last operation of the find
    is the one whose model operation broke the target (no exception needed to stop it)."""
    v = MUTANTS["mutant:undercount"]
    w = walker.hunt(v, "ACC-1", seed=0, examples=200)
    assert w.hit is not None
    steps = replay(w.hit.trace(v), [get_property("ACC-1")]).steps
    assert steps[-1].violations and not any(s.violations for s in steps[:-1])


def test_a_time_cap_leaves_the_walk_incomplete() -> None:
    w = walker.Walker(FIXED).walk(0, 10_000, seconds=0.05)
    assert not w.complete and w.examples < 10_000 and not w.first


def test_a_verify_hunt_keeps_the_shortest_of_its_finds() -> None:
    """Seed 0's first UNINIT-1 find on noinit-unchecked needs a dozen server steps at the
    right moments (15 operations once shrunk); the next finds show it in four."""
    v = MUTANTS["mutant:noinit-unchecked"]
    run, hit = hunt(v, "UNINIT-1", 0, 4000, 120.0)
    assert hit is not None and hit.shrunk and run.complete
    assert len(hit.trace.ops) <= 6
    assert replay(hit.trace).matches(hit.trace.expect)
