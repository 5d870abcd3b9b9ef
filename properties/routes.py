"""How each expected violation of a C++ design comes about: its *routes*.

A cell of the oracle (a design that violates a property) can often be reached in more than one
way. CKPT-1 on ``baseline`` is reached by an entry emptied by a failed draft load and loaded
again (the reason in ``oracle.REASONS``), but also by the empty checkpoint a ``bad_alloc``
leaves, and by a slot file whose tokens marker was changed. ``pcspec verify`` prints one
counterexample per cell, the shortest its hunt found, and that one can take any route. A
verdict whose printed trace shows one story while the documentation tells another is a claim
nobody can check, so each cell lists every route its hunts have been seen to take, each with
what tells it apart in a trace and why it violates the property, with the C++ lines.

What tells routes apart is a trace's *ingredients* (``ingredients``): the fault sites it injects,
the slot-file fields it corrupts, and whether it restores a slot file. A route lists the
ingredient sets it needs (``ways``: one of them must be in the trace); a trace may hold more (a
fault that only perturbs the timing, a restore of a file that was never saved, which just
clears the slot), and then takes the route whose way it matches most specifically. A route
with no ingredients (the SWA off-by-one of docs/FINDINGS.md, F2) is taken only by a trace without
any, unless the route is a *policy* route: a rule of the design's own (per-holder accounting,
the NaN of f_keep) that faults cannot cause, only accompany. A restart is not an ingredient: it
changes the configuration a route runs under, not the route.

``route_of`` names the route of a trace, or None: a route nobody has explained. The
ingredients tell the listed routes of a cell apart; they do not prove a mechanism, which is
why each way of each listed route (a policy route: the route) has a trace of its own in
``tests/data/routes/`` that must take it, by that way, and violate the property. ``pcspec
verify`` prints the route beside each counterexample, and a test fails when a counterexample
of the default run takes no listed route.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from pcspec.core.ops import CorruptFile, Inject, Operation, SlotRestore
from pcspec.properties.oracle import ORACLE

Ways = tuple[frozenset[str], ...]

_INDEX = re.compile(r" \d+ ")  # "ckpt 3 data_tgt length" -> "ckpt data_tgt length"


def ingredients(ops: Iterable[Operation]) -> frozenset[str]:
    """The fault sites a trace injects, the slot-file fields it corrupts (``corrupt <field>``,
    ``corrupt truncate``, ``corrupt splice``) and ``slot restore`` if it restores a file."""
    out: set[str] = set()
    for op in ops:
        if isinstance(op, Inject):
            out.add(op.site)
        elif isinstance(op, CorruptFile):
            if op.field is not None:
                out.add("corrupt " + _INDEX.sub(" ", op.field))
            else:
                out.add("corrupt truncate" if op.truncate is not None else "corrupt splice")
        elif isinstance(op, SlotRestore):
            out.add("slot restore")
    return frozenset(out)


@dataclass(frozen=True)
class Route:
    name: str
    ways: Ways  # the ingredient sets that lead here; a trace holds one of them (or more)
    why: str | None = None  # None: the cell's reason in oracle.REASONS (docgen says so)
    policy: bool = False  # a rule of the design: the ingredients of its traces are incidental

    def way_of(self, found: frozenset[str]) -> frozenset[str] | None:
        """The way a trace with these ingredients takes this route (the largest it holds), or
        None if it does not take it."""
        held = [w for w in self.ways if w <= found and (w or self.policy or not found)]
        return max(held, key=len, default=None)


def _ways(*sets: Iterable[str]) -> Ways:
    return tuple(frozenset(s) for s in sets)


def _each(*sites: str) -> Ways:
    """One way per site: any one of them alone."""
    return tuple(frozenset([s]) for s in sites)


NONE: Ways = (frozenset(),)
FILE = "slot restore"
MARKER = _ways(["corrupt tokens marker", FILE])

# -- the routes shared by several cells ----------------------------------------------------------

_MARKER_WHY = (
    "a slot file whose tokens marker was changed (any value but -1) is read as a plain token list"
    " (server_tokens::deserialize, server-common.cpp:595-597) and installed as the slot's tokens"
    " (server-context.cpp:2610-2624): the slot bookkeeps the packed words, four more than, and"
    " other than, the tokens whose state the file restored"
)


_EMPTY_CKPT_WHY = (
    "a bad_alloc while creating a checkpoint leaves it appended with an empty payload"
    " (server-context.cpp:2333, caught per slot 2711-2721; the server goes on only when another"
    " slot made the batch its own, else it aborts: docs/FINDINGS.md, F6); restoring it at the"
    " next prompt is a no-op (load_tgt returns on empty data, common.cpp:2332-2334), so the"
    " memory is not rolled back"
)
_CKPT_BAD_ALLOC_WHY = (
    "a bad_alloc while creating a checkpoint (caught per slot, server-context.cpp:2711-2721)"
    " releases the slot before it makes the batch its own (3619-3621); when no other slot did,"
    " its tokens are the batch's and GGML_ASSERT(batch.slot_batched || batch.size() == 0) aborts"
    " (2826; docs/FINDINGS.md, F6, seen on every design's build)"
)


_EMPTIED_ENTRY_WHY = (
    "load clears an entry's main state before the draft load (server-task.cpp:1832-1856): a failed"
    " draft load leaves the entry emptied in the cache, and a later load of it succeeds (0 == 0)"
    " and installs its tokens over unrelated memory"
)


def _shared(name: str, ways: Ways, why: str) -> Callable[[str], Route]:
    """A route several cells take: the same start, then what it does to each property."""
    return lambda then: Route(name, ways, f"{why}; {then}")


_marker = _shared("tokens-marker", MARKER, _MARKER_WHY)
_empty_ckpt = _shared("empty-checkpoint", _each("ckpt.alloc"), _EMPTY_CKPT_WHY)
_emptied_entry = _shared("emptied-entry", _each("load.write.dft"), _EMPTIED_ENTRY_WHY)


SWA_OFF_BY_ONE = Route(
    "swa-off-by-one",
    NONE,
    "of the kind docs/FINDINGS.md, F2 measured on a real server: the checkpoint test compares"
    " the recorded pos_min with a threshold taken before the restore (and the decrement) lower"
    " pos_next"
    " (server-context.cpp:3278, 3339-3342, 3355-3356); the checkpoint restored lacks the SWA cell"
    " the first re-processed token attends to, and the decode computes a wrong state",
)
SLOT_RESTORE = Route(
    "slot-restore",
    _ways([FILE]),
    "a slot restore loads the file's state into the target context only"
    " (server-context.cpp:2600-2603): the draft context keeps what it held; and a state of no"
    " cells clears nothing (state_read continues past a cell count of 0,"
    " llama-kv-cache.cpp:2176-2185), so a file saved from an empty slot leaves the old cells"
    " under an empty token list",
)
SHORT_CKPT_READ = _each("ckpt.read.tgt", "ckpt.read.dft", "state.write.short")  # (the reasons tell it)
CKPT_LOAD_FAILS = Route(
    "checkpoint-load-fails",
    _each("ckpt.write.tgt", "ckpt.write.dft"),
    "a checkpoint whose load fails at a prompt start aborts: failed to restore context checkpoint"
    " (#30137's merged diff, server-context.cpp; October: checkpoint size mismatch, common.cpp:2336-2338)",
)
ESCAPED_BAD_ALLOC = Route(
    "escaped-bad-alloc",
    _each("save.alloc.entry"),
    "states.push_back is outside the try of server_prompt_cache::alloc: the bad_alloc escapes and"
    " terminates the server",
)
SHORT_SAVE = _each("save.read.tgt", "save.read.dft", "state.write.short")
FAILED_SAVE_ALLOC = _each("save.alloc.main", "save.alloc.drft")


def _main(name: str, ways: Ways) -> Route:
    return Route(name, ways)


def _policy(name: str) -> Route:
    return Route(name, NONE, policy=True)


def _rows() -> dict[str, dict[str, tuple[Route, ...]]]:
    ckpt1_then = (
        "the next checkpoint takes n_tokens from the tokens and pos_min/pos_max from that memory"
        " (update_pos, server-context.cpp:2337-2340)"
    )
    ckpt1_marker_then = (
        ckpt1_then + ", just before the decoder refuses the batch, whose positions do not go on from"
        " the memory's (src/llama-batch.cpp:322-346; seen on the binaries: docs/FINDINGS.md, F8)"
    )
    ckpt2_then = "the checkpoints taken or restored then are the state of no prefix of the slot's tokens"
    state1_then = "the memory is the state of other tokens than the slot bookkeeps"
    marker_abort = _marker(
        "from a file saved from an empty slot that is four tokens over an empty sequence, and a prompt"
        " sharing the first aborts: pos_min == -1, but n_past > 0 (server-context.cpp:3281-3284)"
    )
    ckpt_bad_alloc_abort = Route(
        "checkpoint-bad-alloc",
        _each("ckpt.alloc"),
        _CKPT_BAD_ALLOC_WHY + "; beside such a slot, the empty checkpoint it leaves (baseline, #27451)"
        " makes a later seq_rm of a recurrent memory back to n_past fail and abort (common.cpp:1536-1539)",
    )
    PER_HOLDER = {
        "ACC-1": (_policy("per-holder"),),
        "ACC-3": (_policy("per-holder"),),
    }
    common: dict[str, tuple[Route, ...]] = {
        # (a draft state a short read left partial, kept by designs without fill checks (RB-1),
        # fails its load the same way)
        "IMM-2": (_main("emptied-entry", _each("load.write.dft", "save.read.dft")),),
        "RB-3": (_main("escaped-bad-alloc", _each("save.alloc.entry")),),
        "PROGRESS-1": (_policy("busy-pinned-load"),),
        "PERF-2": (_policy("supersede"),),
        "REUSE-1": (_policy("live-memory-test"),),
        "REUSE-2": (_policy("nan-f-keep"),),
        "PERF-1": (_policy("deep-copy"),),
        "RESTORE-1": (_main("empty-checkpoint", _each("ckpt.alloc")),),
        "FILE-1": (_main("empty-checkpoint", _ways(["ckpt.alloc", FILE])),),
    }
    restore1_marker = _marker(
        "a prompt sharing an appendix checkpoint's n_tokens with those tokens keeps it at prompt"
        " start (pos_max and n_tokens within the shared prefix), though it is the state of no"
        " prefix of the prompt"
    )
    baseline = {
        **common,
        "RESTORE-1": (*common["RESTORE-1"], restore1_marker),
        "RB-1": (_main("short-save", SHORT_SAVE),),
        "RB-2": (_main("failed-save", FAILED_SAVE_ALLOC),),
        "LIVE-1": (_main("save-bad-alloc", FAILED_SAVE_ALLOC),),
        "CKPT-1": (
            _main("emptied-entry", _each("load.write.dft")),
            _empty_ckpt(ckpt1_then),
            _marker(ckpt1_marker_then),
        ),
        "CKPT-2": (
            _main("empty-checkpoint", _each("ckpt.alloc")),
            _emptied_entry(ckpt2_then),
            _marker(ckpt2_then),
        ),
        "STATE-1": (
            _main("emptied-entry", _each("load.write.dft")),
            _empty_ckpt("the decode after it continues from memory of another prefix: " + state1_then),
            _marker(state1_then),
            SLOT_RESTORE,
            SWA_OFF_BY_ONE,
        ),
        "NOABORT-1": (
            _main("short-checkpoint-read", SHORT_CKPT_READ),
            ESCAPED_BAD_ALLOC,
            CKPT_LOAD_FAILS,
            ckpt_bad_alloc_abort,
            marker_abort,
        ),
    }
    pr30137 = {
        **{k: baseline[k] for k in ("RB-3", "PROGRESS-1", "PERF-2", "REUSE-1", "REUSE-2", "LIVE-1")},
        "IMM-2": (_main("emptied-entry", _each("load.write.dft")),),  # (a short fill is popped)
        **PER_HOLDER,
        "RB-2": (_main("pop-after-room", SHORT_SAVE + FAILED_SAVE_ALLOC),),
        "CKPT-1": (_main("emptied-entry", _each("load.write.dft")), _marker(ckpt1_marker_then)),
        "RESTORE-1": (restore1_marker,),
        "CKPT-2": (
            # (only the target payload's length: a changed draft or speculative length was not
            # seen to parse into a wrong checkpoint, by the hunts or by trying each value)
            _main("appendix-length", _ways(["corrupt ckpt data_tgt length", FILE])),
            _emptied_entry(ckpt2_then),
            _marker(ckpt2_then),
        ),
        "STATE-1": (
            _main("emptied-entry", _each("load.write.dft")),
            _marker(state1_then),
            SLOT_RESTORE,
            SWA_OFF_BY_ONE,
        ),
        "NOABORT-1": (
            *(r for r in baseline["NOABORT-1"] if r.name != "checkpoint-bad-alloc"),
            Route("checkpoint-bad-alloc", _each("ckpt.alloc"), _CKPT_BAD_ALLOC_WHY),
        ),
    }
    pr27451 = {
        **{k: v for k, v in common.items() if k != "RB-3"},
        **PER_HOLDER,
        "RB-1": baseline["RB-1"],
        "RB-2": (_main("failed-save", FAILED_SAVE_ALLOC + _each("save.alloc.entry")),),
        "LIVE-1": (_main("save-bad-alloc", FAILED_SAVE_ALLOC + _each("save.alloc.entry")),),
        "RESTORE-1": baseline["RESTORE-1"],
        "CKPT-1": baseline["CKPT-1"],
        "CKPT-2": baseline["CKPT-2"],
        "STATE-1": (
            _main("emptied-entry", _each("load.write.dft")),
            *baseline["STATE-1"][1:],
        ),
        "NOABORT-1": tuple(r for r in baseline["NOABORT-1"] if r.name != "escaped-bad-alloc"),
    }
    # b11549 keeps baseline's code on every route (properties/oracle.py); its traces differ only
    # where its rules do: a request's message spans count only from a chat session there, so
    # the SWA off-by-one's trace sends its prompts as chat requests.
    b11549 = dict(baseline)
    b11549["RESTORE-1"] = (
        *baseline["RESTORE-1"],
        Route(
            "unshared-last-position",
            NONE,
            "the restore search skips only checkpoints with pos_max > pos_next (server-context.cpp:"
            "3735-3737 of b11549): one whose last position is the prompt's first unshared one (pos_max ="
            " pos_next = n_prefix) is restored, the state of a token the prompt does not share; #30137's"
            " merged diff erases checkpoints with n_tokens > n_prefix before the search",
        ),
    )
    return {"baseline": baseline, "pr30137": pr30137, "pr27451": pr27451, "b11549": b11549}


ROUTES: dict[str, dict[str, tuple[Route, ...]]] = _rows()


def routes(design: str, pid: str) -> tuple[Route, ...]:
    """The routes of one cell (none for a cell that holds, or for a design not in the table)."""
    return ROUTES.get(design, {}).get(pid, ())


def route_of(design: str, pid: str, ops: Sequence[Operation]) -> Route | None:
    """The listed route a counterexample of this cell takes, or None (unexplained)."""
    found = ingredients(ops)
    best: tuple[int, Route] | None = None
    for r in routes(design, pid):
        way = r.way_of(found)
        if way is not None and (best is None or len(way) > best[0]):  # (a tie keeps the first listed)
            best = (len(way), r)
    return None if best is None else best[1]


def route_name(design: str, pid: str, ops: Sequence[Operation]) -> str | None:
    """What verify and replay report: the route's name, "" for a trace of a cell with routes
    that takes none of them, None for a cell without routes (fixed, a mutant, one that holds)."""
    if not routes(design, pid):
        return None
    r = route_of(design, pid, ops)
    return "" if r is None else r.name


def evidence_name(design: str, pid: str, route: Route, way: frozenset[str] | None) -> str:
    """The file stem, in ``tests/data/routes/``, of the trace that shows one way of a route
    (``way`` None: a policy route, shown once)."""
    tag = "any" if way is None else ("+".join(sorted(way)) or "none")
    return f"{design}__{pid}__{route.name}__{tag.replace(' ', '-')}"


def evidence() -> list[tuple[str, str, Route, frozenset[str] | None]]:
    """Every (design, property, route, way) a trace must show: each way of each route, and a
    policy route once."""
    return [
        (d, p, r, w)
        for d, row in ROUTES.items()
        for p, rs in row.items()
        for r in rs
        for w in ((None,) if r.policy else r.ways)
    ]


def unlisted() -> list[tuple[str, str]]:
    """Violated cells of the C++ designs that list no route (must be none)."""
    return [(d, p) for d in ROUTES for p, e in ORACLE[d].items() if e == "x" and not routes(d, p)]


def misplaced() -> list[tuple[str, str]]:
    """Cells that list routes but are not expected violated (must be none)."""
    return [(d, p) for d, row in ROUTES.items() for p in row if ORACLE[d].get(p) != "x"]


__all__ = [
    "ROUTES",
    "Route",
    "evidence",
    "evidence_name",
    "ingredients",
    "misplaced",
    "route_name",
    "route_of",
    "routes",
    "unlisted",
]
