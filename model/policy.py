"""Pure decision rules of llama-server's prompt cache and checkpoints.

Each function here is one decision the C++ makes, written over plain numbers so that the
model (``pcspec.model``), the log checker (which only sees the numbers a log prints) and the
Z3 encodings all use the same rule. Nothing here touches state: the caller applies the
decision. Every function cites the C++ it mirrors (file: function).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import TypeVar

Num = TypeVar("Num", int, float)  # sizes: bytes, or the MiB a log prints

# server-task.cpp: server_prompt_cache::load -- "don't trash large prompts"
LOAD_F_KEEP_FLOOR = 0.25

# server-context.cpp: get_available_slot -- save to the cache only when more than half the
# slot's context is about to be lost.
UPDATE_CACHE_F_KEEP = 0.5


def load_baseline(lcp0: int, n_slot: int, n_new: int, empty_minus_one: bool = True) -> tuple[float, float]:
    """The (f_keep, f_sim) a cache entry must beat (server-task.cpp: server_prompt_cache::load,
    1794-1797 at 0c1e570).

    An empty slot gets ``f_keep = -1`` so that any entry with ``f_sim > 0`` wins for it.
    ``empty_minus_one=False`` (a mutant) divides by the empty slot's 0 tokens instead: NaN,
    which every comparison finds false, so nothing is ever loaded onto an empty slot.
    """
    f_keep = lcp0 / n_slot if n_slot > 0 else (-1.0 if empty_minus_one else math.nan)
    f_sim = lcp0 / n_new if n_new > 0 else 0.0
    return f_keep, f_sim


def entry_fractions(lcp: int, n_entry: int, n_new: int) -> tuple[float, float]:
    """(f_keep, f_sim) of one cache entry against the new prompt."""
    f_keep = lcp / n_entry if n_entry > 0 else 0.0
    f_sim = lcp / n_new if n_new > 0 else 0.0
    return f_keep, f_sim


def load_select(f_keep_base: float, f_sim_base: float, candidates: Sequence[tuple[float, float]]) -> int | None:
    """Index of the entry ``load`` picks, or None (server-task.cpp: server_prompt_cache::load).

    Entries are scanned front (oldest) to back. An entry is skipped when its ``f_keep`` is
    below 0.25; otherwise it becomes the best only when it is *strictly* better than the
    running best on both ``f_keep`` and ``f_sim`` (the running best starts at the slot's
    own values). Ties keep the older entry. This is a Pareto-style gate, not "best overall":
    issue #28276 shows a short slot state blocking a longer entry through it.
    """
    best: int | None = None
    f_keep_best, f_sim_best = f_keep_base, f_sim_base
    for i, (f_keep, f_sim) in enumerate(candidates):
        if load_takes(f_keep_best, f_sim_best, f_keep, f_sim):
            best, f_keep_best, f_sim_best = i, f_keep, f_sim
    return best


def load_takes(f_keep_best: Fraction | float, f_sim_best: Fraction | float, f_keep: Fraction | float,
               f_sim: Fraction | float) -> bool:
    """One step of ``load_select``: whether an entry with ``(f_keep, f_sim)`` becomes the best
    over the running best: not below the 0.25 floor, and strictly better on both."""
    return f_keep >= LOAD_F_KEEP_FLOOR and f_keep_best < f_keep and f_sim_best < f_sim


def sweep_too_close(
    ckpts: Sequence[tuple[int, int]],
    id_task: int,
    min_step: int,
    cap: int,
    only_when_full: bool = True,
    recheck_full: bool = True,
) -> list[int]:
    """Indices (ascending) the too-close sweep erases (server-context.cpp: create_checkpoint).

    ``ckpts`` is the slot's list in order as ``(n_tokens, id_task)``. Walking front to back
    with ``last`` = the ``n_tokens`` of the last kept checkpoint, a checkpoint not created by
    the current task is erased when ``last >= 0`` and ``n_tokens <= last + min_step``. As of
    November 2026 (#30137's merged diff) the walk runs only while ``len(list) + 1 >= cap``, i.e. the list
    is full or about to be; the condition is re-evaluated after every erasure, exactly as the
    C++ ``for`` condition is. ``only_when_full=False`` is the older unconditional sweep
    (the August 2026 code, b10573; docs/SOURCES.md). ``recheck_full=False`` (a mutant) decides
    fullness once, before the walk, and then sweeps the whole list.
    """
    erased: list[int] = []
    n_left = len(ckpts)
    full_at_start = n_left + 1 >= cap
    last = -1
    for i, (n_tokens, owner) in enumerate(ckpts):
        full = n_left + 1 >= cap if recheck_full else full_at_start
        if only_when_full and not full:
            break
        if owner != id_task and last >= 0 and n_tokens <= last + min_step:
            erased.append(i)
            n_left -= 1
            continue
        last = n_tokens
    return erased


def superseded(n_tokens: Sequence[int | None], n_tokens_new: int) -> list[int]:
    """Indices of the checkpoints a new one at ``n_tokens_new`` supersedes: those at the same
    ``n_tokens`` (server-context.cpp: create_checkpoint, after the sweep and the cap). An
    ``n_tokens`` a log did not print (None) is never the same."""
    return [i for i, n in enumerate(n_tokens) if n == n_tokens_new]


def cap_evictions(n_ckpts: int, cap: int) -> int:
    """How many checkpoints ``create_checkpoint`` erases from the front to make room for one
    more (server-context.cpp: create_checkpoint, ``while size >= n_ctx_checkpoints``)."""
    return max(0, n_ckpts - cap + 1) if cap > 0 else n_ckpts


def pos_min_threshold(pos_next: int, n_swa: int, has_new_tokens: bool) -> int:
    """The largest useful ``pos_min`` (server-context.cpp: update_slots, #24110; 3275-3278 of
    0c1e570): one lower when the prompt brings no new token, which forces a restore for an
    identical prompt."""
    return max(0, pos_next - n_swa - (0 if has_new_tokens else 1))


def restore_choice(
    ckpts: Sequence[tuple[int, int]],
    pos_next: int,
    thold: int,
    eligible: Sequence[bool] | None = None,
    accept_pos_min_zero: bool = True,
    reject_beyond_pos_next: bool = True,
) -> int | None:
    """Index of the checkpoint restored at prompt start, or None (server-context.cpp:
    update_slots, ``SLOT_STATE_STARTED``; 3330-3346 of 0c1e570). ``ckpts`` are ``(pos_min,
    pos_max)`` in list order; the scan runs newest (back) to oldest and takes the first with
    ``pos_max <= pos_next`` (the [TAG_CHECKPOINTS_FIX_POS_MIN] workaround, #24411; 3339-3341)
    and ``pos_min < thold or pos_min == 0`` (3342). ``eligible`` (``fixed``) leaves some out;
    ``accept_pos_min_zero=False`` and ``reject_beyond_pos_next=False`` drop a term (mutants)."""
    for i in range(len(ckpts) - 1, -1, -1):
        pos_min, pos_max = ckpts[i]
        if eligible is not None and not eligible[i]:
            continue
        if reject_beyond_pos_next and pos_max > pos_next:
            continue
        if pos_min < thold or (accept_pos_min_zero and pos_min == 0):
            return i
    return None


def restore_choice_exact(
    ckpts: Sequence[tuple[int, int, int]], pos_next: int, thold: int, n_prompt: int, n_swa: int
) -> int | None:
    """``fixed``'s restore choice for a sliding window (``n_swa > 0``), over checkpoints that
    record where their payload starts (``(pos_min, pos_max, n_tokens)``). The C++ test
    ``pos_min < thold`` is taken against the *prompt's* ``pos_next``, but the restore resumes
    at the checkpoint's ``pos_max`` and the prompt-logits rule may take one more position
    off; the first token re-processed, at ``n_past``, needs the cells
    ``[n_past - n_swa + 1, n_past)``. A checkpoint is chosen only if its payload holds them
    (or starts at 0). Without this, a prompt ending one before a checkpoint, or a checkpoint
    made right after a restore (``n_swa - 1`` cells), restores a window one cell short
    (docs/FINDINGS.md, F2)."""
    for i in range(len(ckpts) - 1, -1, -1):
        pos_min, pos_max, n_tokens = ckpts[i]
        if pos_max > pos_next or not (pos_min < thold or pos_min == 0):
            continue
        _, n_past = restored_positions(pos_next, pos_min, pos_max, n_tokens)
        if n_past == n_prompt:
            n_past -= 1
        if pos_min == 0 or pos_min <= n_past - n_swa + 1:
            return i
    return None


def restored_positions(pos_next: int, ck_pos_min: int, ck_pos_max: int, ck_n_tokens: int) -> tuple[int, int]:
    """``(pos_next, n_past)`` after restoring a checkpoint (text tokens: one position each;
    server-context.cpp:3355-3356 of 0c1e570).

    A recurrent checkpoint (``pos_min == pos_max == P``) resumes at ``P + 1``; an SWA one
    (``pos_min + 1 < pos_max``) at ``pos_max``, so the token at ``pos_max`` is recomputed.
    The clamp of ``n_past`` to the checkpoint's ``n_tokens`` binds only for a checkpoint whose
    positions run past its tokens (``pos_max > n_tokens`` or ``pos_min >= n_tokens``): with
    ``pos_min <= pos_max = n_tokens - 1`` the new ``pos_next`` is at most ``n_tokens`` already.
    """
    new_pos_next = min(pos_next, max(ck_pos_min + 1, ck_pos_max))
    return new_pos_next, min(new_pos_next, ck_n_tokens)


def live_serves(pos_min: int, pos_max: int, n: int, n_swa: int, recurrent: bool, n_rs: int) -> bool:
    """``fixed`` (resume from the best source): whether a sequence whose memory reports ``[pos_min, pos_max]``
    can resume at ``n`` (keep positions ``[0, n)``, decode from ``n``) without re-processing.

    * every position below ``n`` must be present (``pos_max >= n - 1``);
    * a recurrent state (recurrent, or the recurrent half of hybrid, whose ``pos_min`` and
      ``pos_max`` are both the state's position) rolls back at most ``n_rs`` tokens
      (llama-memory-recurrent.cpp: seq_rm);
    * a sliding window must still hold the cells the token at ``n`` attends to, ``[n - n_swa
      + 1, n)`` (``is_masked_swa``: masked when ``p1 - p0 >= n_swa``), or start at 0.

    The C++ asks ``pos_min < pos_next - n_swa`` instead: one cell stricter than the window
    needs for an SWA cache (docs/FINDINGS.md, F3), and it never lets a recurrent state
    with a rollback depth roll back."""
    if n <= 0:
        return True
    if pos_min < 0 or pos_max < n - 1:
        return False
    if recurrent:
        return pos_max + 1 - n <= n_rs
    if n_swa > 0:
        return pos_min == 0 or pos_min <= n - n_swa + 1
    return True


def checkpoint_serves(payload_pos_min: int, n_tokens: int, n: int, n_swa: int, recurrent: bool, n_rs: int) -> bool:
    """``fixed`` (resume from the best source): whether restoring a checkpoint taken at ``n_tokens``, whose payload
    starts at ``payload_pos_min``, lets the sequence resume at ``n <= n_tokens``: a recurrent
    state rolls back at most ``n_rs`` tokens from ``n_tokens``; a window must cover the cells
    the token at ``n`` attends to (``restore_choice_exact``'s test)."""
    if n > n_tokens:
        return False
    if recurrent:
        return n_tokens - n <= n_rs
    if n_swa > 0:
        return payload_pos_min == 0 or payload_pos_min <= n - n_swa + 1
    return True


def resume_point(n: int, n_prompt: int) -> int:
    """The prompt-logits rule ([TAG_PROMPT_LOGITS], server-context.cpp:3384-3386): a resume
    point equal to the prompt's length goes back one token, so that one is evaluated."""
    return n - 1 if n == n_prompt else n


def invalidated(
    ckpts: Sequence[tuple[int, int]], pos_next: int, n_prefix: int, n_prefix_rule: bool = True
) -> list[int]:
    """Indices of checkpoints erased at prompt start (server-context.cpp: update_slots).

    ``ckpts`` are ``(pos_max, n_tokens)``. November 2026 (#30137's merged diff): erased when
    ``pos_max > pos_next`` or ``n_tokens > n_prefix`` (tokens not shared with the new prompt).
    ``n_prefix_rule=False`` is the October rule (server-context.cpp:3367-3378 at 0c1e570):
    ``pos_max > pos_next`` only.
    """
    return [
        i
        for i, (pos_max, n_tokens) in enumerate(ckpts)
        if pos_max > pos_next or (n_prefix_rule and n_tokens > n_prefix)
    ]


def invalidated_by_pos_min(pos_mins: Sequence[int], thold: int) -> list[int]:
    """An earlier form of the invalidation (2025 server code: "erase any checkpoints with
    pos_min > pos_min_thold"), kept for the mutant that re-creates it: it erases checkpoints
    that are still prefixes of the new prompt, and keeps ones past ``pos_next`` whose window
    starts early enough."""
    return [i for i, pos_min in enumerate(pos_mins) if pos_min > thold]


def is_oversize(new_size: int, limit_size: int) -> bool:
    """``alloc`` step 3: an entry larger than the whole byte limit is skipped
    (server-task.cpp: server_prompt_cache::alloc). ``limit_size == 0`` means no limit."""
    return limit_size > 0 and new_size > limit_size


def make_room(sizes: Sequence[Num], new_size: Num, limit_size: Num) -> int:
    """How many entries ``alloc`` pops from the front so that the new one fits (FIFO,
    server-task.cpp: server_prompt_cache::alloc, #25070). ``sizes`` are the entries' sizes as
    the cache accounts them, front first."""
    if limit_size <= 0:
        return 0
    total = sum(sizes)
    n = 0
    while n < len(sizes) and total + new_size > limit_size:
        total -= sizes[n]
        n += 1
    return n


def token_limit_estimate(total_size: int, total_tokens: int, limit_size: int, limit_tokens: int) -> int:
    """``limit_tokens_cur`` of ``update`` (server-task.cpp: server_prompt_cache::update)."""
    if limit_size <= 0:
        return limit_tokens
    size_per_token = max(1.0, total_size / max(1, total_tokens))
    return max(limit_tokens, int(limit_size / size_per_token))


def update_evictions(
    sizes: Sequence[int], n_tokens: Sequence[int], limit_size: int, limit_tokens: int
) -> tuple[int, int]:
    """``(byte evictions, token evictions)`` ``update`` pops from the front, in that order
    (server-task.cpp: server_prompt_cache::update). Since #25070 this may empty the cache."""
    n_bytes = make_room(sizes, 0, limit_size)  # while size() > limit_size
    rest_sizes, rest_toks = sizes[n_bytes:], n_tokens[n_bytes:]
    n_tok = 0
    if limit_tokens > 0:
        cur = token_limit_estimate(sum(rest_sizes), sum(rest_toks), limit_size, limit_tokens)
        n_tok = token_evictions(rest_toks, cur)
    return n_bytes, n_tok


def token_evictions(n_tokens: Sequence[int], limit_tokens_cur: int) -> int:
    """The token stage of ``update``: entries popped from the front while the cache holds more
    than ``limit_tokens_cur`` tokens (server-task.cpp: server_prompt_cache::update)."""
    total, n = sum(n_tokens), 0
    while n < len(n_tokens) and total > limit_tokens_cur:
        total -= n_tokens[n]
        n += 1
    return n


def limit_after_bad_alloc(total_size: int) -> int:
    """The byte limit after a ``std::bad_alloc`` in ``alloc``: 40 % of the current size, at
    least 1 byte, for good (server-task.cpp: server_prompt_cache::alloc)."""
    return max(1, int(0.4 * total_size))


def update_cache_on_lcp(f_keep: float) -> bool:
    """Whether an LCP-similarity slot pick also saves/loads the cache (server-context.cpp:
    get_available_slot). NaN (an empty pinned slot) compares false."""
    return f_keep < UPDATE_CACHE_F_KEEP


def decision_groups(prompts: Sequence[Sequence[int]], n_slots: int) -> list[tuple[int, tuple[int, ...], int]]:
    """``server_decision_group_tasks`` (server-decision.cpp:1139-1169 of b11549, 810-840 of
    b11434): the posted tasks of a request of decision prompts, in order, each as ``(index,
    children, n_shared)``. Runs of ``n_slots`` prompts (at least 1) become a parent (the first)
    and children (the rest) sharing ``n_shared`` leading tokens: the shortest common prefix with
    the parent, at most each prompt's length - 1 ("every task must have at least one token of its
    own"); a run of one prompt, or one sharing nothing, is posted as it is (no children, 0). The
    lengths are ``size_t``: an empty prompt's length - 1 wraps around, so it bounds nothing."""
    n_slots = max(n_slots, 1)

    def own(n: int) -> int:
        return n - 1 if n > 0 else 2**64 - 1

    out: list[tuple[int, tuple[int, ...], int]] = []
    for i in range(0, len(prompts), n_slots):
        end = min(len(prompts), i + n_slots)
        parent = prompts[i]
        n_shared = own(len(parent))
        for j in range(i + 1, end):
            common = 0
            for a, b in zip(parent, prompts[j], strict=False):
                if a != b:
                    break
                common += 1
            n_shared = min(n_shared, common, own(len(prompts[j])))
        if end - i < 2 or n_shared == 0:
            out += [(j, (), 0) for j in range(i, end)]
            continue
        out.append((i, tuple(range(i + 1, end)), n_shared))
    return out
