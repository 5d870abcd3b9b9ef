"""Sequence states built from their layout (``pcspec.codec.layout``), for the tests.

Row bytes are a fixed function of their place, so two builds of the same shape are equal and a
state never happens to contain a field-like pattern by accident of randomness.
"""

from __future__ import annotations

import dataclasses
import struct

from pcspec.codec.layout import Cell, Part, Rows, StateLayout, Stream, encode_state
from pcspec.codec.reader import parse_state
from tests.support.paths import DATA

REAL_DIR = DATA / "real"
REAL_FILES = ("mamba-a.bin", "kv-a.bin", "kv-vtrans.bin", "kv-streams.bin", "swa-a.bin", "hybrid-a.bin")
F16, F32, Q8_0 = 1, 0, 8


def rows(tensor: str, n_cells: int, row_bytes: int, ggml_type: int = F16, n_embd: int | None = None,
         salt: int = 0) -> Rows:
    data = bytes((7 * i + 3 * salt + 1) % 251 for i in range(n_cells * row_bytes))
    return Rows(tensor, ggml_type, row_bytes, n_embd, data)


def kv_stream(n_cells: int, *, seq: int = 0, first_pos: int = 0, n_layer: int = 2, row_bytes: int = 128,
              ggml_type: int = F16, v_trans: int = 0, with_v: bool = True, version: int = 3,
              n_rot: tuple[int, int] = (0, 0), ext: bool = False) -> Stream:
    if n_cells == 0:
        return Stream(())
    cells = tuple(
        Cell(first_pos + i, (seq,), (i, 2 * i, 100 + i) if ext else None) for i in range(n_cells)
    )
    out = [rows("k", n_cells, row_bytes, ggml_type, salt=il) for il in range(n_layer)]
    if with_v:
        for il in range(n_layer):
            if v_trans:
                out.append(rows("v", n_cells, 2 * 64, F16, n_embd=64, salt=10 + il))
            else:
                out.append(rows("v", n_cells, row_bytes, ggml_type, salt=10 + il))
    return Stream(cells, v_trans, n_layer, n_rot if version >= 4 else None, tuple(out))


def kv_part(role: str, *streams: Stream, ext: bool = False) -> Part:
    return Part("kv", role, streams, ext)


def recurrent_part(pos: int | None = 41, *, n_layer: int = 2, n_rows: int = 2, r_bytes: int = 1536,
                   s_bytes: int = 8192, role: str = "recurrent") -> Part:
    cells = () if pos is None else (Cell(pos),)
    out = [rows("r", len(cells), r_bytes, F32, salt=il) for il in range(n_rows)]
    out += [rows("s", len(cells), s_bytes, F32, salt=20 + il) for il in range(n_rows)]
    return Part("recurrent", role, (Stream(cells, 0, n_layer, None, tuple(out)),))


def state_of(data: bytes) -> tuple[int, int]:
    """(state offset, version) of a slot file."""
    (n_words,) = struct.unpack_from("<I", data, 8)
    return 12 + 4 * n_words, struct.unpack_from("<I", data, 4)[0]


def real(name: str) -> bytes:
    return (REAL_DIR / name).read_bytes()


def real_layout(name: str) -> StateLayout:
    data = real(name)
    start, version = state_of(data)
    return parse_state(data, start, version, name, with_data=True)


def as_version(lay: StateLayout, version: int, n_rot: tuple[int, int] = (0, 0)) -> StateLayout:
    """The same state written by a build of another version (version 4: the KV data header
    carries n_rot_k and n_rot_v)."""
    parts = tuple(
        dataclasses.replace(p, streams=tuple(
            dataclasses.replace(s, n_rot=n_rot if version >= 4 and p.memory == "kv" and s.cells else None)
            for s in p.streams
        ))
        for p in lay.parts
    )
    return dataclasses.replace(lay, version=version, parts=parts)


def strip(lay: StateLayout) -> StateLayout:
    """The layout without its rows' bytes (as parse_state returns it without ``with_data``)."""
    return dataclasses.replace(lay, parts=tuple(
        dataclasses.replace(p, streams=tuple(
            dataclasses.replace(s, rows=tuple(dataclasses.replace(r, data=b"") for r in s.rows))
            for s in p.streams
        ))
        for p in lay.parts
    ))


def encoded(kind: str, version: int, *parts: Part) -> bytes:
    return encode_state(StateLayout(kind, version, parts))
