"""The model's configuration for a live server: its flags, what its log says, and state sizes.

The model counts a sequence state as ``STATE_HEADER + cells * cell_bytes (+ window cells *
cell_bytes for iSWA) (+ rs_bytes)`` (``pcspec.model.memory.SeqMemory.state_size``). The real
sizes of the tiny models are linear in the cell count too; ``SIZES`` holds their measured
slope per cell and the recurrent state's bytes (``measure_sizes`` re-measures them from slot
files). The real constant part (the io magic and sequence id, per-cache headers, a cell count
per stream) is the model's ``Config.state_overhead`` / ``ckpt_overhead``, set from
``Sizes.offsets`` so that the model's sizes in the prompt cache are the server's (without them an
eviction decided within that margin of the byte limit differed: M8 in docs/LIVE.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from pcspec.live.models import N_VOCAB, SPECS
from pcspec.live.process import Flags
from pcspec.live.schedule import ServerFacts
from pcspec.model.config import MIB, STATE_HEADER, Config, MemoryKind
from pcspec.model.design import Design
from pcspec.model.designs import get_design

KIND_MEMORY = {"kv": MemoryKind.KV, "swa": MemoryKind.SWA, "recurrent": MemoryKind.RECURRENT,
               "hybrid": MemoryKind.HYBRID, "swa-big": MemoryKind.SWA, "hybrid-big": MemoryKind.HYBRID}


@dataclass(frozen=True)
class Sizes:
    """Measured state sizes of a tiny model (bytes): ``full(n) = base + per_cell * n`` for the
    attention part, ``rs`` for a recurrent state (0 without one), ``ckpt_base`` the constant part
    of an SWA checkpoint; ``caches``: the attention caches a full state writes."""

    per_cell: int
    base: int
    rs: int = 0
    ckpt_base: int = 0
    caches: int = 0

    def offsets(self, n_stream: int, state_seq_version: int = 3) -> tuple[int, int]:
        """How many bytes a full state and a checkpoint in the prompt cache are larger than the
        model's: ``llama_state_seq_get_size_ext`` also counts the io magic and the sequence id
        (8 bytes, llama-context.cpp:3191-3202), which slot files (what ``SIZES`` measured)
        leave out, and each attention cache writes a cell count per stream (4 bytes for each
        stream beyond the first, llama-kv-cache.cpp:2074-2122); the model counts 16
        (``STATE_HEADER``), or nothing where ``rs_bytes`` took the real state's. State-sequence
        version 4 (b11434 on) writes ``n_rot_k`` and ``n_rot_v`` after ``v_trans`` and
        ``n_layer`` in each attention cache's data (src/llama-kv-cache.cpp:2258-2259 of b11434
        and of b11549): 8 bytes more per attention cache than ``SIZES`` measured on 0c1e570."""
        model = 0 if self.rs else STATE_HEADER
        extra = 4 * (n_stream - 1)
        rot = 8 if state_seq_version >= 4 else 0
        state = 8 + self.base - model + (extra + rot) * self.caches
        ckpt = 8 + self.ckpt_base - model + (extra + rot if self.ckpt_base else 0)
        return state, (ckpt if self.ckpt_base or self.rs else 0)  # (a plain KV cache has none)


# Measured on 0c1e570 from slot files (the state part of files saved after 20, 100 and 300
# tokens; f16 K/V, one slot): kv 64 + 524 n; swa 128 + 524 n + 524 min(n, 32), a checkpoint
# 64 + 524 * 32; recurrent 19524 whatever n; hybrid 19588 + 524 n, a checkpoint 19524. (524 = 2
# attention layers x (128 K + 128 V bytes) + 12 bytes of cell metadata; 64 per attention cache =
# u32 stream count, u32 cell count, u32 v_trans, u32 layer count, 2 layers x 2 x (i32 type, u64
# row size).) The model's header is 16 bytes: in the cache the real states are larger by
# ``Sizes.offsets`` (one stream: kv 56, swa 120 and a checkpoint 56, recurrent 8, hybrid 72),
# which ``model_config`` gives the model as ``Config.state_overhead`` / ``ckpt_overhead``.
# Measured on b11549 the same way (20 and 100 tokens, state-sequence version 4): kv 72 + 524 n,
# swa 144 + 524 n + 524 min(n, 32), hybrid 19596 + 524 n, recurrent 19524: 8 bytes more per
# attention cache (``n_rot_k``, ``n_rot_v``), which ``Sizes.offsets`` adds for version 4.
SIZES: dict[str, Sizes] = {
    "kv": Sizes(per_cell=524, base=64, caches=1),
    "swa": Sizes(per_cell=524, base=128, ckpt_base=64, caches=2),
    "recurrent": Sizes(per_cell=0, base=0, rs=19524),
    "hybrid": Sizes(per_cell=524, base=64, rs=19524, caches=1),
    # The bench models (pcspec.live.models.BIG), by the same rules from their shapes: a cache of L
    # f16 layers writes 16 + 24 L bytes and 12 + 4 n_embd_kv L per cell, a recurrent state 20 bytes
    # plus, per mamba layer, 24 + 4 (d_conv - 1) d_inner + 4 d_state d_inner. swa-big: 4 + 4 layers
    # of 3072-wide K and V; hybrid-big: 2 attention layers as the tiny hybrid's, 8 mamba layers of
    # 4096 x 128. The server's checkpoint lines agree to the KiB on 0c1e570 (24.006 MiB for a
    # full window of swa-big: 512 cells, 16.012 MiB for hybrid-big; docs/BENCH.md).
    "swa-big": Sizes(per_cell=4 * 2 * 3072 * 2 + 12, base=2 * (16 + 24 * 4), ckpt_base=16 + 24 * 4, caches=2),
    "hybrid-big": Sizes(per_cell=524, base=64, rs=20 + 8 * (24 + 4 * 3 * 128 + 4 * 4096 * 128), caches=1),
}

# The model of the build pcspec live runs: the ``baseline`` design under the ``october`` rule set
# (model/rulesets.py: OCTOBER), whose fields are where the October tree departs from the rule set
# the verdict matrix judges under (docs/RULESETS.md).
DEFAULT_VARIANT = "october"


def model_config(kind: str, flags: Flags, facts: ServerFacts, sizes: Sizes | None = None,
                 state_seq_version: int = 3) -> Config:
    """The model's configuration for a server run; ``state_seq_version``: the version the
    build's rule set writes (``RuleSet.state_seq_version``), which sets the states' constant part."""
    sz = sizes or SIZES[kind]
    memory = KIND_MEMORY[kind]
    cache_ram = flags.cache_ram_mib * MIB if flags.cache_ram_mib > 0 else flags.cache_ram_mib
    # one stream for all slots with --kv-unified, else one per slot (llama-kv-cache.cpp:85)
    state_overhead, ckpt_overhead = sz.offsets(1 if flags.kv_unified else facts.n_slots, state_seq_version)
    return Config(
        n_slots=facts.n_slots,
        n_ctx_slot=facts.n_ctx_slot,
        n_batch=flags.n_batch,
        n_ubatch=flags.n_ubatch,
        kv_unified=flags.kv_unified,
        memory=memory,
        n_swa=SPECS[kind].n_swa if memory == MemoryKind.SWA else 0,
        swa_cells=facts.swa_cells or 256,
        cell_bytes=max(1, sz.per_cell),
        # a recurrent checkpoint (and state) is exact: the state's own header is the model's
        rs_bytes=max(1, sz.rs - STATE_HEADER),
        n_ctx_checkpoints=flags.ctx_checkpoints,
        checkpoint_min_step=flags.checkpoint_min_step,
        cache_ram=cache_ram,
        slot_prompt_similarity=flags.slot_prompt_similarity,
        # a restored token list is checked against the tiny models' vocabulary (M6)
        n_vocab=N_VOCAB,
        # the real states' constant part, so the cache's sizes are the server's (M8)
        state_overhead=state_overhead,
        ckpt_overhead=ckpt_overhead,
    ).validate()


# A design built on a tree runs under that tree's rule set (``pcspec.model.designs.design_at``):
# ``pr30137@0c1e570`` is #30137 as patches/pr30137 ports it (no file appendix, the October
# invalidation and aborting loads), ``fixed@0c1e570`` is fixed under the October rules (its own
# points decide where a patch changes a rule: patch 0012 brings the November invalidation).


def design_rules(design: str, tree: str) -> str:
    """The name ``pcspec live --design`` compares a design's build with: ``october`` for
    baseline on 0c1e570 (the same code), a design named ``DESIGN@RULES`` as named (the November
    builds: ``fixed@november``), else ``DESIGN@TREE``."""
    if "@" in design:
        return design
    if design == "baseline" and tree == "0c1e570":
        return DEFAULT_VARIANT
    return f"{design}@{tree}"


def variant(name: str = DEFAULT_VARIANT) -> Design:
    """The model of a build by name: a rule set's (``october``), a design on a tree
    (``pr30137@0c1e570``), or any known design."""
    return get_design(name)
