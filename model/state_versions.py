"""State-sequence versions: which llama.cpp builds write and read which version of a slot file.

``LLAMA_STATE_SEQ_VERSION`` (include/llama.h:49) is the second word of every slot file. 3 in the
October tree, 4 in b11434 and b11549, with ``LLAMA_SESSION_VERSION`` 10 -> 11 (llama.h:46): the
KV cache's data header gained ``n_rot_k`` and ``n_rot_v`` (``pcspec.codec.layout``). The header and the
token words are the same in all of them; the bumps are about the memory's state layout. A build
restores its own version only: ``llama_context::state_seq_load_file`` refuses any other, with
"unknown (magic, version) for sequence state file", and returns 0 (``llama_state_seq_load_file``),
and the server answers ``RESTORE_LOAD_FAILED`` and clears the slot.
"""

from __future__ import annotations

# The versions known: 2 is the August 2026 code's (docs/SOURCES.md), whose state layout is not
# in ``pcspec.codec.layout``.
STATE_SEQ_VERSIONS: tuple[int, ...] = (2, 3, 4)
# The October build's version: what a file is written with unless told otherwise, and the
# designs' (``RuleSet.state_seq_version``; the rule sets b11434, b11549 and november write 4).
STATE_SEQ_VERSION_DEFAULT = 3
# Which builds write (and alone read) each version.
STATE_SEQ_BUILDS: dict[int, tuple[str, ...]] = {
    2: ("the August 2026 code (b10573)",),
    3: ("the October tree (0c1e570)",),
    4: ("b11434", "b11549"),
}
# Where each version's loader refuses the others (the version check of state_seq_load_file).
STATE_SEQ_LOADERS: dict[int, str] = {
    3: "src/llama-context.cpp:3331-3334 of the October tree",
    4: "src/llama-context.cpp:3334-3337 of b11434, 3421-3424 of b11549",
}
# What the restore answers when llama_state_seq_load_file returns 0 (server-context.cpp:2600-2606;
# 2824-2830 of b11434, 2968-2974 of b11549).
RESTORE_LOAD_FAILED = "No available space in KV cache or invalid slot save file"
# The builds that write and read the checkpoint appendix (#26004: server-context.cpp:2586-2714 of
# b11549); the October tree and b11434 have no appendix code and read nothing after the state.
APPENDIX_BUILDS: tuple[str, ...] = ("b11549",)


def refusal(magic: int, version: int, expected: int) -> str:
    """Why a build of version ``expected`` does not restore a file of ``version``."""
    where = STATE_SEQ_LOADERS.get(expected, f"a loader of version {expected}")
    return (
        f"state-sequence version {version}, but this build reads {expected}: llama_state_seq_load_file "
        f"refuses it (unknown (magic, version) for sequence state file: {magic:08x}, {version:08x}; "
        f"{where}) and the restore answers {RESTORE_LOAD_FAILED!r}"
    )
