"""Checkpoint sharing, cache accounting and payload copies.

The workload is a growing chat conversation on two slots with idle-slot caching (the "two slots,
idle caching" workload of the #30137 description's memory table): conversation A is pinned to
slot 0, a second client B to slot 1. Every launch on one slot saves the other, idle, slot to
the prompt cache (server-context.cpp: process_single_task). The chat client re-renders the assistant's reply
when it sends the history back (as clients that strip reasoning do), so each new prompt shares
exactly the previous *prompt* with the slot, not the reply: the slot restores a checkpoint,
keeps all of its checkpoints and adds one. Successive saves of slot 0 are therefore not
prefixes of each other (no obsolete removal) and hold the same checkpoints.

Hand derivation (recurrent memory, n_batch 16, n_ubatch 4, cap 4, min step 8):

* Sizes. A recurrent full state (``main``) and a partial state (a checkpoint) are both
  STATE_HEADER 16 + rs_bytes 1000 = 1016 bytes = ``U``; token lists are not counted.
* Turn k prompt ``P_k``: P_1 = tokens 1..24; P_k = P_(k-1) + 4 re-rendered reply tokens + 16
  user tokens, so ``N_k = len(P_k) = 24 + 20 (k - 1)``: 24, 44, 64, 84.
* The prompt tail is split at ``N - (4 + n_ubatch)`` and ``N - 4`` (#20288); only the last batch
  is ``near_prompt_end`` (``N < (N - 4) + 4 + n_ubatch`` holds for ``[N-4, N)`` only), so every
  turn creates exactly one checkpoint, at ``n_tokens = N_k - 4`` with ``pos = [N_k-5, N_k-5]``
  (turn 1: batches [0,16) (memory empty: no checkpoint), [16,20), [20,24) -> c20).
* After a turn with n_predict 2 the slot holds ``T_k = P_k`` + 1 decoded generated token (the
  last sampled token is never decoded).
* Turn k+1: ``lcp(T_k, P_(k+1)) = N_k`` -> ``pos_next = N_k``; the recurrent memory has
  ``pos_min = N_k >= pos_min_thold = N_k`` -> restore the newest checkpoint with
  ``pos_max <= N_k``: c(N_k - 4), so ``pos_next = n_past = N_k - 4``; nothing is invalidated
  (every checkpoint has ``n_tokens <= N_k - 4``). Re-processing from ``N_k - 4`` creates
  c(N_(k+1) - 4). Checkpoints are 20 apart (> min step 8): the sweep erases nothing; the cap
  (4) is not reached within 4 turns. Slot 0 after turn k: {c20, c40, ..., c(N_k - 4)}.
* B's prompt is 4 tokens (one batch into an empty memory: no checkpoint), n_predict 1, so slot 1
  holds exactly those 4 tokens; its entry ``EB`` is ``U`` bytes.
* Round k = request A_k (launch saves slot 1: EB in round 2, "already in the cache" later),
  then request B (launch saves slot 0: ``E_k = (T_k, {c20..c(N_k-4)})``, ``(k + 1) U`` bytes
  counted per holder).
"""

from __future__ import annotations

import pytest

from pcspec.model import events as ev
from pcspec.model.designs import DESIGNS
from pcspec.model.server import Server
from tests.support.common import B_PROMPT, DESIGN_NAMES, events, recurrent_config
from tests.support.common import RS_STATE as U  # STATE_HEADER + rs_bytes: one recurrent state, full or partial


def make_server(variant: str, cache_ram: int) -> Server:
    return Server(recurrent_config(cache_ram=cache_ram), DESIGNS[variant])


def prompt(k: int) -> tuple[int, ...]:
    """P_k: the history as the client sends it at turn k (reply re-rendered, then a user turn)."""
    p = tuple(range(1, 25))
    for j in range(2, k + 1):
        reply = tuple(range(2000 + 100 * j, 2004 + 100 * j))
        user = tuple(range(100 * j, 100 * j + 16))
        p = p + reply + user
    return p


def entry_tokens(srv: Server) -> list[int]:
    assert srv.cache is not None
    return [e.prompt.n_tokens for e in srv.cache.entries]


def play(srv: Server, rounds: int) -> list[tuple[int, int]]:
    """Play ``rounds`` rounds; return the event range of each B request (the operation whose
    launch saves slot 0), so callers can look at what that save did."""
    marks: list[tuple[int, int]] = []
    for k in range(1, rounds + 1):
        srv.request(prompt(k), n_predict=2, id_slot=0)
        srv.run()
        start = len(srv.heap.events)
        srv.request(B_PROMPT, n_predict=1, id_slot=1)
        marks.append((start, len(srv.heap.events)))
        srv.run()
    assert srv.crash is None
    return marks


@pytest.mark.parametrize("variant", DESIGN_NAMES)
def test_conversation_restores_and_keeps_checkpoints(variant: str) -> None:
    srv = make_server(variant, cache_ram=1 << 20)
    play(srv, 3)
    # Turns 2 and 3 restore c20 and c40 (n_past = N_k - 4), never erase anything.
    assert [(e.n_tokens, e.n_past) for e in events(srv, ev.CkptRestore)] == [
        (20, 20),
        (40, 40),
    ]
    assert events(srv, ev.CkptErase) == []
    assert [c.n_tokens for c in srv.slots[0].prompt.checkpoints] == [20, 40, 60]
    assert [(c.pos_min, c.pos_max) for c in srv.slots[0].prompt.checkpoints] == [
        (19, 19),
        (39, 39),
        (59, 59),
    ]
    # E1 (T1 = 25 tokens), EB (4), E2 (45), E3 (65): no entry is a prefix of a later prompt.
    assert entry_tokens(srv) == [25, 4, 45, 65]
    assert srv.cache is not None
    assert [[c.n_tokens for c in e.prompt.checkpoints] for e in srv.cache.entries] == [
        [20],
        [],
        [20, 40],
        [20, 40, 60],
    ]


# Per holder: E1 2U + EB U + E2 3U + E3 4U = 10U. Unique: 3 mains + EB + c20, c40, c60 = 7U
# when the checkpoints are shared (pr30137: the same objects; pr27451: the same payload
# buffers); baseline deep-copies, so its 10U are 10U of distinct buffers. Physical adds the
# slot's own checkpoints: baseline's slot holds 3 more copies (13U); the sharing designs hold
# nothing the cache does not (7U).
ACCOUNTING = {
    "baseline": (10 * U, 10 * U, 13 * U),
    "pr30137": (10 * U, 7 * U, 7 * U),
    "pr27451": (10 * U, 7 * U, 7 * U),
    "fixed": (7 * U, 7 * U, 7 * U),
}


@pytest.mark.parametrize("variant", DESIGN_NAMES)
def test_shared_checkpoint_counted_once_per_holder(variant: str) -> None:
    srv = make_server(variant, cache_ram=1 << 20)
    play(srv, 3)
    accounted, unique, physical = ACCOUNTING[variant]
    assert (srv.accounted_bytes, srv.unique_bytes, srv.physical_bytes) == (
        accounted,
        unique,
        physical,
    )
    assert srv.cache is not None
    e1, _eb, e2, e3 = srv.cache.entries
    c20_slot = srv.slots[0].prompt.checkpoints[0]
    c20 = [e1.prompt.checkpoints[0], e2.prompt.checkpoints[0], e3.prompt.checkpoints[0]]
    if variant in ("pr30137", "fixed"):  # std::shared_ptr<const common_prompt_checkpoint>
        assert all(c is c20_slot for c in c20)
    elif variant == "pr27451":  # metadata by value, payload buffer shared
        assert all(c is not c20_slot and c.tgt is c20_slot.tgt for c in c20)
    else:  # baseline: std::list<common_prompt_checkpoint> copied by value
        assert len({id(c.tgt) for c in [*c20, c20_slot]}) == 4


# cache_ram = 8U. Round 3 saves E3 (4U per holder) into [E1 2U, EB U, E2 3U]:
# * per holder: 6U + 4U = 10U > 8U -> pop E1 (8U <= 8U: fits). E1 is evicted although it adds
#   only its main state (U) to what the cache really holds: its c20 is shared with E2 and E3.
# * unique (fixed): the entries count only what the candidate does not already hold:
#   E1 U (main; c20 is the candidate's) + EB U + E2 U (main) + E3 4U = 7U <= 8U: no eviction.
# Baseline really holds copies, so its eviction is what unique accounting of its buffers needs.
MAKE_ROOM = {
    "baseline": ([4, 45, 65], [25], 8 * U, 8 * U),
    "pr30137": ([4, 45, 65], [25], 8 * U, 6 * U),
    "pr27451": ([4, 45, 65], [25], 8 * U, 6 * U),
    "fixed": ([25, 4, 45, 65], [], 7 * U, 7 * U),
}


@pytest.mark.parametrize("variant", DESIGN_NAMES)
def test_make_room_evicts_entries_unique_accounting_keeps(variant: str) -> None:
    srv = make_server(variant, cache_ram=8 * U)
    marks = play(srv, 3)
    entries, evicted, accounted, unique = MAKE_ROOM[variant]
    assert entry_tokens(srv) == entries
    made_room = [
        e.n_tokens for e in events(srv, ev.EntryEvict, marks[2][0]) if e.reason == "make_room"
    ]
    assert made_room == evicted
    assert (srv.accounted_bytes, srv.unique_bytes) == (accounted, unique)
    if variant in ("pr30137", "pr27451"):
        # What E1 cost in RAM: the cache held 7U with it and E3, below the 8U limit.
        assert srv.unique_bytes + U <= 8 * U


# cache_ram = 3.5U (3556 bytes).
# Round 1: E1 (2U) -> [E1].  Round 2: EB (U): 3U fits -> [E1, EB]; E2 (3U, not > 3.5U): make
# room pops E1 and EB under every accounting (fixed: E1 main U + EB U + 3U = 5U > 3.5U, then
# 4U) -> [E2]. Round 3: A3's launch re-saves EB (U): 3U + U > 3.5U pops E2 -> [EB]; then B's
# launch saves E3 whose own bytes are 4U > 3.5U: rejected before anything is removed, so EB
# stays -- under every variant (fixed counts E3's own unique bytes, 4U, the same).
@pytest.mark.parametrize("variant", DESIGN_NAMES)
def test_oversize_entry_rejected_without_eviction(variant: str) -> None:
    limit = 3 * U + U // 2
    srv = make_server(variant, cache_ram=limit)
    marks = play(srv, 3)
    assert srv.cache is not None
    rejected = events(srv, ev.SaveRejectOversize, marks[2][0])
    assert [r.size for r in rejected] == [4 * U]
    assert [r.limit for r in rejected] == [limit]
    assert events(srv, ev.EntryEvict, marks[2][0]) == []
    assert entry_tokens(srv) == [4]
    assert srv.accounted_bytes == U


# Must-show (b): the save of slot 0 in round k publishes checkpoints totalling X = k U (c20 ..
# c(N_k-4)). Baseline deep-copies them (std::list copy): X payload bytes copied per save. The
# sharing designs copy none.
@pytest.mark.parametrize(
    ("variant", "copied"),
    [
        ("baseline", [1 * U, 2 * U, 3 * U]),
        ("pr30137", [0, 0, 0]),
        ("pr27451", [0, 0, 0]),
        ("fixed", [0, 0, 0]),
    ],
)
def test_save_copies_checkpoint_payload_only_on_baseline(variant: str, copied: list[int]) -> None:
    srv = make_server(variant, cache_ram=1 << 20)
    marks = play(srv, 3)
    per_save = []
    for start, end in marks:
        window = srv.heap.events[start:end]
        assert [e.ok for e in window if isinstance(e, ev.SaveEnd)] == [True]
        per_save.append(sum(e.bytes for e in window if isinstance(e, ev.CopyPayload)))
    assert per_save == copied
    # X as the slot holds it at the last save: the three checkpoints, U each.
    assert sum(c.size() for c in srv.slots[0].prompt.checkpoints) == 3 * U
