"""Shared-prefix child tasks (b11434 on): a request of several decisions becomes a parent and
children that share its first ``n_tokens_shared`` tokens, copied to them by ``seq_cp`` and
``prompt.clone()``.

The C++ of b11549 (tools/server/):
* server-decision.cpp:1139-1169: ``server_decision_group_tasks``, runs of ``--parallel`` prompts;
* server-context.cpp:2761-2773, 2462-2518: the parent's slot, then ``get_free_slots`` for the
  children (deferred when too few), children launched first (``WAIT_OTHER``, 1955-1957), then the parent;
* 3594-3595: the parent's prefix reuse capped at ``n_tokens_shared``;
* 3833-3849, 3945-3948: the copy once the parent holds the shared prefix, the fill stopping there;
* 761-766: ``copy_prompt_to``: ``seq_rm``, ``seq_cp`` on both contexts, ``prompt.clone()``;
* 591-594: a child's release clears its prompt;
* 4243-4265: a parent in ``DONE_PROMPT`` with children still waiting fails an assert;
* src/llama-memory-recurrent.cpp:202-205, 265-300, 605-630: the shared tail cell.
"""

from __future__ import annotations

import dataclasses

import pytest

from pcspec.core.loop import apply
from pcspec.core.ops import RequestGroup, parse
from pcspec.core.ops import parse as parse_op
from pcspec.engines.walker import Walker
from pcspec.model import events as ev
from pcspec.model import policy
from pcspec.model.config import Config, MemoryKind
from pcspec.model.design import Design, Sharing
from pcspec.model.designs import DESIGNS, RULE_SET_MODELS
from pcspec.model.errors import PcspecError
from pcspec.model.memory import SeqMemory
from pcspec.model.rulesets import SPEC
from pcspec.model.server import Server
from pcspec.model.slot import SlotState, TaskType
from pcspec.model.state import type_invariant
from pcspec.properties.checkpoints import ckpt5_batch_ends
from pcspec.properties.judge import Judge
from tests.support.common import events

SHARED = tuple(range(1, 30))  # 29 tokens every question shares
QUESTIONS = [(*SHARED, 200, 201), (*SHARED, 300), (*SHARED, 400, 401, 402)]


def server(variant: Design, memory: MemoryKind = MemoryKind.KV, n_slots: int = 3, **kw: object) -> Server:
    args: dict[str, object] = dict(n_slots=n_slots, n_ctx_slot=96, n_batch=16, n_ubatch=4, memory=memory,
                                   n_ctx_checkpoints=4, checkpoint_min_step=2, cache_ram=-1,
                                   slot_prompt_similarity=0.1, n_rs_seq=2)
    args.update(kw)
    return Server(Config(**args), variant)  # type: ignore[arg-type]


def with_decisions(design: str) -> Design:
    """A design whose server offers decision tasks (the model runs a group the same way under
    every variant; only the fuzzing rules are gated by the rule set's ``decision_tasks``)."""
    return type(DESIGNS[design])(dataclasses.replace(SPEC, decision_tasks=True))


def test_the_grouping_is_server_decision_group_tasks() -> None:
    a, b, c = QUESTIONS
    assert policy.decision_groups([a, b, c], 3) == [(0, (1, 2), 29)]
    assert policy.decision_groups([a, b, c], 2) == [(0, (1,), 29), (2, (), 0)]  # runs of --parallel
    assert policy.decision_groups([a, b, c], 1) == [(0, (), 0), (1, (), 0), (2, (), 0)]
    assert policy.decision_groups([a, SHARED], 3) == [(0, (1,), 28)]  # each keeps a token of its own
    assert policy.decision_groups([a, (9, 9)], 3) == [(0, (), 0), (1, (), 0)]  # nothing shared
    assert policy.decision_groups([(), a], 3) == [(0, (), 0), (1, (), 0)]  # size_t: () bounds nothing
    assert policy.decision_groups([a], 0) == [(0, (), 0)]


def test_three_decisions_on_np3_share_the_parents_memory_at_the_shared_prefix() -> None:
    srv = server(RULE_SET_MODELS["b11549"])
    srv.request((*SHARED, 200), n_predict=2)  # the first question's first 30 tokens, and a reply
    srv.run()
    holder = next(s.id for s in srv.slots if s.prompt.tokens)
    at_copy: list[tuple[int, tuple[int, ...], tuple[int, ...]]] = []

    def snapshot(e: ev.Event) -> None:
        assert isinstance(e, ev.CopyPrompt)
        tgt = srv.ctx_tgt.seqs
        at_copy.append((e.other, tgt[e.other].attn, tgt[e.slot].attn))

    srv.heap.watch("copy_prompt", snapshot)
    start = len(srv.heap.events)
    ids = srv.request_group(QUESTIONS)
    (group,) = events(srv, ev.Group, start)
    assert (group.task, group.children, group.n_shared) == (ids[0], tuple(ids[1:]), 29)
    launches = events(srv, ev.Launch, start)
    assert [e.task for e in launches] == [ids[1], ids[2], ids[0]]  # children first (2476-2518)
    assert launches[-1].slot == holder  # the parent by LCP similarity; no cache update (a decision)
    children = [e.slot for e in launches[:2]]
    assert all(srv.slots[c].state == SlotState.WAIT_OTHER for c in children)
    assert not events(srv, ev.IdleSave, start)  # (no idle-slot save here; nor would it touch them)
    srv.run()
    assert srv.crash is None and type_invariant(srv) == []
    # each child got the parent's memory of exactly the shared prefix
    assert sorted(c for c, _, _ in at_copy) == sorted(children)
    assert all(child == parent == SHARED for _, child, parent in at_copy)
    starts = {e.task: e for e in events(srv, ev.PromptStart, start)}
    # the parent's slot held 31 tokens, 30 of them shared with its prompt: the reuse is capped
    # at n_tokens_shared (3594-3595)
    assert (starts[ids[0]].n_slot_tokens, starts[ids[0]].n_prefix) == (31, 29)
    assert all(starts[i].n_past == 29 for i in ids[1:])  # the children resume at the shared prefix
    # the children's prompts are cleared at release (591-594); the parent keeps its own
    assert all(srv.slots[c].prompt.tokens == () and srv.ctx_tgt.seqs[c].attn == () for c in children)
    assert srv.slots[holder].prompt.tokens == QUESTIONS[0]


def test_the_parent_stops_its_fill_at_the_shared_prefix_and_ckpt5_names_that_end() -> None:
    srv = server(RULE_SET_MODELS["b11549"], n_batch=8)
    ids = srv.request_group(QUESTIONS)
    srv.run()
    batches = [b for b in events(srv, ev.Batch) if b.task == ids[0]]
    assert [(b.start, b.n) for b in batches] == [(0, 8), (8, 8), (16, 8), (24, 5), (29, 2)]
    stop = batches[3]
    assert stop.wait_shared == 29 and stop.n < stop.room  # stopped with room left (3945-3948)
    assert ckpt5_batch_ends(srv, [stop]) == []
    # the same end without the shared prefix named is an end the rules do not name
    assert ckpt5_batch_ends(srv, [dataclasses.replace(stop, wait_shared=None)])
    assert ckpt5_batch_ends(srv, [dataclasses.replace(stop, wait_shared=28)])


def test_too_few_free_slots_defer_the_parent_until_a_release() -> None:
    srv = server(RULE_SET_MODELS["b11549"])
    srv.request(tuple(range(500, 530)), n_predict=8)  # one slot busy for a while
    start = len(srv.heap.events)
    ids = srv.request_group(QUESTIONS)
    (d,) = events(srv, ev.DeferredChildren, start)
    assert (d.task, d.n_free, d.n_children) == (ids[0], 1, 2)  # 2761-2769
    assert not events(srv, ev.Launch, start)
    srv.run()
    assert [e.task for e in events(srv, ev.Launch, start)] == [ids[1], ids[2], ids[0]]
    assert {e.task for e in events(srv, ev.Release, start)} >= set(ids)


@pytest.mark.parametrize("design", ["b11549", "pr27451", "pr30137", "fixed"])
def test_the_child_is_a_new_holder_of_checkpoint_copies_by_the_sharing_seam(design: str) -> None:
    """A recurrent parent holds checkpoints of its completion; the clone copies the list as
    the seam copies it: deep copies allocate (and PERF-1 counts them), shared payloads and
    shared objects take references. The copies live until the child's release."""
    variant = RULE_SET_MODELS[design] if design in RULE_SET_MODELS else with_decisions(design)
    srv = server(variant, MemoryKind.RECURRENT)
    srv.request(SHARED, n_predict=2)
    srv.run()
    parent = next(s for s in srv.slots if s.prompt.tokens)
    kept = [c for c in parent.prompt.checkpoints if c.pos_max <= 29]
    assert kept
    seen: dict[int, list[object]] = {}

    def holdings(e: ev.Event) -> None:
        assert isinstance(e, ev.CopyPrompt)
        child = srv.slots[e.other]
        seen[e.other] = [(c, c.tgt, c.refs, c.tgt.refs if c.tgt else 0) for c in child.prompt.checkpoints]

    srv.heap.watch("copy_prompt", holdings)
    start = len(srv.heap.events)
    physical = srv.physical_bytes
    srv.request_group(QUESTIONS)
    srv.run()
    assert srv.crash is None and len(seen) == 2
    judged = Judge(srv)()
    assert not [f for f in judged if f.rule == "REF-1"]
    copies = events(srv, ev.CopyPayload, start)
    for held in seen.values():
        objs = [h[0] for h in held]
        assert len(objs) == len(kept)
        if variant.sharing == Sharing.DEEP_COPY:
            assert all(o not in kept and h[1] not in [k.tgt for k in kept] for o, h in zip(objs, held, strict=True))
        elif variant.sharing == Sharing.SHARED_PAYLOAD:
            assert all(o not in kept for o in objs)
            assert [h[1] for h in held] == [k.tgt for k in kept]  # the payloads taken by reference
        else:
            assert objs == kept  # the parent's own objects
            assert all(h[2] >= 2 for h in held)  # (the parent's list and the child's)
    if variant.sharing == Sharing.DEEP_COPY:
        assert len(copies) == 2 * len(kept)  # every payload, for each child: PERF-1
        assert sum(e.bytes for e in copies) == 2 * sum(k.size() for k in kept)
    else:
        assert not [e for e in copies if e.role == "ckpt_tgt"]
    # the children's release dropped their copies: what is live is what was before
    assert srv.physical_bytes == physical


def test_a_recurrent_child_shares_the_parents_tail_cell_until_either_decodes() -> None:
    """The abort question: a partial ``seq_rm`` on a shared tail cell returns false (202-205 of
    b11549), which the server's ``seq_rm`` turns into an abort. The share ends at the first decode
    of either sequence (605-630), a whole removal, or a state read (1022); the server's partial
    ``seq_rm`` calls come only after a prompt start whose restore branch read a state or reset
    to 0, or in generation (speculative rollback), which no child reaches. So the group runs
    without an abort, and the refusal shows only when the memory is called directly."""
    srv = server(RULE_SET_MODELS["b11549"], MemoryKind.RECURRENT, n_batch=8, has_draft=True,
                 draft_memory=MemoryKind.RECURRENT)
    shares: list[tuple[frozenset[int], ...]] = []

    def tails(e: ev.Event) -> None:
        shares.append(tuple(m.tail_with for m in srv.ctx_tgt.seqs))

    srv.heap.watch("copy_prompt", tails)
    ids = srv.request_group(QUESTIONS)
    srv.run()
    assert srv.crash is None and type_invariant(srv) == []
    assert shares[-1] == (frozenset({1, 2}), frozenset({0, 2}), frozenset({0, 1}))  # parent on slot 2
    assert all(not m.tail_with for m in srv.ctx_tgt.seqs)  # each decoded or was cleared since
    assert all(e.task in ids for e in events(srv, ev.Release))

    # the mechanism, on the memory itself
    srv2 = server(RULE_SET_MODELS["b11549"], MemoryKind.RECURRENT)
    ctx = srv2.ctx_tgt
    ctx.decode([(0, SHARED)])
    ctx.seq_cp(0, 1)
    assert ctx.seqs[1].part == SHARED and ctx.seqs[0].tail_with == {1} and ctx.seqs[1].tail_with == {0}
    assert not ctx.seq_rm(0, 28) and not ctx.seq_rm(1, 28)  # within n_rs, refused while shared
    assert ctx.seq_rm(1, 29)  # nothing of the cell removed: no refusal
    ctx.decode([(1, (77,))])  # the child moves to a cell of its own
    assert not ctx.seqs[0].tail_with and not ctx.seqs[1].tail_with
    assert ctx.seq_rm(0, 28)  # rolled back within n_rs
    ctx.seq_cp(1, 0)
    ctx.seq_rm(1, -1)  # a whole removal leaves the cell
    assert not ctx.seqs[0].tail_with and ctx.seq_rm(0, 29)


def test_an_iswa_child_takes_a_copy_of_the_parents_stream() -> None:
    """iSWA, one stream per sequence: ``seq_cp`` copies the SWA stream (src/llama-kv-cache.cpp:
    512-555 of b11549): the child's cells are the parent's at the same indices, relabelled, and
    its window starts where the parent's does."""
    srv = server(RULE_SET_MODELS["b11549"], MemoryKind.SWA, n_swa=4, swa_cells=8, kv_unified=False)
    seen: list[tuple[object, ...]] = []

    def cells(e: ev.Event) -> None:
        assert isinstance(e, ev.CopyPrompt) and srv.ctx_tgt.swa is not None
        a, b = srv.ctx_tgt.swa.streams[e.slot], srv.ctx_tgt.swa.streams[e.other]
        seen.append(([c[1] if c else None for c in a.cells], [c[1] if c else None for c in b.cells],
                     {c[0] for c in b.cells if c}, a.head == b.head, srv.ctx_tgt.seqs[e.other].pos_range(),
                     srv.ctx_tgt.seqs[e.slot].pos_range(), srv.ctx_tgt.seqs[e.other].is_state_of(SHARED)))

    srv.heap.watch("copy_prompt", cells)
    srv.request_group(QUESTIONS)
    srv.run()
    assert srv.crash is None and type_invariant(srv) == [] and len(seen) == 2
    for parent, child, owners, head, child_range, parent_range, state in seen:
        assert parent == child and len(owners) == 1 and head and child_range == parent_range == (21, 28)
        assert state
    assert not [f for f in Judge(srv)() if f.rule == "STATE-1"]


def test_an_iswa_group_with_kv_unified_is_refused_and_ungrouped_decisions_are_not() -> None:
    srv = server(RULE_SET_MODELS["b11549"], MemoryKind.SWA, n_swa=4, swa_cells=8, kv_unified=True)
    with pytest.raises(PcspecError, match="iSWA"):
        srv.request_group(QUESTIONS)
    assert srv.heap.op == 0  # refused before anything happened
    srv.request_group([(1, 2, 3), (9, 9, 9)])  # nothing shared: plain decisions
    srv.run()
    assert srv.crash is None
    with pytest.raises(PcspecError, match="seq_cp"):
        srv.ctx_tgt.seq_cp(0, 1)


def test_a_bad_alloc_in_the_clone_releases_the_parent_and_cancels_the_children() -> None:
    """server-context.cpp:3472, 3082-3092 of b11549: ``prompt.clone()`` throws inside the per-slot
    ``iterate``: the parent is released with the error; the request's reader cancels the rest
    (server-queue.cpp:602-621), which releases the waiting child (its prompt cleared)."""
    srv = server(RULE_SET_MODELS["b11549"], MemoryKind.RECURRENT)
    srv.request(SHARED, n_predict=2)
    srv.run()
    ids = srv.request_group(QUESTIONS)
    start = len(srv.heap.events)
    srv.inject("ckpt.alloc")
    srv.run()
    assert srv.crash is None and srv.idle and type_invariant(srv) == []
    rel = {e.task: e for e in events(srv, ev.Release, start)}
    assert rel[ids[0]].error is not None and "bad_alloc" in rel[ids[0]].error
    cancels = events(srv, ev.Cancel, start)
    assert {c.task for c in cancels} == set(ids[1:])
    assert all(s.state == SlotState.IDLE for s in srv.slots)
    assert [s.prompt.tokens for s in srv.slots if s.id != next(iter(e.slot for e in rel.values()
                                                                     if e.task == ids[0]))] == [(), ()]
    assert not [f for f in Judge(srv)() if f.rule in ("STATE-1", "REF-1", "NOABORT-1")]


def test_a_child_too_long_fails_and_the_others_are_cancelled() -> None:
    srv = server(RULE_SET_MODELS["b11549"], n_ctx_slot=64)
    long = (*SHARED, *range(600, 640))  # 69 tokens: over the context
    ids = srv.request_group([QUESTIONS[0], long, QUESTIONS[2]])
    srv.run()
    rel = {e.task: e for e in events(srv, ev.Release)}
    # the child learns it is too long at its own prompt start, after the copy (3278 of b11549 is
    # a context shift; the size check is the prompt start's, 3565-3572)
    assert rel[ids[1]].error == "request exceeds the available context size"
    assert events(srv, ev.CopyPrompt)
    # the parent had answered already; the sibling, started in the same pass, answered before
    # the cancel came out of the queue: the cancel finds no slot
    assert [(c.task, c.slot) for c in events(srv, ev.Cancel)] == [(ids[2], None)]
    assert srv.idle and srv.crash is None and all(not s.prompt.tokens for s in srv.slots[:2])


def test_a_parent_that_reaches_its_end_with_children_waiting_fails_the_assert() -> None:
    """A completion pinned to the parent's busy slot loads a cache entry onto it (the cache update
    of a busy slot, docs/FINDINGS.md F1): the parent then holds more than the shared prefix, never
    meets it, fills to its end with its children still waiting, and ``decode``'s n_cmpl loop fails
    ``GGML_ASSERT(slot.task->n_tokens_shared == 0)`` (4260 of b11549, 4103 of b11434). ``fixed`` leaves a
    busy slot alone (``cache_update_busy_slot``)."""
    ops = [
        {"op": "request", "tokens": list(range(500, 527)), "n_predict": 4},  # 30 tokens in memory
        {"op": "run"},
        {"op": "request", "tokens": list(range(700, 720)), "n_predict": 2},  # its launch saves them
        {"op": "run"},
        {"op": "request_group", "prompts": [list(q) for q in QUESTIONS]},  # the parent on slot 0
        {"op": "step"},
        {"op": "request", "tokens": list(range(500, 529)), "n_predict": 2, "id_slot": 0},
        {"op": "run"},
    ]
    for name, variant in (("b11549", RULE_SET_MODELS["b11549"]), ("fixed", with_decisions("fixed"))):
        srv = server(variant, n_batch=8, cache_idle_slots=True)
        for op in ops[:-2]:
            apply(srv, parse(op), list)
        assert srv.slots[0].task is not None and srv.slots[0].task.is_parent
        for op in ops[-2:]:
            apply(srv, parse(op), list)
        if name == "fixed":
            assert srv.crash is None and srv.idle
            continue
        assert [e for e in events(srv, ev.LoadScan) if e.chosen is not None]  # loaded onto the busy parent
        assert srv.crash is not None and srv.crash.message == "GGML_ASSERT(slot.task->n_tokens_shared == 0) failed"
        assert not events(srv, ev.CopyPrompt)  # the parent held 30 tokens, never the shared 29


def test_a_walk_of_b11549_makes_groups_and_stays_typed() -> None:
    w = Walker(RULE_SET_MODELS["b11549"])
    groups = copies = 0
    for seed in range(30):
        ex = w.example(seed)
        groups += sum(1 for op in ex.ops if isinstance(op, RequestGroup))
        copies += len(events(ex.fuzz.srv, ev.CopyPrompt))
        assert type_invariant(ex.fuzz.srv) == []
    assert groups > 0 and copies > 0


def test_the_type_invariant_names_a_broken_group() -> None:
    srv = server(RULE_SET_MODELS["b11549"], MemoryKind.RECURRENT)
    srv.request_group(QUESTIONS)
    child = next(s for s in srv.slots if s.state == SlotState.WAIT_OTHER)
    parent = next(s for s in srv.slots if s.task is not None and s.task.is_parent)
    assert type_invariant(srv) == []
    assert child.task is not None and parent.task is not None
    good_child, good_parent = child.task, parent.task
    child.task = dataclasses.replace(good_child, id_parent=-1)
    assert any("waits for a parent" in m for m in type_invariant(srv))
    child.task = good_child
    parent.task = dataclasses.replace(good_parent, n_tokens_shared=0)
    assert any("children with n_tokens_shared" in m for m in type_invariant(srv))
    parent.task = dataclasses.replace(good_parent, children=(dataclasses.replace(good_child, id_parent=99),))
    assert any("not a child of" in m for m in type_invariant(srv))
    parent.task = good_parent
    srv.run()
    srv.ctx_tgt.decode([(0, SHARED)])
    srv.ctx_tgt.seq_cp(0, 1)
    assert type_invariant(srv) == []
    srv.ctx_tgt.seqs[1].tail_with = frozenset()  # one-sided
    assert any("does not share its tail cell" in m for m in type_invariant(srv))
    kv = SeqMemory(MemoryKind.KV, 0, 0, 8, 0, tail_with=frozenset({1}))
    srv.ctx_tgt.seqs[1] = kv
    assert any("a KV memory in a recurrent context" in m or "only for a recurrent part" in m
               for m in type_invariant(srv))


def test_a_decision_type_goes_with_a_group() -> None:
    srv = server(RULE_SET_MODELS["b11549"])
    srv.request_group(QUESTIONS)
    assert all(s.task is not None and s.task.type == TaskType.DECISION for s in srv.slots)


def test_a_waiting_child_holds_its_old_prompt_only() -> None:
    """The holder graph (``model/ownership.py``): a child in ``WAIT_OTHER`` processes nothing
    yet, so a checkpoint it holds must describe a prefix of its tokens, not of its task's prompt
    (CKPT-2). A planted checkpoint of the task's prompt is named; once the child processes its
    prompt, the same checkpoint is a state of its task's prefix and passes."""
    from pcspec.model.checkpoint import Checkpoint, hold
    from pcspec.model.memory import PARTIAL_ONLY
    from pcspec.properties.checkpoints import ckpt2_describes_prefix

    srv = server(RULE_SET_MODELS["b11549"], MemoryKind.RECURRENT)
    srv.request_group(QUESTIONS)
    child = next(s for s in srv.slots if s.state == SlotState.WAIT_OTHER)
    assert child.task is not None
    other = srv.ctx_tgt.seqs[child.id]
    other.decode(child.task.tokens[:8])
    img = other.image(PARTIAL_ONLY)
    other.clear()
    ck = Checkpoint(srv.heap.new_id(), 8, child.task.id, 7, 7)
    ck.tgt = srv.heap.allocate(80, "ckpt_tgt", True, None)
    srv.heap.fill(ck.tgt, img, 80)
    hold(srv.heap, child.prompt, ck)
    assert ckpt2_describes_prefix(srv, [])  # waiting: its tokens are (), not the task's
    child.state = SlotState.PROCESSING_PROMPT
    assert ckpt2_describes_prefix(srv, []) == []


def test_a_trace_of_a_group_replays_and_shrinks() -> None:
    """The op ``request_group`` is JSON (``pcspec/core/ops.py``): a trace file of one replays
    under b11549, the shrinker drops one prompt at a time, and the kit refuses to lower it."""
    from pcspec.conform.lower import lower
    from pcspec.core.loop import replay
    from pcspec.core.shrink import simpler_op
    from pcspec.core.trace import Trace, parse

    cfg = server(RULE_SET_MODELS["b11549"]).cfg
    op = parse_op({"op": "request_group", "prompts": [list(q) for q in QUESTIONS]})
    text = Trace(RULE_SET_MODELS["b11549"], cfg, [op, {"op": "run"}]).dumps()
    trace = parse(text)
    result = replay(trace, Judge)
    assert result.server.crash is None and events(result.server, ev.CopyPrompt)
    assert [len(o.prompts) for o in simpler_op(op) if isinstance(o, RequestGroup)] == [2, 2, 2]
    with pytest.raises(PcspecError, match="request_group"):
        lower(trace)
    with pytest.raises(PcspecError, match="prompts"):
        parse(text.replace('"prompts": [[', '"prompts": [["x", ', 1))


def test_an_entry_longer_than_the_parents_prompt_stalls_it_and_the_children_wait_for_ever() -> None:
    """The same path with an entry longer than the parent's prompt: F1's livelock (PROGRESS-1),
    with the children in ``WAIT_OTHER`` behind it. Nothing can advance, so the server is idle
    (``Server.idle``: a child whose parent is stalled waits in vain) and a ``run`` ends."""
    ops = [
        {"op": "request", "tokens": list(range(500, 537)), "n_predict": 4},  # 40 tokens in memory
        {"op": "run"},
        {"op": "request", "tokens": list(range(700, 720)), "n_predict": 2},
        {"op": "run"},
        {"op": "request_group", "prompts": [list(q) for q in QUESTIONS]},
        {"op": "step"},
        {"op": "request", "tokens": list(range(500, 539)), "n_predict": 2, "id_slot": 0},
        {"op": "run", "max_steps": 50},
    ]
    srv = server(RULE_SET_MODELS["b11549"], n_batch=8, cache_idle_slots=True)
    for op in ops:
        apply(srv, parse(op), list)
    assert srv.crash is None and srv.idle
    assert srv.slots[0].stalled and events(srv, ev.Stall)  # PROGRESS-1's event
    assert sorted(s.state for s in srv.slots[1:]) == [SlotState.WAIT_OTHER] * 2
    last = max(e.op for e in events(srv, ev.Op) if e.name == "request")
    steps = [e for e in events(srv, ev.Op) if e.name == "step" and e.op > last]
    assert 0 < len(steps) < 5  # the last run stopped once the parent stalled: not 50 passes of nothing


def test_the_model_runs_the_logged_case_of_docs_live_as_b11549_did() -> None:
    """docs/LIVE.md, "What the server logs" (b11549, ``-np 2 -b 64``, two questions sharing 134
    tokens, the child's prompt 159): the child on slot 0 and the parent on slot 1 (LRU), the
    parent's fills from 0, 64, 128 and 134 (the third stops at the shared prefix), the copy at 134
    to slot 0, the child's first fill at 134 in the next pass, after the parent's last batch, and
    its prompt of 159 tokens cleared at its release."""
    shared = tuple(range(1, 135))
    parent, child = (*shared, *range(200, 220)), (*shared, *range(300, 325))
    srv = server(RULE_SET_MODELS["b11549"], n_slots=2, n_ctx_slot=1024, n_batch=64, n_ubatch=64)
    ids = srv.request_group([parent, child])
    srv.run()
    launches = [(e.slot, e.task) for e in events(srv, ev.Launch)]
    assert launches == [(0, ids[1]), (1, ids[0])]
    batches = [(e.slot, e.start, e.op) for e in events(srv, ev.Batch)]
    assert [b[1] for b in batches if b[0] == 1] == [0, 64, 128, 134]
    (copy,) = events(srv, ev.CopyPrompt)
    assert (copy.slot, copy.other, copy.n_tokens) == (1, 0, 134)
    (first_child,) = [b for b in batches if b[0] == 0]
    assert first_child[1] == 134 and first_child[2] == copy.op + 1  # the next update_slots
    (clear,) = [e for e in events(srv, ev.PromptClear) if e.slot == 0]
    assert clear.n_tokens == 159
