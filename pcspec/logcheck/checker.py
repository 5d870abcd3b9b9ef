"""Replay a log's events against the model's rules: the entry point of the checker.

The events are split into server runs at each ``initializing, n_slots`` line (a restart, or a
wake from sleep, re-runs load_model and starts with empty slots and an empty cache). Each run
gets its rule variants from ``pcspec.logcheck.options.resolve`` and is replayed by a
``SlotChecker`` (checkpoints, prompt starts) and a ``CacheChecker`` (alloc, load, update). The
``srv`` cache lines carry no slot id: they belong to the slot the server is working on, which
is the slot just selected ("selected slot by ...") or the idle slot being saved ("saving idle
slot to prompt cache"); the server runs these steps on one thread, so the order of the lines is
the order of the calls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pcspec.logcheck import events as ev
from pcspec.logcheck.cache import LOAD_LINES, SAVE_LINES, UPDATE_LINES, CacheChecker
from pcspec.logcheck.context import Context
from pcspec.logcheck.options import Options, Rules, resolve
from pcspec.logcheck.rules import Deviation
from pcspec.logcheck.slots import SlotChecker
from pcspec.logcheck.stats import Stats

# lines that prove checkpoints were created / prompts were saved
_CKPT_LINES = (ev.CheckpointErasedOld, ev.CheckpointErasedTooClose, ev.CheckpointRestored,
               ev.CheckpointInvalidated, ev.CheckpointChecked)
_CACHE_LINES = (ev.CacheMakeRoom, ev.CacheLimitEvict, ev.CacheTokenEvict, ev.CacheOversize)


@dataclass(slots=True)
class CheckResult:
    """The outcome of checking one log."""

    source: str
    n_lines: int
    events: list[ev.Event]
    deviations: list[Deviation]
    notes: list[str]
    stats: Stats
    runs: list[Rules]
    weakened: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema": 1,
            "source": self.source,
            "lines": self.n_lines,
            "events": self.stats.event_counts(),
            "deviations": [d.as_dict() for d in self.deviations],
            "stats": self.stats.as_dict(),
            "runs": [r.as_dict() for r in self.runs],
            "weakened_checks": dict(self.weakened),
            "notes": list(self.notes),
        }


def split_runs(events: Sequence[ev.Event]) -> list[tuple[bool, list[ev.Event]]]:
    """(starts with the server's start-up, events) per server run."""
    runs: list[tuple[bool, list[ev.Event]]] = []
    current: list[ev.Event] = []
    started = False
    for e in events:
        if isinstance(e, ev.ServerInit):
            if current or started:
                runs.append((started, current))
            current, started = [], True
        current.append(e)
    if current or started:
        runs.append((started, current))
    return runs


class _Run:
    """One server run: configuration, slots and cache."""

    def __init__(self, ctx: Context, started: bool, events: Sequence[ev.Event]) -> None:
        self.ctx = ctx
        kinds = {type(e) for e in events}
        listed = any(isinstance(e, ev.CacheSummary) and e.n_prompts > 0 for e in events)
        # a list is known from the start only when the lines that grow it are visible: the
        # creation and save lines are TRACE, the erasure and eviction lines WARN
        created_visible = ev.CheckpointCreated in kinds or not kinds.intersection(_CKPT_LINES)
        saves_visible = ev.PromptSave in kinds or not (kinds.intersection(_CACHE_LINES)
                                                        or listed)
        if started and not created_visible:
            ctx.notes.append("checkpoint creation lines are not in the log (TRACE hidden? run "
                             "the server with -lv 4 or -v): checkpoint lists not checked")
        if started and not saves_visible:
            ctx.notes.append("prompt cache save lines are not in the log (TRACE hidden?): "
                             "cache contents not checked")
        if not started and events:
            ctx.notes.append(f"line {events[0].line}: the log starts after the server did; "
                             "slots and cache are learnt as the log reveals them")
        self.slots = SlotChecker(ctx, started and created_visible,
                                 ev.CheckpointChecked in kinds)
        self.cache = CacheChecker(ctx, self.slots, started and saves_visible,
                                  ev.LoadCandidate in kinds)
        self.round: dict[int, ev.SimChecked] = {}
        self.round_empty: set[int] = set()
        self.handlers: dict[type[ev.Event], Callable[[Any], None]] = {
            ev.ServerInit: self._server_init,
            ev.CacheConfig: self._cache_config,
            ev.CheckpointConfig: self._ckpt_config,
            ev.IdleSlotConfig: self._idle_config,
            ev.SlotInit: self._slot_init,
            ev.SimChecked: self._sim,
            ev.SlotSkipped: self._skipped,
            ev.SlotSelected: self._selected,
            ev.TaskLaunched: self._launched,
            ev.NewPrompt: self.slots.on_new_prompt,
            ev.CacheReuse: self.slots.on_start_line,
            ev.CheckpointChecked: self.slots.on_start_line,
            ev.CheckpointRestored: self.slots.on_start_line,
            ev.FullReprocess: self.slots.on_start_line,
            ev.CheckpointInvalidated: self.slots.on_start_line,
            ev.NeedEvaluate: self.slots.on_start_line,
            ev.NPastSet: self.slots.on_start_line,
            ev.CachedTokens: self.slots.on_cached,
            ev.DoCheckpoint: self.slots.on_do_checkpoint,
            ev.CheckpointCreated: self.slots.on_created,
            ev.CheckpointErasedOld: self.slots.on_erasure,
            ev.CheckpointErasedTooClose: self.slots.on_erasure,
            ev.CheckpointSuperseded: self.slots.on_erasure,
            ev.SlotFileCheckpoints: self.slots.on_slot_file,
            ev.ContextShift: self._shift,
            ev.PromptCleared: self._cleared,
            ev.LoraCleared: self._cleared,
            ev.SlotPurged: self._purged,
            ev.SlotReleased: self.slots.on_released,
            ev.PromptLoadFailed: self._load_failed,
            ev.IdleSlotSave: self._idle_save,
            ev.CacheUpdateStart: self._update_start,
            ev.CacheUpdateDone: lambda e: None,
            ev.PromptSave: self.cache.on_save,
            ev.LoadLookup: self.cache.on_lookup,
        }
        groups: list[tuple[tuple[type[ev.Event], ...], Callable[[Any], None]]] = [
            (SAVE_LINES, self.cache.on_save_line),
            (LOAD_LINES, self.cache.on_load_line),
            (UPDATE_LINES, self.cache.on_update_line),
        ]
        for types, handler in groups:
            for t in types:
                self.handlers[t] = handler

    def feed(self, e: ev.Event) -> None:
        self.cache.flush_unless_part(e)
        handler = self.handlers.get(type(e))
        if handler is not None:
            handler(e)

    def finish(self) -> None:
        self.cache.flush()
        for s in self.slots.slots.values():
            self.slots.settle(s)

    # ---- start-up ------------------------------------------------------------------------------

    def _server_init(self, e: ev.ServerInit) -> None:
        self.ctx.config.n_slots = e.n_slots
        self.ctx.config.kv_unified = e.kv_unified

    def _cache_config(self, e: ev.CacheConfig) -> None:
        cfg = self.ctx.config
        cfg.cache_enabled = e.enabled
        if e.enabled:
            cfg.set_limit_mib(e.limit_mib)

    def _ckpt_config(self, e: ev.CheckpointConfig) -> None:
        cfg = self.ctx.config
        cfg.cap = e.max if e.enabled else 0
        cfg.min_step = e.min_spacing if e.enabled else None

    def _idle_config(self, e: ev.IdleSlotConfig) -> None:
        self.ctx.config.idle_enabled = e.enabled
        self.ctx.config.idle_clear = e.enabled and e.clear

    def _slot_init(self, e: ev.SlotInit) -> None:
        s = self.slots.slot(e.slot)
        s.ckpts, s.exact, s.n_tokens = [], True, 0

    # ---- slot selection (get_available_slot) ---------------------------------------------------

    def _sim(self, e: ev.SimChecked) -> None:
        self.round[e.slot] = e

    def _skipped(self, e: ev.SlotSkipped) -> None:
        if e.empty:
            self.round_empty.add(e.slot)
            self.slots.slot(e.slot).n_tokens = 0

    def _selected(self, e: ev.SlotSelected) -> None:
        s = self.slots.slot(e.slot)
        sim = self.round.get(e.slot)
        if sim is not None:
            s.prefix_hint = sim.lcp
            self.cache.sel = (sim.lcp, sim.n_new)
        elif e.slot in self.round_empty:
            s.prefix_hint = 0
            self.cache.sel = (0, None)
        else:
            s.prefix_hint = None
            self.cache.sel = None
        self.cache.ctx_slot = e.slot
        self.round.clear()
        self.round_empty.clear()

    def _launched(self, e: ev.TaskLaunched) -> None:
        s = self.slots.slot(e.slot)
        s.task = e.task
        if e.is_child:
            # a child task (n_cmpl > 1) starts from a clone of its parent's prompt
            # (copy_state_to), which the log does not show
            self.slots.settle(s)
            s.ckpts, s.exact, s.n_tokens = [], False, None

    def _update_start(self, e: ev.CacheUpdateStart) -> None:
        self.ctx.stats.cache_updates += 1

    def _idle_save(self, e: ev.IdleSlotSave) -> None:
        self.cache.ctx_slot = e.slot
        self.cache.sel = None
        self.slots.slot(e.slot).clear_after_save = bool(self.ctx.config.idle_clear)

    # ---- slot state changes ----------------------------------------------------------------------

    def _cleared(self, e: ev.PromptCleared | ev.LoraCleared) -> None:
        self.slots.clear(e.slot)

    def _purged(self, e: ev.SlotPurged) -> None:
        self.slots.clear(e.slot)

    def _shift(self, e: ev.ContextShift) -> None:
        # the shift ends with prompt.clear() and a re-insert of the kept tokens
        self.slots.forget(e.slot)

    def _load_failed(self, e: ev.PromptLoadFailed) -> None:
        self.slots.clear(e.slot)
        self.slots.slot(e.slot).prefix_hint = 0


def check_events(events: Sequence[ev.Event], options: Options | None = None,
                 source: str = "<events>", n_lines: int = 0,
                 notes: Sequence[str] = ()) -> CheckResult:
    """Check a log's events; see the module docstring."""
    options = options or Options()
    stats = Stats()
    deviations: list[Deviation] = []
    all_notes = list(notes)
    runs: list[Rules] = []
    weakened: dict[str, int] = {}
    for started, run_events in split_runs(events):
        rules = resolve(options, run_events)
        runs.append(rules)
        ctx = Context(rules, stats)
        run = _Run(ctx, started, run_events)
        for e in run_events:
            run.feed(e)
        run.finish()
        deviations.extend(ctx.deviations)
        all_notes.extend(ctx.notes)
        for k, v in ctx.weakened.items():
            weakened[k] = weakened.get(k, 0) + v
    deviations.sort(key=lambda d: d.line)
    if not events:
        all_notes.append("no llama-server prompt-cache or checkpoint lines found")
    return CheckResult(source, n_lines, list(events), deviations, all_notes, stats, runs,
                       weakened)
