"""Replay a log's events against the model's rules: the entry point of the checker.

The events are split into server runs (``pcspec.logcheck.scan``: a restart, or a wake from
sleep, re-runs load_model and starts with empty slots and an empty cache). Each run gets its
rule variants from ``pcspec.logcheck.options.resolve`` over its ``RunSummary`` and is replayed by
a ``SlotChecker`` (checkpoints, prompt starts), a ``CacheChecker`` (alloc, load, update) and a
``Selection`` (get_available_slot). The ``srv`` cache lines carry no slot id: they belong to the
slot the server is working on, which is the slot just selected ("selected slot by ...") or the
idle slot being saved ("saving idle slot to prompt cache"); the server runs these steps on one
thread, so the order of the lines is the order of the calls.

``LogChecker`` takes the events one at a time and the run summaries from an iterator that may
run ahead of it by one run (the first pass over the same log), so a log of any length is checked
in bounded memory.

A ``state_read_meta`` line (``StateRead``) is printed by every sequence-state read: tell which by
what surrounds it.

* after "found better prompt": the cache load (server-task.cpp:1827-1860);
* on a slot with a task (between its launch or "new prompt" and "stop processing"): a checkpoint
  restore at prompt start (server-context.cpp:3350-3351, before "restored context checkpoint")
  or a speculative checkpoint (3041, 3926-3929);
* on an idle slot (since the start-up, a release, or a scan line, which the server prints only
  for idle slots, 1551-1568): a slot-file restore. ``POST /slots/N?action=restore`` leaves no
  other line, and the server defers it while the slot has a task (2584-2588). Consecutive lines
  for one slot are the parts (full and SWA caches) of one restore;
* on a slot the log has not shown either way (it starts after the server did): one of the last
  two, so the slot's checkpoints become unknown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, get_args

from pcspec.core.results import Finding
from pcspec.logcheck import events as ev
from pcspec.logcheck import levels
from pcspec.logcheck.cache import LOAD_LINES, SAVE_LINES, UPDATE_LINES, CacheChecker
from pcspec.logcheck.context import Context, Deviations
from pcspec.logcheck.levels import shown
from pcspec.logcheck.options import Options, Rules, resolve
from pcspec.logcheck.scan import RunSummary, opens_run, scan_runs
from pcspec.logcheck.selection import SCAN_LINES, Selection
from pcspec.logcheck.slots import SlotChecker
from pcspec.logcheck.stats import Stats

# lines that prove checkpoints were created / prompts were saved
_CKPT_LINES = (ev.CheckpointErasedOld, ev.CheckpointErasedTooClose, ev.CheckpointRestored,
               ev.CheckpointInvalidated, ev.CheckpointChecked)
_CACHE_LINES = (ev.CacheMakeRoom, ev.CacheLimitEvict, ev.CacheTokenEvict, ev.CacheOversize)
# lines that say how the server was started, not what its cache or checkpoints did: a log of
# only these has nothing to check
_STARTUP_LINES = (ev.BuildLine, ev.VerbosityLine, ev.ServerInit, ev.SlotInit, ev.CacheConfig, ev.CheckpointConfig,
                  ev.IdleSlotConfig)


@dataclass(slots=True)
class CheckResult:
    """The outcome of checking one log. ``deviations`` holds the first
    ``context.MAX_KEPT_DEVIATIONS`` (by line); ``n_deviations`` counts them all.
    ``nothing_to_check``: the log has server lines but none about what the cache or the
    checkpoints did (start-up lines at most), so no rule was checked."""

    source: str
    n_lines: int
    n_events: int
    deviations: list[Finding]
    notes: list[str]
    stats: Stats
    runs: list[Rules]
    weakened: dict[str, int] = field(default_factory=dict)
    n_deviations: int = 0
    nothing_to_check: bool = False
    n_knock_on: int = 0  # disagreements resolved by adopting the log (``context.Deviations``)
    # rule -> "skipped|weakened, why" for the rules some run's verbosity did not let the checker
    # judge in full (``needs``), with the disagreements of skipped rules that were dropped
    not_judged: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema": 1,
            "source": self.source,
            "lines": self.n_lines,
            "events": self.stats.event_counts(),
            "deviation_count": self.n_deviations,
            "knock_on_suppressed": self.n_knock_on,
            "deviations": [d.to_json() for d in self.deviations],
            "nothing_to_check": self.nothing_to_check,
            "stats": self.stats.as_dict(),
            "runs": [r.as_dict() for r in self.runs],
            "weakened_checks": dict(self.weakened),
            "not_judged": dict(self.not_judged),
            "notes": list(self.notes),
        }


class _Run:
    """One server run: configuration, slots and cache."""

    def __init__(self, ctx: Context, summary: RunSummary) -> None:
        self.ctx = ctx
        kinds = summary.kinds
        started = summary.started
        verbosity = ctx.rules.verbosity
        # a list is known from the start only when the lines that grow it are visible: the
        # creation and save lines are TRACE (levels.LEVELS), the erasure and eviction lines
        # WARN; below TRACE they are never printed, at TRACE and above a run that shows other
        # lines of the list but none of these has had them cut out
        created_visible = shown(ev.CheckpointCreated, verbosity) and (
            ev.CheckpointCreated in kinds or not kinds.intersection(_CKPT_LINES))
        saves_visible = shown(ev.PromptSave, verbosity) and (
            ev.PromptSave in kinds or not (kinds.intersection(_CACHE_LINES) or summary.listed))
        if started and verbosity < levels.TRC:
            ctx.notes.append(f"verbosity {levels.describe(verbosity)} ({ctx.rules.verbosity_evidence}): "
                             "checkpoint lists and cache contents are not printed; the rules "
                             "that need them are not judged (run the server with -lv 4 or -v "
                             "to judge them)")
        elif started and not created_visible:
            ctx.notes.append("checkpoint creation lines are not in the log (TRACE hidden? run "
                             "the server with -lv 4 or -v): checkpoint lists not checked")
        if started and verbosity >= levels.TRC and not saves_visible:
            ctx.notes.append("prompt cache save lines are not in the log (TRACE hidden?): "
                             "cache contents not checked")
        if not started:
            ctx.notes.append(f"line {summary.first_line}: the log starts after the server did; "
                             "slots and cache are learnt as the log reveals them")
        self.slots = SlotChecker(ctx, started and created_visible,
                                 ev.CheckpointChecked in kinds, started)
        self.cache = CacheChecker(ctx, self.slots, started and saves_visible,
                                  ev.LoadCandidate in kinds)
        self.selection = Selection(self.slots, self.cache)
        self.restoring: int | None = None  # the slot whose file restore the last line was
        self.handlers: dict[type[ev.Event], Callable[[Any], None]] = {
            ev.SlotInit: self._slot_init,
            ev.SimChecked: self.selection.on_sim,
            ev.SlotSkipped: self.selection.on_skipped,
            ev.SlotSelected: self.selection.on_selected,
            ev.TaskLaunched: self._launched,
            ev.NewPrompt: self.slots.on_new_prompt,
            ev.CachedTokens: self.slots.on_cached,
            ev.DoCheckpoint: self.slots.on_do_checkpoint,
            ev.CheckpointCreated: self.slots.on_created,
            ev.SlotFileCheckpoints: self._slot_file,
            ev.StateRead: self._state_read,
            ev.ContextShift: self._shift,
            ev.SlotReleased: self.slots.on_released,
            ev.PromptLoadFailed: lambda e: self.slots.load_failed(e.slot),
            ev.IdleSlotSave: self._idle_save,
            ev.CacheUpdateStart: self._update_start,
            ev.PromptSave: self.cache.on_save,
            ev.LoadLookup: self.cache.on_lookup,
        }
        groups: list[tuple[tuple[type[ev.Event], ...], Callable[[Any], None]]] = [
            ((ev.CacheConfig, ev.CheckpointConfig, ev.IdleSlotConfig), ctx.config.learn),
            (get_args(ev.StartLine), self.slots.on_start_line),
            (get_args(ev.Erasure), self.slots.on_erasure),
            ((ev.PromptCleared, ev.LoraCleared, ev.SlotPurged), self._cleared),
            (SAVE_LINES, self.cache.on_save_line),
            (LOAD_LINES, self.cache.on_load_line),
            (UPDATE_LINES, self.cache.on_update_line),
        ]
        for types, handler in groups:
            for t in types:
                self.handlers[t] = handler

    def feed(self, e: ev.Event) -> None:
        self.cache.flush_unless_part(e)
        t = type(e)
        if self.selection.pinned is not None and t not in SCAN_LINES:
            # a pinned pick's scan line comes right after the pick or not at all
            self.selection.end_of_scan()
        handler = self.handlers.get(t)
        if handler is not None:
            handler(e)
        if self.restoring is not None and t is not ev.StateRead:
            # a restore's state lines come together (the appendix line after them still
            # knew, in its handler, which restore it belongs to)
            self.restoring = None

    def finish(self) -> None:
        self.cache.flush()
        for s in self.slots.slots.values():
            self.slots.settle(s)

    # ---- start-up ------------------------------------------------------------------------------

    def _slot_init(self, e: ev.SlotInit) -> None:
        self.slots.slot(e.slot).clear()

    def _launched(self, e: ev.TaskLaunched) -> None:
        s = self.slots.slot(e.slot)
        s.task = e.task
        if not shown(ev.NewPrompt, self.ctx.rules.verbosity):
            # below TRACE a request shows as its launch (INFO "processing task",
            # server-context.cpp:1810 at 0c1e570), not as its "new prompt" (TRACE, 3126)
            self.ctx.stats.requests += 1
        if e.is_child:
            # a child task (n_cmpl > 1) starts from a clone of its parent's prompt
            # (copy_state_to), which the log does not show
            self.slots.drop(s, None, exact=False, counted=False)

    def _update_start(self, e: ev.CacheUpdateStart) -> None:
        self.ctx.stats.cache_updates += 1

    # ---- sequence state reads -------------------------------------------------------------------

    def _state_read(self, e: ev.StateRead) -> None:
        if self.cache.loading() or self.restoring == e.seq_id:
            return  # a cache load's, or a further part of the same file restore
        s = self.slots.slot(e.seq_id)
        if s.busy():
            return  # a checkpoint restore at prompt start, or a speculative checkpoint
        if s.idle():
            self.slots.on_file_restore(e)
        else:
            self.slots.on_unexplained_read(e)
        self.restoring = e.seq_id

    def _slot_file(self, e: ev.SlotFileCheckpoints) -> None:
        self.slots.on_slot_file(e, counted=self.restoring == e.slot)

    def _idle_save(self, e: ev.IdleSlotSave) -> None:
        self.cache.ctx_slot = e.slot
        self.cache.sel = None
        self.slots.slot(e.slot).clear_after_save = bool(self.ctx.config.idle_clear)

    # ---- slot state changes ----------------------------------------------------------------------

    def _cleared(self, e: ev.PromptCleared | ev.LoraCleared | ev.SlotPurged) -> None:
        self.slots.clear(e.slot)

    def _shift(self, e: ev.ContextShift) -> None:
        # the shift ends with prompt.clear() and a re-insert of the kept tokens
        self.slots.drop(self.slots.slot(e.slot), None)


class LogChecker:
    """Checks one log fed event by event. ``summaries`` yields each run's ``RunSummary`` (from
    ``scan_runs`` over the same events) no later than the run's first event is fed."""

    def __init__(self, options: Options | None, summaries: Iterator[RunSummary],
                 source: str = "<events>") -> None:
        self.options = options or Options()
        self.summaries = summaries
        self.source = source
        self.stats = Stats()
        self.deviations = Deviations()
        self.notes: list[str] = []
        self.runs: list[Rules] = []
        self.weakened: dict[str, int] = {}
        self.not_judged: dict[str, str] = {}
        self.n_events = 0
        self.n_checked = 0  # events past the start-up lines
        self.run: _Run | None = None

    def feed(self, e: ev.Event) -> None:
        self.n_events += 1
        self.n_checked += not isinstance(e, _STARTUP_LINES)
        if opens_run(e, self.run is not None):
            self._close_run()
            summary = next(self.summaries, None)
            if summary is None:  # cannot happen when both passes read the same events
                summary = RunSummary(isinstance(e, ev.ServerInit), e.line)
            rules = resolve(self.options, summary)
            self.run = _Run(Context(rules, self.stats, self.deviations), summary)
        if self.run is not None:
            self.run.feed(e)

    def _close_run(self) -> None:
        run, self.run = self.run, None
        if run is None:
            return
        run.finish()
        ctx = run.ctx
        choice = ctx.invalidation
        final = choice.rules[0] if len(choice.rules) == 1 else "either"
        self.runs.append(replace(ctx.rules, invalidation=final,
                                 invalidation_evidence=choice.evidence))
        self.notes.extend(ctx.notes)
        for rule, verdict in ctx.not_judged.items():
            if rule not in self.not_judged:
                self.not_judged[rule] = f"{verdict.status} at verbosity {ctx.rules.verbosity}: {verdict.why}"
            dropped = ctx.unjudged.get(rule, 0)
            if dropped:
                self.not_judged[rule] += f" ({dropped} disagreement(s) not reported)"
        for k, v in ctx.weakened.items():
            self.weakened[k] = self.weakened.get(k, 0) + v

    def finish(self, n_lines: int = 0, notes: Sequence[str] = ()) -> CheckResult:
        self._close_run()
        all_notes = [*notes, *self.notes]
        kept = sorted(self.deviations.kept, key=lambda d: d.line)
        if self.deviations.count > len(kept):
            all_notes.append(f"{self.deviations.count - len(kept)} more deviations were "
                             f"counted but not kept (the first {len(kept)} are listed)")
        return CheckResult(self.source, n_lines, self.n_events, kept, all_notes, self.stats,
                           self.runs, self.weakened, self.deviations.count,
                           nothing_to_check=self.n_checked == 0,
                           n_knock_on=self.deviations.knock_on, not_judged=self.not_judged)


def check_events(events: Sequence[ev.Event], options: Options | None = None,
                 source: str = "<events>", n_lines: int = 0,
                 notes: Sequence[str] = ()) -> CheckResult:
    """Check a log's events held in memory; see the module docstring."""
    checker = LogChecker(options, scan_runs(events), source)
    for e in events:
        checker.feed(e)
    return checker.finish(n_lines, notes)
