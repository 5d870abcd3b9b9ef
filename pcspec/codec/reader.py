"""Reading a slot file's sequence state: which layout (``layout``) the bytes are, and
where they break (``parse_state``).

What the file says and what it does not. The state carries no tag, no length and no memory
kind: the restoring server knows its own memory and reads exactly its layout. From the bytes
alone:

* decidable: where each field is, as long as every count and size field holds what the writer
  wrote; whether a part is a KV cache (cells that name one sequence) or a recurrent memory
  (cells that name none); whether KV cells carry the 12-byte ext (with and without it, the cells
  and the data header after them read one way only); the number of streams, cells and layers,
  the ggml types and the row sizes.
* not decidable: which memory wrote a state that two layouts read alike. An iSWA state cut right
  after its base part, or a hybrid state cut right after its attention part, is a whole KV
  state; a cut inside a part's first field reads as any layout with the same earlier parts; a
  KV state followed by stray bytes and an iSWA state whose SWA part is damaged differ only in
  how far the stray bytes happen to read. So the layouts are tried in the fixed order of
  ``LAYOUTS``: the first whose state ends at the end of the file or at the checkpoint appendix
  wins, and the others that do as well are named (``StateLayout.also``).
* guessed: a KV part without V rows (MLA) is taken when no V row header follows its K rows (if
  the state then does not read to its end, the V header is reported as overwritten), or when only
  that reading ends at the end; how many layers of a recurrent part have rows (all of them in a
  recurrent model, the recurrent ones of a hybrid) is found from the row headers that follow, r
  rows alike and s rows alike (with two layers, which of two unlike row headers is the
  overwritten one is not decidable: the second is named).
* not covered: the PLE conv rows that follow each r row in a model with ``ple_conv_state``
  (src/llama-memory-recurrent.cpp:926-935), and a KV cache that shares another's cells (``other``,
  writes nothing, src/llama-kv-cache.cpp:2067-2069): such a state fails to read.
* not detectable: an overwritten row byte (the rows are opaque), an overwritten position that
  is still >= 0, a ggml type overwritten by another whose rows have the same size, a recurrent
  ``n_layer`` made larger (the extra layers read as layers without recurrent rows).

Errors (a ``PcspecError`` naming the byte): a cut is reported at the end of the file, naming the
part and the field it falls in ("the file ends inside the recurrent part, r rows of layer 0");
a field whose value no writer writes (a ggml type that does not exist, a row size that is no
row's, ``n_seq_id`` other than 1 in a KV cell, ...) at that field, with the rule and its source
line. A count is checked by what follows it: when the items after a count stop reading, and
the count set to the number that did read makes the state read to its end, the count is
reported as the overwritten field. When no layout reads the state, the failure that one field
repair makes read to its end wins (an overwrite), else one that reaches the end of the file (a
cut), else the state is taken to end where the furthest layout ends (the bytes after it are
then reported as not read, as after any state), unless a layout fails further on.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NoReturn

from pcspec.codec.ggml_types import GGML_TYPES, row_elements, type_name
from pcspec.codec.layout import (
    KIND_PARTS,
    LAYOUT_VERSIONS,
    LAYOUTS,
    VERSION_N_ROT,
    Cell,
    Part,
    Rows,
    StateLayout,
    Stream,
)
from pcspec.model.errors import PcspecError

LLAMA_MAX_SEQ = 256  # src/llama-cparams.h:8
LLAMA_MAX_LAYERS = 512  # src/llama-hparams.h:11
# pcspec's bounds on one cell's row: no cache row of any model comes near (the largest, an SSM
# state row, is a few MiB); a larger value is an overwritten field.
MAX_ROW_BYTES = 1 << 30
MAX_ROW_ELEMENTS = 1 << 28
CLEAN_END = b"SCKP"  # what may follow a state: the end of the file, or the appendix magic
MAX_COUNT_REPAIRS = 16  # n_layer values tried when the layers break (see _Fix)
MAX_REPAIRS = 96  # re-readings one parse may spend on repairs


@dataclass(frozen=True)
class _Fix:
    """A repair to try: ``values`` in the field at ``at``; when one makes the state read to its
    end, the failure is reported at ``report_at`` with ``report`` (``{value}`` filled in)."""

    at: int
    fmt: str
    values: tuple[int, ...]
    report_at: int | None = None
    report: str | None = None


class _Fail(Exception):
    """Internal: an attempt failed at ``offset`` (a cut: the end of the file)."""

    def __init__(self, offset: int, why: str, cut: bool, fixes: tuple[_Fix, ...] = ()) -> None:
        super().__init__(why)
        self.offset = offset
        self.why = why
        self.cut = cut
        self.fixes = fixes


class _Reader:
    __slots__ = ("data", "fields", "label", "materialize", "pos", "seq", "seq_at")

    def __init__(self, data: bytes, pos: int, materialize: bool) -> None:
        self.data = data
        self.pos = pos
        self.materialize = materialize
        self.label = ""  # the part (and stream) being read, as error messages name it
        self.seq: int | None = None  # the sequence every KV cell must name
        self.seq_at = 0  # where the first cell named it
        self.fields: list[tuple[str, int, int]] = []

    def clone(self) -> _Reader:
        r = _Reader(self.data, self.pos, False)
        r.label, r.seq, r.seq_at = self.label, self.seq, self.seq_at
        return r

    def _take(self, n: int, what: str) -> int:
        have = len(self.data) - self.pos
        if n > have:  # checked before anything is sliced
            raise _Fail(
                len(self.data),
                f"the file ends inside the {self.label}{what}: {n} bytes from byte {self.pos}, {have} there",
                cut=True,
            )
        at = self.pos
        self.pos += n
        return at

    def read(self, fmt: str, what: str) -> tuple[int, int]:
        width = struct.calcsize(fmt)
        at = self._take(width, what)
        self.fields.append((f"{self.label}{what}", at, width))
        value: int = struct.unpack_from(fmt, self.data, at)[0]
        return at, value

    def blob(self, n: int, what: str) -> bytes:
        at = self._take(n, what)
        return self.data[at : at + n] if self.materialize else b""

    def bad(self, at: int, what: str, value: int, why: str, fmt: str = "<I", fix: tuple[int, ...] = ()) -> NoReturn:
        fixes = (_Fix(at, fmt, fix),) if fix else ()
        raise _Fail(at, f"{self.label}{what} is {value}: {why}", False, fixes)


def _count_fix(fail: _Fail, r: _Reader, name: str, at: int, n: int, values: tuple[int, ...]) -> _Fail:
    """The items of count ``name`` broke: maybe the count (at ``at``) is what was overwritten."""
    why = (f"{r.label}{name} is {n}, but the state reads to its end with {name} {{value}}; "
           f"with {n}: {fail.why}")
    fail.fixes = (*fail.fixes, _Fix(at, "<I", tuple(v for v in values if v != n), at, why))
    return fail


# -- the parts ------------------------------------------------------------------------------------


def _rows(r: _Reader, tensor: str, layer: int, n_cells: int, transposed: bool, like: Rows | None = None) -> Rows:
    what = f"{tensor} rows of layer {layer}"
    at, t = r.read("<i", f"{what}: type")
    if t not in GGML_TYPES:
        r.bad(at, f"{what}: type", t, "not a ggml type (ggml/include/ggml.h:389-434)", "<i",
              (like.ggml_type,) if like is not None else (1, 0))
    n_embd: int | None = None
    if transposed:
        size = GGML_TYPES[t].type_size
        el_at, el = r.read("<I", f"{what}: element size")
        if el != size:
            try:
                r.bad(el_at, f"{what}: element size", el, f"ggml_type_size({type_name(t)}) is {size}", fix=(size,))
            except _Fail as fail:  # or the type was overwritten
                retype = f"{r.label}{what}: type is {type_name(t)}, but the element size {el} is a {{value}}'s"
                types = tuple(k for k, v in GGML_TYPES.items() if v.type_size == el and v.blck_size == 1)
                fail.fixes = (*fail.fixes, _Fix(at, "<i", types, at, retype))
                raise
        n_at, n_embd = r.read("<I", f"{what}: n_embd")
        if not 1 <= n_embd <= MAX_ROW_ELEMENTS:
            r.bad(n_at, f"{what}: n_embd", n_embd, f"a row has 1..{MAX_ROW_ELEMENTS} elements",
                  fix=(like.n_embd,) if like is not None and like.n_embd else ())
        row_bytes = el * n_embd
    else:
        z_at, row_bytes = r.read("<Q", f"{what}: row size")
        if row_bytes > MAX_ROW_BYTES or row_elements(t, row_bytes) is None:
            why = (f"not ggml_row_size of a {type_name(t)} row (a multiple of {GGML_TYPES[t].type_size} "
                   f"bytes, at most {MAX_ROW_BYTES}; ggml/src/ggml.c:1339-1344)")
            try:
                r.bad(z_at, f"{what}: row size", row_bytes, why, "<Q", (like.row_bytes,) if like is not None else ())
            except _Fail as fail:  # or the type was overwritten
                retype = f"{r.label}{what}: type is {type_name(t)}, but the row size {row_bytes} is a {{value}} row's"
                types = (like.ggml_type,) if like is not None else (1, 0)
                fail.fixes = (*fail.fixes, _Fix(at, "<i", types, at, retype))
                raise
    data = r.blob(n_cells * row_bytes, f"{what} ({n_cells} cell(s) x {row_bytes} bytes)")
    return Rows(tensor, t, row_bytes, n_embd, data, offset=at)


def _header_at(r: _Reader, transposed: bool) -> tuple[int, int] | None:
    """The (type, row bytes) of a valid row header at the reader, which does not move."""
    try:
        row = _rows(r.clone(), "?", 0, 0, transposed)
    except _Fail:
        return None
    return row.ggml_type, row.row_bytes


def _layer_rows(r: _Reader, tensor: str, n_layer: int, n_layer_at: int, n_cells: int, transposed: bool,
                rows: list[Rows], v_trans_at: int | None = None) -> None:
    for il in range(n_layer):
        like = rows[-1] if rows and rows[-1].tensor == tensor else None
        try:
            rows.append(_rows(r, tensor, il, n_cells, transposed, like))
        except _Fail as fail:
            if v_trans_at is not None and il == 0:  # V rows that read the other way: v_trans was overwritten
                why = f"{r.label}v_trans is {int(transposed)}, but the V rows read with v_trans {{value}}"
                fail.fixes = (*fail.fixes, _Fix(v_trans_at, "<I", (int(not transposed),), v_trans_at, why))
            tries = tuple(range(min(n_layer - 1, MAX_COUNT_REPAIRS), 0, -1))
            raise _count_fix(fail, r, "n_layer", n_layer_at, n_layer, tries) from None


def _kv_cells(
    r: _Reader, n: int, count_at: int, ext: bool, stream: int, n_stream: int, other: int | None = None
) -> list[Cell]:
    """The ``n`` cells; when one fails, a count of the cells that did read (``other``: as many
    as read the other way, with or without the ext) is the repair to try."""
    cells = []
    for i in range(n):
        try:
            cells.append(_kv_cell(r, f"cell {i} (of cell_count {n} at byte {count_at})", ext, stream, n_stream))
        except _Fail as fail:
            counts = (i,) if other is None else (i, other)
            raise _count_fix(fail, r, "cell_count", count_at, n, counts) from None
    return cells


def _cells_that_read(r: _Reader, n: int, count_at: int, ext: bool, stream: int, n_stream: int) -> int:
    probe = r.clone()
    for i in range(n):
        try:
            _kv_cell(probe, "cell", ext, stream, n_stream)
        except _Fail:
            return i
    return n


def _kv_cell(r: _Reader, what: str, ext: bool, stream: int, n_stream: int) -> Cell:
    at, pos = r.read("<i", f"{what}: pos")
    if pos < 0:
        r.bad(at, f"{what}: pos", pos, "a cell of a sequence has a position >= 0", "<i", (0,))
    at, n_seq = r.read("<I", f"{what}: n_seq_id")
    if n_seq != 1:
        r.bad(at, f"{what}: n_seq_id", n_seq, "a sequence's KV cell names that one sequence "
              "(src/llama-kv-cache.cpp:2214-2230; the restore refuses another count, :2375-2378)", fix=(1,))
    cell_ext = None
    if ext:
        cell_ext = (r.read("<i", f"{what}: ext x")[1], r.read("<i", f"{what}: ext y")[1],
                    r.read("<i", f"{what}: ext tok")[1])
    at, seq = r.read("<i", f"{what}: seq_id")
    if not 0 <= seq < LLAMA_MAX_SEQ:
        r.bad(at, f"{what}: seq_id", seq, f"a sequence id is 0..{LLAMA_MAX_SEQ - 1} (src/llama-cparams.h:8)",
              "<i", (r.seq if r.seq is not None else 0,))
    if r.seq is not None and seq != r.seq:
        first = _Fix(r.seq_at, "<i", (seq,), r.seq_at, f"the first cell's seq_id is {r.seq}, the later cells' {seq}")
        try:
            r.bad(at, f"{what}: seq_id", seq, f"the earlier cells belong to sequence {r.seq}: a sequence's "
                  "state holds that one", "<i", (r.seq,))
        except _Fail as fail:
            fail.fixes = (*fail.fixes, first)
            raise
    if n_stream > 1 and seq != stream:
        r.bad(at, f"{what}: seq_id", seq, f"a cache of one stream per sequence keeps sequence {seq} in stream "
              f"{seq}, not {stream} (src/llama-kv-cache.cpp:147-155)", "<i", (stream,))
    if r.seq is None:
        r.seq, r.seq_at = seq, at
    return Cell(pos, (seq,), cell_ext)


def _n_layer(r: _Reader) -> tuple[int, int]:
    at, n_layer = r.read("<I", "n_layer")
    if not 1 <= n_layer <= LLAMA_MAX_LAYERS:
        r.bad(at, "n_layer", n_layer, f"a model has 1..{LLAMA_MAX_LAYERS} layers (src/llama-hparams.h:11)")
    return at, n_layer


def _kv_header(r: _Reader, version: int) -> tuple[int, int, int, int, tuple[int, int] | None]:
    v_trans_at, v_trans = r.read("<I", "v_trans")
    if v_trans not in (0, 1):
        r.bad(v_trans_at, "v_trans", v_trans, "the writer writes 0 or 1 (src/llama-kv-cache.cpp:2247)", fix=(0, 1))
    n_layer_at, n_layer = _n_layer(r)
    n_rot = None
    if version >= VERSION_N_ROT:
        at, k = r.read("<I", "n_rot_k")
        if k != 0 and (k < 64 or k & (k - 1)):
            r.bad(at, "n_rot_k", k, "0 or a power of two from 64 (src/llama-kv-cache.cpp:340-348 of b11434)", fix=(0,))
        at, v = r.read("<I", "n_rot_v")
        if v not in (0, 64):
            r.bad(at, "n_rot_v", v, "0 or 64 (src/llama-kv-cache.cpp:349-351 of b11434)", fix=(0, 64))
        n_rot = (k, v)
    return v_trans_at, v_trans, n_layer_at, n_layer, n_rot


def _cells_reach(r: _Reader, n: int, count_at: int, ext: bool, s: int, n_stream: int, version: int) -> int:
    """How far ``n`` cells with (or without) the ext read: 2 with the data header after them,
    1 the cells alone, 0 not even those."""
    probe = r.clone()
    try:
        _kv_cells(probe, n, count_at, ext, s, n_stream)
    except _Fail:
        return 0
    try:
        _kv_header(probe, version)
        _rows(probe, "k", 0, 0, False)
    except _Fail:
        return 1
    return 2


def _kv_stream(r: _Reader, s: int, n_stream: int, version: int, ext: bool | None, with_v: bool | None,
               deferred: list[_Fail]) -> tuple[Stream, bool]:
    start = r.pos
    count_at, n = r.read("<I", "cell_count")
    if n == 0:
        return Stream((), offset=start, end=r.pos), bool(ext)
    other = None
    if ext is None:  # the cells and the header after them read one way only (else: the further, else without)
        plain = _cells_reach(r, n, count_at, False, s, n_stream, version)
        ext = plain < 2 and _cells_reach(r, n, count_at, True, s, n_stream, version) > plain
        if plain == 0 and not ext:  # neither: maybe the count is wrong, for cells with the ext
            other = _cells_that_read(r, n, count_at, True, s, n_stream)
    cells = _kv_cells(r, n, count_at, ext, s, n_stream, other)
    v_trans_at, v_trans, n_layer_at, n_layer, n_rot = _kv_header(r, version)
    rows: list[Rows] = []
    _layer_rows(r, "k", n_layer, n_layer_at, n, False, rows)
    if with_v is None:  # V rows, unless no V row header follows the K rows (a cache without V: MLA)
        with_v = _header_at(r, bool(v_trans)) is not None
        if not with_v:
            try:
                _layer_rows(r.clone(), "v", n_layer, n_layer_at, n, bool(v_trans), [], v_trans_at)
            except _Fail as fail:
                deferred.append(fail)  # if the state then does not read to its end, this is why
    if with_v:
        _layer_rows(r, "v", n_layer, n_layer_at, n, bool(v_trans), rows, v_trans_at)
    return Stream(tuple(cells), v_trans, n_layer, n_rot, tuple(rows), start, r.pos), ext


def _kv_part(
    r: _Reader, role: str, version: int, ext: bool | None, with_v: bool | None, deferred: list[_Fail]
) -> Part:
    start = r.pos
    r.label = f"{role} part, "
    at, n_stream = r.read("<I", "n_stream")
    if not 1 <= n_stream <= LLAMA_MAX_SEQ:
        r.bad(at, "n_stream", n_stream, f"a KV cache has 1 stream, or one per sequence, at most {LLAMA_MAX_SEQ} "
              "(src/llama-kv-cache.cpp:84, 135)", fix=(1,))
    streams = []
    # ext: the model's, the same in every stream (None: decided by the first stream with cells)
    for s in range(n_stream):
        r.label = f"{role} part, stream {s}, " if n_stream > 1 else f"{role} part, "
        try:
            stream, got = _kv_stream(r, s, n_stream, version, ext, with_v, deferred)
        except _Fail as fail:
            r.label = f"{role} part, "
            raise _count_fix(fail, r, "n_stream", at, n_stream, (s,) if s else ()) from None
        if stream.cells:
            ext = got
        streams.append(stream)
    return Part("kv", role, tuple(streams), bool(ext), start, r.pos)


def _recurrent_layers(r: _Reader, n_cells: int, n_layer_at: int, n_layer: int, last: bool) -> int:
    """How many layers have r and s rows: all in a recurrent model, the recurrent layers of a
    hybrid one. Found from the row headers that follow: r rows for those layers, then s rows,
    each alike in every layer (``n_embd_r()``, ``n_embd_s()``: src/llama-memory-recurrent.cpp:915,
    948)."""
    probe = r.clone()
    keys: list[tuple[int, int]] = []
    while len(keys) < 2 * LLAMA_MAX_LAYERS and (key := _header_at(probe, False)) is not None:
        keys.append(key)
        try:
            _rows(probe, "r", len(keys), n_cells, False)
        except _Fail:  # cut inside the rows: as many r rows as are alike, or all layers
            run = next((i for i, k in enumerate(keys) if k != keys[0]), None)
            return run if run is not None else n_layer
    m = len(keys)
    if last and m > 2 * n_layer:
        r.bad(n_layer_at, "n_layer", n_layer, f"r and s rows of {m // 2} layers follow", fix=(m // 2,))
    if last and m and (probe.pos == len(probe.data) or probe.data[probe.pos :].startswith(CLEAN_END)):
        if m % 2 == 0:
            return m // 2  # the whole run: half r rows, half s rows (a bad one is reported there)
    elif last and m:  # the rows stop at a header that does not read: it is among them
        return min(n_layer, next((i for i, k in enumerate(keys) if k != keys[0]), m))
    # else the largest split into alike r rows and alike s rows (the next part may look like rows)
    for n in range(min(m // 2, n_layer), 0, -1):
        if len(set(keys[:n])) == 1 and len(set(keys[n : 2 * n])) == 1:
            return n
    return n_layer


def _recurrent_part(r: _Reader, role: str, last: bool) -> Part:
    start = r.pos
    r.label = f"{role} part, "
    count_at, n = r.read("<I", "cell_count")
    if n > 1:
        r.bad(count_at, "cell_count", n, "a sequence holds at most one recurrent cell, its tail "
              "(src/llama-memory-recurrent.cpp:557-575)", fix=(1, 0))
    cells = []
    for i in range(n):
        at, pos = r.read("<i", f"cell {i}: pos")
        if pos < 0:
            r.bad(at, f"cell {i}: pos", pos, "a cell of a sequence has a position >= 0", "<i", (0,))
        at, n_seq = r.read("<I", f"cell {i}: n_seq_id")
        if n_seq != 0:
            r.bad(at, f"cell {i}: n_seq_id", n_seq, "a sequence's recurrent cell names no sequence "
                  "(src/llama-memory-recurrent.cpp:883; the restore refuses another count, :1017)", fix=(0,))
        cells.append(Cell(pos))
    at, s_trans = r.read("<I", "s_trans")
    if s_trans != 0:
        r.bad(at, "s_trans", s_trans, "written as 0 (src/llama-memory-recurrent.cpp:898), refused otherwise "
              "(incompatible s transposition, :1107-1110)", fix=(0,))
    n_layer_at, n_layer = _n_layer(r)
    n_rows = _recurrent_layers(r, n, n_layer_at, n_layer, last)
    rows: list[Rows] = []
    for tensor in ("r", "s"):
        for il in range(n_rows):
            like = rows[-1] if rows and rows[-1].tensor == tensor else None
            row = _rows(r, tensor, il, n, False, like)
            if like is not None and (row.ggml_type, row.row_bytes) != (like.ggml_type, like.row_bytes):
                r.bad(row.offset, f"{tensor} rows of layer {il}: type", row.ggml_type,
                      f"the {tensor} rows of every layer are alike ({type_name(like.ggml_type)}, "
                      f"{like.row_bytes} bytes; src/llama-memory-recurrent.cpp:{915 if tensor == 'r' else 948})",
                      "<i", (like.ggml_type,))
            rows.append(row)
    stream = Stream(tuple(cells), s_trans, n_layer, None, tuple(rows), start, r.pos)
    return Part("recurrent", role, (stream,), False, start, r.pos)


# -- choosing the layout --------------------------------------------------------------------------


def _attempt(data: bytes, start: int, version: int, kind: str, choice: tuple[bool | None, ...],
             materialize: bool = False) -> tuple[StateLayout, list[_Fail]]:
    """One reading of the state as ``kind``: ``choice`` is (cell ext, then V rows per KV part),
    each None (decided by the bytes) or forced."""
    r = _Reader(data, start, materialize)
    deferred: list[_Fail] = []
    parts = []
    ext, *v_choice = choice
    choices = iter(v_choice)
    layout = KIND_PARTS[kind]
    try:
        for i, (memory, role) in enumerate(layout):
            if memory == "kv":
                parts.append(_kv_part(r, role, version, ext, next(choices), deferred))
            else:
                parts.append(_recurrent_part(r, role, last=i == len(layout) - 1))
    except _Fail as fail:
        # A bad field after V rows were taken for absent: the absent V rows are the likelier story.
        raise deferred[0] if deferred and not fail.cut else fail from None
    return StateLayout(kind, version, tuple(parts), start, r.pos, fields=tuple(r.fields)), deferred


def _clean(data: bytes, end: int) -> bool:
    return end == len(data) or data[end : end + 4] == CLEAN_END


@dataclass
class _Outcome:
    kind: str
    choice: tuple[bool | None, ...]
    layout: StateLayout | None = None
    fail: _Fail | None = None
    clean: bool = field(default=False)


def _run(data: bytes, start: int, version: int, kind: str, choice: tuple[bool | None, ...]) -> _Outcome:
    try:
        lay, deferred = _attempt(data, start, version, kind, choice)
    except _Fail as fail:
        return _Outcome(kind, choice, fail=fail)
    if not _clean(data, lay.end) and deferred:
        return _Outcome(kind, choice, fail=deferred[0])
    return _Outcome(kind, choice, lay, clean=_clean(data, lay.end))


def _choices(kind: str) -> Iterator[tuple[bool | None, ...]]:
    """The cell ext and the V rows decided by the bytes first, then every explicit choice (the
    ext for the whole state, the V rows per KV part)."""
    n_kv = sum(1 for memory, _ in KIND_PARTS[kind] if memory == "kv")
    yield (None,) * (1 + n_kv)
    if n_kv:
        for ext in (False, True):
            for v in itertools.product((True, False), repeat=n_kv):
                yield (ext, *v)


def _describe(lay: StateLayout) -> str:
    kv = [p for p in lay.parts if p.memory == "kv" and any(s.cells for s in p.streams)]
    gone = [p.role for p in kv if not any(row.tensor == "v" for s in p.streams for row in s.rows)]
    return lay.kind + (f" (no V rows in {', '.join(gone)})" if gone else "")


def parse_state(
    data: bytes, start: int, version: int, path: str = "<bytes>", *, with_data: bool = False
) -> StateLayout:
    """The layout of the state at ``data[start:]``, chosen as the module docstring says. Raises
    ``PcspecError`` naming the byte and the field when no layout reads it. ``with_data`` keeps the
    rows (``Rows.data``), as ``layout.encode_state`` needs them."""
    data = bytes(data)
    if version not in LAYOUT_VERSIONS:
        raise PcspecError(
            f"no state layout of state-sequence version {version} is known "
            f"(known: {', '.join(map(str, LAYOUT_VERSIONS))})",
            where=f"{path}: byte {start}",
        )
    outcomes: list[_Outcome] = []  # per kind: the bytes' own choice, and the first forced one that reads
    spare: list[_Outcome] = []  # the forced choices that fail: only for repairs
    for kind, _ in LAYOUTS:
        choices = _choices(kind)
        o = _run(data, start, version, kind, next(choices))
        outcomes.append(o)
        if not o.clean:
            for alt in (_run(data, start, version, kind, c) for c in choices):
                if alt.clean:
                    outcomes.append(alt)
                    break
                spare.append(alt)
    clean = [o for o in outcomes if o.clean]
    if clean:
        best = clean[0]
        assert best.layout is not None
        first = _describe(best.layout)
        also = tuple(dict.fromkeys(d for o in clean[1:] if o.layout and (d := _describe(o.layout)) != first))
    else:
        best, also = _unclean_or_raise(data, start, version, outcomes, spare, path), ()
    lay, _ = _attempt(data, start, version, best.kind, best.choice, with_data)
    return StateLayout(lay.kind, lay.version, lay.parts, lay.offset, lay.end, also, lay.fields)


def _repair(data: bytes, start: int, version: int, o: _Outcome, budget: list[int]) -> tuple[int, str] | None:
    """(byte, why) of the first fix that makes the state read to its end: one overwritten field.
    ``budget`` bounds the re-readings of a whole parse."""
    assert o.fail is not None
    for fix in o.fail.fixes:
        width = struct.calcsize(fix.fmt)
        for value in fix.values:
            if budget[0] <= 0:
                return None
            budget[0] -= 1
            patched = data[: fix.at] + struct.pack(fix.fmt, value) + data[fix.at + width :]
            if _run(patched, start, version, o.kind, o.choice).clean:
                if fix.report is None or fix.report_at is None:
                    return o.fail.offset, o.fail.why
                return fix.report_at, fix.report.format(value=value)
    return None


def _unclean_or_raise(
    data: bytes, start: int, version: int, outcomes: list[_Outcome], spare: list[_Outcome], path: str
) -> _Outcome:
    """No layout reads to the end: one overwritten field (a repair reads to the end; the bytes'
    own choices first, then the forced ones), else a cut (a layout reaches the end of the file),
    else the state followed by bytes no layout reads, or the failure that gets furthest."""
    def by_offset(os: list[_Outcome]) -> list[_Outcome]:
        return sorted((o for o in os if o.fail is not None), key=lambda o: -o.fail.offset if o.fail else 0)

    failed = by_offset(outcomes)
    suffix = f" (read as the {{kind}} layout, state-sequence version {version}{{also}})"

    def stop(o: _Outcome, at: int, why: str) -> NoReturn:
        same = [x.kind for x in failed if x is not o and x.fail is not None and x.fail.offset == at and x.fail.cut]
        also = f"; {', '.join(dict.fromkeys(same))} end there too" if same and o.fail is not None and o.fail.cut else ""
        raise PcspecError(why + suffix.format(kind=o.kind, also=also), where=f"{path}: byte {at}")

    budget = [MAX_REPAIRS]
    for o in failed + by_offset(spare):
        repaired = _repair(data, start, version, o, budget)
        if repaired is not None:
            stop(o, *repaired)
    cut = [o for o in outcomes if o.fail is not None and o.fail.cut]
    if cut:
        assert cut[0].fail is not None
        stop(cut[0], cut[0].fail.offset, cut[0].fail.why)
    parsed = [o for o in outcomes if o.layout is not None]
    far = max(parsed, key=lambda o: o.layout.end if o.layout else 0, default=None)
    if far is not None and far.layout is not None and (not failed or failed[0].fail is None
                                                         or failed[0].fail.offset <= far.layout.end):
        return far  # the state, then bytes that are not read
    pick = failed[0]
    assert pick.fail is not None
    stop(pick, pick.fail.offset, pick.fail.why)
