"""The designs under test: one implementation with a few named decision points (seams).

A ``Variant`` is the November 2026 server with its choice at each seam. The four designs are
``master`` (parent of #30137), ``pr30137`` (#30137 as merged), ``pr27451`` (the head of #27451's
branch) and ``fixed`` (our proposal); docs/SOURCES.md says where to get each. Mutants are
deliberately broken designs that show each property can fail; each names the one seam it breaks.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from pcspec.model.errors import PcspecError


class Sharing(StrEnum):
    DEEP_COPY = "deep_copy"  # std::list<common_prompt_checkpoint> copied by value
    SHARED_OBJECT = "shared_object"  # std::shared_ptr<const common_prompt_checkpoint>
    SHARED_PAYLOAD = "shared_payload"  # metadata by value, payload buffers shared (#27451)


class SaveProtocol(StrEnum):
    APPEND_FILL = "append_fill"  # alloc appends, prompt_save fills; nothing checked
    APPEND_FILL_POP = "append_fill_pop"  # ... and pop_back() when the fill came up short
    TRANSACTIONAL = "transactional"  # build and fill off the list; publish only if whole


class AllocScope(StrEnum):
    RESIZE = "resize"  # try covers the two resize() calls only; push_back unguarded
    ENTRY = "entry"  # try covers the whole entry construction (#27451)


class Accounting(StrEnum):
    PER_HOLDER = "per_holder"  # each entry counts every checkpoint it holds
    UNIQUE = "unique"  # each buffer reachable from the cache counted once
    UNDERCOUNT = "undercount"  # mutant: a checkpoint shared with another holder counts 0


@dataclass(frozen=True)
class Variant:
    name: str
    summary: str
    sharing: Sharing
    zero_init: bool  # state buffers zero-filled on allocation (std::vector resize)
    save_protocol: SaveProtocol
    alloc_scope: AllocScope
    accounting: Accounting
    # The restored checkpoint stays with the task that restored it: the sweep exempts it and
    # an identical re-creation at the same n_tokens is skipped (#30683).
    keep_restored: bool
    # Failed cache loads and checkpoint fill/restore mismatches are contained (entry dropped,
    # slot cleared, no abort) instead of what the C++ does.
    contain_failures: bool
    # bad_alloc in alloc sets limit_size = 0.4 * size() for good.
    shrink_limit_on_bad_alloc: bool
    # Seams of `fixed` found by the model (where it showed `fixed` breaking a property, the
    # design got a new seam and the property stayed as it was).
    # Restoring a slot file clears the sequence first, and refuses a file whose state holds
    # other positions than its token list, or whose checkpoints no state of this memory can have.
    resync_on_file_restore: bool = False
    # A file restore resynchronises the draft context with the tokens it installs (re-decodes
    # them), as does a restored checkpoint that has no draft data.
    resync_draft_on_file_restore: bool = False
    # An empty pinned slot consults the cache (its f_keep is 0, not NaN).
    consult_cache_for_empty_pinned: bool = False
    # A task pinned to a busy slot runs the cache save/load on that slot before it is
    # deferred (server-context.cpp:1528-1641; docs/FINDINGS.md, F1): the slot is saved
    # mid-prompt, or loaded over.
    cache_update_busy_slot: bool = True
    # A checkpoint records the first position its payload holds (for iSWA the last n_swa
    # cells), not the SWA cache's pos_min ([TAG_CHECKPOINTS_FIX_POS_MIN], server-context.cpp
    # 2337-2341): the restore test then rejects a checkpoint whose window is one cell short.
    # With an SWA draft, the later of the two payloads' first positions (each context's SWA
    # cache places its cells by its own history).
    record_payload_pos_min: bool = False
    # Restore only a checkpoint of the shared prefix (n_tokens <= n_prefix): the C++ can
    # restore the one at n_prefix + 1 and erase it right away as invalidated.
    restore_only_prefixes: bool = False
    # Resume from the best point the held state serves: live memory or any held
    # checkpoint of the prompt's prefix, whichever keeps the most tokens, judged by what each
    # memory kind can roll back (an SWA window that covers the next token, a recurrent state
    # within its rollback depth). The C++ tests live memory with ``pos_min < thold`` (one cell
    # stricter than the window needs, docs/FINDINGS.md, F3, and blind to a recurrent
    # rollback depth) and takes the newest usable checkpoint, not the one keeping most.
    resume_best: bool = False
    # Seams where the builds of the rule sets differ (docs/RULESETS.md, with file:line of each
    # tree). The invalidation at a prompt start also erases ``n_tokens > n_prefix`` (#30137's
    # merged diff; 0c1e570 to b11549 erase ``pos_max > pos_next`` only, server-context.cpp:
    # 3369-3378), and slot files carry the checkpoint appendix (#26004: b11549 and November).
    invalidate_n_prefix: bool = True
    slot_file_appendix: bool = True
    # The build's LLAMA_STATE_SEQ_VERSION (include/llama.h:49): its slot files carry it and its
    # restore takes that version only (3 in the October tree, 4 from b11434). The designs keep 3:
    # pcspec builds them as patches on the October tree (pcspec/live/designs.py).
    state_seq_version: int = 3
    # common_prompt_checkpoint::load_tgt/load_dft return whether the load was whole (b11549,
    # common/common.cpp:2417-2448 of b11549; #30137's merged diff): the prompt start then aborts
    # for a checkpoint of this process and re-processes for one restored from a slot file.
    # False: they abort themselves on a short load ("checkpoint size mismatch",
    # common/common.cpp:2324-2358 at 0c1e570), whatever made the checkpoint.
    checkpoint_load_checked: bool = True
    # Rule-set fields: what a build's server offers its clients, which decides what the fuzzing
    # rules send (properties/rules.py). Off in the designs, which pcspec builds on the October
    # tree, so their workloads and verdicts are those of completions with message delimiters.
    # A build with decision tasks (SERVER_TASK_TYPE_DECISION, tools/server/server-task.h:19 of
    # b11434): the rules send some (``Fuzz.decide``). The model runs a decision task of a trace
    # the same way whatever this field says (model/slot.py, TaskType.DECISION).
    decision_tasks: bool = False
    # Message spans come from the chat session only (server_task::apply_chat_session,
    # tools/server/server-task.h:261-270 of b11549): the ``message_delimiters`` field of a
    # request (server-context.cpp:4286 at 0c1e570, 4656 of b11434) is gone, so a raw
    # ``/completion`` carries no spans (``Server.request``, its ``chat`` argument).
    spans_from_chat_only: bool = False
    # Historical rules kept as seams so that their regressions can be shown (mutants):
    # #24110 lowers the restore threshold only for a prompt without new tokens; #30137's merged
    # diff sweeps too-close checkpoints only while the list is full.
    threshold_uses_new_tokens: bool = True
    sweep_only_when_full: bool = True
    # The restore choice of the C++ (server-context.cpp:3274-3364 of 0c1e570), rule by rule, so that
    # each historical off-by-one can be planted in a C++ design's path (mutants of master): the
    # threshold's ``- 1`` for a prompt without new tokens (3278; False: never applied; always
    # applied is ``threshold_uses_new_tokens=False``), the acceptance of a checkpoint whose
    # pos_min is 0 (3342), the rejection of one whose pos_max exceeds pos_next (3339-3341).
    threshold_minus_one: bool = True
    restore_accepts_pos_min_zero: bool = True
    restore_rejects_beyond_pos_next: bool = True
    count_appendix_bytes: bool = True  # n_written / n_read include the checkpoint appendix
    # #20288: the prompt's last ``4 + n_ubatch`` and ``4`` tokens are batched apart so that
    # checkpoints are made there (server-context.cpp:3540-3559).
    tail_checkpoints: bool = True
    # The fill breaks at a user-message start only when it is the last one, the list is empty
    # or the newest checkpoint is more than --checkpoint-min-step earlier
    # (server-context.cpp:3530-3538). False (a mutant): it breaks at every user-message start.
    space_user_breaks: bool = True
    # A cache load onto an empty slot starts from f_keep = -1, so that any entry sharing a
    # prefix wins (server-task.cpp:1796). False (a mutant): 0 / 0, NaN, and nothing is loaded.
    empty_slot_baseline: bool = True
    # -- mutant seams (all False/True as in the real code for the four designs) ------------
    inplace_update: bool = False  # the cap eviction recycles the oldest payload in place
    free_on_evict: bool = False  # eviction frees payload buffers even when still held
    make_room: bool = True  # False: reject an entry that would fit after eviction
    invalidate: bool = True  # False: checkpoints beyond pos_next survive a new prompt
    invalidate_by_pos_min: bool = False  # the 2025 rule: erase checkpoints with pos_min > thold
    sweep_rechecks_full: bool = True  # False: the sweep decides "full" once, then sweeps all
    restore_uncapped: bool = False  # a slot restore keeps every checkpoint of the file's appendix
    cap_checkpoints: bool = True  # False: the checkpoint list is never capped
    trust_size_field: bool = False  # slot-file reader allocates from an unchecked length
    mutant: bool = False
    # A mutant's design (the name of the variant it plants its change in): a mutant is caught by
    # a property this design does not violate on the same trace (pcspec/tools/verdicts.py).
    base: str | None = None

    @property
    def validates_save(self) -> bool:
        return self.save_protocol != SaveProtocol.APPEND_FILL

    @property
    def checkpoint_appended_before_fill(self) -> bool:
        """create_checkpoint appends the checkpoint, then fills it (server-context.cpp:2333 at
        0c1e570, kept by #27451); #30137 builds a ``make_shared`` object, fills it and then
        appends it (#30137's merged diff, its create_checkpoint hunk)."""
        return self.sharing != Sharing.SHARED_OBJECT


MASTER = Variant(
    name="master",
    summary="parent of #30137: deep-copied checkpoints, zero-filled buffers, unvalidated save",
    sharing=Sharing.DEEP_COPY,
    zero_init=True,
    save_protocol=SaveProtocol.APPEND_FILL,
    alloc_scope=AllocScope.RESIZE,
    accounting=Accounting.PER_HOLDER,
    keep_restored=False,
    contain_failures=False,
    shrink_limit_on_bad_alloc=True,
)

PR30137 = replace(
    MASTER,
    name="pr30137",
    summary="#30137 (merged): shared immutable checkpoints, no-init buffers, pop_back on a short fill",
    sharing=Sharing.SHARED_OBJECT,
    zero_init=False,
    save_protocol=SaveProtocol.APPEND_FILL_POP,
)

PR27451 = replace(
    MASTER,
    name="pr27451",
    summary="#27451 (competing): shared payload buffers, zero-filled, bad_alloc caught for the whole entry",
    sharing=Sharing.SHARED_PAYLOAD,
    alloc_scope=AllocScope.ENTRY,
)

FIXED = Variant(
    name="fixed",
    summary="our proposal: shared immutable checkpoints, transactional save, unique accounting",
    sharing=Sharing.SHARED_OBJECT,
    zero_init=False,
    save_protocol=SaveProtocol.TRANSACTIONAL,
    alloc_scope=AllocScope.ENTRY,
    accounting=Accounting.UNIQUE,
    keep_restored=True,
    contain_failures=True,
    shrink_limit_on_bad_alloc=False,
    resync_on_file_restore=True,
    resync_draft_on_file_restore=True,
    consult_cache_for_empty_pinned=True,
    cache_update_busy_slot=False,
    record_payload_pos_min=True,
    restore_only_prefixes=True,
    resume_best=True,
)

DESIGNS: dict[str, Variant] = {v.name: v for v in (MASTER, PR30137, PR27451, FIXED)}

# Rule sets of real builds, for checking a real server (`pcspec check-log`, `pcspec live`):
# not designs under review, so not in the verdict matrix. Each is its parent with the seams its
# tree changed (RULE_SET_PARENTS; docs/RULESETS.md cites the lines). The November code is the
# `master` design; `november` differs from it only in the slot files' version (4, as b11434's)
# and in what its server offers clients (decision tasks, spans from the chat session only),
# which the designs keep as the October tree has them because pcspec builds them on it.
OCTOBER = replace(
    MASTER,
    name="october",
    summary="the October 2026 build (0c1e570): master's design with October's invalidation, no file appendix, "
    "aborting checkpoint loads",
    invalidate_n_prefix=False,
    slot_file_appendix=False,
    checkpoint_load_checked=False,
)
B11434 = replace(
    OCTOBER,
    name="b11434",
    summary="build 11434 (about 2026-10-06): October's rules with slot files of state-sequence version 4, and"
    " decision tasks",
    state_seq_version=4,
    decision_tasks=True,
)
B11549 = replace(
    B11434,
    name="b11549",
    summary="build 11549 (about 2026-10-10): the slot-file checkpoint appendix (#26004), checkpoint loads that"
    " return false, message spans from the chat session only",
    slot_file_appendix=True,
    checkpoint_load_checked=True,
    spans_from_chat_only=True,
)
NOVEMBER = replace(
    B11549,
    name="november",
    summary="the November 2026 code (#30137's parent): b11549 with the n_prefix invalidation",
    invalidate_n_prefix=True,
)
RULE_SETS: dict[str, Variant] = {v.name: v for v in (OCTOBER, B11434, B11549, NOVEMBER)}  # oldest first
RULE_SET_PARENTS: dict[str, str] = {"october": "master", "b11434": "october", "b11549": "b11434",
                                    "november": "b11549"}
NEWEST_RULE_SET = "november"
_NOT_SEAMS = ("name", "summary")


def seam_differences(variant: Variant, parent: Variant) -> dict[str, tuple[object, object]]:
    """The seams where ``variant`` departs from ``parent``: name -> (parent's, variant's)."""
    return {
        f: (getattr(parent, f), getattr(variant, f))
        for f in variant.__dataclass_fields__
        if f not in _NOT_SEAMS and getattr(variant, f) != getattr(parent, f)
    }


def rule_set_differences(name: str) -> dict[str, tuple[object, object]]:
    """The seams where rule set ``name`` departs from its parent (RULE_SET_PARENTS)."""
    parent = RULE_SET_PARENTS[name]
    return seam_differences(RULE_SETS[name], RULE_SETS.get(parent) or DESIGNS[parent])


def get_rule_set(name: str) -> Variant:
    """A rule set by name; PcspecError naming the known ones otherwise."""
    if name not in RULE_SETS:
        raise PcspecError(f"unknown rule set {name!r}; known rule sets: {', '.join(RULE_SETS)}")
    return RULE_SETS[name]


def _mutant(base: Variant, name: str, summary: str, **seams: object) -> Variant:
    return replace(base, name=f"mutant:{name}", summary=summary, mutant=True, base=base.name, **seams)  # type: ignore[arg-type]


MUTANTS: dict[str, Variant] = {
    m.name: m
    for m in (
        _mutant(
            PR27451,
            "inplace-update",
            "the cap eviction recycles the oldest checkpoint's shared payload buffer in place",
            inplace_update=True,
        ),
        _mutant(
            FIXED,
            "noinit-unchecked",
            "no-init buffers without fill validation (the append-then-fill save of master)",
            save_protocol=SaveProtocol.APPEND_FILL,
        ),
        _mutant(
            FIXED,
            "free-shared",
            "evicting an entry frees its checkpoint payloads even when a slot still holds them",
            free_on_evict=True,
        ),
        _mutant(
            FIXED,
            "undercount",
            "a checkpoint shared with another holder is counted zero times",
            accounting=Accounting.UNDERCOUNT,
        ),
        _mutant(
            FIXED,
            "no-make-room",
            "an entry that would fit after eviction is rejected instead",
            make_room=False,
        ),
        _mutant(
            FIXED,
            "keep-invalidated",
            "checkpoints beyond pos_next survive a new prompt",
            invalidate=False,
        ),
        _mutant(FIXED, "no-cap", "the checkpoint list is not capped", cap_checkpoints=False),
        _mutant(
            FIXED,
            "needless-restore",
            "the restore threshold ignores new tokens (before #24110): a strict extension restores",
            threshold_uses_new_tokens=False,
            resume_best=False,  # (the threshold is the C++ resume's; fixed's own resume has none)
        ),
        _mutant(
            FIXED,
            "appendix-uncounted",
            "n_written and n_read leave the checkpoint appendix out (the acknowledged #26004 bug)",
            count_appendix_bytes=False,
        ),
        _mutant(
            FIXED,
            "sweep-always",
            "the too-close sweep runs even when the list is not full (the August 2026 code)",
            sweep_only_when_full=False,
        ),
        _mutant(
            PR30137,
            "invalidate-pos-min",
            "#30137 with the invalidation by pos_min > pos_min_thold of 2025 server code (its recorded SWA"
            " pos_min can be far below pos_max), not by pos_max and n_prefix",
            invalidate_by_pos_min=True,
        ),
        _mutant(
            FIXED,
            "sweep-full-once",
            "the too-close sweep decides the list is full once, then sweeps all of it",
            sweep_rechecks_full=False,
        ),
        _mutant(
            FIXED,
            "busy-slot-update",
            "the C++'s cache update on a busy pinned slot (get_available_slot before the defer): a failed"
            " load clears the running task's prompt and the checkpoint it restored",
            cache_update_busy_slot=True,
        ),
        _mutant(
            FIXED,
            "restore-uncapped",
            "a slot restore installs every checkpoint of the file, beyond the --ctx-checkpoints of the server"
            " restoring it (#26004's first version read the whole appendix)",
            restore_uncapped=True,
        ),
        _mutant(
            FIXED,
            "live-thold",
            "the resume of the C++ (#24110's pos_min < pos_next - n_swa for live memory, the newest usable"
            " checkpoint): an SWA window that still serves is dropped, a recurrent rollback depth unused",
            resume_best=False,
        ),
        _mutant(
            FIXED,
            "empty-pinned-skips-cache",
            "the C++'s selection of a task pinned to an empty slot: f_keep is NaN, so the cache is never"
            " consulted (server-context.cpp:1578-1588)",
            consult_cache_for_empty_pinned=False,
        ),
        _mutant(
            FIXED,
            "no-tail-break",
            "the prompt's last tokens are not batched apart (before #20288): no checkpoint 4 + n_ubatch and"
            " 4 tokens before the end",
            tail_checkpoints=False,
        ),
        _mutant(
            FIXED,
            "trust-size-field",
            "the slot-file reader allocates from an unchecked length field",
            trust_size_field=True,
        ),
        _mutant(
            FIXED,
            "break-every-user-message",
            "the prompt batch fill breaks at every user-message start, ignoring --checkpoint-min-step"
            " (server-context.cpp:3531-3538 without its spacing test)",
            space_user_breaks=False,
        ),
        _mutant(
            FIXED,
            "load-nan-f-keep",
            "a cache load onto an empty slot starts from f_keep = 0 / 0 (NaN) instead of -1"
            " (server-task.cpp:1796): every comparison is false and nothing is loaded",
            empty_slot_baseline=False,
        ),
        # The historical restore-choice bugs, planted in master's path (the C++ resume, which
        # fixed does not take), each named after its rule (server-context.cpp:3274-3364 of 0c1e570).
        # The clamp of n_past to the checkpoint's n_tokens (3356) has no mutant: it binds only
        # for a checkpoint whose positions run past its tokens (pos_max > n_tokens, or pos_min >=
        # n_tokens), and the model's checkpoints (text tokens, one position each) never do: where
        # master breaks CKPT-1, pos_max falls short of n_tokens - 1. Dropping the clamp is an
        # equivalent mutant here (tests/model/test_restore_rules.py shows the arithmetic).
        _mutant(
            MASTER,
            "thold-minus-one-always",
            "the restore threshold's - 1 applied whatever the prompt (before #24110): pos_min_thold ="
            " pos_next - n_swa - 1 for a prompt with new tokens too",
            threshold_uses_new_tokens=False,
        ),
        _mutant(
            MASTER,
            "thold-minus-one-never",
            "the restore threshold's - 1 never applied: for a prompt without new tokens, live memory or a"
            " checkpoint at the prompt's end is taken though the prompt-logits rule resumes a token earlier",
            threshold_minus_one=False,
        ),
        _mutant(
            MASTER,
            "restore-pos-min-zero-rejected",
            "the checkpoint scan without the pos_min == 0 escape: a checkpoint of the prompt's start is"
            " not restored when the threshold is 0",
            restore_accepts_pos_min_zero=False,
        ),
        _mutant(
            MASTER,
            "restore-pos-max-unchecked",
            "the checkpoint scan without its pos_max > pos_next rejection ([TAG_CHECKPOINTS_FIX_POS_MIN]):"
            " a checkpoint beyond the shared prefix is restored",
            restore_rejects_beyond_pos_next=False,
        ),
    )
}

ALL: dict[str, Variant] = {**DESIGNS, **RULE_SETS, **MUTANTS}


def get_variant(name: str) -> Variant:
    """Look a variant up by name (``mutant:NAME`` or just ``NAME`` for mutants)."""
    if name in ALL:
        return ALL[name]
    if f"mutant:{name}" in MUTANTS:
        return MUTANTS[f"mutant:{name}"]
    raise PcspecError(f"unknown variant {name!r}; valid variants: {', '.join(ALL)}")
