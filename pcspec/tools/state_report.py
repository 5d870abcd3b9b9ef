"""What a parsed sequence state holds (``pcspec.codec.reader.parse_state``), for
``pcspec slotfile inspect``: text lines and a JSON object.

Per part (KV cache, or recurrent memory; an iSWA state has two KV parts, a hybrid one a KV part
and a recurrent part): where it lies, its streams, and per stream the cells (their sequence and
positions, as runs), the transposition flag, the layer count, version 4's rotations, and the rows
of each tensor grouped by layer (ggml type, bytes and elements of one cell's row).
"""

from __future__ import annotations

from typing import Any

from pcspec.codec.ggml_types import type_name
from pcspec.codec.layout import Part, Rows, StateLayout, Stream, position_runs

INDENT = "    "


def _runs_text(positions: list[int]) -> str:
    runs = position_runs(positions)
    shown = ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in runs[:8])
    return shown + (f", ... ({len(runs)} runs)" if len(runs) > 8 else "")


def _row_groups(rows: tuple[Rows, ...]) -> list[tuple[Rows, int]]:
    """(first row, how many) of each run of alike rows of one tensor, in file order."""
    groups: list[tuple[Rows, int]] = []
    for row in rows:
        if groups:
            first, n = groups[-1]
            if (first.tensor, first.ggml_type, first.row_bytes, first.n_embd) == (
                row.tensor, row.ggml_type, row.row_bytes, row.n_embd
            ):
                groups[-1] = (first, n + 1)
                continue
        groups.append((row, 1))
    return groups


def _stream_text(part: Part, st: Stream) -> list[str]:
    if not st.cells:
        return ["no cells"]
    n = len(st.cells)
    seqs = sorted({s for c in st.cells for s in c.seq_ids})
    who = f" of sequence {', '.join(map(str, seqs))}" if seqs else ""
    trans = "v_trans" if part.memory == "kv" else "s_trans"
    head = f"{n} cell{'s' if n != 1 else ''}{who}, positions {_runs_text([c.pos for c in st.cells])}"
    head += f"; {trans} {st.trans}; n_layer {st.n_layer}"
    if st.n_rot is not None:
        head += f"; n_rot_k {st.n_rot[0]}, n_rot_v {st.n_rot[1]}"
    if part.cell_ext:
        head += "; cells carry the ext (x, y, tok)"
    lines = [head]
    for row, count in _row_groups(st.rows):
        form = ", transposed" if row.transposed else ""
        lines.append(
            f"{row.tensor} rows: {count} layer{'s' if count != 1 else ''} x {row.row_bytes} bytes a cell "
            f"({type_name(row.ggml_type)}, {row.elements()} elements{form})"
        )
    return lines


def layout_text(lay: StateLayout) -> list[str]:
    """The layout as indented lines (under the report's ``state`` line)."""
    also = f"; also reads as {', '.join(lay.also)}" if lay.also else ""
    lines = [f"  state layout            {lay.kind} (state-sequence version {lay.version} layout{also})"]
    for part in lay.parts:
        span = f"{part.end - part.offset} bytes at {part.offset}..{part.end - 1}"
        if part.memory == "recurrent" or len(part.streams) == 1:
            body = _stream_text(part, part.streams[0])
            lines.append(f"{INDENT}{part.role} part: {span}: {body[0]}")
            lines += [INDENT * 2 + b for b in body[1:]]
            continue
        lines.append(f"{INDENT}{part.role} part: {span}: {len(part.streams)} streams")
        for i, st in enumerate(part.streams):
            body = _stream_text(part, st)
            lines.append(f"{INDENT * 2}stream {i}: {body[0]}")
            lines += [INDENT * 3 + b for b in body[1:]]
    return lines


def _rows_json(row: Rows) -> dict[str, Any]:
    return {
        "tensor": row.tensor,
        "offset": row.offset,
        "type": row.ggml_type,
        "type_name": type_name(row.ggml_type),
        "row_bytes": row.row_bytes,
        "elements": row.elements(),
        "transposed": row.transposed,
    }


def _stream_json(st: Stream) -> dict[str, Any]:
    return {
        "offset": st.offset,
        "bytes": st.end - st.offset,
        "cell_count": len(st.cells),
        "positions": [list(r) for r in position_runs([c.pos for c in st.cells])],
        "seq_ids": sorted({s for c in st.cells for s in c.seq_ids}),
        "trans": st.trans if st.cells or st.rows else None,
        "n_layer": st.n_layer if st.cells or st.rows else None,
        "n_rot": list(st.n_rot) if st.n_rot is not None else None,
        "rows": [_rows_json(r) for r in st.rows],
    }


def layout_json(lay: StateLayout) -> dict[str, Any]:
    return {
        "kind": lay.kind,
        "version": lay.version,
        "also": list(lay.also),
        "parts": [
            {
                "memory": p.memory,
                "role": p.role,
                "offset": p.offset,
                "bytes": p.end - p.offset,
                "cell_ext": p.cell_ext,
                "streams": [_stream_json(s) for s in p.streams],
            }
            for p in lay.parts
        ],
    }


def last_position(lay: StateLayout) -> int | None:
    """The largest position any cell of the state holds (None: no cells)."""
    return max((c.pos for p in lay.parts for s in p.streams for c in s.cells), default=None)
