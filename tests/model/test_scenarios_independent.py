"""Checks whose expectation does not come from the model rule they judge.

CKPT-5 (server-context.cpp:3505-3560 at 0c1e570): a prompt batch ends early only where the
fill loop names an end: the last user-message start, a user-message start with no checkpoint
yet or more than ``--checkpoint-min-step`` past the newest, or the tail offsets. CKPT-3 judges
the other direction (no batch runs across a named end), so a fill that breaks at every
user-message start is CKPT-5's alone.

REUSE-2 (server-task.cpp:1793-1823): the entry a load onto an empty or unrelated slot must take
is worked out in the property from the C++'s rules, not with ``policy.load_baseline`` and
``policy.load_select``: a wrong empty-slot baseline planted in the model's rule (NaN for
``f_keep``, so nothing is loaded) is seen.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from pcspec.model import events as ev
from pcspec.model import policy
from pcspec.model.designs import DESIGNS
from pcspec.model.server import Server
from pcspec.properties.base import Events
from pcspec.properties.checkpoints import ckpt5_batch_ends
from pcspec.properties.mutants import MUTANTS
from tests.support.common import CPP_DESIGNS, KV2, PINNED_EMPTY, X, events, judged, kv_server, recurrent_config

# -- CKPT-5 ----------------------------------------------------------------------------------------

A40 = tuple(range(1, 41))
# n_batch 16, n_ubatch 4, min step 8. User messages start at 6, 10, 14 and 24 (the last). The
# fill from 0 breaks at 6 (no checkpoint yet), the one from 6 at 10 (the checkpoint at 6 is made
# after that fill), the one from 10 runs past 14 (not more than 8 past the checkpoint at 6) to
# 24 (the last user message), then the tail offsets 40 - 8 and 40 - 4.
SPACED = (("request", {"tokens": A40, "spans": (6, 10, 14, 24), "n_predict": 2}), ("run", {}))
SPACED_BATCHES = [(0, 6), (6, 4), (10, 14), (24, 8), (32, 4), (36, 4)]


def _recurrent() -> Any:
    return recurrent_config(n_slots=1, n_ctx_slot=256, cache_ram=0)


@pytest.mark.parametrize("variant", [*CPP_DESIGNS, "fixed"])
def test_ckpt5_holds_on_every_design(variant: str) -> None:
    srv = Server(_recurrent(), DESIGNS[variant])
    assert judged(srv, "CKPT-5", *SPACED) == []
    assert [(b.start, b.n) for b in events(srv, ev.Batch)] == SPACED_BATCHES
    assert [c.n_tokens for c in srv.slots[0].prompt.checkpoints] == [6, 24, 36]


def test_ckpt5_mutant_break_every_user_message_is_caught() -> None:
    srv = Server(_recurrent(), MUTANTS["mutant:break-every-user-message"])
    msgs = judged(srv, "CKPT-5", *SPACED)
    assert [(b.start, b.n) for b in events(srv, ev.Batch)][2:4] == [(10, 4), (14, 10)]
    assert len(msgs) == 1 and "batch [10, 14) ended at 14" in msgs[0] and "list [6]" in msgs[0]


def test_ckpt3_does_not_see_the_extra_break() -> None:
    # why CKPT-5 is needed: the creation rules' own check holds on the mutant's run
    assert judged(Server(_recurrent(), MUTANTS["mutant:break-every-user-message"]), "CKPT-3", *SPACED) == []


def _batch(start: int, n: int, **extra: Any) -> ev.Batch:
    data = {"slot": 0, "task": 0, "start": start, "n": n, "room": 16, "checkpoint": False, "needs": True,
            "n_prompt": 40, "spans": (20,), "last_user": 20, "listed": (), "pos_min": start - 1} | extra  # fmt: skip
    return ev.Batch(**data)


def test_ckpt5_judges_each_end() -> None:
    srv = Server(_recurrent(), DESIGNS["fixed"])

    def judge(*batches: ev.Batch) -> list[str]:
        return ckpt5_batch_ends(srv, Events(list(batches)))

    assert judge(_batch(0, 16), _batch(16, 4), _batch(20, 12), _batch(32, 4), _batch(36, 4)) == []
    assert judge(_batch(0, 10, room=10)) == []  # the share of n_batch used up (other slots first)
    assert judge(_batch(30, 10)) == []  # the prompt's end
    early = judge(_batch(0, 10))
    assert early and "ended at 10 with 6 tokens of room left" in early[0]
    # a task that makes no checkpoints never ends early, not even at the last user message
    assert judge(_batch(0, 20, room=32, needs=False)) and not judge(_batch(0, 32, room=32, needs=False))
    # a user-message start within the minimum step of the newest checkpoint names no end
    assert judge(_batch(12, 4, spans=(16, 20), listed=(12,)))
    assert not judge(_batch(12, 4, spans=(16, 20), listed=()))


# -- REUSE-2 ---------------------------------------------------------------------------------------



def test_reuse2_mutant_nan_f_keep_is_caught() -> None:
    srv = Server(KV2, MUTANTS["mutant:load-nan-f-keep"])
    msgs = judged(srv, "REUSE-2", *PINNED_EMPTY)
    assert events(srv, ev.LoadScan)[-1].chosen is None
    assert msgs and "loaded no entry, but the load rules choose entry #" in msgs[-1]


def test_reuse2_sees_a_wrong_baseline_planted_in_the_model_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    # The bug planted in the rule the model applies, not through a seam: an expectation that
    # called policy.load_baseline (as REUSE-2's once did) would move with it and see nothing.
    def nan_baseline(lcp0: int, n_slot: int, n_new: int, empty_minus_one: bool = True) -> tuple[float, float]:
        return (lcp0 / n_slot if n_slot else math.nan), lcp0 / n_new

    assert judged(Server(KV2, DESIGNS["fixed"]), "REUSE-2", *PINNED_EMPTY) == []
    monkeypatch.setattr(policy, "load_baseline", nan_baseline)
    srv = Server(KV2, DESIGNS["fixed"])
    msgs = judged(srv, "REUSE-2", *PINNED_EMPTY)
    assert events(srv, ev.LoadScan)[-1].chosen is None
    assert msgs and "loaded no entry" in msgs[-1]


# -- REUSE-1 ---------------------------------------------------------------------------------------

# Recurrent, no rollback depth: the first prompt leaves checkpoints at 20 (the last user message)
# and 36 (the tail); the second shares 38 tokens, so fixed restores the one at 36 and resumes there.
KEEPS_MOST = (
    ("request", {"tokens": A40, "spans": (20,), "n_predict": 2}),
    ("run", {}),
    ("request", {"tokens": (*A40[:38], 90, 91), "n_predict": 2}),
    ("run", {}),
)


def test_reuse1_sees_a_short_restore_planted_in_the_model_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    # A restore that resumes one token early, planted in the rule fixed's resume applies: its
    # recurrent checkpoint then serves no resume and fixed re-processes from 0. REUSE-1's own
    # arithmetic (server-context.cpp:3355-3356) still resumes at 36; one that called
    # policy.restored_positions would have found nothing better than 0 either.
    real = policy.restored_positions

    def one_short(pos_next: int, pos_min: int, pos_max: int, n_tokens: int) -> tuple[int, int]:
        new_pos_next, n_past = real(pos_next, pos_min, pos_max, n_tokens)
        return new_pos_next, n_past - 1

    assert judged(Server(_recurrent(), DESIGNS["fixed"]), "REUSE-1", *KEEPS_MOST) == []
    monkeypatch.setattr(policy, "restored_positions", one_short)
    srv = Server(_recurrent(), DESIGNS["fixed"])
    msgs = judged(srv, "REUSE-1", *KEEPS_MOST)
    assert events(srv, ev.PromptStart)[-1].n_past == 0
    assert msgs and "served a resume at 36" in msgs[-1]


# -- LIMIT-1 ---------------------------------------------------------------------------------------


def test_limit1_sees_a_wrong_token_estimate_planted_in_the_model_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    # --cache-ram -1: no byte limit, the token limit is n_ctx = 32 (test_scenarios_eviction
    # shows update() popping X1 and X2 for it). An estimate planted in the model's rule that
    # lets any number of tokens stay: the cache ends with 60 tokens. LIMIT-1's own estimate
    # (server-task.cpp:1880-1883) is still 32.
    def unbounded(total_size: int, total_tokens: int, limit_size: int, limit_tokens: int) -> int:
        return 10**9

    steps = [("request", {"tokens": X(i), "n_predict": 1}) for i in range(1, 8)]
    runs = [step for req in steps for step in (req, ("run", {}))]
    assert judged(kv_server("fixed", cache_ram=-1, n_ctx_slot=32), "LIMIT-1", *runs) == []
    monkeypatch.setattr(policy, "token_limit_estimate", unbounded)
    srv = kv_server("fixed", cache_ram=-1, n_ctx_slot=32)
    msgs = judged(srv, "LIMIT-1", *runs)
    assert srv.cache is not None and srv.cache.n_tokens() > 32
    assert msgs and "over the token limit 32" in msgs[-1]
