"""The sequence state's layouts (pcspec.codec.layout, reader): the real files of every
memory kind read exactly, versions 3 and 4 round-trip, and a cut or an overwrite in each part of
each kind is reported at its byte."""

from __future__ import annotations

import re
import struct

import pytest

from pcspec.codec.layout import LAYOUTS, StateLayout, encode_state
from pcspec.codec.reader import MAX_ROW_BYTES, parse_state
from pcspec.model.errors import PcspecError
from tests.support.state_builders import (
    F16,
    Q8_0,
    REAL_FILES,
    as_version,
    encoded,
    kv_part,
    kv_stream,
    real,
    real_layout,
    recurrent_part,
    state_of,
    strip,
)

# file -> (kind, [(memory, role, cells per stream, n_layer, row sizes of the stream with cells)])
EXPECTED = {
    "mamba-a.bin": ("recurrent", [("recurrent", "recurrent", [1], 2, [1536, 1536, 8192, 8192])]),
    "kv-a.bin": ("kv", [("kv", "kv", [42], 2, [128] * 4)]),
    "kv-vtrans.bin": ("kv", [("kv", "kv", [42], 2, [128] * 4)]),
    "kv-streams.bin": ("kv", [("kv", "kv", [0, 42], 2, [128] * 4)]),
    "swa-a.bin": ("iswa", [("kv", "base", [42], 2, [128] * 4), ("kv", "swa", [32], 2, [128] * 4)]),
    "hybrid-a.bin": (
        "hybrid",
        [("kv", "attention", [42], 2, [128] * 4), ("recurrent", "recurrent", [1], 4, [1536, 1536, 8192, 8192])],
    ),
}


# --- the real files --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", REAL_FILES)
def test_real_file_layout(name: str) -> None:
    data = real(name)
    start, version = state_of(data)
    lay = parse_state(data, start, version, name)
    kind, parts = EXPECTED[name]
    assert (lay.kind, lay.version, lay.offset, lay.end, lay.also) == (kind, 3, start, len(data), ())
    got = []
    for p in lay.parts:
        with_cells = [s for s in p.streams if s.cells] or list(p.streams)
        st = with_cells[0]
        got.append((p.memory, p.role, [len(s.cells) for s in p.streams], st.n_layer, [r.row_bytes for r in st.rows]))
    assert got == parts
    assert lay.parts[0].offset == start and lay.parts[-1].end == len(data)


@pytest.mark.parametrize("name", REAL_FILES)
def test_real_file_rewrites_byte_exact(name: str) -> None:
    data = real(name)
    start, _ = state_of(data)
    assert encode_state(real_layout(name)) == data[start:]


def test_mamba_state_as_its_readme_says() -> None:
    lay = real_layout("mamba-a.bin")
    (part,) = lay.parts
    (st,) = part.streams
    assert (lay.offset, lay.size) == (2436, 19524)
    assert [c.pos for c in st.cells] == [601] and st.cells[0].seq_ids == ()
    assert (st.trans, st.n_layer, st.n_rot) == (0, 2, None)
    assert [(r.tensor, r.ggml_type, r.row_bytes, r.offset) for r in st.rows] == [
        ("r", 0, 1536, 2456), ("r", 0, 1536, 2456 + 12 + 1536),
        ("s", 0, 8192, 2456 + 2 * (12 + 1536)), ("s", 0, 8192, 2456 + 2 * (12 + 1536) + 12 + 8192),
    ]


def test_kv_details_of_the_real_files() -> None:
    kv = real_layout("kv-a.bin").parts[0].streams[0]
    assert [c.pos for c in kv.cells] == list(range(42)) and {c.seq_ids for c in kv.cells} == {(0,)}
    assert all(r.n_embd is None and r.elements() == 64 for r in kv.rows)
    vt = real_layout("kv-vtrans.bin").parts[0].streams[0]
    assert vt.trans == 1 and [r.n_embd for r in vt.rows] == [None, None, 64, 64]
    streams = real_layout("kv-streams.bin").parts[0].streams
    assert streams[0].cells == () and {c.seq_ids for c in streams[1].cells} == {(1,)}
    swa = real_layout("swa-a.bin").parts[1].streams[0]
    assert [c.pos for c in swa.cells] == list(range(10, 42))  # the window of 32


# --- versions 3 and 4 ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", REAL_FILES)
@pytest.mark.parametrize("n_rot", [(0, 0), (128, 64)])
def test_version_4_round_trip(name: str, n_rot: tuple[int, int]) -> None:
    v4 = as_version(real_layout(name), 4, n_rot)
    state = encode_state(v4)
    if any(p.memory == "kv" for p in v4.parts):
        assert len(state) > len(encode_state(real_layout(name)))  # 8 more bytes per KV stream with cells
    back = parse_state(state, 0, 4, with_data=True)
    assert back == v4 and encode_state(back) == state
    assert encode_state(as_version(back, 3)) == encode_state(real_layout(name))


def test_a_version_4_kv_state_does_not_read_as_version_3() -> None:
    state = encode_state(as_version(real_layout("kv-a.bin"), 4))
    with pytest.raises(PcspecError):
        parse_state(state, 0, 3)
    with pytest.raises(PcspecError, match="no state layout of state-sequence version 2"):
        parse_state(state, 0, 2)


SYNTHETIC = {
    "empty kv": ("kv", [kv_part("kv", kv_stream(0))]),
    "empty recurrent": ("recurrent", [recurrent_part(None)]),
    "kv without V rows (MLA)": ("kv", [kv_part("kv", kv_stream(5, with_v=False, row_bytes=576 * 2))]),
    "kv with cell ext (M-RoPE)": ("kv", [kv_part("kv", kv_stream(6, ext=True), ext=True)]),
    "quantized rows": ("kv", [kv_part("kv", kv_stream(3, row_bytes=68, ggml_type=Q8_0))]),
    "four streams": ("kv", [kv_part("kv", kv_stream(0), kv_stream(0), kv_stream(4, seq=2), kv_stream(0))]),
    "iswa, empty swa": ("iswa", [kv_part("base", kv_stream(3)), kv_part("swa", kv_stream(0))]),
    "hybrid-iswa": (
        "hybrid-iswa",
        [kv_part("base", kv_stream(9)), kv_part("swa", kv_stream(4, first_pos=5)), recurrent_part(8)],
    ),
    "hybrid-idx": (
        "hybrid-idx",
        [kv_part("attention", kv_stream(7)), recurrent_part(6, n_layer=4),
         kv_part("indexer", kv_stream(7, with_v=False, row_bytes=64))],
    ),
    "hybrid, r and s rows alike": (
        "hybrid",
        [kv_part("attention", kv_stream(2)), recurrent_part(1, r_bytes=256, s_bytes=256)],
    ),
}


@pytest.mark.parametrize("version", [3, 4])
@pytest.mark.parametrize("name", list(SYNTHETIC))
def test_synthetic_round_trip(name: str, version: int) -> None:
    kind, parts = SYNTHETIC[name]
    lay = as_version(StateLayout(kind, version, tuple(parts)), version)
    state = encode_state(lay)
    back = parse_state(state, 0, version, with_data=True)
    assert back == lay and back.kind == kind and encode_state(back) == state


def test_the_layouts_written_by_hand() -> None:
    # llama-kv-cache.cpp:2073-2339 (2079-2347 of b11434): n_stream, cell_count, (pos, n_seq_id,
    # seq_id) per cell, v_trans, n_layer, [version 4: n_rot_k, n_rot_v], per layer the K rows
    # (type, row size, rows), then the V rows
    for version, rot in ((3, b""), (4, struct.pack("<II", 64, 0))):
        st = kv_stream(1, first_pos=7, n_layer=1, row_bytes=4, version=version, n_rot=(64, 0))
        k, v = st.rows
        by_hand = (
            struct.pack("<IIiIiII", 1, 1, 7, 1, 0, 0, 1) + rot
            + struct.pack("<iQ", F16, 4) + k.data + struct.pack("<iQ", F16, 4) + v.data
        )
        assert encoded("kv", version, kv_part("kv", st)) == by_hand
    # llama-memory-recurrent.cpp:841-990: cell_count, (pos, n_seq_id 0), s_trans, n_layer, then
    # the r rows and the s rows of the layers that have them
    part = recurrent_part(5, n_layer=3, n_rows=1, r_bytes=4, s_bytes=8)
    r, s = part.streams[0].rows
    assert encoded("recurrent", 4, part) == (
        struct.pack("<IiIII", 1, 5, 0, 0, 3) + struct.pack("<iQ", 0, 4) + r.data + struct.pack("<iQ", 0, 8) + s.data
    )


# --- cuts: reported at the end of the file, inside the field they fall in ------------------------------


def _files() -> list[tuple[str, bytes, StateLayout]]:
    """(name, state bytes, layout) of every real file, in version 3 and as version 4."""
    out = []
    for name in REAL_FILES:
        lay = real_layout(name)
        for version in (3, 4):
            v = as_version(lay, version)
            state = encode_state(v)
            out.append((f"{name} v{version}", state, parse_state(state, 0, version)))
    for name, (kind, parts) in SYNTHETIC.items():
        if "empty" in name:
            continue
        for version in (3, 4):
            v = as_version(StateLayout(kind, version, tuple(parts)), version)
            state = encode_state(v)
            out.append((f"{name} v{version}", state, parse_state(state, 0, version)))
    return out


FILES = _files()

# The layout a cut inside a part is read as: a cut before a later part begins reads like a
# shorter layout that is tried first (kv before iswa and hybrid; hybrid before hybrid-idx).
FIRST_READER = {
    ("iswa", 0): "kv", ("hybrid", 0): "kv", ("hybrid-iswa", 0): "kv", ("hybrid-iswa", 1): "iswa",
    ("hybrid-idx", 0): "kv", ("hybrid-idx", 1): "hybrid",
}


def _field_at(lay: StateLayout, at: int) -> str:
    """The name the reader gives the field at ``at``."""
    return next(name for name, off, width in lay.fields if off <= at < off + width)


def _rows_at(lay: StateLayout, at: int) -> str | None:
    for p in lay.parts:
        for s in p.streams:
            count: dict[str, int] = {}
            for r in s.rows:
                il = count.get(r.tensor, 0)
                count[r.tensor] = il + 1
                start = r.offset + (16 if r.n_embd is not None else 12)
                if start <= at < start + len(s.cells) * r.row_bytes:
                    return f"{r.tensor} rows of layer {il}"
    return None


@pytest.mark.parametrize(("name", "state", "lay"), FILES, ids=[f[0] for f in FILES])
def test_a_cut_in_each_part(name: str, state: bytes, lay: StateLayout) -> None:
    for i, part in enumerate(lay.parts):
        # inside the part's first field, in its middle, and one byte before its end
        for cut in sorted({part.offset + 2, (part.offset + part.end) // 2, part.end - 1}):
            with pytest.raises(PcspecError) as info:
                parse_state(state[:cut], 0, lay.version, "f")
            err = info.value
            assert err.where == f"f: byte {cut}", (name, i, cut, err)
            assert err.why.startswith("the file ends inside the "), err.why
            if cut < part.offset + 4:
                continue  # a part's first field: any layout with the same earlier parts reads to there
            reader = FIRST_READER.get((lay.kind, i), lay.kind)
            assert f"(read as the {reader} layout, state-sequence version {lay.version}" in err.why
            role = "kv" if reader == "kv" and part.memory == "kv" and lay.kind != "kv" else part.role
            rows = _rows_at(lay, cut)
            field = rows if rows is not None else _field_at(lay, cut).split(", ")[-1].split(" (of")[0]
            assert f"the {role} part, " in err.why and field in err.why, (name, cut, err.why)


def test_a_cut_at_a_part_boundary_reads_as_the_shorter_layout() -> None:
    # Not decidable (pcspec.codec.reader's docstring): an iSWA state cut after its base part is a whole
    # KV state, and a hybrid one cut after its attention part too.
    for name, kind in (("swa-a.bin", "iswa"), ("hybrid-a.bin", "hybrid")):
        lay = real_layout(name)
        state = encode_state(lay)
        first = lay.parts[0]
        short = parse_state(state[: first.end - first.offset], 0, 3)
        assert short.kind == "kv" and lay.kind == kind


def test_the_recurrent_cut_of_the_issue() -> None:
    data = real("mamba-a.bin")
    for cut, field in ((3000, "r rows of layer 0"), (21000, "s rows of layer 1")):
        with pytest.raises(PcspecError) as info:
            parse_state(data[:cut], 2436, 3, "mamba-a.bin")
        assert info.value.where == f"mamba-a.bin: byte {cut}"
        assert f"the file ends inside the recurrent part, {field} (1 cell(s) x " in info.value.why
        assert "(read as the recurrent layout, state-sequence version 3)" in info.value.why


# --- overwrites: a value no writer writes, reported at its field ---------------------------------------

VALIDATED = re.compile(
    r"(n_stream|cell_count|pos|n_seq_id|seq_id|v_trans|s_trans|n_layer|n_rot_k|n_rot_v|type|row size"
    r"|element size|n_embd)$"
)


def _overwrites(lay: StateLayout) -> list[tuple[str, int, int]]:
    """One field of each name per part and stream: the first and the last cell, layer 0 and the
    last layer (``lay.fields`` lists them all)."""
    seen: dict[str, list[tuple[str, int, int]]] = {}
    for name, off, width in lay.fields:
        field = name.split(": ")[-1].split(", ")[-1]
        if not VALIDATED.search(field):
            continue
        key = re.sub(r"cell \d+ \(of cell_count \d+ at byte \d+\)|cell \d+|layer \d+", "#", name)
        seen.setdefault(key, []).append((name, off, width))
    out = []
    for group in seen.values():
        out += [group[0]] if len(group) == 1 else [group[0], group[-1]]
    return out


def _bad_value(name: str, width: int) -> int:
    if name.endswith((": pos", ": seq_id", ": type")):
        return -1
    return int(2 ** (8 * width)) - 1


@pytest.mark.parametrize(("name", "state", "lay"), FILES, ids=[f[0] for f in FILES])
def test_an_overwrite_in_each_part(name: str, state: bytes, lay: StateLayout) -> None:
    parts_hit: set[str] = set()
    for field, off, width in _overwrites(lay):
        bad = bytearray(state)
        value = _bad_value(field, width)
        struct.pack_into({4: "<i" if value < 0 else "<I", 8: "<Q"}[width], bad, off, value)
        with pytest.raises(PcspecError) as info:
            parse_state(bytes(bad), 0, lay.version, "f")
        assert info.value.where == f"f: byte {off}", (name, field, info.value)
        parts_hit.add(field.split(" part")[0])
    assert parts_hit == {p.role for p in lay.parts}


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("kv part, n_stream", 0, "n_stream is 0: a KV cache has 1 stream"),
        ("kv part, cell 3 (of cell_count 42 at byte 200): n_seq_id", 2, "n_seq_id is 2: a sequence's KV cell"),
        ("kv part, cell 5 (of cell_count 42 at byte 200): seq_id", 3, "the earlier cells belong to sequence 0"),
        ("kv part, v_trans", 2, "v_trans is 2: the writer writes 0 or 1"),
        ("kv part, n_layer", 0, "n_layer is 0: a model has 1..512 layers"),
        ("kv part, k rows of layer 1: type", 4, "type is 4: not a ggml type"),
        ("kv part, v rows of layer 0: row size", 129, "row size is 129: not ggml_row_size of a f16 row"),
        ("kv part, cell_count", 43, "cell_count is 43, but the state reads to its end with cell_count 42"),
    ],
)
def test_the_reason_names_the_rule(field: str, value: int, needle: str) -> None:
    data = real("kv-a.bin")
    lay = parse_state(data, 196, 3)
    off, width = next((o, w) for n, o, w in lay.fields if n == field)
    bad = bytearray(data)
    struct.pack_into("<I" if width == 4 else "<Q", bad, off, value)
    with pytest.raises(PcspecError, match=re.escape(needle)) as info:
        parse_state(bytes(bad), 196, 3, "kv-a.bin")
    assert info.value.where == f"kv-a.bin: byte {off}"


def test_recurrent_fields() -> None:
    data = real("mamba-a.bin")
    for off, value, needle in (
        (2436, 2, "cell_count is 2: a sequence holds at most one recurrent cell"),
        (2444, 1, "n_seq_id is 1: a sequence's recurrent cell names no sequence"),
        (2448, 1, "s_trans is 1: written as 0"),
        (2452, 513, "n_layer is 513"),
        (2452, 1, "n_layer is 1: r and s rows of 2 layers follow"),
    ):
        bad = bytearray(data)
        struct.pack_into("<I", bad, off, value)
        with pytest.raises(PcspecError, match=re.escape(needle)) as info:
            parse_state(bytes(bad), 2436, 3, "m")
        assert info.value.where == f"m: byte {off}"


@pytest.mark.parametrize(("off", "value"), [(2460, 1), (2460, MAX_ROW_BYTES * 2)])
def test_row_size_overwrites(off: int, value: int) -> None:
    data = real("mamba-a.bin")
    bad = bytearray(data)
    struct.pack_into("<Q", bad, off, value)
    with pytest.raises(PcspecError) as info:
        parse_state(bytes(bad), 2436, 3, "m")
    assert info.value.where == f"m: byte {off}" and "r rows of layer 0: row size is" in info.value.why


def test_version_4_rotation_fields() -> None:
    lay = as_version(real_layout("kv-a.bin"), 4)
    state = encode_state(lay)
    fields = {n: o for n, o, _ in parse_state(state, 0, 4).fields}
    for name, value, needle in (("kv part, n_rot_k", 96, "n_rot_k is 96"), ("kv part, n_rot_v", 128, "n_rot_v is 128")):
        bad = bytearray(state)
        struct.pack_into("<I", bad, fields[name], value)
        with pytest.raises(PcspecError, match=needle) as info:
            parse_state(bytes(bad), 0, 4, "f")
        assert info.value.where == f"f: byte {fields[name]}"


def test_layouts_are_tried_in_a_fixed_order() -> None:
    assert [k for k, _ in LAYOUTS] == ["kv", "iswa", "recurrent", "hybrid", "hybrid-iswa", "hybrid-idx"]


def test_the_parse_without_data_is_the_layout() -> None:
    for name in REAL_FILES:
        data = real(name)
        start, version = state_of(data)
        assert parse_state(data, start, version) == strip(real_layout(name))


def test_a_row_size_too_large_for_the_file() -> None:
    # A valid row size whose rows run past the end: reported as the end of the file inside those
    # rows, the size named; nothing is sliced from the length (checked against the bytes left).
    data = bytearray(real("kv-a.bin"))
    struct.pack_into("<Q", data, 720, 2**29)
    with pytest.raises(PcspecError) as info:
        parse_state(bytes(data), 196, 3, "f")
    assert info.value.where == f"f: byte {len(data)}"
    assert "the kv part, k rows of layer 0 (42 cell(s) x 536870912 bytes)" in info.value.why
