"""Prompt cache replay: alloc (save), load and update, checked against ``pcspec.model.policy``.

The cache's ``srv`` lines come in groups that each belong to one call (server-task.cpp):

* ``prompt_save`` + ``alloc``: "saving prompt", then at most one of "already in the cache" /
  "exceeds cache size limit", then "removing obsolete" and "making room" lines, then nothing on
  success (the entry is appended), or the bad_alloc pair, or (#30137) "failed to save complete
  prompt state";
* ``load``: "looking for better prompt", one line per entry (#26218), "found better prompt",
  "failed to restore state";
* ``update``: "cache size limit reached" / "cache token limit" evictions, "cache state" and
  one line per remaining entry.

A group is judged when the first line that is not part of it arrives. Sizes are ``Approx``
intervals (see ``pcspec.logcheck.mib``): a limit check fails only when it fails for every byte
count the logged MiB values allow. The cache's entry list is ``exact`` when the log showed it
from an empty start or a "cache state" listing; without that, checks that need it are skipped
until the next listing resynchronises it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from pcspec.logcheck import events as ev
from pcspec.logcheck.context import Context
from pcspec.logcheck.doubt import Doubt, settle
from pcspec.logcheck.mib import Approx, prints_as, total
from pcspec.logcheck.slots import SlotChecker
from pcspec.logcheck.state import Ckpt, Entry
from pcspec.logcheck.stats import avoidable_evictions, shared_with_slots_mib, unique_mib
from pcspec.model import policy
from pcspec.model.design import Design
from pcspec.model.designs import Fixed

SAVE_LINES = (
    ev.CacheAlreadyCached, ev.CacheOversize, ev.CacheObsoleteRemoved, ev.CacheMakeRoom,
    ev.CacheAllocFailed, ev.CacheLimitReduced, ev.SaveFailed,
)
LOAD_LINES = (ev.LoadCandidate, ev.LoadFound, ev.LoadRestoreFailed)
UPDATE_LINES = (ev.CacheLimitEvict, ev.CacheTokenEvict, ev.CacheSummary, ev.CacheSummaryEntry)

_MAX_BRANCHES = 4096  # ambiguous comparisons explored by the load-choice check


@dataclass(slots=True)
class _Save:
    head: ev.PromptSave
    slot: int | None
    ckpts: list[Ckpt] | None
    new_size: Approx
    outcome: str = "pending"  # pending | skipped | failed
    before_room: list[Entry] | None = None
    room: list[ev.CacheMakeRoom] = field(default_factory=list)
    obsolete_from: int = 0


@dataclass(slots=True)
class _Load:
    head: ev.LoadLookup
    slot: int | None
    sel: tuple[int, int | None] | None  # (lcp0, n_new) from the slot selection
    cands: list[ev.LoadCandidate] = field(default_factory=list)
    found: ev.LoadFound | None = None
    failed: ev.LoadRestoreFailed | None = None


@dataclass(slots=True)
class _Update:
    line: int
    before: list[Entry]
    bytes_ev: list[ev.CacheLimitEvict] = field(default_factory=list)
    tokens_ev: list[ev.CacheTokenEvict] = field(default_factory=list)
    summary: ev.CacheSummary | None = None
    rows: list[ev.CacheSummaryEntry] = field(default_factory=list)


# a value of load's comparison: exact (lo == hi, a Fraction) or a logged %.3f interval
_Val = tuple[Fraction | float, Fraction | float]


def _row_problems(x: Entry, r: ev.CacheSummaryEntry) -> list[str]:
    """How a "cache state" per-entry line differs from the entry (lengths, checkpoints, sizes)."""
    problems = []
    if x.n_tokens != r.n_tokens:
        problems.append(f"{r.n_tokens} tokens, expected {x.n_tokens}")
    if x.n_ckpts is not None and r.n_ckpts is not None and x.n_ckpts != r.n_ckpts:
        problems.append(f"{r.n_ckpts} checkpoints, expected {x.n_ckpts}")
    if not x.size.overlaps(Approx.logged(r.size_mib)):
        problems.append(f"{r.size_mib:.3f} MiB, expected {x.size.show()} (state + "
                        "checkpoints at save)")
    return problems


def _rows_fit(entries: list[Entry], rows: list[ev.CacheSummaryEntry]) -> bool:
    """A "cache state" listing can be of these entries."""
    return len(entries) == len(rows) and not any(
        _row_problems(x, r) for x, r in zip(entries, rows, strict=True))


def _logged(v: float) -> _Val:
    return (v - 0.0005 - 1e-9, v + 0.0005 + 1e-9)


def _exact(num: int, den: int) -> _Val:
    f = Fraction(num, den)
    return (f, f)


class CacheChecker:
    def __init__(self, ctx: Context, slots: SlotChecker, exact_start: bool,
                 candidates_visible: bool) -> None:
        self.ctx = ctx
        self.slots = slots
        self.entries: list[Entry] = []
        self.exact = exact_start
        self.doubt: Doubt | None = None  # an obsolete removal among equal lengths (L2)
        self.candidates_visible = candidates_visible
        self.txn: _Save | _Load | _Update | None = None
        self.ctx_slot: int | None = None  # the slot the next srv cache lines belong to
        self.sel: tuple[int, int | None] | None = None

    # ---- transaction boundaries ----------------------------------------------------------

    def flush_unless_part(self, e: ev.Event) -> None:
        """Judge the open group when ``e`` does not belong to it."""
        t = self.txn
        if t is None:
            return
        if isinstance(t, _Save) and isinstance(e, SAVE_LINES) and (
                not isinstance(e, ev.SaveFailed) or e.slot == t.slot):
            return
        if isinstance(t, _Load) and (isinstance(e, LOAD_LINES) or (
                isinstance(e, ev.StateRead) and t.found is not None)):
            return
        if isinstance(t, _Update) and isinstance(e, UPDATE_LINES):
            new_round = t.summary is not None and isinstance(
                e, ev.CacheLimitEvict | ev.CacheTokenEvict | ev.CacheSummary)
            if not new_round:
                return
        self.flush()

    def loading(self) -> bool:
        """A load has picked an entry and is restoring its state (server-task.cpp:1827-1860):
        the state lines that follow are the entry's."""
        return isinstance(self.txn, _Load) and self.txn.found is not None

    def flush(self) -> None:
        t, self.txn = self.txn, None
        if isinstance(t, _Save):
            self._commit_save(t)
        elif isinstance(t, _Load):
            self._commit_load(t)
        elif isinstance(t, _Update):
            self._commit_update(t)

    # ---- alloc -------------------------------------------------------------------------------

    def on_save(self, e: ev.PromptSave) -> None:
        sid = self.ctx_slot
        ckpts: list[Ckpt] | None = None
        if sid is not None:
            # the slot's length, which can show a slot-file restore the log did not (L1)
            self.slots.on_seen_count(sid, e.length)
            s = self.slots.slot(sid)
            self.slots.settle(s)
            ckpts = list(s.ckpts) if s.exact else None
        state = Approx.logged(e.state_mib)
        # "total state size" may or may not include the draft; allow both
        data = Approx(state.lo, state.hi + (Approx.logged(e.draft_mib).hi if e.draft_mib else 0))
        new_size = data + total([c.size for c in ckpts]) if ckpts is not None else Approx(
            data.lo, Approx.unknown().hi)
        self.txn = _Save(e, sid, ckpts, new_size)

    def on_save_line(self, e: ev.Event) -> None:
        t = self.txn
        if not isinstance(t, _Save):
            return  # a stray alloc line: its prompt_save line was not shown
        ctx = self.ctx
        if isinstance(e, ev.CacheAlreadyCached):
            t.outcome = "skipped"
            ctx.stats.cache_skipped_already += 1
            if self.exact and not any(x.n_tokens >= t.head.length for x in self.entries):
                ctx.deviate(e.line, "cache-contain",
                            f"prompt of {t.head.length} tokens reported as already cached, but no "
                            f"entry is that long (entries: {self._lengths()})")
        elif isinstance(e, ev.CacheOversize):
            t.outcome = "skipped"
            ctx.stats.cache_skipped_oversize += 1
            self._check_oversize_line(t, e)
        elif isinstance(e, ev.CacheObsoleteRemoved):
            self._obsolete(t, e)
        elif isinstance(e, ev.CacheMakeRoom):
            if t.before_room is None:
                t.before_room = list(self.entries)
            t.room.append(e)
            ctx.stats.evict_make_room += 1
            design = ctx.rules.own("make_room")
            if design is None:
                self._pop_front(e.line, e.size_mib, "cache-make-room", "making room")
            else:
                self._pop_planned(t, e, design)
        elif isinstance(e, ev.CacheAllocFailed):
            t.outcome = "failed"
            ctx.stats.cache_alloc_failed += 1
        elif isinstance(e, ev.CacheLimitReduced):
            self._limit_reduced(e)
        elif isinstance(e, ev.SaveFailed):
            t.outcome = "failed"
            ctx.stats.cache_save_failed += 1

    def _check_oversize_line(self, t: _Save, e: ev.CacheOversize) -> None:
        ctx = self.ctx
        size, limit = Approx.logged(e.size_mib), Approx.logged(e.limit_mib)
        if ctx.config.no_limit:
            ctx.deviate(e.line, "cache-oversize",
                        "entry skipped as over the size limit, but the cache has no byte limit")
        elif ctx.config.limit is not None and not limit.overlaps(ctx.config.limit):
            ctx.deviate(e.line, "cache-limit",
                        f"skip line names a limit of {e.limit_mib:.3f} MiB, the cache's is "
                        f"{ctx.config.limit.show()}")
        if not policy.is_oversize(size.bytes_hi(), limit.bytes_lo()):
            ctx.deviate(e.line, "cache-oversize",
                        f"entry of {e.size_mib:.3f} MiB skipped as over the limit of "
                        f"{e.limit_mib:.3f} MiB (is_oversize is false)")
        if t.ckpts is not None and not t.new_size.overlaps(size):
            ctx.deviate(e.line, "cache-oversize",
                        f"skip line gives the entry {e.size_mib:.3f} MiB but state + checkpoints "
                        f"of the slot give {t.new_size.show()}")

    def _obsolete(self, t: _Save, e: ev.CacheObsoleteRemoved) -> None:
        ctx = self.ctx
        ctx.stats.obsolete_removed += 1
        if e.length >= t.head.length:
            ctx.deviate(e.line, "cache-obsolete",
                        f"removed an entry of {e.length} tokens as obsolete for a prompt of "
                        f"{t.head.length}: an obsolete entry is a strict prefix of the new prompt")
        same = [i for i in range(t.obsolete_from, len(self.entries))
                if self.entries[i].n_tokens == e.length]
        idx = same[0] if same else None
        if self.doubt is not None and (self.doubt.line == t.head.line
                                       or self.doubt.gone.n_tokens == e.length):
            # where this pass of alloc is, or which entry it takes, depends on the unsettled one
            self._give_up()
        if idx is None:
            if self.exact:
                ctx.deviate(e.line, "cache-obsolete",
                            f"removed an obsolete entry of {e.length} tokens which the cache "
                            f"does not hold (entries: {self._lengths()})")
                # the tracked list is wrong from here on: relearn it from the next listing
                self.exact = False
            return
        if len(same) > 1 and self.exact:
            self.doubt = Doubt(self.entries[idx], [self.entries[i] for i in same[1:]],
                               t.head.line)
        del self.entries[idx]
        t.obsolete_from = idx

    def _counted(self, entries: list[Entry], new: Sequence[Ckpt] = ()) -> list[Approx]:
        """Each entry's size as the cache counts it, front first. ``entry_sizes`` as ``Fixed``'s: what no
        later entry (nor the new entry's checkpoints ``new``) holds, so that the sizes add up to
        the unique total and the FIFO loops pop what they free (model: cache.unique_sizes)."""
        if not self.ctx.rules.runs("entry_sizes", Fixed):
            return [x.size for x in entries]
        seen = {c.uid for c in new}
        out: list[Approx] = []
        for x in reversed(entries):
            size = x.size
            for c in x.ckpts or ():
                if c.uid in seen:
                    size = size.minus(c.size)
                else:
                    seen.add(c.uid)
            out.append(size)
        out.reverse()
        return out

    def _limit_reduced(self, e: ev.CacheLimitReduced) -> None:
        ctx = self.ctx
        got = Approx.logged(e.limit_mib)
        if self.exact:
            size = total(self._counted(self.entries))
            lo = policy.limit_after_bad_alloc(size.bytes_lo())
            hi = policy.limit_after_bad_alloc(size.bytes_hi())
            if got.bytes_hi() < lo or got.bytes_lo() > hi:
                ctx.deviate(e.line, "cache-limit",
                            f"limit reduced to {e.limit_mib:.3f} MiB after bad_alloc, but 40 % "
                            f"of the cache's {size.show()} is {lo / 1048576:.3f}.."
                            f"{hi / 1048576:.3f} MiB")
        ctx.config.limit, ctx.config.no_limit = got, False

    def _commit_save(self, t: _Save) -> None:
        ctx = self.ctx
        if t.outcome == "pending":
            ctx.stats.cache_saves += 1
            lim = ctx.config.limit_bytes()
            if self.exact and lim is not None:
                self._check_make_room(t, lim)
            elif t.room:
                ctx.weaken("make-room: cache contents or limit not in the log")
            self.entries.append(Entry(t.head.length, t.new_size, t.ckpts,
                                      len(t.ckpts) if t.ckpts is not None else None, t.head.line))
            if self.exact and lim is not None and lim[1] > 0:
                size = min((total(self._counted(v)) for v in self._views(self.entries)),
                           key=lambda a: a.bytes_lo())
                if size.bytes_lo() > lim[1]:
                    ctx.deviate(t.head.line, "cache-limit",
                                f"after saving, the cache holds {size.show()}, above its limit of "
                                f"{self._limit('?')}")
        if t.slot is not None:
            s = self.slots.slot(t.slot)
            if s.clear_after_save:
                # idle-slot caching with a unified KV clears the slot whether or not the save
                # succeeded (process_single_task, [TAG_IDLE_SLOT_CLEAR])
                self.slots.clear(t.slot)

    def _check_make_room(self, t: _Save, lim: tuple[int, int]) -> None:
        ctx = self.ctx
        before = t.before_room if t.before_room is not None else list(self.entries)
        n = len(t.room)
        # (no byte limit, (0, 0): nothing is oversize, make_room pops nothing)
        if policy.is_oversize(t.new_size.bytes_lo(), lim[1]):
            ctx.deviate(t.head.line, "cache-oversize",
                        f"entry of {t.new_size.show()} saved although it exceeds the limit "
                        f"of {self._limit('?')}")
            return
        # an unsettled obsolete removal (L2): the count must fit one of its views
        new = t.ckpts or ()
        design = ctx.rules.own("make_room")

        def room(view: list[Entry], lo: bool) -> int:
            if design is None:
                sizes = [s.bytes_lo() if lo else s.bytes_hi() for s in self._counted(view, new)]
                return policy.make_room(sizes, t.new_size.bytes_lo() if lo else t.new_size.bytes_hi(),
                                        lim[1] if lo else lim[0])
            # a design's own rule, asked again after each eviction as the model asks it
            left, n = list(view), 0
            while left and lim[1] > 0:
                counted = self._counted(left, new)
                picked = design.make_room([s.bytes_lo() if lo else s.bytes_hi() for s in counted],
                                          t.new_size.bytes_lo() if lo else t.new_size.bytes_hi(),
                                          lim[1] if lo else lim[0])
                if not picked or any(not 0 <= i < len(left) for i in picked):
                    break
                gone = {id(left[i]) for i in picked}
                left = [x for x in left if id(x) not in gone]
                n += len(gone)
            return n

        fits = [(room(v, True), room(v, False)) for v in self._views(before)]
        fits = [(min(a, b), max(a, b)) for a, b in fits]
        n_lo, n_hi = next(((lo, hi) for lo, hi in fits if lo <= n <= hi), fits[0])
        if not n_lo <= n <= n_hi:
            want = str(n_lo) if n_lo == n_hi else f"{n_lo}..{n_hi}"
            line = t.room[-1].line if t.room else t.head.line
            ctx.deviate(line, "cache-make-room",
                        f"alloc evicted {n} entr{'y' if n == 1 else 'ies'} for a new entry of "
                        f"{t.new_size.show()}, make_room over {self._sizes(before)} with limit "
                        f"{self._limit('none')} gives {want}")
        if n and ctx.config.limit is not None:
            kept, kept_mib = avoidable_evictions(before, n, ctx.config.limit.mid,
                                                 t.head.state_mib, t.ckpts or ())
            ctx.stats.evictions_avoidable += kept
            ctx.stats.evictions_avoidable_mib += kept_mib

    # ---- load --------------------------------------------------------------------------------

    def on_lookup(self, e: ev.LoadLookup) -> None:
        sid = self.ctx_slot
        if sid is not None:
            # the base f_keep is lcp / the slot's length (-1 for an empty slot,
            # server-task.cpp:1796): it can show a slot-file restore the log did not (L1)
            if e.f_keep == -1.0:
                self.slots.on_seen_count(sid, 0)
            elif self.sel is not None:
                self.slots.on_seen_length(sid, self.sel[0], e.f_keep)
        self.txn = _Load(e, sid, self.sel)

    def on_load_line(self, e: ev.Event) -> None:
        t = self.txn
        if not isinstance(t, _Load):
            return
        if isinstance(e, ev.LoadCandidate):
            t.cands.append(e)
        elif isinstance(e, ev.LoadFound):
            t.found = e
        elif isinstance(e, ev.LoadRestoreFailed):
            t.failed = e

    def _commit_load(self, t: _Load) -> None:
        ctx = self.ctx
        ctx.stats.cache_lookups += 1
        listed = self.candidates_visible
        if listed:
            lengths = [c.length for c in t.cands]
            self._settle(lambda v: [x.n_tokens for x in v] == lengths)
        if listed and self.exact and [c.length for c in t.cands] != [x.n_tokens for x in
                                                                      self.entries]:
            ctx.deviate(t.head.line, "load-scan",
                        f"load scanned entries of {[c.length for c in t.cands]} tokens but the "
                        f"cache holds {self._lengths()}")
            self.exact = False
        for c in t.cands:
            if c.length > 0 and not prints_as(c.lcp / c.length, c.f_keep):
                ctx.deviate(c.line, "load-scan",
                            f"entry of {c.length} tokens with lcp {c.lcp} printed f_keep = "
                            f"{c.f_keep:.3f}, lcp / length is {c.lcp / c.length:.4f}")
        chosen = self._check_load_choice(t) if listed else None
        sid = t.slot
        if t.found is None:
            return
        if t.failed is not None:
            ctx.stats.cache_load_failed += 1
            if chosen is not None and t.failed.draft and self.exact and chosen < len(
                    self.entries):
                # the target was restored and its buffer cleared before the draft failed
                self.entries[chosen].size = Approx.unknown()
            if sid is not None:
                self.slots.load_failed(sid)
            return
        ctx.stats.cache_loads += 1
        if chosen is None or not self.exact or chosen >= len(self.entries):
            # which entry left the cache is not known (no per-entry lines, or an untracked
            # cache): relearn the cache from the next listing
            self.exact = False
            if sid is not None:
                pick = t.cands[chosen] if chosen is not None else None
                self.slots.hand_over(sid, None, pick.length if pick else None,
                                     pick.lcp if pick else None)
            return
        if self.doubt is not None and len({id(v[chosen]) for _, v in self.doubt.views(
                self.entries) if chosen < len(v)}) > 1:
            # the loaded entry is one of the unsettled ones: its checkpoints are not known
            self._give_up()
            if sid is not None:
                self.slots.hand_over(sid, None, t.cands[chosen].length, t.cands[chosen].lcp)
            return
        entry = self.entries.pop(chosen)  # the hand-over: a loaded entry leaves the cache
        if sid is not None:
            self.slots.hand_over(sid, entry.ckpts, entry.n_tokens, t.cands[chosen].lcp)

    def _load_choices(self, t: _Load) -> set[int | None] | None:
        """What load_select may return given the log. With the slot's lcp and the new prompt's
        length from the slot selection ("checking sim = ... (lcp/n)") and the slot's length,
        every fraction is exact and policy.load_select decides; otherwise the printed 3-decimal
        values are intervals and every outcome they allow is accepted."""
        lcp0, n_new = t.sel if t.sel is not None else (None, None)
        sid = t.slot
        n_slot = self.slots.slot(sid).n_tokens if sid is not None else None
        if lcp0 is not None and n_new and n_slot is not None:
            base = policy.load_baseline(lcp0, n_slot, n_new)
            cands = [policy.entry_fractions(c.lcp, c.length, n_new) for c in t.cands]
            printed = [(t.head.f_keep, t.head.f_sim)] + [(c.f_keep, c.f_sim) for c in t.cands]
            computed = [base, *cands]
            # use the exact values only when they print as the log does (the tracked slot
            # length could be stale)
            if all(prints_as(x, a) and prints_as(y, b)
                   for (a, b), (x, y) in zip(printed, computed, strict=True)):
                return {policy.load_select(base[0], base[1], cands)}
        base_keep: _Val = ((Fraction(-1), Fraction(-1)) if t.head.f_keep == -1.0
                           else _logged(t.head.f_keep))
        base_sim = _logged(t.head.f_sim)
        vals: list[tuple[_Val, _Val]] = []
        for c in t.cands:
            fk = _exact(c.lcp, c.length) if c.length > 0 else _logged(c.f_keep)
            vals.append((fk, _logged(c.f_sim)))
        return _possible_choices(base_keep, base_sim, vals)

    def _check_load_choice(self, t: _Load) -> int | None:
        """Judge the found entry against load_select; return its index (None if none)."""
        possible = self._load_choices(t)
        ctx = self.ctx
        if t.found is None:
            observed: list[int | None] = [None]
        else:
            f = t.found
            observed = [i for i, c in enumerate(t.cands)
                        if abs(c.f_keep - f.f_keep) < 1e-9 and abs(c.f_sim - f.f_sim) < 1e-9]
            if not observed:
                ctx.deviate(f.line, "load-scan",
                            f"found f_keep = {f.f_keep:.3f}, f_sim = {f.f_sim:.3f} which no "
                            "scanned entry has")
                return None
        if possible is None:
            ctx.weaken("load choice: too many comparisons within the 3-decimal rounding")
            return observed[0]
        agree = [i for i in observed if i in possible]
        if agree:
            return agree[0]
        got = observed[0]
        want = " or ".join("no entry" if i is None else
                           f"the entry of {t.cands[i].length} tokens" for i in
                           sorted(possible, key=lambda i: -1 if i is None else i))
        what = "no entry" if got is None else f"the entry of {t.cands[got].length} tokens"
        line = t.found.line if t.found is not None else t.head.line
        ctx.deviate(line, "load-choice",
                    f"load took {what} but load_select (f_keep >= 0.25 and strictly better on "
                    f"f_keep and f_sim than base f_keep = {t.head.f_keep:.3f}, f_sim = "
                    f"{t.head.f_sim:.3f} and any earlier pick) allows {want}")
        return got

    # ---- update ------------------------------------------------------------------------------

    def on_update_line(self, e: ev.Event) -> None:
        t = self.txn
        if not isinstance(t, _Update):
            t = _Update(e.line, list(self.entries))
            self.txn = t
        if isinstance(e, ev.CacheLimitEvict):
            t.bytes_ev.append(e)
            self.ctx.stats.evict_limit_bytes += 1
            self._pop_front(e.line, e.size_mib, "cache-evict", "byte limit")
        elif isinstance(e, ev.CacheTokenEvict):
            t.tokens_ev.append(e)
            self.ctx.stats.evict_limit_tokens += 1
            self._pop_front(e.line, e.size_mib, "cache-evict", "token limit")
        elif isinstance(e, ev.CacheSummary):
            t.summary = e
        elif isinstance(e, ev.CacheSummaryEntry):
            t.rows.append(e)

    def _commit_update(self, t: _Update) -> None:
        ctx = self.ctx
        lim = ctx.config.limit_bytes()
        n_b = len(t.bytes_ev)
        if t.summary is not None:
            self._learn_limits(t.summary)
            lim = ctx.config.limit_bytes()
            if len(t.rows) == t.summary.n_prompts:
                # the evictions were applied as their lines came: the rows are what is left
                self._settle(lambda v: _rows_fit(v, t.rows), t)
        before = t.before
        if self.doubt is not None and not self.doubt.same_sizes():
            ctx.weaken("update evictions: which of two equal-length entries an obsolete "
                       "removal took is not in the log")
        elif self.exact and lim is not None:
            toks = [x.n_tokens for x in before]
            counted = self._counted(before)
            b_lo = policy.update_evictions([s.bytes_lo() for s in counted], toks, lim[1], 0)[0]
            b_hi = policy.update_evictions([s.bytes_hi() for s in counted], toks, lim[0], 0)[0]
            if not b_lo <= n_b <= b_hi:
                want = str(b_lo) if b_lo == b_hi else f"{b_lo}..{b_hi}"
                ctx.deviate(t.bytes_ev[0].line if t.bytes_ev else t.line, "cache-evict",
                            f"update evicted {n_b} entr{'y' if n_b == 1 else 'ies'} for the byte "
                            f"limit, but update_evictions over {self._sizes(before)} with limit "
                            f"{self._limit('none')} gives "
                            f"{want}")
            self._check_token_stage(t, before[n_b:], lim)
            if n_b and ctx.config.limit is not None:
                kept, kept_mib = avoidable_evictions(before, n_b, ctx.config.limit.mid)
                ctx.stats.evictions_avoidable += kept
                ctx.stats.evictions_avoidable_mib += kept_mib
        elif n_b or t.tokens_ev:
            ctx.weaken("update evictions: cache contents or limit not in the log")
        if t.summary is not None:
            self._check_summary(t.summary, t.rows)

    def _check_token_stage(self, t: _Update, rest: list[Entry], lim: tuple[int, int]) -> None:
        """update(): evict while n_tokens() > limit_tokens_cur, the estimate of
        token_limit_estimate after the byte stage."""
        ctx = self.ctx
        cur = t.tokens_ev[0].est if t.tokens_ev else (
            t.summary.est if t.summary is not None else None)
        limit_tokens = (t.tokens_ev[0].limit_tokens if t.tokens_ev
                        else ctx.config.limit_tokens)
        if cur is None or limit_tokens is None or limit_tokens <= 0:
            return
        size = total(self._counted(rest))
        toks = sum(x.n_tokens for x in rest)
        # the estimate falls as the size per token grows: bound it by both ends
        est_lo = policy.token_limit_estimate(size.bytes_hi(), toks, lim[0], limit_tokens)
        est_hi = policy.token_limit_estimate(size.bytes_lo(), toks, lim[1], limit_tokens)
        if not est_lo <= cur <= est_hi and size.known:
            ctx.deviate(t.tokens_ev[0].line if t.tokens_ev else t.line, "cache-limit",
                        f"token limit estimate {cur}, but token_limit_estimate({size.show()}, "
                        f"{toks} tokens, limit, {limit_tokens}) gives {est_lo}..{est_hi}")
        k = policy.token_evictions([x.n_tokens for x in rest], cur)
        if k != len(t.tokens_ev):
            ctx.deviate(t.tokens_ev[0].line if t.tokens_ev else t.line, "cache-evict",
                        f"update evicted {len(t.tokens_ev)} entries for the token limit, but "
                        f"{toks} tokens in {[x.n_tokens for x in rest]} against {cur} need {k}")

    def _learn_limits(self, sm: ev.CacheSummary) -> None:
        ctx = self.ctx
        cfg = ctx.config
        logged = Approx.logged(sm.limit_mib)
        if cfg.no_limit:
            if sm.limit_mib != 0.0:
                ctx.deviate(sm.line, "cache-limit",
                            f"summary gives a limit of {sm.limit_mib:.3f} MiB but the cache "
                            "started with no byte limit; the summary's is adopted")
                cfg.no_limit, cfg.limit = False, logged
        elif cfg.limit is None:
            if sm.limit_mib == 0.0:
                cfg.no_limit = True
            else:
                cfg.limit = logged
        elif not logged.overlaps(cfg.limit):
            ctx.deviate(sm.line, "cache-limit",
                        f"summary gives a limit of {sm.limit_mib:.3f} MiB, the cache's is "
                        f"{cfg.limit.show()}; the summary's is adopted")
            # the server's limit is the one it prints at every update (limit_size,
            # server-task.cpp:1894-1895 at 0c1e570)
            cfg.limit = logged
        if cfg.limit_tokens is None:
            cfg.limit_tokens = sm.limit_tokens
        elif cfg.limit_tokens != sm.limit_tokens:
            ctx.deviate(sm.line, "cache-limit",
                        f"summary gives a token limit of {sm.limit_tokens}, earlier "
                        f"{cfg.limit_tokens} (limit_tokens is fixed at start-up)")
            cfg.limit_tokens = sm.limit_tokens

    def _check_summary(self, sm: ev.CacheSummary, rows: list[ev.CacheSummaryEntry]) -> None:
        ctx = self.ctx
        stats = ctx.stats
        deviating: Entry | None = None  # the entry whose listing line deviated
        if sm.total_mib > stats.peak_cache_mib:
            stats.peak_cache_mib, stats.peak_cache_line = sm.total_mib, sm.line
            stats.peak_cache_prompts = sm.n_prompts
        if self.exact:
            if sm.n_prompts != len(self.entries):
                ctx.deviate(sm.line, "cache-summary",
                            f"'cache state: {sm.n_prompts} prompts' but the cache holds "
                            f"{len(self.entries)} ({self._lengths()})")
            else:
                size = total(self._counted(self.entries))
                if size.overlaps(Approx.logged(sm.total_mib)):
                    pass
                elif any(x.deviated for x in self.entries):
                    ctx.knock_on()  # a size adopted from a deviating listing line
                else:
                    ctx.deviate(sm.line, "cache-summary",
                                f"'cache state' totals {sm.total_mib:.3f} MiB but its entries "
                                f"add up to {size.show()}")
                if rows and len(rows) == len(self.entries):
                    deviating = self._check_rows(rows)
            if rows and len(rows) != sm.n_prompts:
                ctx.deviate(sm.line, "cache-summary",
                            f"'cache state: {sm.n_prompts} prompts' followed by {len(rows)} "
                            "entry lines")
        # resynchronise from the listing (the log is the truth from here on)
        if rows and len(rows) == sm.n_prompts:
            if [r.n_tokens for r in rows] == [x.n_tokens for x in self.entries]:
                for x, r in zip(self.entries, rows, strict=True):
                    x.deviated = x is deviating
                    x.size = Approx.logged(r.size_mib)
                    if r.n_ckpts is not None:
                        x.n_ckpts = r.n_ckpts
            else:
                self.entries = [Entry(r.n_tokens, Approx.logged(r.size_mib), None, r.n_ckpts,
                                      r.line) for r in rows]
                self.doubt = None
            self.exact = True
        elif sm.n_prompts == 0:
            self.entries, self.exact, self.doubt = [], True, None
        if self.exact:
            accounted = sum(x.size.mid for x in self.entries)
            unique = unique_mib(self.entries)
            stats.unique_summaries += 1
            if accounted - unique > stats.unique_max_gap_mib:
                stats.unique_max_gap_mib = accounted - unique
                stats.unique_max_gap_line = sm.line
                stats.unique_accounted_at_gap, stats.unique_at_gap = accounted, unique
            shared = shared_with_slots_mib(self.entries, self.slots.all_ckpts())
            stats.shared_with_slots_max_mib = max(stats.shared_with_slots_max_mib, shared)

    def _check_rows(self, rows: list[ev.CacheSummaryEntry]) -> Entry | None:
        """Judge the per-entry lines; the first entry whose line deviates (its listed size is
        adopted, and a later disagreement about it is that deviation again), if any."""
        ctx = self.ctx
        for x, r in zip(self.entries, rows, strict=True):
            problems = _row_problems(x, r)
            if problems and x.deviated:
                ctx.knock_on()
            elif problems:
                ctx.deviate(r.line, "cache-summary",
                            "cache entry listed with " + ", ".join(problems))
                return x
        return None

    # ---- helpers -----------------------------------------------------------------------------

    def _picks(self, design: Design, entries: list[Entry], t: _Save) -> list[Entry]:
        """The entries a design's own ``make_room`` would evict next from ``entries`` (its first
        pick over the sizes as the log bounds them, at either end), as the model asks it."""
        lim = self.ctx.config.limit_bytes()
        if lim is None or lim[1] <= 0 or not entries:
            return []
        counted = self._counted(entries, t.ckpts or ())
        out: list[Entry] = []
        for sizes, new, limit in (([s.bytes_lo() for s in counted], t.new_size.bytes_lo(), lim[1]),
                                  ([s.bytes_hi() for s in counted], t.new_size.bytes_hi(), lim[0])):
            picked = design.make_room(sizes, new, limit)
            if picked and 0 <= picked[0] < len(entries) and entries[picked[0]] not in out:
                out.append(entries[picked[0]])
        return out

    def _pop_planned(self, t: _Save, e: ev.CacheMakeRoom, design: Design) -> None:
        """A make-room eviction of a design with its own ``make_room``: the entry the design picks
        next (asked again after each eviction, as the model asks it), not the oldest."""
        if not self.exact or self.ctx.config.limit_bytes() is None:
            self.ctx.weaken("make-room: the design's own make_room over a cache or limit not in the log")
            self._pop_front(e.line, e.size_mib, "cache-make-room", "making room")
            return
        logged = Approx.logged(e.size_mib)
        picks = self._picks(design, self.entries, t)
        hit = next((x for x in picks if x.size.overlaps(logged)), None)
        if hit is not None:
            self.entries.remove(hit)
            return
        want = " or ".join(f"{x.n_tokens} tokens ({x.size.show()})" for x in picks) or "nothing"
        self.ctx.deviate(e.line, "cache-make-room",
                         f"evicted an entry of {e.size_mib:.3f} MiB (making room) but {design.name}'s make_room "
                         f"evicts {want} next")
        # (then the checker adopts what the log shows: the entry of that size, else the oldest)
        gone = next((x for x in self.entries if x.size.overlaps(logged)), self.entries[0] if self.entries else None)
        if gone is not None:
            self.entries.remove(gone)

    def _pop_front(self, line: int, size_mib: float, rule: str, why: str) -> None:
        logged = Approx.logged(size_mib)
        self._settle(lambda v: bool(v) and v[0].size.overlaps(logged), self.txn)
        if self.doubt is not None and len({id(v[0]) for _, v in self.doubt.views(self.entries)
                                           if v}) > 1:
            self._give_up()  # the oldest entry is one of the unsettled ones
        if not self.entries:
            if self.exact:
                self.ctx.deviate(line, rule, f"evicted an entry ({why}) from an empty cache")
            return
        front = self.entries[0]
        if self.exact and not front.size.overlaps(Approx.logged(size_mib)):
            self.ctx.deviate(line, rule,
                             f"evicted an entry of {size_mib:.3f} MiB ({why}) but the oldest "
                             f"entry ({front.n_tokens} tokens) holds {front.size.show()}")
        self.entries.pop(0)

    def _settle(self, fits: Callable[[list[Entry]], bool],
                txn: _Save | _Load | _Update | None = None) -> None:
        """Drop the views of an unsettled obsolete removal that a logged fact rules out (L2);
        an adopted view also replaces the copies an open group took of the list."""
        if self.doubt is None or not self.exact:
            return
        doubt = self.doubt
        s = settle(doubt, self.entries, fits)
        self.entries, self.doubt, self.exact = s.entries, s.doubt, s.exact
        if s.swapped is not None:
            if isinstance(txn, _Update):
                txn.before = doubt.swap(txn.before, s.swapped)
            elif isinstance(txn, _Save) and txn.before_room is not None:
                txn.before_room = doubt.swap(txn.before_room, s.swapped)

    def _views(self, entries: list[Entry]) -> list[list[Entry]]:
        """``entries`` as the cache may hold them (more than one while a removal is unsettled)."""
        return [entries] if self.doubt is None else [v for _, v in self.doubt.views(entries)]

    def _give_up(self) -> None:
        """The list is no longer known: relearn it from the next listing."""
        self.doubt = None
        self.exact = False

    def _limit(self, unknown: str) -> str:
        return self.ctx.config.limit.show() if self.ctx.config.limit else unknown

    def _lengths(self) -> list[int]:
        return [x.n_tokens for x in self.entries]

    @staticmethod
    def _sizes(entries: list[Entry]) -> str:
        return "[" + ", ".join(x.size.show() for x in entries) + "]"


def _possible_choices(base_keep: _Val, base_sim: _Val,
                      cands: list[tuple[_Val, _Val]]) -> set[int | None] | None:
    """Every result load_select can give when each value may lie anywhere in its interval
    (server_prompt_cache::load). None when the ambiguity is too large to enumerate."""
    results: set[int | None] = set()
    budget = [_MAX_BRANCHES]

    def walk(i: int, best: int | None, keep: _Val, sim: _Val) -> bool:
        if budget[0] <= 0:
            return False
        if i == len(cands):
            results.add(best)
            budget[0] -= 1
            return True
        fk, fs = cands[i]
        # load_takes at the ends of the intervals: with the values most and least in favour
        if policy.load_takes(keep[1], sim[1], fk[0], fs[0]):
            options = [True]  # True = taken as the new best
        elif policy.load_takes(keep[0], sim[0], fk[1], fs[1]):
            options = [True, False]
        else:
            options = [False]
        for take in options:
            ok = walk(i + 1, i, fk, fs) if take else walk(i + 1, best, keep, sim)
            if not ok:
                return False
        return True

    if not walk(0, None, base_keep, base_sim):
        return None
    return results
