"""Every expected violation of a C++ design lists the routes its counterexamples take
(properties/routes.py), and each listed route is shown by a trace of its own
(tests/data/routes/<design>__<property>__<route>__<way>.jsonl, one per way it can be taken)
that violates the property and is classified as that route, by that way. Verify's default
run is checked in test_verify.py: each of its counterexamples takes a listed route."""

from __future__ import annotations

import pytest

from pcspec.core.ops import CorruptFile, Inject, SlotRestore, parse
from pcspec.core.trace import load
from pcspec.properties.catalogue import get_property
from pcspec.properties.judge import replay
from pcspec.properties.oracle import ORACLE
from pcspec.properties.routes import ROUTES, evidence, evidence_name, ingredients, misplaced, route_of, routes, unlisted
from tests.support import paths

DATA = paths.DATA / "routes"
EVIDENCE = [(evidence_name(d, p, r, w), d, p, r.name, w) for d, p, r, w in evidence()]


def test_every_expected_violation_lists_its_routes() -> None:
    assert not unlisted(), f"violated cells without routes: {unlisted()}"
    assert not misplaced(), f"routes listed for cells that are not expected violated: {misplaced()}"


def test_route_names_are_unique_within_a_cell() -> None:
    for d, row in ROUTES.items():
        for p, rs in row.items():
            names = [r.name for r in rs]
            assert len(names) == len(set(names)), (d, p, names)


def test_ways_tell_the_routes_of_a_cell_apart() -> None:
    # route_of takes the most specific way a trace holds, the first listed on a tie: two
    # routes of one cell sharing a way would make the second unreachable.
    for d, row in ROUTES.items():
        for p, rs in row.items():
            seen: dict[frozenset[str], str] = {}
            for r in rs:
                for w in r.ways:
                    assert w not in seen, f"{d} {p}: {sorted(w)} is a way of both {seen[w]} and {r.name}"
                    seen[w] = r.name


def test_every_evidence_file_is_a_listed_way() -> None:
    files = {f.stem for f in DATA.glob("*.jsonl")}
    expected = {e[0] for e in EVIDENCE}
    assert files == expected, f"missing: {sorted(expected - files)}; stale: {sorted(files - expected)}"


@pytest.mark.parametrize(("stem", "design", "pid", "name", "way"), EVIDENCE, ids=[e[0] for e in EVIDENCE])
def test_each_way_is_shown_by_its_trace(
    stem: str, design: str, pid: str, name: str, way: frozenset[str] | None
) -> None:
    trace = load(DATA / f"{stem}.jsonl")
    assert trace.variant.name == design
    result = replay(trace, [get_property(pid)])
    assert result.matches(trace.expect), f"{stem}: the trace no longer violates {pid}"
    found = ingredients(trace.ops)
    route = route_of(design, pid, trace.ops)
    assert route is not None and route.name == name, (sorted(found), route)
    if way is not None:
        assert route.way_of(found) == way, (sorted(found), sorted(way))


def test_a_trace_with_other_ingredients_takes_no_listed_route() -> None:
    # The check can fail: a counterexample holding none of a cell's ways is unexplained.
    plain = load(DATA / "baseline__PERF-1__deep-copy__any.jsonl").ops  # (no ingredients at all)
    assert route_of("baseline", "CKPT-1", plain) is None
    # A route of no ingredients is taken only without any ...
    swa = load(DATA / "pr30137__STATE-1__swa-off-by-one__none.jsonl").ops
    assert route_of("pr30137", "STATE-1", [*swa, Inject("ckpt.write.tgt")]) is None
    # ... unless it is a rule of the design, which a fault can only accompany.
    assert route_of("baseline", "PERF-1", [*plain, Inject("ckpt.alloc")]) is not None
    assert route_of("fixed", "PERF-1", plain) is None and routes("fixed", "PERF-1") == ()


def test_the_most_specific_way_wins() -> None:
    # Both the bad_alloc's empty checkpoint and a changed tokens marker: the marker's way (two
    # ingredients) is the more specific; an extra ingredient the way does not name is allowed.
    ops = [
        Inject("ckpt.alloc"),
        CorruptFile("c.bin", field="tokens marker", value=0),
        SlotRestore(0, "c.bin"),
    ]
    route = route_of("baseline", "CKPT-1", ops)
    assert route is not None and route.name == "tokens-marker"
    route = route_of("baseline", "CKPT-1", [*ops[:1], Inject("save.read.tgt")])
    assert route is not None and route.name == "empty-checkpoint"


def test_ingredients() -> None:
    ops = [
        parse(op)
        for op in (
            {"op": "inject", "site": "ckpt.alloc"},
            {"op": "corrupt_file", "filename": "a.bin", "field": "ckpt 3 data_tgt length", "value": 0},
            {"op": "corrupt_file", "filename": "a.bin", "truncate": 5},
            {"op": "corrupt_file", "filename": "a.bin", "offset": 4, "data": [1], "remove": 0},
            {"op": "restart", "config": {"n_slots": 1}},
            {"op": "slot_restore", "id_slot": 0, "filename": "a.bin"},
        )
    ]
    assert ingredients(ops) == {
        "ckpt.alloc",
        "corrupt ckpt data_tgt length",
        "corrupt truncate",
        "corrupt splice",
        "slot restore",
    }


def test_replay_names_the_route(capsys: pytest.CaptureFixture[str]) -> None:
    from pcspec.cli import main

    path = DATA / "pr30137__STATE-1__swa-off-by-one__none.jsonl"
    assert main(["replay", str(path)]) == 0
    assert "route of STATE-1 on pr30137: swa-off-by-one" in capsys.readouterr().out
    assert main(["replay", "--json", str(path)]) == 0
    assert '"routes": {"STATE-1": "swa-off-by-one"}' in capsys.readouterr().out.splitlines()[-1]


def test_b11549_violates_file_1_by_baselines_route() -> None:
    """b11549's FILE-1 (`x`, properties/oracle.py): baseline's route, the empty checkpoint a
    bad_alloc leaves beside a generating slot, saved to a slot file whose appendix reader then
    discards it, listed for b11549 too."""
    trace = load(DATA / "b11549__FILE-1__empty-checkpoint__ckpt.alloc+slot-restore.jsonl")
    assert trace.variant.name == "b11549" and ORACLE["b11549"]["FILE-1"] == "x"
    assert replay(trace, [get_property("FILE-1")]).matches(trace.expect)
    assert route_of("b11549", "FILE-1", trace.ops) is not None
