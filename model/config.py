"""Server configuration: the command-line flags and model facts that shape the cache.

Mirrors the parts of ``common_params`` (common/common.h) and ``server_context::load_model``
(server-context.cpp) that the prompt cache and checkpoints depend on. Sizes are symbolic
byte counts: the model never allocates them, so 330 MiB costs what 1 KiB does.

Every size has an upper bound (``UPPER``), checked with the lower ones by ``validate`` so
that a value beyond it is refused up front, with the field named. A bound is either what
the model can afford (``n_slots``: every operation and every judgement visits every slot,
so the cost of each operation grows with it) or what the C++ can hold (a ``uint32_t``
context, an ``int32_t`` flag, byte counts whose sums must stay within ``int64_t``).
docs/USING.md lists them with their reasons.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from enum import StrEnum
from typing import Any

from pcspec.model.errors import PcspecError
from pcspec.model.slotfile import SLOT_CKPT_MAX_COUNT

MIB = 1024 * 1024

# Bytes of a sequence-state blob that do not depend on the tokens: u32 io magic, i32 seq id,
# u32 n_stream, u32 cell count (llama-context.cpp: state_seq_write_data).
STATE_HEADER = 16


# -- upper bounds (see the module docstring) -----------------------------------------------------
INT32_MAX = 2**31 - 1
UINT32_MAX = 2**32 - 1
# Measured (docs/USING.md): a four-operation trace replays in 0.24 s with 1024 slots, 1.1 s with
# 4096, linearly; llama-server deployments run a few to a few dozen slots.
MAX_SLOTS = 1024
# One token's K and V over all layers: a few hundred KiB for the largest models. 1 GiB per token
# times a uint32 context keeps a whole context's bytes below 2**62.
MAX_TOKEN_BYTES = 2**30
MAX_STATE_BYTES = 2**40  # a recurrent state, or a speculative stash: 1 TiB
MAX_RAM_BYTES = 2**62  # host_ram's default (no limit in practice); byte sums stay in an int64
# The constant part of a state image (headers): 1 MiB is thousands of layers' headers.
MAX_OVERHEAD_BYTES = 2**20

UPPER: dict[str, tuple[int, str]] = {
    "n_slots": (MAX_SLOTS, "every operation visits every slot: the model's cost grows with it"),
    "n_ctx_slot": (UINT32_MAX, "llama_n_ctx is a uint32_t"),
    "n_batch": (INT32_MAX, "--batch-size is an int32_t"),
    "n_swa": (UINT32_MAX, "hparams.n_swa is a uint32_t"),
    "swa_cells": (UINT32_MAX, "a cell count is a uint32_t"),
    "n_rs_seq": (UINT32_MAX, "a rollback depth is a count of cells, a uint32_t"),
    "cell_bytes": (MAX_TOKEN_BYTES, "1 GiB per token, far above any model"),
    "draft_cell_bytes": (MAX_TOKEN_BYTES, "1 GiB per token, far above any model"),
    "rs_bytes": (MAX_STATE_BYTES, "1 TiB per recurrent state"),
    "draft_rs_bytes": (MAX_STATE_BYTES, "1 TiB per recurrent state"),
    "spec_bytes": (MAX_STATE_BYTES, "1 TiB per speculative stash"),
    "n_ctx_checkpoints": (
        SLOT_CKPT_MAX_COUNT,
        "a slot file with more checkpoint records is taken as corrupted and its appendix ignored",
    ),
    "checkpoint_min_step": (INT32_MAX, "an int32_t flag"),
    "cache_ram": (INT32_MAX * MIB, "--cache-ram is an int32_t count of MiB"),
    "host_ram": (MAX_RAM_BYTES, "byte sums must stay within an int64_t"),
    "n_vocab": (INT32_MAX, "llama_vocab_n_tokens is an int32_t"),
    "state_overhead": (MAX_OVERHEAD_BYTES, "headers: a few dozen bytes per layer and stream"),
    "ckpt_overhead": (MAX_OVERHEAD_BYTES, "headers: a few dozen bytes per layer and stream"),
}


_OPTIONAL_INTS = frozenset({"n_vocab"})  # fields whose default is None (no value)


class MemoryKind(StrEnum):
    """The memory module of a context (llama-memory.h), as ``common_context_can_seq_rm``
    classifies it (server-context.cpp: load_model)."""

    KV = "kv"  # plain KV cache: PART (any suffix can be removed), no checkpoints needed
    SWA = "swa"  # iSWA: a full-attention KV plus a sliding-window KV with n_swa window
    RECURRENT = "recurrent"  # one state per sequence: FULL, or RS with bounded rollback
    HYBRID = "hybrid"  # attention KV plus a recurrent state


@dataclass(frozen=True)
class Config:
    """Immutable configuration of one server (flags given at start).

    ``cache_ram`` is the byte limit of the prompt cache: ``-1`` no byte limit (the token
    limit still applies), ``0`` cache disabled, else bytes. The C++ takes MiB
    (``--cache-ram N`` -> ``N * 1024 * 1024``); bytes let the fuzzer use tiny limits.
    """

    n_slots: int = 1
    n_ctx_slot: int = 4096
    n_batch: int = 256
    n_ubatch: int = 64
    kv_unified: bool = False
    memory: MemoryKind = MemoryKind.SWA
    n_swa: int = 32  # the sliding window (0 with --swa-full, or no SWA)
    swa_cells: int = 256  # cells of each SWA cache stream (the log's size; see swa_size)
    n_rs_seq: int = 0  # recurrent rollback depth; > 0 makes the context RS instead of FULL
    cell_bytes: int = 64  # target bytes per token per attention cache (full or SWA part)
    rs_bytes: int = 4096  # target recurrent-state bytes
    has_draft: bool = False
    draft_memory: MemoryKind = MemoryKind.KV
    draft_cell_bytes: int = 16
    draft_rs_bytes: int = 1024
    spec_bytes: int = 0  # speculative-implementation state stashed with each checkpoint
    n_ctx_checkpoints: int = 32
    checkpoint_min_step: int = 8192
    cache_ram: int = 8192 * MIB
    cache_idle_slots: bool = True
    slot_prompt_similarity: float = 0.1
    ctx_shift: bool = False
    host_ram: int = 1 << 62  # allocations beyond what is live plus this fail (bad_alloc)
    slot_save_path: bool = True  # /slots save|restore enabled
    # llama_vocab_n_tokens of the target model: a slot restore refuses a token id >= n_vocab
    # (server_tokens::validate, server-common.cpp:755-789). None: ids are not checked against
    # a vocabulary (the model's own traces use any id); to_json leaves it out then.
    n_vocab: int | None = None
    # The constant part of a target state the model's sizes leave out (bytes beyond
    # STATE_HEADER + cells * cell_bytes + rs_bytes), as llama_state_seq_get_size_ext counts it
    # for the prompt cache and checkpoints: the io magic and sequence id (8 bytes,
    # llama-context.cpp:3191-3202) and each cache's headers and per-stream cell counts
    # (llama-kv-cache.cpp:2074-2122). ``state_overhead`` for a full image, ``ckpt_overhead``
    # for a partial one (PARTIAL_ONLY: a checkpoint; a plain KV cache writes its full image
    # there). A non-empty state only (an empty one is never cached); slot files do not count
    # them (``slot_files.save`` writes the image, not a sized blob). 0 (the default): every
    # existing trace sizes as before; ``pcspec live`` sets them (``calibrate.Sizes.offsets``).
    state_overhead: int = 0
    ckpt_overhead: int = 0

    # -- derived -------------------------------------------------------------------------

    @property
    def n_ctx(self) -> int:
        """``llama_n_ctx(ctx_tgt)``: the total context over all slots (the cache's token
        limit, server-context.cpp: load_model)."""
        return self.n_ctx_slot * self.n_slots

    @property
    def swa_window(self) -> int:
        """``n_swa`` as the server sees it: 0 unless the memory has a sliding window."""
        return self.n_swa if self.memory == MemoryKind.SWA else 0

    @property
    def swa_size(self) -> int:
        """Cells of each stream of the SWA cache (one stream per slot, or one for all with
        ``kv_unified``): ``swa_cells``, what the log prints ("creating SWA KV cache, size = %u
        cells"), but never fewer than ``size_swa`` before its padding to 256:
        ``min(size_base, n_swa * (unified ? n_seq_max : 1) + n_ubatch)``
        (llama-kv-cache-iswa.cpp:71-73; ``size_base`` is ``n_ctx_seq``, llama-context.cpp:
        292-296). With that many cells ``find_slot`` always finds room: each sequence's window
        holds fewer than ``n_swa`` cells its next token still sees (a configuration written
        when ``swa_cells`` counted the cells of one sequence keeps working)."""
        n_seq = self.n_slots if self.kv_unified else 1
        base = self.n_ctx if self.kv_unified else self.n_ctx_slot
        return max(self.swa_cells, min(base, self.n_swa * n_seq + self.n_ubatch))

    @property
    def needs_checkpoints(self) -> bool:
        """``do_checkpoint`` before per-batch gates (server-context.cpp: update_slots):
        checkpoints are on and the memory cannot roll back (FULL/RS) or has SWA."""
        rollback_impossible = self.memory in (MemoryKind.RECURRENT, MemoryKind.HYBRID)
        return self.n_ctx_checkpoints > 0 and (rollback_impossible or self.swa_window > 0)

    @property
    def cache_enabled(self) -> bool:
        return self.cache_ram != 0

    @property
    def limit_size(self) -> int:
        """``server_prompt_cache::limit_size`` at start: 0 means no byte limit."""
        return max(0, self.cache_ram)

    @property
    def idle_caching(self) -> bool:
        """``--cache-idle-slots`` is disabled when the cache is (server-context.cpp: init)."""
        return self.cache_idle_slots and self.cache_enabled

    # -- validation and (de)serialisation -----------------------------------------------

    def validate(self) -> Config:
        """Reject configurations the server refuses or that make no sense; return self."""
        problems: list[str] = []

        def need(cond: bool, msg: str) -> None:
            if not cond:
                problems.append(msg)

        need(self.n_slots >= 1, f"n_slots must be at least 1 (got {self.n_slots})")
        need(self.n_ctx_slot >= 8, f"n_ctx_slot must be at least 8 (got {self.n_ctx_slot})")
        need(self.n_batch >= 1, f"n_batch must be at least 1 (got {self.n_batch})")
        need(
            1 <= self.n_ubatch <= self.n_batch,
            f"n_ubatch must be in 1..n_batch (got {self.n_ubatch}, n_batch {self.n_batch})",
        )
        need(self.n_swa >= 0, f"n_swa must be >= 0 (got {self.n_swa})")
        if self.memory == MemoryKind.SWA:
            need(self.n_swa >= 1, "an SWA memory needs n_swa >= 1 (use memory=kv for --swa-full)")
            need(
                self.swa_cells >= self.n_swa,
                f"swa_cells ({self.swa_cells}) must be at least n_swa ({self.n_swa})",
            )
        need(self.n_rs_seq >= 0, f"n_rs_seq must be >= 0 (got {self.n_rs_seq})")
        for name in ("cell_bytes", "rs_bytes", "draft_cell_bytes", "draft_rs_bytes"):
            need(getattr(self, name) >= 1, f"{name} must be at least 1 (got {getattr(self, name)})")
        need(self.spec_bytes >= 0, f"spec_bytes must be >= 0 (got {self.spec_bytes})")
        need(
            self.n_ctx_checkpoints >= 0,
            f"n_ctx_checkpoints must be >= 0 (got {self.n_ctx_checkpoints})",
        )
        need(
            self.checkpoint_min_step >= 0,
            f"checkpoint_min_step must be >= 0 (got {self.checkpoint_min_step})",
        )
        need(self.cache_ram >= -1, f"cache_ram must be -1, 0 or a byte count (got {self.cache_ram})")
        need(
            0.0 <= self.slot_prompt_similarity <= 1.0,
            f"slot_prompt_similarity must be in [0, 1] (got {self.slot_prompt_similarity})",
        )
        need(
            self.spec_bytes == 0 or self.has_draft,
            "spec_bytes (speculative state) needs a draft context (has_draft)",
        )
        need(self.host_ram >= 1, f"host_ram must be positive (got {self.host_ram})")
        for name in ("state_overhead", "ckpt_overhead"):
            need(getattr(self, name) >= 0, f"{name} must be >= 0 (got {getattr(self, name)})")
        need(self.n_vocab is None or self.n_vocab >= 1, f"n_vocab must be at least 1 (got {self.n_vocab})")
        for name, (hi, why) in UPPER.items():
            value = getattr(self, name)
            need(value is None or value <= hi, f"{name} must be at most {hi}: {why} (got {value})")
        need(
            # (checked only when both fields are within their own bounds, which say it better)
            self.n_slots > MAX_SLOTS or self.n_ctx_slot > UINT32_MAX or self.n_ctx <= UINT32_MAX,
            f"n_ctx_slot x n_slots must be at most {UINT32_MAX}: llama_n_ctx is a uint32_t "
            f"(got {self.n_ctx_slot} x {self.n_slots})",
        )
        if problems:
            raise PcspecError("invalid configuration: " + "; ".join(problems))
        return self

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        if self.n_vocab is None:
            del out["n_vocab"]  # configurations written before it existed stay as they were
        for name in ("state_overhead", "ckpt_overhead"):
            if out[name] == 0:
                del out[name]  # (likewise)
        out["memory"] = str(self.memory)
        out["draft_memory"] = str(self.draft_memory)
        return out

    @classmethod
    def from_json(cls, data: object, where: str | None = None) -> Config:
        """Build from a JSON object, rejecting unknown keys and wrong types with a message."""
        if not isinstance(data, dict):
            raise PcspecError("the configuration must be a JSON object", where)
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise PcspecError(
                f"unknown configuration key(s) {', '.join(unknown)}; valid keys: {', '.join(sorted(known))}",
                where,
            )
        kwargs: dict[str, Any] = {}
        defaults = cls()
        for key, value in data.items():
            default = getattr(defaults, key)
            if key in _OPTIONAL_INTS:
                if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                    raise PcspecError(f"{key} must be an integer or null (got {value!r})", where)
                kwargs[key] = value
            elif isinstance(default, MemoryKind):
                try:
                    kwargs[key] = MemoryKind(value)
                except ValueError:
                    kinds = ", ".join(k.value for k in MemoryKind)
                    raise PcspecError(f"{key} must be one of {kinds} (got {value!r})", where) from None
            elif isinstance(default, bool):
                if not isinstance(value, bool):
                    raise PcspecError(f"{key} must be true or false (got {value!r})", where)
                kwargs[key] = value
            elif isinstance(default, int):
                if isinstance(value, bool) or not isinstance(value, int):
                    raise PcspecError(f"{key} must be an integer (got {value!r})", where)
                kwargs[key] = value
            elif isinstance(default, float):
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise PcspecError(f"{key} must be a number (got {value!r})", where)
                kwargs[key] = float(value)
            else:  # pragma: no cover - every field has one of the types above
                kwargs[key] = value
        try:
            return cls(**kwargs).validate()
        except PcspecError as exc:
            raise PcspecError(exc.why, where) from None
