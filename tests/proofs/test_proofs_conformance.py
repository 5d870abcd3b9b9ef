"""Encoding conformance: for every operation the proofs encode, Hypothesis-drawn concrete
states run through the Python model and through the Z3 transition relation, which must allow
exactly the model's result (``tests.proofs.conform_cache``, ``conform_world``); and each
``policy`` rule the cache encoding restates, against the policy function itself."""

from __future__ import annotations

import functools

import pytest
import z3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pcspec.model import policy
from pcspec.model.designs import get_design
from pcspec.proofs import cache_ops, rules
from pcspec.proofs.build import Build
from tests.proofs import conform_cache as cc
from tests.proofs import conform_world as cw

SETTINGS = settings(max_examples=40, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
CACHE_VARIANTS = (
    "baseline",
    "pr30137",
    "pr27451",
    "fixed",
    "mutant:undercount",
    "mutant:no-make-room",
    "mutant:noinit-unchecked",
)
WORLD_VARIANTS = ("baseline", "pr30137", "pr27451", "fixed", "mutant:inplace-update", "mutant:noinit-unchecked")
STEM = (1, 2, 3, 4)


@st.composite
def cache_scenes(draw: st.DrawFn) -> cc.Scene:
    payloads = draw(st.lists(st.integers(1, 120), max_size=cc.K))
    groups = st.lists(st.integers(0, len(payloads) - 1), unique=True).map(sorted) if payloads else st.just([])

    def tokens(tag: int) -> tuple[int, ...]:
        # a cut of a common stem, then tokens of its own: prefixes of one another, or not
        return STEM[: draw(st.integers(1, len(STEM)))] + tuple(range(10 * tag, 10 * tag + draw(st.integers(0, 2))))

    entries = [(tokens(i + 1), draw(groups), draw(st.booleans())) for i in range(draw(st.integers(0, cc.N - 1)))]
    return cc.Scene(
        rs=draw(st.sampled_from([10, 50])),
        draft_rs=draw(st.sampled_from([None, 20])),
        limit=draw(st.sampled_from([0, 60, 120, 200, 300, 600])),
        payloads=payloads,
        entries=entries,
        slot=(tokens(9), draw(groups)),
        fault=draw(st.sampled_from(cache_ops.FAULTS)),
    )


@functools.cache
def cache_relation(variant: str, op: str) -> cc.Relation:
    return cc.Relation(get_design(variant), op)


@pytest.mark.parametrize("variant", CACHE_VARIANTS)
@SETTINGS
@given(scene=cache_scenes())
def test_cache_save_conforms(variant: str, scene: cc.Scene) -> None:
    assert cache_relation(variant, "save").agrees(*cc.run_save(scene, get_design(variant))) == ""


@pytest.mark.parametrize("variant", CACHE_VARIANTS)
@SETTINGS
@given(scene=cache_scenes())
def test_cache_update_conforms(variant: str, scene: cc.Scene) -> None:
    assert cache_relation(variant, "update").agrees(*cc.run_update(scene, get_design(variant))) == ""


@pytest.mark.parametrize("variant", ("baseline", "pr30137", "pr27451", "fixed"))
@SETTINGS
@given(scene=cache_scenes(), fault=st.sampled_from(["none", "load.write.tgt", "load.write.dft"]))
def test_cache_removal_and_cleared_main_conform(variant: str, scene: cc.Scene, fault: str) -> None:
    """A load: the entry leaves the cache (``remove``), or -- the C++ after a failed draft
    load -- stays with its main state cleared (``clear_main``)."""
    if not scene.entries:
        return
    scene.fault = fault
    pre, inputs, post, outputs = cc.run_remove(scene, get_design(variant))
    op = "clear_main" if any(v for k, v in inputs.items() if k.startswith("cleared")) else "remove"
    flag = "cleared" if op == "clear_main" else "gone"
    chosen = {k: v for k, v in inputs.items() if k.startswith(flag)}
    assert cache_relation(variant, op).agrees(pre, chosen, post, outputs) == ""


WORLD_FAULTS = {
    "create": ["none"],
    "create_short": ["ckpt.read.tgt"],
    "save": ["none", "save.read.tgt", "save.read.dft"],
    "load": ["none", "load.write.tgt", "load.write.dft"],
    "evict": ["none"],
    "drop": ["none"],
    "clear": ["none"],
}


@st.composite
def world_scenes(draw: st.DrawFn, op: str) -> cw.WorldScene:
    cap = draw(st.integers(1, 3))
    return cw.WorldScene(
        slot_ckpts=draw(st.integers(0, min(cap, cw.COPIES))),
        entries=draw(st.lists(st.tuples(st.integers(0, 2), st.booleans()), min_size=1, max_size=2)),
        draft=draw(st.booleans()),
        cap=cap,
        fault=draw(st.sampled_from(WORLD_FAULTS[op])),
    )


@functools.cache
def world_relation(variant: str, op: str) -> cw.Relation:
    return cw.Relation(get_design(variant), op)


@pytest.mark.parametrize("variant", WORLD_VARIANTS)
@pytest.mark.parametrize("op", sorted(WORLD_FAULTS))
@settings(max_examples=20, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_world_operation_conforms(variant: str, op: str, data: st.DataObject) -> None:
    scene = data.draw(world_scenes(op))
    assert world_relation(variant, op).agrees(*cw.run(scene, get_design(variant), op)) == ""


# Scenes that take every path of a save, so that none is left to the draw's luck: (variant,
# scene, an output of the model's save and its value there).
PATHS = [
    # make room evicts (a shared checkpoint: unique accounting counts it once, per holder twice)
    ("fixed", cc.Scene(10, None, 72, [20], [((9,), [0], True)], ((7, 8), [0]), "none"), ("room.pop0", False)),
    ("pr30137", cc.Scene(10, None, 72, [20], [((9,), [0], True)], ((7, 8), [0]), "none"), ("room.pop0", True)),
    ("fixed", cc.Scene(50, None, 60, [], [], ((1, 2, 3), []), "none"), ("rejected", True)),
    # bad_alloc: the limit shrinks to 40 % of 26 bytes, then update evicts
    (
        "baseline",
        cc.Scene(10, None, 300, [], [((9,), [], True)], ((1, 2), []), "save.alloc.main"),
        ("limit_bytes.pop0", True),
    ),
    ("baseline", cc.Scene(10, None, 0, [], [], ((1, 2), []), "save.alloc.entry"), ("crash", True)),
    ("pr27451", cc.Scene(10, None, 0, [], [], ((1, 2), []), "save.alloc.entry"), ("crash", False)),
    # a short fill: pop_back after publication; the transactional save never publishes
    ("pr30137", cc.Scene(10, 20, 0, [], [((9,), [], True)], ((1, 2), []), "save.read.dft"), ("published", True)),
    ("fixed", cc.Scene(10, None, 0, [30], [((9,), [], True)], ((1, 2), [0]), "save.read.tgt"), ("published", False)),
    ("fixed", cc.Scene(10, None, 0, [], [((1,), [], True)], ((1, 2), []), "none"), ("ok", True)),
]


@pytest.mark.parametrize(("variant", "scene", "shown"), PATHS)
def test_cache_save_paths_conform(variant: str, scene: cc.Scene, shown: tuple[str, bool]) -> None:
    pre, inputs, post, outputs = cc.run_save(scene, get_design(variant))
    assert outputs[shown[0]] == shown[1]
    assert cache_relation(variant, "save").agrees(pre, inputs, post, outputs) == ""


# -- the policy rules, restated over Z3 terms ------------------------------------------------


def _solve_rule(b: Build) -> z3.ModelRef:
    s = z3.Solver(ctx=b.ctx)
    s.add(*b.facts)
    assert s.check() == z3.sat
    return s.model()


@SETTINGS
@given(
    sizes=st.lists(st.integers(0, 50), max_size=6),
    present=st.lists(st.booleans(), min_size=6, max_size=6),
    new_size=st.integers(0, 80),
    limit=st.integers(0, 150),
)
def test_make_room_is_policy_make_room(sizes: list[int], present: list[bool], new_size: int, limit: int) -> None:
    b = Build("rule")
    p = [b.val(x) for x in present[: len(sizes)]]
    popped, _ = rules.make_room(b, "mr", p, [b.val(s) for s in sizes], b.val(new_size), b.val(limit))
    m = _solve_rule(b)
    got = [i for i, x in enumerate(popped) if z3.is_true(m.eval(x))]
    kept = [s for s, x in zip(sizes, present, strict=False) if x]
    where = [i for i, x in enumerate(present[: len(sizes)]) if x]
    assert got == where[: policy.make_room(kept, new_size, limit)]
    assert z3.is_true(m.eval(rules.is_oversize(b, b.val(new_size), b.val(limit)))) == policy.is_oversize(
        new_size, limit
    )


@SETTINGS
@given(total=st.integers(0, 10**9))
def test_limit_after_bad_alloc_is_policy(total: int) -> None:
    b = Build("rule")
    x = rules.limit_after_bad_alloc(b, "l", b.val(total))
    assert _solve_rule(b).eval(x).as_long() == policy.limit_after_bad_alloc(total)


@SETTINGS
@given(sizes=st.lists(st.integers(0, 50), max_size=6), limit=st.integers(0, 150))
def test_update_byte_loop_is_policy(sizes: list[int], limit: int) -> None:
    b = Build("rule")
    popped, _ = rules.update_byte_evictions(b, "u", [b.true] * len(sizes), [b.val(s) for s in sizes], b.val(limit))
    m = _solve_rule(b)
    n_bytes, _ = policy.update_evictions(sizes, [0] * len(sizes), limit, 0)
    assert sum(z3.is_true(m.eval(x)) for x in popped) == n_bytes
