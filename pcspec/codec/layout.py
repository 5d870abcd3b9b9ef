"""The sequence state of a slot file: each memory's ``state_write`` layout, state-sequence
versions 3 and 4, as data (``StateLayout``) and written byte for byte (``encode_state``).

A slot file's state is what ``llama_state_seq_save_file`` has the context's memory write for one
sequence with flags 0 (llama-context.cpp:3377-3395 of the October tree; ``state_seq_write_data``
only calls ``memory->state_write``). All integers little-endian. The memories, and what they
write, in the October tree (0c1e570), b11434 and b11549 (the same code, only the KV cache's data
header differs between versions 3 and 4):

* **KV cache** (``llama_kv_cache::state_write``, src/llama-kv-cache.cpp:2065-2133; 2071-2139 in
  b11434 and b11549): u32 ``n_stream``, then per stream u32 ``cell_count`` and, for a stream with
  cells, the meta and the data of those cells (an empty stream writes only its count,
  2126-2128 / 2132-2134).

  - meta (``state_write_meta``, 2211-2242 / 2217-2248): per cell i32 ``pos``, u32 ``n_seq_id``,
    the 12-byte ``llama_kv_cell_ext`` (i32 x, y, tok) when the model has one (M-RoPE or PLE,
    ``has_cell_ext``, 1843-1846), then the ``n_seq_id`` i32 sequence ids. A sequence's state
    names that one sequence in every cell: ``n_seq_id`` is 1, and the restore refuses another
    count (``state_read_meta``, 2375-2378 / 2383-2386).
  - data (``state_write_data``, 2244-2341 / 2250-2349): u32 ``v_trans``, u32 ``n_layer``;
    **version 4 only**: u32 ``n_rot_k``, u32 ``n_rot_v`` (2258-2259 of b11434 and b11549; the
    restore refuses a mismatch, "incompatible key rotation" / "incompatible value rotation",
    2575-2583). Then per layer the K rows: i32 ggml type, u64 row size, ``cell_count`` rows; then
    per layer the V rows, unless the cache has none (MLA, ``has_v``, 230-231): not transposed
    like K, transposed (``v_trans`` 1) as i32 type, u32 element size, u32 ``n_embd_v_gqa`` and
    ``n_embd_v_gqa * cell_count`` elements.

* **iSWA** (``llama_kv_cache_iswa::state_write``, src/llama-kv-cache-iswa.cpp:259-265): the base
  cache's state, then the SWA cache's, two KV layouts back to back.

* **recurrent** (``llama_memory_recurrent::state_write``, src/llama-memory-recurrent.cpp:766-845;
  784-863 in b11434, 788-867 in b11549): u32 ``cell_count``; per cell i32 ``pos`` and u32
  ``n_seq_id``, which is 0 for a sequence's state (878-895; the restore refuses another, 1017);
  u32 ``s_trans``, always 0 (898; the restore refuses another, "incompatible s transposition",
  1107-1110); u32 ``n_layer`` (every layer of the model); then per layer that has a recurrent
  state the r rows (i32 type, u64 row size, rows), then per such layer the s rows, alike
  (897-990). A sequence holds at most one recurrent cell, its tail (557-575).

* **hybrid** (``llama_memory_hybrid::state_write``, src/llama-memory-hybrid.cpp:190-195): the
  attention KV cache's state, then the recurrent memory's. Two compositions of these parts are
  tried as well: **hybrid-iswa** (src/llama-memory-hybrid-iswa.cpp:195-198: an iSWA cache, then
  the recurrent memory) and **hybrid-idx** (src/llama-memory-hybrid-idx.cpp:258-269 of the
  October tree, 259 of b11434, 256 of b11549: the hybrid state, then the indexer's KV cache).

Reading a state from a file, and what the bytes do and do not decide, is ``reader``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pcspec.codec.ggml_types import row_elements
from pcspec.model.errors import PcspecError

# The state-sequence versions whose layouts this module knows (``pcspec.model.state_versions``:
# 3 in the October tree, 4 in b11434 and b11549).
LAYOUT_VERSIONS: tuple[int, ...] = (3, 4)
VERSION_N_ROT = 4  # the first version with n_rot_k, n_rot_v in the KV data header

Memory = Literal["kv", "recurrent"]

# (kind, its parts as (memory, role)), in the order they are tried.
LAYOUTS: tuple[tuple[str, tuple[tuple[Memory, str], ...]], ...] = (
    ("kv", (("kv", "kv"),)),
    ("iswa", (("kv", "base"), ("kv", "swa"))),
    ("recurrent", (("recurrent", "recurrent"),)),
    ("hybrid", (("kv", "attention"), ("recurrent", "recurrent"))),
    ("hybrid-iswa", (("kv", "base"), ("kv", "swa"), ("recurrent", "recurrent"))),
    ("hybrid-idx", (("kv", "attention"), ("recurrent", "recurrent"), ("kv", "indexer"))),
)
KIND_PARTS = dict(LAYOUTS)

# -- what a state holds ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    pos: int
    seq_ids: tuple[int, ...] = ()  # a KV cell of a sequence's state: that one sequence
    ext: tuple[int, int, int] | None = None  # llama_kv_cell_ext (x, y, tok), when the model has it


@dataclass(frozen=True)
class Rows:
    """One layer's rows of one tensor (``k``, ``v``, ``r`` or ``s``) for the stream's cells."""

    tensor: str
    ggml_type: int
    row_bytes: int  # one cell's row (transposed: element size x n_embd)
    n_embd: int | None = None  # transposed V only: written after the element size, instead of a row size
    data: bytes = field(default=b"", repr=False)  # the rows; b"" when parsed without the data
    offset: int = field(default=0, compare=False)  # file offset of the header

    @property
    def transposed(self) -> bool:
        return self.n_embd is not None

    def elements(self) -> int | None:
        """Elements per row: ``n_embd`` as ``ggml_row_size`` would have it."""
        if self.n_embd is not None:
            return self.n_embd
        return row_elements(self.ggml_type, self.row_bytes)


@dataclass(frozen=True)
class Stream:
    """One stream of a KV cache, or the recurrent memory's cells: the cells, then their data
    header and rows (an empty KV stream has neither)."""

    cells: tuple[Cell, ...]
    trans: int = 0  # v_trans (KV) or s_trans (recurrent)
    n_layer: int = 0
    n_rot: tuple[int, int] | None = None  # version 4 KV: (n_rot_k, n_rot_v)
    rows: tuple[Rows, ...] = ()
    offset: int = field(default=0, compare=False)
    end: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Part:
    memory: Memory
    role: str  # kv, base, swa, attention, recurrent, indexer
    streams: tuple[Stream, ...]  # a recurrent part has one, with no n_stream field before it
    cell_ext: bool = False
    offset: int = field(default=0, compare=False)
    end: int = field(default=0, compare=False)


@dataclass(frozen=True)
class StateLayout:
    kind: str
    version: int
    parts: tuple[Part, ...]
    offset: int = field(default=0, compare=False)
    end: int = field(default=0, compare=False)
    also: tuple[str, ...] = field(default=(), compare=False)  # other layouts that read the bytes as well
    fields: tuple[tuple[str, int, int], ...] = field(default=(), compare=False, repr=False)

    @property
    def size(self) -> int:
        return self.end - self.offset


# -- writing ----------------------------------------------------------------------------------------


def encode_state(layout: StateLayout) -> bytes:
    """The bytes ``state_write`` writes for ``layout`` (its rows must hold their data)."""
    out: list[bytes] = []
    for part in layout.parts:
        if part.memory == "kv":
            out.append(struct.pack("<I", len(part.streams)))
        elif len(part.streams) != 1:
            raise PcspecError(f"{part.role} part: a recurrent part has one stream, not {len(part.streams)}")
        for stream in part.streams:
            out.append(_encode_stream(part, stream, layout.version))
    return b"".join(out)


def _encode_stream(part: Part, st: Stream, version: int) -> bytes:
    out = [struct.pack("<I", len(st.cells))]
    if part.memory == "kv" and not st.cells:
        return out[0]
    for c in st.cells:
        out.append(struct.pack("<iI", c.pos, len(c.seq_ids)))
        if part.cell_ext:
            if c.ext is None:
                raise PcspecError(f"{part.role} part: a cell without the ext in a part with cell_ext")
            out.append(struct.pack("<iii", *c.ext))
        out.append(struct.pack(f"<{len(c.seq_ids)}i", *c.seq_ids))
    out.append(struct.pack("<II", st.trans, st.n_layer))
    if part.memory == "kv" and version >= VERSION_N_ROT:
        if st.n_rot is None:
            raise PcspecError(f"{part.role} part: version {version} writes n_rot_k and n_rot_v")
        out.append(struct.pack("<II", *st.n_rot))
    for row in st.rows:
        if len(row.data) != len(st.cells) * row.row_bytes:
            raise PcspecError(
                f"{part.role} part: {row.tensor} rows hold {len(row.data)} bytes, "
                f"{len(st.cells)} cells of {row.row_bytes} need {len(st.cells) * row.row_bytes}"
            )
        if row.n_embd is not None:
            out.append(struct.pack("<iII", row.ggml_type, row.row_bytes // row.n_embd, row.n_embd))
        else:
            out.append(struct.pack("<iQ", row.ggml_type, row.row_bytes))
        out.append(row.data)
    return b"".join(out)


def position_runs(positions: Sequence[int]) -> list[tuple[int, int]]:
    """Positions as inclusive runs of consecutive values, in cell order."""
    runs: list[tuple[int, int]] = []
    for p in positions:
        if runs and p == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], p)
        else:
            runs.append((p, p))
    return runs
