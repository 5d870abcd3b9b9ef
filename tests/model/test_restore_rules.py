"""The restore rules of ``policy`` against the C++ (server-context.cpp:3274-3364 of 0c1e570),
and why the clamp of ``n_past`` has no mutant.

``n_past = min(size_up_to_pos(pos_next), n_tokens)`` (3356) binds only for a checkpoint whose
positions run past its tokens. Over every checkpoint of the shape the model makes
(``pos_min <= pos_max = n_tokens - 1``) that the scan accepts, the clamp changes nothing: a
mutant without it is equivalent, and no property could catch it.
"""

from __future__ import annotations

import itertools

from pcspec.model import policy


def _accepted(pos_min: int, pos_max: int, pos_next: int, thold: int) -> bool:
    return policy.restore_choice([(pos_min, pos_max)], pos_next, thold) == 0


def test_n_past_clamp_never_binds_for_consistent_checkpoints() -> None:
    seen = 0
    for n_tokens, pos_min, pos_next, n_swa, no_new in itertools.product(
        range(1, 24), range(24), range(1, 26), (0, 4), (0, 1)
    ):
        pos_max = n_tokens - 1
        if pos_min > pos_max:
            continue
        thold = policy.pos_min_threshold(pos_next, n_swa, not no_new)
        if not _accepted(pos_min, pos_max, pos_next, thold):
            continue
        seen += 1
        new_pos_next, n_past = policy.restored_positions(pos_next, pos_min, pos_max, n_tokens)
        assert new_pos_next <= n_tokens, (n_tokens, pos_min, pos_next)
        assert n_past == new_pos_next
    assert seen > 1000


def test_n_past_clamp_binds_for_positions_past_the_tokens() -> None:
    # A checkpoint claiming positions up to 7 for 5 tokens (never made by the model): restored
    # for a prompt sharing 8 tokens, the clamp keeps 5 tokens, not 7.
    assert policy.restored_positions(8, 0, 7, 5) == (7, 5)


def test_restore_choice_terms() -> None:
    # The two terms the mutants of baseline drop: pos_min == 0 accepted with a threshold of 0,
    # and pos_max > pos_next rejected.
    assert policy.restore_choice([(0, 3)], 4, 0) == 0
    assert policy.restore_choice([(0, 3)], 4, 0, accept_pos_min_zero=False) is None
    assert policy.restore_choice([(0, 3), (0, 7)], 6, 2) == 0
    assert policy.restore_choice([(0, 3), (0, 7)], 6, 2, reject_beyond_pos_next=False) == 1
