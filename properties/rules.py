"""The fuzzing rules, written once: what a client, the disk and the fault model do to a server.

Both engines run these rules (``pcspec.engines.walker``, the seeded swarm walker that
``pcspec verify`` uses; ``pcspec.engines.hypothesis``, a Hypothesis state machine for pytest):
an engine picks a rule whose preconditions hold, draws its arguments from their domains
(``pcspec.core.draw``) and calls it on a ``Fuzz``, the generator's state of one example.

Initial configurations are small enough to hit every limit (a byte limit of a few entries,
two to four checkpoints, a min step of a few tokens, one to three slots, each memory kind,
with and without a draft). Requests are chat-like (user-message spans) or raw; prompts are
new, exact resends, extensions that include the previous reply (as chat clients send them),
or divergences; some are pinned. Where the build offers them (``RuleSet.decision_tasks``), some
are decision tasks on a conversation (``Fuzz.decide``), alone or several in one request, which
makes shared-prefix children of them (``Fuzz.decide_group``); a rule a variant's build does not offer is
not in the engines' tables for it (``only_where``, ``rules_for``). Faults hit every site of
``Faults.SITES``.

Every rule is recorded as a trace operation (``pcspec.core.ops``) and applied through the
core's loop, the properties judged after every model operation (``Fuzz.do``). A run returns
what it found: ``Fuzz.first`` (the first violation of each property, with the trace up to it)
and ``Fuzz.hit`` (a *target*'s violation, which ends the example: nothing more is applied, so
the trace ends where the target was violated).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pcspec.core import loop, ops
from pcspec.core.draw import Bool, Choice, Composite, Domain, Draw, Int, Lists
from pcspec.core.errors import PcspecError
from pcspec.core.results import Finding
from pcspec.model.config import Config, MemoryKind
from pcspec.model.design import Design
from pcspec.model.heap import Faults
from pcspec.model.processing import sample_token
from pcspec.model.server import Server
from pcspec.model.slotfile import field_map, read_slot_file
from pcspec.properties import coverage
from pcspec.properties.base import Property
from pcspec.properties.catalogue import CATALOGUE
from pcspec.properties.judge import Judge

SYSTEM = tuple(range(1, 9))  # a system prompt every conversation shares
FILES = ("a.bin", "b.bin", "c.bin")
FAULT = Choice([-1, -1, -1, 0, 1, 2])  # no fault, or one of the example's fault sites
N_CONVS = 3
CONV = Int(0, N_CONVS - 1)
PIN = Int(-1, 2)


def configs(d: Draw) -> Config:
    """Configurations small enough that every limit is reached within a few requests."""
    memory = d.choice(list(MemoryKind))
    n_slots = d.integer(1, 3)
    has_draft = d.boolean()
    cell, rs = 8, 64
    cache_ram = d.choice([-1, 200, 400, 700, 1200, 2500])
    return Config(
        n_slots=n_slots,
        n_ctx_slot=d.choice([64, 96, 128]),
        n_batch=d.choice([8, 16]),
        n_ubatch=d.choice([2, 4]),
        kv_unified=d.boolean(),
        memory=memory,
        n_swa=4,
        swa_cells=8,
        n_rs_seq=d.choice([0, 0, 2]),
        cell_bytes=cell,
        rs_bytes=rs,
        has_draft=has_draft,
        draft_memory=d.choice([MemoryKind.KV, memory]) if has_draft else MemoryKind.KV,
        draft_cell_bytes=4,
        draft_rs_bytes=32,
        spec_bytes=d.choice([0, 8]) if has_draft else 0,
        n_ctx_checkpoints=d.integer(2, 4),
        checkpoint_min_step=d.choice([2, 4, 8]),
        cache_ram=cache_ram,
        cache_idle_slots=d.boolean(),
        slot_prompt_similarity=d.choice([0.1, 0.1, 0.0]),
        ctx_shift=d.boolean(),
    )


def reply(tokens: Sequence[int], n_predict: int) -> tuple[int, ...]:
    """What a client receives for a prompt: the model's ``n_predict`` sampled tokens."""
    seq = tuple(tokens)
    out: list[int] = []
    for _ in range(n_predict):
        t = sample_token(seq)
        out.append(t)
        seq += (t,)
    return tuple(out)


@dataclass
class Conversation:
    tokens: tuple[int, ...] = ()
    spans: tuple[int, ...] = ()
    turn: int = 0


# -- the rule declarations -------------------------------------------------------------------------

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Rule:
    """One rule: its body (a method of ``Fuzz``), its preconditions and its argument domains
    in the order they are drawn."""

    name: str
    body: Callable[..., None]
    preconditions: tuple[Callable[[Fuzz], bool], ...]
    arguments: tuple[tuple[str, Domain], ...]
    # The variants whose server offers what the rule sends (a rule-set field, say): elsewhere
    # the rule is not in the engines' tables at all, so it draws nothing and leaves the other
    # rules' draws, and so those variants' walks, as they were.
    applies: Callable[[Design], bool] = lambda _v: True


def rule(**arguments: Domain) -> Callable[[F], F]:
    """Declares a method of ``Fuzz`` a rule with these argument domains (drawn in this order)."""

    def mark(f: F) -> F:
        f._pcspec_rule = tuple(arguments.items())  # type: ignore[attr-defined]
        return f

    return mark


def precondition(pred: Callable[[Fuzz], bool]) -> Callable[[F], F]:
    """The rule is drawn only while ``pred`` holds (applied above ``rule``)."""

    def mark(f: F) -> F:
        f._pcspec_pre = (*getattr(f, "_pcspec_pre", ()), pred)  # type: ignore[attr-defined]
        return f

    return mark


def only_where(pred: Callable[[Design], bool]) -> Callable[[F], F]:
    """The rule exists only for variants where ``pred`` holds (applied above ``rule``)."""

    def mark(f: F) -> F:
        f._pcspec_where = pred  # type: ignore[attr-defined]
        return f

    return mark


def rules_for(variant: Design) -> tuple[Rule, ...]:
    """The rules an engine runs on ``variant`` (``RULES`` less those that do not apply)."""
    return tuple(r for r in RULES if r.applies(variant))


def _has_conversation(f: Fuzz) -> bool:
    return any(c.tokens for c in f.convs)


def _copies_memory(f: Fuzz) -> bool:
    """The model has ``seq_cp`` for the memories: not an iSWA context with ``--kv-unified``."""
    swa = MemoryKind.SWA in (f.cfg.memory, f.cfg.draft_memory if f.cfg.has_draft else MemoryKind.KV)
    return not (swa and f.cfg.kv_unified)


def _has_files(f: Fuzz) -> bool:
    return bool(f.files)


def _holds_tokens(f: Fuzz) -> bool:
    return f.srv is not None and any(s.prompt.tokens for s in f.srv.slots)


def _holds_checkpoints(f: Fuzz) -> bool:
    return f.srv is not None and any(s.prompt.checkpoints for s in f.srv.slots)


class Fuzz:
    """One example: the server under test, the judge, and what a client remembers (its
    conversations and the files it saved). Built by an engine, then ``setup``, then rules."""

    def __init__(
        self,
        variant: Design,
        props: Sequence[Property] = CATALOGUE,
        targets: Iterable[str] = (),
        deadline: float = float("inf"),
        n_predict: int = 3,
        reference: bool | None = None,
    ) -> None:
        self.variant = variant
        self.reference = reference  # the judge's mode (Judge: None, by the design)
        self.props = tuple(props)
        self.targets = frozenset(targets)
        self.deadline = deadline  # time.monotonic() after which no operation is applied
        self.n_predict = n_predict
        self.srv: Server | None = None
        self.trace: list[ops.Operation] = []
        self.convs = [Conversation() for _ in range(N_CONVS)]
        self.files: set[str] = set()
        # What the example found (the engines read these; nothing is raised):
        self.first: dict[str, tuple[Finding, list[ops.Operation], Config]] = {}
        self.hit: tuple[Finding, list[ops.Operation], Config] | None = None
        self.out_of_time = False
        self.judged = 0  # model operations judged
        self.coverage: Counter[str] = Counter()  # decisions reached (properties/coverage.py)
        self.reached: Counter[str] = Counter()  # ... by the last operation (Hypothesis reports them)

    @property
    def stopped(self) -> bool:
        """A target was violated or the time cap passed: later operations are not applied."""
        return self.hit is not None or self.out_of_time

    # -- plumbing ----------------------------------------------------------------------------

    def setup(self, cfg: Config, sites: list[str]) -> None:
        # Swarm testing: each example injects faults at a few sites only, so the rare
        # combinations (a draft load failing after a save, an allocation failing inside
        # one) come up often instead of being diluted over every site.
        self.cfg = cfg  # the running server's (a restart changes it)
        self.cfg0 = cfg  # the trace's: what the server started with
        self.sites = sites
        self.srv = Server(cfg, self.variant)
        self.judge = Judge(self.srv, self.props, reference=self.reference)

    def do(self, op: ops.Operation) -> None:
        """Record ``op``, apply it and judge after every model operation it performs."""
        if self.stopped:
            return
        if time.monotonic() > self.deadline:
            # The cap is checked between operations, so a cut never changes what one did.
            self.out_of_time = True
            return
        assert self.srv is not None
        self.trace.append(op)
        start = len(self.srv.heap.events)
        loop.apply(self.srv, op, self._judged, stop=lambda: self.hit is not None)
        self.reached = Counter()
        coverage.count(self.srv.heap.events[start:], self.reached)
        self.coverage.update(self.reached)

    def _judged(self) -> list[Finding]:
        self.judged += 1
        found = self.judge()
        for v in found:
            if v.rule not in self.first:
                self.first[v.rule] = (v, list(self.trace), self.cfg0)
            if v.rule in self.targets and self.hit is None:
                self.hit = (v, list(self.trace), self.cfg0)
        return found

    def _slot_of(self, k: int) -> int | None:
        """The slot whose tokens begin with conversation ``k``'s, if one does."""
        assert self.srv is not None
        mine = self.convs[k].tokens
        held = [s.id for s in self.srv.slots if mine and s.prompt.tokens[: len(mine)] == mine]
        return held[0] if held else None

    def _user_msg(self, k: int, turn: int, n: int) -> tuple[int, ...]:
        return tuple(100 + (k * 37 + turn * 11 + i * 3) % 800 for i in range(n))

    def _send(self, k: int, tokens: tuple[int, ...], spans: tuple[int, ...], pin: int, fault: int = -1) -> None:
        # A request is where saves and loads happen: arming a fault right before one is how
        # the interesting failures (a short read inside a save, a draft load failing after
        # the target load) come up within a few operations.
        if fault >= 0:
            self.inject(fault)
        self.convs[k] = Conversation(tokens, spans, self.convs[k].turn + 1)
        # only a chat request has spans where the build takes them from the chat session
        # (Server.request)
        chat = bool(spans) and self.variant.rules.spans_from_chat_only
        self.do(ops.Request(tuple(tokens), self.n_predict, spans=tuple(spans), id_slot=pin, chat=chat))

    # -- requests ------------------------------------------------------------------------------

    @rule(k=CONV, n=Int(4, 30), pin=PIN, chat=Bool(), fault=FAULT)
    def new_prompt(self, k: int, n: int, pin: int, chat: bool, fault: int) -> None:
        body = self._user_msg(k, self.convs[k].turn, n)
        tokens = SYSTEM + body if chat else body
        self._send(k, tokens, (len(SYSTEM),) if chat else (), pin, fault)

    @precondition(_has_conversation)
    @rule(k=CONV, n=Int(2, 20), pin=PIN, fault=FAULT)
    def extend(self, k: int, n: int, pin: int, fault: int) -> None:
        c = self.convs[k]
        if not c.tokens:
            return
        prev = c.tokens + reply(c.tokens, self.n_predict)
        if len(prev) + n + 8 > self.cfg.n_ctx_slot:
            return  # the client would start over; new_prompt covers that
        self._send(k, prev + self._user_msg(k, c.turn, n), (*c.spans, len(prev)), pin, fault)

    @precondition(_has_conversation)
    @rule(k=CONV, pin=PIN, fault=FAULT)
    def resend(self, k: int, pin: int, fault: int) -> None:
        c = self.convs[k]
        if c.tokens:
            self._send(k, c.tokens, c.spans, pin, fault)

    @precondition(_has_conversation)
    @rule(k=CONV, cut=Int(1, 60), n=Int(1, 12), pin=PIN, fault=FAULT)
    def diverge(self, k: int, cut: int, n: int, pin: int, fault: int) -> None:
        c = self.convs[k]
        if not c.tokens:
            return
        cut = min(cut, len(c.tokens))
        tokens = c.tokens[:cut] + self._user_msg(k + 5, c.turn, n)
        self._send(k, tokens, (*tuple(s for s in c.spans if s < cut), cut), pin, fault)

    @precondition(_has_conversation)
    @rule(k=CONV, pin=PIN)
    def generate_to_limit(self, k: int, pin: int) -> None:
        """A conversation resent with a reply long enough to reach the end of the slot's
        context: the context shift (or, where the memory cannot shift, the truncation)."""
        c = self.convs[k]
        if not c.tokens:
            return
        self.do(ops.Request(tuple(c.tokens), self.cfg.n_ctx_slot, id_slot=pin))
        self.run()

    @only_where(lambda v: v.rules.decision_tasks)
    @precondition(_has_conversation)
    @rule(k=CONV, n=Int(0, 8), pin=PIN, fault=FAULT)
    def decide(self, k: int, n: int, pin: int, fault: int) -> None:
        """A decision task (SERVER_TASK_TYPE_DECISION, from b11434) on a conversation as it
        stands: its prompt and reply, then ``n`` question tokens, answered from the last
        token's logits. It reuses and restores like a completion but makes no checkpoint, has
        no cache save or load at its selection, and leaves its prompt in the slot, which the
        idle-slot save and later selections save. The conversation goes on as before."""
        c = self.convs[k]
        if not c.tokens:
            return
        tokens = c.tokens + reply(c.tokens, self.n_predict) + self._user_msg(k + 7, c.turn, n)
        if len(tokens) + 1 >= self.cfg.n_ctx_slot:
            return
        if fault >= 0:
            self.inject(fault)
        self.do(ops.Request(tuple(tokens), 1, id_slot=pin, type="decision"))

    @only_where(lambda v: v.rules.decision_tasks)
    @precondition(_has_conversation)
    @precondition(_copies_memory)
    @rule(k=CONV, m=Int(2, 3), n=Int(0, 6), fault=FAULT)
    def decide_group(self, k: int, m: int, n: int, fault: int) -> None:
        """One request of ``m`` decisions on a conversation as it stands (its prompt and reply),
        each with its own question (``n`` + i tokens): ``server_decision_group_tasks`` makes a
        parent and shared-prefix children of them (``Server.request_group``) where ``--parallel``
        allows, which take free slots, wait for the parent's prompt to reach the shared prefix
        and start from a copy of its memory and prompt. Not on an iSWA memory with
        ``--kv-unified``, whose ``seq_cp`` the model does not have (``Context.seq_cp``)."""
        c = self.convs[k]
        if not c.tokens:
            return
        head = c.tokens + reply(c.tokens, self.n_predict)
        prompts = [head + self._user_msg(k + 7 + i, c.turn, n + i) for i in range(m)]
        if len(prompts[0]) + 1 >= self.cfg.n_ctx_slot:
            return  # (a later prompt may be too long: that task fails and the others are cancelled)
        if fault >= 0:
            self.inject(fault)
        self.do(ops.RequestGroup(tuple(tuple(p) for p in prompts)))

    @rule(k=CONV, over=Int(0, 3))
    def overlong(self, k: int, over: int) -> None:
        """A prompt of n_ctx tokens or more: the server answers with an error."""
        self._send(k, self._user_msg(k, self.convs[k].turn, self.cfg.n_ctx_slot + over), (), -1)

    @precondition(_holds_checkpoints)
    @rule(pick=Int(0, 63), plus=Choice([0, 0, 1, -1]), pin=Bool(), fault=FAULT)
    def end_on_checkpoint(self, pick: int, plus: int, pin: bool, fault: int) -> None:
        """A prompt that ends exactly on a checkpoint a slot holds (or one token either side):
        the cases where the restore arithmetic, the prompt-logits rule and the invalidation
        meet (docs/FINDINGS.md, the SWA off-by-one and the recurrent prompt that ends on a
        checkpoint)."""
        assert self.srv is not None
        held = [(s, c) for s in self.srv.slots for c in s.prompt.checkpoints]
        slot, ck = held[pick % len(held)]
        n = max(1, min(ck.n_tokens + plus, slot.prompt.n_tokens))
        k = pick % N_CONVS
        self._send(k, slot.prompt.tokens[:n], (), slot.id if pin else -1, fault)

    @precondition(_holds_tokens)
    @rule(
        pick=Int(0, 63),
        landmark=Choice(["n_tokens", "pos_min", "pos_max", "thold", "thold", "zero"]),
        plus=Choice([-1, 0, 1]),
        diverge=Bool(),
        n=Int(1, 8),
        fault=FAULT,
    )
    def cut_at_boundary(self, pick: int, landmark: str, plus: int, diverge: bool, n: int, fault: int) -> None:
        """A prompt whose length (a prefix of a slot's tokens, no new token) or divergence point
        (that prefix, then ``n`` new tokens) lies at, one before or one after a landmark of the
        restore rule (server-context.cpp:3274-3364 of 0c1e570), as ``pcspec live`` cuts prompts
        at logged checkpoints: a held checkpoint's ``n_tokens``, ``pos_min`` or ``pos_max`` (the
        live memory's, for a slot that holds none); the point where ``pos_min_thold`` equals
        the live memory's or a checkpoint's ``pos_min`` (``pos_next = pos_min + n_swa``, one
        more for a prompt without new tokens, whose threshold is one lower); and ``zero``, a
        shared prefix short enough that the threshold is 0, where only a checkpoint with
        ``pos_min`` 0 restores. Each rule of the restore choice changes its answer at one of
        these points, and a uniformly drawn cut lands on one rarely. Not pinned: the selection
        takes the slot sharing the prefix, and a pin onto a slot still busy is ``pin_busy``'s
        (pinned, these prompts made long detours to the livelock of PROGRESS-1)."""
        assert self.srv is not None
        slots = [s for s in self.srv.slots if s.prompt.tokens]
        slot = slots[pick % len(slots)]
        tokens, ckpts = slot.prompt.tokens, slot.prompt.checkpoints
        ck = ckpts[pick // len(slots) % len(ckpts)] if ckpts else None
        live_min, live_max = self.srv.ctx_tgt.seqs[slot.id].pos_range()
        n_swa = self.srv.cfg.swa_window
        no_new = 0 if diverge else 1  # (the threshold of a prompt without new tokens is one lower)
        if landmark == "n_tokens":
            at = ck.n_tokens if ck is not None else len(tokens)
        elif landmark == "pos_min":
            at = ck.pos_min if ck is not None else live_min
        elif landmark == "pos_max":
            at = ck.pos_max if ck is not None else live_max
        elif landmark == "thold":
            at = (ck.pos_min if ck is not None and pick % 2 else live_min) + n_swa + no_new
        else:
            at = n_swa + no_new
        cut = max(1, min(at + plus, len(tokens)))
        k = pick % N_CONVS
        if diverge:
            self._send(k, tokens[:cut] + self._user_msg(k + 5, self.convs[k].turn, n), (cut,), -1, fault)
        else:
            self._send(k, tokens[:cut], (), -1, fault)

    # -- workflows (several operations that users run together) ---------------------------------

    @rule(
        ks=Lists(tuple(range(N_CONVS)), 2, 4),
        n=Int(2, 12),
        fault=FAULT,
        load_fault=Choice(["", "", "load.write.dft", "load.write.tgt"]),
        twice=Bool(),
    )
    def alternate(self, ks: list[int], n: int, fault: int, load_fault: str, twice: bool) -> None:
        """Conversations taking turns (two conversations alternating on one slot, as the
        #30137 thread measured: every request saves one and loads another), then the first one
        again with a fault armed before the request that loads it: one of the example's sites,
        or ``load_fault``, a failure of that very load (outside the swarm's sites, because a
        failed load is what this workflow is for); ``twice``: one more round, so that what
        the failed load left in the cache is loaded again."""
        rounds = [*ks, ks[0]] + ([ks[1], ks[0]] if twice else [])
        for i, k in enumerate(rounds):
            f = fault if i == len(ks) else -1
            if i == len(ks) and load_fault:
                self.do(ops.Inject(load_fault))
            if self.convs[k].tokens:
                self.extend(k, n, -1, f)
            else:
                self.new_prompt(k, n, -1, True, f)
            self.run()

    @rule(
        k=CONV,
        cut=Int(1, 60),
        n=Int(2, 12),
        n_steps=Int(0, 3),
        other=CONV,
        again=Bool(),
        load_fault=Choice(["", "", "load.write.tgt"]),
    )
    def pin_busy(self, k: int, cut: int, n: int, n_steps: int, other: int, again: bool, load_fault: str) -> None:
        """A request, a few server steps, then another request pinned to the slot that is
        still processing the first (clients pin by conversation, whatever the slot does).
        ``again``: the pinned request resends an earlier conversation as it was, so that the
        cache holds an entry for it (a long one loaded into the busy slot is the livelock of
        finding F1, docs/FINDINGS.md); ``load_fault``: that load fails, and the C++ clears
        the busy slot's prompt."""
        if self.convs[k].tokens:
            self.diverge(k, cut, n, -1, -1)
        else:
            self.new_prompt(k, n, -1, True, -1)
        for _ in range(n_steps):
            self.do(ops.Step())
        assert self.srv is not None
        busy = [s.id for s in self.srv.slots if s.is_processing]
        if not busy:
            return
        if load_fault:
            self.do(ops.Inject(load_fault))
        if again and self.convs[other].tokens:
            self.resend(other, busy[0], -1)
        else:
            self.new_prompt(other, n, busy[0], True, -1)

    @rule(other=CONV, m=Int(8, 40), k=CONV, fewer=Int(0, 8), n_steps=Int(1, 2), chat=Bool())
    def back_to_a_busy_slot(self, other: int, m: int, k: int, fewer: int, n_steps: int, chat: bool) -> None:
        """A client that pins by conversation: conversation ``other`` (``m`` tokens) runs on a
        slot; conversation ``k`` (``fewer`` tokens fewer) is pinned to that slot, which saves
        ``other``'s prompt into the cache; after ``n_steps`` steps, while the slot may still be
        processing ``k``'s prompt, ``other`` is resent, pinned there. get_available_slot
        updates the cache before it defers the task (server-context.cpp:1534-1631 of 0c1e570):
        an entry longer than the prompt still processing, loaded into the busy slot, is the
        livelock of F1 (docs/FINDINGS.md). ``pin_busy`` meets it only where its resent
        conversation happens to be cached, longer than what runs, and the prompt spans batches."""
        if k == other:
            return
        self.new_prompt(other, m, -1, chat, -1)
        self.run()
        slot = self._slot_of(other)
        if slot is None:
            return
        self.new_prompt(k, max(1, m - fewer), slot, chat, -1)
        for _ in range(n_steps):
            self.do(ops.Step())
        self.resend(other, slot, -1)
        self.run()

    @rule(
        src=Int(0, 2),
        dst=Int(0, 2),
        pick=Int(0, 63),
        how=Choice(["none", "huge", "huge", "plus1", "minus1", "zero", "truncate"]),
        restore_fault=Choice(["", "", "ckpt.write.dft", "file.write.tgt"]),
        then=Choice(["", "prefix", "prefix_fault"]),
    )
    def file_round_trip(self, src: int, dst: int, pick: int, how: str, restore_fault: str, then: str) -> None:
        """Save a slot, maybe damage the file on disk, restore it (into any slot), maybe with
        the restore's own loads failing (the draft test-load, the state); ``then``: a prompt
        ending two tokens before the restored ones, pinned to that slot, so that a
        checkpoint from the file is restored -- with its load failing (``prefix_fault``)."""
        n = self.cfg.n_slots
        self.slot_save(src % n, "c.bin")
        if how != "none":
            self.corrupt("c.bin", pick, how)
        if restore_fault:
            self.do(ops.Inject(restore_fault))
        self.slot_restore(dst % n, "c.bin")
        assert self.srv is not None
        tokens = self.srv.slots[dst % n].prompt.tokens
        if then and len(tokens) > 2:
            if then == "prefix_fault":
                self.do(ops.Inject("ckpt.write.tgt"))
            self._send(dst % N_CONVS, tokens[:-2], (), dst % n)
            self.run()

    @rule(
        other=CONV,
        m=Int(1, 6),
        n_steps=Int(0, 2),
        k=CONV,
        n=Int(1, 24),
        then=Choice(["", "file", "file", "extend"]),
        mine=Bool(),
    )
    def checkpoint_fails_beside(self, other: int, m: int, n_steps: int, k: int, n: int, then: str, mine: bool) -> None:
        """A checkpoint allocation that fails while another slot is busy: conversation
        ``other`` sends ``m`` tokens, the server takes ``n_steps`` steps, the fault is armed and
        conversation ``k`` sends ``n`` tokens. Where the failing slot is not the one whose
        tokens make the batch, the server goes on (docs/FINDINGS.md, F6; server-context.cpp:
        2711-2721 and 2826 of 0c1e570) and the empty checkpoint the failure leaves (emplace_back
        before the fill, 2333) lives on. ``then``, for the slot of ``k`` (``mine``) or of
        ``other``: ``file``, saved and restored (the empty record rides in the appendix);
        ``extend``, the conversation goes on (the empty checkpoint is restored at the next
        prompt start, a no-op, common.cpp:2332-2334). Drawn apart, these steps met in a few
        examples per thousand."""
        self.new_prompt(other, m, -1, False, -1)
        for _ in range(n_steps):
            self.do(ops.Step())
        self.do(ops.Inject("ckpt.alloc"))
        self.new_prompt(k, n, -1, n > 8, -1)
        self.run()
        conv = k if mine else other
        slot = self._slot_of(conv)
        if slot is None or not then:
            return
        if then == "file":
            self.slot_save(slot, "c.bin")
            self.slot_restore(slot, "c.bin")
        else:
            self.extend(conv, 2, slot, -1)
            self.run()

    @rule(src=Int(0, 2), marker=Int(0, 2), pick=Int(0, 63), plus=Choice([0, 1, 1, -1]), new=Int(0, 2))
    def restore_changed_marker(self, src: int, marker: int, pick: int, plus: int, new: int) -> None:
        """A slot saved, the file's tokens marker changed on disk (to ``marker``: any value but
        -1 makes server_tokens::deserialize read the packed words as a plain token list,
        server-common.cpp:595-597 of 0c1e570), the file restored into the same slot, then a
        prompt on what the slot now holds, pinned to it: cut at one of its checkpoints'
        ``n_tokens`` (``pick``) plus ``plus``, then ``new`` new tokens. The marker is one field
        among some twenty that ``corrupt`` draws uniformly, and the prompt after the restore must
        share what the slot holds; drawn apart, the four steps met in about one example in
        three hundred."""
        n = self.cfg.n_slots
        self.slot_save(src % n, "c.bin")
        assert self.srv is not None
        if "c.bin" not in self.srv.files:
            return
        self.do(ops.CorruptFile("c.bin", field="tokens marker", value=marker))
        self.slot_restore(src % n, "c.bin")
        slot = self.srv.slots[src % n]
        tokens, ckpts = slot.prompt.tokens, slot.prompt.checkpoints
        if not tokens:
            return
        at = ckpts[pick % len(ckpts)].n_tokens if ckpts else len(tokens)
        cut = max(1, min(at + plus, len(tokens)))
        k = src % N_CONVS
        self._send(k, tokens[:cut] + self._user_msg(k + 5, self.convs[k].turn, new), (), src % n)
        self.run()

    # -- the server's own progress -------------------------------------------------------------

    @rule(n=Int(1, 4))
    def steps(self, n: int) -> None:
        for _ in range(n):
            self.do(ops.Step())

    @rule()
    def run(self) -> None:
        self.do(ops.Run(500))

    # -- faults and actions --------------------------------------------------------------------

    @rule(pick=Int(0, 2))
    def inject(self, pick: int) -> None:
        self.do(ops.Inject(self.sites[pick % len(self.sites)]))

    @rule(slot=Int(0, 2), name=Choice(FILES))
    def slot_save(self, slot: int, name: str) -> None:
        if slot < self.cfg.n_slots:
            self.files.add(name)
            self.do(ops.SlotSave(slot, name))

    @precondition(_has_files)
    @rule(slot=Int(0, 2), name=Choice(FILES))
    def slot_restore(self, slot: int, name: str) -> None:
        if slot < self.cfg.n_slots and name in self.files:
            self.do(ops.SlotRestore(slot, name))

    @precondition(_has_files)
    @rule(
        name=Choice(FILES),
        pick=Int(0, 63),
        how=Choice(["huge", "huge", "plus1", "minus1", "zero", "truncate", "append", "splice"]),
    )
    def corrupt(self, name: str, pick: int, how: str) -> None:
        """A corruption the format can detect: a length, count, magic or version field set to a
        wrong value, the file cut short, bytes appended to it, or bytes spliced into (or cut out
        of) its middle, which shifts every field after them. (Semantic corruptions -- well-formed
        but wrong token ids or positions -- are a separate campaign: no reader can tell them
        from the truth.)"""
        assert self.srv is not None
        data = self.srv.files.get(name)
        if data is None:
            return
        if how == "truncate":
            self.do(ops.CorruptFile(name, truncate=len(data) * pick // 64))
            return
        if how in ("append", "splice"):
            # An append is a splice at the end; a splice inserts (even pick) or removes (odd)
            # a few bytes at a point spread by pick over the header and the tokens, which
            # shifts the sequence state and everything after it. (Inside a payload -- the state,
            # or a checkpoint blob of the appendix -- a shift can still parse when the bytes it
            # pushes across a boundary happen to be zeros: well-formed but wrong, a semantic
            # corruption no reader can detect, exactly as a real state_read would take them for
            # tensor data. Those belong to the semantic campaign, not to this rule.)
            n = 1 + pick % 8
            at = len(data)
            if how == "splice":
                begin = 12 + 4 * int.from_bytes(data[8:12], "little")
                at = min(begin, len(data)) * pick // 64
            insert = how == "append" or pick % 2 == 0
            fill = [(0x5A + i) & 0xFF for i in range(n)] if insert else []
            self.do(ops.CorruptFile(name, offset=at, data=tuple(fill), remove=0 if insert else n))
            return
        try:
            parsed = read_slot_file(data, name)
        except PcspecError:
            return
        fields = [f for f in field_map(parsed) if not f[0].endswith(("n_tokens", "pos_min", "pos_max"))]
        if how == "huge":  # a huge value matters where it is a length or a count
            fields = [f for f in fields if f[0].endswith(("length", "count"))] or fields
        if not fields:
            return
        fname, offset, width = fields[pick % len(fields)]
        value = int.from_bytes(data[offset : offset + width], "little")
        new = {"huge": (1 << (8 * width)) - 2, "plus1": value + 1, "minus1": value - 1, "zero": 0}[how]
        new %= 1 << (8 * width)
        # By field name, not offset: see Server.corrupt_file (shrinking must not turn this
        # into a corruption of a payload).
        self.do(ops.CorruptFile(name, field=fname, value=new))

    @rule(slot=Int(0, 2))
    def slot_erase(self, slot: int) -> None:
        if slot < self.cfg.n_slots:
            self.do(ops.SlotErase(slot))

    @rule()
    def sleep_wake(self) -> None:
        self.do(ops.SleepWake())

    @precondition(_has_files)
    @rule(n_ckpt=Int(0, 4), n_slots=Int(1, 3), slot=Int(0, 2), name=Choice(FILES))
    def restart_and_restore(self, n_ckpt: int, n_slots: int, slot: int, name: str) -> None:
        """Files outlive the process: restart the server with other flags (fewer checkpoints
        allowed, another slot count), then restore a file saved before into it."""
        self.do(ops.Restart.of(n_ctx_checkpoints=n_ckpt, n_slots=n_slots))
        assert self.srv is not None
        self.cfg = self.srv.cfg
        self.slot_restore(slot, name)

    @precondition(_holds_checkpoints)
    @rule(fewer=Int(1, 2), n_slots=Int(1, 3), name=Choice(FILES))
    def restore_into_fewer(self, fewer: int, n_slots: int, name: str) -> None:
        """A file saved from the slot that holds the most checkpoints, restored after a restart
        that allows ``fewer`` fewer: where slot files carry checkpoints (#26004's appendix), the
        reader keeps the newest ones up to the restoring server's --ctx-checkpoints (``pop_front``,
        server-context.cpp:2695-2698 of b11549). ``restart_and_restore`` meets this only where
        its drawn cap is below what a file it saved happens to hold."""
        assert self.srv is not None
        held = max(self.srv.slots, key=lambda s: len(s.prompt.checkpoints))
        n = len(held.prompt.checkpoints)
        self.slot_save(held.id, name)
        self.do(ops.Restart.of(n_ctx_checkpoints=max(0, n - fewer), n_slots=n_slots))
        self.cfg = self.srv.cfg
        self.slot_restore(0, name)


# The example's start: a configuration and the fault sites of its swarm.
SETUP: tuple[tuple[str, Domain], ...] = (
    ("cfg", Composite(configs)),
    ("sites", Lists(Faults.SITES, 1, 3, unique=True)),
)


def _rules() -> tuple[Rule, ...]:
    out = []
    for attr in dir(Fuzz):  # (sorted: the order every engine lists and draws them in)
        f = getattr(Fuzz, attr)
        args = getattr(f, "_pcspec_rule", None)
        if args is not None:
            where = getattr(f, "_pcspec_where", None)
            pre = tuple(getattr(f, "_pcspec_pre", ()))
            out.append(Rule(attr, f, pre, args) if where is None else Rule(attr, f, pre, args, where))
    return tuple(out)


# Every rule, by name.
RULES: tuple[Rule, ...] = _rules()

__all__ = ["FILES", "RULES", "SETUP", "SYSTEM", "Conversation", "Fuzz", "Rule", "configs", "only_where", "reply",
           "rules_for"]
