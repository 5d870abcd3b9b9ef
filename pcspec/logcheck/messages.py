"""Recognise the message part of a llama-server log line and build its event.

The reader (``pcspec.logcheck.reader``) strips the prefix and hands over the message with its
leading " - " list markers removed. ``DISPATCH`` maps the first word of the message to a builder
that tries the formats starting with that word, in order (both the older and the newer wording
of each message: ``pcspec.logcheck.builds`` names the eras), and returns the event of the first
that matches, or None when the line is something else.

Each format is one row: a regex matched at the start of the message, and how its groups make the
event. ``_slot`` rows are ``SLT_x`` lines (they carry the slot and the task), ``_srv`` rows
``SRV_x`` lines; a few start-up messages are accepted with either prefix (``anywhere``).

Two more tables hold the lines of how the server runs its tasks, which the checker does not
replay (``pcspec.logcheck.tasks`` reads them for ``pcspec live``): ``TASKS``, more ``SRV_x`` and
``SLT_x`` messages, and ``QUEUE``, the ``QUE_x`` messages of server-queue.cpp. They are tables
of their own so that the checker's reader, which reads ``DISPATCH`` only, yields what it did
before them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from pcspec.logcheck import events as ev

_KV = re.compile(r"(\w+) = (-?(?:[\d.]+|nan|inf))")
_F = r"(-?(?:[\d.]+|nan|inf))"  # a %.3f value (may print nan for an empty pinned slot)
_INT = re.compile(r"-?\d+")

# A builder gets (line number, level letter, slot or None, task or None, message body) and
# returns an event or None when the line is not the message it knows.
Builder = Callable[[int, str, int | None, int | None, str], ev.Event | None]
SlotMake = Callable[[int, str, int, int, re.Match[str]], ev.Event | None]
SrvMake = Callable[[int, str, re.Match[str]], ev.Event | None]


def _slot(pattern: str, make: SlotMake) -> Builder:
    """A slot message: ``make(line, level, slot, task, match)``."""
    rx = re.compile(pattern)

    def build(ln: int, lv: str, slot: int | None, task: int | None, body: str) -> ev.Event | None:
        m = rx.match(body) if slot is not None and task is not None else None
        return make(ln, lv, slot, task, m) if m and slot is not None and task is not None else None
    return build


def _srv(pattern: str, make: SrvMake, anywhere: bool = False) -> Builder:
    """A server message (``anywhere``: with a slot prefix too): ``make(line, level, match)``."""
    rx = re.compile(pattern)

    def build(ln: int, lv: str, slot: int | None, task: int | None, body: str) -> ev.Event | None:
        m = rx.match(body) if slot is None or anywhere else None
        return make(ln, lv, m) if m else None
    return build


def _first(*builders: Builder) -> Builder:
    """The formats that start with one word, tried in order."""
    def build(ln: int, lv: str, slot: int | None, task: int | None, body: str) -> ev.Event | None:
        for b in builders:
            e = b(ln, lv, slot, task, body)
            if e is not None:
                return e
        return None
    return build


def _ints(cls: Callable[..., ev.Event]) -> SlotMake:
    """``cls(line, level, slot, task, *groups)``, every group an integer."""
    return lambda ln, lv, slot, task, m: cls(ln, lv, slot, task, *map(int, m.groups()))


def _typed(cls: Callable[..., ev.Event], *types: Callable[[str], Any]) -> SrvMake:
    """``cls(line, level, *groups)``, each group converted by its type."""
    return lambda ln, lv, m: cls(ln, lv, *(t(g) for t, g in zip(types, m.groups(), strict=True)))


def _opt_int(d: dict[str, str], key: str) -> int | None:
    v = d.get(key)
    return int(v) if v is not None and _INT.fullmatch(v) else None


def _ckpt(cls: Callable[..., ev.Event], *optional: str) -> SlotMake:
    """A checkpoint line: the groups before the last (integers, or None when absent), then from
    the ``key = value`` list in the last group ``pos_min``, ``pos_max`` (both required), the
    ``optional`` keys (None when absent: older builds print fewer) and ``size`` (MiB)."""
    def make(ln: int, lv: str, slot: int, task: int, m: re.Match[str]) -> ev.Event | None:
        *lead, kv = m.groups()
        d = dict(_KV.findall(kv))
        pos_min, pos_max = _opt_int(d, "pos_min"), _opt_int(d, "pos_max")
        if pos_min is None or pos_max is None:
            return None
        return cls(ln, lv, slot, task, *(int(g) if g else None for g in lead), pos_min, pos_max,
                   *(_opt_int(d, k) for k in optional), float(d.get("size", "0")))
    return make


_HOW = {"id": "id", "LCP similarity": "lcp", "LRU": "lru"}
_RX_F_KEEP = re.compile(r"f_keep = " + _F)


def _selected(ln: int, lv: str, slot: int, task: int, m: re.Match[str]) -> ev.Event:
    how = _HOW[m.group(1)]
    fk = _RX_F_KEEP.search(m.string, m.end()) if how == "lcp" else None
    f_keep = float(fk.group(1)) if fk else None
    if f_keep is not None and math.isnan(f_keep):
        f_keep = None  # 0/0 for an empty pinned slot (get_available_slot)
    return ev.SlotSelected(ln, lv, slot, task, how, f_keep)


def _opt_float(v: str | None) -> float:
    return float(v or 0.0)


# "<invalid|truncated> context checkpoint appendix in '<path>' - ignored": the restore still
# succeeds, with no checkpoints (the slot-file appendix of #30137)
_APPENDIX = _slot(r".*context checkpoint appendix", lambda ln, lv, s, t, m:
                  ev.SlotFileCheckpoints(ln, lv, s, t, 0))
# (``oldest`` in the C++; a design of one's own may name its own order: ``largest``, say)
_EVICT = r"removing \w+ entry \(size = " + _F + r" MiB\)"

# first word of the message (after stripping the " - " list markers) -> builder
DISPATCH: dict[str, Builder] = {
    # ---- slot messages ----
    "new": _first(
        _slot(r"new prompt, n_ctx_slot = \d+, n_keep = -?\d+, [\w.()]+ = (\d+)", _ints(ev.NewPrompt)),
        _slot(r"new slot, n_ctx(?:_slot)? = (\d+)", _ints(ev.SlotInit))),
    "checking": (_checking := _first(
        _slot(r"([Cc])hecking checkpoint with \[(-?\d+), (-?\d+)\] against (-?\d+)",
              lambda ln, lv, s, t, m: ev.CheckpointChecked(
                  ln, lv, s, t, int(m[2]), int(m[3]), int(m[4]), m[1] == "C")),
        _slot(r"checking sim = " + _F + r" \((\d+)/(\d+)\) > " + _F,
              lambda ln, lv, s, t, m: ev.SimChecked(
                  ln, lv, s, t, float(m[1]), int(m[2]), int(m[3]), float(m[4]))))),
    "Checking": _checking,  # before #25078
    "restored": _first(
        _slot(r"restored context checkpoint \(([^)]*)\)",
              _ckpt(ev.CheckpointRestored, "n_tokens", "n_past")),
        _slot(r"restored (\d+) context checkpoint\(s\) from", _ints(ev.SlotFileCheckpoints))),
    "forcing": _slot(r"forcing full prompt re-processing", _ints(ev.FullReprocess)),
    "erased": _slot(r"erased invalidated context checkpoint \(([^)]*)\)",
                    _ckpt(ev.CheckpointInvalidated, "n_tokens", "n_swa", "pos_next")),
    "need": _slot(r"need to evaluate at least 1 token for each active slot \(n_past = (\d+), "
                  r"task\.n_tokens\(\) = (\d+)\)", _ints(ev.NeedEvaluate)),
    "n_past": _slot(r"n_past was set to (-?\d+)", _ints(ev.NPastSet)),
    "cached": _slot(r"cached n_tokens = (\d+), memory_seq_rm \[(-?\d+), end\)",
                    _ints(ev.CachedTokens)),
    "main/do_checkpoint": _slot(
        r"main/do_checkpoint = (yes|no), pos_min = (-?\d+), pos_max = (-?\d+)",
        lambda ln, lv, s, t, m: ev.DoCheckpoint(ln, lv, s, t, m[1] == "yes", int(m[2]), int(m[3]))),
    "created": _slot(r"created (?:prompt processing )?context checkpoint (?:(\d+) of (\d+) )?"
                     r"\(([^)]*)\)", _ckpt(ev.CheckpointCreated, "n_tokens")),
    "erasing": _first(
        _slot(r"erasing old context checkpoint \(([^)]*)\)",
              _ckpt(ev.CheckpointErasedOld, "n_tokens")),
        _slot(r"erasing context checkpoint too close to an earlier one \(([^)]*)\)",
              _ckpt(ev.CheckpointErasedTooClose, "n_tokens"))),
    "superseding": _slot(r"superseding context checkpoint at n_tokens = (\d+)",
                         _ints(ev.CheckpointSuperseded)),
    "slot": _slot(r"slot context shift, n_keep = -?\d+, n_left = -?\d+, n_discard = (-?\d+)",
                  _ints(ev.ContextShift)),
    "reusing": _slot(r"reusing chunk with size", _ints(ev.CacheReuse)),
    "selected": _slot(r"selected slot by (id|LCP similarity|LRU)", _selected),
    "skipping,": _first(
        _slot(r"skipping, slot is empty", lambda ln, lv, s, t, m: ev.SlotSkipped(ln, lv, s, t, True)),
        _slot(r"skipping, is_processing",
              lambda ln, lv, s, t, m: ev.SlotSkipped(ln, lv, s, t, False))),
    "failed": _first(
        _slot(r"failed to load prompt from cache", _ints(ev.PromptLoadFailed)),
        _slot(r"failed to save complete prompt state", _ints(ev.SaveFailed)),
        _srv(r"failed to allocate memory for prompt cache state", _typed(ev.CacheAllocFailed)),
        # server-task.cpp: load -- ERROR for the target context, WARN for the draft context
        _srv(r"failed to restore state with size \d+",
             lambda ln, lv, m: ev.LoadRestoreFailed(ln, lv, lv == "W"))),
    "clearing": _first(
        _slot(r"clearing prompt with (\d+) tokens", _ints(ev.PromptCleared)),
        _slot(r"clearing cache for lora change", _ints(ev.LoraCleared))),
    "stop": _slot(r"stop processing: n_tokens = (\d+)", _ints(ev.SlotReleased)),
    "saving": _first(
        _slot(r"saving idle slot to prompt cache", _ints(ev.IdleSlotSave)),
        _srv(r"saving prompt with length (\d+), total state size = " + _F
             + r" MiB(?: \(draft: " + _F + r" MiB\))?", _typed(ev.PromptSave, int, float, _opt_float))),
    "processing": _slot(r"processing task, is_child = (\d+)",
                        lambda ln, lv, s, t, m: ev.TaskLaunched(ln, lv, s, t, m[1] != "0")),
    "invalid": _APPENDIX,
    "truncated": _APPENDIX,
    # ---- srv messages ----
    "updating": _srv(r"updating prompt cache", _typed(ev.CacheUpdateStart), anywhere=True),
    "prompt": _first(
        _srv(r"prompt with length +(\d+), lcp = +(-?\d+), f_keep = " + _F + r", (?:f_)?sim = " + _F,
             _typed(ev.LoadCandidate, int, int, float, float)),
        _srv(r"prompt \S+: +(\d+) tokens(?:, checkpoints: +(\d+))?, +" + _F + r" MiB",
             _typed(ev.CacheSummaryEntry, int, lambda k: int(k) if k is not None else None, float)),
        _srv(r"prompt cache update took " + _F + r" ms", _typed(ev.CacheUpdateDone, float)),
        _srv(r"prompt is already in the cache", _typed(ev.CacheAlreadyCached)),
        _srv(r"prompt state size " + _F + r" MiB exceeds cache size limit " + _F + r" MiB",
             _typed(ev.CacheOversize, float, float)),
        _srv(r"prompt cache is enabled, size limit: (?:no limit|(\d+) MiB)",
             lambda ln, lv, m: ev.CacheConfig(ln, lv, True, int(m[1]) if m[1] is not None else None)),
        _srv(r"prompt cache is disabled", lambda ln, lv, m: ev.CacheConfig(ln, lv, False, None))),
    "removing": _srv(r"removing obsolete cached prompt with length (\d+)",
                     _typed(ev.CacheObsoleteRemoved, int)),
    "making": _srv(r"making room for prompt cache entry, " + _EVICT, _typed(ev.CacheMakeRoom, float)),
    "cache": _first(
        _srv(r"cache state: (\d+) prompts, " + _F + r" MiB \(limits: " + _F
             + r" MiB, (\d+) tokens(?:, (\d+) est)?\)",
             _typed(ev.CacheSummary, int, float, float, int,
                    lambda est: int(est) if est is not None else None)),
        _srv(r"cache size limit reached, " + _EVICT, _typed(ev.CacheLimitEvict, float)),
        _srv(r"cache token limit \((\d+), est: (\d+)\) reached, " + _EVICT,
             _typed(ev.CacheTokenEvict, int, int, float)),
        _srv(r"cache size limit reduced to " + _F + r" MiB", _typed(ev.CacheLimitReduced, float))),
    "looking": _srv(r"looking for better prompt, base f_keep = " + _F + r", (f_)?sim = " + _F,
                    lambda ln, lv, m: ev.LoadLookup(ln, lv, float(m[1]), float(m[3]), m[2] is None)),
    "found": _srv(r"found better prompt with f_keep = " + _F + r", (?:f_)?sim = " + _F,
                  _typed(ev.LoadFound, float, float)),
    "purging": _srv(r"purging slot (\d+) with (\d+) tokens", _typed(ev.SlotPurged, int, int),
                    anywhere=True),
    "initializing,": _srv(
        r"initializing, n_slots = (\d+), n_ctx_slot = (\d+)(?:, kv_unified = '(\w+)')?",
        lambda ln, lv, m: ev.ServerInit(ln, lv, int(m[1]), int(m[2]), m[3] == "true"),
        anywhere=True),
    "context": _first(
        _APPENDIX,
        _srv(r"context checkpoints enabled, max = (\d+), min spacing = (-?\d+)",
             lambda ln, lv, m: ev.CheckpointConfig(ln, lv, True, int(m[1]), int(m[2]))),
        _srv(r"context checkpoints disabled",
             lambda ln, lv, m: ev.CheckpointConfig(ln, lv, False, 0, 0))),
    "idle": _srv(r"idle slots will be saved to prompt cache( and cleared)?",
                 lambda ln, lv, m: ev.IdleSlotConfig(ln, lv, True, m[1] is not None), anywhere=True),
    "cache-idle-slots": _srv(r"cache-idle-slots requires --cache-ram",
                             lambda ln, lv, m: ev.IdleSlotConfig(ln, lv, False, False), anywhere=True),
}

# the SRV_x and SLT_x lines of how the server runs its tasks (not replayed by the checker)
TASKS: dict[str, Builder] = {
    "decoding,": _srv(r"decoding, decline task, id_task = (\d+)", _typed(ev.TaskDeclined, int)),
    "posting": _srv(r"posting NEXT_RESPONSE", _typed(ev.NextResponsePosted)),
    "launching": _srv(r"launching slots for parent task id_task = (\d+) with (\d+) child tasks",
                      _typed(ev.ParentLaunched, int, int)),
    "waiting": _slot(r"waiting for parent slot to complete", _ints(ev.WaitingForParent)),
    "copying": _slot(r"copying shared prompt \((\d+) tokens\) to child (\d+)", _ints(ev.SharedPromptCopied)),
    "sending": _slot(r"sending decision result", _ints(ev.DecisionSent)),
}

# the QUE_x lines (server-queue.cpp); each message comes from one function (``post``, the
# loop's ``start_loop``), so the function tag is not read
QUEUE: dict[str, Builder] = {
    "new": _srv(r"new task, id = (\d+)(?:/\d+)?, front = (\d)",
                lambda ln, lv, m: ev.TaskPosted(ln, lv, int(m[1]), m[2] == "1")),
    "processing": _srv(r"processing task, id = (\d+)", _typed(ev.TaskTaken, int)),
    "update": _srv(r"update slots", _typed(ev.UpdateSlots)),
}
