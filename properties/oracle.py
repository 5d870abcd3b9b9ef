"""The expected verdicts: ``x`` must be found violated, ``.`` must hold.

Each ``x`` carries the reason it follows from the C++ and the pull requests it cites
(docs/SOURCES.md); a change to this table needs a reason here. A reason that begins "expected to
hold at first" is a cell first set to ``.`` from reading the code, which the model then showed
violated. Mutants are expected to be caught by the properties listed in
``MUTANT_TARGETS`` (at least one of them): violated by the mutant where its base design
(``Design.base``) does not violate it on the same trace (``judge.base_violates``).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal, cast

from pcspec.properties.catalogue import CATALOGUE

Expect = Literal["x", ".", "?"]

# The columns of the rows below: the catalogue's properties, in its order (a property moved in
# the catalogue moves its column here too).
_COLUMNS = [p.id for p in CATALOGUE]

# One row per design, in _COLUMNS order (UNINIT-1/UNINIT-2 and CKPT-1/CKPT-2 were first one column each;
# a property added to the catalogue needs its column here, which zip(strict=True) insists on).
# `?`: the extended catalogue (FILE-2, CKPT-4, PERF-3): no expectation except for `fixed`, which must
# hold each; on the other designs the verdict is whatever the model shows, with its trace.
# REUSE-1, REUSE-2 and CKPT-3 (extended too) have their verdicts on the C++ designs set from what
# the model showed, with the reasons below, so that verify keeps hunting and checking them.
_ROWS = {
    "baseline": ". x . . x x x . . . . . x x x x x x x ? x x ? ? x x x . . .",
    "pr30137": ". x . . . x x x . x . . x x x x x x . ? x . ? ? x x x . . .",
    "pr27451": ". x . . x x . x . x . . x x x x x x x ? x x ? ? x x x . . .",
    "fixed": ". . . . . . . . . . . . . . . . . . . . . . . . . . . . . .",
    # The upstream build b11549 (model/rulesets.py: B11549, the rule set of its tree; no design's
    # patch): baseline's verdicts. It keeps baseline's code wherever a cell's route runs; what it
    # changed (the merged checkpoint appendix, non-aborting file-checkpoint loads, chat-only
    # message spans) moves no verdict (REASONS below, docs/RULESETS.md). FILE-1 too: it was `?`
    # while the walk first met baseline's route there at example 10,719 of seed 0, beyond verify's
    # hunt of 4,000 (message spans of raw requests count for nothing there, checkpoints are
    # rarer); with the rule checkpoint_fails_beside the hunt finds it in 20 of 20 seeds.
    "b11549": ". x . . x x x . . . . . x x x x x x x ? x x ? ? x x x . . .",
}

ORACLE: dict[str, dict[str, Expect]] = {
    v: cast(dict[str, Expect], dict(zip(_COLUMNS, row.split(), strict=True))) for v, row in _ROWS.items()
}

REASONS: dict[str, dict[str, str]] = {
    "baseline": {
        "REUSE-1": (
            "the live-memory test pos_min >= pos_min_thold (server-context.cpp:3278, 3330) has no pos_min == 0"
            " escape, unlike the checkpoint test (3340): an SWA slot sharing at most n_swa tokens with the new"
            " prompt (thold 0, pos_min 0) looks for a checkpoint and, holding none, re-processes from 0; the"
            " test is also one cell stricter than the window needs (docs/FINDINGS.md, F3) and never uses a"
            " recurrent rollback depth"
        ),
        "REUSE-2": (
            "a task pinned to an empty slot: f_keep = f_sim_best * n / 0 is NaN (server-context.cpp:1578), NaN"
            " < 0.5 is false (1586-1588), so the cache is never consulted although an entry shares the prompt"
        ),
        "FILE-1": (
            "expected to hold at first, changed (found by a longer walk than the default survey): the"
            " checkpoint a bad_alloc leaves appended with an empty payload (CKPT-2) is written into the"
            " slot file's appendix; the appendix reader rejects a record with an empty data_tgt and with"
            " it the whole appendix (#26004's reader, as model/slotfile.py reads it): the file the server"
            " wrote does not restore its checkpoints"
        ),
        "CKPT-1": (
            "expected to hold at first, changed: load clears an entry's main state before the draft load"
            " (server-task.cpp:1832-1856), so a failed draft load leaves an emptied entry; a later load"
            " of it succeeds (a 0-byte set_data_ext returns 0 == size) and installs its tokens over"
            " unrelated memory; the next checkpoint takes n_tokens from the tokens and pos_min/pos_max"
            " from that memory (update_pos, server-context.cpp:2337-2340): pos_max != n_tokens - 1"
        ),
        "CKPT-2": (
            "re-derived after the model took prompt start and the first batch as one pass: a bad_alloc"
            " while creating a checkpoint is caught per slot (iterate, server-context.cpp:2700-2710) after"
            " emplace_back appended it (2333): a checkpoint with an empty payload stays in the list"
        ),
        "RESTORE-1": (
            "expected to hold at first, changed: that empty checkpoint (bad_alloc after emplace_back) is kept"
            " at the next prompt start although it is the state of no prefix; restoring it is a no-op"
            " (load_tgt returns early on empty data, common.cpp:2332-2334)"
        ),
        "IMM-2": (
            "load clears an entry's main state before the draft load; a failed draft load leaves"
            " the entry emptied in the cache"
        ),
        "RB-1": ("prompt_save ignores the byte count of get_data_ext: a short read leaves a zero-filled partial entry"),
        "RB-2": (
            "alloc removes obsolete entries and makes room before the fill; a bad_alloc shrinks the limit and evicts"
        ),
        "RB-3": ("states.push_back (the deep copy of the checkpoints) is outside the try: bad_alloc escapes"),
        "STATE-1": (
            "a later load of an emptied entry succeeds with 0 == 0 and installs its tokens over unrelated memory"
        ),
        "NOABORT-1": ("a short checkpoint read aborts (checkpoint size mismatch); an escaped bad_alloc terminates"),
        "PROGRESS-1": (
            "a task pinned to a busy slot loads a cache entry longer than the running task's prompt into"
            " that slot (get_available_slot updates the cache before the defer, server-context.cpp"
            " 1534-1631); the prompt loop then adds no token and never finishes (docs/FINDINGS.md, F1)"
        ),
        "LIVE-1": ("bad_alloc sets limit_size = 0.4 * size() for good"),
        "PERF-1": ("the cache entry gets a deep copy of the slot's checkpoints"),
        "PERF-2": ("create_checkpoint supersedes the checkpoint the task just restored with an identical one (#30683)"),
    },
    "pr30137": {
        "REUSE-1": ("unchanged from baseline: #30137 does not touch the resume"),
        "REUSE-2": ("unchanged from baseline: #30137 does not touch slot selection"),
        "CKPT-1": ("unchanged from baseline: the emptied entry loaded again"),
        "RESTORE-1": (
            "expected to hold at first, changed (a '.' cell is surveyed, not hunted; the survey's walk met it"
            " once the boundary rule was added, and a hunt finds it at the code before that too): a slot file"
            " whose tokens marker was changed installs the packed words as the slot's tokens and its appendix"
            " checkpoints over them; a later prompt sharing a checkpoint's n_tokens keeps it (the invalidation"
            " compares numbers, pos_max and n_tokens), though it is not the state of a prefix of the prompt"
        ),
        "CKPT-2": (
            "re-derived after the model took prompt start and the first batch as one pass: a slot file"
            " whose checkpoint record had a length field changed still parses (the appendix reader of"
            " #30137's merged diff checks counts and bounds, not the payload), and the restored checkpoint is the"
            " state of no prefix of the tokens; fixed dry-reads the payload and ignores the appendix"
        ),
        "IMM-2": ("unchanged from baseline: load clears main before the draft load"),
        "RB-2": ("the pop_back comes after obsolete removal and making room (point 3 of the #30137 review)"),
        "RB-3": ("unchanged from baseline: push_back outside the try"),
        "ACC-1": ("size() counts a shared checkpoint once per holding entry (point 1 of the #30137 review)"),
        "ACC-3": ("make-room evicts for bytes that are already shared (point 1(b) of the #30137 review)"),
        "STATE-1": ("unchanged from baseline: the emptied-entry load"),
        "NOABORT-1": ("unchanged from baseline"),
        "PROGRESS-1": ("unchanged from baseline: the busy pinned slot's cache load"),
        "LIVE-1": ("unchanged from baseline"),
        "PERF-2": ("unchanged from baseline (#30683 is a follow-up)"),
    },
    "pr27451": {
        "REUSE-1": ("unchanged from baseline: #27451 does not touch the resume"),
        "REUSE-2": ("unchanged from baseline: #27451 does not touch slot selection"),
        "CKPT-1": ("unchanged from baseline: the emptied entry loaded again (load is unchanged by #27451)"),
        "CKPT-2": ("unchanged from baseline: create_checkpoint appends before it fills (#27451 keeps it)"),
        "RESTORE-1": ("unchanged from baseline: the empty checkpoint a bad_alloc leaves"),
        "FILE-1": ("unchanged from baseline: the empty checkpoint a bad_alloc leaves, saved and then refused"),
        "PERF-1": (
            "expected to hold at first, changed: #27451 shares the target and draft payloads but its"
            " description keeps the speculative state value-owned: a save copies every checkpoint's data_spec"
        ),
        "IMM-2": ("load is unchanged by #27451"),
        "RB-1": ("no fill validation in #27451"),
        "RB-2": ("the same alloc order; bad_alloc shrinks the limit"),
        "ACC-1": ("per-holder accounting kept on purpose (#27451's description, on cache accounting)"),
        "ACC-3": ("per-holder accounting evicts early (#27451's description says so)"),
        "STATE-1": ("unchanged from baseline: the emptied-entry load"),
        "NOABORT-1": ("checkpoint fill mismatch still aborts"),
        "PROGRESS-1": ("unchanged from baseline: the busy pinned slot's cache load"),
        "LIVE-1": ("the existing recovery path shrinks the limit"),
        "PERF-2": ("unchanged from baseline"),
    },
    # Lines of b11549's tree (tools/server/ unless a path is given; docs/RULESETS.md says how to
    # get it). Every other x: baseline's reason, the same code at the lines RULESETS.md maps.
    "b11549": {
        "CKPT-2": (
            "unchanged from baseline: create_checkpoint appends before it fills (server-context.cpp:2566-2575"
            " of b11549)"
        ),
        "RB-2": ("the same alloc: bad_alloc shrinks the limit (server-task.cpp:1773 of b11549)"),
        "RB-3": ("states.push_back stays outside the try (server-task.cpp:1782 of b11549)"),
        "NOABORT-1": (
            "a checkpoint made in this process that fails to load still aborts (server-context.cpp:3749 of"
            " b11549); only one restored from a slot file falls back"
        ),
    },
}

# Each mutant must be caught by at least one of these properties.
MUTANT_TARGETS: dict[str, tuple[str, ...]] = {
    "mutant:inplace-update": ("IMM-1",),
    "mutant:noinit-unchecked": ("UNINIT-1", "UNINIT-2"),
    "mutant:free-shared": ("REF-1",),
    "mutant:undercount": ("LIMIT-1", "ACC-1"),
    "mutant:no-make-room": ("ACC-2",),
    "mutant:keep-invalidated": ("CKPT-2", "RESTORE-1"),
    "mutant:no-cap": ("CKPT-1",),
    "mutant:needless-restore": ("PERF-3",),
    "mutant:sweep-always": ("CKPT-4",),
    "mutant:sweep-full-once": ("CKPT-4",),
    "mutant:invalidate-pos-min": ("CKPT-4",),
    "mutant:restore-uncapped": ("CKPT-1",),
    "mutant:busy-slot-update": ("PERF-2", "PROGRESS-1"),
    "mutant:appendix-uncounted": ("FILE-2",),
    "mutant:trust-size-field": ("FILE-1",),
    "mutant:live-thold": ("REUSE-1",),
    "mutant:empty-pinned-skips-cache": ("REUSE-2",),
    "mutant:no-tail-break": ("CKPT-3",),
    "mutant:break-every-user-message": ("CKPT-5",),
    "mutant:load-nan-f-keep": ("REUSE-2",),
    # Mutants of baseline: caught by a property baseline does not violate on the same trace.
    "mutant:thold-minus-one-always": ("RESTORE-2",),
    "mutant:thold-minus-one-never": ("RESTORE-2",),
    "mutant:restore-pos-min-zero-rejected": ("RESTORE-2",),
    "mutant:restore-pos-max-unchecked": ("RESTORE-2",),
}


def expected(variant: str, prop: str, declared: Collection[str] = ()) -> Expect:
    """What ``variant`` must show for ``prop``: the oracle's mark for a design (``?`` for a
    cell of the extended catalogue with no expectation); ``x`` for a mutant's target (``?``
    for its other properties, which nothing requires either way); for any other variant (one
    of the user's own) ``x`` for the violations its author ``declared`` and ``.`` for every
    other property: a variant nobody has judged must hold everything, so that anything it
    violates fails the run."""
    if variant in ORACLE:
        return ORACLE[variant].get(prop, "?")
    if variant in MUTANT_TARGETS:
        return "x" if prop in MUTANT_TARGETS[variant] else "?"
    return "x" if prop in declared else "."
