"""A design of llama-server's prompt cache and context checkpoints: its extension points.

Every decision the C++ makes about checkpoints and the prompt cache is a method (or, for a
choice among the C++'s own alternatives, an attribute) of ``Design``, named after its C++
counterpart, with its ``file:line`` (of the October tree 0c1e570 unless another is named). The
defaults are the upstream code before #30137 (the ``baseline`` design). A design is a subclass
that overrides some points, in plain Python::

    class LargestFirst(Fixed):
        def make_room(self, sizes, new_size, limit):
            ...

The model (``pcspec.model.server``) calls a design at these points only; it reads nothing else
of it. Two kinds:

* *decision points* are pure functions over plain numbers (sizes, positions, counts). The model
  calls them with its state's numbers, the log checker with a log's, so a design is judged on a
  real log by its own decisions;
* *effect points* take model objects and act through the model's own operations (the heap, the
  cache's ``alloc``, ``fill``, ``evict``, ``processing.erase_checkpoint``), which emit the events.

Which rule set a design runs under (the facts of an upstream build: slot-file version and
appendix, the tree's invalidation rule, ...) is ``rules`` (``pcspec.model.rulesets``): a class
attribute a design sets like any point, or the rule set an instance is made with.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from pcspec.model import events as ev
from pcspec.model import policy, processing
from pcspec.model.cache import AllocScope, lcp
from pcspec.model.checkpoint import Sharing, copy_checkpoints, hold
from pcspec.model.heap import Abort
from pcspec.model.rulesets import SPEC, RuleSet

if TYPE_CHECKING:
    from pcspec.model.cache import CacheEntry, PromptCache
    from pcspec.model.checkpoint import Checkpoint
    from pcspec.model.context import Context
    from pcspec.model.heap import Buffer, Heap
    from pcspec.model.server import Server
    from pcspec.model.slot import Slot, Task


@dataclass(frozen=True)
class SlotChoice:
    """What ``get_available_slot`` returns: the slot (None: none free), how it was chosen
    (``pinned``, ``lcp``, ``lru``, ``none``), and whether the cache is saved and loaded for it."""

    slot: Slot | None
    how: str
    update_cache: bool


@dataclass(frozen=True)
class Resumed:
    """Where a prompt start resumes: the checkpoint restored (None: none), why the prompt is
    re-processed from 0 (None: it is not), and the ``pos_next`` and ``n_past`` it resumes at."""

    restored: Checkpoint | None
    reprocess: str | None
    pos_next: int
    n_past: int


class Design:
    """The upstream code before #30137 (the ``baseline`` design), point by point."""

    # The design's name (a subclass that sets none is named after its class) and its line in
    # the verdict matrix (by default the first line of the class's docstring).
    name: str = "baseline"
    summary: str = "the upstream design before #30137: deep-copied checkpoints, zero-filled buffers, unvalidated save"
    # The rule set the design runs under (an instance may be made with another: ``Design(rules)``).
    rules: RuleSet = SPEC
    # A mutant (pcspec.properties.mutants): a design broken at one point, planted in ``base``.
    mutant: ClassVar[bool] = False
    base: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = cls.__name__
        if "summary" not in cls.__dict__:
            doc = (cls.__doc__ or "").strip()
            cls.summary = doc.splitlines()[0] if doc else cls.name

    def __init__(self, rules: RuleSet | None = None, name: str | None = None) -> None:
        if rules is not None:
            self.rules = rules
        if name is not None:  # (``DESIGN@TREE``: a design under a tree's rule set)
            self.name = name

    def __repr__(self) -> str:
        return f"<design {self.name} (rules {self.rules.name})>"

    @property
    def origin(self) -> str | None:
        """``MODULE:CLASS`` of a design of one's own (None for pcspec's own and for a class no
        import can find): a trace records it, so that it replays under the design that made it."""
        cls = type(self)
        if cls.__module__.startswith("pcspec.") or cls.__module__ == "__main__" or "<" in cls.__qualname__:
            return None
        return f"{cls.__module__}:{cls.__qualname__}"

    # == buffers and sharing ===================================================================

    # std::vector<uint8_t>::resize zero-fills every state buffer it allocates
    # (server-task.cpp:1745-1750, common/common.cpp:2301-2321); #30137 allocates without.
    zero_init: ClassVar[bool] = True
    # The element type of the checkpoint lists (common/common.h: common_prompt_checkpoint;
    # server-task.h:592-626): how a list is copied when a prompt is saved, loaded or cloned.
    sharing: ClassVar[Sharing] = Sharing.DEEP_COPY

    def copy_checkpoints(self, heap: Heap, ckpts: list[Checkpoint], site: str | None) -> list[Checkpoint]:
        """EFFECT. The copy of a checkpoint list (``server_prompt`` copied into a cache entry,
        server-task.cpp:1760-1775; ``prompt.clone()``, server-task.h:626-631 of b11549): by
        ``sharing``. May raise ``BadAlloc`` (a deep copy allocates)."""
        return copy_checkpoints(heap, ckpts, self.sharing, self.zero_init, site)

    # == slot selection and the cache lookup ===================================================

    def get_available_slot(self, srv: Server, task: Task) -> SlotChoice:
        """EFFECT (reads the slots). server-context.cpp:1528-1641: the pinned slot (its id
        wrapped by ``get_slot_by_id``, 1501-1512), the LCP-similarity scan (which compares the
        raw id, 1546), else the least recently used idle slot; whether the cache is updated for
        it is ``update_cache_on_select``."""
        cfg = srv.cfg
        ret: Slot | None = None
        how = "none"
        update_cache = False
        if task.id_slot != -1:
            ret = srv.slots[task.id_slot % cfg.n_slots]
            how = "pinned"
        if cfg.slot_prompt_similarity != 0:
            best: Slot | None = None
            f_sim_best = 0.0
            for s in srv.slots:
                # For an id beyond the slot count no slot is scanned, f_keep is 0 and the cache
                # is updated whenever the wrapped slot holds tokens.
                if task.id_slot != -1 and s.id != task.id_slot:
                    continue
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
                update_cache = self.update_cache_on_select(ret, task, f_keep)
        elif ret is not None:
            update_cache = self.update_cache_on_select(ret, task, None)
        if ret is None:
            idle = [s for s in srv.slots if not s.is_processing]
            if idle:
                ret = idle[0]
                for s in idle:
                    if s.t_last_used <= ret.t_last_used:  # `<=`: ties go to the last slot
                        ret = s
                how = "lru"
                update_cache = True
        return SlotChoice(ret, how, update_cache)

    def update_cache_on_select(self, slot: Slot, task: Task, f_keep: float | None) -> bool:
        """DECISION. Whether a pinned or similar slot also saves and loads the cache
        (server-context.cpp:1615-1636): when more than half its context is about to be lost
        (``f_keep < 0.5``). ``f_keep`` is NaN for an empty slot (0 / 0: every comparison false,
        so the cache is never consulted) and None where the C++ computes none (a pinned task
        without the similarity pass, ``-sps 0``: no update, 1528-1540)."""
        return f_keep is not None and policy.update_cache_on_lcp(f_keep)

    # A task pinned to a busy slot still runs the cache save and load on that slot before it is
    # deferred (server-context.cpp:1528-1641; docs/FINDINGS.md, F1).
    cache_update_busy_slot: ClassVar[bool] = True

    def load_baseline(self, lcp0: int, n_slot: int, n_new: int) -> tuple[float, float]:
        """DECISION. The ``(f_keep, f_sim)`` a cache entry must beat (server-task.cpp:1794-1797):
        the slot's own, ``f_keep = -1`` for an empty slot."""
        return policy.load_baseline(lcp0, n_slot, n_new)

    def load_select(self, base: tuple[float, float], candidates: Sequence[tuple[float, float]]) -> int | None:
        """DECISION. Which entry ``server_prompt_cache::load`` takes (server-task.cpp:1798-1830),
        by index, front (oldest) first, given each entry's ``(f_keep, f_sim)``: not below 0.25
        and strictly better than the running best on both."""
        return policy.load_select(base[0], base[1], candidates)

    def load_entry(self, cache: PromptCache, entry: CacheEntry, ctx_tgt: Context, ctx_dft: Context | None,
                   seq: int) -> bool:
        """EFFECT. The chosen entry's state into the slot's sequences (server-task.cpp:1832-1860):
        the target's, then ``main.clear()``, then the draft's (an entry with draft data and no
        draft context aborts). False on a failed load; the entry stays in the cache, the target
        part of it already cleared."""
        if not cache.restore(ctx_tgt, seq, entry.main, "load.write.tgt"):
            cache.heap.emit(ev.LoadFailed(entry=entry.id, ctx="tgt"))
            return False
        cache.heap.release(entry.main)
        entry.main = None
        if entry.drft is not None:
            if ctx_dft is None:
                raise Abort("server_prompt_cache::load", "GGML_ASSERT(ctx_dft) failed")
            if not cache.restore(ctx_dft, seq, entry.drft, "load.write.dft"):
                cache.heap.emit(ev.LoadFailed(entry=entry.id, ctx="dft"))
                return False
            cache.heap.release(entry.drft)
            entry.drft = None
        return True

    def on_contained(self, cache: PromptCache, entry: CacheEntry) -> None:
        """EFFECT. ``alloc`` step 1 found the prompt inside ``entry``: the save is skipped
        (server-task.cpp:1716-1722). The C++ leaves the cache as it is; a design that counts this
        as a use may move the entry to the back (``cache.refresh``)."""

    # == the save and its publication ===========================================================

    def prompt_save(self, srv: Server, slot: Slot, size_tgt: int, size_dft: int) -> bool:
        """EFFECT. server-context.cpp:258-282 (``server_slot::prompt_save``): ``alloc`` (which
        publishes the entry), then the state reads into it, unchecked."""
        cache = srv.cache
        assert cache is not None
        entry = cache.alloc(slot.prompt, size_tgt, size_dft)
        if entry is None:
            return False
        cache.fill(entry, srv.ctx_tgt, srv.ctx_dft, slot.id, size_tgt, size_dft)
        return True

    # What ``alloc``'s ``try`` covers (server-task.cpp:1740-1760).
    alloc_scope: ClassVar[AllocScope] = AllocScope.RESIZE

    # == accounting ==============================================================================

    def entry_sizes(self, cache: PromptCache, new_bufs: Sequence[Buffer] = ()) -> list[int]:
        """EFFECT (reads the cache). Each entry's size as the cache counts it, front first
        (``server_prompt_cache_state::size``, server-task.h:592-626): its data and every
        checkpoint it holds, a checkpoint shared with other holders counted in each."""
        return [e.per_holder_size() for e in cache.entries]

    def candidate_size(self, cache: PromptCache, data: int, ckpts: list[Checkpoint]) -> tuple[int, list[Buffer]]:
        """EFFECT (reads the cache). The new entry's size as counted (server-task.cpp:1726), and
        the checkpoint buffers it would share with the slot (none for a deep copy)."""
        shared = [] if self.sharing == Sharing.DEEP_COPY else [b for ck in ckpts for b in ck.buffers()]
        return data + sum(ck.size() for ck in ckpts), shared

    def release_evicted(self, cache: PromptCache, entry: CacheEntry) -> None:
        """EFFECT. What an evicted entry lets go of (``states.erase``, ``pop_front``): its
        checkpoints and its data, a reference each."""
        cache.discard(entry)

    # == making room and the limits ==============================================================

    def is_oversize(self, new_size: int, sizes: Sequence[int], limit: int) -> bool:
        """DECISION. ``alloc`` step 3 (server-task.cpp:1728-1733): an entry larger than the whole
        byte limit is skipped; ``sizes`` are the entries' as counted (unused here)."""
        return policy.is_oversize(new_size, limit)

    def make_room(self, sizes: Sequence[int], new_size: int, limit: int) -> list[int]:
        """DECISION. ``alloc`` step 5 (server-task.cpp:1738-1740; #25070): the entries evicted so
        that the new one fits, as indices into the cache front (oldest) first, in the order they
        go: the oldest first while the cache and the new entry exceed the limit. ``sizes`` are
        the entries' as the cache counts them (``entry_sizes``). The model asks again after the
        evictions, over the sizes as they are then, until the answer is empty (the C++'s
        ``while`` loop): a design may answer one entry at a time."""
        return list(range(policy.make_room(sizes, new_size, limit)))

    def update_evictions(self, sizes: Sequence[int], n_tokens: Sequence[int], limit_size: int,
                         limit_tokens: int) -> list[tuple[int, str]]:
        """DECISION. ``server_prompt_cache::update`` (server-task.cpp:1870-1901): the entries
        evicted, as indices front first and each with its reason (``limit_bytes``, then
        ``limit_tokens``), in the order they go: the oldest while the bytes exceed the limit,
        then while the tokens exceed the estimated token limit."""
        n_bytes, n_tok = policy.update_evictions(sizes, n_tokens, limit_size, limit_tokens)
        return [(i, "limit_bytes") for i in range(n_bytes)] + [(n_bytes + i, "limit_tokens") for i in range(n_tok)]

    def limit_after_bad_alloc(self, size: int, limit: int) -> int | None:
        """DECISION. The byte limit after a ``std::bad_alloc`` in ``alloc`` (server-task.cpp:
        1776-1785): 40 % of the cache's size, for good. None: the limit stays."""
        return policy.limit_after_bad_alloc(size)

    # == checkpoints: where a fill breaks, creation, the too-close sweep, the cap ===============

    def breaks_at_user_message(self, pos: int, last_user: int, last_n_tokens: int | None, min_step: int) -> bool:
        """DECISION. Whether the batch fill stops at a user-message start ``pos`` so that a
        checkpoint is made there (server-context.cpp:3530-3538): the last user message, no
        checkpoint yet (``last_n_tokens`` None), or more than ``--checkpoint-min-step`` after
        the newest."""
        return pos == last_user or last_n_tokens is None or pos > last_n_tokens + min_step

    def tail_breaks(self, n_batch: int, n_ubatch: int) -> tuple[int, ...]:
        """DECISION. How many prompt tokens before the end the fill stops, so that checkpoints
        are made there (#20288, server-context.cpp:3540-3559): ``4 + n_ubatch`` and 4."""
        return (min(n_batch, 4 + n_ubatch), min(n_batch, 4))

    def checkpoint_pos_min(self, srv: Server, slot: Slot, pos_min: int) -> int:
        """EFFECT (reads the memory). The ``pos_min`` a new checkpoint records
        (server-context.cpp:2337-2342): the target memory's."""
        return pos_min

    def kept_checkpoint(self, slot: Slot) -> Checkpoint | None:
        """EFFECT (reads the slot). The checkpoint the slot's task keeps whatever the sweep and
        the cap decide, and does not re-create at its ``n_tokens``: none in the C++."""
        return None

    def sweep_too_close(self, ckpts: Sequence[tuple[int, int]], id_task: int, min_step: int, cap: int) -> list[int]:
        """DECISION. The too-close sweep of ``create_checkpoint`` (server-context.cpp:2293-2310;
        #30137's merged diff: only while the list is full): indices (ascending) of
        ``(n_tokens, id_task)`` erased."""
        return policy.sweep_too_close(ckpts, id_task, min_step, cap)

    def cap_evictions(self, n_ckpts: int, cap: int) -> int:
        """DECISION. How many checkpoints ``create_checkpoint`` erases from the front to make
        room for one more (server-context.cpp:2311-2319: ``while size >= n_ctx_checkpoints``)."""
        return policy.cap_evictions(n_ckpts, cap)

    def reuse_payload(self, victim: Checkpoint) -> bool:
        """EFFECT (reads the checkpoint). Whether the new checkpoint's target payload reuses the
        buffer of ``victim``, erased by the cap (server-context.cpp:2333-2342 allocates a new
        one every time)."""
        return False

    def checkpoint_create_failed(self, srv: Server, slot: Slot, ck: Checkpoint, error: str, short: bool) -> str | None:
        """EFFECT. A checkpoint's snapshot failed (``short``: the state read came up short, else
        a ``std::bad_alloc``; ``ck`` holds what was filled). The C++ (server-context.cpp:
        2333-2342, common/common.cpp:2301-2321): a short read is a ``GGML_ABORT``; a
        ``bad_alloc`` escapes to ``iterate``, which answers the task with the error returned
        here and releases the slot, and the checkpoint ``emplace_back`` appended first stays in
        the list with the parts filled before the throw."""
        if short:
            raise Abort("common_prompt_checkpoint::update", error)
        srv.heap.emit(ev.CkptCreateFailed(slot=slot.id, task=slot.task_id, reason=error))
        hold(srv.heap, slot.prompt, ck)
        return f"got exception: std::bad_alloc ({error})"

    # == the prompt start: threshold, restore choice, resume, invalidation ======================

    def pos_min_threshold(self, pos_next: int, n_swa: int, has_new_tokens: bool) -> int:
        """DECISION. The largest useful ``pos_min`` (server-context.cpp:3275-3278, #24110): one
        lower for a prompt without new tokens."""
        return policy.pos_min_threshold(pos_next, n_swa, has_new_tokens)

    def restore_choice(self, ckpts: Sequence[tuple[int, int, int]], pos_next: int, thold: int, n_prefix: int,
                       n_prompt: int, n_swa: int) -> int | None:
        """DECISION. The checkpoint restored at a prompt start (server-context.cpp:3330-3346), by
        index into ``(pos_min, pos_max, n_tokens)``: newest first, the first with ``pos_max <=
        pos_next`` and ``pos_min < thold`` (or ``pos_min == 0``)."""
        return policy.restore_choice([(c[0], c[1]) for c in ckpts], pos_next, thold)

    def resume(self, srv: Server, slot: Slot, n_prefix: int, n_past: int, thold: int) -> Resumed:
        """EFFECT. Where a prompt sharing ``n_past`` tokens with the slot resumes
        (server-context.cpp:3320-3366): live memory if its ``pos_min`` is below the threshold;
        else the checkpoint ``restore_choice`` picks, restored; else from 0."""
        task = slot.task
        assert task is not None
        ckpts = slot.prompt.checkpoints
        pos_min, _ = srv.ctx_tgt.seqs[slot.id].pos_range()
        if pos_min == -1:
            raise Abort("update_slots",
                        f"pos_min == -1, but n_past = {n_past} > 0 - should not happen (slot {slot.id})")
        if pos_min < thold:
            return Resumed(None, None, n_past, n_past)
        i = self.restore_choice([(c.pos_min, c.pos_max, c.n_tokens) for c in ckpts], n_past, thold, n_prefix,
                                task.n_tokens, srv.cfg.swa_window)
        if i is None:
            return Resumed(None, "no usable checkpoint" if ckpts else "no checkpoints", 0, 0)
        ck = ckpts[i]
        resumed = processing.restore_checkpoint(srv, slot, ck, n_past)
        if resumed is not None:
            return Resumed(ck, None, *resumed)
        self.restore_failed(srv, slot, ck)
        return Resumed(None, "checkpoint failed to load", 0, 0)

    def checkpoint_load_failed(self, srv: Server, slot: Slot, ck: Checkpoint, part: str) -> None:
        """EFFECT. One part of a checkpoint (``load_tgt``, ``load_dft``) did not load whole. A
        build whose loads return nothing (``rules.checkpoint_load_checked`` off: 0c1e570,
        b11434) aborts inside the load (common/common.cpp:2336-2338, 2354-2356)."""
        if not self.rules.checkpoint_load_checked:
            raise Abort(f"common_prompt_checkpoint::{part}", "checkpoint size mismatch")

    def restore_failed(self, srv: Server, slot: Slot, ck: Checkpoint) -> None:
        """EFFECT. A restore that did not load: the prompt start aborts for a checkpoint this
        process made, and re-processes from 0 for one restored from a slot file (``id_task ==
        -1``; #30137's merged diff)."""
        if ck.id_task != -1:
            raise Abort("update_slots", "failed to restore context checkpoint")

    def invalidated(self, ckpts: Sequence[tuple[int, int, int]], pos_next: int, n_prefix: int, thold: int) -> list[int]:
        """DECISION. The checkpoints erased at a prompt start (server-context.cpp:3367-3378), by
        index into ``(pos_min, pos_max, n_tokens)``: ``pos_max > pos_next``, and under a rule set
        with the November rule also ``n_tokens > n_prefix``."""
        return policy.invalidated([(c[1], c[2]) for c in ckpts], pos_next, n_prefix, self.rules.invalidate_n_prefix)

    def sync_draft(self, srv: Server, slot: Slot) -> None:
        """EFFECT. The draft context after a slot's target was set from elsewhere (a slot file
        restored, a restored checkpoint without draft data): left as it is."""

    def seq_rm_refused(self, srv: Server, slot: Slot, ctx: Context, n_past: int) -> bool:
        """EFFECT. The first fill's ``seq_rm(id, n_past, -1)`` refused (common/common.cpp:
        1536-1562): an abort. True: the design handled it and the prompt is re-processed."""
        raise Abort("common_memory::seq_rm", f"failed to remove sequence {slot.id} with p0={n_past}, p1=-1")

    # == slot files (server-context.cpp:2526-2663; #26004's appendix as #30137's diff writes it) =

    def appendix_cap(self, n_ctx_checkpoints: int) -> int | None:
        """DECISION. How many of a slot file's checkpoints a restore installs: the last
        ``--ctx-checkpoints`` (``load_slot_checkpoints``, server-context.cpp:2586-2714 of
        b11549). None: all."""
        return n_ctx_checkpoints

    def bytes_reported(self, n_total: int, n_appendix: int) -> int:
        """DECISION. The ``n_written`` / ``n_read`` a slot save or restore reports: the whole
        file, its appendix included."""
        return n_total

    def file_read(self, srv: Server, data: bytes, appendix_offset: int | None) -> None:
        """EFFECT. After a slot file is parsed, before its state loads: the C++ reads the
        appendix with its lengths checked against the file (nothing more to do)."""

    def file_restore_begin(self, srv: Server, slot: Slot) -> None:
        """EFFECT. Before a file's state is read into the slot's sequence: ``state_read_meta``
        removes only the positions it loads."""

    def file_restore_refuses(self, srv: Server, slot: Slot, n_state_positions: int, n_tokens: int) -> str | None:
        """DECISION. Why a restored file is refused once its state is loaded, or None: the C++
        checks the tokens only (``validate``, server-context.cpp:2609-2611)."""
        return None

    def file_checkpoint_refused(self, srv: Server, n_tokens: int, n_file_tokens: int, pos_min: int, pos_max: int,
                                data_tgt: bytes) -> str | None:
        """DECISION. Why a well-formed checkpoint record of a slot file is refused (the whole
        appendix then ignored), or None: the C++ installs whatever parses."""
        return None



# The extension points by kind (tests/model/test_design_points.py holds every public member of
# ``Design`` to exactly one of them). An attribute chooses among the C++'s own alternatives; a
# decision returns a value and acts on nothing; an effect acts through the model's operations.
ATTRIBUTE_POINTS = ("zero_init", "sharing", "cache_update_busy_slot", "alloc_scope")
DECISION_POINTS = (
    "update_cache_on_select", "load_baseline", "load_select", "is_oversize", "make_room", "update_evictions",
    "limit_after_bad_alloc", "breaks_at_user_message", "tail_breaks", "sweep_too_close", "cap_evictions",
    "pos_min_threshold", "restore_choice", "invalidated", "appendix_cap", "bytes_reported", "file_restore_refuses",
    "file_checkpoint_refused",
)
# Effects whose only outcome is the choice they return (they read the state, change nothing).
CHOICE_POINTS = ("get_available_slot", "checkpoint_pos_min", "kept_checkpoint", "reuse_payload")
EFFECT_POINTS = (
    "copy_checkpoints", "load_entry", "on_contained", "prompt_save", "entry_sizes", "candidate_size", "release_evicted",
    "checkpoint_create_failed", "resume", "checkpoint_load_failed", "restore_failed", "sync_draft", "seq_rm_refused",
    "file_read", "file_restore_begin",
)
POINTS = ATTRIBUTE_POINTS + DECISION_POINTS + CHOICE_POINTS + EFFECT_POINTS


def implementation(design: Design | type[Design], point: str) -> object:
    """What ``design`` runs at ``point``: the attribute's value, or the function a class in its
    method resolution order defines (the same object for every design that inherits it)."""
    cls = design if isinstance(design, type) else type(design)
    for klass in cls.__mro__:
        if point in klass.__dict__:
            return klass.__dict__[point]
    raise AttributeError(f"{cls.__name__} has no extension point {point!r}")


def runs(design: Design | type[Design], point: str, cls: type[Design]) -> bool:
    """Whether ``design`` runs at ``point`` what ``cls`` runs there (the same code, inherited or
    assigned: a tool that models a built-in design's behaviour outside the model asks this)."""
    return implementation(design, point) is implementation(cls, point)


def defined_by(design: Design | type[Design], point: str) -> type:
    """The class whose body defines what ``design`` runs at ``point``."""
    cls = design if isinstance(design, type) else type(design)
    return next(k for k in cls.__mro__ if point in k.__dict__)


__all__ = ["POINTS", "AllocScope", "Design", "Resumed", "Sharing", "SlotChoice", "defined_by", "implementation", "runs"]
