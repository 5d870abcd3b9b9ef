"""The catalogue's properties judged over a port's observations: what names a divergence.

A port shows its observations only (docs/SPEC.md, section 9.2). The kit holds it to the very
checks the model is held to (``pcspec.properties``, run by ``pcspec.properties.judge.Judge``),
not to a restatement of them. The checks read a state through a read-only view
(``pcspec.properties.view.StateView``), which the model's ``Server`` provides and so does
``ObservedState`` here: each observation loaded as the model's values (slots with their prompts
and the task each processes, ``Checkpoint``s, ``CacheEntry``s, ``Buffer``s holding the content
each state tag stands for, ``Tags.content``). Each operation's events become the model's events
with the numbers the checks read (``OperationEvents``), emitted at the moments the model emits
them, so that the judge's history (``pcspec.properties.history``) takes its snapshots as it does
of the model: the cache before a save and the slot before a prompt start are snapshotted before
the observation is loaded, the rest after.

Why the model's values and events rather than checks of their own: a property is then written
once, and what a port breaks is named by the code that judges the model; the checks stay as
fast as they are (the fuzzing judge, the hot path, is not touched), and this costs only when a
port diverges (the answers up to the divergence are judged) and in the kit's tests.

What an observation leaves open is settled as the port means it:

* an observation names no buffer: each checkpoint and each entry owns its parts, so the
  cache's unique bytes (``pcspec.model.cache.unique_bytes``, the one definition) count each
  checkpoint once (``ObservedState.unique_bytes`` says when the port's own count is taken); a
  part whose bytes are no whole state is a buffer no fill completed;
* ``accounted`` is the port's ``size()``; a checkpoint a holder names and the port does not
  report has no references, one it reports and no holder names stays allocated (REF-1);
* the events carry what the port reports and what follows from the state around them: the
  list's length at each erasure (erased in ``create_checkpoint``'s order: too close, cap,
  supersede), the position a prompt start resumed at (``policy.restored_positions``), whether
  an erasure, a re-creation or a clear concerns the checkpoint the task restored, and a
  checkpoint the saved entry holds that is not the slot's (a copy: PERF-1);
* the token limit is ``update``'s to keep (a save may exceed it until the update after it):
  the observed cache has one only when an ``update`` is judged (LIMIT-1);
* the model's judge skips checks after a decode step, which changes no storage in the model's
  code; a port's answers are judged by every check after every operation.

What a port cannot show stays out (``NOT_JUDGED`` says who sees each instead): the memory of
a context (STATE-1; the observed state has no context, so the premise of PERF-3 that the slot's
memory was live holds), unwritten bytes (UNINIT-1, UNINIT-2), the process dying (RB-3, NOABORT-1),
slot files (FILE-1, FILE-2), scheduling and the batch fill (PROGRESS-1, REUSE-1, REUSE-2,
CKPT-3, CKPT-5), the restore choice against the live memory (RESTORE-2).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from pcspec.conform.observe import ROLE
from pcspec.conform.tags import Tags
from pcspec.core.results import Finding
from pcspec.model import events as ev
from pcspec.model import policy
from pcspec.model.cache import CacheEntry, unique_bytes
from pcspec.model.checkpoint import Checkpoint, Prompt
from pcspec.model.config import Config, MemoryKind
from pcspec.model.context import Context
from pcspec.model.design import Design
from pcspec.model.designs import DESIGNS
from pcspec.model.heap import Buffer
from pcspec.model.slot import Slot, Task
from pcspec.properties import judge
from pcspec.properties.catalogue import CATALOGUE

Obs = dict[str, Any]

# Who sees, on a port, the properties its observations cannot show (docs/SPEC.md, section 8).
NOT_JUDGED = {
    "UNINIT-1": "valgrind memcheck on the port (an unwritten byte read back); on observations: a part with no state",
    "UNINIT-2": "valgrind memcheck on the port (an unwritten byte loaded into a context)",
    "RB-3": "the port process itself: an escaped std::bad_alloc ends it (the kit reports the exit)",
    "NOABORT-1": "the port process itself: an abort ends it; ASan and UBSan reports end it too",
    "STATE-1": "the model only (a port has no memory of its own: the fake context stands in for it)",
    "PROGRESS-1": "the model only (scheduling is the environment's)",
    "FILE-1": "the model only (slot files are the environment's)",
    "FILE-2": "the model only (slot files are the environment's)",
    "REUSE-1": "the model only (it judges on states; ports reproduce the resume of section 4 exactly)",
    "REUSE-2": "the model only (slot selection is the environment's)",
    "CKPT-3": "the model only (the batch fill is the environment's)",
    "CKPT-5": "the model only (the batch fill is the environment's)",
    "RESTORE-2": "the model only (the choice is judged against the live memory's pos_min, not reported by a port)",
}
JUDGED = tuple(p for p in CATALOGUE if p.id not in NOT_JUDGED)

MODEL_ROLE = {port: model for model, port in ROLE.items()}
ERASE_ORDER = {"too_close": 0, "cap": 1, "supersede": 2}  # create_checkpoint's, then the rest


def config_of(port: dict[str, Any]) -> Config:
    """The model configuration a port's says, as far as the checks read it."""
    cache_ram = (port["limit_size"] or -1) if port["cache"] else 0  # (-1: a cache with no byte limit)
    return Config(n_ctx_checkpoints=port["n_ctx_checkpoints"], memory=MemoryKind(port["memory"]), cache_ram=cache_ram)


class ObservedHeap:
    """The heap as the judge reads it (``HeapView``): the model's events a port's answers stand
    for (``OperationEvents``), emitted as the model emits its own (stamped with the operation,
    each watcher called), and the buffers the last observation shows."""

    def __init__(self) -> None:
        self.events: list[ev.Event] = []
        self.op = 0
        self.live: dict[int, Buffer] = {}
        self._watchers: dict[str, list[Callable[[ev.Event], None]]] = {}
        self._next_id = 1

    def watch(self, kind: str, callback: Callable[[ev.Event], None]) -> None:
        self._watchers.setdefault(kind, []).append(callback)

    def emit(self, e: ev.Event) -> None:
        ev.stamp(e, self.op)
        self.events.append(e)
        for w in self._watchers.get(e.kind, ()):
            w(e)

    def new_id(self) -> int:
        i = self._next_id
        self._next_id += 1
        return i


@dataclass(frozen=True)
class ObservedCache:
    """The prompt cache as an observation shows it (``CacheView``)."""

    entries: tuple[CacheEntry, ...]
    limit_size: int
    limit_tokens: int

    def n_tokens(self) -> int:
        return sum(e.prompt.n_tokens for e in self.entries)


class ObservedState:
    """A port's state as its last observation shows it: what the judge reads of a state
    (``pcspec.properties.view.StateView``), made of the model's values. Checkpoints and buffers
    keep their identity across observations (by canonical id), and a buffer whose part changed
    took a write (``version``), as the judge's fingerprints compare them."""

    def __init__(self, config: dict[str, Any], tags: Tags) -> None:
        self.design: Design = DESIGNS["fixed"]  # what a port implements (the judge asks whose code runs)
        self.crash = None  # a port that dies ends the session: the kit reports that, not the checks
        self.files: Mapping[str, bytes] = MappingProxyType({})  # slot files are the environment's
        self.heap = ObservedHeap()
        self.tags = tags
        self.ckpts: dict[int, Checkpoint] = {}
        self.bufs: dict[tuple[str, int, str], Buffer] = {}
        self.tasks: dict[int, Task] = {}  # slot -> the task whose prompt it processes
        self.configure(config)

    def configure(self, config: dict[str, Any]) -> None:
        """A server that just started: empty slots, an empty cache."""
        self.port_config = config
        self.cfg = config_of(config)
        self.slots = [Slot(i) for i in range(config["n_slots"])]
        self.tasks.clear()
        self.cache = ObservedCache((), self.cfg.limit_size, 0) if config["cache"] else None
        self.accounted_bytes = 0  # the port's size() (0 with no cache)
        self.reported_unique = 0
        self.reported: set[int] = set()  # the checkpoints the last observation reports

    def contexts(self) -> tuple[Context, ...]:
        return ()  # a port shows no memory

    @property
    def unique_bytes(self) -> int:
        """The model's count (``pcspec.model.cache.unique_bytes``) over the observation, where
        each checkpoint owns its payloads; where it agrees with the port's accounting, the port's
        own count (``unique``), which knows the payloads distinct checkpoint objects share (as
        #27451's copies do): so ACC-1 holds the accounting to both."""
        counted = unique_bytes(self.cache.entries) if self.cache is not None else 0
        return self.reported_unique if counted == self.accounted_bytes else counted

    def load(self, op: dict[str, Any], obs: Obs) -> None:
        """Make the state the observation of ``op``'s answer: the task each slot processes, as
        ``op`` starts or ends one; the token limit only when the operation is an ``update``
        (a save may exceed it until the update after it)."""
        name, slot = op["op"], op.get("slot", -1)
        if name == "prompt_start" and any(e["kind"] == "prompt_start" for e in obs["events"]):
            self.tasks[slot] = Task(op["task"], tuple(op["prompt"]), cache_prompt=op["cache_prompt"])
        elif name in ("release", "install"):
            self.tasks.pop(slot, None)
        self.heap.live = {}
        self.reported_unique = obs["unique"]
        self.reported = set()
        for c in obs["ckpts"]:
            cid = c["id"]
            self.reported.add(cid)
            if cid not in self.ckpts:
                self.ckpts[cid] = Checkpoint(cid, 0, -1, -1, -1)
            ck = self.ckpts[cid]
            ck.n_tokens, ck.id_task, ck.pos_min, ck.pos_max, ck.refs = (
                c["n_tokens"], c["id_task"], c["pos_min"], c["pos_max"], c["refs"])
            parts = self._parts("ckpt", cid, c["parts"])
            ck.tgt, ck.dft, ck.spec = parts.get("tgt"), parts.get("dft"), parts.get("spec")

        def held(ids: list[int]) -> list[Checkpoint]:
            for cid in ids:
                if cid not in self.reported:  # held but not reported: nothing references it
                    self.ckpts[cid] = Checkpoint(cid, 0, -1, -1, -1)
            return [self.ckpts[cid] for cid in ids]

        self.slots = [
            Slot(i, Prompt(tuple(s["tokens"]), held(s["ckpts"])), task=self.tasks.get(i),
                 restored=self.ckpts.get(s["restored"]) if s["restored"] is not None else None)
            for i, s in enumerate(obs["slots"])
        ]
        if self.cache is not None:
            entries = []
            for e in obs["entries"]:
                parts = self._parts("entry", e["id"], e["parts"])
                prompt = Prompt(tuple(e["tokens"]), held(e["ckpts"]))
                entries.append(CacheEntry(e["id"], prompt, parts.get("main"), parts.get("drft")))
            limit_tokens = self.port_config["limit_tokens"] if name == "update" else 0
            self.cache = ObservedCache(tuple(entries), obs["limit"], limit_tokens)
            self.accounted_bytes = obs["accounted"]

    def prompts(self) -> list[Prompt]:
        """Every holder's prompt: the slots', then the entries'."""
        return [s.prompt for s in self.slots] + [e.prompt for e in (self.cache.entries if self.cache else ())]

    def _parts(self, owner: str, oid: int, parts: list[dict[str, Any]]) -> dict[str, Buffer]:
        out = {}
        for p in parts:
            role, size = p["role"], p["size"]
            b = self.bufs.get((owner, oid, role))
            if b is None:
                b = self.bufs[(owner, oid, role)] = Buffer(self.heap.new_id(), size, MODEL_ROLE.get(role, role),
                                                           zeroed=False, refs=1)
            content = self.tags.content(p["state"])
            filled = size if content is not None else 0
            if (b.size, b.filled, b.content) != (size, filled, content):
                b.size, b.filled, b.content = size, filled, content
                b.version += 1
            self.heap.live[b.id] = b
            out[role] = b
        return out


@dataclass(frozen=True)
class Before:
    """What the model's events read of the operation's slot before it: its tokens, the
    checkpoint its task restored, and each checkpoint's ``(pos_min, pos_max, n_tokens, the
    target's content)``."""

    n_tokens: int
    restored: int | None
    held: dict[int, tuple[int, int, int, object]]

    @classmethod
    def of(cls, slot: Slot) -> Before:
        held = {ck.id: (ck.pos_min, ck.pos_max, ck.n_tokens, ck.tgt.content if ck.tgt else None)
                for ck in slot.prompt.checkpoints}
        return cls(len(slot.prompt.tokens), slot.restored.id if slot.restored is not None else None, held)


class Judge:
    """Judges the canonical observations of one trace in order (``judge(index, op, obs)``)."""

    def __init__(self, config: dict[str, Any], tags: Tags) -> None:
        self.state = ObservedState(config, tags)
        self.judge = judge.Judge(self.state, JUDGED, shortcuts=False, observed=True)
        self.published: set[int] = set()  # the checkpoints a holder's list has held (PublishCkpt)

    def __call__(self, index: int, op: dict[str, Any], obs: Obs) -> list[Finding]:
        state, heap = self.state, self.state.heap
        if op["op"] == "restart":
            state.configure(op["config"])
        heap.op = index
        events = OperationEvents(op, obs["events"], state)
        for e in events.at_begin():
            heap.emit(e)
        state.load(op, obs)
        for e in events.at_end(state, self.published):
            heap.emit(e)
        return self.judge()


class OperationEvents:
    """The model's events that a port's answer to one operation stands for: the one place they
    are built. Why they are built at all: most of the catalogue's checks read the model's events
    (an erasure's reason and the list's length then, an admission, an eviction, a prompt start's
    numbers), and the judge's history takes its snapshots at them (the cache before a save, the
    slot before a prompt start, a checkpoint at its publication, an entry when its save returns);
    a port's events carry less than the model's (docs/SPEC.md, section 5), so the rest is worked
    out here from the state around them (the module's docstring says how).

    ``at_begin``: the events the history snapshots the state before the answer at (a save's
    beginning, a prompt's); ``at_end``: the rest, over the state the answer shows."""

    def __init__(self, op: dict[str, Any], events: list[dict[str, Any]], state: ObservedState) -> None:
        self.op, self.events = op, events
        self.slot: int = op.get("slot", -1)
        slots = state.slots
        self.before = Before.of(slots[self.slot] if 0 <= self.slot < len(slots) else Slot(self.slot))
        starts = [e for e in events if e["kind"] == "prompt_start"] if op["op"] == "prompt_start" else []
        self.start = starts[0] if starts else None

    def at_begin(self) -> Iterator[ev.Event]:
        for e in self.events:
            if e["kind"] == "save_end":
                yield ev.SaveBegin(slot=self.slot, n_tokens=self.before.n_tokens)
        if self.start is not None:
            yield ev.PromptBegin(slot=self.slot, task=self.op["task"])

    def at_end(self, state: ObservedState, published: set[int]) -> Iterator[ev.Event]:
        for prompt in state.prompts():  # a checkpoint is published when it first enters a holder's list
            for ck in prompt.checkpoints:
                if ck.id not in published and ck.id in state.reported:
                    published.add(ck.id)
                    yield ev.PublishCkpt(ckpt=ck.id, checkpoint=ck)
        yield from self._answered(state)

    def _answered(self, r: ObservedState) -> Iterator[ev.Event]:
        """The port's own events of the operation as the model's, with what the checks read."""
        op, events, start, before, slot = self.op, self.events, self.start, self.before, self.slot
        task = r.tasks[slot].id if slot in r.tasks else -1
        restores = {e["ckpt"] for e in events if e["kind"] == "ckpt_restore"}
        pos_next, cause = 0, None
        if start is not None:
            pos_next = start["n_prefix"] if op["cache_prompt"] else 0
            got = next((before.held[c] for c in restores if c in before.held), None)
            if got is not None:
                pos_next = policy.restored_positions(pos_next, got[0], got[1], got[2])[0]
            elif start["reprocess"] is not None:
                pos_next = 0
            if any(e["kind"] == "seq_rm_refused" for e in events):
                cause = "seq_rm refused"
            elif start["reprocess"] == "checkpoint failed to load":
                cause = "failed to load"
        erasures = sorted((e for e in events if e["kind"] == "ckpt_erase"),
                          key=lambda e: ERASE_ORDER.get(e["reason"], 3))
        for k, e in enumerate(erasures):
            was = before.held.get(e["ckpt"])
            rule = start is not None and e["reason"] == "invalidated"  # judged on these numbers
            yield ev.CkptErase(
                slot=slot, ckpt=e["ckpt"], reason=e["reason"], task=task, n_tokens=e["n_tokens"],
                restored_by_task=e["ckpt"] in restores if start is not None else e["ckpt"] == before.restored,
                list_len=len(before.held) - k,
                pos_max=was[1] if rule and was is not None else None,
                pos_next=pos_next if rule else None,
                n_prefix=start["n_prefix"] if rule and start is not None else None,
                cause=cause if rule else None,
            )
        was_restored = before.held.get(before.restored) if before.restored is not None else None
        copied = False
        for e in events:
            kind = e["kind"]
            if kind == "save_end":
                yield ev.SaveEnd(slot=slot, ok=bool(e["ok"]))
            elif kind == "entry_insert":
                yield ev.EntryInsert(entry=e["entry"], n_tokens=e["n_tokens"], own_unique=e["own_unique"],
                                     unique_after=e["unique_after"], limit=e["limit"])
            elif kind == "entry_evict":
                yield ev.EntryEvict(entry=e["entry"], reason=e["reason"], n_tokens=e["n_tokens"],
                                    unique_total=e.get("unique_total"), limit=e.get("limit"))
            elif kind == "save_reject_oversize":
                yield ev.SaveRejectOversize(size=e["size"], own_unique=e["own_unique"], limit=e["limit"])
            elif kind == "copy_payload":
                copied = True
                yield ev.CopyPayload(src=0, dst=0, bytes=e["bytes"], role=MODEL_ROLE.get(e["role"], e["role"]))
            elif kind == "ckpt_create":
                new = r.ckpts.get(e["ckpt"])
                identical = (was_restored is not None and new is not None and new.tgt is not None
                             and was_restored[2] == e["n_tokens"] and was_restored[3] == new.tgt.content)
                yield ev.CkptCreate(slot=slot, ckpt=e["ckpt"], task=task, n_tokens=e["n_tokens"],
                                    pos_min=e["pos_min"], pos_max=e["pos_max"], identical_to_restored=identical)
        if start is not None:
            yield ev.PromptStart(
                slot=slot, task=op["task"], n_prefix=start["n_prefix"], n_slot_tokens=before.n_tokens,
                n_past=start["n_past"], restored=start["restored"], reprocess=start["reprocess"],
                pos_next=start["n_past"], prompt=tuple(op["prompt"]), cache_prompt=op["cache_prompt"],
            )
        if op["op"] == "clear":
            yield ev.PromptClear(slot=slot, n_tokens=before.n_tokens, task=task, restored_by_task=before.restored)
        if op["op"] == "save" and not copied and r.cache is not None and 0 <= slot < len(r.slots):
            # A checkpoint the saved entry holds that is not one of the slot's is a copy of one.
            mine = {ck.id for ck in r.slots[slot].prompt.checkpoints}
            inserted = {e["entry"] for e in events if e["kind"] == "entry_insert"}
            for entry in r.cache.entries:
                for ck in entry.prompt.checkpoints if entry.id in inserted else ():
                    if ck.id not in mine:
                        yield from (ev.CopyPayload(src=0, dst=b.id, bytes=b.size, role=b.role) for b in ck.buffers())
