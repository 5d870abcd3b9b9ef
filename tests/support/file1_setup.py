"""The FILE-1 set-up, shared by tests/model/test_file1_fuzz.py and benchmarks/file1_campaign.py.

A running server whose slot 0 has just been saved to ``f.bin`` (``build``), what a mutation of
that file may touch (``Base``: its integer fields, its identity bytes), and the judgement of a
restore of a mutated file (``judge``). The test draws mutations with Hypothesis, the campaign
with a seeded ``random.Random``; both judge them here, so they check the same thing.

Each memory kind (kv, swa, recurrent, hybrid), with and without a draft context: slot 0 runs
two chat turns (three checkpoints where the kind takes any, ``n_ctx_checkpoints = 3``), slot 1
an unrelated prompt, then ``POST /slots/0?action=save`` writes ``f.bin``.

The judgement: no crash; no allocation larger than the file (the reader's ``ReadStats`` on the
same bytes, as the restore calls the reader, and the model heap's ``alloc`` events); FILE-1
over the restore's events; the slot consistent -- either rejected (``file_restore_failed``;
tokens and every context's sequence empty) or restored with the target memory holding as many
tokens as the slot bookkeeps. Only lengths are judged in general: a well-formed but wrong token
is a semantic corruption no reader can see. On ``fixed`` STATE-1 must also hold whenever the
mutation left the identity bytes alone: the token words and, in the model's state blob (which
stands for the KV/recurrent data), ``part_lo`` and the token arrays. On ``baseline`` one slot
inconsistency is the C++ behaviour, not a model error, and is allowed by name: a mutated marker
word turns the packed token list into a legacy plain list of n + 4 tokens, which is installed
over the n-token state.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import re
import struct
import weakref
from dataclasses import dataclass, field

from pcspec.core.errors import PcspecError
from pcspec.model import events as ev
from pcspec.model.config import Config, MemoryKind
from pcspec.model.events import Event
from pcspec.model.server import Server
from pcspec.model.slot_files import _peek_state_size  # what the restore passes as state_size
from pcspec.model.slotfile import SLOT_CKPT_MAX_COUNT, ReadStats, field_map, read_slot_file
from pcspec.properties.base import Events
from pcspec.properties.catalogue import get_property
from pcspec.properties.files import file1_round_trip_and_rejection
from pcspec.properties.judge import Judge
from pcspec.properties.state import state1_memory_matches_tokens
from tests.support.common import ALL

FILE = "f.bin"
VARIANTS = ("fixed", "baseline")
SETUPS: tuple[tuple[MemoryKind, bool], ...] = tuple((kind, draft) for kind in MemoryKind for draft in (False, True))
WITH_CHECKPOINTS = (MemoryKind.SWA, MemoryKind.RECURRENT, MemoryKind.HYBRID)
CKPT_META = ("n_tokens", "pos_min", "pos_max")
SCKP_V1 = b"SCKP\x01\x00\x00\x00"


def setup_name(kind: MemoryKind, draft: bool) -> str:
    return f"{kind}{'+draft' if draft else ''}"


def config(kind: MemoryKind, draft: bool) -> Config:
    return Config(
        n_slots=2,
        n_ctx_slot=256,
        n_batch=16,
        n_ubatch=4,
        memory=kind,
        n_swa=8,
        swa_cells=24,
        cell_bytes=8,
        rs_bytes=64,
        has_draft=draft,
        draft_memory=kind,
        draft_cell_bytes=4,
        draft_rs_bytes=32,
        spec_bytes=8 if draft else 0,
        n_ctx_checkpoints=3,
        checkpoint_min_step=4,
        cache_ram=0,
    )


@dataclass(frozen=True)
class Base:
    """A running server right after it saved slot 0 to ``f.bin``, and facts about the file."""

    name: str
    variant: str
    server: Server
    data: bytes
    fields: tuple[tuple[str, int, int], ...]  # (name, offset, width) of every integer field
    identity: frozenset[int]  # token words, and part_lo + token arrays of the state blob
    ckpt_identity: frozenset[int]  # part_lo + token arrays of the checkpoint blobs
    ckpt_meta: frozenset[int]  # n_tokens, pos_min, pos_max of every checkpoint record

    def fresh(self) -> Server:
        """A copy of the server, with a copy of its FILE-1 judge (which remembers what the
        server wrote: ``judge`` reads it)."""
        srv, file1 = copy.deepcopy((self.server, _JUDGES[self.server]))
        _JUDGES[srv] = file1
        return srv

    def field(self, name: str) -> tuple[int, int]:
        return next((off, width) for n, off, width in self.fields if n == name)


def blob_identity(data: bytes, at: int) -> set[int]:
    """The identity bytes of a state blob at ``at``, as ``slot_files.encode_content`` writes it:
    ``PCSY``, u32 length, u8 tag, then for a StateImage (tag 1) u8 kind, u8 scope, i32 part_lo and
    two i32-counted token arrays (-1: absent), for a speculative state (tag 2) one token array.
    The identity is part_lo and the arrays: what stands for the KV / recurrent data itself. (An
    image may end with the order of its SWA cells, an i32-counted array: layout, not identity;
    a value that is no order of the window does not read.)"""
    assert data[at : at + 4] == b"PCSY"
    (blob_len,) = struct.unpack_from("<I", data, at + 4)
    out: set[int] = set()
    tag, pos, arrays = data[at + 8], at + 9, 1
    if tag == 1:
        out.update(range(at + 11, at + 15))
        pos, arrays = at + 15, 2
    for _ in range(arrays):
        (n,) = struct.unpack_from("<i", data, pos)
        pos += 4 + 4 * max(n, 0)
        out.update(range(pos - 4 * max(n, 0), pos))
    if tag == 1 and pos < at + blob_len:
        (n,) = struct.unpack_from("<i", data, pos)
        pos += 4 + 4 * n
    assert pos == at + blob_len
    return out


def identity_bytes(data: bytes) -> tuple[frozenset[int], frozenset[int]]:
    """(the token words ``[12, 12 + 4 * n_token_count)`` and the state blob's identity bytes,
    the identity bytes of every checkpoint blob). A wrong but well-formed value there is a
    semantic corruption no reader can detect."""
    (n_words,) = struct.unpack_from("<I", data, 8)
    main = set(range(12, 12 + 4 * n_words)) | blob_identity(data, 12 + 4 * n_words)
    ckpts: set[int] = set()
    for rec in read_slot_file(data).checkpoint_offsets:
        pos = rec + 16
        for _ in range(3):  # data_tgt, data_dft, data_spec: u64 length + bytes
            (n,) = struct.unpack_from("<Q", data, pos)
            if n:
                ckpts |= blob_identity(data, pos + 8)
            pos += 8 + n
    return frozenset(main), frozenset(ckpts)


# server -> the FILE-1 judge watching it (the judge keeps what each file held when written)
_JUDGES: weakref.WeakKeyDictionary[Server, Judge] = weakref.WeakKeyDictionary()


@functools.cache
def build(kind: MemoryKind, draft: bool, variant: str) -> Base:
    srv = Server(config(kind, draft), ALL[variant])
    _JUDGES[srv] = Judge(srv, [get_property("FILE-1")])
    srv.request(tuple(range(1, 41)), spans=(0, 20), n_predict=3, id_slot=0)
    srv.run()
    turn = srv.slots[0].prompt.tokens
    srv.request(turn + tuple(range(100, 130)), spans=(0, 20, len(turn)), n_predict=3, id_slot=0)
    srv.run()
    srv.request(tuple(range(300, 330)), spans=(0,), n_predict=2, id_slot=1)
    srv.run()
    srv.slot_action("save", 0, FILE)
    data = srv.files[FILE]
    assert srv.crash is None and srv.last_result["n_written"] == len(data)
    assert len(srv.slots[0].prompt.checkpoints) == (3 if kind in WITH_CHECKPOINTS else 0)
    srv.heap.events.clear()  # history only (the model never reads it): keeps copies cheap
    fields = field_map(read_slot_file(data))
    blob_len_at = 12 + 4 * struct.unpack_from("<I", data, 8)[0] + 4
    meta = {
        i
        for name, off, width in fields
        if name.startswith("ckpt ") and name.split()[-1] in CKPT_META
        for i in range(off, off + width)
    }
    return Base(
        f"{setup_name(kind, draft)}/{variant}",
        variant,
        srv,
        data,
        (*fields, ("state blob length", blob_len_at, 4)),
        *identity_bytes(data),
        frozenset(meta),
    )


# -- mutations --------------------------------------------------------------------------------------


def special_values(width: int, original: int) -> list[int]:
    """The values a length or count field is set to: zero, one, the maximum, half of it, the
    original +-1, one over the appendix count cap, 2**40."""
    top = 2 ** (8 * width) - 1
    return sorted(
        {0, 1, top, top // 2, (original + 1) & top, (original - 1) & top, SLOT_CKPT_MAX_COUNT + 1, 2**40 & top}
    )


def set_field(data: bytes, off: int, width: int, value: int) -> bytes:
    buf = bytearray(data)
    struct.pack_into("<I" if width == 4 else "<Q", buf, off, value)
    return bytes(buf)


def touched(orig: bytes, data: bytes) -> set[int]:
    """Offsets of the original file whose byte changed or was cut off."""
    out = set(range(len(data), len(orig)))
    n = min(len(orig), len(data))
    for lo in range(0, n, 64):  # compare by chunks: a mutation changes a few bytes
        hi = min(lo + 64, n)
        if orig[lo:hi] != data[lo:hi]:
            out.update(i for i in range(lo, hi) if orig[i] != data[i])
    return out


# -- the judgement ------------------------------------------------------------------------------------


def restore(srv: Server, slot: int, data: bytes) -> list[Event]:
    """Put ``data`` on the server's disk as ``f.bin`` and restore it into ``slot``: its events."""
    srv.files[FILE] = data
    seen = len(srv.heap.events)
    srv.slot_action("restore", slot, FILE)
    return srv.heap.events[seen:]


def normalise(reason: str) -> str:
    """A rejection reason without its numbers and parenthesised details, for counting."""
    return re.sub(r"0x[0-9a-f]+|\d+", "N", re.sub(r" \((?:[^()]|\([^()]*\))*\)", "", reason))


@dataclass
class Outcome:
    kind: str  # "rejected" | "restored" | "crash"
    detail: str  # the rejection reason (normalised) or the appendix status
    problems: list[tuple[str, str]] = field(default_factory=list)  # (category, message)
    legacy_reading: bool = False  # baseline: a legacy token list installed over the state
    state1_judged: bool = False
    reader_alloc: int = 0
    heap_alloc: int = 0

    @property
    def messages(self) -> list[str]:
        return [m for _, m in self.problems]


def judge(base: Base, srv: Server, slot: int, data: bytes, events: list[Event]) -> Outcome:
    """Everything that must hold after restoring ``data`` (a mutation of ``base.data``)."""
    problems: list[tuple[str, str]] = []
    stats = ReadStats()
    packed: bool | None = None
    with contextlib.suppress(PcspecError):  # a rejection: the judgement below looks at the events
        packed = read_slot_file(
            data, FILE, srv.cfg.n_ctx_checkpoints, state_size=_peek_state_size(data), stats=stats
        ).packed
    heap_alloc = max((e.size for e in events if isinstance(e, ev.Alloc)), default=0)
    for who, n in (("the reader", stats.max_alloc), ("the model heap", heap_alloc)):
        if n > len(data):
            problems.append(("allocation > file size", f"{who} allocated {n} bytes for a file of {len(data)}"))
    history = _JUDGES[srv].history
    problems += [("FILE-1", m) for m in file1_round_trip_and_rejection(srv, Events(events, history))]
    history.done()
    out = Outcome("restored", "", problems, reader_alloc=stats.max_alloc, heap_alloc=heap_alloc)
    failed = [e for e in events if isinstance(e, ev.FileRestoreFailed)]
    done = [e for e in events if isinstance(e, ev.FileRestore)]
    s = srv.slots[slot]
    if srv.crash is not None:
        out.kind, out.detail = "crash", f"{srv.crash.where}: {srv.crash.message}"
        problems.append(("crash", f"the restore crashed the server: {out.detail}"))
    elif failed:
        out.kind, out.detail = "rejected", normalise(failed[0].reason)
        if s.prompt.tokens or any(not ctx.seqs[slot].is_state_of(()) for ctx in srv.contexts()):
            msg = f"rejected ({failed[0].reason}) but slot {slot} is not empty"
            problems.append(("inconsistent slot", msg))
    elif done:
        out.detail = done[0].appendix
        mem = srv.ctx_tgt.seqs[slot]
        if mem.n_tokens != len(s.prompt.tokens):
            if base.variant == "baseline" and packed is False:
                out.legacy_reading = True  # the C++ does not compare the token count with the state
            else:
                msg = f"the target memory holds {mem.n_tokens} tokens, the slot {len(s.prompt.tokens)}"
                problems.append(("inconsistent slot", msg))
        if base.variant == "fixed" and not touched(base.data, data) & base.identity:
            out.state1_judged = True
            problems += [("STATE-1", m) for m in state1_memory_matches_tokens(srv, events)]
    else:
        problems.append(("other", "the restore neither succeeded nor failed"))
    return out
