"""REUSE-1, REUSE-2 and CKPT-3, each shown holding on ``fixed`` and violated where
the model says it is (the C++ designs for REUSE-1 and REUSE-2, a mutant each for all three).

REUSE-1 (server-context.cpp:3274-3386): the C++ tests live memory with ``pos_min >=
pos_min_thold`` (3330) where ``pos_min_thold = max(0, pos_next - n_swa - ...)`` (3278); for an
SWA slot that shares at most ``n_swa`` tokens with the new prompt the threshold is 0, the
memory's ``pos_min`` 0 is not below it, and with no checkpoint the prompt is re-processed from
0, though every cell is there. ``fixed`` resumes from live memory. A recurrent memory with a
rollback depth (``n_rs_seq``) can roll back without a checkpoint; the C++ never lets it.

REUSE-2 (server-context.cpp:1578-1588): a task pinned to an empty slot computes ``f_keep =
f_sim_best * n / 0`` (NaN), ``NaN < 0.5`` is false, so the cache is never consulted.

CKPT-3 (server-context.cpp:3529-3616): batches end at the last user message's start and
``4 + n_ubatch`` and ``4`` tokens before the prompt's end (#20288), and a checkpoint is made
at each such batch start.
"""

from __future__ import annotations

from typing import Any

import pytest

from pcspec.model import events as ev
from pcspec.model.config import Config
from pcspec.model.designs import DESIGNS
from pcspec.model.server import Server
from pcspec.properties.base import Events
from pcspec.properties.checkpoints import ckpt3_creation_rules
from pcspec.properties.mutants import MUTANTS
from tests.support.common import KV2, PINNED_EMPTY, events, judged, recurrent_config

CPP = ("baseline", "pr30137", "pr27451")


# -- REUSE-1 -------------------------------------------------------------------------------------

SWA = Config(n_slots=1, n_ctx_slot=128, n_batch=16, n_ubatch=4, n_swa=8, swa_cells=16, cache_ram=0)
# A 6-token prompt, then one that shares those 6 (test_reuse1_short_swa_prefix says why).
SWA_SHORT_PREFIX = (
    ("request", {"tokens": (1, 2, 3, 4, 5, 6), "n_predict": 2}),
    ("run", {}),
    ("request", {"tokens": (1, 2, 3, 4, 5, 6, 50, 51), "n_predict": 2}),
    ("run", {}),
)


@pytest.mark.parametrize("variant", [*CPP, "fixed"])
def test_reuse1_short_swa_prefix(variant: str) -> None:
    # The first prompt (6 tokens) is batched [0, 2) and [2, 6): the tail break 4 tokens before
    # its end makes a checkpoint at n_tokens 2 (pos 0..1). The slot then holds 6 + 1 tokens,
    # cells 0..6, all inside the window. The new prompt shares 6: pos_next 6, thold max(0, 6 -
    # 8) = 0, and the memory's pos_min 0 is not below it, so the C++ scans the checkpoints and
    # restores the one at 2 (its pos_min is 0): n_past 1, five tokens re-processed for nothing.
    srv = Server(SWA, DESIGNS[variant])
    msgs = judged(srv, "REUSE-1", *SWA_SHORT_PREFIX)
    start = events(srv, ev.PromptStart)[-1]
    if variant == "fixed":
        assert msgs == []
        assert (start.n_past, start.restored, start.reprocess) == (6, None, None)
    else:
        assert start.n_past < 6
        assert msgs and "its live memory served a resume at 6" in msgs[0]


@pytest.mark.parametrize("variant", [*CPP, "fixed"])
def test_reuse1_recurrent_rollback_depth(variant: str) -> None:
    # A recurrent state that can roll back 4 tokens (n_rs_seq 4, the RS context type): the slot
    # holds 20 + 1 tokens; a prompt that diverges at 18 can resume at 18 from live memory.
    cfg = recurrent_config(n_slots=1, n_rs_seq=4, cache_ram=0, n_ctx_checkpoints=0)
    srv = Server(cfg, DESIGNS[variant])
    a = tuple(range(1, 21))
    msgs = judged(
        srv,
        "REUSE-1",
        ("request", {"tokens": a, "n_predict": 2}),
        ("run", {}),
        ("request", {"tokens": (*a[:18], 70, 71, 72), "n_predict": 2}),
        ("run", {}),
    )
    start = events(srv, ev.PromptStart)[-1]
    if variant == "fixed":
        assert msgs == [] and start.n_past == 18
    else:
        assert start.n_past == 0 and msgs


def test_reuse1_mutant_live_thold_is_caught() -> None:
    assert judged(Server(SWA, MUTANTS["mutant:live-thold"]), "REUSE-1", *SWA_SHORT_PREFIX)


def test_fixed_prefers_the_checkpoint_that_keeps_most() -> None:
    # Recurrent, no rollback: checkpoints at 20 and 36 (tail). A prompt sharing 38 of the 41
    # live tokens: live memory cannot roll back; fixed restores the checkpoint at 36.
    cfg = recurrent_config(n_slots=1, n_ctx_slot=256, cache_ram=0)
    srv = Server(cfg, DESIGNS["fixed"])
    a = tuple(range(1, 41))
    msgs = judged(
        srv,
        "REUSE-1",
        ("request", {"tokens": a, "spans": (20,), "n_predict": 2}),
        ("run", {}),
        ("request", {"tokens": (*a[:38], 90, 91), "n_predict": 2}),
        ("run", {}),
    )
    assert msgs == []
    assert events(srv, ev.CkptRestore)[-1].n_tokens == 36


# -- REUSE-2 -------------------------------------------------------------------------------------



@pytest.mark.parametrize("variant", [*CPP, "fixed"])
def test_reuse2_pinned_empty_slot(variant: str) -> None:
    srv = Server(KV2, DESIGNS[variant])
    msgs = judged(srv, "REUSE-2", *PINNED_EMPTY)
    scans = events(srv, ev.LoadScan)
    if variant == "fixed":
        assert msgs == []
        assert scans[-1].chosen is not None
    else:
        assert msgs and "the cache was not consulted" in msgs[-1]


def test_reuse2_mutant_is_caught() -> None:
    assert judged(Server(KV2, MUTANTS["mutant:empty-pinned-skips-cache"]), "REUSE-2", *PINNED_EMPTY)


# -- CKPT-3 ------------------------------------------------------------------------------------------

A1 = tuple(range(1, 41))  # n_batch 16, n_ubatch 4: breaks at 20 (last user), 32 and 36 (tail)


@pytest.mark.parametrize("variant", [*CPP, "fixed"])
def test_ckpt3_holds_on_every_design(variant: str) -> None:
    srv = Server(recurrent_config(n_slots=1, n_ctx_slot=256, cache_ram=0), DESIGNS[variant])
    msgs = judged(srv, "CKPT-3", ("request", {"tokens": A1, "spans": (20,), "n_predict": 2}), ("run", {}))
    assert msgs == []
    assert [(b.start, b.n) for b in events(srv, ev.Batch)] == [(0, 16), (16, 4), (20, 12), (32, 4), (36, 4)]
    assert [c.n_tokens for c in srv.slots[0].prompt.checkpoints] == [20, 36]


def test_ckpt3_mutant_no_tail_break_is_caught() -> None:
    srv = Server(recurrent_config(n_slots=1, n_ctx_slot=256, cache_ram=0), MUTANTS["mutant:no-tail-break"])
    msgs = judged(srv, "CKPT-3", ("request", {"tokens": A1, "spans": (20,), "n_predict": 2}), ("run", {}))
    assert any("runs across 32" in m for m in msgs)


def _batch(start: int, n: int, listed: tuple[int, ...], **extra: Any) -> ev.Batch:
    data = {"slot": 0, "task": 0, "start": start, "n": n, "room": 16, "checkpoint": False, "needs": True,
            "n_prompt": 40, "spans": (20,), "last_user": 20, "listed": listed,
            "pos_min": start - 1} | extra  # fmt: skip
    return ev.Batch(**data)


def _create(n_tokens: int) -> ev.CkptCreate:
    return ev.CkptCreate(slot=0, ckpt=1, task=0, n_tokens=n_tokens, pos_min=n_tokens - 1, pos_max=n_tokens - 1,
                         identical_to_restored=False)


def test_ckpt3_judges_both_ways() -> None:
    srv = Server(recurrent_config(n_slots=1, n_ctx_slot=256, cache_ram=0), DESIGNS["fixed"])
    create = _create(16)
    # excessive: a checkpoint at 16, which is no user-message start and not near the end
    excessive = ckpt3_creation_rules(srv, Events([create, _batch(16, 4, ())]))
    assert excessive and "made a checkpoint at n_tokens=16" in excessive[0]
    # missing: the batch at the last user message's start made none
    missing = ckpt3_creation_rules(srv, Events([_batch(20, 12, ())]))
    assert missing and "no checkpoint at n_tokens=20" in missing[0]
    # too close: a user-message start within min step of the last checkpoint, not the last one
    close = ckpt3_creation_rules(
        srv, Events([_create(12), _batch(12, 4, (8,), spans=(12, 20))])
    )
    assert close and "too close" in close[0]

