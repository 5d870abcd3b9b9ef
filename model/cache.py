"""The host-RAM prompt cache: ``server_prompt_cache`` (tools/server/server-task.cpp).

``alloc`` / ``load`` / ``update`` mirror the C++ step by step (tree 0c1e570, server-task.cpp:
1711-1791, 1793-1868 and 1870-1901; docs/SPEC.md, section 4, says each step in words);
``save_transactional`` is the ``fixed`` design's save (build and fill off the list, validate,
then remove obsolete entries, make room and insert: nothing changes on failure). Which sizes
the cache accounts, which entries make room, which entry a load takes: the design's points
(``pcspec.model.design``), called with the cache's numbers.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import chain
from typing import TYPE_CHECKING, TypeVar, overload

from pcspec.model import events as ev
from pcspec.model import policy
from pcspec.model.checkpoint import Prompt, drop_all, hold
from pcspec.model.config import Config
from pcspec.model.context import Context
from pcspec.model.heap import Abort, BadAlloc, Buffer, Heap
from pcspec.model.memory import FULL, Tokens

if TYPE_CHECKING:
    from pcspec.model.design import Design


class AllocScope(StrEnum):
    """What ``server_prompt_cache::alloc``'s ``try`` covers: a design's ``alloc_scope``."""

    RESIZE = "resize"  # the two resize() calls only; the push_back of the entry unguarded
    ENTRY = "entry"  # the whole entry construction (#27451)


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


def held(e: CacheEntry) -> Iterator[tuple[int, int]]:
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
    return distinct_total(chain(((b.id, b.size) for b in extra), *map(held, entries)))


class PromptCache:
    """server-task.cpp: server_prompt_cache."""

    def __init__(self, cfg: Config, design: Design, heap: Heap) -> None:
        self.cfg = cfg
        self.design = design
        self.heap = heap
        self.entries: list[CacheEntry] = []
        self.limit_size = cfg.limit_size
        self.limit_tokens = cfg.n_ctx

    # -- accounting (the design's) ---------------------------------------------------------

    def accounted_sizes(self, new_bufs: Iterable[Buffer] = ()) -> list[int]:
        """Each entry's size as this design's cache counts it, front first
        (``Design.entry_sizes``)."""
        return self.design.entry_sizes(self, tuple(new_bufs))

    def size(self) -> int:
        """server_prompt_cache::size."""
        return sum(self.accounted_sizes())

    def n_tokens(self) -> int:
        return sum(e.prompt.n_tokens for e in self.entries)

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
        self.design.release_evicted(self, e)
        e.main = e.drft = None

    def discard(self, e: CacheEntry) -> None:
        """What an entry holds goes: its checkpoints, then its data."""
        drop_all(self.heap, e.prompt)
        for b in e.data_buffers():
            self.heap.release(b)

    def _evict_all(self, victims: Sequence[CacheEntry], reason: str, new_bufs: list[Buffer], new_size: int) -> None:
        for victim in victims:
            # What unique accounting says at this moment: needed iff the cache plus the
            # candidate does not fit (the numbers an eviction is judged on).
            self.evict(
                victim,
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
        """alloc step 5 (only with a byte limit): the design's ``make_room``, asked again over
        the sizes as they are after each round of evictions until it evicts nothing (the C++
        ``while`` loop; for the FIFO rule the first round is the whole answer)."""
        if self.limit_size <= 0:
            return
        data_new = new_size - sum({b.id: b.size for b in new_bufs}.values())
        while self.entries:
            picked = self.design.make_room(self.accounted_sizes(new_bufs), new_size, self.limit_size)
            if not picked:
                return
            self._evict_all(self._entries_at(picked), "make_room", new_bufs, max(0, data_new))

    def _entries_at(self, picked: Sequence[int]) -> list[CacheEntry]:
        """The entries a decision point named by index, in its order; an index out of range or
        named twice is the design's error, reported as such."""
        if len(set(picked)) != len(picked) or any(not 0 <= i < len(self.entries) for i in picked):
            raise ValueError(f"{self.design.name}: indices {list(picked)} do not name distinct entries of a cache "
                             f"of {len(self.entries)}")
        return [self.entries[i] for i in picked]

    def _contained(self, tokens: Tokens) -> bool:
        """alloc step 1: the prompt is a prefix of (or equal to) an entry (``Design.on_contained``)."""
        for e in self.entries:
            if lcp(e.prompt.tokens, tokens) == len(tokens):
                self.heap.emit(ev.SaveSkipContained(entry=e.id))
                self.design.on_contained(self, e)
                return True
        return False

    def refresh(self, e: CacheEntry) -> None:
        """Move ``e`` to the back of the list (the newest): a use, for a design that counts one
        (the C++ never reorders)."""
        self.entries.remove(e)
        self.entries.append(e)
        self.heap.emit(ev.EntryRefresh(entry=e.id))

    def _rejects(self, new_size: int, own_unique: int, new_bufs: list[Buffer]) -> bool:
        """alloc step 3: the design's ``is_oversize``."""
        oversize = self.design.is_oversize(new_size, _LazySizes(self, new_bufs), self.limit_size)
        if oversize:
            self.heap.emit(ev.SaveRejectOversize(size=new_size, own_unique=own_unique, limit=self.limit_size))
        return oversize

    def _on_bad_alloc(self, site: str) -> None:
        """alloc's ``catch (std::bad_alloc)``: the design's ``limit_after_bad_alloc``, then update()."""
        self.heap.emit(ev.SaveBadAlloc(site=site))
        new = self.design.limit_after_bad_alloc(self.size(), self.limit_size)
        if new is not None:
            old = self.limit_size
            self.limit_size = new
            self.heap.emit(ev.LimitChange(old=old, new=self.limit_size))
            self.update()

    def _build_entry(self, prompt: Prompt, main: Buffer | None, drft: Buffer | None) -> CacheEntry:
        """``states.push_back({prompt.tokens.clone(), prompt.checkpoints}, {main, drft})``."""
        if self.heap.faults.hit("save.alloc.entry"):
            self.heap.emit(ev.AllocFailed(size=prompt.n_tokens * 4, role="entry", site="save.alloc.entry"))
            raise BadAlloc("save.alloc.entry")
        copies = self.design.copy_checkpoints(self.heap, prompt.checkpoints, None)
        entry = CacheEntry(self.heap.new_id(), Prompt(prompt.tokens), main, drft)
        for ck in copies:
            hold(self.heap, entry.prompt, ck)
        return entry

    def _allocate(self, prompt: Prompt, size_tgt: int, size_dft: int,
                  with_entry: bool) -> tuple[Buffer | None, Buffer | None, CacheEntry | None] | None:
        """alloc's ``try``: the two ``resize`` calls (none for size 0) and, ``with_entry``, the
        entry built inside it; None after a ``bad_alloc`` it caught (nothing left allocated)."""
        z = self.design.zero_init
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
        new_size, new_bufs = self.design.candidate_size(self, size_tgt + size_dft, prompt.checkpoints)
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
        got = self._allocate(prompt, size_tgt, size_dft, self.design.alloc_scope == AllocScope.ENTRY)
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
            self.discard(entry)
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
        base = self.design.load_baseline(lcp(prompt.tokens, tokens_new), prompt.n_tokens, n_new)
        cands = [policy.entry_fractions(lcp(e.prompt.tokens, tokens_new), e.prompt.n_tokens, n_new)
                 for e in self.entries]
        i = self.design.load_select(base, cands)
        chosen = self._entries_at([i])[0] if i is not None else None
        self.heap.emit(ev.LoadScan(base=base, candidates=cands, chosen=None if chosen is None else chosen.id))
        if chosen is None:
            return True
        if not self.design.load_entry(self, chosen, ctx_tgt, ctx_dft, seq):
            return False
        # prompt = std::move(state.prompt); states.erase(it)
        drop_all(self.heap, prompt)
        prompt.tokens, prompt.checkpoints = chosen.prompt.tokens, chosen.prompt.checkpoints
        n_tokens = chosen.prompt.n_tokens
        chosen.prompt = Prompt()
        self.evict(chosen, "loaded", loaded_tokens=n_tokens)
        return True

    def restore(self, ctx: Context, seq: int, buf: Buffer | None, site: str) -> bool:
        """``set_data_ext(buf) == buf.size()`` -- note 0 == 0 for an emptied buffer."""
        want = buf.size if buf is not None else 0
        return ctx.set_data(self.heap, seq, buf, site) == want

    # -- update ------------------------------------------------------------------------------

    def update(self) -> None:
        """server-task.cpp: server_prompt_cache::update: the design's ``update_evictions``."""
        sizes = self.accounted_sizes()
        toks = [e.prompt.n_tokens for e in self.entries]
        picked = self.design.update_evictions(sizes, toks, self.limit_size, self.limit_tokens)
        victims = self._entries_at([i for i, _ in picked])
        for victim, (_, reason) in zip(victims, picked, strict=True):
            if reason == "limit_bytes":
                self._evict_all([victim], reason, [], 0)
            else:
                self.evict(victim, reason)
        self.heap.emit(
            ev.CacheState(n=len(self.entries), size=self.size(), limit=self.limit_size, n_tokens=self.n_tokens())
        )


class _LazySizes(Sequence[int]):
    """The entries' sizes as counted, computed at the first look (``is_oversize`` of the C++
    never looks: the hot path pays nothing for a design that does not)."""

    def __init__(self, cache: PromptCache, new_bufs: list[Buffer]) -> None:
        self._cache, self._new = cache, new_bufs
        self._sizes: list[int] | None = None

    def _get(self) -> list[int]:
        if self._sizes is None:
            self._sizes = self._cache.accounted_sizes(self._new)
        return self._sizes

    def __len__(self) -> int:
        return len(self._get())

    @overload
    def __getitem__(self, i: int) -> int: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[int]: ...

    def __getitem__(self, i: int | slice) -> int | Sequence[int]:
        return self._get()[i]

    def __iter__(self) -> Iterator[int]:
        return iter(self._get())
