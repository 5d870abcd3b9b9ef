"""The built-in designs, each written as its difference from its parent.

* ``baseline``: the upstream code before #30137, ``Design``'s defaults (docs/DESIGNS.md builds it
  as the October tree 0c1e570 as it is);
* ``pr30137``: #30137 as merged (shared immutable checkpoints, no-init buffers, ``pop_back`` on a
  short fill), on ``baseline``; under the ``november`` rule set it is today's upstream master;
* ``pr27451``: the head of #27451 (shared payload buffers, the whole entry guarded), on ``baseline``;
* ``fixed``: pcspec's proposal, on ``pr30137``: one override per extension point it changes, each
  with the property it makes hold (docs/PROPERTIES.md gives each reason, docs/DESIGNS.md each patch).

docs/SOURCES.md says where to get each upstream change.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from pcspec.model import events as ev
from pcspec.model import policy
from pcspec.model.design import AllocScope, Design, Resumed, Sharing
from pcspec.model.errors import PcspecError
from pcspec.model.rulesets import RULE_SETS, TREE_RULE_SETS

if TYPE_CHECKING:
    from pcspec.model.cache import CacheEntry, PromptCache
    from pcspec.model.checkpoint import Checkpoint
    from pcspec.model.context import Context
    from pcspec.model.heap import Buffer
    from pcspec.model.server import Server
    from pcspec.model.slot import Slot, Task


class Baseline(Design):
    """The upstream design before #30137: deep-copied checkpoints, zero-filled buffers, unvalidated save."""

    name = "baseline"
    summary = Design.summary


class PR30137(Baseline):
    """#30137 (merged): shared immutable checkpoints, no-init buffers, pop_back on a short fill."""

    name = "pr30137"
    summary = "#30137 (merged): shared immutable checkpoints, no-init buffers, pop_back on a short fill"
    sharing: ClassVar[Sharing] = Sharing.SHARED_OBJECT
    zero_init: ClassVar[bool] = False

    def prompt_save(self, srv: Server, slot: Slot, size_tgt: int, size_dft: int) -> bool:
        """``alloc``, the state reads, and ``pop_back()`` when they came up short ("failed to
        save complete prompt state", #30137's prompt_save hunk)."""
        cache = srv.cache
        assert cache is not None
        entry = cache.alloc(slot.prompt, size_tgt, size_dft)
        if entry is None:
            return False
        if cache.fill(entry, srv.ctx_tgt, srv.ctx_dft, slot.id, size_tgt, size_dft):
            return True
        srv.heap.emit(ev.SaveFillShort(entry=entry.id))
        cache.pop_back(entry)
        return False

    def checkpoint_create_failed(self, srv: Server, slot: Slot, ck: Checkpoint, error: str, short: bool) -> str | None:
        """``make_shared``, fill, then ``push_back`` (#30137's create_checkpoint hunk): a
        ``bad_alloc`` leaves nothing in the list."""
        from pcspec.model.heap import Abort

        if short:
            raise Abort("common_prompt_checkpoint::update", error)
        srv.heap.emit(ev.CkptCreateFailed(slot=slot.id, task=slot.task_id, reason=error))
        for b in ck.buffers():
            srv.heap.release(b)
        return f"got exception: std::bad_alloc ({error})"


class PR27451(Baseline):
    """#27451 (competing): shared payload buffers, zero-filled, bad_alloc caught for the whole entry."""

    name = "pr27451"
    summary = "#27451 (competing): shared payload buffers, zero-filled, bad_alloc caught for the whole entry"
    sharing: ClassVar[Sharing] = Sharing.SHARED_PAYLOAD
    alloc_scope: ClassVar[AllocScope] = AllocScope.ENTRY


class Fixed(PR30137):
    """Our proposal: shared immutable checkpoints, transactional save, unique accounting."""

    name = "fixed"
    summary = "our proposal: shared immutable checkpoints, transactional save, unique accounting"

    # -- the save: RB-1, RB-2, RB-3, UNINIT (patches/fixed/0004) --------------------------------

    alloc_scope: ClassVar[AllocScope] = AllocScope.ENTRY

    def prompt_save(self, srv: Server, slot: Slot, size_tgt: int, size_dft: int) -> bool:
        """Build and fill the entry off the list, validate, then remove obsolete entries, make
        room and insert: any failure leaves the cache exactly as it was."""
        cache = srv.cache
        assert cache is not None
        return cache.save_transactional(slot.prompt, srv.ctx_tgt, srv.ctx_dft, slot.id, size_tgt, size_dft)

    # -- accounting: ACC-1, ACC-3 (patches/fixed/0003) ------------------------------------------

    def entry_sizes(self, cache: PromptCache, new_bufs: Sequence[Buffer] = ()) -> list[int]:
        """Each buffer reachable from the cache counted once: an entry counts what no later
        entry (and not the candidate) holds, so evicting front first frees exactly that."""
        from pcspec.model.cache import held, unique_sizes

        return unique_sizes([held(e) for e in cache.entries], (b.id for b in new_bufs))

    def candidate_size(self, cache: PromptCache, data: int, ckpts: list[Checkpoint]) -> tuple[int, list[Buffer]]:
        """The new entry's data and its checkpoints' buffers, each once."""
        shared = [b for ck in ckpts for b in ck.buffers()]
        return data + sum({b.id: b.size for b in shared}.values()), shared

    # -- the limit: LIVE-1 (patches/fixed/0008) -------------------------------------------------

    def limit_after_bad_alloc(self, size: int, limit: int) -> int | None:
        """A transient failure does not lower the limit for good."""
        return None

    # -- slot selection: REUSE-2, F1 (patches/fixed/0002, 0006) ---------------------------------

    cache_update_busy_slot: ClassVar[bool] = False  # a busy slot is left alone; the task waits

    def update_cache_on_select(self, slot: Slot, task: Task, f_keep: float | None) -> bool:
        """An empty pinned slot consults the cache (its f_keep is 0, not NaN), with or without
        the similarity pass."""
        if f_keep is None:
            from pcspec.model.cache import lcp

            n_slot = slot.prompt.n_tokens
            f_keep = lcp(slot.prompt.tokens, task.tokens) / n_slot if n_slot else 0.0
        if math.isnan(f_keep):
            f_keep = 0.0
        return policy.update_cache_on_lcp(f_keep)

    # -- failed loads: NOABORT-1, IMM-2 (patches/fixed/0007, 0009) -------------------------------

    def load_entry(self, cache: PromptCache, entry: CacheEntry, ctx_tgt: Context, ctx_dft: Context | None,
                   seq: int) -> bool:
        """Both parts are loaded before the entry is touched; a failed load drops the entry
        (the caller clears the slot)."""
        ok = cache.restore(ctx_tgt, seq, entry.main, "load.write.tgt")
        if ok and entry.drft is not None:
            ok = ctx_dft is not None and cache.restore(ctx_dft, seq, entry.drft, "load.write.dft")
        if not ok:
            cache.heap.emit(ev.LoadFailed(entry=entry.id, ctx="tgt or dft"))
            cache.evict(entry, "load_failed")
        return ok

    def checkpoint_load_failed(self, srv: Server, slot: Slot, ck: Checkpoint, part: str) -> None:
        """A short checkpoint load is not an abort: ``restore_failed`` takes it."""

    def restore_failed(self, srv: Server, slot: Slot, ck: Checkpoint) -> None:
        """The checkpoint goes and the prompt is re-processed from 0."""
        from pcspec.model.processing import erase_checkpoint

        erase_checkpoint(srv, slot, ck, "invalidated", cause="failed to load")

    def checkpoint_create_failed(self, srv: Server, slot: Slot, ck: Checkpoint, error: str, short: bool) -> str | None:
        """No checkpoint is made, and the task goes on."""
        for b in ck.buffers():
            srv.heap.release(b)
        srv.heap.emit(ev.CkptCreateFailed(slot=slot.id, task=slot.task_id, reason=error))
        return None

    def seq_rm_refused(self, srv: Server, slot: Slot, ctx: Context, n_past: int) -> bool:
        """The memory cannot go back to ``n_past``: re-process the prompt from 0."""
        from pcspec.model.processing import erase_checkpoint

        srv.heap.emit(ev.SeqRmRefused(slot=slot.id, ctx=ctx.name, p0=n_past))
        for c in srv.contexts():
            c.seq_rm(slot.id, -1)
        slot.prompt.tokens = ()
        slot.n_prompt_cached = 0
        for ck in list(slot.prompt.checkpoints):
            erase_checkpoint(srv, slot, ck, "invalidated", cause="seq_rm refused")
        return True

    # -- checkpoints: PERF-2 (patches/fixed/0013), RESTORE-1 (0005, 0012) -----------------------

    def kept_checkpoint(self, slot: Slot) -> Checkpoint | None:
        """The checkpoint the task restored stays with it: the sweep and the cap leave it, and
        it is not re-created at its n_tokens (#30683's idea)."""
        return slot.restored if slot.restored in slot.prompt.checkpoints else None

    def checkpoint_pos_min(self, srv: Server, slot: Slot, pos_min: int) -> int:
        """The first position the payload holds (for iSWA the last n_swa cells), not the SWA
        cache's pos_min; with an SWA draft, the later of the two payloads' starts (each context's
        SWA cache places its cells by its own history)."""
        from pcspec.model.config import MemoryKind

        return max(ctx.seqs[slot.id].payload_pos_min() for ctx in srv.contexts()
                   if ctx.name == "tgt" or ctx.kind == MemoryKind.SWA)

    def invalidated(self, ckpts: Sequence[tuple[int, int, int]], pos_next: int, n_prefix: int, thold: int) -> list[int]:
        """The November rule on any tree: a checkpoint past the shared prefix goes too."""
        return policy.invalidated([(c[1], c[2]) for c in ckpts], pos_next, n_prefix, True)

    # -- the restore choice and resume: RESTORE-1, REUSE-1, PERF-3 (patches/fixed/0005, 0014) -----

    def restore_choice(self, ckpts: Sequence[tuple[int, int, int]], pos_next: int, thold: int, n_prefix: int,
                       n_prompt: int, n_swa: int) -> int | None:
        """Only checkpoints of the shared prefix (``n_tokens <= n_prefix``); for a sliding window,
        only one whose payload holds the cells the first re-processed token attends to."""
        eligible = [c[2] <= n_prefix for c in ckpts]
        if n_swa > 0:
            trip = [t if ok else (t[0], pos_next + 1, t[2]) for t, ok in zip(ckpts, eligible, strict=True)]
            return policy.restore_choice_exact(trip, pos_next, thold, n_prompt, n_swa)
        return policy.restore_choice([(c[0], c[1]) for c in ckpts], pos_next, thold, eligible)

    def resume(self, srv: Server, slot: Slot, n_prefix: int, n_past: int, thold: int) -> Resumed:
        """Of live memory and every held checkpoint of the shared prefix, the one that keeps the
        most tokens, by what each memory kind can roll back. Ties go to live memory (no
        restore), then to the newest checkpoint (the C++ scan order)."""
        from pcspec.model import processing

        task = slot.task
        assert task is not None
        ckpts = slot.prompt.checkpoints
        n_prompt = task.n_tokens
        best_n, best = 0, None
        n_live = policy.resume_point(n_past, n_prompt)
        if processing.serves_live(srv, slot, n_live):
            best_n = n_live
        for ck in reversed(ckpts):
            if ck.n_tokens > n_prefix or ck.pos_max > n_past:
                continue  # not a state of the shared prefix
            _, n = policy.restored_positions(n_past, ck.pos_min, ck.pos_max, ck.n_tokens)
            n = policy.resume_point(n, n_prompt)
            if n > best_n and processing.serves_checkpoint(srv, slot, ck, n):
                best_n, best = n, ck
        if best is None:
            if best_n > 0:
                return Resumed(None, None, n_past, n_past)  # live memory
            return Resumed(None, "no usable checkpoint" if ckpts else "no checkpoints", 0, 0)
        resumed = processing.restore_checkpoint(srv, slot, best, n_past)
        if resumed is None:
            self.restore_failed(srv, slot, best)
            return Resumed(None, "checkpoint failed to load", 0, 0)
        return Resumed(best, None, *resumed)

    # -- slot files: FILE-1, STATE-1 (patches/fixed/0010, 0011) ----------------------------------

    def file_restore_begin(self, srv: Server, slot: Slot) -> None:
        """The sequence is cleared before the file's state is read into it."""
        srv.ctx_tgt.seq_rm(slot.id, -1)

    def file_restore_refuses(self, srv: Server, slot: Slot, n_state_positions: int, n_tokens: int) -> str | None:
        """The state's positions must cover exactly the restored tokens."""
        if n_state_positions != n_tokens:
            return f"the state holds {n_state_positions} positions but the file has {n_tokens} tokens"
        return None

    def file_checkpoint_refused(self, srv: Server, n_tokens: int, n_file_tokens: int, pos_min: int, pos_max: int,
                                data_tgt: bytes) -> str | None:
        """A record that no checkpoint of this server's memory can be."""
        from pcspec.model.slot_files import implausible

        return implausible(srv, n_tokens, n_file_tokens, pos_min, pos_max, data_tgt)

    def sync_draft(self, srv: Server, slot: Slot) -> None:
        """The draft context re-processes the slot's tokens, so that it holds what the target
        does."""
        dft = srv.ctx_dft
        if dft is not None:
            dft.seq_rm(slot.id, -1)
            dft.decode([(slot.id, slot.prompt.tokens)])


BUILT_IN: dict[str, type[Design]] = {d.name: d for d in (Baseline, PR30137, PR27451, Fixed)}
# The built-in designs under the verdict matrix's rule set (``rulesets.SPEC``).
DESIGNS: dict[str, Design] = {name: cls() for name, cls in BUILT_IN.items()}
# The model of each upstream build: baseline under the build's rule set, named as the rule set.
RULE_SET_MODELS: dict[str, Design] = {name: Baseline(r, name=name) for name, r in RULE_SETS.items()}


def design_at(name: str, tree: str) -> Design:
    """``DESIGN@TREE``: a design under the rule set of a tree pcspec builds (a design's patches
    on the October tree: ``pr30137@0c1e570`` is #30137 with no file appendix, the October
    invalidation and aborting loads, where its patch does not port them), or ``DESIGN@RULES``
    under a rule set by name (``mine@november``). ``name`` is a built-in design or one known
    by name (``register``)."""
    cls = BUILT_IN.get(name) or (type(_NAMED[name]) if name in _NAMED and not _NAMED[name].mutant else None)
    if cls is None:
        raise PcspecError(f"unknown design {name!r}; built-in designs: {', '.join(BUILT_IN)}")
    rules = RULE_SETS.get(TREE_RULE_SETS.get(tree, tree))
    if rules is None:
        raise PcspecError(f"unknown tree or rule set {tree!r}; trees: {', '.join(TREE_RULE_SETS)}; rule sets: "
                          f"{', '.join(RULE_SETS)}")
    return cls(rules, name=f"{name}@{tree}")


# Every design a trace may name, by name: the built-in designs, the models of the rule sets, and
# what a higher layer registers (the mutants of pcspec.properties.mutants, which register when
# pcspec.properties is imported; a design of one's own loaded by --variant-module). A trace
# names its design, and reading it back needs the object.
_NAMED: dict[str, Design] = {**DESIGNS, **RULE_SET_MODELS}


def register(design: Design) -> None:
    """Make ``design`` known by its name (a name already taken by another design is refused)."""
    known = _NAMED.get(design.name)
    if known is not None and known is not design and _identity(known) != _identity(design):
        raise PcspecError(f"a design named {design.name!r} is known already ({_identity(known)})")
    _NAMED[design.name] = design  # (the same class imported again replaces it)


def _identity(design: Design) -> str:
    """Which class a design is: ``MODULE:QUALNAME`` (a module imported again makes a new class
    object of the same identity)."""
    cls = type(design)
    return f"{cls.__module__}:{cls.__qualname__}"


def named() -> dict[str, Design]:
    """Every design known by name, in the order they became known."""
    return dict(_NAMED)


def from_origin(origin: str, name: str, rules: str | None = None) -> Design:
    """The design a trace names by ``MODULE:CLASS`` (``Design.origin``), imported from the
    current folder or the path, under the rule set ``rules`` (its class's own if None)."""
    import importlib
    import os
    import sys

    from pcspec.model.rulesets import get_rule_set

    module_name, _, qualname = origin.partition(":")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj: object = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except Exception as exc:  # the user's module: whatever it raises is one line
        raise PcspecError(f"the trace's design {origin} cannot be imported ({type(exc).__name__}: {exc}); run from "
                          "the folder that holds its module, or give --variant-module MODULE:NAME") from None
    if not (isinstance(obj, type) and issubclass(obj, Design)):
        raise PcspecError(f"the trace's design {origin} is not a Design subclass")
    design = obj(get_rule_set(rules) if rules else None)
    if design.name != name:
        raise PcspecError(f"the trace's design {origin} is named {design.name!r} now, not {name!r} as in the trace")
    register(design)
    return design


# Names the built-in designs had before, by their names now. ``master`` was the upstream code
# before #30137, not today's upstream master (#30137 merged: ``pr30137`` under the ``november``
# rule set). A trace header that names an old one reads as the new one (``current_name``); a
# command line that names one gets ``renamed_error``.
RENAMED: dict[str, str] = {"master": "baseline"}


def current_name(name: str) -> str:
    """``name`` with an old design name (``RENAMED``) replaced by its name now, ``DESIGN@TREE``
    included (``master@0c1e570`` is ``baseline@0c1e570``): what a trace header names."""
    base, at, tree = name.partition("@")
    return RENAMED[base] + at + tree if base in RENAMED else name


def renamed_error(name: str) -> PcspecError | None:
    """The one-line error for a design named by its old name on a command line (None for any
    other name): what it is called now, and which design today's upstream master is."""
    if current_name(name) == name:
        return None
    return PcspecError(f"design {name!r} is now {current_name(name)!r} (the upstream design before #30137); "
                       "today's upstream master is 'pr30137' under the 'november' rule set (pr30137@november)")


def get_design(name: str) -> Design:
    """A known design by name (``mutant:NAME`` or just ``NAME`` for a mutant; ``DESIGN@TREE``);
    PcspecError naming the known ones otherwise, or, for an old name (``RENAMED``), saying what
    it is now."""
    if name in _NAMED:
        return _NAMED[name]
    renamed = renamed_error(name)
    if renamed is not None:
        raise renamed
    if f"mutant:{name}" in _NAMED:
        return _NAMED[f"mutant:{name}"]
    base, at, tree = name.partition("@")
    if at and (base in BUILT_IN or base in _NAMED):
        return design_at(base, tree)
    raise PcspecError(f"unknown variant {name!r}; valid variants: {', '.join(_NAMED)}")
