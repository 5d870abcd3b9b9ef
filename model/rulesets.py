"""Rule sets: the facts of an upstream llama.cpp build that no design decides.

A design (``pcspec.model.design``) says how the server decides; a rule set says what the build
it runs in is: which slot-file version it writes and reads, whether its slot files carry the
checkpoint appendix, which invalidation rule its tree has, whether its checkpoint loads report a
short load, and what its server offers clients. docs/RULESETS.md cites the line of each tree for
each field; docs/SOURCES.md says how to download each tree.

Each rule set is its parent with the fields its tree changed (``PARENTS``). ``spec`` is the one
the verdict matrix judges every design under: the November code's checkpoint and cache rules
(the ``n_prefix`` invalidation, the appendix, checked loads) over the October tree's requests
(completions with message delimiters, no decision tasks) and its slot-file state version 3,
because pcspec builds the designs as patches on the October tree (docs/DESIGNS.md).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from pcspec.model.errors import PcspecError


@dataclass(frozen=True)
class RuleSet:
    """TYPE: what a build is, field by field (docs/RULESETS.md)."""

    name: str
    summary: str
    # The tree a build of this rule set is made from (pcspec.live.build.TREES), "" for none.
    tree: str
    # At a prompt start, checkpoints with ``n_tokens > n_prefix`` are erased too, not only those
    # with ``pos_max > pos_next`` (server-context.cpp:3369-3378 at 0c1e570 has the second only;
    # the November code both).
    invalidate_n_prefix: bool
    # Slot files carry the checkpoint appendix (#26004: b11549 and the November code).
    slot_file_appendix: bool
    # LLAMA_STATE_SEQ_VERSION (include/llama.h:49): a slot file carries it and a restore takes
    # that version only (3 at 0c1e570, 4 from b11434).
    state_seq_version: int
    # common_prompt_checkpoint::load_tgt/load_dft return whether the load was whole
    # (common/common.cpp:2417-2448 of b11549); otherwise they abort on a short load
    # ("checkpoint size mismatch", common/common.cpp:2324-2358 at 0c1e570).
    checkpoint_load_checked: bool
    # The server takes decision tasks (SERVER_TASK_TYPE_DECISION, server-task.h:19 of b11434):
    # the fuzzing rules send some.
    decision_tasks: bool
    # Message spans come from the chat session only (server_task::apply_chat_session,
    # server-task.h:261-270 of b11549): a raw /completion carries none.
    spans_from_chat_only: bool

    def differences(self, parent: RuleSet) -> dict[str, tuple[object, object]]:
        """The fields where this rule set departs from ``parent``: name -> (parent's, this one's)."""
        return {
            f.name: (getattr(parent, f.name), getattr(self, f.name))
            for f in fields(self)
            if f.name not in ("name", "summary", "tree") and getattr(self, f.name) != getattr(parent, f.name)
        }


OCTOBER = RuleSet(
    name="october",
    summary="the October 2026 tree (0c1e570): no slot-file appendix, the pos_max invalidation, aborting checkpoint"
    " loads, slot files of state version 3",
    tree="0c1e570",
    invalidate_n_prefix=False,
    slot_file_appendix=False,
    state_seq_version=3,
    checkpoint_load_checked=False,
    decision_tasks=False,
    spans_from_chat_only=False,
)
B11434 = replace(
    OCTOBER,
    name="b11434",
    summary="build 11434 (about 2026-10-06): October's rules with slot files of state version 4, and decision tasks",
    tree="b11434",
    state_seq_version=4,
    decision_tasks=True,
)
B11549 = replace(
    B11434,
    name="b11549",
    summary="build 11549 (about 2026-10-10): the slot-file checkpoint appendix (#26004), checkpoint loads that"
    " return false, message spans from the chat session only",
    tree="b11549",
    slot_file_appendix=True,
    checkpoint_load_checked=True,
    spans_from_chat_only=True,
)
NOVEMBER = replace(
    B11549,
    name="november",
    summary="the November 2026 code: b11549 with the n_prefix invalidation (no sdist of it; built as b11549 with"
    " patches/november, docs/DESIGNS.md)",
    tree="",
    invalidate_n_prefix=True,
)
SPEC = replace(
    NOVEMBER,
    name="spec",
    summary="the verdict matrix's: November's checkpoint and cache rules over the October tree's requests"
    " (message delimiters, no decision tasks) and slot-file version 3, the tree pcspec builds the designs on",
    tree="0c1e570",
    state_seq_version=3,
    decision_tasks=False,
    spans_from_chat_only=False,
)

# The rule sets of real builds, oldest first, and ``spec``.
RULE_SETS: dict[str, RuleSet] = {r.name: r for r in (OCTOBER, B11434, B11549, NOVEMBER)}
ALL_RULE_SETS: dict[str, RuleSet] = {**RULE_SETS, SPEC.name: SPEC}
PARENTS: dict[str, str] = {"october": "spec", "b11434": "october", "b11549": "b11434", "november": "b11549"}
NEWEST = "november"
# The rule set of each tree pcspec builds (pcspec.live.build.TREES).
TREE_RULE_SETS: dict[str, str] = {"0c1e570": "october", "b11434": "b11434", "b11549": "b11549"}


def get_rule_set(name: str) -> RuleSet:
    """A rule set by name; PcspecError naming the known ones otherwise."""
    if name not in ALL_RULE_SETS:
        raise PcspecError(f"unknown rule set {name!r}; known rule sets: {', '.join(RULE_SETS)}")
    return ALL_RULE_SETS[name]


def differences(name: str) -> dict[str, tuple[object, object]]:
    """The fields where rule set ``name`` departs from its parent (``PARENTS``)."""
    return get_rule_set(name).differences(ALL_RULE_SETS[PARENTS[name]])
