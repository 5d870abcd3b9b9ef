"""The port protocol (schema 1): what a port reads, what it answers, and how states are bytes.

A port is a program that reads JSON lines on standard input and answers each line with exactly
one JSON line on standard output. The first line of a session, and the first line of every
further trace, is ``begin`` (the port resets everything and answers ``{"schema": 1, ...}``);
every other line is one *core operation*, answered with an *observation*: the events the
operation emitted and the port's state after it. docs/SPEC.md explains each operation; the
tables there are generated from ``OPS``, ``EVENTS`` and ``schemas()`` here.

States are never real model state: the fake context of a port writes a *state tag* (a small
integer naming a content identity, ``pcspec.conform.tags``) into a buffer as bytes
(``encode_state``), and reads it back (``decode_state``) when it loads a buffer or reports
one. Tag 0 names bytes that are no state (a corrupted slot-file payload): loading them fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pcspec.model.config import Config

SCHEMA = 1
KIND = "pcspec-conform"

# -- operations ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    name: str
    schema: dict[str, Any]
    meaning: str
    optional: bool = False


@dataclass(frozen=True)
class OpSpec:
    name: str
    core: bool  # False: an environment operation (the port applies it; nothing is decided)
    cpp: str  # the C++ it mirrors, file:line at 0c1e570 (tools/server/ unless a path is given)
    summary: str
    fields: tuple[Field, ...]
    sites: tuple[str, ...] = ()  # the fault sites it can consume, in the order it reaches them


INT: dict[str, Any] = {"type": "integer"}
NAT: dict[str, Any] = {"type": "integer", "minimum": 0}
BOOL: dict[str, Any] = {"type": "boolean"}
TOKENS: dict[str, Any] = {"type": "array", "items": NAT}
POS_RANGES: dict[str, Any] = {"type": "array", "items": {"type": "array", "items": INT, "minItems": 2, "maxItems": 2}}
SLOT = Field("slot", NAT, "the slot (sequence id)")
TASK = Field("task", NAT, "the id of the task the slot is processing")
FAULTS = Field(
    "faults",
    {"type": "array", "items": {"type": "string"}},
    "fault sites to arm for this operation only (one entry per firing, in firing order); a port "
    "fires each armed site the next time it reaches it; whatever is left is disarmed afterwards",
    optional=True,
)
PART: dict[str, Any] = {
    "type": "object",
    "required": ["role", "size", "state"],
    "properties": {
        "role": {"enum": ["main", "drft", "tgt", "dft", "spec"]},
        "size": NAT,
        "state": NAT,
    },
}
PARTS = {"type": "array", "items": PART}
CKPT_SPEC: dict[str, Any] = {
    "type": "object",
    "required": ["n_tokens", "pos_min", "pos_max", "id_task", "parts"],
    "properties": {"n_tokens": NAT, "pos_min": INT, "pos_max": INT, "id_task": INT, "parts": PARTS},
}

OPS: tuple[OpSpec, ...] = (
    OpSpec(
        "save",
        True,
        "server-context.cpp:258-282 (server_slot::prompt_save); server-task.cpp:1711-1791 "
        "(server_prompt_cache::alloc), replaced by the transactional save",
        "save the slot's prompt into the cache",
        (
            SLOT,
            Field("parts", PARTS, "what the fake context reports for the slot's full state: `main` "
                  "(target) and, with a draft context, `drft`: size and state tag"),
            FAULTS,
        ),
        ("save.alloc.main", "save.alloc.drft", "save.alloc.entry", "save.read.tgt", "save.read.dft",
         "state.write.short"),
    ),
    OpSpec(
        "load",
        True,
        "server-context.cpp:284-291 (server_slot::prompt_load); server-task.cpp:1793-1868 "
        "(server_prompt_cache::load)",
        "look for a better cached prompt for the new task and hand it over to the slot",
        (SLOT, Field("tokens", TOKENS, "the new task's prompt"), FAULTS),
        ("load.write.tgt", "load.write.dft"),
    ),
    OpSpec(
        "update",
        True,
        "server-task.cpp:1870-1901 (server_prompt_cache::update)",
        "evict from the front until the byte limit, then the token limit, hold",
        (),
    ),
    OpSpec(
        "clear",
        True,
        "server-context.cpp:293-300 (server_slot::prompt_clear)",
        "drop the slot's tokens and checkpoints",
        (SLOT,),
    ),
    OpSpec(
        "release",
        True,
        "server-context.cpp:514-534 (server_slot::release)",
        "the slot's task ended: the slot keeps its prompt, forgets what the task restored",
        (SLOT,),
    ),
    OpSpec(
        "prompt_start",
        True,
        "server-context.cpp:3121-3407 (update_slots, SLOT_STATE_STARTED: threshold 3278, restore "
        "3330-3364, invalidation 3369-3378 with #30137's n_prefix rule, n_past -= 1 3383-3388, "
        "keep_first 3395) and the first fill's seq_rm 3422-3426",
        "a new prompt starts on the slot: restore a checkpoint or not, invalidate, keep the prefix",
        (
            SLOT,
            TASK,
            Field("prompt", TOKENS, "the task's prompt (not empty, shorter than the slot's context)"),
            Field("cache_prompt", BOOL, "the task's cache_prompt"),
            Field("pos_min", INT, "llama_memory_seq_pos_min of the target memory before the start (-1: empty)"),
            Field("live", POS_RANGES, "[pos_min, pos_max] of the slot's sequence before the start, per context "
                  "(target, then draft): what fixed's resume asks the memory (policy.live_serves)"),
            Field("seq_rm_ok", BOOL, "whether the memory accepts seq_rm(slot, n_past, -1) (false: a "
                  "recurrent state that cannot roll back that far)"),
            FAULTS,
        ),
        ("ckpt.write.tgt", "ckpt.write.dft"),
    ),
    OpSpec(
        "checkpoint",
        True,
        "server-context.cpp:2290-2345 (create_checkpoint; #30137: make_shared, fill, push_back), "
        "called at 3615; common.cpp:2288-2323 (update_tgt, update_dft)",
        "make room in the slot's checkpoint list and add a checkpoint of the state before the batch",
        (
            SLOT,
            TASK,
            Field("n_cur", NAT, "tokens the slot just added to the batch (already in its tokens)"),
            Field("pos_min", INT, "the first position the payload holds"),
            Field("pos_max", INT, "the last position the payload holds"),
            Field("parts", PARTS, "what the fake context reports for the partial state: `tgt`, with "
                  "a draft context `dft`, with a speculative stash `spec`"),
            FAULTS,
        ),
        ("ckpt.alloc", "ckpt.read.tgt", "ckpt.read.dft", "state.write.short"),
    ),
    OpSpec(
        "shift",
        True,
        "server-context.cpp:2886-2950 (context shift: seq_rm + seq_add, prompt.clear(), tokens re-inserted)",
        "a context shift: discard tokens after the first n_keep, drop every checkpoint",
        (
            SLOT,
            Field("n_keep", NAT, "tokens kept at the front"),
            Field("n_discard", NAT, "tokens discarded after them"),
        ),
    ),
    OpSpec(
        "wake",
        True,
        "server-context.cpp:935-950 (handle_sleeping_state), 1340 (load_model makes a new server_prompt_cache)",
        "the server slept and woke: a new, empty cache with the configured limit",
        (),
    ),
    OpSpec(
        "restart",
        False,
        "the process exits and llama-server starts again with other flags; the slot-save directory stays",
        "everything is gone: slots, checkpoints, the cache; the port starts afresh with `config`",
        (Field("config", {"type": "object"}, "the new configuration (the keys of `begin`'s)"),),
    ),
    OpSpec(
        "tokens",
        False,
        "server-context.cpp:3409-3616 (a batch's prompt tokens), 475-511 (a sampled token)",
        "the slot's tokens become tokens[:keep] + append (prompt processing, generation)",
        (SLOT, Field("keep", NAT, "tokens kept"), Field("append", TOKENS, "tokens appended")),
    ),
    OpSpec(
        "install",
        False,
        "server-context.cpp:2576-2640 (POST /slots/N?action=restore, #30137's checkpoint appendix, #26004)",
        "a slot file was restored: the slot's prompt is replaced by these tokens and new checkpoints",
        (
            SLOT,
            Field("tokens", TOKENS, "the restored tokens"),
            Field("ckpts", {"type": "array", "items": CKPT_SPEC}, "the restored checkpoints, in list "
                  "order (complete buffers)"),
        ),
    ),
)

BY_NAME = {o.name: o for o in OPS}

# -- events ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EventSpec:
    kind: str
    fields: tuple[tuple[str, str], ...]  # (name, meaning); ids are canonical object ids
    ops: tuple[str, ...]  # the operations that emit it
    meaning: str


ID_FIELDS = {"entry": "entry", "chosen": "entry", "ckpt": "ckpt", "restored": "ckpt"}

EVENTS: tuple[EventSpec, ...] = (
    EventSpec("save_skip_contained", (("entry", "the entry holding the prompt"),), ("save",),
              "the prompt is a prefix of (or equal to) an entry's: nothing saved"),
    EventSpec("save_reject_oversize", (("size", "the new entry's size as counted"), ("own_unique", "its unique "
              "bytes"), ("limit", "the byte limit")), ("save",), "the entry alone exceeds the byte limit"),
    EventSpec("save_bad_alloc", (("site", "the allocation that failed"),), ("save",), "an allocation failed"),
    EventSpec("save_fill_short", (), ("save",), "a state read wrote fewer bytes than its size"),
    EventSpec("entry_insert", (("entry", "the new entry"), ("n_tokens", "its tokens"), ("own_unique", "its unique "
              "bytes"), ("unique_after", "the cache's unique bytes with it"), ("limit", "the byte limit")),
              ("save",), "an entry is published"),
    EventSpec("entry_evict", (("entry", "the entry"), ("reason", "obsolete, make_room, loaded, load_failed, "
              "limit_bytes, limit_tokens, wake"), ("n_tokens", "its tokens"), ("unique_total", "make_room and "
              "limit_bytes only: the unique bytes of the cache (plus the candidate's, for make_room) before "
              "this eviction"), ("limit", "make_room and limit_bytes only: the byte limit")),
              ("save", "load", "update", "wake"), "an entry leaves the cache"),
    EventSpec("save_end", (("ok", "whether an entry was published"),), ("save",), "the save returned"),
    EventSpec("load_scan", (("chosen", "the entry chosen, or null"),), ("load",), "the load's selection"),
    EventSpec("cache_state", (("n", "entries"), ("size", "accounted bytes"), ("limit", "the byte limit"),
              ("n_tokens", "cached tokens")), ("update",), "after update"),
    EventSpec("ckpt_restore", (("ckpt", "the checkpoint"), ("n_tokens", "its n_tokens"), ("n_past", "n_past "
              "after the restore")), ("prompt_start",), "a checkpoint was loaded into the contexts"),
    EventSpec("ckpt_erase", (("ckpt", "the checkpoint"), ("reason", "too_close, cap, supersede, invalidated, "
              "context_shift"), ("n_tokens", "its n_tokens")), ("prompt_start", "checkpoint", "shift"),
              "a checkpoint left the slot's list"),
    EventSpec("seq_rm_refused", (), ("prompt_start",), "the memory refused seq_rm: re-process from 0"),
    EventSpec("prompt_start", (("n_prefix", "common prefix of the slot's tokens and the prompt"), ("n_past",
              "tokens kept"), ("restored", "the checkpoint restored, or null"), ("reprocess", "why the prompt "
              "is re-processed from 0, or null")), ("prompt_start",), "the start's outcome"),
    EventSpec("ckpt_kept_restored", (("ckpt", "the checkpoint"),), ("checkpoint",),
              "the new checkpoint would equal the one this task restored: kept, nothing created"),
    EventSpec("ckpt_create", (("ckpt", "the checkpoint"), ("n_tokens", "n_tokens"), ("pos_min", "pos_min"),
              ("pos_max", "pos_max")), ("checkpoint",), "a checkpoint joined the slot's list"),
    EventSpec("ckpt_create_failed", (), ("checkpoint",), "an allocation or a fill failed: nothing created"),
    EventSpec("ckpt_create_skipped", (("n_tokens", "the position not checkpointed"), ("ckpt", "the restored "
              "checkpoint that fills the list")), ("checkpoint",),
              "fixed: the list is full of the checkpoint this task restored: nothing created"),
    EventSpec("load_failed", (("entry", "the entry"),), ("load",),
              "a set_data_ext of the chosen entry failed (fixed then drops the entry; the C++ designs "
              "leave it in the cache)"),
    # Only the C++ designs emit these (a port of `fixed` never does):
    EventSpec("limit_change", (("old", "the byte limit before"), ("new", "after")), ("save",),
              "C++ designs: a bad_alloc cut the byte limit to 40 % of the cache's size"),
    EventSpec("copy_payload", (("role", "the payload"), ("bytes", "its size")), ("save", "load"),
              "baseline and #27451: a checkpoint payload was deep-copied"),
)

EVENT_KINDS = {e.kind: e for e in EVENTS}

# Which fields each entry_evict reason carries beyond entry, reason, n_tokens.
EVICT_NUMBERS = ("make_room", "limit_bytes")

# -- observations ------------------------------------------------------------------------------------

OBS_PART: dict[str, Any] = {
    "type": "object",
    "required": ["role", "size", "state"],
    "properties": {"role": {"type": "string"}, "size": NAT, "state": {"type": ["integer", "null"]}},
}


def schemas() -> dict[str, dict[str, Any]]:
    """JSON Schemas (draft 2020-12) of the lines: ``begin``, each operation, the answers."""
    out: dict[str, dict[str, Any]] = {
        "begin": {
            "type": "object",
            "required": ["op", "schema", "variant", "config"],
            "properties": {
                "op": {"const": "begin"},
                "schema": {"const": SCHEMA},
                "variant": {"type": "string"},
                "name": {"type": "string"},
                "config": {
                    "type": "object",
                    "required": list(CONFIG_FIELDS),
                    "properties": {k: v[0] for k, v in CONFIG_FIELDS.items()},
                },
            },
        },
        "ready": {
            "type": "object",
            "required": ["schema"],
            "properties": {"schema": {"const": SCHEMA}, "port": {"type": "string"}},
        },
    }
    for o in OPS:
        out[o.name] = {
            "type": "object",
            "required": ["op", *(f.name for f in o.fields if not f.optional)],
            "properties": {"op": {"const": o.name}, **{f.name: f.schema for f in o.fields}},
            "additionalProperties": False,
        }
    ids = {"type": "array", "items": NAT}
    out["observation"] = {
        "type": "object",
        "required": ["events", "slots", "ckpts", "entries", "accounted", "unique", "limit"],
        "properties": {
            "events": {
                "type": "array",
                "items": {"type": "object", "required": ["kind"], "properties": {"kind": {"enum": list(EVENT_KINDS)}}},
            },
            "slots": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["tokens", "ckpts", "restored"],
                    "properties": {"tokens": TOKENS, "ckpts": ids, "restored": {"type": ["integer", "null"]}},
                },
            },
            "ckpts": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["id", "n_tokens", "pos_min", "pos_max", "id_task", "refs", "parts"],
                    "properties": {
                        "id": NAT, "n_tokens": NAT, "pos_min": INT, "pos_max": INT, "id_task": INT, "refs": NAT,
                        "parts": {"type": "array", "items": OBS_PART},
                    },
                },
            },
            "entries": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["id", "tokens", "ckpts", "parts"],
                    "properties": {
                        "id": NAT, "tokens": TOKENS, "ckpts": ids, "parts": {"type": "array", "items": OBS_PART},
                    },
                },
            },
            "accounted": NAT,
            "unique": NAT,
            "limit": NAT,
        },
    }
    out["error"] = {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}}
    return out


# -- the port's configuration ------------------------------------------------------------------------

CONFIG_FIELDS: dict[str, tuple[dict[str, Any], str]] = {
    "n_slots": (NAT, "slots (sequences) 0..n_slots-1"),
    "n_ctx_checkpoints": (NAT, "--ctx-checkpoints: the cap of a slot's list"),
    "checkpoint_min_step": (NAT, "--checkpoint-min-step: the spacing of the too-close sweep"),
    "cache": (BOOL, "whether there is a prompt cache (--cache-ram 0: none, and no cache operation comes)"),
    "limit_size": (NAT, "the cache's byte limit (0: none)"),
    "limit_tokens": (NAT, "the cache's token limit: llama_n_ctx, all slots together"),
    "n_swa": (NAT, "the sliding window of the target memory (0: none)"),
    "has_draft": (BOOL, "whether there is a draft context (ctx_dft)"),
    "memory": ({"enum": ["kv", "swa", "recurrent", "hybrid"]}, "the target memory kind (fixed's resume: a "
               "recurrent or hybrid memory rolls back at most n_rs tokens)"),
    "draft_memory": ({"enum": ["kv", "swa", "recurrent", "hybrid"]}, "the draft memory kind (kv, or the target's)"),
    "n_rs": (NAT, "the recurrent rollback depth (n_rs_seq; 0: none)"),
}


def port_config(cfg: Config) -> dict[str, Any]:
    """What ``begin`` tells a port about a model configuration."""
    return {
        "n_slots": cfg.n_slots,
        "n_ctx_checkpoints": cfg.n_ctx_checkpoints,
        "checkpoint_min_step": cfg.checkpoint_min_step,
        "cache": cfg.cache_enabled,
        "limit_size": cfg.limit_size,
        "limit_tokens": cfg.n_ctx,
        "n_swa": cfg.swa_window,
        "has_draft": cfg.has_draft,
        "memory": str(cfg.memory),
        "draft_memory": str(cfg.draft_memory),
        "n_rs": cfg.n_rs_seq,
    }


def begin_line(variant: str, cfg: dict[str, Any], name: str) -> dict[str, Any]:
    return {"op": "begin", "schema": SCHEMA, "variant": variant, "name": name, "config": cfg}


# -- states as bytes ------------------------------------------------------------------------------------


def state_byte(tag: int, k: int) -> int:
    """Byte ``k`` of a buffer holding state ``tag``: the tag's four little-endian bytes, each
    plus the index of its four-byte word (so no two words are alike)."""
    return ((tag >> (8 * (k % 4))) + k // 4) & 0xFF


@lru_cache(maxsize=8192)
def encode_state(tag: int, size: int) -> bytes:
    return bytes(state_byte(tag, k) for k in range(size))


def decode_state(data: bytes | bytearray) -> int | None:
    """The tag a buffer holds, or None when its bytes are not one state written whole (a
    buffer shorter than four bytes holds only its tag's low bytes, and reads as those)."""
    if not data:
        return None
    n = min(4, len(data))
    tag = sum(data[k] << (8 * k) for k in range(n))
    return tag if data == encode_state(tag, len(data)) else None
