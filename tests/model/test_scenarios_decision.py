"""Decision tasks (SERVER_TASK_TYPE_DECISION, tools/server/server-task.h:19 of b11434 and b11549):
what the cache and the checkpoints see of them, in the rule sets whose tree has them.

The C++ of b11549 (tools/server/server-context.cpp):
* 1773: ``update_cache = update_cache && task.type == SERVER_TASK_TYPE_COMPLETION``: the incoming
  task's type gates the save and the load at slot selection together;
* 3868: ``do_checkpoint = do_checkpoint && slot.task->type == SERVER_TASK_TYPE_COMPLETION``;
* 3587-3589: only embedding and rerank are stateless, so a decision reuses the slot's prefix;
* 4321-4326: after the prompt's decode, ``send_decision`` and ``release``, nothing sampled;
* 2779-2793: the idle-slot save tests no task type, so a decision's prompt is saved.
"""

from __future__ import annotations

import pytest

from pcspec.core.loop import apply
from pcspec.core.ops import Request, parse
from pcspec.engines.walker import Walker
from pcspec.model import events as ev
from pcspec.model.config import Config, MemoryKind
from pcspec.model.designs import DESIGNS, RULE_SET_MODELS
from pcspec.model.server import Server
from pcspec.model.slot import TaskType
from pcspec.properties.mutants import MUTANTS
from pcspec.properties.rules import RULES, rules_for
from tests.support.common import events

CONV = tuple(range(1, 40))  # a system prompt of 8 tokens, then a user message
QUESTION = (*CONV, 200, 201, 202)


def swa_server(rule_set: str, n_slots: int = 1, idle: bool = False) -> Server:
    cfg = Config(n_slots=n_slots, n_ctx_slot=96, n_batch=16, n_ubatch=4, memory=MemoryKind.SWA, n_swa=4,
                 swa_cells=8, n_ctx_checkpoints=4, checkpoint_min_step=2, cache_ram=-1,
                 cache_idle_slots=idle, slot_prompt_similarity=0.0)
    return Server(cfg, RULE_SET_MODELS[rule_set])


@pytest.mark.parametrize("rule_set", ["b11434", "b11549", "november"])
def test_a_decision_makes_no_checkpoint_and_releases_with_nothing_sampled(rule_set: str) -> None:
    srv = swa_server(rule_set)
    srv.request(CONV, spans=(8,), chat=True, n_predict=2)
    srv.run()
    before = list(srv.slots[0].prompt.checkpoints)
    assert before  # the completion made checkpoints (SWA)
    start = len(srv.heap.events)
    srv.request((*QUESTION, *range(300, 330)), type=TaskType.DECISION)
    srv.run()
    batches = events(srv, ev.Batch, start)
    assert batches and not any(b.checkpoint or b.needs for b in batches)  # 3868 of b11549
    assert not events(srv, ev.CkptCreate, start)
    (start_ev,) = events(srv, ev.PromptStart, start)
    assert start_ev.n_past == len(CONV)  # the prefix reused: not a stateless task (3587-3589)
    (rel,) = events(srv, ev.Release, start)
    assert rel.token is None and rel.error is None  # send_decision, release (4321-4326)
    assert not events(srv, ev.Generate, start)
    assert srv.slots[0].prompt.n_tokens == len(QUESTION) + 30  # the prompt only
    assert srv.slots[0].prompt.checkpoints == before


def test_a_decision_selecting_a_slot_neither_saves_it_nor_loads_into_it() -> None:
    """1773 of b11549: LRU selection sets update_cache, the decision's type clears it. A
    completion in the same place saves the slot's prompt and loads the best entry."""
    for kind, saves in ((TaskType.DECISION, 0), (TaskType.COMPLETION, 1)):
        srv = swa_server("b11549")
        srv.request(CONV, n_predict=2)
        srv.run()
        start = len(srv.heap.events)
        srv.request(tuple(range(500, 520)), type=kind)
        (sel,) = events(srv, ev.Select, start)
        assert sel.how == "lru" and sel.update_cache
        assert len(events(srv, ev.SaveBegin, start)) == saves, kind
        assert srv.cache is not None and len(srv.cache.entries) == saves


def test_the_idle_slot_save_saves_the_prompt_a_decision_left() -> None:
    """2779-2793 of b11549: after a launch every idle slot is saved, whatever its last task."""
    srv = swa_server("b11549", n_slots=2, idle=True)
    srv.request(QUESTION, type=TaskType.DECISION, id_slot=0)
    srv.run()
    assert srv.slots[0].prompt.tokens == QUESTION
    start = len(srv.heap.events)
    srv.request(tuple(range(500, 520)), id_slot=1)
    assert [e.slot for e in events(srv, ev.IdleSave, start)] == [0]
    assert srv.cache is not None and [e.prompt.tokens for e in srv.cache.entries] == [QUESTION]


def test_decisions_are_drawn_only_for_the_rule_sets_whose_tree_has_them() -> None:
    decide = [r for r in RULES if r.name in ("decide", "decide_group")]
    assert len(decide) == 2
    for name, variant in {**DESIGNS, **RULE_SET_MODELS, **MUTANTS}.items():
        for r in decide:
            assert (r in rules_for(variant)) == (name in ("b11434", "b11549", "november")), (name, r.name)
    # the designs' walkers draw from the table they had before the rules existed
    assert [d.rule for d in Walker(DESIGNS["baseline"]).table] == [r for r in RULES if r not in decide]


def test_a_walk_of_b11549_sends_decisions_and_replays() -> None:
    w = Walker(RULE_SET_MODELS["b11549"])
    sent = 0
    for seed in range(40):
        ex = w.example(seed)
        sent += sum(1 for op in ex.ops if isinstance(op, Request) and op.type == "decision")
    assert sent > 0
    # a trace's decision (the op vocabulary has it)
    ops = [{"op": "request", "tokens": list(CONV), "n_predict": 2}, {"op": "run"},
           {"op": "request", "tokens": list(QUESTION), "type": "decision"}, {"op": "run"}]
    srv = swa_server("b11549")
    for op in ops:
        apply(srv, parse(op), list)
    assert srv.crash is None and srv.slots[0].prompt.tokens == QUESTION
