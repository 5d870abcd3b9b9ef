"""ACC and LIMIT families: the cache counts what it holds, each buffer once (point 1 of the
#30137 review; #27451's description keeps per-holder counting on purpose; docs/SOURCES.md).

ACC-1 compares the design's accounting with unique bytes; ACC-2 and ACC-3 judge each
rejection, admission and eviction with the judge's own numbers, taken from the state at that
moment (``history``: unique bytes of the cache, of the entry, of the candidate a save makes
room for, the limit), never with a number or a reason the design reported; LIMIT-1 bounds
unique bytes and tokens; LIVE-1 flags a limit that a transient failure reduced for good.
"""

from __future__ import annotations

from collections.abc import Sequence

from pcspec.model import events as ev
from pcspec.model.events import Event
from pcspec.properties.base import also_reads, events_of, history_of, memo, needs, on_events, on_storage
from pcspec.properties.history import EXCUSED_EVICTIONS
from pcspec.properties.view import StateView


# What several checks read of the cache, computed once per judgement (``memo``).
def _unique(srv: StateView, events: Sequence[Event]) -> int:
    return memo(events, "unique_bytes", lambda: srv.unique_bytes)


def _accounted(srv: StateView, events: Sequence[Event]) -> int:
    # ``srv.accounted_bytes`` is ``cache.size()`` whenever there is a cache (the only case read)
    return memo(events, "cache_size", lambda: srv.accounted_bytes)


@on_storage
def acc1_accounted_equals_unique(srv: StateView, events: Sequence[Event]) -> list[str]:
    if srv.cache is None:
        return []
    acc, uniq = _accounted(srv, events), _unique(srv, events)
    if acc == uniq:
        return []
    return [f"the cache accounts {acc} bytes but holds {uniq} unique bytes ({acc - uniq:+d})"]


@on_events(ev.SaveRejectOversize, ev.EntryInsert)
@needs("cache")
def acc2_reject_iff_oversize(srv: StateView, events: Sequence[Event]) -> list[str]:
    out: list[str] = []
    for a in history_of(events).admissions:
        if a.rejected and a.own_unique <= a.limit:
            out.append(f"an entry of {a.own_unique} unique bytes was rejected as oversize though the limit is "
                       f"{a.limit} (counted as {a.counted})")
        elif not a.rejected and a.limit > 0 and a.own_unique > a.limit:
            out.append(f"entry #{a.entry} of {a.own_unique} unique bytes admitted over the limit {a.limit}")
    return out


@on_events(ev.EntryEvict)
@needs("cache")
def acc3_minimal_eviction(srv: StateView, events: Sequence[Event]) -> list[str]:
    out: list[str] = []
    for e in history_of(events).evictions:
        if e.why is not None and e.why in (*EXCUSED_EVICTIONS, "limit_tokens"):
            continue
        if e.unique <= e.limit or e.limit <= 0:
            said = "" if e.why is not None else f" (given as {e.reason!r}, which the state does not bear out)"
            out.append(f"entry #{e.entry} evicted ({e.reason}) though unique bytes {e.unique} were within the "
                       f"limit {e.limit}{said}" if e.limit > 0 else
                       f"entry #{e.entry} evicted ({e.reason}) though the cache has no byte limit{said}")
    return out


def _token_limit(size: int, n_tokens: int, limit_size: int, limit_tokens: int) -> int:
    """``limit_tokens_cur`` of ``server_prompt_cache::update`` (server-task.cpp:1880-1883 at
    0c1e570), restated here rather than taken from ``policy.token_limit_estimate``, which the
    model's ``update`` applies: a wrong estimate there would move the model's evictions and
    this bound together. With a byte limit, the token limit rises to what the limit holds at
    the cache's average bytes per token (at least 1); without one it is ``limit_tokens``."""
    if limit_size <= 0:
        return limit_tokens
    size_per_token = max(1.0, size / max(1, n_tokens))
    return max(limit_tokens, int(limit_size / size_per_token))


@on_storage
@also_reads(ev.EntryInsert)
@needs("cache")
def limit1_within_limits(srv: StateView, events: Sequence[Event]) -> list[str]:
    cache = srv.cache
    if cache is None:
        return []
    out: list[str] = []
    limit = cache.limit_size
    for a in history_of(events).admissions if events_of(events, ev.EntryInsert) else ():
        if not a.rejected and a.limit > 0 and a.unique_after > a.limit:
            out.append(f"entry #{a.entry} published with {a.unique_after} unique bytes over the limit {a.limit}")
    uniq = _unique(srv, events)
    if limit > 0 and uniq > limit:
        out.append(f"the cache holds {uniq} unique bytes over the limit {limit}")
    if cache.limit_tokens > 0:  # (the estimate is only read then: the cache's size too)
        n_tokens = cache.n_tokens()
        est = _token_limit(_accounted(srv, events), n_tokens, limit, cache.limit_tokens)
        if n_tokens > est:
            out.append(f"the cache holds {n_tokens} tokens over the token limit {est}")
    return out


@on_storage
def live1_limit_not_reduced(srv: StateView, events: Sequence[Event]) -> list[str]:
    cache = srv.cache
    if cache is None or cache.limit_size == srv.cfg.limit_size:
        return []
    was = srv.cfg.limit_size
    if was == 0:  # (0: --cache-ram set no byte limit)
        return [f"a transient allocation failure gave the cache a byte limit of {cache.limit_size}, for good"
                " (it had no byte limit)"]
    return [f"the cache byte limit is {cache.limit_size}, reduced for good from {was}"]
