"""A server slot and its task: ``server_slot`` (tools/server/server-context.cpp).

The slot's own operations on the cache live here (``prompt_save``, ``prompt_load``,
``prompt_clear``, ``release``); prompt processing and checkpoints are in
``pcspec.model.processing``; slot selection and the task loop in ``pcspec.model.server``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from pcspec.model import events as ev
from pcspec.model.checkpoint import Checkpoint, Prompt, drop_all, hold
from pcspec.model.memory import FULL, Tokens

if TYPE_CHECKING:
    from pcspec.model.server import Server


class SlotState(StrEnum):
    IDLE = "idle"
    STARTED = "started"
    PROCESSING_PROMPT = "processing_prompt"
    DONE_PROMPT = "done_prompt"  # within one update_slots: the prompt is in the batch, not yet sampled
    GENERATING = "generating"
    # SLOT_STATE_WAIT_OTHER (server-context.cpp:128 of b11434 and b11549): a child task launched
    # with its parent waits for the parent's prompt to reach the shared prefix (1955-1957 of
    # b11549), which copies it over (``Slot.copy_prompt_to``) and starts the child (3833-3849)
    WAIT_OTHER = "wait_other"


class TaskType(StrEnum):
    """server_task_type (tools/server/server-task.h). Only a completion makes checkpoints
    (``do_checkpoint``, server-context.cpp:3868 of b11549, 3444 at 0c1e570) or has the cache
    saved and loaded when it selects a slot (``update_cache``, 1773 of b11549, 1621 at 0c1e570).
    The model runs the others as completions but for those two tests, and a decision's release."""

    COMPLETION = "completion"
    INFILL = "infill"
    EMBEDDING = "embedding"
    RERANK = "rerank"
    # SERVER_TASK_TYPE_DECISION (server-task.h:19 of b11434 and b11549): a question with
    # options answered from one batch (server_task::decision, server-task.h:178-202 of b11549).
    # Its prompt reuses the slot's prefix (it is not one of the stateless embedding and rerank
    # tasks, server-context.cpp:3587-3589 of b11549) and restores checkpoints like a completion's,
    # makes none, and the slot is released right after the prompt's decode with nothing sampled
    # (``send_decision``, 4321-4326 of b11549). The idle-slot save has no task-type test (2779-2793
    # of b11549), so the prompt a decision leaves in a slot is saved like any other. The model's
    # decisions read the last prompt token only (``decision.labels``: ``pos_first()`` is -1), so
    # the fill's break before the positions a decision reads (3950-3953 of b11549) never binds.
    DECISION = "decision"


@dataclass(frozen=True)
class Task:
    """server_task: the fields the cache and checkpoints depend on."""

    id: int
    tokens: Tokens
    spans: tuple[int, ...] = ()  # user-message start positions (message_spans)
    n_predict: int = 4
    id_slot: int = -1
    cache_prompt: bool = True
    type: TaskType = TaskType.COMPLETION
    # Shared-prefix child tasks (server-task.h:147-153 of b11434 and b11549), which only
    # ``server_decision_group_tasks`` makes (``policy.decision_groups``): a child names its
    # parent (``id_parent``); the parent carries its children until their launch and the number
    # of leading tokens they share with it (``n_tokens_shared``, 0: not a parent of such children)
    id_parent: int = -1
    children: tuple[Task, ...] = ()
    n_tokens_shared: int = 0

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    @property
    def is_parent(self) -> bool:
        """server_task::is_parent (server-task.h:291-293 of b11549): it carries child tasks."""
        return bool(self.children)

    @property
    def is_child(self) -> bool:
        """server_task::is_child (server-task.h:295-297 of b11549)."""
        return self.id_parent != -1

    @property
    def last_user_pos(self) -> int:
        """message_spans::last_user_message_pos (-1 without spans)."""
        return self.spans[-1] if self.spans else -1


@dataclass(eq=False)
class Slot:
    id: int
    prompt: Prompt = field(default_factory=Prompt)
    state: SlotState = SlotState.IDLE
    task: Task | None = None
    t_last_used: int = -1
    n_gen: int = 0
    next_token: int = -1
    restored: Checkpoint | None = None  # the checkpoint this task restored at prompt start
    n_prompt_cached: int = 0
    truncated: bool = False
    # The slot holds more tokens than its task's prompt while processing that prompt (a
    # cache load onto the busy pinned slot put them there): every update_slots pass adds no
    # token, never decodes and never finishes -- the livelock of docs/FINDINGS.md, F1.
    # The model runs that pass once and marks the slot; later passes would repeat it
    # exactly (the same checkpoint superseded by an identical one), so they are skipped.
    stalled: bool = False

    @property
    def is_processing(self) -> bool:
        return self.state != SlotState.IDLE

    @property
    def task_id(self) -> int:
        return self.task.id if self.task is not None else -1

    # -- server_slot::prompt_save -----------------------------------------------------------

    def prompt_save(self, srv: Server) -> bool:
        """server-context.cpp: server_slot::prompt_save. The slot keeps its tokens, memory and
        checkpoints; the cache gets a copy, as the design saves (``Design.prompt_save``)."""
        cache = srv.cache
        assert cache is not None
        if not self.prompt.tokens:
            return False
        heap = srv.heap
        heap.emit(ev.SaveBegin(slot=self.id, n_tokens=self.prompt.n_tokens))
        size_tgt = srv.ctx_tgt.get_size(self.id, FULL)
        size_dft = srv.ctx_dft.get_size(self.id, FULL) if srv.ctx_dft is not None else 0
        ok = srv.design.prompt_save(srv, self, size_tgt, size_dft)
        heap.emit(ev.SaveEnd(slot=self.id, ok=ok))  # what the save built is published now
        return ok

    # -- server_slot::prompt_load / prompt_clear / release --------------------------------------

    def prompt_load(self, srv: Server, tokens: Tokens) -> bool:
        """server-context.cpp: server_slot::prompt_load."""
        assert srv.cache is not None
        ok = srv.cache.load(self.prompt, tokens, srv.ctx_tgt, srv.ctx_dft, self.id)
        if not ok:
            srv.heap.emit(ev.PromptLoadFailed(slot=self.id))
        return ok

    def prompt_clear(self, srv: Server) -> None:
        """server-context.cpp: server_slot::prompt_clear: ``mem.seq_rm(id, -1, -1)`` on both
        contexts, then ``prompt.clear()`` (tokens and, since #25649, checkpoints)."""
        lost = self.restored if self.restored in self.prompt.checkpoints else None
        srv.heap.emit(ev.PromptClear(
            slot=self.id,
            n_tokens=self.prompt.n_tokens,
            task=self.task_id,
            restored_by_task=None if lost is None else lost.id,
        ))
        for ctx in srv.contexts():
            ctx.seq_rm(self.id, -1)
        self.prompt.tokens = ()
        drop_all(srv.heap, self.prompt)
        self.restored = None

    def copy_prompt_to(self, srv: Server, other: Slot) -> None:
        """server_slot::copy_prompt_to (server-context.cpp:761-766 of b11434 and b11549): the
        other slot continues from this one's tokens: ``mem.seq_rm(other, -1, -1)`` and
        ``mem.seq_cp(self, other, -1, -1)`` on both contexts (``common_memory``, common/common.cpp:
        1635-1647 of b11549), then ``other.prompt = prompt.clone()`` (server-task.h:626-631 of
        b11549): the tokens and the checkpoint list copied by value, as the design copies a
        list (``Design.copy_checkpoints``: a deep copy allocates every payload, ``shared_payload`` takes a
        reference on the payloads, ``shared_object`` on each checkpoint). ``clone()`` builds the
        copy before the assignment destroys the other's old list, so a ``std::bad_alloc`` of a
        deep copy (fault site ``ckpt.alloc``) leaves the other slot's old prompt over the memory
        just copied; the caller's ``iterate`` catches it (``processing.prompt_batch``)."""
        heap = srv.heap
        for ctx in srv.contexts():
            ctx.seq_rm(other.id, -1)
            ctx.seq_cp(self.id, other.id)
        copies = srv.design.copy_checkpoints(heap, self.prompt.checkpoints, "ckpt.alloc")
        drop_all(heap, other.prompt)
        other.prompt.tokens = self.prompt.tokens
        for ck in copies:
            hold(heap, other.prompt, ck)
        heap.emit(ev.CopyPrompt(slot=self.id, other=other.id, task=self.task_id, n_tokens=self.prompt.n_tokens,
                                ckpts=tuple(c.id for c in copies)))

    def release(self, srv: Server, error: str | None = None, sampled: bool = True) -> None:
        """server-context.cpp:514-534 (server_slot::release): the slot keeps its tokens and
        checkpoints; ``callback_on_release`` re-queues one deferred task. ``error`` is the
        message ``send_error`` answered the task with, if it failed; ``sampled`` False: the
        task sampled no token (a decision). A child task's slot keeps nothing: "do not keep
        context of the child slots" (``prompt_clear``, 591-594 of b11434 and b11549), so no
        idle-slot save ever sees a child's prompt. A failed task of a group of shared-prefix
        tasks has the others cancelled (``Server.cancel_siblings``)."""
        # token: the last one sampled (server-context.cpp:3837, process_token 1817-1821), sent in
        # the reply and never decoded; None after an error and when nothing was sampled (a decision)
        srv.heap.emit(ev.Release(slot=self.id, task=self.task_id, n_tokens=self.prompt.n_tokens, error=error,
                      token=self.next_token if error is None and sampled else None))
        task = self.task
        if task is not None and task.is_child:
            self.prompt_clear(srv)
        if task is not None and error is not None and (task.is_parent or task.is_child):
            srv.cancel_siblings(task)
        srv.clock += 1
        self.t_last_used = srv.clock
        self.state = SlotState.IDLE
        self.task = None
        self.restored = None
        self.stalled = False
        srv.pop_deferred_task(self.id)
