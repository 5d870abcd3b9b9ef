"""What the checker knows about slots, checkpoints and cache entries while it replays a log.

Observation is partial: a log may start after the server did, hide TRACE lines, or come from
a build that omits a field. Each list therefore carries an ``exact`` flag: ``True`` when every
element is known (it was built from an observed empty start, or a line revealed all of it),
``False`` when only the elements the log has named are held. Checks that need the whole list
run only on exact lists.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from pcspec.logcheck import events as ev
from pcspec.logcheck.mib import Approx

UNKNOWN_TASK = -2  # a checkpoint whose creating task the log did not show

_uids = itertools.count(1)


@dataclass(slots=True, eq=False)
class Ckpt:
    """One checkpoint (common_prompt_checkpoint). ``uid`` is its identity: copies made by a
    cache save or a load hand-over are the same object here, as they are (shared) after
    #30137 and (byte-identical) before it."""

    n_tokens: int | None
    pos_min: int
    pos_max: int
    size: Approx
    id_task: int
    line: int
    uid: int = field(default_factory=lambda: next(_uids))
    deviated: bool = False  # recorded from a line that deviated: a later line may correct it

    def matches(self, pos_min: int, pos_max: int, n_tokens: int | None) -> bool:
        if self.pos_min != pos_min or self.pos_max != pos_max:
            return False
        return n_tokens is None or self.n_tokens is None or self.n_tokens == n_tokens

    def show(self) -> str:
        n = "?" if self.n_tokens is None else str(self.n_tokens)
        return f"[{self.pos_min}, {self.pos_max}] n_tokens={n}"


def find(ckpts: list[Ckpt], pos_min: int, pos_max: int, n_tokens: int | None,
         taken: set[int] | frozenset[int] = frozenset()) -> int | None:
    """Index of the first checkpoint with these positions (and n_tokens when both known) that
    is not in ``taken``. Lines name a checkpoint by its numbers only, so identical checkpoints
    (a slot-file appendix of fillers, say) are one multiset: each line takes one of them, in
    whatever order the server went through them."""
    for i, c in enumerate(ckpts):
        if i not in taken and c.matches(pos_min, pos_max, n_tokens):
            return i
    return None


@dataclass(slots=True)
class PromptStart:
    """The lines of one prompt start (update_slots, SLOT_STATE_STARTED), gathered until the
    first ``cached n_tokens`` line of the task."""

    new: ev.NewPrompt
    prefix: int | None  # lcp(slot tokens, task tokens) when the log shows it
    reuse: bool = False
    checks: list[ev.CheckpointChecked] = field(default_factory=list)
    restored: ev.CheckpointRestored | None = None
    forcing: ev.FullReprocess | None = None
    invalidated: list[ev.CheckpointInvalidated] = field(default_factory=list)
    need: ev.NeedEvaluate | None = None
    npast_set: ev.NPastSet | None = None


@dataclass(slots=True)
class SlotState:
    id: int
    ckpts: list[Ckpt]
    exact: bool
    n_tokens: int | None = None  # tokens in the slot's prompt
    task: int = -1  # the task holding the slot; -1 none; UNKNOWN_TASK not shown by the log
    start: PromptStart | None = None
    pending_create: list[ev.Erasure] = field(default_factory=list)
    last_cached: ev.CachedTokens | None = None
    last_do: ev.DoCheckpoint | None = None
    prefix_hint: int | None = None  # from the slot selection / cache load before the task
    restored_by: dict[int, tuple[int, int]] = field(default_factory=dict)  # uid -> (task, line)
    clear_after_save: bool = False
    # the list stopped being known at a deviation (not because the log cannot show it): it is
    # known again at the first creation whose "k of N" agrees with it (SlotChecker._resync)
    suspect: bool = False

    def clear(self) -> None:
        """prompt.clear(): tokens and checkpoints (#25649)."""
        self.replace_ckpts([], True)
        self.n_tokens = 0

    def replace_ckpts(self, ckpts: list[Ckpt], exact: bool) -> None:
        """The list is replaced as a whole; what its old checkpoints were restored by no longer
        matters (the next erasure is by a later task)."""
        self.ckpts = ckpts
        self.exact = exact
        self.suspect = False
        self.restored_by.clear()

    def busy(self) -> bool:
        """A task holds the slot (from its launch or prompt start to its release)."""
        return self.task >= 0 or self.start is not None

    def idle(self) -> bool:
        """The log has shown that no task holds the slot."""
        return self.task == -1 and self.start is None


@dataclass(slots=True, eq=False)
class Entry:
    """One prompt cache entry (server_prompt_cache_state)."""

    n_tokens: int
    size: Approx  # size() as the cache accounts it: data + sum of its checkpoint sizes
    ckpts: list[Ckpt] | None  # None when the log did not show which
    n_ckpts: int | None
    line: int
    deviated: bool = False  # its size was adopted from a listing line that deviated

    def state_size(self) -> Approx:
        """The entry's own data (size minus its checkpoints)."""
        if self.ckpts is None:
            return self.size
        acc = self.size
        for c in self.ckpts:
            acc = acc.minus(c.size)
        return acc
