"""Hand-written llama-server logs that each break one rule, and the deviation each produces.

The logs are built from the exact message formats of the server (tools/server/server-context.cpp
and server-task.cpp at 0c1e570) with the timestamp/level prefix. Start-up: 1 slot,
--ctx-checkpoints 3, --checkpoint-min-step 64, --cache-ram 1. A "good" variant of each scenario
checks clean, so each test shows that the one broken line, and nothing else, makes the rule fire.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import pytest

from pcspec.logcheck import RULES, check_events, parse_options, parse_text
from pcspec.logcheck.checker import CheckResult
from pcspec.logcheck.options import POINTS


def slot(task: int, func: str, msg: str, sid: int = 0, lvl: str = "I") -> str:
    return f"{lvl} slot {func:>12}: id {sid:2d} | task {task} | {msg}"


def srv(func: str, msg: str, lvl: str = "I") -> str:
    return f"{lvl} srv  {func:>12}: {msg}"


def stamp(lines: Iterable[str]) -> str:
    out = []
    for i, line in enumerate(lines):
        out.append(f"0.{i // 1000 % 60:02d}.{i % 1000:03d}.000 {line}")
    return "\n".join(out) + "\n"


def startup(cap: int = 3, spacing: int = 64, limit: str = "1 MiB") -> list[str]:
    return [
        srv("load_model", "initializing, n_slots = 1, n_ctx_slot = 4096, kv_unified = 'false'"),
        slot(-1, "load_model", "new slot, n_ctx = 4096"),
        srv("load_model", f"prompt cache is enabled, size limit: {limit}"),
        srv("load_model", f"context checkpoints enabled, max = {cap}, min spacing = {spacing}"),
        srv("init", "idle slots will be saved to prompt cache upon starting a new task"),
    ]


def ckpt_fields(pos_min: int, pos_max: int, n_tokens: int, size: str = "0.016") -> str:
    return f"(pos_min = {pos_min}, pos_max = {pos_max}, n_tokens = {n_tokens}, size = {size} MiB)"


def create(task: int, k: int, cap: int, pos_min: int, pos_max: int, n_tokens: int | None = None,
           erased: Iterable[str] = (), size: str = "0.016", sid: int = 0) -> list[str]:
    """One prompt step that creates a checkpoint at ``n_tokens`` (default pos_max + 1)."""
    n = pos_max + 1 if n_tokens is None else n_tokens
    return [
        slot(task, "operator()", f"cached n_tokens = {n}, memory_seq_rm [{n}, end)", sid),
        slot(task, "operator()", f"main/do_checkpoint = yes, pos_min = {pos_min}, "
             f"pos_max = {pos_max}", sid, lvl="D"),
        *erased,
        slot(task, "create_check", f"created context checkpoint {k} of {cap} "
             + ckpt_fields(pos_min, pos_max, n, size), sid),
    ]


def cold_task(task: int, n_prompt: int, steps: list[list[str]], released: int) -> list[str]:
    """A task on an empty slot: LRU pick, empty cache update, prompt steps, release."""
    return [
        slot(-1, "get_availabl", " - skipping, slot is empty"),
        slot(-1, "get_availabl", "selected slot by LRU, t_last = -1"),
        srv("get_availabl", "updating prompt cache"),
        srv("load", " - looking for better prompt, base f_keep = -1.000, f_sim = 0.000"),
        srv("update", " - cache state: 0 prompts, 0.000 MiB (limits: 1.000 MiB, 4096 tokens, "
            "1048576 est)"),
        slot(task, "launch_slot_", "processing task, is_child = 0"),
        slot(task, "operator()", f"new prompt, n_ctx_slot = 4096, n_keep = 0, "
             f"task.n_tokens = {n_prompt}"),
        slot(task, "operator()", "cached n_tokens = 0, memory_seq_rm [0, end)"),
        *[line for step in steps for line in step],
        slot(task, "release", f"stop processing: n_tokens = {released}, truncated = 0"),
    ]


def check(lines: list[str], **opts: str) -> CheckResult:
    read = parse_text(stamp(lines), "<test>")
    options = replace(parse_options([f"{k if k in POINTS else k.replace('_', '-')}={v}" for k, v in opts.items()
                                     if k != "rules"]), rules=opts.get("rules", "auto"))
    return check_events(read.events, options, "<test>", read.n_lines, read.notes)


def line_of(lines: list[str], needle: str, nth: int = 0) -> int:
    hits = [i + 1 for i, line in enumerate(lines) if needle in line]
    return hits[nth]


def drop_after(lines: list[str], start: int, needle: str) -> list[str]:
    """``lines`` without the lines after index ``start`` that contain ``needle``."""
    return [x for k, x in enumerate(lines) if k < start or needle not in x]


def found(result: CheckResult) -> list[tuple[int, str]]:
    return [(d.line, d.rule) for d in result.deviations]


# ---- checkpoints: cap, count, positions, sweep, supersede ---------------------------------


def test_cap_exceeded() -> None:
    good = startup() + cold_task(1, 500, [
        create(1, 1, 3, 0, 99), create(1, 2, 3, 0, 199), create(1, 3, 3, 44, 299),
        create(1, 3, 3, 144, 399, erased=[slot(1, "create_check", "erasing old context "
                                                "checkpoint " + ckpt_fields(0, 99, 100), lvl="W")]),
    ], released=510)
    assert found(check(good)) == []
    bad = startup() + cold_task(1, 500, [
        create(1, 1, 3, 0, 99), create(1, 2, 3, 0, 199), create(1, 3, 3, 44, 299),
        create(1, 4, 3, 144, 399),
    ], released=510)
    at = line_of(bad, "created context checkpoint 4 of 3")
    assert found(check(bad)) == [(at, "ckpt-cap"), (at, "ckpt-cap-evict")]


def test_created_count_wrong() -> None:
    bad = startup() + cold_task(1, 400, [
        create(1, 1, 3, 0, 99), create(1, 3, 3, 0, 199),
    ], released=410)
    at = line_of(bad, "created context checkpoint 3 of 3")
    assert found(check(bad)) == [(at, "ckpt-count")]
    other_cap = startup() + cold_task(1, 400, [create(1, 1, 8, 0, 99)], released=410)
    at = line_of(other_cap, "created context checkpoint 1 of 8")
    assert found(check(other_cap)) == [(at, "ckpt-count")]


def test_creation_position() -> None:
    bad = startup() + cold_task(1, 400, [create(1, 1, 3, 0, 99, n_tokens=120)], released=410)
    at = line_of(bad, "created context checkpoint")
    # n_tokens != pos_max + 1, and != the step's cached n_tokens (which is 120 here, so that
    # one holds); the memory range matches do_checkpoint
    assert found(check(bad)) == [(at, "ckpt-position")]
    assert found(check(bad, positions="mtmd")) == []
    moved = startup() + cold_task(1, 400, [[
        slot(1, "operator()", "cached n_tokens = 100, memory_seq_rm [100, end)"),
        slot(1, "operator()", "main/do_checkpoint = yes, pos_min = 0, pos_max = 98", lvl="D"),
        slot(1, "create_check", "created context checkpoint 1 of 3 " + ckpt_fields(0, 99, 100)),
    ]], released=410)
    at = line_of(moved, "created context checkpoint")
    assert found(check(moved)) == [(at, "ckpt-position")]


def test_creation_records_the_payload_start_under_pos_min_payload() -> None:
    """pos-min=payload (the fixed build's patch 0005): an SWA checkpoint records where its data
    starts, later than the memory's pos_min; the October rule (memory) flags it. The start may
    not lie outside the memory's range (the server's n_swa is not known here: no invalidation)."""
    def run(recorded: int) -> list[str]:
        return startup() + cold_task(1, 400, [[
            slot(1, "operator()", "cached n_tokens = 100, memory_seq_rm [100, end)"),
            slot(1, "operator()", "main/do_checkpoint = yes, pos_min = 10, pos_max = 99", lvl="D"),
            slot(1, "create_check", "created context checkpoint 1 of 3 " + ckpt_fields(recorded, 99, 100)),
        ]], released=410)

    payload = run(68)
    at = line_of(payload, "created context checkpoint")
    assert found(check(payload)) == [(at, "ckpt-position")]
    assert found(check(payload, checkpoint_pos_min="fixed")) == []
    assert found(check(run(10), checkpoint_pos_min="fixed")) == []  # a window holding the whole memory
    assert found(check(run(5), checkpoint_pos_min="fixed")) == [(at, "ckpt-position")]


def test_cap_eviction_not_the_oldest() -> None:
    # the full list is [0, 99], [0, 199], [44, 299]: the cap must erase [0, 99]
    wrong = slot(1, "create_check", "erasing old context checkpoint " + ckpt_fields(0, 199, 200),
                 lvl="W")
    lines = startup() + cold_task(1, 500, [
        create(1, 1, 3, 0, 99), create(1, 2, 3, 0, 199), create(1, 3, 3, 44, 299),
        create(1, 3, 3, 144, 399, erased=[wrong]),
    ], released=510)
    at = line_of(lines, "erasing old context checkpoint")
    assert found(check(lines)) == [(at, "ckpt-cap-evict")]


def sweep_scenario(erased: list[str]) -> list[str]:
    """Task 1 leaves checkpoints at n = 100 and 150; task 2 (a longer prompt on the same slot)
    creates n = 300. The list holds 2 of 3, so the November sweep runs: 100 is kept, 150 is
    within 64 of it and belongs to another task, so it goes."""
    return startup() + cold_task(1, 200, [
        create(1, 1, 3, 0, 99), create(1, 2, 3, 0, 149),
    ], released=160) + [
        slot(-1, "get_availabl", " - checking sim = 0.400 (160/400) > 0.100"),
        slot(-1, "get_availabl", "selected slot by LCP similarity, f_sim_best = 0.400 "
             "(> 0.100 thold), f_keep = 1.000"),
        slot(2, "launch_slot_", "processing task, is_child = 0"),
        slot(2, "operator()", "new prompt, n_ctx_slot = 4096, n_keep = 0, task.n_tokens = 400"),
        slot(2, "operator()", "cached n_tokens = 160, memory_seq_rm [160, end)"),
        *create(2, 3 - len(erased), 3, 44, 299, erased=erased),
        slot(2, "release", "stop processing: n_tokens = 410, truncated = 0"),
    ]


def test_too_close_sweep() -> None:
    good = sweep_scenario([slot(2, "create_check", "erasing context checkpoint too close to an "
                                "earlier one " + ckpt_fields(0, 149, 150))])
    assert found(check(good)) == []
    missing = sweep_scenario([])
    at = line_of(missing, "created context checkpoint 3 of 3")
    assert found(check(missing)) == [(at, "ckpt-sweep")]
    # the August 2026 rule (sweep on every creation) gives the same here
    assert found(check(missing, sweep="always")) == [(at, "ckpt-sweep")]
    assert found(check(missing, sweep="none")) == []
    wrong = sweep_scenario([slot(2, "create_check", "erasing context checkpoint too close to an "
                                 "earlier one " + ckpt_fields(0, 99, 100))])
    at = line_of(wrong, "too close")
    assert found(check(wrong)) == [(at, "ckpt-sweep")]


def test_sweep_only_when_full() -> None:
    """With a cap of 8 the list (2 + 1) is not full: the November code does not sweep, the
    August 2026 code did."""
    lines = [line.replace("max = 3,", "max = 8,").replace(" of 3 (", " of 8 (")
             for line in sweep_scenario([])]
    assert found(check(lines)) == []
    at = line_of(lines, "created context checkpoint 3 of 8")
    assert found(check(lines, sweep="always")) == [(at, "ckpt-sweep")]


def test_supersede() -> None:
    # task 2 creates a checkpoint at n_tokens = 150, which the list already holds
    lines = startup() + cold_task(1, 200, [
        create(1, 1, 3, 0, 99), create(1, 2, 3, 0, 149),
    ], released=160) + [
        slot(-1, "get_availabl", " - checking sim = 0.375 (150/400) > 0.100"),
        slot(-1, "get_availabl", "selected slot by LCP similarity, f_sim_best = 0.375 "
             "(> 0.100 thold), f_keep = 0.938"),
        slot(2, "launch_slot_", "processing task, is_child = 0"),
        slot(2, "operator()", "new prompt, n_ctx_slot = 4096, n_keep = 0, task.n_tokens = 400"),
        slot(2, "operator()", "cached n_tokens = 150, memory_seq_rm [150, end)"),
    ]
    good = lines + create(2, 2, 3, 0, 149, erased=[
        slot(2, "create_check", "erasing context checkpoint too close to an earlier one "
             + ckpt_fields(0, 149, 150)),
    ])
    # the sweep already removed 150: nothing left to supersede
    assert found(check(good)) == []
    bad = [line.replace("max = 3,", "max = 8,").replace(" of 3 (", " of 8 (") for line in
           lines + create(2, 3, 8, 0, 149)]
    at = line_of(bad, "created context checkpoint 3 of 8")
    assert found(check(bad)) == [(at, "ckpt-supersede")]
    assert found(check(bad, supersede="off")) == []
    fixed = [line.replace("max = 3,", "max = 8,").replace(" of 3 (", " of 8 (") for line in
             lines + create(2, 2, 8, 0, 149, erased=[
                 slot(2, "create_check", "superseding context checkpoint at n_tokens = 150")])]
    assert found(check(fixed)) == []


# ---- prompt start: scan, threshold, choice, positions, invalidation, n_past ----------------


def restore_scenario(after: list[str], lcp: int = 250, b: tuple[int, int] = (100, 199)) -> list[str]:
    """Task 1 leaves A [0, 99], B ``b`` ([100, 199]), C [200, 279] (n_tokens = pos_max + 1).
    Task 2 (300 tokens) shares ``lcp`` tokens with the slot; an SWA model with n_swa = 32."""
    return startup() + cold_task(1, 290, [
        create(1, 1, 3, 0, 99), create(1, 2, 3, *b), create(1, 3, 3, 200, 279),
    ], released=295) + [
        slot(-1, "get_availabl", f" - checking sim = {lcp / 300:.3f} ({lcp}/300) > 0.100"),
        slot(-1, "get_availabl", f"selected slot by LCP similarity, f_sim_best = "
             f"{lcp / 300:.3f} (> 0.100 thold), f_keep = {lcp / 295:.3f}"),
        slot(2, "launch_slot_", "processing task, is_child = 0"),
        slot(2, "operator()", "new prompt, n_ctx_slot = 4096, n_keep = 0, task.n_tokens = 300"),
        *after,
    ]


def checking(pos_min: int, pos_max: int, thold: int) -> str:
    return slot(2, "operator()", f"checking checkpoint with [{pos_min}, {pos_max}] against "
                f"{thold}...")


def restored(pos_min: int, pos_max: int, n_tokens: int, n_past: int) -> str:
    return slot(2, "operator()", f"restored context checkpoint (pos_min = {pos_min}, pos_max = "
                f"{pos_max}, n_tokens = {n_tokens}, n_past = {n_past}, size = 0.016 MiB)")


def invalidated(pos_min: int, pos_max: int, n_tokens: int, pos_next: int) -> str:
    return slot(2, "operator()", f"erased invalidated context checkpoint (pos_min = {pos_min}, "
                f"pos_max = {pos_max}, n_tokens = {n_tokens}, n_swa = 32, pos_next = {pos_next}"
                ", size = 0.016 MiB)")


def cached(n: int) -> str:
    return slot(2, "operator()", f"cached n_tokens = {n}, memory_seq_rm [{n}, end)")


GOOD_RESTORE = [
    checking(200, 279, 218), checking(100, 199, 218), restored(100, 199, 200, 199),
    invalidated(200, 279, 280, 199), cached(199),
]


def test_restore_good() -> None:
    result = check(restore_scenario(GOOD_RESTORE))
    assert found(result) == []
    assert result.stats.ckpt_restored == 1 and result.stats.ckpt_invalidated == 1


def test_wrong_restore_choice() -> None:
    # A is older than B: restore_choice takes the newest usable one, B
    after = [checking(200, 279, 218), checking(100, 199, 218), checking(0, 99, 218),
             restored(0, 99, 100, 99), invalidated(100, 199, 200, 99),
             invalidated(200, 279, 280, 99), cached(99)]
    lines = restore_scenario(after)
    # the scan passed over B without taking it
    assert found(check(lines)) == [(line_of(lines, "restored context"), "restore-choice")]


def test_forced_although_usable() -> None:
    after = [checking(200, 279, 218), checking(100, 199, 218), checking(0, 99, 218),
             slot(2, "operator()", "forcing full prompt re-processing due to lack of cache data "
                  "(likely due to SWA or hybrid/recurrent memory, see https://github.com/"
                  "ggml-org/llama.cpp/pull/13194#issuecomment-2868343055)"),
             invalidated(0, 99, 100, 0), invalidated(100, 199, 200, 0),
             invalidated(200, 279, 280, 0), cached(0)]
    lines = restore_scenario(after)
    assert found(check(lines)) == [(line_of(lines, "forcing full"), "restore-choice")]


def test_restore_scan_order() -> None:
    after = [checking(100, 199, 218), restored(100, 199, 200, 199),
             invalidated(200, 279, 280, 199), cached(199)]
    lines = restore_scenario(after)
    assert found(check(lines)) == [(line_of(lines, "checking checkpoint"), "restore-scan")]


def test_restore_threshold() -> None:
    after = [checking(200, 279, 200), checking(100, 199, 200), restored(100, 199, 200, 199),
             invalidated(200, 279, 280, 199), cached(199)]
    lines = restore_scenario(after)
    assert found(check(lines)) == [(line_of(lines, "checking checkpoint"), "restore-threshold")]


def test_restore_position() -> None:
    after = [checking(200, 279, 218), checking(100, 199, 218), restored(100, 199, 200, 200),
             invalidated(200, 279, 280, 199), cached(200)]
    lines = restore_scenario(after)
    assert found(check(lines)) == [(line_of(lines, "restored context"), "restore-position")]


def test_missing_invalidation() -> None:
    after = [checking(200, 279, 218), checking(100, 199, 218), restored(100, 199, 200, 199),
             cached(199)]
    lines = restore_scenario(after)
    # C [200, 279] lies beyond pos_next = 199 and must go
    assert found(check(lines)) == [(line_of(lines, "cached n_tokens = 199"), "invalidate")]


NOVEMBER = "build 7306 (e152332) with GNU 13.3.0 for Linux x86_64"  # the November tree (#30137)
OCTOBER = "build 1 (0c1e570) with GNU 12.2.0 for Linux x86_64"  # the real logs of tests/data/real


def with_build(lines: list[str], build: str) -> list[str]:
    """The log with the build line the server prints before load_model."""
    return [f"I cmn  common_param: common_params_print_info: {build}", *lines]


def test_invalidation_rule_by_build() -> None:
    """lcp 279 (pos_next 279): C [200, 279] has pos_max 279 <= 279 but n_tokens 280 > 279, so
    only the November rule erases it. The build line picks the rule; without one, both are
    accepted. (With lcp 270 both rules erase C, with lcp 280 both keep it.)"""
    keep = restore_scenario([cached(279)], lcp=279)
    erase = restore_scenario([invalidated(200, 279, 280, 279), cached(279)], lcp=279)
    nov_keep, nov_erase = with_build(keep, NOVEMBER), with_build(erase, NOVEMBER)
    assert found(check(nov_keep)) == [(line_of(nov_keep, "cached n_tokens = 279"), "invalidate")]
    assert found(check(nov_erase)) == []
    oct_keep, oct_erase = with_build(keep, OCTOBER), with_build(erase, OCTOBER)
    assert found(check(oct_keep)) == []
    assert found(check(oct_erase)) == [(line_of(oct_erase, "erased invalidated"), "invalidate")]
    assert found(check(keep)) == [] and found(check(erase)) == []
    runs = [check(x).runs[0] for x in (nov_keep, oct_keep, keep, erase)]
    assert [(r.build, r.invalidation) for r in runs] == [
        ("november", "n-prefix"), ("october", "pos-max"), ("unknown", "pos-max"),
        ("unknown", "n-prefix")]
    # the unknown build's run was settled by the one start that tells the rules apart
    assert runs[2].invalidation_evidence.startswith(f"line {line_of(keep, 'new prompt', 1)}:")
    # an option overrides what the log shows
    assert found(check(oct_keep, invalidation="n-prefix")) == found(check(nov_keep))
    assert found(check(erase, invalidation="pos-max")) == [
        (line_of(erase, "erased invalidated"), "invalidate")]


def test_unknown_build_holds_a_run_to_one_rule() -> None:
    """Without a build line either rule is accepted, but one binary follows one: task 2 erases
    C (only the November rule does), so task 3 keeping D (pos_max 299 = pos_next, n_tokens 300
    > 299) is a deviation; in the other order the October rule is the one held."""
    erase_then = restore_scenario([invalidated(200, 279, 280, 279), cached(279)], lcp=279)
    keep_then = restore_scenario([cached(279)], lcp=279)

    def then(d_kept: bool, erased: Iterable[str] = ()) -> list[str]:
        """Task 2 creates D [44, 299]; task 3 shares 299 tokens."""
        return [
            *create(2, 3, 3, 44, 299, erased=erased),
            slot(2, "release", "stop processing: n_tokens = 305, truncated = 0"),
            slot(-1, "get_availabl", " - checking sim = 0.934 (299/320) > 0.100"),
            slot(-1, "get_availabl", "selected slot by LCP similarity, f_sim_best = 0.934 "
                 "(> 0.100 thold), f_keep = 0.980"),
            slot(3, "launch_slot_", "processing task, is_child = 0"),
            slot(3, "operator()", "new prompt, n_ctx_slot = 4096, n_keep = 0, task.n_tokens = 320"),
            *([] if d_kept else [slot(3, "operator()", "erased invalidated context checkpoint "
                                      "(pos_min = 44, pos_max = 299, n_tokens = 300, n_swa = 32, "
                                      "pos_next = 299, size = 0.016 MiB)")]),
            slot(3, "operator()", "cached n_tokens = 299, memory_seq_rm [299, end)"),
        ]

    # task 2 erased C: the run follows the November rule, and task 3 must erase D too
    mixed = erase_then + then(d_kept=True)
    result = check(mixed)
    assert found(result) == [(line_of(mixed, "cached n_tokens = 299"), "invalidate")]
    assert "this run follows the n-prefix rule" in result.deviations[0].message
    assert result.runs[0].invalidation == "n-prefix"
    assert found(check(erase_then + then(d_kept=False))) == []
    # task 2 kept C: the October rule, and task 3 must keep D (A makes room for D)
    old = slot(2, "create_check", "erasing old context checkpoint " + ckpt_fields(0, 99, 100),
               lvl="W")
    assert found(check(keep_then + then(d_kept=True, erased=[old]))) == []
    mixed = keep_then + then(d_kept=False, erased=[old])
    result = check(mixed)
    assert found(result) == [(line_of(mixed, "pos_next = 299, size"), "invalidate")]
    assert result.runs[0].invalidation == "pos-max"
    assert "line " in result.runs[0].invalidation_evidence


def test_n_past_after_reset() -> None:
    after = [checking(200, 279, 0), checking(100, 199, 0), checking(0, 99, 0),
             slot(2, "operator()", "forcing full prompt re-processing due to lack of cache data"),
             invalidated(0, 99, 100, 0), invalidated(100, 199, 200, 0),
             invalidated(200, 279, 280, 0), cached(5)]
    lines = restore_scenario(after, lcp=9)
    assert found(check(lines)) == [(line_of(lines, "cached n_tokens = 5"), "n-past")]
    lines[-1] = cached(0)
    result = check(lines)
    assert found(result) == []
    assert result.stats.full_reprocess == 1 and result.stats.reprocess_no_usable == 1


def test_need_to_evaluate() -> None:
    """The whole prompt is cached (lcp 290 of a 290-token prompt): n_past -= 1."""
    lines = startup() + cold_task(1, 290, [create(1, 1, 3, 0, 99)], released=295) + [
        slot(-1, "get_availabl", " - checking sim = 1.000 (290/290) > 0.100"),
        slot(-1, "get_availabl", "selected slot by LCP similarity, f_sim_best = 1.000 "
             "(> 0.100 thold), f_keep = 0.983"),
        slot(2, "operator()", "new prompt, n_ctx_slot = 4096, n_keep = 0, task.n_tokens = 290"),
        slot(2, "operator()", "need to evaluate at least 1 token for each active slot "
             "(n_past = 290, task.n_tokens() = 290)", lvl="W"),
        slot(2, "operator()", "n_past was set to 289", lvl="W"),
        cached(289),
    ]
    assert found(check(lines)) == []
    without = [x for x in lines if "need to evaluate" not in x and "n_past was set" not in x]
    assert found(check(without)) == [(line_of(without, "cached n_tokens = 289"), "n-past")]


# ---- prompt cache --------------------------------------------------------------------------


def saved_entry(task: int, n_slot: int, n_new: int, lcp: int, state: str,
                entries: list[tuple[int, str]], extra: Iterable[str] = ()) -> list[str]:
    """A selection by LRU that saves the slot (``n_slot`` tokens, no checkpoints) and finds
    nothing better; ``entries`` is the cache listing after the update."""
    total = sum(float(s) for _, s in entries)
    return [
        slot(-1, "get_availabl", f" - checking sim = {lcp / n_new:.3f} ({lcp}/{n_new}) > 0.100"),
        slot(-1, "get_availabl", "selected slot by LRU, t_last = 1"),
        srv("get_availabl", "updating prompt cache"),
        srv("prompt_save", f" - saving prompt with length {n_slot}, total state size = {state} "
            "MiB (draft: 0.000 MiB)"),
        *extra,
        srv("load", f" - looking for better prompt, base f_keep = {lcp / n_slot:.3f}, f_sim = "
            f"{lcp / n_new:.3f}"),
        *[srv("load", f"   - prompt with length {n:7d}, lcp = {lcp:7d}, f_keep = {lcp / n:.3f}, "
              f"f_sim = {lcp / n_new:.3f}") for n, _ in entries],
        srv("update", f" - cache state: {len(entries)} prompts, {total:.3f} MiB (limits: 1.000 "
            "MiB, 4096 tokens, 4096 est)"),
        *[srv("update", f"   - prompt 0x55{i:010x}: {n:7d} tokens, checkpoints:  0, "
              f"{float(s):9.3f} MiB") for i, (n, s) in enumerate(entries)],
        slot(task, "launch_slot_", "processing task, is_child = 0"),
        slot(task, "operator()", f"new prompt, n_ctx_slot = 4096, n_keep = 0, "
             f"task.n_tokens = {n_new}"),
        slot(task, "operator()", f"cached n_tokens = {lcp}, memory_seq_rm [{lcp}, end)"),
        slot(task, "release", f"stop processing: n_tokens = {n_new + 10}, truncated = 0"),
    ]


def cache_base() -> list[str]:
    """Three tasks on one slot without checkpoints; each later one saves the previous prompt:
    the cache ends with entries of 110 (0.400 MiB) and 210 (0.400 MiB) tokens."""
    return (startup() + cold_task(1, 100, [], released=110)
            + saved_entry(2, 110, 200, 0, "0.400", [(110, "0.400")])
            + saved_entry(3, 210, 300, 0, "0.400", [(110, "0.400"), (210, "0.400")]))


def test_cache_base_is_clean() -> None:
    result = check(cache_base())
    assert found(result) == []
    assert result.stats.cache_saves == 2


def test_make_room_when_it_fits() -> None:
    lines = cache_base()
    i = line_of(lines, "saving prompt with length 210")
    lines.insert(i, srv("alloc", " - making room for prompt cache entry, removing oldest entry "
                        "(size = 0.400 MiB)", lvl="W"))
    # the listing after the update holds only the new 210-token entry
    lines = [x.replace("2 prompts, 0.800 MiB", "1 prompts, 0.400 MiB") for x in lines]
    lines = drop_after(lines, i, "110 tokens, checkpoints")
    lines = drop_after(lines, i, "prompt with length     110")
    assert found(check(lines)) == [(i + 1, "cache-make-room")]


def test_make_room_needed() -> None:
    """A third entry of 0.400 MiB does not fit next to 0.800 MiB in 1 MiB: the oldest goes."""
    good = cache_base() + saved_entry(
        4, 310, 400, 0, "0.400", [(210, "0.400"), (310, "0.400")],
        extra=[srv("alloc", " - making room for prompt cache entry, removing oldest entry "
                   "(size = 0.400 MiB)", lvl="W")])
    result = check(good)
    assert found(result) == []
    assert result.stats.evict_make_room == 1
    bad = cache_base() + saved_entry(4, 310, 400, 0, "0.400",
                                     [(110, "0.400"), (210, "0.400"), (310, "0.400")])
    at = line_of(bad, "saving prompt with length 310")
    # the missing eviction leaves the cache over its limit, which update() does not fix either
    assert found(check(bad)) == [(at, "cache-make-room"), (at, "cache-limit"),
                                 (line_of(bad, "cache state: 3 prompts"), "cache-evict")]


def test_eviction_while_under_limit() -> None:
    lines = cache_base()
    i = line_of(lines, "cache state: 2 prompts")
    lines.insert(i - 1, srv("update", " - cache size limit reached, removing oldest entry "
                            "(size = 0.400 MiB)", lvl="W"))
    lines = [x.replace("2 prompts, 0.800 MiB", "1 prompts, 0.400 MiB") for x in lines]
    del lines[i + 1]  # the listing line of the evicted 110-token entry
    assert found(check(lines)) == [(i, "cache-evict")]


def test_token_limit_eviction() -> None:
    """--cache-ram -1: no byte limit, but the token limit (4096) still evicts."""
    lines = [*startup(limit="no limit"), *cold_task(1, 3000, [], released=3010)]
    lines = [x.replace("limits: 1.000 MiB, 4096 tokens, 1048576 est", "limits: 0.000 MiB, 4096 "
                       "tokens, 4096 est") for x in lines]
    lines += [
        slot(-1, "get_availabl", " - checking sim = 0.000 (0/2000) > 0.100"),
        slot(-1, "get_availabl", "selected slot by LRU, t_last = 1"),
        srv("get_availabl", "updating prompt cache"),
        srv("prompt_save", " - saving prompt with length 3010, total state size = 3.000 MiB "
            "(draft: 0.000 MiB)"),
        srv("load", " - looking for better prompt, base f_keep = 0.000, f_sim = 0.000"),
        srv("load", "   - prompt with length    3010, lcp =       0, f_keep = 0.000, "
            "f_sim = 0.000"),
        srv("update", " - cache state: 1 prompts, 3.000 MiB (limits: 0.000 MiB, 4096 tokens, "
            "4096 est)"),
        srv("update", "   - prompt 0x5500000001:    3010 tokens, checkpoints:  0,     3.000 MiB"),
        slot(2, "operator()", "new prompt, n_ctx_slot = 4096, n_keep = 0, task.n_tokens = 2000"),
        slot(2, "operator()", "cached n_tokens = 0, memory_seq_rm [0, end)"),
        slot(2, "release", "stop processing: n_tokens = 2010, truncated = 0"),
        slot(-1, "get_availabl", " - checking sim = 0.000 (0/1000) > 0.100"),
        slot(-1, "get_availabl", "selected slot by LRU, t_last = 2"),
        srv("get_availabl", "updating prompt cache"),
        srv("prompt_save", " - saving prompt with length 2010, total state size = 2.000 MiB "
            "(draft: 0.000 MiB)"),
        srv("load", " - looking for better prompt, base f_keep = 0.000, f_sim = 0.000"),
        srv("load", "   - prompt with length    3010, lcp =       0, f_keep = 0.000, "
            "f_sim = 0.000"),
        srv("load", "   - prompt with length    2010, lcp =       0, f_keep = 0.000, "
            "f_sim = 0.000"),
        srv("update", " - cache token limit (4096, est: 4096) reached, removing oldest entry "
            "(size = 3.000 MiB)", lvl="W"),
        srv("update", " - cache state: 1 prompts, 2.000 MiB (limits: 0.000 MiB, 4096 tokens, "
            "4096 est)"),
        srv("update", "   - prompt 0x5500000002:    2010 tokens, checkpoints:  0,     2.000 MiB"),
    ]
    result = check(lines)
    assert found(result) == []
    assert result.stats.evict_limit_tokens == 1
    no_evict = [x for x in lines if "cache token limit" not in x]
    no_evict = [x.replace("1 prompts, 2.000 MiB", "2 prompts, 5.000 MiB") for x in no_evict]
    at = line_of(no_evict, "cache state: 2 prompts")
    assert (at, "cache-evict") in found(check(no_evict))


def test_load_choice_strict_gate() -> None:
    """Slot: 310 tokens; new prompt: 120 tokens sharing 60 with the slot (base f_keep 0.194,
    f_sim 0.5). The 210-token entry shares 60 too: f_keep 0.286 but f_sim 0.5, not strictly
    better, so load_select keeps the slot. The log says it was taken."""
    lines = [*cache_base(),
        slot(-1, "get_availabl", " - checking sim = 0.500 (60/120) > 0.100"),
        slot(-1, "get_availabl", "selected slot by LCP similarity, f_sim_best = 0.500 "
             "(> 0.100 thold), f_keep = 0.194"),
        srv("get_availabl", "updating prompt cache"),
        srv("prompt_save", " - saving prompt with length 310, total state size = 0.300 MiB "
            "(draft: 0.000 MiB)"),
        srv("alloc", " - making room for prompt cache entry, removing oldest entry "
            "(size = 0.400 MiB)", lvl="W"),
        srv("load", " - looking for better prompt, base f_keep = 0.194, f_sim = 0.500"),
        srv("load", "   - prompt with length     210, lcp =      60, f_keep = 0.286, "
            "f_sim = 0.500"),
        srv("load", "   - prompt with length     310, lcp =      60, f_keep = 0.194, "
            "f_sim = 0.500"),
        srv("load", " - found better prompt with f_keep = 0.286, f_sim = 0.500"),
             ]
    at = line_of(lines, "found better prompt")
    assert found(check(lines)) == [(at, "load-choice")]
    # with f_sim 0.550 (66 shared tokens) the same pick is allowed
    ok = [x.replace("lcp =      60, f_keep = 0.286, f_sim = 0.500",
                    "lcp =      66, f_keep = 0.314, f_sim = 0.550")
           .replace("found better prompt with f_keep = 0.286, f_sim = 0.500",
                    "found better prompt with f_keep = 0.314, f_sim = 0.550") for x in lines]
    assert found(check(ok)) == []


def test_load_choice_missed() -> None:
    """The 210-token entry shares 100 of the new prompt's 120 tokens: f_keep 0.476 >= 0.25 and
    better on both than the slot's 0.019 / 0.050, so load_select takes it. The log took none."""
    lines = [*cache_base(),
        slot(-1, "get_availabl", " - checking sim = 0.050 (6/120) > 0.100"),
        slot(-1, "get_availabl", "selected slot by LRU, t_last = 3"),
        srv("get_availabl", "updating prompt cache"),
        srv("prompt_save", " - saving prompt with length 310, total state size = 0.300 MiB "
            "(draft: 0.000 MiB)"),
        srv("alloc", " - making room for prompt cache entry, removing oldest entry "
            "(size = 0.400 MiB)", lvl="W"),
        srv("load", " - looking for better prompt, base f_keep = 0.019, f_sim = 0.050"),
        srv("load", "   - prompt with length     210, lcp =     100, f_keep = 0.476, "
            "f_sim = 0.833"),
        srv("load", "   - prompt with length     310, lcp =       6, f_keep = 0.019, "
            "f_sim = 0.050"),
        srv("update", " - cache state: 2 prompts, 0.700 MiB (limits: 1.000 MiB, 4096 tokens, "
            "4096 est)"),
             ]
    at = line_of(lines, "looking for better prompt", 3)
    assert found(check(lines)) == [(at, "load-choice")]


def test_load_scan_lists_other_entries() -> None:
    lines = cache_base()
    i = line_of(lines, "prompt with length     110", 1)
    lines[i - 1] = lines[i - 1].replace("length     110", "length     111")
    assert found(check(lines)) == [(line_of(lines, "looking for better prompt", 2), "load-scan")]


def test_already_cached_needs_a_longer_entry() -> None:
    lines = cache_base()
    i = line_of(lines, "saving prompt with length 210")
    lines.insert(i, srv("alloc", " - prompt is already in the cache, skipping"))
    # the entry is not saved, so the listing shows only the first one
    lines = [x.replace("2 prompts, 0.800 MiB", "1 prompts, 0.400 MiB") for x in lines]
    lines = [x for x in lines if "210 tokens, checkpoints" not in x]
    lines = [x for x in lines if "prompt with length     210" not in x]
    assert found(check(lines)) == [(i + 1, "cache-contain")]


def test_oversize_skip() -> None:
    lines = cache_base()
    i = line_of(lines, "saving prompt with length 210")
    lines.insert(i, srv("alloc", " - prompt state size 0.400 MiB exceeds cache size limit "
                        "1.000 MiB, skipping", lvl="W"))
    lines = [x.replace("2 prompts, 0.800 MiB", "1 prompts, 0.400 MiB") for x in lines]
    lines = [x for x in lines if "210 tokens, checkpoints" not in x]
    lines = [x for x in lines if "prompt with length     210" not in x]
    assert found(check(lines)) == [(i + 1, "cache-oversize")]
    big = [x.replace("saving prompt with length 210, total state size = 0.400",
                     "saving prompt with length 210, total state size = 1.500")
            .replace("state size 0.400 MiB exceeds", "state size 1.500 MiB exceeds")
           for x in lines]
    result = check(big)
    assert found(result) == []
    assert result.stats.cache_skipped_oversize == 1


def test_obsolete_removal() -> None:
    good = cache_base()
    i = line_of(good, "saving prompt with length 210")
    good.insert(i, srv("alloc", " - removing obsolete cached prompt with length 110"))
    good = [x.replace("2 prompts, 0.800 MiB", "1 prompts, 0.400 MiB") for x in good]
    good = drop_after(good, i, "110 tokens, checkpoints")
    good = drop_after(good, i, "prompt with length     110")
    result = check(good)
    assert found(result) == []
    assert result.stats.obsolete_removed == 1
    bad = [x.replace("removing obsolete cached prompt with length 110",
                     "removing obsolete cached prompt with length 250") for x in good]
    assert found(check(bad)) == [(i + 1, "cache-obsolete"), (i + 1, "cache-obsolete")]


def test_summary_mismatch() -> None:
    lines = cache_base()
    i = line_of(lines, "cache state: 2 prompts")
    lines[i - 1] = lines[i - 1].replace("0.800 MiB (limits", "0.900 MiB (limits")
    assert found(check(lines)) == [(i, "cache-summary")]
    lines = cache_base()
    j = line_of(lines, "210 tokens, checkpoints")
    lines[j - 1] = lines[j - 1].replace("checkpoints:  0", "checkpoints:  2")
    assert found(check(lines)) == [(j, "cache-summary")]


def test_limit_mismatch() -> None:
    lines = cache_base()
    i = line_of(lines, "cache state: 2 prompts")
    lines[i - 1] = lines[i - 1].replace("limits: 1.000 MiB", "limits: 2.000 MiB")
    assert found(check(lines)) == [(i, "cache-limit")]


def test_bad_alloc_reduces_limit() -> None:
    lines = cache_base()
    i = line_of(lines, "saving prompt with length 210")
    lines[i:i] = [
        srv("alloc", "failed to allocate memory for prompt cache state: std::bad_alloc",
            lvl="E"),
        srv("alloc", " - cache size limit reduced to 0.160 MiB", lvl="W"),
        srv("update", " - cache size limit reached, removing oldest entry (size = 0.400 MiB)",
            lvl="W"),
    ]
    lines = [x.replace(" - cache state: 2 prompts, 0.800 MiB (limits: 1.000 MiB, 4096 tokens, "
                       "4096 est)", " - cache state: 0 prompts, 0.000 MiB (limits: 0.160 MiB, "
                       "4096 tokens, 167772 est)") for x in lines]
    lines = drop_after(lines, i, "tokens, checkpoints")
    lines = drop_after(lines, i, "prompt with length ")
    result = check(lines)
    assert found(result) == []
    assert result.stats.cache_alloc_failed == 1 and result.stats.evict_limit_bytes == 1
    wrong = [x.replace("limit reduced to 0.160 MiB", "limit reduced to 0.500 MiB")
              .replace("limits: 0.160 MiB, 4096 tokens, 167772 est",
                       "limits: 0.500 MiB, 4096 tokens, 524288 est") for x in lines]
    got = found(check(wrong))
    assert got[0] == (i + 2, "cache-limit")


def recurrent_scenario(n_past: int) -> list[str]:
    """A recurrent model (n_swa = 0, checkpoints hold one position: pos_min == pos_max = P,
    n_tokens = P + 1). Task 2 extends task 1's conversation; task 3 regenerates from token
    300, inside task 2's part: the memory only holds position 409, so the newest checkpoint at
    or before pos_next = 300 is restored: [295, 295], giving pos_next = n_past = 296."""
    return startup(cap=8) + cold_task(1, 300, [
        create(1, 1, 8, 99, 99), create(1, 2, 8, 199, 199), create(1, 3, 8, 295, 295),
    ], released=310) + [
        slot(-1, "get_availabl", " - checking sim = 0.775 (310/400) > 0.100"),
        slot(-1, "get_availabl", "selected slot by LCP similarity, f_sim_best = 0.775 "
             "(> 0.100 thold), f_keep = 1.000"),
        slot(2, "operator()", "new prompt, n_ctx_slot = 4096, n_keep = 0, task.n_tokens = 400"),
        slot(2, "operator()", "cached n_tokens = 310, memory_seq_rm [310, end)"),
        *create(2, 4, 8, 395, 395),
        slot(2, "release", "stop processing: n_tokens = 410, truncated = 0"),
        slot(-1, "get_availabl", " - checking sim = 0.857 (300/350) > 0.100"),
        slot(-1, "get_availabl", "selected slot by LCP similarity, f_sim_best = 0.857 "
             "(> 0.100 thold), f_keep = 0.732"),
        slot(3, "operator()", "new prompt, n_ctx_slot = 4096, n_keep = 0, task.n_tokens = 350"),
        slot(3, "operator()", "checking checkpoint with [395, 395] against 300..."),
        slot(3, "operator()", "checking checkpoint with [295, 295] against 300..."),
        slot(3, "operator()", "restored context checkpoint (pos_min = 295, pos_max = 295, "
             f"n_tokens = 296, n_past = {n_past}, size = 0.016 MiB)"),
        slot(3, "operator()", "erased invalidated context checkpoint (pos_min = 395, pos_max = "
             "395, n_tokens = 396, n_swa = 0, pos_next = 296, size = 0.016 MiB)"),
        slot(3, "operator()", f"cached n_tokens = {n_past}, memory_seq_rm [{n_past}, end)"),
    ]


def test_recurrent_restore() -> None:
    result = check(recurrent_scenario(296))
    assert found(result) == [] and result.weakened == {}
    assert result.stats.ckpt_restored == 1
    bad = recurrent_scenario(295)
    assert found(check(bad)) == [(line_of(bad, "restored context"), "restore-position")]


def test_restored_then_swept_by_the_same_task() -> None:
    """#30683: task 2 restores B (created by task 1), then creates its next checkpoint; the
    sweep erases B because its id_task is task 1's. Allowed by the snapshot rule, counted in
    the statistics; a deviation under restored-owner=restorer."""
    after = [
        checking(60, 159, 218), restored(60, 159, 160, 159), cached(159),
        *create(2, 2, 3, 44, 299, erased=[slot(2, "create_check", "erasing context checkpoint "
                                              "too close to an earlier one "
                                              + ckpt_fields(60, 159, 160))]),
    ]
    lines = startup() + cold_task(1, 290, [
        create(1, 1, 3, 0, 99), create(1, 2, 3, 60, 159),
    ], released=295) + restore_scenario(after)[len(startup()) + len(cold_task(1, 290, [
        create(1, 1, 3, 0, 99), create(1, 2, 3, 100, 199), create(1, 3, 3, 200, 279),
    ], released=295)):]
    result = check(lines)
    assert found(result) == []
    assert result.stats.ckpt_restored == 1 and result.stats.ckpt_erased_too_close == 1
    [item] = result.stats.restored_then_erased
    assert item["task"] == 2 and item["reason"] == "too_close"
    assert item["restored_line"] == line_of(lines, "restored context")
    at = line_of(lines, "too close")
    assert found(check(lines, kept_checkpoint="fixed")) == [(at, "ckpt-sweep")]


def test_prefix_unknown_is_enumerated() -> None:
    """Without the selection lines and n_swa (an older invalidation line), n_past before the
    restore is not in the log: every value that could matter is tried, and the check says so."""
    lines = [x.replace("n_swa = 32, ", "") for x in restore_scenario(GOOD_RESTORE)
             if "get_availabl" not in x]
    result = check(lines)
    assert found(result) == []
    assert any("n_prefix" in k for k in result.weakened)
    wrong = [x for x in restore_scenario([*GOOD_RESTORE[:3], cached(199)])
             if "get_availabl" not in x]
    assert [rule for _, rule in found(check(wrong))] == ["invalidate"]


def shared_scenario(limit: str) -> list[str]:
    """Task 1 leaves A (n 100, 0.300 MiB) and B; task 2 shares 120 tokens: the slot is saved
    as E1 (A, B), B is invalidated, C is created; task 3 saves the slot as E2 (A, C). A is in
    both entries: the cache accounts it twice."""
    two = limit == "2 MiB"
    lim = "2.000" if two else "1.000"
    e2 = ([(310, "0.516")] if two else []) + [(410, "0.516")]
    return startup(limit=limit) + [
        x.replace("limits: 1.000 MiB", f"limits: {lim} MiB").replace(
            "1048576 est", "2097152 est" if two else "1048576 est")
        for x in cold_task(1, 300, [
            create(1, 1, 3, 0, 99, size="0.300"), create(1, 2, 3, 100, 199),
        ], released=310)] + [
        slot(-1, "get_availabl", " - checking sim = 0.300 (120/400) > 0.100"),
        slot(-1, "get_availabl", "selected slot by LCP similarity, f_sim_best = 0.300 "
             "(> 0.100 thold), f_keep = 0.387"),
        srv("get_availabl", "updating prompt cache"),
        srv("prompt_save", " - saving prompt with length 310, total state size = 0.200 MiB "
            "(draft: 0.000 MiB)"),
        srv("load", " - looking for better prompt, base f_keep = 0.387, f_sim = 0.300"),
        srv("load", "   - prompt with length     310, lcp =     120, f_keep = 0.387, "
            "f_sim = 0.300"),
        srv("update", f" - cache state: 1 prompts, 0.516 MiB (limits: {lim} MiB, 4096 tokens, "
            "4096 est)"),
        srv("update", "   - prompt 0x5500000001:     310 tokens, checkpoints:  2,     0.516 MiB"),
        slot(2, "launch_slot_", "processing task, is_child = 0"),
        slot(2, "operator()", "new prompt, n_ctx_slot = 4096, n_keep = 0, task.n_tokens = 400"),
        slot(2, "operator()", "erased invalidated context checkpoint (pos_min = 100, pos_max = "
             "199, n_tokens = 200, n_swa = 32, pos_next = 120, size = 0.016 MiB)"),
        slot(2, "operator()", "cached n_tokens = 120, memory_seq_rm [120, end)"),
        *create(2, 2, 3, 44, 299),
        slot(2, "release", "stop processing: n_tokens = 410, truncated = 0"),
        slot(-1, "get_availabl", " - checking sim = 0.000 (0/500) > 0.100"),
        slot(-1, "get_availabl", "selected slot by LRU, t_last = 2"),
        srv("get_availabl", "updating prompt cache"),
        srv("prompt_save", " - saving prompt with length 410, total state size = 0.200 MiB "
            "(draft: 0.000 MiB)"),
        *([] if two else [srv("alloc", " - making room for prompt cache entry, removing oldest "
                              "entry (size = 0.516 MiB)", lvl="W")]),
        srv("load", " - looking for better prompt, base f_keep = 0.000, f_sim = 0.000"),
        *[srv("load", f"   - prompt with length {n:7d}, lcp =       0, f_keep = 0.000, "
              "f_sim = 0.000") for n, _ in e2],
        srv("update", f" - cache state: {len(e2)} prompts, {0.516 * len(e2):.3f} MiB (limits: "
            f"{lim} MiB, 4096 tokens, 4096 est)"),
        *[srv("update", f"   - prompt 0x550000000{i}: {n:7d} tokens, checkpoints:  2, "
              f"{float(sz):9.3f} MiB") for i, (n, sz) in enumerate(e2)],
    ]


def test_unique_accounting() -> None:
    kept = check(shared_scenario("2 MiB"))
    assert found(kept) == []
    assert kept.stats.unique_max_gap_mib == pytest.approx(0.3, abs=0.002)
    evicted = check(shared_scenario("1 MiB"))
    assert found(evicted) == []
    assert evicted.stats.evict_make_room == 1
    # 0.2 + 0.2 + A 0.3 + B + C = 0.732 MiB would have fitted in 1 MiB
    assert evicted.stats.evictions_avoidable == 1
    assert evicted.stats.evictions_avoidable_mib == pytest.approx(0.516, abs=0.002)


def test_unique_accounting_option() -> None:
    """accounting=unique (the fixed build's patch 0003): the cache's total counts the checkpoint
    two entries share once. The per-holder log is then wrong (its total, and in 1 MiB the
    eviction the shared bytes did not need); the same log with the unique total is right, and
    wrong under per-holder."""
    per_holder = shared_scenario("2 MiB")
    at = line_of(per_holder, "cache state: 2 prompts")
    assert found(check(per_holder, entry_sizes="fixed")) == [(at, "cache-summary")]
    unique = [x.replace("cache state: 2 prompts, 1.032 MiB", "cache state: 2 prompts, 0.732 MiB") for x in per_holder]
    assert found(check(unique, entry_sizes="fixed")) == []
    assert found(check(unique)) == [(at, "cache-summary")]
    evicted = shared_scenario("1 MiB")
    assert [rule for _, rule in found(check(evicted, entry_sizes="fixed"))] == ["cache-make-room"]


def test_two_slots_and_idle_caching() -> None:
    """Slots 0 and 1 process at the same time (lines interleaved); then a task on slot 0 makes
    the idle slot 1 be saved and, with a unified KV, cleared."""
    head = [x.replace("n_slots = 1", "n_slots = 2").replace("'false'", "'true'")
            .replace("upon starting", "and cleared upon starting") for x in startup()]
    head.insert(2, slot(-1, "load_model", "new slot, n_ctx = 4096", 1))
    a = create(1, 1, 3, 0, 99) + create(1, 2, 3, 0, 199)
    b = create(2, 1, 3, 0, 49, sid=1) + create(2, 2, 3, 0, 149, sid=1)
    lines = [
        *head,
        slot(1, "operator()", "new prompt, n_ctx_slot = 4096, n_keep = 0, task.n_tokens = 300"),
        slot(1, "operator()", "cached n_tokens = 0, memory_seq_rm [0, end)"),
        slot(2, "operator()", "new prompt, n_ctx_slot = 4096, n_keep = 0, task.n_tokens = 200",
             1),
        slot(2, "operator()", "cached n_tokens = 0, memory_seq_rm [0, end)", 1),
    ]
    for i in range(0, 8, 4):
        lines += a[i:i + 4] + b[i:i + 4]
    lines += [
        slot(1, "release", "stop processing: n_tokens = 310, truncated = 0"),
        slot(2, "release", "stop processing: n_tokens = 210, truncated = 0", 1),
        slot(-1, "get_availabl", " - checking sim = 0.300 (96/320) > 0.100"),
        slot(-1, "get_availabl", " - checking sim = 0.050 (16/320) > 0.100", 1),
        slot(-1, "get_availabl", "selected slot by LCP similarity, f_sim_best = 0.300 "
             "(> 0.100 thold), f_keep = 0.310"),
        srv("get_availabl", "updating prompt cache"),
        srv("prompt_save", " - saving prompt with length 310, total state size = 0.100 MiB "
            "(draft: 0.000 MiB)"),
        srv("load", " - looking for better prompt, base f_keep = 0.310, f_sim = 0.300"),
        srv("load", "   - prompt with length     310, lcp =      96, f_keep = 0.310, "
            "f_sim = 0.300"),
        srv("update", " - cache state: 1 prompts, 0.132 MiB (limits: 1.000 MiB, 4096 tokens, "
            "4096 est)"),
        slot(3, "launch_slot_", "processing task, is_child = 0"),
        slot(-1, "process_sing", "saving idle slot to prompt cache", 1),
        srv("prompt_save", " - saving prompt with length 210, total state size = 0.100 MiB "
            "(draft: 0.000 MiB)"),
        srv("update", " - cache state: 2 prompts, 0.264 MiB (limits: 1.000 MiB, 4096 tokens, "
            "4096 est)"),
        srv("update", "   - prompt 0x5500000001:     310 tokens, checkpoints:  2,     0.132 MiB"),
        srv("update", "   - prompt 0x5500000002:     210 tokens, checkpoints:  2,     0.132 MiB"),
        slot(-1, "prompt_clear", "clearing prompt with 210 tokens", 1),
        slot(3, "operator()", "new prompt, n_ctx_slot = 4096, n_keep = 0, task.n_tokens = 320"),
        slot(3, "operator()", "erased invalidated context checkpoint (pos_min = 0, pos_max = "
             "199, n_tokens = 200, n_swa = 32, pos_next = 96, size = 0.016 MiB)"),
        slot(3, "operator()", "erased invalidated context checkpoint (pos_min = 0, pos_max = "
             "99, n_tokens = 100, n_swa = 32, pos_next = 96, size = 0.016 MiB)"),
        slot(3, "operator()", "cached n_tokens = 96, memory_seq_rm [96, end)"),
    ]
    result = check(lines)
    assert found(result) == []
    assert result.stats.ckpt_created == 4 and result.stats.cache_saves == 2
    wrong = [x.replace("created context checkpoint 2 of 3 (pos_min = 0, pos_max = 149",
                       "created context checkpoint 3 of 3 (pos_min = 0, pos_max = 149")
             for x in lines]
    assert found(check(wrong)) == [(line_of(wrong, "pos_max = 149, n_tokens = 150, size"),
                                    "ckpt-count")]


def test_every_rule_has_a_test() -> None:
    import inspect
    import sys

    source = inspect.getsource(sys.modules[__name__])
    missing = [rule for rule in RULES if f'"{rule}"' not in source.split("def test_every")[0]]
    assert missing == []


@pytest.mark.parametrize("opt", ["sweep=sometimes", "nonsense", "positions=both"])
def test_bad_option(opt: str) -> None:
    from pcspec.core.errors import PcspecError
    from pcspec.logcheck import parse_options

    with pytest.raises(PcspecError):
        parse_options([opt])


def test_state_read_on_a_working_slot_is_not_a_restore() -> None:
    """A speculative checkpoint reads state into a slot that has a task (server-context.cpp:
    3041, 3926-3929): not a slot-file restore, the checkpoints stay. On the idle slot the same
    line is one: they go."""
    task = cold_task(1, 290, [create(1, 1, 3, 0, 99), create(1, 2, 3, 100, 199)], released=295)
    read = "D state_read_meta: cell_count = 32, dest_seq_id = 0"
    busy = startup() + task[:-1] + [read, task[-1]]
    result = check(busy)
    assert found(result) == [] and result.stats.slot_file_restores == 0
    idle = startup() + task + [read.replace("32", "295"), read]
    result = check(idle)
    assert found(result) == []
    assert result.stats.slot_file_restores == 1 and result.stats.ckpt_dropped_by_clear == 2


def test_report_groups_runs_with_the_same_rules() -> None:
    """A server that restarts (or wakes from sleep) many times gets one rules line, not one per
    run."""
    import io

    from pcspec.logcheck.report import render_plain

    result = check(cache_base() * 3)
    assert len(result.runs) == 3 and found(result) == []
    out = io.StringIO()
    render_plain([result], out)
    rules_lines = [x for x in out.getvalue().splitlines() if "build era" in x]
    assert len(rules_lines) == 1 and rules_lines[0].startswith("runs 1-3: build era current")
    assert "invalidation=either" in rules_lines[0]


def test_state_read_on_a_slot_the_log_has_not_shown() -> None:
    """A log that starts after the server did: a state read into a slot not yet seen idle or
    working may be a file restore or a speculative checkpoint. The list becomes unknown (a
    creation numbered "3 of 3" is then accepted), the check says it was weakened."""
    read = "D state_read_meta: cell_count = 32, dest_seq_id = 0"
    lines = [read, *create(5, 3, 3, 44, 299)]
    result = check(lines)
    assert found(result) == [] and result.stats.slot_file_restores == 0
    assert any("whose task the log did not show" in k for k in result.weakened)
    # once a scan line has shown the slot idle, the same line is a restore
    scan = slot(-1, "get_availabl", " - checking sim = 0.500 (50/100) > 0.100")
    result = check([scan, read])
    assert result.stats.slot_file_restores == 1 and result.weakened == {}
