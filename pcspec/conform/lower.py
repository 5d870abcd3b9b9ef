"""Lowering: a model trace becomes core operations, each with the observation a port must make.

The model runs the trace as usual. A watcher on its heap (``Heap.watch``, for this run only)
sees every event as it is emitted, ``fault_hit`` included; an
event that ends a core function (``save_end``, ``cache_state``, ``prompt_start``,
``ckpt_create``, ...) turns into one core operation, with its inputs read from the event, the
model's memory and the task, and its observation read from the model's state at that moment.
Functions whose event comes first and whose work follows (``prompt_clear``, ``release``, a
context shift, a load that hands over or drops an entry) are observed at the next event that is
not part of them (a slot restore says when it begins, ``file_restore_begin``, so what came
before it is observed before the file is installed). Token changes the core does not decide
(a batch, a sampled token) become ``tokens`` operations; a slot file restored becomes ``install``.

After every model operation (every step of a ``run``) the model's state must equal the last
observation: a change no core operation explains is a ``LoweringError``, never a silent gap.
A crash of the model ends the lowered trace before the operation that crashed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pcspec.conform.observe import ROLE, observe
from pcspec.conform.protocol import BY_NAME, EVENT_KINDS, EVICT_NUMBERS, port_config
from pcspec.conform.tags import Tags
from pcspec.core import loop
from pcspec.core import ops as model_ops
from pcspec.core.errors import PcspecError
from pcspec.core.results import Finding
from pcspec.core.trace import Trace
from pcspec.model import events as ev
from pcspec.model.cache import CacheEntry, lcp
from pcspec.model.design import implementation
from pcspec.model.designs import Fixed
from pcspec.model.events import Event
from pcspec.model.memory import FULL, PARTIAL_ONLY
from pcspec.model.server import Server


class LoweringError(Exception):
    """The model changed port-visible state that no core operation explains."""


@dataclass
class Lowered:
    variant: str
    config: dict[str, Any]
    ops: list[dict[str, Any]] = field(default_factory=list)
    expect: list[dict[str, Any]] = field(default_factory=list)
    origin: list[int] = field(default_factory=list)  # the model operation each core op came from
    tags: Tags = field(default_factory=Tags)
    crash: str | None = None  # where the model crashed (the lowered trace ends before it)


def project(e: Event) -> dict[str, Any] | None:
    """A model event as the port event it is, or None when ports do not emit it."""
    spec = EVENT_KINDS.get(e.kind)
    if spec is None:
        return None
    out: dict[str, Any] = {"kind": e.kind}
    if isinstance(e, ev.EntryEvict):
        n_tokens = e.loaded_tokens if e.loaded_tokens is not None else e.n_tokens
        out.update(entry=e.entry, reason=e.reason, n_tokens=n_tokens)
        if e.reason in EVICT_NUMBERS:
            out.update(unique_total=e.unique_total, limit=e.limit)
        return out
    if isinstance(e, ev.CopyPayload):
        return {"kind": e.kind, "role": ROLE.get(e.role, e.role), "bytes": e.bytes}
    for name, _ in spec.fields:  # the protocol's fields are the event's, by name
        out[name] = getattr(e, name, None)
    return out


_ALLOC_SITE = {"main": "save.alloc.main", "drft": "save.alloc.drft", "entry": "save.alloc.entry"}


@dataclass
class _Lazy:
    op: dict[str, Any]
    tail: Callable[[Event], bool]  # the events that are still part of it


class Lowerer:
    def __init__(self, trace: Trace) -> None:
        self.srv = Server(trace.config, trace.variant)
        self.out = Lowered(trace.variant.name, port_config(trace.config))
        self.tags = self.out.tags
        heap = self.srv.heap
        heap.watch("*", self._on_event)
        self.shadow = observe(self.srv, self.tags)
        self.evbuf: list[dict[str, Any]] = []
        self.faults: list[str] = []
        self.prev: Event | None = None
        self.lazy: _Lazy | None = None
        self.select: tuple[int, int] = (-1, -1)
        self.tasks: dict[int, tuple[tuple[int, ...], bool]] = {}
        self.model_op: model_ops.Operation = model_ops.Step()
        self.index = -1
        self.memory: tuple[int, list[list[int]]] = (-1, [])  # what the last prompt start read of the memory
        self.dead = False
        self.slept = False
        self.saving = False
        self.entry_objs: dict[int, CacheEntry] = {}

    # -- driving ---------------------------------------------------------------------------------

    def run(self, ops: list[model_ops.Operation]) -> Lowered:
        for i, op in enumerate(ops):
            if self.dead:
                break
            self.index, self.model_op = i, op
            self.slept = isinstance(op, model_ops.SleepWake)
            # through the one loop: the "judge" after every model operation is the lowering's
            # boundary, which cuts the events into core operations (it finds nothing)
            loop.apply(self.srv, op, self._judged, stop=lambda: self.dead)
        return self.out

    def _judged(self) -> list[Finding]:
        if not self.dead:
            self._boundary()
        return []

    def _boundary(self) -> None:
        """The end of a model operation (or of one step of a run)."""
        self._close_lazy()
        if self.slept:
            self.slept = False
            self._emit({"op": "wake"}, self._observe(self._take()))
        self._sync()
        if self.evbuf:
            raise LoweringError(f"model op {self.index}: events no core operation claims: {self.evbuf}")
        now = self._observe([])
        if _state(now) != _state(self.shadow):
            what = f"model op {self.index} ({self.model_op.OP})"
            raise LoweringError(f"{what}: unexplained change {_diff(self.shadow, now)}")

    # -- the tap ---------------------------------------------------------------------------------

    def _on_event(self, e: Event) -> None:
        if self.dead:
            return
        prev, self.prev = self.prev, e
        if isinstance(e, ev.Crash):
            self.dead = True
            self.out.crash = e.where
            self.lazy = None
            return
        if self.lazy is not None and not self.lazy.tail(e):
            self._close_lazy(e)
        if isinstance(e, ev.FaultHit):
            self.faults.append(e.site)
        hit = prev.site if isinstance(prev, ev.FaultHit) else None
        if isinstance(e, ev.AllocFailed) and hit != e.site:
            # No fault fired: the host ran out (host_ram). A port sees it as the site's fault.
            site = e.site or _ALLOC_SITE.get(e.role, "ckpt.alloc")
            self.faults.append(site)
        port_event = project(e)
        if port_event is not None:
            self.evbuf.append(port_event)
        handler = getattr(self, "_on_" + e.kind, None)
        if handler is not None:
            handler(e)

    def _on_op(self, e: ev.Op) -> None:
        if e.name == "request" and isinstance(self.model_op, model_ops.Request):
            op = self.model_op
            self.tasks[e.args["task"]] = (op.tokens, op.cache_prompt)

    def _on_sleep_skipped(self, e: ev.SleepSkipped) -> None:
        self.slept = False  # a busy server does not sleep

    def _on_restart(self, e: ev.Restart) -> None:
        self.faults.clear()
        self._emit({"op": "restart", "config": port_config(self.srv.cfg)}, self._observe(self._take()))

    def _on_select(self, e: ev.Select) -> None:
        self.select = (e.slot if e.slot is not None else -1, e.task)

    def _on_save_begin(self, e: ev.SaveBegin) -> None:
        self.saving = True  # (the C++ designs' save runs update() after a bad_alloc: part of it)

    def _on_save_end(self, e: ev.SaveEnd) -> None:
        self.saving = False
        self._sync()
        slot = e.slot
        parts = [self._part("main", self.srv.ctx_tgt.seqs[slot], FULL)]
        if self.srv.ctx_dft is not None:
            parts.append(self._part("drft", self.srv.ctx_dft.seqs[slot], FULL))
        self._emit_now({"op": "save", "slot": slot, "parts": parts})

    def _on_load_scan(self, e: ev.LoadScan) -> None:
        events = self.evbuf[:-1]
        self.evbuf = self.evbuf[-1:]
        if events:
            raise LoweringError(f"model op {self.index}: events before a load no core operation claims: {events}")
        self._sync()
        slot, task = self.select
        op = {"op": "load", "slot": slot, "tokens": list(self.tasks[task][0])}
        if e.chosen is None:
            self._emit_now(op)
        else:
            # Ends at the hand-over (the entry left the list, the slot holds its prompt) or,
            # failed, at prompt_load_failed (after the dropped entry let go of its checkpoints).
            self.lazy = _Lazy(op, lambda x: not isinstance(x, ev.PromptLoadFailed))

    def _on_entry_evict(self, e: ev.EntryEvict) -> None:
        if self.lazy is not None and self.lazy.op["op"] == "load" and e.reason == "loaded":
            self._close_lazy()

    def _on_cache_state(self, e: ev.CacheState) -> None:
        if self.saving:
            return
        self._sync()
        self._emit_now({"op": "update"})

    def _on_prompt_clear(self, e: ev.PromptClear) -> None:
        self._start_lazy({"op": "clear", "slot": e.slot}, lambda x: isinstance(x, ev.Free))

    def _on_release(self, e: ev.Release) -> None:
        # release changes one port-visible variable, after its event: the task's restored
        # checkpoint is forgotten. Observed as the last observation with that change.
        self._sync()
        slot = e.slot
        slots = list(self.shadow["slots"])
        slots[slot] = {**slots[slot], "restored": None}
        self._emit({"op": "release", "slot": slot}, {**self.shadow, "events": self._take(), "slots": slots})

    def _on_context_shift(self, e: ev.ContextShift) -> None:
        op = {"op": "shift", "slot": e.slot, "n_keep": e.n_keep, "n_discard": e.n_discard}
        self._start_lazy(op, lambda x: isinstance(x, ev.Free) or (
            isinstance(x, ev.CkptErase) and x.reason == "context_shift"))

    def _on_prompt_begin(self, e: ev.PromptBegin) -> None:
        # The memory as the start reads it, when it reads it: not as the step began (in a unified
        # KV cache, another slot's batch earlier in the step can move this slot's SWA cells).
        seqs = [ctx.seqs[e.slot] for ctx in self.srv.contexts()]
        self.memory = (seqs[0].pos_range()[0], [list(m.pos_range()) for m in seqs])

    def _on_prompt_start(self, e: ev.PromptStart) -> None:
        slot, task = e.slot, e.task
        op = {
            "op": "prompt_start",
            "slot": slot,
            "task": task,
            "prompt": list(e.prompt),
            "cache_prompt": self.tasks[task][1],
            "pos_min": self.memory[0],
            "live": self.memory[1],
            "seq_rm_ok": not any(x["kind"] == "seq_rm_refused" for x in self.evbuf),
        }
        self._emit_now(op)

    def _on_ckpt_create(self, e: ev.CkptCreate) -> None:
        self._checkpoint(e, e.pos_min, e.pos_max)

    def _on_ckpt_kept_restored(self, e: ev.CkptKeptRestored) -> None:
        self._checkpoint(e, None, None)

    def _on_ckpt_create_skipped(self, e: ev.CkptCreateSkipped) -> None:
        self._checkpoint(e, None, None)

    def _on_ckpt_create_failed(self, e: ev.CkptCreateFailed) -> None:
        # (a C++ design leaves the failed checkpoint in the list, or lets it go; fixed holds nothing)
        self._checkpoint(e, None, None, lazy=implementation(self.srv.design, "checkpoint_create_failed")
                         is not implementation(Fixed, "checkpoint_create_failed"))

    def _on_batch(self, e: ev.Batch) -> None:
        self._sync()

    def _on_generate(self, e: ev.Generate) -> None:
        self._sync()

    def _on_file_restore(self, e: ev.FileRestore) -> None:
        self.faults.clear()  # what the restore consumed is the environment's
        slot = self.srv.slots[e.slot]
        ckpts = [
            {
                "n_tokens": ck.n_tokens,
                "pos_min": ck.pos_min,
                "pos_max": ck.pos_max,
                "id_task": ck.id_task,
                "parts": [
                    {"role": ROLE[b.role], "size": b.size, "state": self.tags.tag(b.content)} for b in ck.buffers()
                ],
            }
            for ck in slot.prompt.checkpoints
        ]
        self._sync(skip=slot.id)
        self._emit_now({"op": "install", "slot": slot.id, "tokens": list(slot.prompt.tokens), "ckpts": ckpts})

    def _on_file_restore_failed(self, e: ev.FileRestoreFailed) -> None:
        self.faults.clear()

    # -- the operations --------------------------------------------------------------------------

    def _checkpoint(
        self,
        e: ev.CkptCreate | ev.CkptKeptRestored | ev.CkptCreateSkipped | ev.CkptCreateFailed,
        pos_min: int | None,
        pos_max: int | None,
        lazy: bool = False,
    ) -> None:
        srv, slot = self.srv, e.slot
        model_tokens = srv.slots[slot].prompt.tokens
        before = self.shadow["slots"][slot]["tokens"]
        n_cur = len(model_tokens) - lcp(tuple(before), model_tokens)
        self._sync()
        n_new = len(model_tokens) - n_cur
        if pos_min is None or pos_max is None:
            mem = srv.ctx_tgt.seqs[slot]
            pos_min, pos_max = mem.pos_range()
            pos_min = srv.design.checkpoint_pos_min(srv, srv.slots[slot], pos_min)
        parts = [self._part("tgt", srv.ctx_tgt.seqs[slot], PARTIAL_ONLY)]
        if srv.ctx_dft is not None:
            parts.append(self._part("dft", srv.ctx_dft.seqs[slot], PARTIAL_ONLY))
        if srv.cfg.spec_bytes > 0:
            tag = self.tags.tag(("spec", model_tokens[:n_new]))
            parts.append({"role": "spec", "size": srv.cfg.spec_bytes, "state": tag})
        op = {
            "op": "checkpoint",
            "slot": slot,
            "task": e.task,
            "n_cur": n_cur,
            "pos_min": pos_min,
            "pos_max": pos_max,
            "parts": parts,
        }
        if lazy:
            self.lazy = _Lazy(op, lambda x: isinstance(x, ev.PublishCkpt | ev.Free))
        else:
            self._emit_now(op)

    def _part(self, role: str, mem: Any, scope: int) -> dict[str, Any]:
        return {"role": role, "size": mem.state_size(scope), "state": self.tags.tag(mem.image(scope))}

    def _start_lazy(self, op: dict[str, Any], tail: Callable[[Event], bool]) -> None:
        events = self.evbuf
        if events:
            raise LoweringError(f"model op {self.index}: events before {op['op']} no core operation claims: {events}")
        self._sync()
        self.lazy = _Lazy(op, tail)

    def _close_lazy(self, at: Event | None = None) -> None:
        """Observe a function whose work followed its event, at ``at``: the first event that
        is not part of it. The function emitting ``at`` may have changed the state just before:
        a batch or a sampled token appended tokens, an eviction took an entry off the list;
        those changes are taken back out of the observation (they belong to what follows)."""
        if self.lazy is None:
            return
        op, self.lazy = self.lazy.op, None
        events = self._take()
        if isinstance(at, ev.EntryEvict) and self.srv.cache is not None:
            obj = self.entry_objs.get(at.entry)
            if obj is not None:
                present = {e.id for e in self.srv.cache.entries}
                order = [e["id"] for e in self.shadow["entries"]]
                idx = sum(1 for i in order[: order.index(obj.id)] if i in present) if obj.id in order else 0
                self.srv.cache.entries.insert(idx, obj)
                try:
                    obs = self._observe(events)
                finally:
                    self.srv.cache.entries.remove(obj)
                self._emit(op, obs)
                return
        obs = self._observe(events)
        if isinstance(at, ev.PromptStart):
            # keep_first and the restored checkpoint of that slot came just before the event
            slot = at.slot
            slots = list(obs["slots"])
            was = self.shadow["slots"][slot]
            slots[slot] = {**slots[slot], "tokens": was["tokens"], "restored": was["restored"]}
            obs = {**obs, "slots": slots}
        if isinstance(at, ev.Batch | ev.Generate):
            slot = at.slot
            n = at.n if isinstance(at, ev.Batch) else 1
            if n > 0:
                slots = list(obs["slots"])
                slots[slot] = {**slots[slot], "tokens": slots[slot]["tokens"][:-n]}
                obs = {**obs, "slots": slots}
        self._emit(op, obs)

    def _take(self) -> list[dict[str, Any]]:
        events, self.evbuf = self.evbuf, []
        return events

    def _emit_now(self, op: dict[str, Any]) -> None:
        self._emit(op, self._observe(self._take()))

    def _observe(self, events: list[dict[str, Any]]) -> dict[str, Any]:
        if self.srv.cache is not None:
            self.entry_objs = {e.id: e for e in self.srv.cache.entries}
        return observe(self.srv, self.tags, events)

    def _emit(self, op: dict[str, Any], obs: dict[str, Any]) -> None:
        sites = BY_NAME[op["op"]].sites
        if sites:
            # The fault sites this operation reached; any other hit is left for its owner.
            mine = [s for s in self.faults if s in sites]
            if mine:
                op["faults"] = mine
            self.faults = [s for s in self.faults if s not in sites]
        self.out.ops.append(op)
        self.out.expect.append(obs)
        self.out.origin.append(self.index)
        self.shadow = obs

    def _sync(self, skip: int = -1) -> None:
        """``tokens`` operations for every slot whose tokens changed outside the core."""
        for slot in self.srv.slots:
            if slot.id == skip:
                continue
            before = self.shadow["slots"][slot.id]["tokens"]
            now = slot.prompt.tokens
            if tuple(before) == now:
                continue
            keep = lcp(tuple(before), now)
            slots = list(self.shadow["slots"])
            slots[slot.id] = {**slots[slot.id], "tokens": list(now)}
            obs = {**self.shadow, "events": [], "slots": slots}
            self._emit({"op": "tokens", "slot": slot.id, "keep": keep, "append": list(now[keep:])}, obs)


def _state(obs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obs.items() if k != "events"}


def _diff(a: dict[str, Any], b: dict[str, Any]) -> str:
    keys = [k for k in a if k != "events" and a[k] != b.get(k)]
    return "; ".join(f"{k}: {a[k]!r} -> {b.get(k)!r}" for k in keys)[:2000]


def lower(trace: Trace) -> Lowered:
    """The core operations of ``trace`` under its variant, with the expected observations."""
    if any(isinstance(op, model_ops.RequestGroup) for op in trace.ops):
        # (decision tasks and their groups exist only in rule sets, which no port implements)
        raise PcspecError("the conformance kit has no shared-prefix child tasks (op request_group)")
    return Lowerer(trace).run(trace.ops)
