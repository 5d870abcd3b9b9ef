"""Per-slot replay: checkpoint creation (create_checkpoint) and prompt start (update_slots,
SLOT_STATE_STARTED), checked against the pure rules of ``pcspec.model.policy``; and the other
changes of a slot's prompt (clears, cache hand-overs, slot-file restores), which are not judged.

Creation is a transaction: the too-close sweep, capacity and superseding erasures of one
``create_checkpoint`` call are logged before its "created ... k of N" line, so they are
buffered and judged together when that line arrives (sweep -> cap -> supersede -> append, the
order of the November 2026 code).

A prompt start is judged at its first "cached n_tokens" line, when all its lines are in:
the "checking" scan, the restore or the forced re-processing, the invalidations and the
``n_past -= 1`` rule. The one input the log does not print is ``n_past`` before the restore
(the lcp of the slot's tokens and the new prompt, which is also ``n_prefix``). It is taken from
the slot selection ("checking sim = ... (lcp/n)") or the cache load ("prompt with length ...,
lcp = ...") when those lines precede the task, else from the logged threshold (``against T``
with the server's ``n_swa``), else every value that could matter is tried: the start is
accepted when one value explains all its lines. When the run's invalidation rule is not known
(``either``), each value is tried under both rules, and a start that only one rule explains
settles the run's rule (``context.InvalidationChoice``).
"""

from __future__ import annotations

from collections.abc import Sequence

from pcspec.logcheck import events as ev
from pcspec.logcheck import levels
from pcspec.logcheck.context import Context, Deviations
from pcspec.logcheck.mib import Approx, prints_as
from pcspec.logcheck.state import UNKNOWN_TASK, Ckpt, PromptStart, SlotState, find
from pcspec.model import policy
from pcspec.model.designs import Fixed

_BIG = 1 << 60  # "no bound": pos_next in the restore choice of before #24411

_COUNTERS = {"too_close": "ckpt_erased_too_close", "old": "ckpt_erased_old",
             "superseded": "ckpt_superseded", "invalidated": "ckpt_invalidated"}


class SlotChecker:
    def __init__(self, ctx: Context, exact_start: bool, checks_visible: bool = True,
                 idle_start: bool = True) -> None:
        self.ctx = ctx
        self.exact_start = exact_start
        # builds (or verbosities) that print restores but no "checking checkpoint" lines
        self.checks_visible = checks_visible
        # the run starts at the server's start-up, so every slot starts without a task
        self.idle_start = idle_start
        self.slots: dict[int, SlotState] = {}
        # at a creation: the checkpoints the sweep erases that the log did not show (_resync)
        self._should_go: list[Ckpt] = []

    # ---- bookkeeping -------------------------------------------------------------------------

    def slot(self, sid: int) -> SlotState:
        s = self.slots.get(sid)
        if s is None:
            s = SlotState(sid, [], self.exact_start, 0 if self.exact_start else None,
                          task=-1 if self.idle_start else UNKNOWN_TASK)
            self.slots[sid] = s
        return s

    def settle(self, s: SlotState) -> None:
        """Close a prompt start or a creation whose closing line never came."""
        if s.start is not None:
            self._finish_start(s, None)
        if s.pending_create:
            # erasures without a "created" line (TRACE hidden, or the log was cut): apply them
            pend, s.pending_create = s.pending_create, []
            for e in pend:
                self._erase_logged(s, e, e.task)

    def all_ckpts(self) -> list[Ckpt]:
        return [c for s in self.slots.values() for c in s.ckpts]

    def drop(self, s: SlotState, n_tokens: int | None, exact: bool = True, restore: bool = False,
             counted: bool = True) -> None:
        """The slot's prompt replaced by ``n_tokens`` tokens (None: not known) and no
        checkpoint, or none the log shows (``exact`` False): ``prompt.clear()``, a slot-file
        restore (``restore``, counted as one), a context shift. The checkpoints that go count
        as cleared when ``counted``."""
        self.settle(s)
        if counted:
            self.ctx.stats.ckpt_dropped_by_clear += len(s.ckpts)
        self.ctx.stats.slot_file_restores += restore
        s.replace_ckpts([], exact)
        s.n_tokens = n_tokens

    def clear(self, sid: int) -> None:
        s = self.slot(sid)
        self.drop(s, 0)
        s.clear_after_save = False

    def load_failed(self, sid: int) -> None:
        """A failed cache load (prompt_load) leaves the slot cleared: its task starts from 0."""
        self.clear(sid)
        self.slot(sid).prefix_hint = 0

    def hand_over(self, sid: int, ckpts: list[Ckpt] | None, n_tokens: int | None,
                  lcp: int | None) -> None:
        """server_prompt_cache::load success: the slot's prompt becomes the entry's."""
        s = self.slot(sid)
        self.settle(s)
        s.replace_ckpts(list(ckpts) if ckpts is not None else [], ckpts is not None)
        s.n_tokens = n_tokens
        s.prefix_hint = lcp

    def on_file_restore(self, e: ev.StateRead) -> None:
        """``POST /slots/N?action=restore`` (server-context.cpp:2576-2640 at 0c1e570): the file's
        state replaces the slot's, ``prompt.clear()`` drops its checkpoints (2620) and the file's
        tokens are installed. The October code restores no checkpoints; the November code
        restores the file's appendix and says so in a line of its own (``on_slot_file``), so
        until that line comes the list is empty and known. How many tokens the slot now holds
        is not in the log (a cell count is a lower bound at most: an SWA cache holds a window,
        a recurrent one prints no line), so it becomes unknown."""
        s = self.slot(e.seq_id)
        self.drop(s, None, restore=True)
        s.prefix_hint = None

    def on_seen_count(self, sid: int, n_tokens: int) -> None:
        """The log shows how many tokens the idle slot holds: none ("- skipping, slot is
        empty", server-context.cpp:1558-1561; a cache load's "base f_keep = -1.000",
        server-task.cpp:1796), or ``n_tokens`` (prompt_save's "saving prompt with length N",
        server-context.cpp:267-268). A count other than the one the checker holds means a
        slot-file restore that left no line (FINDINGS L1: an empty file, or a recurrent memory,
        whose ``state_read_meta`` prints only for a non-empty attention cache); that restore
        ran ``prompt.clear()`` (2614), so the slot has no checkpoint either."""
        s = self.slot(sid)
        if s.busy():
            return  # a slot pinned while it works (F1) holds what its task has processed
        stale = s.n_tokens is not None and s.n_tokens != n_tokens
        if stale or (n_tokens == 0 and s.exact and s.ckpts):
            self.drop(s, n_tokens, restore=True)
        s.n_tokens = n_tokens

    def on_seen_length(self, sid: int, lcp: int, f_keep: float) -> None:
        """A printed ``f_keep = lcp / n_tokens`` of the idle slot (the LCP pick,
        server-context.cpp:1578-1583; the cache load's base, server-task.cpp:1796): a length
        the printed value rules out means a restore the log did not show (L1) replaced the
        slot's tokens, and its checkpoints with them."""
        s = self.slot(sid)
        if s.busy() or s.n_tokens is None or s.n_tokens <= 0 or lcp <= 0:
            return
        if not prints_as(lcp / s.n_tokens, f_keep):
            self.drop(s, None, restore=True)

    def on_unexplained_read(self, e: ev.StateRead) -> None:
        """A state read into a slot the log has not shown idle or working (a log that starts
        after the server did): a file restore or a speculative checkpoint. Either way the list
        may have changed, so it is no longer known."""
        s = self.slot(e.seq_id)
        self.settle(s)
        self.ctx.weaken("a state read into a slot whose task the log did not show: its "
                        "checkpoints are unknown after it")
        self.drop(s, None, exact=False, counted=False)

    # ---- event handlers ------------------------------------------------------------------

    def on_new_prompt(self, e: ev.NewPrompt) -> None:
        s = self.slot(e.slot)
        self.settle(s)
        s.task = e.task
        s.start = PromptStart(e, s.prefix_hint)
        s.prefix_hint = None
        s.last_cached = s.last_do = None
        self.ctx.stats.requests += 1

    def on_start_line(self, e: ev.StartLine) -> None:
        s = self.slot(e.slot)
        st = s.start
        if st is None or st.new.task != e.task:
            # a start line without its "new prompt" line: nothing to judge it against, but it
            # still counts and still changes the list
            if isinstance(e, ev.CheckpointInvalidated):
                self._erase_logged(s, e, e.task)
            elif isinstance(e, ev.FullReprocess):
                self.ctx.stats.full_reprocess += 1
            elif isinstance(e, ev.CheckpointRestored):
                self.ctx.stats.ckpt_restored += 1
                idx = find(s.ckpts, e.pos_min, e.pos_max, e.n_tokens)
                if idx is not None:
                    s.restored_by[s.ckpts[idx].uid] = (e.task, e.line)
            return
        if isinstance(e, ev.CheckpointChecked):
            st.checks.append(e)
        elif isinstance(e, ev.CheckpointRestored):
            st.restored = e
        elif isinstance(e, ev.FullReprocess):
            st.forcing = e
        elif isinstance(e, ev.CheckpointInvalidated):
            st.invalidated.append(e)
            if e.n_swa is not None:
                self.ctx.config.n_swa = e.n_swa
        elif isinstance(e, ev.NeedEvaluate):
            st.need = e
        elif isinstance(e, ev.NPastSet):
            st.npast_set = e
        else:
            st.reuse = True

    def on_cached(self, e: ev.CachedTokens) -> None:
        s = self.slot(e.slot)
        if s.start is not None and s.start.new.task == e.task:
            self._finish_start(s, e)
        s.last_cached = e
        s.n_tokens = e.n_tokens

    def on_do_checkpoint(self, e: ev.DoCheckpoint) -> None:
        s = self.slot(e.slot)
        if s.start is not None:
            self._finish_start(s, None)
        s.last_do = e

    def on_erasure(self, e: ev.Erasure) -> None:
        s = self.slot(e.slot)
        if s.start is not None:
            self._finish_start(s, None)
        s.pending_create.append(e)

    def on_released(self, e: ev.SlotReleased) -> None:
        s = self.slot(e.slot)
        self.settle(s)
        s.n_tokens = e.n_tokens
        s.task = -1

    def on_slot_file(self, e: ev.SlotFileCheckpoints, counted: bool) -> None:
        """The November code's appendix line after a slot-file restore: the file's checkpoints
        replace the list; their positions are not logged, so only an empty list is known.
        ``counted``: the restore was already seen (its state lines came just before)."""
        self.drop(self.slot(e.slot), None, exact=e.count == 0, restore=not counted)

    # ---- create_checkpoint ---------------------------------------------------------------------

    def on_created(self, e: ev.CheckpointCreated) -> None:
        ctx = self.ctx
        s = self.slot(e.slot)
        if s.start is not None:
            self._finish_start(s, None)
        pend, s.pending_create = s.pending_create, []
        self._should_go = []
        ctx.stats.ckpt_created += 1
        deviated = self._check_position(s, e)
        before = ctx.deviations.count  # deviations about the list, from here on
        self._adopt(s, pend, {ev.CheckpointErasedTooClose: "ckpt-sweep",
                              ev.CheckpointErasedOld: "ckpt-cap-evict"})
        cap = ctx.config.cap if ctx.config.cap is not None else e.cap
        if e.cap is not None and ctx.config.cap is not None and e.cap != ctx.config.cap:
            ctx.deviate(e.line, "ckpt-count",
                        f"'created ... {e.index} of {e.cap}' but --ctx-checkpoints is "
                        f"{ctx.config.cap} (start-up line); the line's cap is adopted")
            # the server's cap is the one it prints at every creation (params_base.n_ctx_checkpoints,
            # server-context.cpp:2349-2351 at 0c1e570)
            ctx.config.cap = cap = e.cap
        if e.index is not None and e.cap is not None and e.index > e.cap:
            ctx.deviate(e.line, "ckpt-cap",
                        f"slot {e.slot} holds {e.index} checkpoints, above the cap of {e.cap}")
        sweep = [x for x in pend if isinstance(x, ev.CheckpointErasedTooClose)]
        old = [x for x in pend if isinstance(x, ev.CheckpointErasedOld)]
        sup = [x for x in pend if isinstance(x, ev.CheckpointSuperseded)]
        if s.exact:
            self._check_sweep(s, e, sweep, cap)
            self._check_cap_evict(s, e, old, cap)
            self._check_supersede(s, e, sup)
            if e.index is not None and e.index != len(s.ckpts) + 1:
                ctx.deviate(e.line, "ckpt-count",
                            f"'created ... {e.index} of {e.cap}' but slot {e.slot} held "
                            f"{len(s.ckpts)} checkpoints after its erasures, so the new one is "
                            f"number {len(s.ckpts) + 1}")
            if cap is not None and cap > 0 and len(s.ckpts) + 1 > cap and (
                e.index is None or e.index <= (e.cap or cap)
            ):
                ctx.deviate(e.line, "ckpt-cap",
                            f"slot {e.slot} holds {len(s.ckpts) + 1} checkpoints after this "
                            f"creation, above the cap of {cap}")
        else:
            for x in pend:
                self._erase_logged(s, x, e.task)
            if old and not sup and cap is not None and e.index is not None and e.index != cap:
                ctx.deviate(e.line, "ckpt-cap-evict",
                            f"{len(old)} capacity erasure(s) although the list ends with "
                            f"{e.index} of {cap} checkpoints (erasures only run on a full list)")
            if e.index == 1:
                # "1 of N": the list was empty before the append, so it is known again
                self._drop_all(s, e.task, e.line, "cleared")
                s.exact = True
            elif s.suspect and e.index is not None and len(s.ckpts) == e.index - 1:
                # the list the checker rebuilt has the length the server's has: known again
                s.exact, s.suspect = True, False
        s.ckpts.append(Ckpt(e.n_tokens, e.pos_min, e.pos_max, Approx.logged(e.size), e.task,
                            e.line, deviated=deviated))
        if s.exact and ctx.deviations.count > before:
            self._resync(s, e)

    def _resync(self, s: SlotState, e: ev.CheckpointCreated) -> None:
        """After a deviation about the list at a creation, rebuild it from what the line
        shows: "created k of N" says the list holds k checkpoints with the new one (k is
        ``checkpoints.size()`` after the push, server-context.cpp:2349-2351 at 0c1e570). A longer
        list loses its identical copies first (a checkpoint the checker recorded twice, or a
        creation line that restates one), then those the too-close sweep erases but the log
        did not show, then its oldest (the front, where the server erases: create_checkpoint,
        server-context.cpp:2311-2318 at 0c1e570); a shorter one holds checkpoints the checker
        has not seen: the list is no longer known, and is known again at the first
        creation whose k agrees with it, at a "1 of N", or from a scan that names every
        checkpoint. Later lines are judged on the rebuilt list, so one wrong line costs the
        deviations on its own lines, not one at every later step of the slot."""
        if e.index is None:
            s.exact, s.suspect = False, True
            return
        want = max(1, e.index)
        seen: set[tuple[int, int, int | None]] = set()
        i = 0
        while len(s.ckpts) > want and i < len(s.ckpts):
            c = s.ckpts[i]
            key = (c.pos_min, c.pos_max, c.n_tokens)
            if key in seen:
                s.ckpts.pop(i)
                continue
            seen.add(key)
            i += 1
        for c in self._should_go:
            if len(s.ckpts) > want and any(x is c for x in s.ckpts):
                s.ckpts.remove(c)
        while len(s.ckpts) > want:
            s.ckpts.pop(0)
        if len(s.ckpts) < want:
            s.exact, s.suspect = False, True

    def _adopt(self, s: SlotState,
               refs: Sequence[ev.Erasure | ev.CheckpointInvalidated | ev.CheckpointRestored],
               rules: dict[type[ev.Event], str]) -> None:
        """Lines that name a checkpoint the slot holds at the same positions but with another
        ``n_tokens``: the log's value is the server's, so it is adopted and the checks that
        follow run on it. When the checker's value came from a line that already deviated this
        is that deviation again (``context.Deviations``: a knock-on, counted, not reported);
        otherwise it is a deviation of the rule ``rules`` gives for the line's kind."""
        for x in refs:
            rule = rules.get(type(x))
            if rule is None or isinstance(x, ev.CheckpointSuperseded) or x.n_tokens is None:
                continue
            pos_min, pos_max, n_tokens = x.pos_min, x.pos_max, x.n_tokens
            if find(s.ckpts, pos_min, pos_max, n_tokens) is not None:
                continue
            c = next((c for c in s.ckpts if (c.pos_min, c.pos_max) == (pos_min, pos_max)), None)
            if c is None:
                # a checkpoint recorded from a deviating line, named by its two other numbers:
                # the log's numbers are the server's (a knock-on of that deviation)
                c = next((c for c in s.ckpts if c.deviated and sum(
                    (c.pos_min == pos_min, c.pos_max == pos_max, c.n_tokens == n_tokens)) == 2), None)
                if c is None:
                    continue
                self.ctx.knock_on()
                c.pos_min, c.pos_max, c.n_tokens, c.deviated = pos_min, pos_max, n_tokens, False
                continue
            if c.deviated:
                self.ctx.knock_on()
            else:
                self.ctx.deviate(x.line, rule,
                                 f"the line names [{pos_min}, {pos_max}] n_tokens={n_tokens} "
                                 f"but slot {s.id} holds {c.show()} (created line {c.line}); "
                                 "the log's n_tokens is adopted")
            c.n_tokens, c.deviated = n_tokens, False

    def _check_position(self, s: SlotState, e: ev.CheckpointCreated) -> bool:
        """Judge where the checkpoint was taken; whether it deviates."""
        ctx = self.ctx
        problems: list[str] = []
        if e.pos_min > e.pos_max:
            problems.append(f"pos_min {e.pos_min} > pos_max {e.pos_max}")
        if e.n_tokens is not None:
            if ctx.rules.positions == "text" and e.n_tokens != e.pos_max + 1:
                problems.append(f"n_tokens = {e.n_tokens} but pos_max + 1 = {e.pos_max + 1}")
            elif ctx.rules.positions == "mtmd" and e.n_tokens < e.pos_max + 1:
                problems.append(f"n_tokens = {e.n_tokens} < pos_max + 1 = {e.pos_max + 1}")
        do, s.last_do = s.last_do, None
        if do is not None and do.task == e.task:
            if not do.yes:
                problems.append(f"line {do.line} logged main/do_checkpoint = no")
            elif (do.pos_min, do.pos_max) != (e.pos_min, e.pos_max) and not self._payload_start(do, e):
                problems.append(f"the memory held [{do.pos_min}, {do.pos_max}] (line {do.line})"
                                f" but the checkpoint records [{e.pos_min}, {e.pos_max}]")
        cached, s.last_cached = s.last_cached, None
        if (cached is not None and cached.task == e.task and e.n_tokens is not None
                and cached.n_tokens != e.n_tokens):
            problems.append(f"the batch started at cached n_tokens = {cached.n_tokens} "
                            f"(line {cached.line}) but the checkpoint has n_tokens = {e.n_tokens}")
        for p in problems:
            ctx.deviate(e.line, "ckpt-position", f"checkpoint created by task {e.task}: {p}")
        return bool(problems)

    def _payload_start(self, do: ev.DoCheckpoint, e: ev.CheckpointCreated) -> bool:
        """``checkpoint_pos_min`` as ``Fixed``'s: the checkpoint records where an SWA state's data starts,
        ``max(pos_min, pos_max - n_swa + 1)`` of the memory (patches/fixed/0005); with the
        server's ``n_swa`` not yet known, any start within the memory's range."""
        n_swa = self.ctx.config.n_swa
        if not self.ctx.rules.runs("checkpoint_pos_min", Fixed) or do.pos_max != e.pos_max or n_swa == 0:
            return False
        if n_swa is None:
            return do.pos_min <= e.pos_min <= e.pos_max
        return e.pos_min == max(do.pos_min, do.pos_max - n_swa + 1)

    def _kept(self, s: SlotState, c: Ckpt, task: int) -> bool:
        """``kept_checkpoint`` as ``Fixed``'s: ``c`` is the checkpoint ``task`` restored, which
        stays with it."""
        if not self.ctx.rules.runs("kept_checkpoint", Fixed):
            return False
        restored = s.restored_by.get(c.uid)
        return restored is not None and restored[0] == task

    def _owner(self, s: SlotState, c: Ckpt, task: int) -> int:
        return task if self._kept(s, c, task) else c.id_task

    def _match_all(self, s: SlotState,
                   items: list[tuple[int, int, int | None]]) -> list[int] | None:
        """Indices of the logged checkpoints in the slot's list (each used once), or None."""
        taken: set[int] = set()
        out: list[int] = []
        for pos_min, pos_max, n_tokens in items:
            idx = next((i for i, c in enumerate(s.ckpts)
                        if i not in taken and c.matches(pos_min, pos_max, n_tokens)), None)
            if idx is None:
                return None
            taken.add(idx)
            out.append(idx)
        return out

    def _check_sweep(self, s: SlotState, e: ev.CheckpointCreated,
                     sweep: list[ev.CheckpointErasedTooClose], cap: int | None) -> None:
        ctx = self.ctx
        rule = ctx.rules.sweep
        observed = self._match_all(s, [(x.pos_min, x.pos_max, x.n_tokens) for x in sweep])
        if observed is None:
            ctx.deviate(sweep[0].line, "ckpt-sweep",
                        f"too-close erasure of a checkpoint slot {e.slot} does not hold "
                        f"(holds {self._show(s.ckpts)})")
            for x in sweep:
                self._erase_logged(s, x, e.task)
            return
        expected: list[int] | None
        if rule == "none":
            expected = []
        elif ctx.config.min_step is None or cap is None or any(c.n_tokens is None for c in s.ckpts):
            expected = None
            ctx.weaken("too-close sweep: min spacing, cap or n_tokens not in the log")
        else:
            pairs = [(c.n_tokens or 0, self._owner(s, c, e.task)) for c in s.ckpts]
            # the "always" sweep of the August 2026 code is the same walk without the
            # list-is-full condition
            own = ctx.rules.own("sweep_too_close")
            expected = (own.sweep_too_close(pairs, e.task, ctx.config.min_step, cap) if own is not None
                        else policy.sweep_too_close(pairs, e.task, ctx.config.min_step, cap, rule == "when-full"))
        if expected is not None and sorted(observed) != expected:
            # what the rule erases and the log did not show: the first to go in a resync
            self._should_go = [s.ckpts[i] for i in expected if i not in observed]
            line = sweep[0].line if sweep else e.line
            ctx.deviate(line, "ckpt-sweep",
                        f"task {e.task} swept {self._show([s.ckpts[i] for i in sorted(observed)])} "
                        f"but sweep_too_close ({rule}, min spacing {ctx.config.min_step}, cap "
                        f"{cap}) over {self._show(s.ckpts)} erases "
                        f"{self._show([s.ckpts[i] for i in expected])}")
        self._remove(s, sorted(observed), e.task, [x.line for x in sweep], "too_close")

    def _check_cap_evict(self, s: SlotState, e: ev.CheckpointCreated,
                         old: list[ev.CheckpointErasedOld], cap: int | None) -> None:
        ctx = self.ctx
        # oldest first; under ``restored-owner=restorer`` the checkpoint this task restored stays
        # (patches/fixed/0013: the cap, like the sweep, leaves it)
        order = [i for i, c in enumerate(s.ckpts) if not self._kept(s, c, e.task)]
        for i, x in enumerate(old):
            if i >= len(order) or not s.ckpts[order[i]].matches(x.pos_min, x.pos_max, x.n_tokens):
                ctx.deviate(x.line, "ckpt-cap-evict",
                            f"capacity erasure of [{x.pos_min}, {x.pos_max}] which is not "
                            f"the oldest checkpoint of slot {e.slot} (holds "
                            f"{self._show(s.ckpts)})")
                for y in old:
                    self._erase_logged(s, y, e.task)
                return
        if cap is not None:
            own = ctx.rules.own("cap_evictions")
            expected = min(own.cap_evictions(len(s.ckpts), cap) if own is not None
                           else policy.cap_evictions(len(s.ckpts), cap), len(order))
            if expected != len(old):
                line = old[0].line if old else e.line
                ctx.deviate(line, "ckpt-cap-evict",
                            f"{len(old)} capacity erasure(s) but the list held {len(s.ckpts)} "
                            f"with a cap of {cap}: cap_evictions gives {expected}")
        self._remove(s, order[:len(old)], e.task, [x.line for x in old], "old")

    def _check_supersede(self, s: SlotState, e: ev.CheckpointCreated,
                         sup: list[ev.CheckpointSuperseded]) -> None:
        ctx = self.ctx
        if e.n_tokens is None:
            for x in sup:
                self._erase_logged(s, x, e.task)
            return
        same = policy.superseded([c.n_tokens for c in s.ckpts], e.n_tokens)
        expected = same if ctx.rules.supersede else []
        wrong = [x for x in sup if x.n_tokens != e.n_tokens]
        if wrong or len(sup) != len(expected):
            line = sup[0].line if sup else e.line
            what = (f"superseded n_tokens {[x.n_tokens for x in sup]}" if sup
                    else "superseded nothing")
            ctx.deviate(line, "ckpt-supersede",
                        f"task {e.task} {what} before creating n_tokens = {e.n_tokens}; the "
                        f"list held {len(same)} checkpoint(s) at that n_tokens "
                        f"(superseding {'on' if ctx.rules.supersede else 'off'} for this build)")
        n = min(len(same), len([x for x in sup if x.n_tokens == e.n_tokens]))
        self._remove(s, same[:n], e.task, [x.line for x in sup], "superseded")

    # ---- prompt start ---------------------------------------------------------------------------

    def _finish_start(self, s: SlotState, cached: ev.CachedTokens | None) -> None:
        st = s.start
        assert st is not None
        s.start = None
        ctx = self.ctx
        new = st.new
        thold = st.checks[0].thold if st.checks else None
        if st.checks and any(c.thold != thold for c in st.checks):
            ctx.deviate(st.checks[-1].line, "restore-scan",
                        "the checkpoints of one prompt start were checked against different "
                        "thresholds")
        if not s.exact and st.forcing is not None and self.checks_visible:
            self._learn_from_scan(s, st)
        before = ctx.deviations.count
        self._adopt(s, [*st.invalidated, *([st.restored] if st.restored else [])],
                    {ev.CheckpointInvalidated: "invalidate", ev.CheckpointRestored: "restore-choice"})
        if self._silent_restore(s, st, cached, thold):
            ctx.weaken("a prompt start on a slot that held no checkpoint any more: a slot-file "
                       "restore the log cannot show at this verbosity (state_read_meta is DEBUG)")
            self.drop(s, s.n_tokens, restore=True)
        scan_ok = self._check_scan(s, st) if s.exact and self.checks_visible else True
        # statistics of the outcome
        stats = ctx.stats
        if st.forcing is not None:
            stats.full_reprocess += 1
            if st.checks:
                stats.reprocess_no_usable += 1
            else:
                stats.reprocess_no_checkpoints += 1
        elif st.restored is not None:
            stats.ckpt_restored += 1
        elif cached is not None and cached.n_tokens == 0 and new.n_tokens > 0:
            stats.cache_miss += 1
        stats.ckpt_invalidated += len(st.invalidated)
        if scan_ok:
            self._judge_start(s, st, cached, thold)
        # effects: the restored checkpoint is remembered, invalidated ones go
        if st.restored is not None:
            r = st.restored
            idx = find(s.ckpts, r.pos_min, r.pos_max, r.n_tokens)
            if idx is not None:
                s.restored_by[s.ckpts[idx].uid] = (new.task, r.line)
        for x in st.invalidated:
            self._erase_logged(s, x, new.task, count=False)
        if cached is not None:
            s.n_tokens = cached.n_tokens
        if s.exact and ctx.deviations.count > before:
            # the list the prompt start was judged on is not the server's: no longer known,
            # rebuilt from the next lines that show it (a creation's "k of N", a full scan)
            s.exact, s.suspect = False, True
        if len(s.restored_by) > len(s.ckpts):
            # records of checkpoints that left the list without an erasure line
            held = {c.uid for c in s.ckpts}
            s.restored_by = {k: v for k, v in s.restored_by.items() if k in held}

    def _silent_restore(self, s: SlotState, st: PromptStart, cached: ev.CachedTokens | None,
                        thold: int | None) -> bool:
        """Below DEBUG an October slot-file restore leaves no line: ``POST /slots/N?action=
        restore`` prints only libllama's DEBUG ``state_read_meta`` (llama-kv-cache.cpp:2452)
        and runs ``prompt.clear()`` (server-context.cpp:2620 at 0c1e570), so the slot's next
        prompt start finds no checkpoint. (b11549 and the November code say so at INFO,
        server-context.cpp:2712 at b11549.) A prompt start that shows nothing of the list (no
        scan, restore, re-processing or invalidation) where the list the checker holds would
        have been invalidated is read as such a restore."""
        ctx = self.ctx
        # a build whose slot files carry the appendix prints the INFO line (its load_slot_checkpoints)
        says_so = ctx.rules.rule_set is not None and ctx.rules.rule_set.slot_file_appendix
        if (ctx.rules.verbosity >= levels.DBG or says_so or not s.exact
                or not s.ckpts or st.checks or st.restored is not None or st.forcing is not None
                or st.invalidated):
            return False
        kept, weakened = ctx.deviations, ctx.weakened.copy()
        ctx.deviations = Deviations()
        try:
            self._judge_start(s, st, cached, thold)
            return ctx.deviations.count > 0
        finally:
            ctx.deviations, ctx.weakened = kept, weakened

    def _learn_from_scan(self, s: SlotState, st: PromptStart) -> None:
        """A scan that ends in "forcing" names every checkpoint, newest first."""
        rebuilt: list[Ckpt] = []
        taken: set[int] = set()
        for c in reversed(st.checks):
            idx = find(s.ckpts, c.pos_min, c.pos_max, None, taken)
            if idx is not None:
                taken.add(idx)
                rebuilt.append(s.ckpts[idx])
                continue
            n_tokens = c.pos_max + 1 if self.ctx.rules.positions == "text" else None
            for x in st.invalidated:
                if (x.pos_min, x.pos_max) == (c.pos_min, c.pos_max) and x.n_tokens is not None:
                    n_tokens = x.n_tokens
            rebuilt.append(Ckpt(n_tokens, c.pos_min, c.pos_max, Approx.unknown(),
                                UNKNOWN_TASK, 0))
        s.ckpts = rebuilt
        s.exact = True

    def _check_scan(self, s: SlotState, st: PromptStart) -> bool:
        """The "checking" lines walk the list newest first and stop at the restored one."""
        ctx = self.ctx
        newest_first = list(reversed(s.ckpts))
        line = st.checks[0].line if st.checks else st.new.line
        for i, c in enumerate(st.checks):
            if i >= len(newest_first):
                ctx.deviate(c.line, "restore-scan",
                            f"checked [{c.pos_min}, {c.pos_max}] but slot {s.id} holds only "
                            f"{len(newest_first)} checkpoint(s): {self._show(s.ckpts)}")
                return False
            k = newest_first[i]
            if (k.pos_min, k.pos_max) != (c.pos_min, c.pos_max):
                ctx.deviate(c.line, "restore-scan",
                            f"checked [{c.pos_min}, {c.pos_max}] where the next checkpoint, "
                            f"newest first, is [{k.pos_min}, {k.pos_max}] "
                            f"(slot holds {self._show(s.ckpts)})")
                return False
        if st.restored is not None:
            r = st.restored
            last = st.checks[-1] if st.checks else None
            if last is None or (last.pos_min, last.pos_max) != (r.pos_min, r.pos_max):
                ctx.deviate(r.line, "restore-scan",
                            f"restored [{r.pos_min}, {r.pos_max}] which is not the last "
                            "checkpoint checked")
                return False
        elif st.forcing is not None and len(st.checks) != len(s.ckpts):
            ctx.deviate(st.forcing.line, "restore-scan",
                        f"gave up after checking {len(st.checks)} of the {len(s.ckpts)} "
                        f"checkpoints slot {s.id} holds ({self._show(s.ckpts)})")
            return False
        elif st.checks and st.restored is None and st.forcing is None:
            ctx.deviate(line, "restore-scan",
                        "checkpoints were checked but neither a restore nor a forced "
                        "re-processing followed")
            return False
        return True

    def _candidates(self, s: SlotState, st: PromptStart, cached: ev.CachedTokens | None,
                    thold: int | None, branch: bool) -> tuple[list[int], bool]:
        """Values of n_past before the restore (= pos_next for text = n_prefix) to try, and
        whether the value is known rather than enumerated."""
        n_task = st.new.n_tokens
        n_swa = self.ctx.config.n_swa
        legacy = self.ctx.rules.legacy_restore
        if st.prefix is not None and not st.reuse:
            # cache_prompt = false starts from 0 whatever the lcp
            return ([st.prefix, 0] if not branch else [st.prefix]), True
        if not branch:
            if st.need is not None:
                return [st.need.n_past], True
            if cached is not None:
                return [cached.n_tokens], True
        if thold is not None and thold > 0 and n_swa is not None:
            cands = [q for q in (thold + n_swa, thold + n_swa + 1)
                     if policy.pos_min_threshold(q, n_swa, q < n_task) == thold
                     or (legacy and policy.pos_min_threshold(q, n_swa, True) == thold)]
            if cands:
                return cands, True
        # enumerate every value at which some outcome changes
        lo, hi = (1 if branch else 0), n_task
        if thold == 0 and n_swa is not None:
            hi = min(hi, n_swa + 1)
        points = {lo, hi}
        for c in s.ckpts:
            for v in (c.pos_min + 1, c.pos_max - 1, c.pos_max, c.pos_max + 1):
                points.add(v)
            if c.n_tokens is not None:
                points.update((c.n_tokens - 1, c.n_tokens))
        if st.restored is not None and st.restored.n_past is not None:
            points.update((st.restored.n_past, st.restored.n_past + 1))
        for x in st.invalidated:
            if x.pos_next is not None:
                points.add(x.pos_next)
        if cached is not None:
            points.update((cached.n_tokens, cached.n_tokens + 1))
        return sorted(p for p in points if lo <= p <= hi), False

    def _judge_start(self, s: SlotState, st: PromptStart, cached: ev.CachedTokens | None,
                     thold: int | None) -> None:
        ctx = self.ctx
        branch = bool(st.checks) or st.restored is not None or st.forcing is not None
        cands, known = self._candidates(s, st, cached, thold, branch)
        if not known:
            ctx.weaken("n_past before the restore (= n_prefix) not in the log: values "
                       "enumerated, invalidation also accepted under the pos_max rule alone")
        if not s.exact:
            ctx.weaken("prompt start on a checkpoint list the log did not fully show")
        choice = ctx.invalidation
        # a start can settle the run's rule only when its inputs are all in the log
        settles = len(choice.rules) > 1 and known and s.exact
        explained: set[str] = set()
        best: tuple[int, str, str, int] | None = None
        for p in cands:
            for rule in choice.rules:
                failure = self._explain(s, st, cached, thold, branch, p, rule, known)
                if failure is None:
                    if not settles:
                        return
                    explained.add(rule)
                elif best is None or failure[0] > best[0]:
                    best = failure
        if explained:
            choice.narrow(explained, st.new.line)
            return
        if best is not None:
            _stage, rule_id, message, line = best
            if not known and len(cands) > 1:
                message += f" (n_past before the restore not logged; tried {cands})"
            if rule_id == "invalidate" and choice.evidence:
                message += f" (this run follows the {choice.rules[0]} rule: {choice.evidence})"
            ctx.deviate(line, rule_id, message)

    def _explain(self, s: SlotState, st: PromptStart, cached: ev.CachedTokens | None,
                 thold: int | None, branch: bool, p: int, invalidation: str,
                 prefix_known: bool = True) -> tuple[int, str, str, int] | None:
        """Why ``p`` (n_past before the restore) does not explain the prompt start under the
        ``invalidation`` rule, as (stage reached, rule, message, line); None when it does."""
        rules = self.ctx.rules
        n_swa = self.ctx.config.n_swa
        new = st.new
        n_task = new.n_tokens
        ckpts = s.ckpts
        exact = s.exact
        # the threshold of the "against" number (update_slots, #24110)
        own_thold = rules.own("pos_min_threshold")
        if thold is not None and n_swa is not None:
            expect = (own_thold.pos_min_threshold(p, n_swa, p < n_task) if own_thold is not None
                      else policy.pos_min_threshold(p, n_swa, p < n_task))
            legacy = policy.pos_min_threshold(p, n_swa, True)  # before #24110: no has_new_tokens term
            if thold != expect and not (rules.legacy_restore and thold == legacy):
                return (0, "restore-threshold",
                        f"checked against {thold} but n_past = {p}, n_swa = {n_swa}, "
                        f"has_new_tokens = {p < n_task} give pos_min_threshold = {expect}",
                        st.checks[0].line)
        # the choice (update_slots: newest first, pos_max <= pos_next, pos_min < thold or 0)
        chosen: Ckpt | None = None
        if st.restored is not None:
            r = st.restored
            idx = find(ckpts, r.pos_min, r.pos_max, r.n_tokens)
            if idx is None and exact:
                return (1, "restore-choice",
                        f"restored [{r.pos_min}, {r.pos_max}] which slot {s.id} does not hold "
                        f"({self._show(ckpts)})", r.line)
            chosen = ckpts[idx] if idx is not None else None
        if branch and exact and thold is not None:
            ranges = [(c.pos_min, c.pos_max) for c in ckpts]
            own_choice = rules.own("restore_choice")
            if own_choice is not None:
                triples = [(c.pos_min, c.pos_max, c.n_tokens if c.n_tokens is not None else c.pos_max + 1)
                           for c in ckpts]
                allowed = {own_choice.restore_choice(triples, p, thold, p, n_task, n_swa or 0)}
            else:
                allowed = {policy.restore_choice(ranges, p, thold)}
            if rules.legacy_restore:
                allowed.add(policy.restore_choice(ranges, _BIG, thold))
            got = find(ckpts, st.restored.pos_min, st.restored.pos_max, st.restored.n_tokens) \
                if st.restored is not None else None
            if got not in allowed:
                want = [f"[{ckpts[i].pos_min}, {ckpts[i].pos_max}]" if i is not None
                        else "none (full re-processing)" for i in sorted(allowed, key=str)]
                what = (f"restored [{ckpts[got].pos_min}, {ckpts[got].pos_max}]"
                        if got is not None else "forced full re-processing")
                line = st.restored.line if st.restored else (st.forcing.line if st.forcing
                                                             else new.line)
                return (1, "restore-choice",
                        f"{what} but restore_choice over {self._show(ckpts)} with pos_next = "
                        f"{p}, threshold {thold} picks {' or '.join(want)}", line)
        # positions after the restore or reset
        if st.restored is not None:
            r = st.restored
            n_tok = r.n_tokens if r.n_tokens is not None else (
                chosen.n_tokens if chosen is not None else None)
            if n_tok is None:
                return None  # too old a format to say more
            pos_next, n_past = policy.restored_positions(p, r.pos_min, r.pos_max, n_tok)
            if r.n_past is not None and r.n_past != n_past:
                return (2, "restore-position",
                        f"restored with n_past = {r.n_past} but restored_positions(pos_next = "
                        f"{p}, [{r.pos_min}, {r.pos_max}], n_tokens = {n_tok}) gives {n_past}",
                        r.line)
        elif st.forcing is not None:
            pos_next, n_past = 0, 0
        else:
            pos_next, n_past = p, p
        # invalidation (update_slots: pos_max > pos_next, or n_tokens > n_prefix)
        for x in st.invalidated:
            if x.pos_next is not None and x.pos_next != pos_next:
                return (3, "invalidate",
                        f"invalidation logged pos_next = {x.pos_next} but the prompt start "
                        f"leaves pos_next = {pos_next}", x.line)
        if exact:
            n_prefix_rule = invalidation == "n-prefix"
            pairs = [(c.pos_max, c.n_tokens if c.n_tokens is not None else c.pos_max + 1)
                     for c in ckpts]
            own_inv = rules.own("invalidated")
            if own_inv is not None:
                triples = [(c.pos_min, c.pos_max, n) for c, (_, n) in zip(ckpts, pairs, strict=True)]
                expected = set(own_inv.invalidated(triples, pos_next, p, thold if thold is not None else 0))
            else:
                expected = set(policy.invalidated(pairs, pos_next, p, n_prefix_rule))
            # n_prefix not in the log: the pos_max rule alone is accepted too
            pos_max_only = (set(policy.invalidated(pairs, pos_next, p, False))
                            if not prefix_known and n_prefix_rule else expected)
            observed: set[int] = set()
            for x in st.invalidated:
                i = find(ckpts, x.pos_min, x.pos_max, x.n_tokens, observed)
                if i is None:
                    return (3, "invalidate",
                            f"erased [{x.pos_min}, {x.pos_max}] which slot {s.id} does not "
                            f"hold ({self._show(ckpts)})", x.line)
                observed.add(i)
            if observed not in (expected, pos_max_only):
                missing = sorted(expected - observed)
                extra = sorted(observed - expected)
                parts = []
                if missing:
                    parts.append(f"kept {self._show([ckpts[i] for i in missing])} which "
                                 "must be erased")
                if extra:
                    parts.append(f"erased {self._show([ckpts[i] for i in extra])} which "
                                 "must be kept")
                line = (st.invalidated[0].line if st.invalidated
                        else (cached.line if cached is not None else new.line))
                return (3, "invalidate",
                        "; ".join(parts) + f" (pos_next = {pos_next}, n_prefix = "
                        f"{p if n_prefix_rule else 'n/a'}, rule {invalidation})",
                        line)
        # [TAG_PROMPT_LOGITS]: a prompt fully in cache evaluates its last token again
        final = policy.resume_point(n_past, n_task) if n_task > 0 else n_past
        if final != n_past:
            if st.need is None and cached is not None:
                return (4, "n-past",
                        f"n_past = {n_past} covers the whole prompt but no 'need to evaluate' "
                        f"line (n_past -= 1) followed", cached.line)
        elif st.need is not None:
            return (4, "n-past",
                    f"'need to evaluate' with n_past = {st.need.n_past} but n_past is {n_past} "
                    f"of {n_task} tokens", st.need.line)
        if st.npast_set is not None and st.npast_set.n_past != final:
            return (4, "n-past", f"n_past set to {st.npast_set.n_past}, expected {final}",
                    st.npast_set.line)
        if cached is not None and cached.n_tokens != final:
            return (4, "n-past",
                    f"first step starts at cached n_tokens = {cached.n_tokens} but the prompt "
                    f"start leaves n_past = {final}", cached.line)
        return None

    # ---- erasure helpers ------------------------------------------------------------------

    def _remove(self, s: SlotState, indices: list[int], task: int, lines: list[int],
                reason: str) -> None:
        for k, i in enumerate(sorted(indices, reverse=True)):
            c = s.ckpts.pop(i)
            line = lines[min(k, len(lines) - 1)] if lines else 0
            self._count_erasure(s, c, task, line, reason)

    def _erase_logged(self, s: SlotState, e: ev.CheckpointInvalidated | ev.Erasure, task: int,
                      count: bool = True) -> None:
        """Apply an erasure line without judging it (the checks ran elsewhere, or cannot)."""
        if isinstance(e, ev.CheckpointSuperseded):
            idx = next(iter(policy.superseded([c.n_tokens for c in s.ckpts], e.n_tokens)), None)
            reason = "superseded"
        else:
            idx = find(s.ckpts, e.pos_min, e.pos_max, e.n_tokens)
            reason = {ev.CheckpointInvalidated: "invalidated", ev.CheckpointErasedOld: "old",
                      ev.CheckpointErasedTooClose: "too_close"}[type(e)]
        if idx is not None:
            c = s.ckpts.pop(idx)
            self._count_erasure(s, c, task, e.line, reason, count_kind=count)
        elif count:
            self._count_kind(reason)

    def _drop_all(self, s: SlotState, task: int, line: int, reason: str) -> None:
        for c in s.ckpts:
            self._count_erasure(s, c, task, line, reason, count_kind=False)
        s.ckpts = []

    def _count_erasure(self, s: SlotState, c: Ckpt, task: int, line: int, reason: str,
                       count_kind: bool = True) -> None:
        if count_kind:
            self._count_kind(reason)
        restored = s.restored_by.pop(c.uid, None)
        if restored is not None and restored[0] == task:
            self.ctx.stats.restored_then_erased_add({
                "task": task, "checkpoint": c.show(), "restored_line": restored[1],
                "erased_line": line, "reason": reason,
            })

    def _count_kind(self, reason: str) -> None:
        name = _COUNTERS.get(reason)
        if name is not None:
            setattr(self.ctx.stats, name, getattr(self.ctx.stats, name) + 1)

    @staticmethod
    def _show(ckpts: list[Ckpt]) -> str:
        if not ckpts:
            return "[]"
        return "[" + ", ".join(c.show() for c in ckpts) + "]"
