"""Byte-exact llama-server slot files (``POST /slots/{id}?action=save|restore``).

A slot file is what ``llama_state_seq_save_file`` writes, optionally followed by the context
checkpoint appendix of PR #26004 (as b11549 writes and reads it, and #30137's merged diff after
it). All integers are little-endian.

=========  ======================================================================================
offset     field
=========  ======================================================================================
0          u32 magic ``LLAMA_STATE_SEQ_MAGIC`` = 0x67677371 ('ggsq'; on disk the bytes ``qsgg``)
4          u32 state-sequence version (``state_versions``: 3 in the October tree, 4 in b11434, b11549)
8          u32 ``n_token_count``: the number of 32-bit words that follow
12         the words: the packed ``server_tokens`` form (``-1`` marker, version 1, ``n``, the ``n``
           tokens, a media count, zero-padded to whole words) or a legacy plain token list
12+4w      the sequence state: the memory's ``state_write`` output (``pcspec.codec.layout``), NO length prefix
...        optional appendix: u32 0x504b4353 ('SCKP'), u32 version 1, u32 count, then per
           checkpoint i64 n_tokens, i32 pos_min, i32 pos_max and three blobs (u64 length + bytes):
           data_tgt, data_dft, data_spec
=========  ======================================================================================

The real file ``tests/data/real/mamba-a.bin`` (21960 bytes, recurrent model, version 3) is:
magic at 0, version 3 at 4, 606 words at 8; the packed tokens at 12 (marker -1 at 12, version 1
at 16, n = 602 at 20, tokens at 24..2431, media count 0 at 2432); the state at 2436..21959 (19524
bytes: cell_count 1, one cell at pos 601, s_trans 0, n_layer 2, two conv rows of 1536 bytes and two
ssm rows of 8192 bytes, each behind an i32 type and a u64 row size). No appendix.

Where the state ends. The file stores no state length: ``llama_state_seq_load_file`` hands the
file to the memory's ``state_read`` (KV cache, iSWA, recurrent, hybrid: each its own layout, and
the layout changes with the state-sequence version), which consumes exactly what it needs, and
returns ``file.tell()``; PR #26004 reads the appendix from there. This module is independent of
any memory layout (the codec, ``pcspec.codec``, knows them), so it delimits the state in
one of two ways:

* ``state_size`` given (what the target context's ``state_read`` consumes: the model knows it
  for the files it writes, ``pcspec.codec.reader.parse_state`` finds it in a llama.cpp state): exact,
  the C++ behaviour. The appendix is read at that offset.
* ``state_size`` not given: a scan. See ``_locate_appendix`` for the rules and their limits.

Versions (``state_versions``). A restore takes only its own build's version:
``llama_state_seq_load_file`` refuses any other and the server answers "No available space in KV
cache or invalid slot save file" and clears the slot. ``read_slot_file(expected_version=...)`` is
that reader; without it every known version is read, as an inspector does.

Errors in the mandatory part (header, tokens, state) make the restore fail in the server; here
they raise ``PcspecError`` naming the byte offset. Problems in the appendix never fail the read:
the server ignores the whole appendix and still restores tokens and state, so the result carries
an ``appendix_status`` and a reason instead.

The reader never allocates from an unchecked length: every bytes object or list it derives from
a length field goes through ``_Cursor.take``/``_Cursor.words``, which compare the length with the
bytes left *before* slicing (as ``ckpt_read_buf`` and ``server_tokens_state_reader::read_vector``
do in the C++). ``ReadStats`` records the largest such allocation so tests can show the bound.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pcspec.model.errors import PcspecError
from pcspec.model.state_versions import STATE_SEQ_VERSION_DEFAULT, STATE_SEQ_VERSIONS, refusal

# include/llama.h:43, 48: LLAMA_FILE_MAGIC_GGSQ / LLAMA_STATE_SEQ_MAGIC. Checked against the first four
# bytes of the real file (b"qsgg" read little-endian).
LLAMA_STATE_SEQ_MAGIC = 0x67677371
# include/llama.h: LLAMA_TOKEN_NULL, the first word of the packed server_tokens form.
LLAMA_TOKEN_NULL = -1
# server-common.cpp: SERVER_TOKENS_STATE_VERSION
SERVER_TOKENS_STATE_VERSION = 1
# server-context.cpp:2588-2589 of b11549: SLOT_CKPT_MAGIC ("SCKP" on disk) and SLOT_CKPT_VERSION
SLOT_CKPT_MAGIC = 0x504B4353
SLOT_CKPT_MAGIC_BYTES = struct.pack("<I", SLOT_CKPT_MAGIC)
SLOT_CKPT_VERSION = 1
# A cap on the appendix count. The server writes at most n_ctx_checkpoints records (default 32,
# --ctx-checkpoints); a count above 1024 is taken as a corrupted field and the appendix is invalid.
# The cap is pcspec's: b11549 has none (server-context.cpp:2678 of b11549 reads any count, and a
# file of more than 1024 records restores there; the model writes at most n_ctx_checkpoints <= 1024,
# config.py), nor has #30137's merged diff; a public port of #26004's reader has this one. It is
# not what keeps allocation bounded (every blob length is checked against the bytes
# left, and each record consumes at least RECORD_MIN_BYTES), it bounds the work a corrupted
# count can cause and gives a precise reason ("count over the cap") instead of a late "truncated".
SLOT_CKPT_MAX_COUNT = 1024

HEADER_BYTES = 12  # magic, version, n_token_count
APPENDIX_HEADER_BYTES = 12  # magic, version, count
RECORD_FIXED_BYTES = 16  # i64 n_tokens, i32 pos_min, i32 pos_max (struct '<qii')
# The fixed part, three u64 lengths and a non-empty data_tgt.
RECORD_MIN_BYTES = RECORD_FIXED_BYTES + 3 * 8 + 1
# Every memory's state_write starts with a u32 count (n_stream for the KV cache, cell_count for
# the recurrent memory), so a state shorter than 4 bytes cannot be read back: state_read throws
# "unexpectedly reached end of buffer" and llama_state_seq_load_file returns 0.
MIN_STATE_BYTES = 4

_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_U32_MAX = 2**32 - 1

AppendixStatus = Literal["absent", "valid", "truncated", "invalid"]
StateLocation = Literal["exact", "scan"]


@dataclass(frozen=True)
class FileCheckpoint:
    """One appendix record (common.h: common_prompt_checkpoint, without ``id_task``).

    ``id_task`` is not on disk: the reader in server-context.cpp sets it to -1 on every restored
    checkpoint, which is how the restore path later recognises "came from a file".
    """

    n_tokens: int
    pos_min: int
    pos_max: int
    data_tgt: bytes
    data_dft: bytes
    data_spec: bytes

    def size(self) -> int:
        # common.h: common_prompt_checkpoint::size
        return len(self.data_tgt) + len(self.data_dft) + len(self.data_spec)


@dataclass(frozen=True)
class SlotFile:
    """A parsed slot file.

    ``checkpoints`` is None unless the appendix is valid: an absent appendix and an ignored one
    (truncated, invalid) both restore no checkpoints. The byte counts always partition the file:
    ``header_bytes + tokens_bytes + state_bytes + appendix_bytes + trailing_bytes ==
    total_bytes``, where ``appendix_bytes`` is what a valid appendix consumed, or for a damaged one
    the span from its magic to the end of the file, and ``trailing_bytes`` is what follows a valid
    appendix (or, with an exact ``state_size`` and no appendix, follows the state) unread.
    """

    state_version: int
    tokens: list[int]
    packed: bool
    state: bytes
    checkpoints: list[FileCheckpoint] | None
    appendix_status: AppendixStatus
    appendix_reason: str | None
    header_bytes: int
    tokens_bytes: int
    state_bytes: int
    appendix_bytes: int
    total_bytes: int
    trailing_bytes: int = 0
    # Bytes the restore consumed: header, tokens, state and a valid appendix. Equals total_bytes
    # for a well-formed file.
    n_read: int = 0
    # The appendix count field as stored, before the n_ctx_checkpoints cap; None without one.
    appendix_count: int | None = None
    # File offset of each returned checkpoint record (parallel to ``checkpoints``).
    checkpoint_offsets: list[int] = field(default_factory=list)
    # How the end of the state was found: "exact" (state_size given) or "scan".
    state_located: StateLocation = "scan"

    @property
    def tokens_offset(self) -> int:
        return self.header_bytes

    @property
    def state_offset(self) -> int:
        return self.header_bytes + self.tokens_bytes

    @property
    def appendix_offset(self) -> int | None:
        if self.appendix_status == "absent":
            return None
        return self.state_offset + self.state_bytes


@dataclass
class ReadStats:
    """Allocation record of one read: the largest bytes/list the reader derived from a length."""

    max_alloc: int = 0

    def note(self, n_bytes: int) -> None:
        self.max_alloc = max(self.max_alloc, n_bytes)


class _Short(Exception):
    """Internal: a read ran past the end of the region (never escapes this module)."""

    def __init__(self, offset: int, what: str, need: int, have: int) -> None:
        super().__init__(f"{what} at byte {offset}: needs {need} bytes, {have} left")
        self.offset = offset
        self.what = what
        self.need = need
        self.have = have


class _Cursor:
    """Bounds-checked little-endian reads over ``data[pos:end]``.

    Every read checks the bytes left first, so a corrupted length can neither index past the end
    nor make a large allocation; ``take`` and ``words`` are the only places that create objects
    sized by a length read from the file.
    """

    __slots__ = ("data", "end", "pos", "stats")

    def __init__(self, data: bytes, pos: int, end: int, stats: ReadStats | None) -> None:
        self.data = data
        self.pos = pos
        self.end = end
        self.stats = stats

    @property
    def left(self) -> int:
        return self.end - self.pos

    def _need(self, n: int, what: str) -> int:
        if n > self.left:
            raise _Short(self.pos, what, n, self.left)
        at = self.pos
        self.pos += n
        return at

    def _int(self, fmt: str, what: str) -> int:
        value: int = struct.unpack_from(fmt, self.data, self._need(struct.calcsize(fmt), what))[0]
        return value

    def u32(self, what: str) -> int:
        return self._int("<I", what)

    def i32(self, what: str) -> int:
        return self._int("<i", what)

    def u64(self, what: str) -> int:
        return self._int("<Q", what)

    def i64(self, what: str) -> int:
        return self._int("<q", what)

    def skip(self, n: int, what: str) -> None:
        self._need(n, what)

    def take(self, n: int, what: str) -> bytes:
        at = self._need(n, what)  # checked before the slice allocates
        if self.stats is not None:
            self.stats.note(n)
        return self.data[at : at + n]

    def words(self, n: int, what: str) -> list[int]:
        at = self._need(4 * n, what)  # checked before unpacking n words
        if self.stats is not None:
            self.stats.note(4 * n)
        return list(struct.unpack_from(f"<{n}i", self.data, at))


def _error(path: str, offset: int, why: str) -> PcspecError:
    return PcspecError(why, where=f"{path}: byte {offset}")


# ---------------------------------------------------------------------------------------------
# tokens
# ---------------------------------------------------------------------------------------------


def encode_tokens(tokens: Sequence[int], packed: bool = True) -> bytes:
    """The token words as the server writes them.

    ``packed``: server-common.cpp: server_tokens::serialize -- marker, version, a u32-counted token
    vector, a u32-counted media-key vector (always empty here), zero-padded to whole 4-byte words
    (``server_tokens_state_writer::take``; without media everything is already whole words, so the
    padding is empty). Otherwise the legacy plain list older servers wrote.
    """
    for i, t in enumerate(tokens):
        # Tokens reach a slot only after server_tokens::validate (0 <= t < n_vocab) and
        # push_back (t != LLAMA_TOKEN_NULL), so a negative token here is a caller bug; it would
        # also make a legacy list starting with -1 read back as the packed form.
        if not 0 <= t <= _I32_MAX:
            raise PcspecError(f"token {t} at index {i} is not a valid token id (0..{_I32_MAX})")
    body = struct.pack(f"<{len(tokens)}i", *tokens)
    if not packed:
        return body
    if len(tokens) > _U32_MAX:  # server_tokens_state_u32: "Server tokens state is too large"
        raise PcspecError("Server tokens state is too large")
    out = (
        struct.pack("<iII", LLAMA_TOKEN_NULL, SERVER_TOKENS_STATE_VERSION, len(tokens))
        + body
        + struct.pack("<I", 0)  # media keys: none (no mmproj)
    )
    return out + b"\0" * (-len(out) % 4)


def _decode_tokens(words: list[int], path: str, base: int) -> tuple[list[int], bool]:
    """server-common.cpp: server_tokens::deserialize, for a server without an mmproj.

    ``base`` is the file offset of ``words[0]``; errors name the offset of the offending word.
    Returns (tokens, packed).
    """

    def at(i: int) -> int:
        return base + 4 * i

    if not words or words[0] != LLAMA_TOKEN_NULL:
        # "plain token list, as written by older versions"
        _check_token_ids(words, 0, path, base)
        return words, False
    n_words = len(words)
    if n_words < 2:
        raise _error(path, at(1), "Unexpected end of server tokens state (no version word)")
    version = words[1] & _U32_MAX
    if version != SERVER_TOKENS_STATE_VERSION:
        raise _error(
            path,
            at(1),
            f"Unsupported server tokens state version {version} (expected {SERVER_TOKENS_STATE_VERSION})",
        )
    if n_words < 3:
        raise _error(path, at(2), "Unexpected end of server tokens state (no token count)")
    n = words[2] & _U32_MAX
    # read_vector: "reject before resizing, so that a small corrupted payload cannot request a
    # huge allocation"; here the words are already in memory, the check keeps the slice honest.
    if n > n_words - 3:
        raise _error(
            path,
            at(2),
            f"Unexpected end of server tokens state: token count {n} but only {n_words - 3} word(s) left",
        )
    tokens = words[3 : 3 + n]
    i_media = 3 + n
    if i_media >= n_words:
        raise _error(path, at(i_media), "Unexpected end of server tokens state (no media count)")
    n_media = words[i_media] & _U32_MAX
    if n_media != 0:
        # "Cannot restore media tokens without an mmproj": this spec models text-only slots.
        raise _error(
            path,
            at(i_media),
            f"media list of {n_media} item(s): media tokens are not supported "
            "(Cannot restore media tokens without an mmproj)",
        )
    if i_media + 1 < n_words:
        raise _error(
            path,
            at(i_media + 1),
            f"Trailing data in server tokens state ({n_words - i_media - 1} word(s))",
        )
    _check_token_ids(tokens, 3, path, base)
    return tokens, True


def _check_token_ids(tokens: list[int], first_word: int, path: str, base: int) -> None:
    # server-common.cpp: server_tokens::validate -- a restore with a negative token (including a
    # stray LLAMA_TOKEN_NULL without its media chunk) fails with "Invalid tokens in slot save
    # file". The upper bound (n_vocab) belongs to the model, which knows its vocabulary.
    for i, t in enumerate(tokens):
        if t < 0:
            raise _error(
                path,
                base + 4 * (first_word + i),
                f"Invalid tokens in slot save file: token {t} at index {i}",
            )


# ---------------------------------------------------------------------------------------------
# appendix
# ---------------------------------------------------------------------------------------------


def encode_appendix(checkpoints: Sequence[FileCheckpoint]) -> bytes:
    """server-context.cpp:2623-2655 of b11549: save_slot_checkpoints (#26004), appended to the
    state (``std::ios::app``, 2628): magic, version, count, then per checkpoint n_tokens, pos_min,
    pos_max and the three length-prefixed blobs (``ckpt_write_buf``, 2614-2620).

    Nothing at all for an empty list (2625-2627). Like the C++ it writes what it is given: a checkpoint with an empty
    ``data_tgt``, or more than ``SLOT_CKPT_MAX_COUNT`` records, is written and then makes the
    appendix read back as invalid -- the model is meant to find that, not to have it hidden.
    """
    if not checkpoints:
        return b""
    if len(checkpoints) > _U32_MAX:
        raise PcspecError(f"{len(checkpoints)} checkpoints do not fit the u32 count")
    parts = [struct.pack("<III", SLOT_CKPT_MAGIC, SLOT_CKPT_VERSION, len(checkpoints))]
    for i, c in enumerate(checkpoints):
        if not _I64_MIN <= c.n_tokens <= _I64_MAX:
            raise PcspecError(f"checkpoint {i}: n_tokens {c.n_tokens} does not fit an int64")
        for name, pos in (("pos_min", c.pos_min), ("pos_max", c.pos_max)):
            if not _I32_MIN <= pos <= _I32_MAX:
                raise PcspecError(f"checkpoint {i}: {name} {pos} does not fit a llama_pos")
        parts.append(struct.pack("<qii", c.n_tokens, c.pos_min, c.pos_max))
        for blob in (c.data_tgt, c.data_dft, c.data_spec):  # ckpt_write_buf, in this order
            parts.append(struct.pack("<Q", len(blob)))
            parts.append(bytes(blob))
    return b"".join(parts)


@dataclass
class _Appendix:
    status: AppendixStatus  # never "absent": the magic was there
    reason: str | None
    end: int  # one past the last byte a valid appendix consumed
    count: int | None
    checkpoints: list[FileCheckpoint]
    offsets: list[int]


def _parse_appendix(
    data: bytes,
    start: int,
    stats: ReadStats | None,
    n_ctx_checkpoints: int | None,
    materialize: bool,
) -> _Appendix:
    """server-context.cpp:2658-2714 of b11549: load_slot_checkpoints (#26004).

    ``data[start:start+4]`` must be the magic (a wrong or missing one is no appendix, silently:
    2669-2671). Reads up to the end of ``data``. With ``materialize`` False only the structure is
    checked (used while scanning, so trying a candidate copies no blob). Checks, in b11549's
    order: the version, and a version or count cut short (invalid: "invalid context checkpoint
    appendix", 2672-2676); the count over pcspec's cap (invalid; b11549 has no cap); each
    record's fixed part and blob lengths, every length against the bytes left *before* anything
    is allocated (``ckpt_read_buf``, 2599-2607; short: truncated, "truncated context checkpoint
    appendix", 2681-2689); an empty data_tgt (invalid, 2690-2694). Any problem discards the whole
    appendix (``return 0``). Restored records keep the last ``n_ctx_checkpoints`` (``pop_front``,
    2695-2698) and get ``id_task = -1`` (2680, ``FileCheckpoint``). The statuses only change the
    log line: the restore keeps tokens and state either way.
    """
    cur = _Cursor(data, start + 4, len(data), stats)
    count: int | None = None
    kept: deque[tuple[int, FileCheckpoint]] = deque()
    try:
        version = cur.u32("appendix version")
        if version != SLOT_CKPT_VERSION:
            return _Appendix(
                "invalid",
                f"appendix version {version} at byte {start + 4} (expected {SLOT_CKPT_VERSION})",
                start,
                None,
                [],
                [],
            )
        count = cur.u32("appendix count")
    except _Short as short:  # a cut header: b11549 logs it as invalid, as a bad version (2672-2676)
        return _Appendix("invalid", f"appendix cut short: {short}", start, None, [], [])
    try:
        if count > SLOT_CKPT_MAX_COUNT:
            return _Appendix(
                "invalid",
                f"appendix count {count} at byte {start + 8} over the cap {SLOT_CKPT_MAX_COUNT}",
                start,
                count,
                [],
                [],
            )
        for i in range(count):
            rec = cur.pos
            n_tokens = cur.i64(f"checkpoint {i} n_tokens")
            pos_min = cur.i32(f"checkpoint {i} pos_min")
            pos_max = cur.i32(f"checkpoint {i} pos_max")
            blobs: list[bytes] = []
            empty_tgt = False
            for name in ("data_tgt", "data_dft", "data_spec"):
                # ckpt_read_buf: "check the size against the bytes left in the file before
                # allocating, the size field may be corrupted"
                n = cur.u64(f"checkpoint {i} {name} length")
                if n > cur.left:
                    return _Appendix(
                        "truncated",
                        f"checkpoint {i} (record at byte {rec}): {name} length {n} at byte "
                        f"{cur.pos - 8} exceeds the {cur.left} bytes left",
                        start,
                        count,
                        [],
                        [],
                    )
                if name == "data_tgt":
                    empty_tgt = n == 0
                if materialize:
                    blobs.append(cur.take(n, f"checkpoint {i} {name}"))
                else:
                    cur.skip(n, f"checkpoint {i} {name}")
            # common_prompt_checkpoint::empty(): a checkpoint without target data restores
            # nothing, so the reader rejects it (and with it the whole appendix).
            if empty_tgt:
                return _Appendix(
                    "invalid",
                    f"checkpoint {i} (record at byte {rec}) has an empty data_tgt",
                    start,
                    count,
                    [],
                    [],
                )
            if materialize:
                kept.append((rec, FileCheckpoint(n_tokens, pos_min, pos_max, blobs[0], blobs[1], blobs[2])))
                # push_back, then pop_front while over the cap -- the C++ keeps the *last*
                # n_ctx_checkpoints. (size_t) of a negative cap is huge: no cap at all.
                if n_ctx_checkpoints is not None and 0 <= n_ctx_checkpoints < len(kept):
                    kept.popleft()
    except _Short as short:
        return _Appendix("truncated", f"appendix cut short: {short}", start, count, [], [])
    return _Appendix("valid", None, cur.pos, count, [c for _, c in kept], [off for off, _ in kept])


def cap_checkpoints(checkpoints: Sequence[FileCheckpoint], n_ctx_checkpoints: int) -> list[FileCheckpoint]:
    """The last ``n_ctx_checkpoints`` of ``checkpoints``, as the restore keeps them.

    server-context.cpp: slot restore -- ``checkpoints.push_back(...)`` then ``pop_front()`` while
    the list is longer than ``(size_t) params_base.n_ctx_checkpoints``. A cap of 0 keeps nothing;
    a negative cap converts to a huge size_t and keeps everything.
    """
    kept: deque[FileCheckpoint] = deque()
    for c in checkpoints:
        kept.append(c)
        if 0 <= n_ctx_checkpoints < len(kept):
            kept.popleft()
    return list(kept)


def _locate_appendix(data: bytes, state_start: int, stats: ReadStats | None) -> tuple[int, _Appendix] | None:
    """Find the appendix when the state length is unknown (see the module docstring).

    Candidates are the offsets ``p >= state_start + MIN_STATE_BYTES`` holding the bytes "SCKP".
    The rules, in order:

    1. the earliest candidate whose bytes parse as a *valid* appendix ending exactly at EOF: the
       ordinary case, and the only one the scan is sure of;
    2. else the earliest candidate followed by version 1 (8 matching bytes): a damaged appendix
       (truncated, invalid, or valid with junk after it), reported with its status and reason;
    3. else the earliest candidate at all: an appendix whose version field is damaged or cut.
    4. no candidate: no appendix; the state runs to EOF.

    Limits. The state is opaque, so it may itself contain "SCKP". Rule 1 is then still right
    unless the state's tail happens to form a complete appendix ending at EOF (needs at least 12
    specific bytes). Rules 2 and 3 only apply when no candidate is valid, i.e. to files without an
    appendix or with a damaged one; there a chance "SCKP" in the state (rule 3, about one in 2**32
    per state byte) or "SCKP"+version 1 (rule 2, one in 2**64) is taken for a damaged appendix and
    the state is reported short. The server, which parses the state, does not make that mistake.
    Callers that know the state size pass ``state_size`` and get the exact behaviour. The scan
    tries every candidate structurally (no copies), so it is linear in the file for ordinary files
    but quadratic in the worst case (a file made of thousands of appendix headers).
    """
    first = state_start + MIN_STATE_BYTES
    candidates: list[int] = []
    p = data.find(SLOT_CKPT_MAGIC_BYTES, first)
    while p != -1:
        candidates.append(p)
        p = data.find(SLOT_CKPT_MAGIC_BYTES, p + 1)
    if not candidates:
        return None
    for p in candidates:
        trial = _parse_appendix(data, p, None, None, materialize=False)
        if trial.status == "valid" and trial.end == len(data):
            return p, trial
    version_1 = struct.pack("<I", SLOT_CKPT_VERSION)
    for p in candidates:
        if data[p + 4 : p + 8] == version_1:
            return p, _parse_appendix(data, p, None, None, materialize=False)
    p = candidates[0]
    return p, _parse_appendix(data, p, None, None, materialize=False)


# ---------------------------------------------------------------------------------------------
# whole files
# ---------------------------------------------------------------------------------------------


def write_slot_file(
    tokens: Sequence[int],
    state: bytes,
    checkpoints: Sequence[FileCheckpoint] = (),
    *,
    state_version: int = STATE_SEQ_VERSION_DEFAULT,
    packed: bool = True,
    unwritten: Sequence[str] = (),
    path: str = "<bytes>",
) -> bytes:
    """The bytes of a slot file; the server's ``n_written`` is their length.

    llama-context.cpp:3377-3395 (October; 3380 of b11434, 3467 of b11549): llama_state_seq_save_file
    (header with ``state_version``, the token words, the state) followed by ``encode_appendix`` when
    there are checkpoints (a save whose appendix fails half way answers "Unable to save slot:
    incomplete context checkpoints" and leaves the partial file, server-context.cpp:2926-2929 of
    b11549). ``state`` is the sequence state exactly as the target context's ``state_write``
    produced it (``pcspec.codec.layout.encode_state`` writes one of a given version). ``unwritten``
    names buffers (state, checkpoint payloads) that hold bytes never written: no unwritten
    byte may ever be written to a slot file, so any name there
    makes the write refuse instead of producing a file.
    """
    if unwritten:
        raise PcspecError(
            "refusing to write a slot file from buffer(s) with unwritten bytes: " + ", ".join(unwritten),
            where=path,
        )
    if state_version not in STATE_SEQ_VERSIONS:
        raise PcspecError(
            f"unsupported state-sequence version {state_version} "
            f"(supported: {', '.join(map(str, STATE_SEQ_VERSIONS))})",
            where=path,
        )
    if len(state) < MIN_STATE_BYTES:
        raise PcspecError(
            f"state of {len(state)} bytes: every memory's state_write writes at least a u32 "
            "count, and a shorter state cannot be restored",
            where=path,
        )
    words = encode_tokens(tokens, packed)
    n_words = len(words) // 4
    if n_words > _U32_MAX:
        raise PcspecError(f"{n_words} token words do not fit the u32 n_token_count", where=path)
    header = struct.pack("<III", LLAMA_STATE_SEQ_MAGIC, state_version, n_words)
    return header + words + bytes(state) + encode_appendix(checkpoints)


def field_map(f: SlotFile) -> list[tuple[str, int, int]]:
    """(name, offset, width) of every integer field of a parsed file, in file order.

    Meant for corruption injection (fault models, fuzzing): each entry is a place where a wrong
    value is a corruption the format can detect, or at least reacts to. Records dropped by an
    ``n_ctx_checkpoints`` cap have no offsets, so map a file read without the cap.
    """
    fields = [("magic", 0, 4), ("state version", 4, 4), ("n_token_count", 8, 4)]
    if f.packed:
        n = len(f.tokens)
        fields += [
            ("tokens marker", 12, 4),
            ("tokens version", 16, 4),
            ("tokens count", 20, 4),
            ("media count", 24 + 4 * n, 4),
        ]
    start = f.appendix_offset
    if start is None:
        return fields
    fields.append(("appendix magic", start, 4))
    if f.appendix_count is None:
        if f.appendix_status == "invalid" and start + 8 <= f.total_bytes:  # the version was read
            fields.append(("appendix version", start + 4, 4))
        return fields
    fields += [("appendix version", start + 4, 4), ("appendix count", start + 8, 4)]
    for i, (rec, c) in enumerate(zip(f.checkpoint_offsets, f.checkpoints or [], strict=True)):
        fields += [(f"ckpt {i} n_tokens", rec, 8), (f"ckpt {i} pos_min", rec + 8, 4)]
        fields += [(f"ckpt {i} pos_max", rec + 12, 4)]
        at = rec + RECORD_FIXED_BYTES
        for name, blob in (("data_tgt", c.data_tgt), ("data_dft", c.data_dft)):
            fields.append((f"ckpt {i} {name} length", at, 8))
            at += 8 + len(blob)
        fields.append((f"ckpt {i} data_spec length", at, 8))
    return fields


@dataclass(frozen=True)
class Head:
    """What precedes the state: the header and the token words."""

    state_version: int
    tokens: list[int]
    packed: bool
    tokens_bytes: int

    @property
    def state_offset(self) -> int:
        return HEADER_BYTES + self.tokens_bytes


def read_head(
    data: bytes,
    path: str = "<bytes>",
    *,
    stats: ReadStats | None = None,
    expected_version: int | None = None,
) -> Head:
    """The header and the tokens, as ``llama_state_seq_load_file`` reads them (magic, version,
    the token count checked against the file size as the probe does, the words) and
    server-common.cpp: server_tokens::deserialize decodes them. ``expected_version`` is the
    reading build's ``LLAMA_STATE_SEQ_VERSION``: another is refused as that build refuses it
    (``state_versions.refusal``); None reads every known version, as an inspector does."""
    total = len(data)
    head = _Cursor(data, 0, total, stats)
    try:
        magic = head.u32("magic")
    except _Short:
        raise _error(path, 0, f"file of {total} bytes is too short for the magic") from None
    if magic != LLAMA_STATE_SEQ_MAGIC:
        raise _error(
            path,
            0,
            f"bad magic 0x{magic:08x} (expected 0x{LLAMA_STATE_SEQ_MAGIC:08x} 'ggsq'): not a slot file",
        )
    try:
        version = head.u32("state-sequence version")
    except _Short:
        raise _error(path, 4, "file ends inside the state-sequence version") from None
    if expected_version is not None and version != expected_version:
        raise _error(path, 4, refusal(magic, version, expected_version))
    if version not in STATE_SEQ_VERSIONS:
        raise _error(
            path,
            4,
            f"unsupported state-sequence version {version} (known: {', '.join(map(str, STATE_SEQ_VERSIONS))})",
        )
    try:
        n_words = head.u32("token count")
    except _Short:
        raise _error(path, 8, "file ends inside the token count") from None
    # llama_state_seq_load_file, probe mode: "token count in sequence state file exceeded
    # capacity" -- the capacity being what the file can hold. Checked before reading the words.
    if 4 * n_words > head.left:
        raise _error(
            path,
            8,
            f"token count {n_words} ({4 * n_words} bytes) exceeds the {head.left} bytes left in the file",
        )
    words = head.words(n_words, "token words")
    tokens, packed = _decode_tokens(words, path, HEADER_BYTES)
    return Head(version, tokens, packed, 4 * n_words)


def read_slot_file(
    data: bytes,
    path: str = "<bytes>",
    n_ctx_checkpoints: int | None = None,
    *,
    state_size: int | None = None,
    stats: ReadStats | None = None,
    expected_version: int | None = None,
) -> SlotFile:
    """Parse a slot file the way a restore does.

    ``read_head`` (llama-context.cpp: llama_state_seq_load_file's header and tokens,
    server-common.cpp: server_tokens::deserialize), then the state and the checkpoint appendix
    (server-context.cpp:2658-2714 of b11549: load_slot_checkpoints).

    ``n_ctx_checkpoints`` keeps only the last that many checkpoints (None: all). ``state_size``
    is the number of bytes the target context's ``state_read`` consumes; without it the state's
    end is found by ``_locate_appendix``. ``stats`` collects the allocation record.
    ``expected_version``: see ``read_head``.

    Raises ``PcspecError`` (with the byte offset) when tokens and state cannot be restored;
    problems in the appendix are reported in the result instead.
    """
    data = bytes(data)  # a bytearray or memoryview would leak into the (hashable) records
    total = len(data)
    got = read_head(data, path, stats=stats, expected_version=expected_version)
    version, tokens, packed, state_start = got.state_version, got.tokens, got.packed, got.state_offset
    n_words = got.tokens_bytes // 4

    appendix: _Appendix | None
    located: StateLocation
    if state_size is not None:
        located = "exact"
        if state_size < MIN_STATE_BYTES:
            raise _error(
                path,
                state_start,
                f"state_size {state_size}: a state is at least {MIN_STATE_BYTES} bytes",
            )
        if state_size > total - state_start:
            raise _error(
                path,
                state_start,
                f"state of {state_size} bytes runs past the end of the file ({total - state_start} bytes left)",
            )
        state_end = state_start + state_size
        # The appendix reader first reads the magic; anything else (or nothing) is "no appendix".
        if data[state_end : state_end + 4] == SLOT_CKPT_MAGIC_BYTES:
            appendix = _parse_appendix(data, state_end, stats, n_ctx_checkpoints, True)
        else:
            appendix = None
    else:
        located = "scan"
        if total - state_start < MIN_STATE_BYTES:
            raise _error(
                path,
                state_start,
                f"{total - state_start} bytes of state after the tokens: a state is at least "
                f"{MIN_STATE_BYTES} bytes (llama_state_seq_load_file would fail to restore it)",
            )
        found = _locate_appendix(data, state_start, stats)
        if found is None:
            state_end = total
            appendix = None
        else:
            state_end, trial = found
            # Only the chosen candidate is read for real (blobs copied, cap applied).
            appendix = (
                _parse_appendix(data, state_end, stats, n_ctx_checkpoints, True) if trial.status == "valid" else trial
            )

    state = data[state_start:state_end]
    if stats is not None:
        stats.note(len(state))

    checkpoints: list[FileCheckpoint] | None = None
    offsets: list[int] = []
    count: int | None = None
    status: AppendixStatus
    reason: str | None
    if appendix is None:
        status = "absent"
        appendix_end = state_end
        reason = (
            None
            if appendix_end == total
            else f"no appendix magic at byte {state_end}; {total - state_end} byte(s) after the state are not read"
        )
        n_read = state_end
    elif appendix.status != "valid":
        # The whole appendix is ignored; the restore still succeeds, without checkpoints, and
        # reports the bytes up to the end of the state.
        status, reason, count = appendix.status, appendix.reason, appendix.count
        appendix_end = total
        n_read = state_end
    else:
        status, count = "valid", appendix.count
        checkpoints, offsets = appendix.checkpoints, appendix.offsets
        appendix_end = appendix.end
        # The C++ returns after the last record without looking further: junk after a valid
        # appendix is silently ignored. It stays valid; the junk is reported, not fatal.
        reason = (
            None
            if appendix_end == total
            else f"{total - appendix_end} byte(s) after the appendix end (byte {appendix_end}) are not read"
        )
        n_read = appendix_end
    return SlotFile(
        state_version=version,
        tokens=tokens,
        packed=packed,
        state=state,
        checkpoints=checkpoints,
        appendix_status=status,
        appendix_reason=reason,
        header_bytes=HEADER_BYTES,
        tokens_bytes=4 * n_words,
        state_bytes=state_end - state_start,
        appendix_bytes=appendix_end - state_end,
        total_bytes=total,
        trailing_bytes=total - appendix_end,
        n_read=n_read,
        appendix_count=count,
        checkpoint_offsets=offsets,
        state_located=located,
    )
