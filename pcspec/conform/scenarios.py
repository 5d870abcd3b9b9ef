"""The hand-written model traces of the golden suite: every core operation, every fault site.

Each scenario is a model trace (``pcspec.core.ops``) with a name and a purpose. ``BASE`` is
a chat on one slot with a draft context: two conversations alternate, so every request saves
one and loads the other, and a diverging prompt restores a checkpoint. Variations of it reach
the other operations (a context shift, sleep and wake, slot files, a restart, two slots with
idle caching, each memory kind, a tight cache). ``fault_scenarios`` arms each fault site of
``Faults.SITES`` right before the first model operation that reaches it, found by lowering the
base trace; a site that no longer fires there is an error, not a silent gap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from pcspec.conform.lower import Lowered, lower
from pcspec.core.ops import parse
from pcspec.core.trace import Trace
from pcspec.model.config import Config, MemoryKind
from pcspec.model.designs import DESIGNS
from pcspec.model.heap import Faults
from pcspec.model.processing import sample_token

Ops = list[dict[str, Any]]
SYSTEM = list(range(1, 9))


@dataclass(frozen=True)
class Scenario:
    name: str
    purpose: str
    config: Config
    ops: Ops
    shows: tuple[tuple[str, str], ...] = field(default_factory=tuple)  # (variant, property) it violates

    def trace(self) -> Trace:
        return Trace(DESIGNS["fixed"], self.config, [parse(op) for op in self.ops])


def user(k: int, n: int) -> list[int]:
    """The k-th user message of n tokens."""
    return [100 + (k * 37 + i * 3) % 800 for i in range(n)]


def reply(tokens: list[int], n: int) -> list[int]:
    """What the model answers (the client sends it back with the next turn)."""
    seq, out = tuple(tokens), []
    for _ in range(n):
        out.append(sample_token(seq))
        seq += (out[-1],)
    return out


def request(tokens: list[int], spans: list[int], **extra: Any) -> dict[str, Any]:
    return {"op": "request", "tokens": tokens, "spans": spans, "n_predict": 3, **extra}


RUN: dict[str, Any] = {"op": "run"}

BASE_CONFIG = Config(
    n_slots=1,
    n_ctx_slot=128,
    n_batch=8,
    n_ubatch=4,
    memory=MemoryKind.RECURRENT,
    cell_bytes=8,
    rs_bytes=64,
    has_draft=True,
    draft_memory=MemoryKind.RECURRENT,
    draft_rs_bytes=32,
    spec_bytes=8,
    n_ctx_checkpoints=3,
    checkpoint_min_step=4,
    cache_ram=2000,
    slot_prompt_similarity=0.0,
)


def chat(**pin: Any) -> Ops:
    """Conversation A, an unrelated B, A's second turn (B saved, A loaded), then A diverging
    in the middle of its second turn (a checkpoint restored)."""
    a1 = SYSTEM + user(1, 20)
    b1 = SYSTEM + user(2, 12)
    a2 = a1 + reply(a1, 3) + user(3, 10)
    a3 = a2[:30] + user(4, 6)
    spans = [8, len(a1) + 3]
    return [
        request(a1, [8], **pin), RUN,
        request(b1, [8], **pin), RUN,
        request(a2, spans, **pin), RUN,
        request(a3, spans, **pin), RUN,
    ]  # fmt: skip


def _memory(kind: MemoryKind) -> Config:
    return replace(BASE_CONFIG, memory=kind, draft_memory=kind, n_swa=4, swa_cells=8)


def base_scenarios() -> list[Scenario]:
    a1 = SYSTEM + user(1, 20)
    long = SYSTEM + user(5, 40)
    out = [
        Scenario("base", "two conversations alternating on one slot: save, load, restore, checkpoints",
                 BASE_CONFIG, chat()),
        Scenario("memory-swa", "the base chat on an iSWA memory (fixed's exact restore choice)",
                 _memory(MemoryKind.SWA), chat()),
        Scenario("memory-hybrid", "the base chat on a hybrid memory", _memory(MemoryKind.HYBRID), chat()),
        Scenario("memory-kv", "the base chat on a plain KV cache (no checkpoints)", _memory(MemoryKind.KV), chat()),
        Scenario("no-draft", "the base chat without a draft context",
                 replace(BASE_CONFIG, has_draft=False, spec_bytes=0), chat()),
        Scenario("tight-cache", "a cache of about one entry: make room, oversize rejections, byte evictions",
                 replace(BASE_CONFIG, cache_ram=700), chat()),
        Scenario("oversize", "a cache smaller than one entry: every save is rejected as oversize",
                 replace(BASE_CONFIG, cache_ram=150), chat()),
        Scenario("token-limit", "a small context: the token limit evicts",
                 replace(BASE_CONFIG, n_ctx_slot=48, cache_ram=-1),
                 [request(SYSTEM + user(k, 20), [8]) if i % 2 == 0 else RUN for k in range(4) for i in range(2)]),
        Scenario("no-cache", "--cache-ram 0: checkpoints only", replace(BASE_CONFIG, cache_ram=0), chat()),
        Scenario("cache-prompt-false", "a request with cache_prompt false re-processes from 0",
                 BASE_CONFIG, [*chat()[:2], request(a1, [8], cache_prompt=False), RUN]),
        Scenario("resend", "the same prompt twice (n_past - 1, a restore for an identical prompt)",
                 BASE_CONFIG, [request(a1, [8]), RUN, request(a1, [8]), RUN, request(a1, [8]), RUN]),
        Scenario("context-shift", "generation runs past the context: a shift drops every checkpoint",
                 replace(BASE_CONFIG, n_ctx_slot=64, ctx_shift=True),
                 [request(long, [8], n_predict=30), RUN, request(SYSTEM + user(6, 10), [8]), RUN]),
        Scenario("sleep-wake", "the server sleeps and wakes: the cache and the slots are lost",
                 BASE_CONFIG, [*chat()[:4], {"op": "sleep_wake"}, *chat()[4:]]),
        Scenario("slot-files", "save a slot to a file, erase it, restore it (install), continue",
                 BASE_CONFIG,
                 [*chat()[:2], {"op": "slot_save", "id_slot": 0, "filename": "a.bin"},
                  {"op": "slot_erase", "id_slot": 0}, {"op": "slot_restore", "id_slot": 0, "filename": "a.bin"},
                  request(a1 + reply(a1, 3) + user(3, 10), [8, len(a1) + 3]), RUN]),
        Scenario("restart-restore", "a restart with fewer checkpoints and two slots, then a file restored",
                 BASE_CONFIG,
                 [*chat()[:6], {"op": "slot_save", "id_slot": 0, "filename": "a.bin"},
                  {"op": "restart", "config": {"n_ctx_checkpoints": 2, "n_slots": 2}},
                  {"op": "slot_restore", "id_slot": 1, "filename": "a.bin"}, *chat(id_slot=1)[6:]]),
        Scenario("two-slots", "two slots, a unified KV: idle-slot caching saves and clears the other slot",
                 replace(BASE_CONFIG, n_slots=2, kv_unified=True, slot_prompt_similarity=0.1),
                 [request(SYSTEM + user(1, 20), [8]), request(SYSTEM + user(2, 20), [8]), RUN,
                  request(SYSTEM + user(1, 20) + user(7, 5), [8]), RUN, request(SYSTEM + user(3, 9), [8]), RUN]),
        Scenario("supersede", "a checkpoint superseded by one at the same n_tokens (found by fuzzing, shrunk)",
                 Config(n_ctx_slot=64, n_batch=16, n_ubatch=2, n_swa=4, swa_cells=8, n_rs_seq=2,
                        cell_bytes=8, rs_bytes=64, has_draft=True, draft_memory=MemoryKind.SWA, draft_cell_bytes=4,
                        draft_rs_bytes=32, n_ctx_checkpoints=3, checkpoint_min_step=8, cache_ram=1200,
                        cache_idle_slots=False, slot_prompt_similarity=0.0),
                 [{"op": "inject", "site": "state.write.short"}, request(user(1, 8), [], id_slot=0),
                  request(user(1, 8), [], id_slot=0), request(user(1, 8), [], id_slot=2), {"op": "run"}]),
        Scenario("pinned-busy", "a task pinned to a busy slot waits for it",
                 replace(BASE_CONFIG, n_slots=2),
                 [request(SYSTEM + user(1, 30), [8], id_slot=0), {"op": "step"},
                  request(SYSTEM + user(2, 10), [8], id_slot=0), RUN]),
        Scenario("full-of-restored", "a cap of 1 full of the checkpoint the task restored (a recurrent state "
                 "rolled back from it): nothing new is made (found by fuzzing, shrunk)",
                 Config(memory=MemoryKind.RECURRENT, n_rs_seq=2, n_ctx_slot=128, n_batch=8, n_ubatch=4,
                        cell_bytes=8, rs_bytes=64, n_ctx_checkpoints=1, checkpoint_min_step=2, cache_ram=200,
                        cache_idle_slots=False, kv_unified=True),
                 [request([1, 2, 3, 4, 5, 6, 7, 8, 137], [8], n_predict=3),
                  request([1, 2, 3, 4, 5, 6, 7, 8], [], n_predict=3), RUN]),
        Scenario("restore-after-idle-clear", "a slot restore that waited for its slot runs right after the "
                 "idle-slot save cleared that slot: the clear empties it, then the install fills it (found by "
                 "fuzzing: seed 0, trace 636)",
                 replace(BASE_CONFIG, n_slots=2, kv_unified=True),
                 [request(a1[:14], [8], id_slot=0), RUN, {"op": "slot_save", "id_slot": 0, "filename": "a.bin"},
                  request(SYSTEM + user(2, 6), [8], id_slot=0),
                  request(SYSTEM + user(3, 6), [8], id_slot=1, n_predict=1),
                  request(SYSTEM + user(4, 6), [8], id_slot=0),
                  {"op": "slot_restore", "id_slot": 1, "filename": "a.bin"}, RUN]),
    ]  # fmt: skip
    return out


# -- the fault sites ---------------------------------------------------------------------------------


def _first(low: Lowered, want: Callable[[dict[str, Any], dict[str, Any]], bool]) -> int | None:
    return next((at for op, obs, at in zip(low.ops, low.expect, low.origin, strict=True) if want(op, obs)), None)


def _kinds(obs: dict[str, Any]) -> set[str]:
    return {e["kind"] for e in obs["events"]}


REACHES: dict[str, Callable[[dict[str, Any], dict[str, Any]], bool]] = {
    "save": lambda op, obs: op["op"] == "save" and "entry_insert" in _kinds(obs),
    "load": lambda op, obs: op["op"] == "load" and any(e.get("chosen") for e in obs["events"]),
    "restore": lambda op, obs: op["op"] == "prompt_start" and "ckpt_restore" in _kinds(obs),
    "create": lambda op, obs: op["op"] == "checkpoint" and "ckpt_create" in _kinds(obs),
}
SITE_REACH = {
    "save.alloc.main": "save", "save.alloc.drft": "save", "save.alloc.entry": "save", "save.read.tgt": "save",
    "save.read.dft": "save", "load.write.tgt": "load", "load.write.dft": "load", "ckpt.read.tgt": "create",
    "ckpt.read.dft": "create", "ckpt.alloc": "create", "ckpt.write.tgt": "restore", "ckpt.write.dft": "restore",
    "state.write.short": "save",
}  # fmt: skip


def fault_scenarios() -> list[Scenario]:
    """One scenario per fault site a port reaches: the base chat with the site armed right
    before the first model operation that reaches it (``file.write.tgt``, a slot-file
    restore, is the environment's: the slot-files scenario with that site armed)."""
    low = lower(Trace(DESIGNS["fixed"], BASE_CONFIG, [parse(op) for op in chat()]))
    out = []
    for site in Faults.SITES:
        if site == "file.write.tgt":
            files = next(s for s in base_scenarios() if s.name == "slot-files")
            ops = list(files.ops)
            ops.insert(4, {"op": "inject", "site": site})
            out.append(Scenario(f"fault-{site}", f"{site} fails: the slot restore is rejected", BASE_CONFIG, ops))
            continue
        at = _first(low, REACHES[SITE_REACH[site]])
        if at is None:
            raise ValueError(f"the base chat never reaches {site}")
        ops = chat()
        ops.insert(at, {"op": "inject", "site": site})
        scenario = Scenario(f"fault-{site}", f"{site} fails at its first reach", BASE_CONFIG, ops)
        fired = [s for op in lower(scenario.trace()).ops for s in op.get("faults", [])]
        if site not in fired:
            raise ValueError(f"{site} armed before model operation {at} of the base chat never fired")
        out.append(scenario)
    return out

