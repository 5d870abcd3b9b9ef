"""Regression logs for false alarms of ``pcspec check-log`` on real logs (a slot-file restore, a
pinned slot, the October rule set; docs/FINDINGS.md L1, L2): each checks clean, and a copy
changed in one place reports the deviation it should.

The logs (tests/data/logs, described in its README) are written in the formats, order and
verbosity (-v) of the real logs in tests/data/real, for the same build (0c1e570) and model
(gemma2, SWA window 32, a 256-cell SWA cache: checkpoints cover [pos_max - 255, pos_max]).
"""

from __future__ import annotations

from pcspec.logcheck import check_events, parse_text
from tests.support.logs import check, erase_at_b, found, lines_of, where
from tests.support.paths import DATA

REAL = DATA / "real"


# ---- A: slot-file restore ------------------------------------------------------------------


def test_slot_restore_checks_clean() -> None:
    """Request 1 leaves checkpoints [0, 231] and [40, 295]; the slot is saved to a file;
    request 2 (another prompt) replaces them with its own; the file is restored (two
    state_read_meta lines: the full and the SWA cache) and request 3 goes on from the file's
    tokens with no checkpoint at all, so it re-processes everything and numbers its first
    checkpoint "1 of 8"."""
    lines = lines_of("slot-restore.log")
    result = check(lines)
    assert found(result) == [] and result.weakened == {}
    assert result.stats.slot_file_restores == 1
    assert result.stats.requests == 3 and result.stats.ckpt_created == 6
    assert result.stats.ckpt_dropped_by_clear == 2  # request 2's, dropped by the restore


def test_slot_restore_lines_removed() -> None:
    """Without the restore's lines the restore still shows (FINDINGS L1): request 3's LCP pick
    prints ``f_keep = 1.000`` for 303 shared tokens, which a slot of request 2's 203 tokens
    cannot print, so the slot's tokens were replaced, and ``prompt.clear()`` dropped its
    checkpoints (server-context.cpp:2614)."""
    lines = [x for x in lines_of("slot-restore.log") if "state_read_meta" not in x]
    result = check(lines)
    assert found(result) == []
    assert result.stats.slot_file_restores == 1 and result.stats.ckpt_dropped_by_clear == 2


def test_slot_restore_lines_removed_and_the_pick_agreeing() -> None:
    """The same, with a pick whose f_keep fits the 203 tokens the checker holds: nothing shows
    the restore, the slot seems to still hold request 2's two checkpoints; request 3
    re-processes everything but keeps them (the deviation), and numbers its checkpoints from 1:
    the list is rebuilt from that line, so its creations do not deviate again (they did, twice,
    before the resync of issue 34)."""
    lines = [x.replace("f_keep = 1.000", "f_keep = 1.493") for x in lines_of("slot-restore.log")
             if "state_read_meta" not in x]
    assert found(check(lines)) == [
        (where(lines, "cached n_tokens = 0", 2), "invalidate"),
    ]


def test_slot_restore_with_the_appendix_line() -> None:
    """b11549 and the November code restore the file's checkpoints too and say how many: the
    list is then unknown (no positions are logged), so its checks are widened, not failed; the
    one restore is counted once, and the line leaves those two rule sets (which erase different
    checkpoints at a prompt start, so the invalidation accepts either)."""
    lines = [x for x in lines_of("slot-restore.log") if "print_info: build" not in x]
    at = where(lines, "state_read_meta", 1)
    stamp = lines[at - 1].split(" ")[0]
    lines.insert(at, f"{stamp} I slot restore_slot: id  0 | task -1 | restored 2 context "
                     "checkpoint(s) from 'slots/conversation.bin'")
    result = check(lines)
    assert found(result) == []
    assert result.stats.slot_file_restores == 1
    run = result.runs[0]
    assert (run.build, run.invalidation) == ("unknown", "either")
    assert "appendix line (b11549 or november)" in run.build_evidence
    assert any("did not fully show" in k for k in result.weakened)


def test_state_reads_of_loads_and_checkpoint_restores_are_not_file_restores() -> None:
    """03-eviction.log reads state three times: a cache load (after "found better prompt")
    and a checkpoint restore (between "checking checkpoint" and "restored")."""
    text = (REAL / "03-eviction.log").read_bytes().decode("utf-8", errors="replace")
    read = parse_text(text)
    assert sum(e.kind == "state_read" for e in read.events) == 3
    result = check_events(read.events)
    assert found(result) == [] and result.stats.slot_file_restores == 0


# ---- L1: a slot-file restore without a line ------------------------------------------------


def test_silent_restore_checks_clean() -> None:
    """silent-restore.log (pcspec live, hybrid model, FINDINGS L1): the restore of a file saved
    from an empty slot (task 11) prints no state line; the slot had 236 tokens and checkpoints
    at 204 and 232. The next request's scan says "- skipping, slot is empty" and its cache load
    "base f_keep = -1.000": the slot was cleared (server-context.cpp:2614), so the request
    keeps no checkpoint and numbers its own from 1."""
    result = check(lines_of("silent-restore.log"))
    assert found(result) == [] and result.weakened == {}
    assert result.stats.slot_file_restores == 1 and result.stats.ckpt_dropped_by_clear == 2


def test_silent_restore_each_line_alone_shows_it() -> None:
    lines = lines_of("silent-restore.log")
    for needle in ("skipping, slot is empty", "base f_keep = -1.000"):
        drop = where(lines, needle, 1)
        assert found(check([x for i, x in enumerate(lines, 1) if i != drop])) == [], needle


def test_silent_restore_unseen() -> None:
    """Without both lines nothing shows the restore: the old checkpoints seem kept (the
    deviation); the list is then rebuilt from the "1 of 8" that follows (two more deviations
    before the resync of issue 34)."""
    lines = lines_of("silent-restore.log")
    drop = {where(lines, "skipping, slot is empty", 1), where(lines, "base f_keep = -1.000", 1)}
    lines = [x for i, x in enumerate(lines, 1) if i not in drop]
    assert found(check(lines)) == [
        (where(lines, "cached n_tokens = 0", 1), "invalidate"),
    ]


# ---- L2: an obsolete removal among entries of the same length --------------------------------


def test_equal_lengths_checks_clean() -> None:
    """equal-lengths.log (pcspec live, swa model, FINDINGS L2): the cache holds two entries of
    15 tokens (the second and the seventh); saving a 17-token prompt removes "obsolete cached
    prompt with length 15", the seventh (server-task.cpp:1737-1747: only it is a prefix). The
    next load scan lists the first one still in place."""
    result = check(lines_of("equal-lengths.log"))
    assert found(result) == []
    assert not any("make-room" in k or "evictions" in k for k in result.weakened)


def test_equal_lengths_the_first_one_gone() -> None:
    """Had the first 15-token entry gone, the scan and the listing would show the other order;
    that checks clean too."""
    lines = lines_of("equal-lengths.log")
    at = where(lines, "removing obsolete")
    head, tail = lines[:at], lines[at:]
    scan = [i for i, x in enumerate(tail) if "prompt with length      15" in x]
    rows = [i for i, x in enumerate(tail) if "     15 tokens" in x]
    for group in (scan, rows):
        (i,) = group
        moved = tail.pop(i)
        j = next(k for k, x in enumerate(tail) if "68" in x and k > i)  # before the 68-token one
        tail.insert(j, moved.replace("checkpoints:  1,     0.017", "checkpoints:  2,     0.029"))
    assert found(check(head + tail)) == []


def test_equal_lengths_settled_by_the_listing() -> None:
    """Without the load's lines the "cache state" listing settles it (entry sizes and
    checkpoint counts)."""
    lines = lines_of("equal-lengths.log")
    at = where(lines, "removing obsolete")
    lines = lines[:at] + [x for x in lines[at:] if " load: " not in x]
    assert found(check(lines)) == []


def test_equal_lengths_an_order_neither_removal_gives() -> None:
    lines = lines_of("equal-lengths.log")
    i = where(lines, "prompt with length       2,", 1) - 1
    lines[i], lines[i + 1] = lines[i + 1], lines[i]
    assert found(check(lines)) == [(where(lines, "looking for better prompt", 1), "load-scan")]


# ---- B1: a slot chosen by id ----------------------------------------------------------------


def test_pinned_slot_checks_clean() -> None:
    """Three requests with ``id_slot`` 0: "selected slot by id (0)" comes before the scan line
    of its own request (server-context.cpp:1537 then 1568). Request B shares 300 of 321 tokens
    (nothing to invalidate), request C all 321 (n_past 321 -> 320)."""
    result = check(lines_of("pinned-slot.log"))
    assert found(result) == [] and result.weakened == {}
    assert result.stats.requests == 3


def test_pinned_slot_scan_line_is_its_own_requests() -> None:
    """The same log where B's scan line says 280 shared tokens: [40, 295] then lies beyond
    pos_next = 280 and must be erased at B's start."""
    lines = [x.replace("checking sim = 0.935 (300/321)", "checking sim = 0.872 (280/321)")
             for x in lines_of("pinned-slot.log")]
    assert found(check(lines)) == [(where(lines, "cached n_tokens = 300"), "invalidate")]


# ---- B2: the rule set of the build ------------------------------------------------------------


def test_october_build_checks_clean() -> None:
    """Request B shares 295 tokens: [40, 295] (n_tokens 296) ends at pos_next. The October
    build (line 2) erases only pos_max > pos_next (server-context.cpp:3370-3378), so it keeps
    it; the November rule (n_tokens > n_prefix) would not."""
    result = check(lines_of("october-build.log"))
    assert found(result) == []
    assert (result.runs[0].build, result.runs[0].invalidation) == ("october", "pos-max")


def test_october_build_erasing_by_n_prefix() -> None:
    lines = erase_at_b(lines_of("october-build.log"))
    assert found(check(lines)) == [(where(lines, "erased invalidated"), "invalidate")]


def test_unknown_build_accepts_either_rule() -> None:
    """Without the build line the log cannot tell October from November: both the original
    and the erasing copy check clean, each settling the run's rule."""
    lines = [x for x in lines_of("october-build.log") if "print_info: build" not in x]
    kept, erased = check(lines), check(erase_at_b(lines))
    assert found(kept) == [] and found(erased) == []
    assert [(r.runs[0].build, r.runs[0].invalidation) for r in (kept, erased)] == [
        ("unknown", "pos-max"), ("unknown", "n-prefix")]


def test_doubt_settles_by_the_views_a_fact_allows() -> None:
    from pcspec.logcheck.doubt import Doubt, settle
    from pcspec.logcheck.mib import Approx
    from pcspec.logcheck.state import Entry

    def entry(n: int, line: int, mib: float = 0.01) -> Entry:
        return Entry(n, Approx.logged(mib), None, None, line)

    a, b, c, d = entry(15, 1), entry(7, 2), entry(15, 3, 0.02), entry(9, 4)
    doubt = Doubt(a, [c], 5)
    held = [b, c, d]  # the checker removed a
    assert [v for _, v in doubt.views(held)] == [[b, c, d], [a, b, d]]

    def lengths(want: list[int]) -> object:
        return lambda v: [x.n_tokens for x in v] == want

    other = settle(doubt, held, lengths([15, 7, 9]))  # c went: a is back
    assert (other.entries, other.doubt, other.exact, other.swapped) == ([a, b, d], None, True, c)
    mine = settle(doubt, held, lengths([7, 15, 9]))
    assert (mine.entries, mine.doubt) == (held, None)
    neither = settle(doubt, held, lengths([9]))
    assert (neither.entries, neither.doubt, neither.exact) == (held, None, True)
    both = settle(doubt, held, lambda v: len(v) == 3)
    assert both.doubt is doubt and both.entries == held
    assert not doubt.same_sizes() and Doubt(a, [entry(15, 6)], 5).same_sizes()
