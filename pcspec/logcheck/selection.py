"""Slot selection (server-context.cpp: get_available_slot, 1528-1640 at 0c1e570): which slot a
task gets, and the shared-prefix length the similarity scan printed for it.

The scan prints one line per slot it looks at: "- skipping, is_processing", "- skipping, slot is
empty" or "- checking sim = f (lcp/n) > thold" (1552, 1560, 1568). Where the pick's line comes
depends on how the slot was chosen:

* unpinned: the scan runs first, then "selected slot by LCP similarity" (1581-1583, only when
  ``id_slot == -1``) or, when no slot passed the threshold, "selected slot by LRU" (1611). The
  scan lines before the pick are that task's.
* pinned (``id_slot``): "selected slot by id (N)" comes first (1537), then the scan, which looks
  at slot N only (1546-1548). The scan line after the pick is that task's; lines before it
  belong to no pick of this task.

Either way the chosen slot's lcp becomes its ``prefix_hint`` (n_past before the restore of the
next prompt start) and the cache load's ``sel`` (the exact f_keep / f_sim fractions).
"""

from __future__ import annotations

from pcspec.logcheck import events as ev
from pcspec.logcheck.cache import CacheChecker
from pcspec.logcheck.slots import SlotChecker

SCAN_LINES = (ev.SimChecked, ev.SlotSkipped)


class Selection:
    def __init__(self, slots: SlotChecker, cache: CacheChecker) -> None:
        self.slots = slots
        self.cache = cache
        self.round: dict[int, ev.SimChecked] = {}  # scan lines waiting for an unpinned pick
        self.round_empty: set[int] = set()
        self.pinned: int | None = None  # a pinned pick waiting for its scan line

    def end_of_scan(self) -> None:
        """A line other than a scan line: a pinned pick gets no more scan lines."""
        self.pinned = None

    def on_sim(self, e: ev.SimChecked) -> None:
        self._idle(e.slot)
        if self.pinned == e.slot:
            self._apply(e.slot, e.lcp, e.n_new)
            self.pinned = None
        else:
            self.round[e.slot] = e

    def on_skipped(self, e: ev.SlotSkipped) -> None:
        if e.empty:
            self._idle(e.slot)
            self.slots.on_seen_count(e.slot, 0)
        if self.pinned == e.slot:
            # an empty slot shares nothing; a busy one shares an unknown prefix
            if e.empty:
                self._apply(e.slot, 0, None)
            self.pinned = None
        elif e.empty:
            self.round_empty.add(e.slot)

    def on_selected(self, e: ev.SlotSelected) -> None:
        self.cache.ctx_slot = e.slot
        if e.how == "id":
            # the scan follows the pick; what came before it is not this task's
            self._unknown(e.slot)
            self.pinned = e.slot
        else:
            sim = self.round.get(e.slot)
            if sim is not None and e.how == "lcp" and e.f_keep is not None:
                self.slots.on_seen_length(e.slot, sim.lcp, e.f_keep)
            if sim is not None:
                self._apply(e.slot, sim.lcp, sim.n_new)
            elif e.slot in self.round_empty:
                self._apply(e.slot, 0, None)
            else:
                self._unknown(e.slot)
        self.round.clear()
        self.round_empty.clear()

    def _idle(self, sid: int) -> None:
        """Only a slot without a task is looked at past "is_processing" (1551-1553)."""
        s = self.slots.slot(sid)
        if s.start is None:
            s.task = -1

    def _apply(self, sid: int, lcp: int, n_new: int | None) -> None:
        self.slots.slot(sid).prefix_hint = lcp
        self.cache.sel = (lcp, n_new)

    def _unknown(self, sid: int) -> None:
        self.slots.slot(sid).prefix_hint = None
        self.cache.sel = None
