"""Issue 25: checks whose expectation does not come from the model rule they judge.

CKPT-5 (server-context.cpp:3505-3560 at 0c1e570): a prompt batch ends early only where the
fill loop names an end: the last user-message start, a user-message start with no checkpoint
yet or more than ``--checkpoint-min-step`` past the newest, or the tail offsets. CKPT-3 judges
the other direction (no batch runs across a named end), so a fill that breaks at every
user-message start is CKPT-5's alone.
"""

from __future__ import annotations

from typing import Any

import pytest

from pcspec.model import events as ev
from pcspec.model.server import Server
from pcspec.model.variants import ALL, DESIGNS
from pcspec.properties.base import Events
from pcspec.properties.catalogue import get_property
from pcspec.properties.checkpoints import ckpt5_batch_ends
from pcspec.properties.judge import Judge
from tests.support.common import CPP_DESIGNS, events, recurrent_config


def judged(srv: Server, pid: str, *steps: tuple[str, dict[str, Any]]) -> list[str]:
    """Run the operations with one property judged after each; its messages."""
    judge = Judge(srv, [get_property(pid)])
    out: list[str] = []
    for name, args in steps:
        getattr(srv, name)(**args)
        out += [v.message for v in judge()]
    return out


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
    srv = Server(_recurrent(), ALL["mutant:break-every-user-message"])
    msgs = judged(srv, "CKPT-5", *SPACED)
    assert [(b.start, b.n) for b in events(srv, ev.Batch)][2:4] == [(10, 4), (14, 10)]
    assert len(msgs) == 1 and "batch [10, 14) ended at 14" in msgs[0] and "list [6]" in msgs[0]


def test_ckpt3_does_not_see_the_extra_break() -> None:
    # why CKPT-5 is needed: the creation rules' own check holds on the mutant's run
    assert judged(Server(_recurrent(), ALL["mutant:break-every-user-message"]), "CKPT-3", *SPACED) == []


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
