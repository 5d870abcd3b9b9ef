"""The server: slot selection, task launch, idle-slot caching and the update loop.

``Server(config, variant)`` is the model's public API. Each public method is one server
action (a request arriving, one ``update_slots`` iteration, a ``/slots`` action, a fault, a
sleep/wake) and counts as one *operation*: the properties are judged after each operation,
over the state and the events the operation emitted. A ``GGML_ABORT`` or an uncaught C++
exception inside an operation becomes a recorded crash (``Server.crash``); after a crash the
process is gone and later operations do nothing.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from pcspec.model import policy
from pcspec.model.cache import PromptCache, lcp, unique_bytes
from pcspec.model.config import Config
from pcspec.model.context import Context
from pcspec.model.heap import Abort, Heap
from pcspec.model.memory import Tokens
from pcspec.model.processing import generate_step, prompt_batch, prompt_start
from pcspec.model.slot import Slot, SlotState, Task, TaskType
from pcspec.model.variants import Variant


@dataclass(frozen=True)
class Crash:
    op: int
    where: str
    message: str


class Server:
    """server_context: one llama-server process."""

    def __init__(self, cfg: Config, variant: Variant) -> None:
        self.cfg = cfg.validate()
        self.variant = variant
        self.heap = Heap(host_ram=cfg.host_ram)
        self.ctx_tgt = Context.target(cfg)
        self.ctx_dft = Context.draft(cfg) if cfg.has_draft else None
        self.slots = [Slot(i) for i in range(cfg.n_slots)]
        self.cache = PromptCache(cfg, variant, self.heap) if cfg.cache_enabled else None
        self.deferred: deque[Task] = deque()
        self.clock = 0
        self.next_task_id = 0
        self.crash: Crash | None = None
        self.files: dict[str, bytes] = {}  # the slot-save directory
        self.written: dict[str, bytes] = {}  # what the server itself last wrote there
        self.written_meta: dict[str, tuple[object, ...]] = {}
        self.last_result: dict[str, object] = {}

    # -- helpers ---------------------------------------------------------------------------

    def contexts(self) -> list[Context]:
        return [self.ctx_tgt] if self.ctx_dft is None else [self.ctx_tgt, self.ctx_dft]

    def cache_fingerprint(self) -> tuple[object, ...]:
        """What RB-2 compares around a save: the limit and which entries, with which data
        buffers, in which order (changes inside an entry's buffers are IMM-2's business)."""
        if self.cache is None:
            return ()
        return (
            self.cache.limit_size,
            tuple(
                (e.id, e.main.id if e.main else 0, e.drft.id if e.drft else 0, len(e.prompt.checkpoints))
                for e in self.cache.entries
            ),
        )

    @property
    def idle(self) -> bool:
        return not self.deferred and not any(s.is_processing for s in self.slots)

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
            self.heap.emit("ignored_after_crash", op_name=name)
            return False
        self.heap.emit("op", name=name, **args)
        return True

    def _crashed(self, exc: Abort) -> None:
        self.crash = Crash(self.heap.op, exc.where, exc.message)
        self.heap.emit("crash", where=exc.where, message=exc.message)

    # -- public operations ----------------------------------------------------------------------------

    def request(
        self,
        tokens: Tokens,
        spans: tuple[int, ...] = (),
        n_predict: int = 4,
        id_slot: int = -1,
        cache_prompt: bool = True,
        type: TaskType = TaskType.COMPLETION,
    ) -> int:
        """A task arrives (server-context.cpp: process_single_task). Returns the task id."""
        tid = self.next_task_id
        self.next_task_id += 1
        if not self._begin("request", task=tid, n_tokens=len(tokens), id_slot=id_slot):
            return tid
        task = Task(tid, tuple(tokens), tuple(spans), n_predict, id_slot, cache_prompt, type)
        try:
            self._process_single_task(task)
        except Abort as exc:
            self._crashed(exc)
        return tid

    def step(self) -> None:
        """One ``update_slots`` iteration: every busy slot advances one batch or one token;
        then deferred tasks are retried."""
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
        for slot in self.slots:
            slot.prompt_clear(self)
            slot.t_last_used = -1
        if self.cache is not None:
            for e in list(self.cache.entries):
                self.cache.evict(e, "wake")
            self.cache = PromptCache(self.cfg, self.variant, self.heap)

    def slot_action(self, action: str, id_slot: int, filename: str = "") -> None:
        """``POST /slots/{id}?action=save|restore|erase``."""
        from pcspec.model import slot_files

        if not self._begin("slot_" + action, id_slot=id_slot, filename=filename):
            return
        try:
            slot_files.handle(self, action, id_slot, filename)
        except Abort as exc:
            self._crashed(exc)

    def corrupt_file(self, filename: str, offset: int, data: bytes, truncate: int | None = None) -> None:
        """The fault model's hand on the disk: overwrite bytes of a slot file, or cut it."""
        if not self._begin("corrupt_file", filename=filename):
            return
        raw = self.files.get(filename)
        if raw is None:
            self.heap.emit("file_missing", filename=filename)
            return
        if truncate is not None:
            raw = raw[:truncate]
        else:
            buf = bytearray(raw)
            for i, b in enumerate(data):
                if offset + i < len(buf):
                    buf[offset + i] = b
            raw = bytes(buf)
        self.files[filename] = raw
        self.heap.emit("file_corrupted", filename=filename, size=len(raw))

    # -- process_single_task ------------------------------------------------------------------------

    def _process_single_task(self, task: Task) -> None:
        slot = self.get_available_slot(task)
        if slot is None or slot.is_processing:
            self.heap.emit("deferred", task=task.id, slot=None if slot is None else slot.id)
            self.deferred.append(task)
            return
        self.launch_slot_with_task(slot, task)
        if self.cfg.idle_caching and self.cache is not None:
            # server-context.cpp: process_single_task, idle-slot caching after a launch.
            for other in self.slots:
                if other.is_processing:
                    continue
                self.heap.emit("idle_save", slot=other.id)
                if other.prompt_save(self):
                    self.cache.update()
                if self.cfg.kv_unified:
                    other.prompt_clear(self)

    def launch_slot_with_task(self, slot: Slot, task: Task) -> None:
        """server-context.cpp: launch_slot_with_task."""
        slot.task = task
        slot.state = SlotState.STARTED
        slot.n_gen = 0
        slot.truncated = False
        slot.restored = None
        self.heap.emit("launch", slot=slot.id, task=task.id)

    def get_available_slot(self, task: Task) -> Slot | None:
        """server-context.cpp: get_available_slot (pinned, LCP similarity, LRU) and the cache
        update it triggers (behaviour notes 2.4)."""
        cfg = self.cfg
        ret: Slot | None = None
        how = "none"
        update_cache = False
        if task.id_slot != -1:
            ret = self.slots[task.id_slot % cfg.n_slots]
            how = "pinned"
        if cfg.slot_prompt_similarity != 0:
            best: Slot | None = None
            f_sim_best = 0.0
            candidates = self.slots if task.id_slot == -1 else [ret]
            for s in candidates:
                assert s is not None
                if s.is_processing or not s.prompt.tokens:
                    continue
                f_sim = lcp(s.prompt.tokens, task.tokens) / task.n_tokens if task.n_tokens else 0.0
                if f_sim > f_sim_best and f_sim > cfg.slot_prompt_similarity:
                    best, f_sim_best = s, f_sim
            if best is not None:
                ret, how = best, "lcp"
            if ret is not None:
                n_slot = ret.prompt.n_tokens
                f_keep = f_sim_best * task.n_tokens / n_slot if n_slot else math.nan
                if math.isnan(f_keep) and self.variant.consult_cache_for_empty_pinned:
                    f_keep = 0.0  # fixed: an empty pinned slot consults the cache
                update_cache = policy.update_cache_on_lcp(f_keep)
        if ret is None:
            idle = [s for s in self.slots if not s.is_processing]
            if idle:
                ret = idle[0]
                for s in idle:
                    if s.t_last_used <= ret.t_last_used:  # `<=`: ties go to the last slot
                        ret = s
                how = "lru"
                update_cache = True
        self.heap.emit("select", task=task.id, slot=None if ret is None else ret.id, how=how, update_cache=update_cache)
        if ret is not None and ret.is_processing and not self.variant.cache_update_busy_slot:
            update_cache = False  # fixed: a busy slot is left alone; the task waits for it
        if ret is not None and update_cache and self.cache is not None and task.type == TaskType.COMPLETION:
            ret.prompt_save(self)
            if not ret.prompt_load(self, task.tokens):
                ret.prompt_clear(self)
            self.cache.update()
        return ret

    # -- update_slots -----------------------------------------------------------------------------

    def _update_slots(self) -> None:
        for slot in self.slots:
            if slot.state == SlotState.STARTED:
                prompt_start(self, slot)
            elif slot.state == SlotState.PROCESSING_PROMPT:
                prompt_batch(self, slot)
            elif slot.state == SlotState.GENERATING:
                generate_step(self, slot)
        n = len(self.deferred)
        for _ in range(n):
            task = self.deferred.popleft()
            self._process_single_task(task)
