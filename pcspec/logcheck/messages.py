"""Recognise the message part of a llama-server log line and build its event.

The reader (``pcspec.logcheck.reader``) strips the prefix and hands over the message with its
leading " - " list markers removed. ``DISPATCH`` maps the first word of the message to a builder
that tries the formats starting with that word (both the older and the newer wording of each
message: ``pcspec.logcheck.builds`` names the eras) and returns an event, or None when the line
is something else.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from pcspec.logcheck import events as ev

_KV = re.compile(r"(\w+) = (-?(?:[\d.]+|nan|inf))")
_F = r"(-?(?:[\d.]+|nan|inf))"  # a %.3f value (may print nan for an empty pinned slot)


# A builder gets (line number, level letter, slot or None, task or None, message body) and
# returns an event or None when the line is not the message it knows.
Builder = Callable[[int, str, int | None, int | None, str], ev.Event | None]


def _kv(text: str) -> dict[str, str]:
    return dict(_KV.findall(text))


def _opt_int(d: dict[str, str], key: str) -> int | None:
    v = d.get(key)
    return int(v) if v is not None else None


def _ckpt_fields(body: str, rx: re.Pattern[str]) -> tuple[dict[str, str], re.Match[str]] | None:
    m = rx.match(body)
    if m is None:
        return None
    d = _kv(m.group(m.lastindex or 1))
    if "pos_min" not in d or "pos_max" not in d:
        return None
    return d, m


def _slot_ints(rx: re.Pattern[str], make: Callable[..., ev.Event]) -> Builder:
    """The builder of a slot message of one format whose groups are all integers:
    ``make(line, level, slot, task, *groups)``."""
    def build(ln: int, lv: str, slot: int | None, task: int | None, body: str) -> ev.Event | None:
        m = rx.match(body) if slot is not None and task is not None else None
        return make(ln, lv, slot, task, *map(int, m.groups())) if m else None
    return build


def _srv_line(rx: re.Pattern[str], make: Callable[..., ev.Event], *types: Callable[[str], Any]) -> Builder:
    """The builder of a server (``srv``) message of one format: ``make(line, level, *groups)``,
    each group converted by its type."""
    def build(ln: int, lv: str, slot: int | None, task: int | None, body: str) -> ev.Event | None:
        m = rx.match(body) if slot is None else None
        return make(ln, lv, *(t(g) for t, g in zip(types, m.groups(), strict=True))) if m else None
    return build


# ---- slot messages -----------------------------------------------------------------------

_RX_NEW_PROMPT = re.compile(r"new prompt, n_ctx_slot = \d+, n_keep = -?\d+, [\w.()]+ = (\d+)")
_RX_NEW_SLOT = re.compile(r"new slot, n_ctx(?:_slot)? = (\d+)")


def _b_new(ln: int, lv: str, slot: int | None, task: int | None, body: str) -> ev.Event | None:
    if slot is None or task is None:
        return None
    m = _RX_NEW_PROMPT.match(body)
    if m:
        return ev.NewPrompt(ln, lv, slot, task, int(m.group(1)))
    m = _RX_NEW_SLOT.match(body)
    if m:
        return ev.SlotInit(ln, lv, slot, task, int(m.group(1)))
    return None


_RX_CHECKING = re.compile(r"([Cc])hecking checkpoint with \[(-?\d+), (-?\d+)\] against (-?\d+)")
_RX_SIM = re.compile(r"checking sim = " + _F + r" \((\d+)/(\d+)\) > " + _F)


def _b_checking(ln: int, lv: str, slot: int | None, task: int | None, body: str) -> ev.Event | None:
    if slot is None or task is None:
        return None
    m = _RX_CHECKING.match(body)
    if m:
        return ev.CheckpointChecked(
            ln, lv, slot, task, int(m.group(2)), int(m.group(3)), int(m.group(4)),
            m.group(1) == "C",
        )
    m = _RX_SIM.match(body)
    if m:
        return ev.SimChecked(
            ln, lv, slot, task, float(m.group(1)), int(m.group(2)), int(m.group(3)),
            float(m.group(4)),
        )
    return None


_RX_RESTORED = re.compile(r"restored context checkpoint \(([^)]*)\)")
_RX_RESTORED_FILE = re.compile(r"restored (\d+) context checkpoint\(s\) from")


def _b_restored(ln: int, lv: str, slot: int | None, task: int | None, body: str) -> ev.Event | None:
    if slot is None or task is None:
        return None
    r = _ckpt_fields(body, _RX_RESTORED)
    if r is not None:
        d = r[0]
        return ev.CheckpointRestored(
            ln, lv, slot, task, int(d["pos_min"]), int(d["pos_max"]), _opt_int(d, "n_tokens"),
            _opt_int(d, "n_past"), float(d.get("size", "0")),
        )
    m = _RX_RESTORED_FILE.match(body)
    if m:
        return ev.SlotFileCheckpoints(ln, lv, slot, task, int(m.group(1)))
    return None


def _b_forcing(ln: int, lv: str, slot: int | None, task: int | None, body: str) -> ev.Event | None:
    if slot is None or task is None or not body.startswith("forcing full prompt re-processing"):
        return None
    return ev.FullReprocess(ln, lv, slot, task)


_RX_INVALIDATED = re.compile(r"erased invalidated context checkpoint \(([^)]*)\)")


def _b_erased(ln: int, lv: str, slot: int | None, task: int | None, body: str) -> ev.Event | None:
    if slot is None or task is None:
        return None
    r = _ckpt_fields(body, _RX_INVALIDATED)
    if r is None:
        return None
    d = r[0]
    return ev.CheckpointInvalidated(
        ln, lv, slot, task, int(d["pos_min"]), int(d["pos_max"]), _opt_int(d, "n_tokens"),
        _opt_int(d, "n_swa"), _opt_int(d, "pos_next"), float(d.get("size", "0")),
    )


_RX_NEED = re.compile(
    r"need to evaluate at least 1 token for each active slot \(n_past = (\d+), "
    r"task\.n_tokens\(\) = (\d+)\)"
)
_RX_NPAST = re.compile(r"n_past was set to (-?\d+)")
_RX_CACHED = re.compile(r"cached n_tokens = (\d+), memory_seq_rm \[(-?\d+), end\)")
_RX_DOCKPT = re.compile(r"main/do_checkpoint = (yes|no), pos_min = (-?\d+), pos_max = (-?\d+)")


def _b_dockpt(ln: int, lv: str, slot: int | None, task: int | None, body: str) -> ev.Event | None:
    if slot is None or task is None:
        return None
    m = _RX_DOCKPT.match(body)
    if m is None:
        return None
    return ev.DoCheckpoint(
        ln, lv, slot, task, m.group(1) == "yes", int(m.group(2)), int(m.group(3))
    )


_RX_CREATED = re.compile(
    r"created (?:prompt processing )?context checkpoint (?:(\d+) of (\d+) )?\(([^)]*)\)"
)


def _b_created(ln: int, lv: str, slot: int | None, task: int | None, body: str) -> ev.Event | None:
    if slot is None or task is None:
        return None
    m = _RX_CREATED.match(body)
    if m is None:
        return None
    d = _kv(m.group(3))
    if "pos_min" not in d or "pos_max" not in d:
        return None
    k, n = m.group(1), m.group(2)
    return ev.CheckpointCreated(
        ln, lv, slot, task, int(k) if k else None, int(n) if n else None, int(d["pos_min"]),
        int(d["pos_max"]), _opt_int(d, "n_tokens"), float(d.get("size", "0")),
    )


_RX_ERASING_OLD = re.compile(r"erasing old context checkpoint \(([^)]*)\)")
_RX_TOO_CLOSE = re.compile(r"erasing context checkpoint too close to an earlier one \(([^)]*)\)")


def _b_erasing(ln: int, lv: str, slot: int | None, task: int | None, body: str) -> ev.Event | None:
    if slot is None or task is None:
        return None
    r = _ckpt_fields(body, _RX_ERASING_OLD)
    cls: type[ev.CheckpointErasedOld] | type[ev.CheckpointErasedTooClose] = ev.CheckpointErasedOld
    if r is None:
        r = _ckpt_fields(body, _RX_TOO_CLOSE)
        cls = ev.CheckpointErasedTooClose
    if r is None:
        return None
    d = r[0]
    return cls(
        ln, lv, slot, task, int(d["pos_min"]), int(d["pos_max"]), _opt_int(d, "n_tokens"),
        float(d.get("size", "0")),
    )


_RX_SUPERSEDING = re.compile(r"superseding context checkpoint at n_tokens = (\d+)")
_RX_SHIFT = re.compile(r"slot context shift, n_keep = -?\d+, n_left = -?\d+, n_discard = (-?\d+)")


def _b_reusing(ln: int, lv: str, slot: int | None, task: int | None, body: str) -> ev.Event | None:
    if slot is None or task is None or not body.startswith("reusing chunk with size"):
        return None
    return ev.CacheReuse(ln, lv, slot, task)


_RX_SELECTED = re.compile(r"selected slot by (id|LCP similarity|LRU)")
_RX_F_KEEP = re.compile(r"f_keep = " + _F)


def _b_selected(
    ln: int, lv: str, slot: int | None, task: int | None, body: str
) -> ev.Event | None:
    if slot is None or task is None:
        return None
    m = _RX_SELECTED.match(body)
    if m is None:
        return None
    how = {"id": "id", "LCP similarity": "lcp", "LRU": "lru"}[m.group(1)]
    fk = _RX_F_KEEP.search(body, m.end()) if how == "lcp" else None
    f_keep = float(fk.group(1)) if fk else None
    if f_keep is not None and math.isnan(f_keep):
        f_keep = None  # 0/0 for an empty pinned slot (get_available_slot)
    return ev.SlotSelected(ln, lv, slot, task, how, f_keep)


def _b_skipping(
    ln: int, lv: str, slot: int | None, task: int | None, body: str
) -> ev.Event | None:
    if slot is None or task is None:
        return None
    if body.startswith("skipping, slot is empty"):
        return ev.SlotSkipped(ln, lv, slot, task, True)
    if body.startswith("skipping, is_processing"):
        return ev.SlotSkipped(ln, lv, slot, task, False)
    return None


_RX_RESTORE_STATE_FAILED = re.compile(r"failed to restore state with size \d+")


def _b_failed(ln: int, lv: str, slot: int | None, task: int | None, body: str) -> ev.Event | None:
    if slot is not None and task is not None:
        if body.startswith("failed to load prompt from cache"):
            return ev.PromptLoadFailed(ln, lv, slot, task)
        if body.startswith("failed to save complete prompt state"):
            return ev.SaveFailed(ln, lv, slot, task)
        return None
    if body.startswith("failed to allocate memory for prompt cache state"):
        return ev.CacheAllocFailed(ln, lv)
    if _RX_RESTORE_STATE_FAILED.match(body):
        # server-task.cpp: load -- ERROR for the target context, WARN for the draft context
        return ev.LoadRestoreFailed(ln, lv, lv == "W")
    return None


_RX_CLEARING = re.compile(r"clearing prompt with (\d+) tokens")


def _b_clearing(
    ln: int, lv: str, slot: int | None, task: int | None, body: str
) -> ev.Event | None:
    if slot is None or task is None:
        return None
    m = _RX_CLEARING.match(body)
    if m:
        return ev.PromptCleared(ln, lv, slot, task, int(m.group(1)))
    if body.startswith("clearing cache for lora change"):
        return ev.LoraCleared(ln, lv, slot, task)
    return None


_RX_STOP = re.compile(r"stop processing: n_tokens = (\d+)")


_RX_SAVING = re.compile(
    r"saving prompt with length (\d+), total state size = " + _F
    + r" MiB(?: \(draft: " + _F + r" MiB\))?"
)


def _b_saving(ln: int, lv: str, slot: int | None, task: int | None, body: str) -> ev.Event | None:
    if slot is not None and task is not None:
        if body.startswith("saving idle slot to prompt cache"):
            return ev.IdleSlotSave(ln, lv, slot, task)
        return None
    m = _RX_SAVING.match(body)
    if m is None:
        return None
    return ev.PromptSave(ln, lv, int(m.group(1)), float(m.group(2)), float(m.group(3) or 0.0))


_RX_PROCESSING = re.compile(r"processing task, is_child = (\d+)")


def _b_processing(
    ln: int, lv: str, slot: int | None, task: int | None, body: str
) -> ev.Event | None:
    if slot is None or task is None:
        return None
    m = _RX_PROCESSING.match(body)
    return ev.TaskLaunched(ln, lv, slot, task, m.group(1) != "0") if m else None


def _b_appendix(
    ln: int, lv: str, slot: int | None, task: int | None, body: str
) -> ev.Event | None:
    # "<invalid|truncated> context checkpoint appendix in '<path>' - ignored": the restore
    # still succeeds, with no checkpoints (the slot-file appendix of #30137)
    if slot is None or task is None or "context checkpoint appendix" not in body:
        return None
    return ev.SlotFileCheckpoints(ln, lv, slot, task, 0)


# ---- srv messages --------------------------------------------------------------------------


def _b_updating(
    ln: int, lv: str, slot: int | None, task: int | None, body: str
) -> ev.Event | None:
    return ev.CacheUpdateStart(ln, lv) if body.startswith("updating prompt cache") else None


_RX_CACHE_ENABLED = re.compile(r"prompt cache is enabled, size limit: (?:no limit|(\d+) MiB)")
_RX_OVERSIZE = re.compile(
    r"prompt state size " + _F + r" MiB exceeds cache size limit " + _F + r" MiB"
)
_RX_LOAD_CAND = re.compile(
    r"prompt with length +(\d+), lcp = +(-?\d+), f_keep = " + _F + r", (?:f_)?sim = " + _F
)
_RX_SUMMARY_ENTRY = re.compile(
    r"prompt \S+: +(\d+) tokens(?:, checkpoints: +(\d+))?, +" + _F + r" MiB"
)


def _b_prompt(ln: int, lv: str, slot: int | None, task: int | None, body: str) -> ev.Event | None:
    if slot is not None:
        return None
    if body.startswith("prompt with length"):
        m = _RX_LOAD_CAND.match(body)
        if m is None:
            return None
        return ev.LoadCandidate(
            ln, lv, int(m.group(1)), int(m.group(2)), float(m.group(3)), float(m.group(4))
        )
    m = _RX_SUMMARY_ENTRY.match(body)
    if m:
        k = m.group(2)
        return ev.CacheSummaryEntry(
            ln, lv, int(m.group(1)), int(k) if k is not None else None, float(m.group(3))
        )
    if body.startswith("prompt cache update took"):
        return ev.CacheUpdateDone(ln, lv)
    if body.startswith("prompt is already in the cache"):
        return ev.CacheAlreadyCached(ln, lv)
    m = _RX_OVERSIZE.match(body)
    if m:
        return ev.CacheOversize(ln, lv, float(m.group(1)), float(m.group(2)))
    m = _RX_CACHE_ENABLED.match(body)
    if m:
        mib = m.group(1)
        return ev.CacheConfig(ln, lv, True, int(mib) if mib is not None else None)
    if body.startswith("prompt cache is disabled"):
        return ev.CacheConfig(ln, lv, False, None)
    return None


_RX_OBSOLETE = re.compile(r"removing obsolete cached prompt with length (\d+)")


_RX_MAKING = re.compile(
    r"making room for prompt cache entry, removing oldest entry \(size = " + _F + r" MiB\)"
)


_RX_LIMIT_REDUCED = re.compile(r"cache size limit reduced to " + _F + r" MiB")
_RX_LIMIT_REACHED = re.compile(
    r"cache size limit reached, removing oldest entry \(size = " + _F + r" MiB\)"
)
_RX_TOKEN_LIMIT = re.compile(
    r"cache token limit \((\d+), est: (\d+)\) reached, removing oldest entry \(size = "
    + _F + r" MiB\)"
)
_RX_SUMMARY = re.compile(
    r"cache state: (\d+) prompts, " + _F + r" MiB \(limits: " + _F
    + r" MiB, (\d+) tokens(?:, (\d+) est)?\)"
)


def _b_cache(ln: int, lv: str, slot: int | None, task: int | None, body: str) -> ev.Event | None:
    if slot is not None:
        return None
    m = _RX_SUMMARY.match(body)
    if m:
        est = m.group(5)
        return ev.CacheSummary(
            ln, lv, int(m.group(1)), float(m.group(2)), float(m.group(3)), int(m.group(4)),
            int(est) if est is not None else None,
        )
    m = _RX_LIMIT_REACHED.match(body)
    if m:
        return ev.CacheLimitEvict(ln, lv, float(m.group(1)))
    m = _RX_TOKEN_LIMIT.match(body)
    if m:
        return ev.CacheTokenEvict(ln, lv, int(m.group(1)), int(m.group(2)), float(m.group(3)))
    m = _RX_LIMIT_REDUCED.match(body)
    if m:
        return ev.CacheLimitReduced(ln, lv, float(m.group(1)))
    return None


_RX_LOOKING = re.compile(
    r"looking for better prompt, base f_keep = " + _F + r", (f_)?sim = " + _F
)


def _b_looking(
    ln: int, lv: str, slot: int | None, task: int | None, body: str
) -> ev.Event | None:
    if slot is not None:
        return None
    m = _RX_LOOKING.match(body)
    if m is None:
        return None
    return ev.LoadLookup(ln, lv, float(m.group(1)), float(m.group(3)), m.group(2) is None)


_RX_FOUND = re.compile(r"found better prompt with f_keep = " + _F + r", (?:f_)?sim = " + _F)


_RX_PURGING = re.compile(r"purging slot (\d+) with (\d+) tokens")


def _b_purging(
    ln: int, lv: str, slot: int | None, task: int | None, body: str
) -> ev.Event | None:
    m = _RX_PURGING.match(body)
    return ev.SlotPurged(ln, lv, int(m.group(1)), int(m.group(2))) if m else None


_RX_INIT = re.compile(
    r"initializing, n_slots = (\d+), n_ctx_slot = (\d+)(?:, kv_unified = '(\w+)')?"
)


def _b_initializing(
    ln: int, lv: str, slot: int | None, task: int | None, body: str
) -> ev.Event | None:
    m = _RX_INIT.match(body)
    if m is None:
        return None
    return ev.ServerInit(ln, lv, int(m.group(1)), int(m.group(2)), m.group(3) == "true")


_RX_CKPT_CFG = re.compile(r"context checkpoints enabled, max = (\d+), min spacing = (-?\d+)")


def _b_context(
    ln: int, lv: str, slot: int | None, task: int | None, body: str
) -> ev.Event | None:
    if slot is not None:
        return _b_appendix(ln, lv, slot, task, body)
    m = _RX_CKPT_CFG.match(body)
    if m:
        return ev.CheckpointConfig(ln, lv, True, int(m.group(1)), int(m.group(2)))
    if body.startswith("context checkpoints disabled"):
        return ev.CheckpointConfig(ln, lv, False, 0, 0)
    return None


def _b_idle(ln: int, lv: str, slot: int | None, task: int | None, body: str) -> ev.Event | None:
    if body.startswith("idle slots will be saved to prompt cache"):
        return ev.IdleSlotConfig(ln, lv, True, body.startswith("idle slots will be saved to "
                                                               "prompt cache and cleared"))
    return None


def _b_idle_off(
    ln: int, lv: str, slot: int | None, task: int | None, body: str
) -> ev.Event | None:
    if body.startswith("cache-idle-slots requires --cache-ram"):
        return ev.IdleSlotConfig(ln, lv, False, False)
    return None


# first word of the message (after stripping the " - " list markers) -> builder
DISPATCH: dict[str, Builder] = {
    "new": _b_new,
    "checking": _b_checking,
    "Checking": _b_checking,
    "restored": _b_restored,
    "forcing": _b_forcing,
    "erased": _b_erased,
    "need": _slot_ints(_RX_NEED, ev.NeedEvaluate),
    "n_past": _slot_ints(_RX_NPAST, ev.NPastSet),
    "cached": _slot_ints(_RX_CACHED, ev.CachedTokens),
    "main/do_checkpoint": _b_dockpt,
    "created": _b_created,
    "erasing": _b_erasing,
    "superseding": _slot_ints(_RX_SUPERSEDING, ev.CheckpointSuperseded),
    "slot": _slot_ints(_RX_SHIFT, ev.ContextShift),
    "reusing": _b_reusing,
    "selected": _b_selected,
    "skipping,": _b_skipping,
    "failed": _b_failed,
    "clearing": _b_clearing,
    "stop": _slot_ints(_RX_STOP, ev.SlotReleased),
    "saving": _b_saving,
    "processing": _b_processing,
    "invalid": _b_appendix,
    "truncated": _b_appendix,
    "updating": _b_updating,
    "prompt": _b_prompt,
    "removing": _srv_line(_RX_OBSOLETE, ev.CacheObsoleteRemoved, int),
    "making": _srv_line(_RX_MAKING, ev.CacheMakeRoom, float),
    "cache": _b_cache,
    "looking": _b_looking,
    "found": _srv_line(_RX_FOUND, ev.LoadFound, float, float),
    "purging": _b_purging,
    "initializing,": _b_initializing,
    "context": _b_context,
    "idle": _b_idle,
    "cache-idle-slots": _b_idle_off,
}
