"""The host-RAM prompt cache: ``server_prompt_cache`` (tools/server/server-task.cpp).

``alloc`` / ``load`` / ``update`` mirror the C++ step by step (tree 0c1e570, server-task.cpp:
1711-1791, 1793-1868 and 1870-1901; docs/SPEC.md, section 4, says each step in words);
``save_transactional`` is the ``fixed`` design's save (build and fill off the list, validate,
then remove obsolete entries, make room and insert: nothing changes on failure). Which sizes
the cache accounts is the accounting seam; every decision itself is a rule of
``pcspec.model.policy`` applied to those sizes.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import TypeVar

from pcspec.model import events as ev
from pcspec.model import policy
from pcspec.model.checkpoint import Checkpoint, Prompt, copy_checkpoints, drop_all, hold
from pcspec.model.config import Config
from pcspec.model.context import Context
from pcspec.model.heap import Abort, BadAlloc, Buffer, Heap
from pcspec.model.memory import FULL, Tokens
from pcspec.model.variants import Accounting, AllocScope, Sharing, Variant


def lcp(a: Tokens, b: Tokens) -> int:
    """server_tokens::get_common_prefix for text tokens: the first index where they differ.
    (Found by halving over slices, which compare in C: a long conversation's prompts of tens of
    thousands of tokens are compared with every cache entry on every save and load.)"""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo]; a[:hi] != b[:hi]
    while hi - lo > 32:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    while lo < n and a[lo] == b[lo]:
        lo += 1
    return lo


@dataclass(eq=False)
class CacheEntry:
    """server-task.h: server_prompt_cache_state = {prompt, data.main, data.drft}."""

    id: int
    prompt: Prompt
    main: Buffer | None
    drft: Buffer | None

    def data_buffers(self) -> list[Buffer]:
        return list(filter(None, (self.main, self.drft)))

    def buffers(self) -> list[Buffer]:
        out = self.data_buffers()
        for ck in self.prompt.checkpoints:
            out.extend(ck.buffers())
        return out

    def per_holder_size(self) -> int:
        """server-task.h: server_prompt_cache_state::size (data + every checkpoint)."""
        return sum(b.size for b in self.data_buffers()) + sum(ck.size() for ck in self.prompt.checkpoints)


# -- accounting over numbers ---------------------------------------------------------------
# What an entry holds, as ``(identity, size)`` pairs: the same buffer held by several entries
# (a checkpoint shared since #30137) has one identity. The model passes its buffers; the log
# checker, which sees only what a log prints, passes its checkpoints (by the line that created
# them) and each entry's own data, in MiB.

N = TypeVar("N", int, float)
Held = Iterable[tuple[Hashable, N]]


def distinct_total(held: Held[N]) -> N:
    """Unique bytes: every identity counted once, whoever holds it."""
    seen: dict[Hashable, N] = {}
    for key, size in held:
        seen[key] = size
    return sum(seen.values())


def unique_sizes(entries: Sequence[Held[N]], new: Iterable[Hashable] = ()) -> list[N]:
    """Each entry's size under unique accounting, front first: what no later entry (and not
    the candidate, whose identities are ``new``) holds. Evicting front first then frees exactly
    that, so the sizes add up to the unique total and the FIFO rules of ``policy`` (make_room,
    update_evictions) apply unchanged."""
    seen = set(new)
    sizes: list[N] = []
    for held in reversed(entries):
        s: N = 0
        for key, size in held:
            if key not in seen:
                seen.add(key)
                s += size
        sizes.append(s)
    sizes.reverse()
    return sizes


def _held(e: CacheEntry) -> Iterator[tuple[int, int]]:
    """``e.buffers()`` as pairs, without its lists (the judge counts this after every operation)."""
    for b in (e.main, e.drft):
        if b is not None:
            yield b.id, b.size
    for ck in e.prompt.checkpoints:
        for b in (ck.tgt, ck.dft, ck.spec):
            if b is not None:
                yield b.id, b.size


def unique_bytes(entries: Iterable[CacheEntry], extra: Iterable[Buffer] = ()) -> int:
    """Distinct buffers reachable from ``entries`` (plus ``extra``), each counted once."""
    return distinct_total(chain(((b.id, b.size) for b in extra), *map(_held, entries)))


class PromptCache:
    """server-task.cpp: server_prompt_cache."""

    def __init__(self, cfg: Config, variant: Variant, heap: Heap) -> None:
        self.cfg = cfg
        self.variant = variant
        self.heap = heap
        self.entries: list[CacheEntry] = []
        self.limit_size = cfg.limit_size
        self.limit_tokens = cfg.n_ctx

    # -- accounting (the seam) -------------------------------------------------------------

    def accounted_sizes(self, new_bufs: Iterable[Buffer] = ()) -> list[int]:
        """Each entry's size as this variant's cache counts it, front first.

        For unique accounting an entry counts the buffers no later entry (and not the
        candidate) holds: evicting front-first then frees exactly that, so the sizes add up
        to the unique total and the FIFO rules of ``policy`` apply unchanged.
        """
        acc = self.variant.accounting
        if acc == Accounting.PER_HOLDER:
            return [e.per_holder_size() for e in self.entries]
        if acc == Accounting.UNDERCOUNT:
            return [
                sum(b.size for b in e.data_buffers()) + sum(ck.size() for ck in e.prompt.checkpoints if ck.refs <= 1)
                for e in self.entries
            ]
        return unique_sizes([_held(e) for e in self.entries], (b.id for b in new_bufs))

    def size(self) -> int:
        """server_prompt_cache::size."""
        return sum(self.accounted_sizes())

    def n_tokens(self) -> int:
        return sum(e.prompt.n_tokens for e in self.entries)

    def candidate_size(self, data: int, ckpts: list[Checkpoint]) -> tuple[int, list[Buffer]]:
        """The new entry's own size as counted, and the checkpoint buffers it would share."""
        shared = [] if self.variant.sharing == Sharing.DEEP_COPY else [b for ck in ckpts for b in ck.buffers()]
        acc = self.variant.accounting
        if acc == Accounting.PER_HOLDER:
            return data + sum(ck.size() for ck in ckpts), shared
        if acc == Accounting.UNDERCOUNT:
            # The slot already holds every one of them: "shared", so counted zero times.
            return data + sum(ck.size() for ck in ckpts if ck.refs == 0), shared
        return data + sum({b.id: b.size for b in shared}.values()), shared

    # -- eviction ----------------------------------------------------------------------------

    def evict(
        self,
        e: CacheEntry,
        reason: str,
        *,
        loaded_tokens: int | None = None,
        unique_total: int | None = None,
        limit: int | None = None,
    ) -> None:
        """Erase an entry (``states.erase`` / ``pop_front`` / ``pop_back``)."""
        self.entries.remove(e)
        self.heap.emit(ev.EntryEvict(entry=e.id, reason=reason, n_tokens=e.prompt.n_tokens,
                                     loaded_tokens=loaded_tokens, unique_total=unique_total, limit=limit))
        if self.variant.free_on_evict:
            # Mutant free-shared: frees what the entry points at, whoever else holds it.
            for ck in e.prompt.checkpoints:
                for b in ck.buffers():
                    self.heap.free(b)
        self._discard(e)
        e.main = e.drft = None

    def _discard(self, e: CacheEntry) -> None:
        """What an entry holds goes: its checkpoints, then its data."""
        drop_all(self.heap, e.prompt)
        for b in e.data_buffers():
            self.heap.release(b)

    def _evict_front(self, n: int, reason: str, new_bufs: list[Buffer], new_size: int) -> None:
        for _ in range(n):
            front = self.entries[0]
            # What unique accounting says at this moment: needed iff the cache plus the
            # candidate does not fit (the numbers an eviction is judged on).
            self.evict(
                front,
                reason,
                unique_total=unique_bytes(self.entries, new_bufs) + (new_size if reason == "make_room" else 0),
                limit=self.limit_size,
            )

    def _remove_obsolete(self, tokens: Tokens) -> None:
        """alloc step 4: erase every entry whose tokens are a prefix of the new prompt."""
        for e in list(self.entries):
            if lcp(e.prompt.tokens, tokens) == e.prompt.n_tokens:
                self.evict(e, "obsolete")

    def _make_room(self, new_size: int, new_bufs: list[Buffer]) -> None:
        """alloc step 5 (FIFO; only with a byte limit)."""
        n = policy.make_room(self.accounted_sizes(new_bufs), new_size, self.limit_size)
        data_new = new_size - sum({b.id: b.size for b in new_bufs}.values())
        self._evict_front(n, "make_room", new_bufs, max(0, data_new))

    def _contained(self, tokens: Tokens) -> bool:
        """alloc step 1: the prompt is a prefix of (or equal to) an entry."""
        for e in self.entries:
            if lcp(e.prompt.tokens, tokens) == len(tokens):
                self.heap.emit(ev.SaveSkipContained(entry=e.id))
                return True
        return False

    def _rejects(self, new_size: int, own_unique: int, new_bufs: list[Buffer]) -> bool:
        """alloc step 3 (and the no-make-room mutant)."""
        oversize = policy.is_oversize(new_size, self.limit_size)
        if not oversize and not self.variant.make_room and self.limit_size > 0:
            oversize = sum(self.accounted_sizes(new_bufs)) + new_size > self.limit_size
        if oversize:
            self.heap.emit(ev.SaveRejectOversize(size=new_size, own_unique=own_unique, limit=self.limit_size))
        return oversize

    def _on_bad_alloc(self, site: str) -> None:
        """alloc's ``catch (std::bad_alloc)``: shrink the limit for good, then update()."""
        self.heap.emit(ev.SaveBadAlloc(site=site))
        if self.variant.shrink_limit_on_bad_alloc:
            old = self.limit_size
            self.limit_size = policy.limit_after_bad_alloc(self.size())
            self.heap.emit(ev.LimitChange(old=old, new=self.limit_size))
            self.update()

    def _build_entry(self, prompt: Prompt, main: Buffer | None, drft: Buffer | None) -> CacheEntry:
        """``states.push_back({prompt.tokens.clone(), prompt.checkpoints}, {main, drft})``."""
        if self.heap.faults.hit("save.alloc.entry"):
            self.heap.emit(ev.AllocFailed(size=prompt.n_tokens * 4, role="entry", site="save.alloc.entry"))
            raise BadAlloc("save.alloc.entry")
        copies = copy_checkpoints(self.heap, prompt.checkpoints, self.variant.sharing, self.variant.zero_init, None)
        entry = CacheEntry(self.heap.new_id(), Prompt(prompt.tokens), main, drft)
        for ck in copies:
            hold(self.heap, entry.prompt, ck)
        return entry

    def _allocate(self, prompt: Prompt, size_tgt: int, size_dft: int,
                  with_entry: bool) -> tuple[Buffer | None, Buffer | None, CacheEntry | None] | None:
        """alloc's ``try``: the two ``resize`` calls (none for size 0) and, ``with_entry``, the
        entry built inside it; None after a ``bad_alloc`` it caught (nothing left allocated)."""
        z = self.variant.zero_init
        main = drft = None
        try:
            main = self.heap.allocate(size_tgt, "main", z, "save.alloc.main") if size_tgt > 0 else None
            drft = self.heap.allocate(size_dft, "drft", z, "save.alloc.drft") if size_dft > 0 else None
            return main, drft, (self._build_entry(prompt, main, drft) if with_entry else None)
        except BadAlloc as exc:
            self.heap.release(main)
            self.heap.release(drft)
            self._on_bad_alloc(str(exc))
            return None

    def _admit(self, prompt: Prompt, size_tgt: int, size_dft: int) -> tuple[int, list[Buffer]] | None:
        """alloc steps 1-3, which both saves take: None when the prompt is in the cache or the
        entry is over the limit; else its size as counted and the checkpoint buffers it shares."""
        if self._contained(prompt.tokens):
            return None
        new_size, new_bufs = self.candidate_size(size_tgt + size_dft, prompt.checkpoints)
        own_unique = size_tgt + size_dft + sum(ck.size() for ck in prompt.checkpoints)
        if self._rejects(new_size, own_unique, new_bufs):
            return None
        return new_size, new_bufs

    # -- the C++ save: alloc, then the caller fills -----------------------------------------

    def alloc(self, prompt: Prompt, size_tgt: int, size_dft: int) -> CacheEntry | None:
        """server-task.cpp: server_prompt_cache::alloc. Returns the appended entry or None."""
        admitted = self._admit(prompt, size_tgt, size_dft)
        if admitted is None:
            return None
        self._remove_obsolete(prompt.tokens)
        self._make_room(*admitted)
        got = self._allocate(prompt, size_tgt, size_dft, self.variant.alloc_scope == AllocScope.ENTRY)
        if got is None:
            return None
        main, drft, entry = got
        if entry is None:
            try:
                entry = self._build_entry(prompt, main, drft)
            except BadAlloc as exc:
                raise Abort(
                    "server_prompt_cache::alloc", f"uncaught std::bad_alloc ({exc}) in states.push_back"
                ) from None
        self._publish(entry)
        return entry

    def _publish(self, entry: CacheEntry) -> None:
        """``states.push_back``: the entry joins the list (with what it brings in unique bytes)."""
        self.entries.append(entry)
        self.heap.emit(ev.EntryInsert(
            entry=entry.id,
            n_tokens=entry.prompt.n_tokens,
            own_unique=unique_bytes([entry]),
            unique_after=unique_bytes(self.entries),
            limit=self.limit_size,
        ))

    def pop_back(self, entry: CacheEntry) -> None:
        """``prompt_cache.states.pop_back()`` in #30137's prompt_save."""
        assert self.entries and self.entries[-1] is entry
        self.evict(entry, "pop_back")

    def fill(self, entry: CacheEntry, ctx_tgt: Context, ctx_dft: Context | None, seq: int,
             size_tgt: int, size_dft: int) -> bool:
        """The state reads into the entry's data (``get_data_ext``, the caller's fill after
        alloc): whether both wrote what ``get_size`` said."""
        n_tgt = ctx_tgt.get_data(self.heap, seq, entry.main, FULL, "save.read.tgt") if entry.main else 0
        n_dft = 0
        if ctx_dft is not None and entry.drft is not None:
            n_dft = ctx_dft.get_data(self.heap, seq, entry.drft, FULL, "save.read.dft")
        return n_tgt == size_tgt and n_dft == size_dft

    # -- the fixed save --------------------------------------------------------------------

    def save_transactional(self, prompt: Prompt, ctx_tgt: Context, ctx_dft: Context | None, seq: int,
                           size_tgt: int, size_dft: int) -> bool:
        """``fixed``: build and fill off the list, validate, then remove obsolete entries, make
        room and insert. Any failure leaves the cache exactly as it was."""
        admitted = self._admit(prompt, size_tgt, size_dft)
        got = self._allocate(prompt, size_tgt, size_dft, True) if admitted is not None else None
        if admitted is None or got is None or got[2] is None:
            return False
        entry = got[2]
        if not self.fill(entry, ctx_tgt, ctx_dft, seq, size_tgt, size_dft):
            self.heap.emit(ev.SaveFillShort(entry=entry.id))
            self._discard(entry)
            return False
        self._remove_obsolete(prompt.tokens)
        self._make_room(*admitted)
        self._publish(entry)
        return True

    # -- load --------------------------------------------------------------------------------

    def load(self, prompt: Prompt, tokens_new: Tokens, ctx_tgt: Context, ctx_dft: Context | None, seq: int) -> bool:
        """server-task.cpp: server_prompt_cache::load. On success the slot's prompt becomes the
        chosen entry's (tokens and checkpoints) and the entry leaves the cache."""
        n_new = len(tokens_new)
        base = policy.load_baseline(
            lcp(prompt.tokens, tokens_new), prompt.n_tokens, n_new, self.variant.empty_slot_baseline
        )
        cands = [
            policy.entry_fractions(lcp(e.prompt.tokens, tokens_new), e.prompt.n_tokens, n_new) for e in self.entries
        ]
        i = policy.load_select(base[0], base[1], cands)
        self.heap.emit(ev.LoadScan(base=base, candidates=cands, chosen=None if i is None else self.entries[i].id))
        if i is None:
            return True
        e = self.entries[i]
        if self.variant.contain_failures:
            ok = self._restore(ctx_tgt, seq, e.main, "load.write.tgt")
            if ok and e.drft is not None:
                ok = ctx_dft is not None and self._restore(ctx_dft, seq, e.drft, "load.write.dft")
            if not ok:
                self.heap.emit(ev.LoadFailed(entry=e.id, ctx="tgt or dft"))
                self.evict(e, "load_failed")
                return False
        else:
            if not self._restore(ctx_tgt, seq, e.main, "load.write.tgt"):
                self.heap.emit(ev.LoadFailed(entry=e.id, ctx="tgt"))
                return False  # the entry stays in the cache (server-task.cpp)
            # main.clear(); main.shrink_to_fit(): the entry changes while still in the cache
            self.heap.release(e.main)
            e.main = None
            if e.drft is not None:
                if ctx_dft is None:
                    raise Abort("server_prompt_cache::load", "GGML_ASSERT(ctx_dft) failed")
                if not self._restore(ctx_dft, seq, e.drft, "load.write.dft"):
                    self.heap.emit(ev.LoadFailed(entry=e.id, ctx="dft"))
                    return False
                self.heap.release(e.drft)
                e.drft = None
        # prompt = std::move(state.prompt); states.erase(it)
        drop_all(self.heap, prompt)
        prompt.tokens, prompt.checkpoints = e.prompt.tokens, e.prompt.checkpoints
        n_tokens = e.prompt.n_tokens
        e.prompt = Prompt()
        self.evict(e, "loaded", loaded_tokens=n_tokens)
        return True

    def _restore(self, ctx: Context, seq: int, buf: Buffer | None, site: str) -> bool:
        """``set_data_ext(buf) == buf.size()`` -- note 0 == 0 for an emptied buffer."""
        want = buf.size if buf is not None else 0
        return ctx.set_data(self.heap, seq, buf, site) == want

    # -- update ------------------------------------------------------------------------------

    def update(self) -> None:
        """server-task.cpp: server_prompt_cache::update (byte FIFO, then token FIFO)."""
        sizes = self.accounted_sizes()
        toks = [e.prompt.n_tokens for e in self.entries]
        n_bytes, n_tok = policy.update_evictions(sizes, toks, self.limit_size, self.limit_tokens)
        self._evict_front(n_bytes, "limit_bytes", [], 0)
        for _ in range(n_tok):
            self.evict(self.entries[0], "limit_tokens")
        self.heap.emit(
            ev.CacheState(n=len(self.entries), size=self.size(), limit=self.limit_size, n_tokens=self.n_tokens())
        )
