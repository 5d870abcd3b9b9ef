"""The model's events (``pcspec.model.heap.Event``) as comparison records."""

from __future__ import annotations

from collections.abc import Iterable

from pcspec.live import records as r
from pcspec.model.heap import Event

_HOW = {"pinned": "id", "lcp": "lcp", "lru": "lru"}
_ERASE = {"cap": "cap", "too_close": "too_close", "supersede": "supersede", "invalidated": "invalidated",
          "context_shift": "context_shift"}
_EVICT = {"obsolete": "obsolete", "make_room": "make_room", "limit_bytes": "limit_bytes",
          "limit_tokens": "limit_tokens"}


def records(events: Iterable[Event], pinned: frozenset[int] | set[int] = frozenset()) -> list[r.Record]:
    """``pinned``: the model's ids of tasks sent with ``id_slot``; the server logs "selected
    slot by id" for them even when the similarity scan confirms the slot (server-context.cpp:
    1537, the LCP line is printed only for unpinned tasks, 1581-1584)."""
    out: list[r.Record] = []
    for e in events:
        k, d = e.kind, e.data
        if k == "select":
            if d.get("slot") is None:
                continue  # no slot: nothing is logged, the task is deferred
            how = "id" if d.get("task") in pinned else _HOW.get(str(d.get("how")), str(d.get("how")))
            out.append(r.Selected(d.get("slot"), how))
        elif k == "save_begin":  # " - saving prompt with length N" (before alloc)
            out.append(r.CacheSaved(int(d["n_tokens"])))
        elif k == "save_skip_contained":
            out.append(r.CacheSkipped("contained"))
        elif k == "save_reject_oversize":
            out.append(r.CacheSkipped("oversize"))
        elif k == "entry_evict":
            why = str(d.get("reason"))
            if why == "loaded":
                out.append(r.CacheLoaded(d.get("loaded_tokens")))
            elif why in _EVICT:
                out.append(r.CacheEvicted(_EVICT[why], d.get("n_tokens")))
        elif k == "load_failed":
            out.append(r.CacheLoadFailed())
        elif k == "ckpt_restore":
            out.append(r.CkptRestored(d["slot"], d.get("n_tokens"), None, None, d.get("n_past")))
        elif k == "prompt_start":
            if d.get("reprocess") is not None and d.get("n_prefix", 0) > 0:
                out.append(r.FullReprocess(d["slot"]))
        elif k == "ckpt_create":
            out.append(r.CkptCreated(d["slot"], d.get("n_tokens"), d.get("pos_min"), d.get("pos_max")))
        elif k == "ckpt_erase":
            why = str(d.get("reason"))
            out.append(r.CkptErased(d["slot"], _ERASE.get(why, why), d.get("n_tokens")))
        elif k == "prompt_clear":
            out.append(r.PromptCleared(d["slot"], d.get("n_tokens")))
        elif k == "release":
            out.append(r.Released(d["slot"], int(d["n_tokens"])))
    return out
