"""Which of two equal-length cache entries an obsolete removal took (FINDINGS L2).

``server_prompt_cache::alloc`` removes every entry that is a prefix of the prompt being saved
and says only " - removing obsolete cached prompt with length N" (server-task.cpp:1737-1747).
When the cache holds several entries of N tokens, the line does not say which went: the
checker removes the first and keeps the others as a ``Doubt``, the alternatives in which one
of them went instead. A later line that lists or sizes the entries (the next load scan,
server-task.cpp:1804-1810; a "cache state" listing; a "making room" or eviction size) settles
it: the views it rules out are dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pcspec.logcheck.state import Entry


@dataclass(slots=True)
class Doubt:
    gone: Entry  # the entry the checker removed
    others: list[Entry]  # entries of the same length, any of which may have gone instead
    line: int  # the save ("saving prompt") whose alloc removed it

    def views(self, entries: list[Entry]) -> list[tuple[Entry | None, list[Entry]]]:
        """The checker's list first (``None``), then one per other still held: that one gone
        and ``gone`` back in its place. Entries keep the order they were saved in (only
        appends add to the list), and ``line`` (of the save or listing) is that order."""
        out: list[tuple[Entry | None, list[Entry]]] = [(None, entries)]
        for o in self.others:
            if any(x is o for x in entries):
                out.append((o, self.swap(entries, o)))
        return out

    def swap(self, entries: list[Entry], other: Entry) -> list[Entry]:
        """``entries`` had ``other`` gone instead of ``gone``."""
        if not any(x is other for x in entries):
            return entries
        return sorted([x for x in entries if x is not other] + [self.gone], key=lambda x: x.line)

    def same_sizes(self) -> bool:
        """Every view holds the same sizes and checkpoint counts: checks of sizes agree."""
        g = self.gone
        return all(o.size.lo == g.size.lo and o.size.hi == g.size.hi and o.n_ckpts == g.n_ckpts
                   for o in self.others)


@dataclass(slots=True)
class Settled:
    entries: list[Entry]
    doubt: Doubt | None
    exact: bool
    swapped: Entry | None = None  # the other that went instead, when a view was adopted


def settle(doubt: Doubt, entries: list[Entry], fits: Callable[[list[Entry]], bool]) -> Settled:
    """Keep the views a logged fact ``fits``. All of them: still in doubt. None: the checker's
    list stays, and the check that follows reports the difference. One: it is the cache. The
    checker's and some others: still in doubt among those. Several others but not the
    checker's: the list is no longer known (relearnt from the next listing)."""
    views = doubt.views(entries)
    ok = [(o, v) for o, v in views if fits(v)]
    if len(ok) == len(views):
        return Settled(entries, doubt, True)
    if not ok:
        return Settled(entries, None, True)
    if ok[0][0] is None:
        rest = [o for o, _ in ok if o is not None]
        return Settled(entries, Doubt(doubt.gone, rest, doubt.line) if rest else None, True)
    if len(ok) == 1:
        return Settled(ok[0][1], None, True, ok[0][0])
    return Settled(entries, None, False)
