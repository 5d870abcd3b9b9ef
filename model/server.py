"""The server: slot selection, task launch, idle-slot caching and the update loop.

``Server(config, design)`` is the model's public API. Each public method is one server
action (a request arriving, one ``update_slots`` iteration, a ``/slots`` action, a fault, a
sleep/wake) and counts as one *operation*: the properties are judged after each operation,
over the state and the events the operation emitted. A ``GGML_ABORT`` or an uncaught C++
exception inside an operation becomes a recorded crash (``Server.crash``); after a crash the
process is gone and later operations do nothing.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pcspec.model import events as ev
from pcspec.model import policy
from pcspec.model.cache import PromptCache, unique_bytes
from pcspec.model.config import Config
from pcspec.model.context import Context
from pcspec.model.errors import PcspecError
from pcspec.model.heap import Abort, Heap
from pcspec.model.memory import Tokens
from pcspec.model.processing import context_shift_if_full, finish_prompt, generate_step, prompt_batch, prompt_start
from pcspec.model.slot import Slot, SlotState, Task, TaskType
from pcspec.model.slotfile import field_map, read_slot_file

if TYPE_CHECKING:
    from pcspec.model.design import Design


def _field_place(raw: bytes, field: str) -> tuple[int, int] | None:
    """(offset, width) of a named integer field of a slot file, or None if the file does not
    parse or has no such field."""
    try:
        parsed = read_slot_file(raw)
    except PcspecError:
        return None
    return next(((off, width) for name, off, width in field_map(parsed) if name == field), None)


@dataclass(frozen=True)
class SlotAction:
    """A ``/slots/{id}?action=save|restore|erase`` task (SERVER_TASK_TYPE_SLOT_*). Its
    ``server_task::id_slot`` stays -1 (the slot is in ``slot_action.id_slot``), so
    ``pop_deferred_task`` never picks it by slot, only as the oldest deferred task."""

    id: int
    action: str
    slot: int
    filename: str = ""
    id_slot: int = -1


@dataclass(frozen=True)
class Cancel:
    """A ``SERVER_TASK_TYPE_CANCEL`` of task ``id_target``: ``server_response_reader::stop``
    posts one for every task of a request once one of them failed (server-queue.cpp:602-621 of
    b11549, at the front of the queue), and the loop releases the slot that holds the task
    (server-context.cpp:2797-2805 of b11549). The model posts them for the tasks of a group of
    shared-prefix tasks only (``Server.cancel_siblings``): those are the tasks a failure would
    otherwise leave waiting for ever (a child in ``WAIT_OTHER``)."""

    id_target: int


# The flags a ``restart`` may change: the sizes of the server, not its model.
RESTART_FIELDS = ("n_slots", "n_ctx_checkpoints", "checkpoint_min_step", "cache_ram", "n_ctx_slot")


@dataclass(frozen=True)
class Crash:
    op: int
    where: str
    message: str


class Server:
    """server_context: one llama-server process."""

    def __init__(self, cfg: Config, design: Design) -> None:
        self.cfg = cfg.validate()
        self.design = design
        self.heap = Heap(host_ram=cfg.host_ram)
        self.ctx_tgt = Context.target(cfg)
        self.ctx_dft = Context.draft(cfg) if cfg.has_draft else None
        self.slots = [Slot(i) for i in range(cfg.n_slots)]
        self.cache = PromptCache(cfg, design, self.heap) if cfg.cache_enabled else None
        # server_queue: tasks deferred because no slot (or not the pinned one) was free, and
        # the deferred tasks a slot release moved back to the front of the task queue (and the
        # cancels a failed task of a group posted there: ``Cancel``).
        self.deferred: deque[Task | SlotAction] = deque()
        self.requeued: deque[Task | SlotAction | Cancel] = deque()
        self.clock = 0
        self.next_task_id = 0
        self.crash: Crash | None = None
        self.files: dict[str, bytes] = {}  # the slot-save directory
        self.last_result: dict[str, object] = {}  # the answer of the last /slots action

    # -- helpers ---------------------------------------------------------------------------

    def contexts(self) -> list[Context]:
        return [self.ctx_tgt] if self.ctx_dft is None else [self.ctx_tgt, self.ctx_dft]

    @property
    def idle(self) -> bool:
        """Nothing more happens without a new request: no slot can advance and no task waits
        in the queue. Deferred tasks wait for a slot release (server-queue.cpp:90-113), so
        they do not keep the server busy; a stalled slot (``Slot.stalled``) never advances."""
        return not self.requeued and not any(s.is_processing and not s.stalled and not self._waits_in_vain(s)
                                             for s in self.slots)

    def _waits_in_vain(self, slot: Slot) -> bool:
        """A child in ``WAIT_OTHER`` whose parent holds no slot that advances: nothing starts it
        (after a failure the cancels release it; a stalled parent never gets to the copy)."""
        if slot.state != SlotState.WAIT_OTHER or slot.task is None:
            return False
        pid = slot.task.id_parent
        return not any(s.task is not None and s.task.id == pid and not s.stalled for s in self.slots)

    # -- measurements ----------------------------------------------------------------------------

    @property
    def accounted_bytes(self) -> int:
        """What the cache believes it holds (``server_prompt_cache::size``)."""
        return self.cache.size() if self.cache is not None else 0

    @property
    def unique_bytes(self) -> int:
        """Distinct buffers reachable from cache entries, each counted once."""
        return unique_bytes(self.cache.entries) if self.cache is not None else 0

    @property
    def physical_bytes(self) -> int:
        """All live buffers (slot checkpoints, entries, anything leaked)."""
        return self.heap.physical_bytes

    # -- the operation wrapper ---------------------------------------------------------------------

    def _begin(self, name: str, **args: object) -> bool:
        self.heap.op += 1
        self.last_result = {}
        if self.crash is not None:
            self.heap.emit(ev.IgnoredAfterCrash(op_name=name))
            return False
        self.heap.emit(ev.Op(name=name, args=args))
        return True

    def _crashed(self, exc: Abort) -> None:
        self.crash = Crash(self.heap.op, exc.where, exc.message)
        self.heap.emit(ev.Crash(where=exc.where, message=exc.message))

    # -- public operations ----------------------------------------------------------------------------

    def request(
        self,
        tokens: Tokens,
        spans: tuple[int, ...] = (),
        n_predict: int = 4,
        id_slot: int = -1,
        cache_prompt: bool = True,
        type: TaskType = TaskType.COMPLETION,
        chat: bool = False,
    ) -> int:
        """A task arrives (server-context.cpp: process_single_task). Returns the task id.

        ``spans``: the user-message starts the request's ``message_spans`` would hold. Where
        they come from is the endpoint's: ``chat`` True is a chat request (``/chat/completions``),
        whose spans the chat template's delimiters give in every build; False is a raw
        ``/completion``, whose spans come from its ``message_delimiters`` field (server-context.cpp:
        4286-4302 at 0c1e570, 4656-4672 of b11434). A build whose spans come from the chat session
        only (``RuleSet.spans_from_chat_only``: ``apply_chat_session``, server-task.h:261-270 of
        b11549, the only setter of ``message_spans``, called at server-context.cpp:4825 of b11549
        with an empty session for ``/completion``, 5415-5424) has no such field: a raw
        completion's task gets no spans, whatever the request sent."""
        tid = self.next_task_id
        self.next_task_id += 1
        if not self._begin("request", task=tid, n_tokens=len(tokens), id_slot=id_slot):
            return tid
        if self.design.rules.spans_from_chat_only and not chat:
            spans = ()
        task = Task(tid, tuple(tokens), tuple(spans), n_predict, id_slot, cache_prompt, type)
        try:
            self._process_single_task(task)
        except Abort as exc:
            self._crashed(exc)
        return tid

    def request_group(self, prompts: Sequence[Tokens]) -> list[int]:
        """A request of several decision prompts (``POST /v1/systemone``, server-context.cpp:
        5755-5796 of b11549: one ``SERVER_TASK_TYPE_DECISION`` task per variant of each question,
        ids in order, 5782-5790; for a decision type that can share a prompt, server-decision.h:
        39-51, grouped by ``server_decision_group_tasks`` with ``--parallel`` slots, 5792-5793; then
        posted together). Each posted task is processed as it comes out of the queue: a parent takes
        its slot and its children's slots at once (``_process_single_task``). Returns the task ids.
        (A joint decision type posts one task for all the questions, 5777-5781: a ``request``.)

        Where a group forms, its prompt is shared by ``seq_cp``; the model's iSWA memory has no
        ``seq_cp`` within one stream (``Context.seq_cp``), so such a group on an iSWA target or
        draft with ``--kv-unified`` is refused (a ``PcspecError``, before anything happens)."""
        first = self.next_task_id
        self.next_task_id += len(prompts)
        tasks = [Task(first + i, tuple(p), (), 1, -1, True, TaskType.DECISION) for i, p in enumerate(prompts)]
        groups = policy.decision_groups([t.tokens for t in tasks], self.cfg.n_slots)
        if any(kids for _, kids, _ in groups) and any(c.swa is not None and c.swa.unified for c in self.contexts()):
            raise PcspecError("request_group: shared-prefix child tasks on an iSWA memory with --kv-unified are "
                              "not modelled (seq_cp within one stream of the SWA cache, docs/RULESETS.md)")
        if not self._begin("request_group", task=first, n=len(prompts)):
            return [t.id for t in tasks]
        posted: list[Task] = []
        for i, kids, n_shared in groups:
            if not kids:
                posted.append(tasks[i])
                continue
            parent = tasks[i]
            children = tuple(replace(tasks[j], id_parent=parent.id) for j in kids)
            posted.append(replace(parent, children=children, n_tokens_shared=n_shared))
            self.heap.emit(ev.Group(task=parent.id, children=tuple(c.id for c in children), n_shared=n_shared))
        try:
            for task in posted:
                self._process_single_task(task)
        except Abort as exc:
            self._crashed(exc)
        return [t.id for t in tasks]

    def step(self) -> None:
        """One iteration of the server loop (server-queue.cpp:299-317): ``update_slots``
        (one shared batch: every generating slot's token, then prompt tokens slot by slot up
        to ``n_batch``), then the tasks a release re-queued, which the loop processes first
        when it comes back (``pop_deferred_task`` puts them at the front of the queue)."""
        if not self._begin("step"):
            return
        try:
            self._update_slots()
        except Abort as exc:
            self._crashed(exc)

    def run(self, max_steps: int = 100_000) -> None:
        """Steps until every slot is idle and nothing is deferred."""
        for _ in range(max_steps):
            if self.idle or self.crash is not None:
                return
            self.step()

    def inject(self, site: str, count: int = 1) -> None:
        """Arm a one-shot fault at ``site`` (``Faults.SITES``)."""
        if not self._begin("inject", site=site, count=count):
            return
        self.heap.faults.arm(site, count)

    def sleep_wake(self) -> None:
        """``--sleep-idle-seconds``: sleep then wake; ``load_model`` rebuilds the slots and a
        new prompt cache, so every cached prompt and checkpoint is lost."""
        if not self._begin("sleep_wake"):
            return
        if any(s.is_processing for s in self.slots) or self.deferred:
            # The queue sleeps only after --sleep-idle-seconds without a task
            # (server-queue.cpp:290-297, 326-338); a processing slot posts a task every loop
            # (server-context.cpp:2806-2811), so a busy server never sleeps.
            self.heap.emit(ev.SleepSkipped())
            return
        for slot in self.slots:
            slot.prompt_clear(self)
            slot.t_last_used = -1
        if self.cache is not None:
            for e in list(self.cache.entries):
                self.cache.evict(e, "wake")
            self.cache = PromptCache(self.cfg, self.design, self.heap)

    def restart(self, **changes: int) -> None:
        """The process exits and ``llama-server`` starts again, possibly with other flags
        (``RESTART_FIELDS``; the model and its memory kind stay): every slot, checkpoint,
        cache entry and queued task is gone, a crash included; the slot-save directory
        stays, so a file saved before can be restored into a server with, say, a smaller
        ``--ctx-checkpoints`` or fewer slots."""
        self.heap.op += 1
        self.last_result = {}
        self.heap.emit(ev.Op(name="restart", args=changes))
        for buf in list(self.heap.live.values()):
            self.heap.free(buf)  # the old process's memory goes with it
        cfg: Config = replace(self.cfg, **changes)  # type: ignore[arg-type]  # (ints only: RESTART_FIELDS)
        self.cfg = cfg.validate()
        self.ctx_tgt = Context.target(self.cfg)
        self.ctx_dft = Context.draft(self.cfg) if self.cfg.has_draft else None
        self.slots = [Slot(i) for i in range(self.cfg.n_slots)]
        self.cache = PromptCache(self.cfg, self.design, self.heap) if self.cfg.cache_enabled else None
        self.deferred.clear()
        self.requeued.clear()
        self.crash = None
        self.heap.emit(ev.Restart(changes=changes))

    def slot_action(self, action: str, id_slot: int, filename: str = "") -> None:
        """``POST /slots/{id}?action=save|restore|erase``."""
        if not self._begin("slot_" + action, id_slot=id_slot, filename=filename):
            return
        act = SlotAction(self.next_task_id, action, id_slot, filename)
        self.next_task_id += 1
        try:
            self._process_slot_action(act)
        except Abort as exc:
            self._crashed(exc)

    def _process_slot_action(self, act: SlotAction) -> None:
        """server-context.cpp:2526-2663 (process_single_task, SLOT_SAVE/RESTORE/ERASE): an
        action on a processing slot is deferred until a slot release, like a task."""
        from pcspec.model import slot_files

        if self.slots[act.slot].is_processing:
            self.heap.emit(ev.Deferred(task=act.id, slot=act.slot, action=act.action))
            self.deferred.append(act)
            return
        slot_files.handle(self, act.action, act.slot, act.filename)

    def corrupt_file(
        self,
        filename: str,
        offset: int,
        data: bytes,
        truncate: int | None = None,
        field: str | None = None,
        value: int = 0,
        remove: int | None = None,
    ) -> None:
        """The fault model's hand on the disk: overwrite bytes of a slot file, cut it, splice
        it (``remove`` bytes at ``offset`` replaced by ``data``: an insertion, a deletion, or,
        at the end, an append), or set one integer field of its format (``field``, a name of
        ``slotfile.field_map``) to ``value``. A field is found by name in the file as it is now, so a trace that
        corrupts a length stays a corruption of that length when earlier operations change
        the file's layout (a shrinker removing them, say): an offset would then land in a
        payload, a semantic corruption no reader can detect."""
        if not self._begin("corrupt_file", filename=filename):
            return
        raw = self.files.get(filename)
        if raw is None:
            self.heap.emit(ev.FileMissing(filename=filename))
            return
        if truncate is not None:
            raw = raw[:truncate]
        elif remove is not None:
            at = min(offset, len(raw))
            raw = raw[:at] + data + raw[at + remove :]
        else:
            if field is not None:
                where = _field_place(raw, field)
                if where is None:
                    self.heap.emit(ev.FileFieldMissing(filename=filename, field=field))
                    return
                offset, width = where
                data = (value % (1 << (8 * width))).to_bytes(width, "little")
            buf = bytearray(raw)
            for i, b in enumerate(data):
                if offset + i < len(buf):
                    buf[offset + i] = b
            raw = bytes(buf)
        self.files[filename] = raw
        self.heap.emit(ev.FileCorrupted(filename=filename, size=len(raw)))

    # -- process_single_task ------------------------------------------------------------------------

    def pop_deferred_task(self, id_slot: int) -> None:
        """server-queue.cpp:90-113, called by every slot release (server-context.cpp:1282):
        move one deferred task back to the front of the queue: the first pinned to that slot
        id (the raw ``id_slot``), else the oldest. One task per release, so a busy-slot path
        fires at most once per release, not after every step."""
        if not self.deferred:
            return
        task = next((t for t in self.deferred if t.id_slot == id_slot), self.deferred[0])
        self.deferred.remove(task)
        self.heap.emit(ev.Requeued(task=task.id, released=id_slot))
        self.requeued.append(task)

    def _decode_refused(self, ctx: Context, seq: int, pos_max: int, start: int) -> None:
        """A decode whose batch the context refused (``Context.refused_start``): memory and
        bookkeeping disagree about where a sequence ends (a restored slot file whose token list
        is not the one its state was saved with, or a draft context left behind by a restore).

        * the target's (``llama_process`` returns -1, server-context.cpp:3669-3703 at 0c1e570):
          every processing slot is answered ``Invalid input batch.``, released and cleared
          ("it's complicated to keep track of how much of the current batch has been
          processed"), then the thrown error ends the pass (``abort_all_slots``, 2868-2874,
          finds no slot left processing);
        * the draft's (``common_speculative_process`` returns false, 3725-3735): the target has
          decoded the batch; the thrown ``failed to process speculative batch`` reaches
          ``abort_all_slots`` (2735-2742, 2868-2874), which answers and releases every
          processing slot without clearing it."""
        self.heap.emit(ev.DecodeRefused(context=ctx.name, seq=seq, pos_max=pos_max, start=start))
        processing = [s for s in self.slots if s.is_processing]
        if ctx is self.ctx_tgt:
            for slot in processing:
                slot.release(self, error="Invalid input batch.")
                slot.prompt_clear(self)
        else:
            for slot in processing:
                slot.release(self, error="decode() failed: failed to process speculative batch")
        self._process_requeued()

    def _process_requeued(self) -> None:
        while self.requeued:
            task = self.requeued.popleft()
            if isinstance(task, SlotAction):
                self._process_slot_action(task)
            elif isinstance(task, Cancel):
                self._process_cancel(task)
            else:
                self._process_single_task(task)

    def cancel_siblings(self, failed: Task) -> None:
        """A task of a group of shared-prefix tasks failed: its reader answers the request with
        the error and its destructor's ``stop`` cancels the tasks not yet answered
        (server-context.cpp:5798-5804 of b11549, server-queue.h:218-220, server-queue.cpp:602-621),
        at the front of the queue: here, the group's other tasks still on a slot. Their
        ``Cancel`` s come before the tasks a release re-queues."""
        pid = failed.id if failed.is_parent else failed.id_parent
        ids = [s.task.id for s in self.slots if s.task is not None and s.task.id != failed.id
               and (s.task.id == pid or s.task.id_parent == pid)]
        for tid in reversed(ids):
            self.requeued.appendleft(Cancel(tid))

    def _process_cancel(self, cancel: Cancel) -> None:
        """server-context.cpp:2797-2805 of b11549: release the slot that holds the task."""
        slot = next((s for s in self.slots if s.task is not None and s.task.id == cancel.id_target), None)
        self.heap.emit(ev.Cancel(task=cancel.id_target, slot=None if slot is None else slot.id))
        if slot is not None:
            slot.release(self, sampled=False)

    def get_free_slots(self, n_needed: int, exclude: int) -> list[Slot]:
        """server-context.cpp:2462-2474 of b11549 (``get_free_slots``, 2454 of b11434): the first
        ``n_needed`` idle slots in slot order but ``exclude``. Nothing is saved: the slots' prompts
        stay until the parent's copy replaces them."""
        free: list[Slot] = []
        for s in self.slots:
            if not s.is_processing and s.id != exclude:
                free.append(s)
            if len(free) >= n_needed:
                break
        return free

    def launch_slots_with_parent_task(self, parent_slot: Slot, child_slots: list[Slot], task: Task) -> None:
        """server-context.cpp:2476-2518 of b11549 (2468 of b11434): the children first, each on
        its slot in ``WAIT_OTHER``, then the parent (``launch_slot_with_task`` never fails here)."""
        for slot, child in zip(child_slots, task.children, strict=True):
            self.launch_slot_with_task(slot, child)
        self.launch_slot_with_task(parent_slot, task)

    def _process_single_task(self, task: Task) -> None:
        slot = self.get_available_slot(task)
        if slot is None or slot.is_processing:
            self.heap.emit(ev.Deferred(task=task.id, slot=None if slot is None else slot.id))
            self.deferred.append(task)
            return
        if task.is_parent:
            # server-context.cpp:2761-2773 of b11549: the children's slots, or the task waits
            free = self.get_free_slots(len(task.children), slot.id)
            if len(free) < len(task.children):
                self.heap.emit(ev.DeferredChildren(task=task.id, slot=slot.id, n_free=len(free),
                                                   n_children=len(task.children)))
                self.deferred.append(task)
                return
            self.launch_slots_with_parent_task(slot, free, task)
        else:
            self.launch_slot_with_task(slot, task)
        if self.cfg.idle_caching and self.cache is not None:
            # server-context.cpp: process_single_task, idle-slot caching after a launch (2779-2793
            # of b11549): every idle slot, whatever the type of the task just launched or of the
            # one that left the slot's prompt (a decision's included).
            for other in self.slots:
                if other.is_processing:
                    continue
                self.heap.emit(ev.IdleSave(slot=other.id))
                if other.prompt_save(self):
                    self.cache.update()
                if self.cfg.kv_unified:
                    other.prompt_clear(self)

    def launch_slot_with_task(self, slot: Slot, task: Task) -> None:
        """server-context.cpp: launch_slot_with_task."""
        slot.task = task
        # a child waits for its parent's prompt (server-context.cpp:1955-1957 of b11549)
        slot.state = SlotState.WAIT_OTHER if task.is_child else SlotState.STARTED
        slot.n_gen = 0
        slot.truncated = False
        slot.restored = None
        self.heap.emit(ev.Launch(slot=slot.id, task=task.id))

    def get_available_slot(self, task: Task) -> Slot | None:
        """server-context.cpp: get_available_slot: the design's choice (``Design.get_available_slot``:
        pinned, LCP similarity, LRU) and the cache update it triggers (server-context.cpp:1528-1641)."""
        choice = self.design.get_available_slot(self, task)
        ret, update_cache = choice.slot, choice.update_cache
        self.heap.emit(ev.Select(
            task=task.id,
            slot=None if ret is None else ret.id,
            how=choice.how,
            update_cache=update_cache,
            prompt=task.tokens,
            task_type=task.type,
        ))
        if ret is not None and ret.is_processing and not self.design.cache_update_busy_slot:
            update_cache = False  # a busy slot is left alone; the task waits for it
        # "cache prompts only for completion tasks" (server-context.cpp:1773 of b11549 and b11434,
        # 1621 at 0c1e570): the incoming task's type gates the save and the load together, so a
        # decision (or infill, embedding, rerank) neither saves the slot it takes nor loads into
        # it. What the slot holds is saved whatever task left it there: by a later completion's
        # selection here, or by the idle-slot save, which tests no task type.
        if ret is not None and update_cache and self.cache is not None and task.type == TaskType.COMPLETION:
            ret.prompt_save(self)
            if not ret.prompt_load(self, task.tokens):
                ret.prompt_clear(self)
            self.cache.update()
        return ret

    # -- update_slots -----------------------------------------------------------------------------

    def _update_slots(self) -> None:
        """server-context.cpp: update_slots / pre_decode (2774-3620). One batch of at most
        ``n_batch`` tokens is shared by all slots: the generating slots' sampled tokens
        first (3077-3080), then prompt tokens slot by slot in slot order until the batch is
        full; then one decode of it (``llama_process``, 3663; the draft context's
        ``common_speculative_process``, 3728). A slot whose task just started does its prompt
        start and its first batch in the same pass (no task is processed in between: only the
        queue loop takes tasks)."""
        for slot in self.slots:
            if slot.state == SlotState.GENERATING:
                context_shift_if_full(self, slot)
        generating = [s for s in self.slots if s.state == SlotState.GENERATING]
        batch: list[tuple[int, Tokens]] = [(s.id, (s.next_token,)) for s in generating]
        room = self.cfg.n_batch - len(generating)
        # batch.slot_batched: set by the generating slots' loop (server-context.cpp:2969-2971 at
        # 0c1e570) and at the end of each prompt slot's callback (3619-3621; 4066 of b11549,
        # 3909 of b11434), which a slot whose callback threw never reaches
        batched = bool(generating)
        for slot in self.slots:
            if room <= 0:
                break  # "batch is full, skip remaining slots"
            if slot.stalled:
                continue  # (see Slot.stalled: the C++ repeats the same empty pass forever)
            if slot.state == SlotState.STARTED:
                prompt_start(self, slot)
            if slot.state == SlotState.PROCESSING_PROMPT:
                room -= prompt_batch(self, slot, room, batch)
                # (iterate released a slot whose callback threw: it has no task any more)
                batched = batched or slot.task is not None
        if batch and not batched:
            # Only slots whose callback threw (a std::bad_alloc out of create_checkpoint, which
            # iterate catches, 2711-2721) put tokens into the batch: pre_decode returns and the
            # next line aborts (2826 at 0c1e570, 3197 of b11549, 3050 of b11434). Seen on every
            # design's build with an allocation fault (docs/FINDINGS.md, F6).
            raise Abort("update_slots", "GGML_ASSERT(batch.slot_batched || batch.size() == 0) failed")
        # each sequence's first position in the batch: a generating slot's next one, a
        # prompt's first new one (prompt_batch has put its tokens into the slot already)
        starts = [s.prompt.n_tokens for s in generating]
        starts += [self.slots[seq].prompt.n_tokens - len(new) for seq, new in batch[len(generating) :]]
        for ctx in self.contexts():
            refused = ctx.refused_start(batch, starts)
            if refused is not None:
                self._decode_refused(ctx, *refused)
                return
            ctx.decode(batch, starts)
        # The end of ``decode`` (server-context.cpp:4243-4265 of b11549): a parent whose prompt is
        # in the batch copies its state to its n_cmpl children still waiting; a parent of
        # shared-prefix children has started them all at the shared prefix, or the assert fails.
        for slot in self.slots:
            task = slot.task
            if slot.state == SlotState.DONE_PROMPT and task is not None and task.n_tokens_shared > 0:
                waiting = [o.id for o in self.slots if o.state == SlotState.WAIT_OTHER and o.task is not None
                           and o.task.id_parent == task.id]
                if waiting:
                    raise Abort("server_context::decode", "GGML_ASSERT(slot.task->n_tokens_shared == 0) failed")
        # After the decode, in slot order (server-context.cpp:3800-3870): a slot whose prompt
        # ended in this batch samples its first token, a generating slot its next; either may
        # be released. The order of the releases sets t_last_used (the next LRU pick) and which
        # deferred task is re-queued first (docs/FINDINGS.md, M7).
        for slot in self.slots:
            if slot.state == SlotState.DONE_PROMPT:
                finish_prompt(self, slot)
            elif slot in generating and slot.state == SlotState.GENERATING:
                generate_step(self, slot)
        self._process_requeued()
