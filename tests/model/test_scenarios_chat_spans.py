"""Message spans from the chat session only (b11549 on): a raw ``/completion`` carries no spans.

b11549 sets ``message_spans`` in one place, ``server_task::apply_chat_session`` (tools/server/
server-task.h:261-270 of b11549), which returns at once for the empty session ``/completion``
passes (server-context.cpp:4825 and 5415-5425 of b11549); b11434 and the October tree read a
``message_delimiters`` field of any completion request (server-context.cpp:4656-4672 of b11434,
4286-4302 at 0c1e570). The model takes this in ``Server.request``: its ``chat`` argument.
"""

from __future__ import annotations

import pytest

from pcspec.core.loop import apply
from pcspec.core.ops import Request, parse
from pcspec.live.client import completion_body
from pcspec.live.ops import LiveOp
from pcspec.live.predict import Predictor
from pcspec.model import events as ev
from pcspec.model.config import Config, MemoryKind
from pcspec.model.designs import DESIGNS, RULE_SET_MODELS
from pcspec.model.server import Server
from pcspec.properties.rules import Fuzz
from tests.support.common import events

PROMPT = tuple(range(1, 40))
SPANS = (8, 20)


def swa(variant: str) -> Server:
    cfg = Config(n_slots=1, n_ctx_slot=96, n_batch=16, n_ubatch=4, memory=MemoryKind.SWA, n_swa=4, swa_cells=8,
                 n_ctx_checkpoints=4, checkpoint_min_step=2, cache_ram=-1)
    return Server(cfg, {**DESIGNS, **RULE_SET_MODELS}[variant])


def spans_seen(variant: str, op: dict[str, object]) -> tuple[int, ...]:
    srv = swa(variant)
    apply(srv, parse(op), list)
    apply(srv, parse({"op": "run"}), list)
    (first, *_) = events(srv, ev.Batch)
    return first.spans


RAW = {"op": "request", "tokens": list(PROMPT), "spans": list(SPANS)}
CHAT = {**RAW, "chat": True}


@pytest.mark.parametrize("variant", ["b11549", "november"])
def test_a_raw_completion_has_no_spans_where_they_come_from_the_chat_session(variant: str) -> None:
    assert spans_seen(variant, RAW) == ()
    assert spans_seen(variant, CHAT) == SPANS
    # without spans the fill breaks only at the prompt's tail: no user-message checkpoint at 8
    srv = swa(variant)
    apply(srv, parse(RAW), list)
    apply(srv, parse({"op": "run"}), list)
    assert 8 not in [c.n_tokens for c in srv.slots[0].prompt.checkpoints]


@pytest.mark.parametrize("variant", ["october", "b11434", "baseline", "pr30137", "pr27451", "fixed"])
def test_a_raw_completion_keeps_its_delimiters_spans_where_the_field_is_read(variant: str) -> None:
    assert spans_seen(variant, RAW) == SPANS == spans_seen(variant, CHAT)


def test_the_fuzzing_rules_mark_their_chat_requests_where_spans_come_from_the_chat_session() -> None:
    for variant, marked in (("b11549", True), ("baseline", False)):
        f = Fuzz({**DESIGNS, **RULE_SET_MODELS}[variant], props=())
        f.setup(swa(variant).cfg, ["ckpt.alloc"])
        f.new_prompt(0, 10, -1, True, -1)
        last = f.trace[-1]
        assert isinstance(last, Request) and last.spans == (8,) and last.chat is marked


def test_live_sends_no_delimiters_and_the_model_predicts_no_spans() -> None:
    """pcspec live's /completion body has no message_delimiters, and its prediction runs the
    request with no spans, so for b11549 the two agree."""
    body = completion_body(list(PROMPT), n_predict=2)
    assert "message_delimiters" not in body
    p = Predictor(swa("b11549").cfg, RULE_SET_MODELS["b11549"])
    p.arrive(LiveOp("request", id=0, segments=(("lit", PROMPT),), n_predict=2))
    p.run()
    assert all(b.spans == () for b in events(p.srv, ev.Batch))
