"""Helpers the test files share (``from tests.support.common import ...``).

* ``events``: the events of one kind a server emitted, from a point on;
* ``DESIGN_NAMES``, ``CPP_DESIGNS``, ``ALL``: the designs tests are parametrized over (``ALL``:
  every design pcspec names, the rule sets' models and the mutants too);
* the small KV server of the eviction and bad_alloc scenarios (``kv_server``, ``X``, ``run``,
  ``cached``, ``ENTRY``): 10-byte cells, so an entry of ten tokens is 116 bytes;
* the recurrent configuration of the sharing, save-failure and restore scenarios
  (``recurrent_config``, ``RS_STATE``, ``B_PROMPT``): 1000-byte states, checkpoints every 8 tokens;
* trace files (``TRACE_HEADER``, ``trace_text``, ``PERF1_OPS``): a small recurrent server on
  baseline, and four operations that show PERF-1 there;
* the SWA slot of the restore-choice scenarios (``SWA_SLOT``), and the pinned empty slot of the
  REUSE-2 scenarios (``KV2``, ``A30``, ``PINNED_EMPTY``).
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pcspec.model.config import STATE_HEADER, Config, MemoryKind
from pcspec.model.design import Design
from pcspec.model.designs import DESIGNS, RULE_SET_MODELS
from pcspec.model.events import Event
from pcspec.model.server import Server
from pcspec.properties.catalogue import get_property
from pcspec.properties.judge import Judge
from pcspec.properties.mutants import MUTANTS

E = TypeVar("E", bound=Event)

DESIGN_NAMES = tuple(DESIGNS)  # baseline, pr30137, pr27451, fixed
# Every design pcspec names: the built-in designs, the models of the rule sets, the mutants.
ALL: dict[str, Design] = {**DESIGNS, **RULE_SET_MODELS, **MUTANTS}
CPP_DESIGNS = tuple(name for name in DESIGNS if name != "fixed")  # the three C++ designs


def events(srv: Server, kind: type[E], since: int = 0) -> list[E]:
    """Every ``kind`` event (a class of ``pcspec.model.events``) from the ``since``-th event on."""
    return [e for e in srv.heap.events[since:] if isinstance(e, kind)]


# -- a small KV server: entries of ten 10-byte cells ------------------------------------------------

ENTRY = STATE_HEADER + 10 * 10  # the state of a ten-token prompt


def X(i: int, n: int = 10) -> tuple[int, ...]:
    """The i-th prompt: ``n`` tokens from 100 * i (its first token names it in ``cached``)."""
    return tuple(range(100 * i, 100 * i + n))


def kv_server(variant: str, cache_ram: int, n_ctx_slot: int = 64) -> Server:
    cfg = Config(
        n_ctx_slot=n_ctx_slot,
        n_batch=16,
        n_ubatch=4,
        memory=MemoryKind.KV,
        cell_bytes=10,
        slot_prompt_similarity=0.0,
        cache_ram=cache_ram,
    )
    return Server(cfg, DESIGNS[variant])


def run(srv: Server, *prompts: tuple[int, ...], crash_ok: bool = False) -> None:
    """Each prompt as a one-token request, run to the end; no crash unless ``crash_ok``."""
    for p in prompts:
        srv.request(p, n_predict=1)
        srv.run()
    assert crash_ok or srv.crash is None, srv.crash


def cached(srv: Server) -> list[int]:
    """The entries, front (oldest) first, by the first token of their prompt."""
    assert srv.cache is not None
    return [e.prompt.tokens[0] for e in srv.cache.entries]


# -- a recurrent server: 1000-byte states, checkpoints every 8 tokens --------------------------------

RS_STATE = STATE_HEADER + 1000  # one recurrent state, full or partial
B_PROMPT = tuple(range(900, 904))  # the other conversation's prompt


def recurrent_config(**changes: Any) -> Config:
    base: dict[str, Any] = {
        "n_slots": 2,
        "n_ctx_slot": 1024,
        "n_batch": 16,
        "n_ubatch": 4,
        "memory": MemoryKind.RECURRENT,
        "rs_bytes": 1000,
        "cell_bytes": 10,
        "n_ctx_checkpoints": 4,
        "checkpoint_min_step": 8,
    }
    return Config(**(base | changes))


# -- trace files -----------------------------------------------------------------------------------

TRACE_HEADER: dict[str, Any] = {
    "schema": 1,
    "kind": "pcspec-trace",
    "variant": "baseline",
    "config": {
        "memory": "recurrent",
        "n_ctx_checkpoints": 2,
        "checkpoint_min_step": 2,
        "n_batch": 8,
        "n_ubatch": 2,
        "n_ctx_slot": 64,
        "rs_bytes": 64,
    },
}

# Two different prompts on one slot: the second request saves the first prompt, whose
# checkpoints baseline deep-copies (PERF-1).
PERF1_OPS: tuple[dict[str, Any], ...] = (
    {"op": "request", "tokens": list(range(1, 20)), "spans": [8]},
    {"op": "run"},
    {"op": "request", "tokens": list(range(100, 110))},
    {"op": "run"},
)


def trace_text(*ops: dict[str, Any], header: dict[str, Any] | None = None) -> str:
    """A trace file's text: the header (``TRACE_HEADER`` by default), then the operations."""
    return "\n".join(json.dumps(x) for x in [header or TRACE_HEADER, *ops]) + "\n"


# An SWA slot (n_swa 4, 8 cells): a 12-token prompt, with a user message at 4 or not. With the
# message, the batches stop at 4 and a checkpoint is made there: [0, 3] at n_tokens 4; the
# last batch makes [0, 7] at n_tokens 8 (baseline records the SWA cache's pos_min, 0), and the
# live window is [4, 11].
SWA_SLOT = Config(
    n_slots=1,
    n_ctx_slot=128,
    n_batch=16,
    n_ubatch=4,
    memory=MemoryKind.SWA,
    n_swa=4,
    swa_cells=8,
    cell_bytes=8,
    cache_ram=0,
    n_ctx_checkpoints=4,
    checkpoint_min_step=2,
)

KV2 = Config(n_slots=2, n_ctx_slot=128, n_batch=16, n_ubatch=4, memory=MemoryKind.KV, cache_idle_slots=True)
A30 = tuple(range(1, 31))
# Slot 1 (LRU: ties go to the last slot) runs A30; the next request goes to slot 0 and idle
# caching saves slot 1 into the cache. Slot 0 is erased; a task extending A30, pinned to the
# empty slot 0, should load the cached A30 (fixed consults the cache for an empty pinned slot).
PINNED_EMPTY = (
    ("request", {"tokens": A30, "n_predict": 2}),
    ("run", {}),
    ("request", {"tokens": tuple(range(100, 130)), "n_predict": 2}),
    ("run", {}),
    ("slot_action", {"action": "erase", "id_slot": 0}),
    ("request", {"tokens": (*A30, 77, 78), "n_predict": 2, "id_slot": 0}),
    ("run", {}),
)


def judged(srv: Server, pid: str, *steps: tuple[str, dict[str, Any]]) -> list[str]:
    """Run the operations with one property judged after each; its messages."""
    judge = Judge(srv, [get_property(pid)])
    out: list[str] = []
    for name, args in steps:
        getattr(srv, name)(**args)
        out += [v.message for v in judge()]
    return out
