"""The slot file format (pcspec.model.slotfile): the real file, round trips, each corruption."""

from __future__ import annotations

import dataclasses
import json
import os
import struct
from pathlib import Path

import pytest

from pcspec.cli import main
from pcspec.core.errors import PcspecError
from pcspec.model.slotfile import (
    SLOT_CKPT_MAX_COUNT,
    FileCheckpoint,
    ReadStats,
    SlotFile,
    cap_checkpoints,
    encode_appendix,
    field_map,
    read_slot_file,
    write_slot_file,
)
from tests.support.paths import DATA
from tests.support.state_builders import encoded, kv_part, kv_stream

REAL_DIR = Path(os.environ.get("PCSPEC_REAL_SLOTFILES", DATA / "real"))
U64_MAX = 2**64 - 1

CKPTS = [
    FileCheckpoint(4, 0, 3, b"tgt-one", b"", b""),
    FileCheckpoint(9, 2, 8, b"tgt-two!", b"draft", b""),
    FileCheckpoint(12, 5, 11, b"t3", b"", b"spec-bytes"),
    FileCheckpoint(15, 9, 14, b"t", b"d", b"s"),
]
TOKENS = [1, 2, 3, 4, 5]
STATE = b"STATE-BLOB\x00\x01"  # opaque: the reader of this module does not parse states
# A KV cache's state of the five tokens (pcspec.codec.layout), for `inspect`, which parses the state.
KV_STATE = encoded("kv", 3, kv_part("kv", kv_stream(5, n_layer=1, row_bytes=4)))


def small() -> bytes:
    return write_slot_file(TOKENS, STATE, CKPTS[:2])


def fields(data: bytes) -> dict[str, tuple[int, int]]:
    return {name: (off, width) for name, off, width in field_map(read_slot_file(data))}


def patch(data: bytes, name: str, value: int) -> bytes:
    off, width = fields(data)[name]
    out = bytearray(data)
    struct.pack_into("<I" if width == 4 else "<Q", out, off, value)
    return bytes(out)


def both_modes(data: bytes, state_size: int = len(STATE)) -> tuple[SlotFile, SlotFile]:
    """The file read by scanning and with the exact state size; allocation bound checked."""
    results = []
    for size in (None, state_size):
        stats = ReadStats()
        results.append(read_slot_file(data, "f.bin", state_size=size, stats=stats))
        assert stats.max_alloc <= len(data)
    return results[0], results[1]


def check_partition(f: SlotFile) -> None:
    parts = f.header_bytes + f.tokens_bytes + f.state_bytes + f.appendix_bytes
    assert parts + f.trailing_bytes == f.total_bytes
    assert (f.checkpoints is None) == (f.appendix_status != "valid")


# --- the real file ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real() -> bytes:
    path = REAL_DIR / "mamba-a.bin"
    if not path.is_file():
        pytest.fail(f"{path} is missing: set PCSPEC_REAL_SLOTFILES to the folder holding it")
    return path.read_bytes()


def test_real_file_reads(real: bytes) -> None:
    stats = ReadStats()
    f = read_slot_file(real, "mamba-a.bin", stats=stats)
    assert f.total_bytes == 21960  # the server's n_written
    assert f.n_read == 21960
    assert f.state_version == 3
    assert f.packed
    assert len(f.tokens) == 602  # the server's n_saved
    assert f.tokens[:4] == [263, 101, 256, 119]
    assert f.tokens_bytes == 606 * 4  # marker, version, n, 602 tokens, media count
    assert (f.state_offset, f.state_bytes) == (2436, 19524)
    assert f.appendix_status == "absent"
    assert f.checkpoints is None and f.appendix_reason is None
    assert stats.max_alloc <= len(real)
    check_partition(f)


def test_real_file_state_is_a_recurrent_state_ending_at_eof(real: bytes) -> None:
    # An independent walk of llama_memory_recurrent::state_write (cell_count, cells, s_trans,
    # n_layer, then per layer i32 type + u64 row size + row): the state ends exactly at EOF, so
    # the scan's "no appendix" is what llama_state_seq_load_file's file.tell() would say.
    cell_count, pos, n_seq_id, s_trans, n_layer = struct.unpack_from("<IiIII", real, 2436)
    assert (cell_count, pos, n_seq_id, s_trans, n_layer) == (1, 601, 0, 0, 2)
    off = 2436 + 20
    rows = []
    for _ in range(2 * n_layer):  # conv rows (r_l), then ssm rows (s_l)
        ggml_type, row = struct.unpack_from("<iQ", real, off)
        rows.append((ggml_type, row))
        off += 12 + row
    assert rows == [(0, 1536), (0, 1536), (0, 8192), (0, 8192)]
    assert off == len(real)


def test_real_file_rewrites_byte_exact(real: bytes) -> None:
    f = read_slot_file(real)
    assert write_slot_file(f.tokens, f.state, state_version=3) == real


def test_real_file_exact_mode_agrees(real: bytes) -> None:
    scan = read_slot_file(real)
    assert read_slot_file(real, state_size=19524) == dataclasses.replace(
        scan, state_located="exact"
    )


def test_real_file_with_an_appendix(real: bytes) -> None:
    data = real + encode_appendix(CKPTS)
    for f in both_modes(data, state_size=19524):
        assert f.appendix_status == "valid"
        assert f.state_bytes == 19524 and f.checkpoints == CKPTS
        assert f.n_read == len(data)


# --- round trips ------------------------------------------------------------------------------

SHAPES = {
    "no checkpoints": (TOKENS, STATE, [], True, 3),
    "several checkpoints, empty and non-empty dft/spec": (TOKENS, STATE, CKPTS, True, 3),
    "legacy token list": (TOKENS, STATE, CKPTS[:1], False, 3),
    "legacy, no tokens": ([], STATE, [], False, 2),
    "packed, no tokens": ([], STATE, CKPTS[2:], True, 2),
    "extreme values": (
        [0, 2**31 - 1],
        b"\xff" * 4,
        [
            FileCheckpoint(-(2**63), -(2**31), 2**31 - 1, b"x", b"", b""),
            FileCheckpoint(2**63 - 1, 0, 0, b"\0" * 300, b"\1" * 70, b"\2" * 9),
        ],
        True,
        3,
    ),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_round_trip(shape: str) -> None:
    tokens, state, ckpts, packed, version = SHAPES[shape]
    data = write_slot_file(tokens, state, ckpts, state_version=version, packed=packed)
    for f in both_modes(data, state_size=len(state)):
        assert f.tokens == tokens and f.packed == packed and f.state == state
        assert f.state_version == version
        assert f.checkpoints == (ckpts or None)
        assert f.appendix_status == ("valid" if ckpts else "absent")
        assert f.n_read == f.total_bytes == len(data)  # FILE-2: n_read == n_written
        check_partition(f)


def test_packed_layout_is_server_tokens_serialize() -> None:
    data = write_slot_file([7, 8], b"SSSS")
    assert struct.unpack_from("<IIIiIIiiI", data) == (0x67677371, 3, 6, -1, 1, 2, 7, 8, 0)
    assert data[:4] == b"qsgg"
    assert write_slot_file([7, 8], b"SSSS", packed=False)[8:20] == struct.pack("<Iii", 2, 7, 8)


def test_appendix_layout() -> None:
    blob = encode_appendix([FileCheckpoint(5, 1, 4, b"ab", b"", b"c")])
    assert blob == (
        b"SCKP" + struct.pack("<IIqiiQ", 1, 1, 5, 1, 4, 2) + b"ab" + struct.pack("<QQ", 0, 1) + b"c"
    )
    assert encode_appendix([]) == b""


def test_checkpoint_offsets() -> None:
    data = write_slot_file(TOKENS, STATE, CKPTS)
    f = read_slot_file(data)
    assert f.appendix_offset == 12 + 4 * (3 + len(TOKENS) + 1) + len(STATE)
    for off, c in zip(f.checkpoint_offsets, CKPTS, strict=True):
        assert struct.unpack_from("<qii", data, off) == (c.n_tokens, c.pos_min, c.pos_max)


# --- the n_ctx_checkpoints cap ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("cap", "kept"), [(None, 4), (5, 4), (4, 4), (2, 2), (1, 1), (0, 0), (-1, 4)]
)
def test_cap_keeps_the_last(cap: int | None, kept: int) -> None:
    data = write_slot_file(TOKENS, STATE, CKPTS)
    f = read_slot_file(data, n_ctx_checkpoints=cap)
    assert f.appendix_status == "valid" and f.appendix_count == 4
    assert f.checkpoints == CKPTS[len(CKPTS) - kept :]
    assert f.checkpoint_offsets == read_slot_file(data).checkpoint_offsets[len(CKPTS) - kept :]
    if cap is not None:
        assert cap_checkpoints(CKPTS, cap) == CKPTS[len(CKPTS) - kept :]


def test_cap_does_not_hide_a_later_invalid_record() -> None:
    # push/pop happens per record, but a bad record after the kept window still voids it all
    bad = [*CKPTS, FileCheckpoint(20, 0, 19, b"", b"", b"")]
    f = read_slot_file(write_slot_file(TOKENS, STATE, bad), n_ctx_checkpoints=1)
    assert f.appendix_status == "invalid" and f.checkpoints is None


# --- the writer -------------------------------------------------------------------------------


def test_writer_refuses_unwritten_buffers() -> None:
    with pytest.raises(PcspecError, match=r"unwritten bytes: ckpt 0 data_tgt, state"):
        write_slot_file(TOKENS, STATE, CKPTS, unwritten=["ckpt 0 data_tgt", "state"])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"state_version": 5}, "unsupported state-sequence version 5"),
        ({"state": b"abc"}, "state of 3 bytes"),
        ({"tokens": [1, -1]}, "token -1 at index 1"),
        ({"tokens": [2**31]}, "token 2147483648"),
        ({"checkpoints": [FileCheckpoint(1, 2**31, 0, b"x", b"", b"")]}, "pos_min"),
        ({"checkpoints": [FileCheckpoint(2**63, 0, 0, b"x", b"", b"")]}, "n_tokens"),
    ],
)
def test_writer_refuses_what_it_cannot_encode(kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {"tokens": TOKENS, "state": STATE, "checkpoints": ()}
    args.update(kwargs)
    with pytest.raises(PcspecError, match=match):
        write_slot_file(**args)  # type: ignore[arg-type]


def test_writer_writes_what_the_reader_then_ignores() -> None:
    # Like the C++ writer: an empty target checkpoint or too many records are written as given,
    # and the reader then ignores the whole appendix (tokens and state still restore).
    empty = write_slot_file(TOKENS, STATE, [FileCheckpoint(3, 0, 2, b"", b"", b"")])
    f = read_slot_file(empty)
    assert f.appendix_status == "invalid" and "empty data_tgt" in (f.appendix_reason or "")
    many = [FileCheckpoint(i, 0, 0, b"x", b"", b"") for i in range(SLOT_CKPT_MAX_COUNT + 1)]
    f = read_slot_file(write_slot_file(TOKENS, STATE, many))
    assert f.appendix_status == "invalid" and "over the cap 1024" in (f.appendix_reason or "")
    assert f.tokens == TOKENS and f.state == STATE


# --- the mandatory part: header, tokens, state ------------------------------------------------


def expect_error(data: bytes, byte: int, match: str, **kwargs: object) -> None:
    with pytest.raises(PcspecError, match=match) as info:
        read_slot_file(data, "f.bin", **kwargs)  # type: ignore[arg-type]
    assert info.value.where == f"f.bin: byte {byte}"


def test_bad_magic() -> None:
    expect_error(b"ggsq" + small()[4:], 0, "bad magic 0x71736767")


@pytest.mark.parametrize("n", [0, 1, 3])
def test_too_short_for_magic(n: int) -> None:
    expect_error(small()[:n], 0, "too short for the magic")


@pytest.mark.parametrize("version", [0, 1, 5, 0xFFFFFFFF])
def test_unsupported_version(version: int) -> None:
    data = bytearray(small())
    struct.pack_into("<I", data, 4, version)
    expect_error(bytes(data), 4, f"unsupported state-sequence version {version} ")


@pytest.mark.parametrize("count", [10**6, 0xFFFFFFFF])
def test_token_count_beyond_file(count: int) -> None:
    stats = ReadStats()
    data = patch(small(), "n_token_count", count)
    expect_error(data, 8, f"token count {count} .* exceeds the")
    with pytest.raises(PcspecError):
        read_slot_file(data, stats=stats)
    assert stats.max_alloc == 0  # rejected before reading a single word


def test_bad_server_tokens_version() -> None:
    expect_error(
        patch(small(), "tokens version", 2), 16, "Unsupported server tokens state version 2"
    )


def test_packed_token_count_beyond_words() -> None:
    expect_error(patch(small(), "tokens count", 7), 20, "token count 7 but only 6 word")
    expect_error(patch(small(), "tokens count", 0xFFFFFFFF), 20, "Unexpected end")


def test_packed_without_media_count() -> None:
    # n_token_count says one word less: the media count word becomes part of the state
    data = patch(small(), "n_token_count", 3 + len(TOKENS))
    expect_error(data, 12 + 4 * (3 + len(TOKENS)), "no media count")


def test_media_is_rejected() -> None:
    expect_error(patch(small(), "media count", 1), 12 + 4 * (3 + len(TOKENS)), "media list of 1")


def test_trailing_data_in_tokens() -> None:
    data = bytearray(write_slot_file(TOKENS, b"\0\0\0\0" + STATE))  # a zero word after the media
    struct.pack_into("<I", data, 8, 3 + len(TOKENS) + 2)
    expect_error(bytes(data), 12 + 4 * (3 + len(TOKENS) + 1), "Trailing data in server tokens")


def test_packed_cut_before_version_and_count() -> None:
    data = struct.pack("<IIIi", 0x67677371, 3, 1, -1) + STATE
    expect_error(data, 16, "no version word")
    data = struct.pack("<IIIiI", 0x67677371, 3, 2, -1, 1) + STATE
    expect_error(data, 20, "no token count")


def test_negative_token_in_legacy_list() -> None:
    data = bytearray(write_slot_file([5, 6, 7], STATE, packed=False))
    struct.pack_into("<i", data, 16, -3)
    expect_error(bytes(data), 16, "Invalid tokens in slot save file: token -3 at index 1")


def test_state_too_short_or_past_eof() -> None:
    header_and_tokens = small()[: 12 + 4 * (4 + len(TOKENS))]
    expect_error(header_and_tokens + b"abc", len(header_and_tokens), "3 bytes of state")
    expect_error(small(), len(header_and_tokens), "runs past the end", state_size=10**9)
    expect_error(small(), len(header_and_tokens), "state_size 2", state_size=2)


# --- truncation at every prefix length --------------------------------------------------------


def test_truncation_at_every_prefix() -> None:
    data = small()
    state_start = 12 + 4 * (4 + len(TOKENS))
    appendix = state_start + len(STATE)
    for n in range(len(data) + 1):
        prefix = data[:n]
        for state_size in (None, len(STATE)):
            stats = ReadStats()
            try:
                f = read_slot_file(prefix, state_size=state_size, stats=stats)
            except PcspecError as exc:
                assert exc.where is not None and "byte" in exc.where
                # only a cut before the end of the state is fatal
                assert n < (appendix if state_size else state_start + 4)
                continue
            finally:
                assert stats.max_alloc <= n
            check_partition(f)
            assert f.tokens == TOKENS
            if n == len(data):
                assert f.appendix_status == "valid"
            elif n >= appendix + 12:
                assert f.appendix_status == "truncated", n
                assert f.state == STATE and f.n_read == appendix
            elif n >= appendix + 4:  # inside the version or the count: b11549 logs it invalid
                assert f.appendix_status == "invalid" and "appendix cut short" in (f.appendix_reason or ""), n
                assert f.state == STATE and f.n_read == appendix
            elif state_size is None:  # no complete magic: the cut appendix looks like state
                assert f.appendix_status == "absent" and f.state == prefix[state_start:]
            else:  # exact: fewer than 4 bytes after the state cannot hold the magic
                assert f.appendix_status == "absent" and f.trailing_bytes == n - appendix


# --- appendix corruptions ---------------------------------------------------------------------


def test_bad_appendix_magic() -> None:
    data = patch(small(), "appendix magic", 0x504B4354)
    scan, exact = both_modes(data)
    # scanning: no candidate, so the broken appendix is indistinguishable from state bytes
    assert scan.appendix_status == "absent" and scan.state_bytes == len(data) - 12 - 36
    # exact: the reader sees no magic where the appendix belongs
    assert exact.appendix_status == "absent" and exact.state == STATE
    assert exact.appendix_reason is not None and "byte 60" in exact.appendix_reason


@pytest.mark.parametrize("version", [0, 2, 0xFFFFFFFF])
def test_bad_appendix_version(version: int) -> None:
    for f in both_modes(patch(small(), "appendix version", version)):
        assert f.appendix_status == "invalid" and f.checkpoints is None
        assert f.appendix_reason == f"appendix version {version} at byte 64 (expected 1)"
        assert f.state == STATE and f.tokens == TOKENS and f.n_read == 60
        check_partition(f)


@pytest.mark.parametrize("name", ["data_tgt", "data_dft", "data_spec"])
@pytest.mark.parametrize("record", [0, 1])
def test_huge_blob_length(name: str, record: int) -> None:
    data = patch(small(), f"ckpt {record} {name} length", U64_MAX)
    off = fields(small())[f"ckpt {record} {name} length"][0]
    for f in both_modes(data):
        assert f.appendix_status == "truncated"
        assert f"{name} length {U64_MAX} at byte {off} exceeds" in (f.appendix_reason or "")
        assert f.state == STATE


def test_off_by_one_lengths() -> None:
    data = write_slot_file(TOKENS, STATE, CKPTS)  # the last blob (ckpt 3 data_spec) is b"s"
    at = fields(data)
    # +1 on the last blob: one byte more than the file holds
    for f in both_modes(patch(data, "ckpt 3 data_spec length", 2)):
        assert f.appendix_status == "truncated"
        assert f"data_spec length 2 at byte {at['ckpt 3 data_spec length'][0]} exceeds the 1 " in (
            f.appendix_reason or ""
        )
    # -1 on the last blob: the C++ reads a shorter blob and stops, leaving one byte unread
    for f in both_modes(patch(data, "ckpt 3 data_spec length", 0)):
        assert f.appendix_status == "valid" and f.trailing_bytes == 1
        assert f.checkpoints is not None and f.checkpoints[3].data_spec == b""
        assert f.n_read == len(data) - 1
    # +1 on the first target blob, -1 on a middle draft blob: every later field is misread and
    # a misread length runs past the end
    for name, value in (("ckpt 0 data_tgt length", 8), ("ckpt 1 data_dft length", 4)):
        for f in both_modes(patch(data, name, value)):
            assert f.appendix_status == "truncated", name
            assert f.checkpoints is None and f.state == STATE and f.tokens == TOKENS


@pytest.mark.parametrize(
    ("count", "status", "reason"),
    [
        (SLOT_CKPT_MAX_COUNT + 1, "invalid", "count 1025 at byte 68 over the cap 1024"),
        (0xFFFFFFFF, "invalid", "over the cap"),
        (SLOT_CKPT_MAX_COUNT, "truncated", "checkpoint 2 n_tokens"),
        (3, "truncated", "checkpoint 2 n_tokens"),
    ],
)
def test_appendix_count(count: int, status: str, reason: str) -> None:
    for f in both_modes(patch(small(), "appendix count", count)):
        assert f.appendix_status == status and reason in (f.appendix_reason or "")
        assert f.appendix_count == count


def test_count_below_records_is_valid_with_trailing_bytes() -> None:
    # count 1 with two records: the C++ reads one and stops; the second is unread junk to it
    data = patch(small(), "appendix count", 1)
    scan, exact = both_modes(data)
    assert exact.appendix_status == "valid" and exact.checkpoints == CKPTS[:1]
    assert exact.trailing_bytes > 0 and exact.n_read < len(data)
    assert scan == dataclasses.replace(exact, state_located="scan")


def test_empty_target_blob() -> None:
    data = write_slot_file(TOKENS, STATE, [CKPTS[0], FileCheckpoint(6, 1, 5, b"", b"d", b"s")])
    for f in both_modes(data):
        assert f.appendix_status == "invalid"
        assert f.appendix_reason is not None and "checkpoint 1 (record at byte" in f.appendix_reason
        assert "empty data_tgt" in f.appendix_reason


def test_junk_after_the_appendix() -> None:
    data = small() + b"junk after the appendix"
    for f in both_modes(data):
        assert f.appendix_status == "valid" and f.checkpoints == CKPTS[:2]
        assert f.trailing_bytes == 23 and f.n_read == len(small())
        assert f.appendix_reason is not None and f"byte {len(small())}" in f.appendix_reason
        check_partition(f)


def test_junk_after_a_file_without_appendix() -> None:
    data = write_slot_file(TOKENS, STATE) + b"junk"
    scan, exact = both_modes(data)
    assert exact.appendix_status == "absent" and exact.trailing_bytes == 4 and exact.state == STATE
    # the documented limit of scanning: without a size, junk is indistinguishable from state
    assert scan.appendix_status == "absent" and scan.state == STATE + b"junk"


def test_sckp_inside_the_state() -> None:
    state = b"xxxxSCKP\x07\x00\x00\x00yy"
    with_appendix = write_slot_file(TOKENS, state, CKPTS)
    for f in both_modes(with_appendix, state_size=len(state)):
        assert f.state == state and f.checkpoints == CKPTS  # the real appendix still wins
    without = write_slot_file(TOKENS, state)
    scan, exact = both_modes(without, state_size=len(state))
    assert exact.appendix_status == "absent" and exact.state == state
    # scanning takes the stray magic for an appendix with a damaged version (rule 3, documented)
    assert scan.appendix_status == "invalid" and scan.state == b"xxxx"
    # rule 2 before rule 3: a damaged real appendix (version 1) wins over a stray magic
    cut = with_appendix[:-1]
    for f in both_modes(cut, state_size=len(state)):
        assert f.appendix_status == "truncated" and f.state == state


def test_complete_appendix_inside_the_state() -> None:
    # A state holding a whole (empty) appendix: valid, but not ending at EOF, so rule 1 passes
    # over it and takes the real one.
    state = b"head" + encode_appendix([CKPTS[0]]) + b"tail"
    for f in both_modes(write_slot_file(TOKENS, state, CKPTS[1:]), state_size=len(state)):
        assert f.state == state and f.checkpoints == CKPTS[1:]


def test_huge_length_never_allocates_beyond_the_file() -> None:
    data = patch(small(), "ckpt 0 data_tgt length", 2**40)
    stats = ReadStats()
    read_slot_file(data, stats=stats)
    assert 0 < stats.max_alloc <= len(data)


# --- the CLI ----------------------------------------------------------------------------------


def test_cli_inspect_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "slot.bin"
    path.write_bytes(write_slot_file(TOKENS, KV_STATE, CKPTS))
    assert main(["slotfile", "inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "5 (packed server_tokens" in out and "1 2 3 4 5" in out
    end = 48 + len(KV_STATE) - 1
    assert "state-sequence version  3" in out and f"{len(KV_STATE)} bytes at 48..{end}" in out
    assert "appendix                valid, 4 record(s)" in out
    assert "[9, 14]" in out and "spec" in out
    assert main(["slotfile", "inspect", str(path), "--n-ctx-checkpoints", "2"]) == 0
    assert "last 2 kept" in capsys.readouterr().out


def test_cli_inspect_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "slot.bin"
    path.write_bytes(write_slot_file(TOKENS, STATE, CKPTS))
    assert main(["slotfile", "inspect", str(path), "--json", "--state-size", "12"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == 2 and doc["state"]["layout"] is None
    assert doc["tokens"]["tokens"] == TOKENS and doc["state"]["located"] == "exact"
    assert doc["appendix"]["status"] == "valid" and doc["n_read"] == doc["total_bytes"]
    ckpt = doc["appendix"]["checkpoints"][2]
    assert (ckpt["n_tokens"], ckpt["pos_min"], ckpt["pos_max"]) == (12, 5, 11)
    assert (ckpt["data_tgt_bytes"], ckpt["data_dft_bytes"], ckpt["data_spec_bytes"]) == (2, 0, 10)
    path.write_bytes(write_slot_file(TOKENS, KV_STATE, CKPTS) + b"junk")
    assert main(["slotfile", "inspect", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["n_read"], doc["total_bytes"], doc["trailing_bytes"]) == (
        len(write_slot_file(TOKENS, KV_STATE, CKPTS)),
        len(write_slot_file(TOKENS, KV_STATE, CKPTS)) + 4,
        4,
    )
    assert doc["state"]["located"] == "layout" and doc["state"]["layout"]["kind"] == "kv"


def test_cli_inspect_damaged_appendix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "slot.bin"
    path.write_bytes(write_slot_file(TOKENS, KV_STATE, CKPTS[:2])[:-3])
    assert main(["slotfile", "inspect", str(path)]) == 0  # restorable: exit 0
    out = capsys.readouterr().out
    assert f"appendix                truncated at byte {48 + len(KV_STATE)} - ignored" in out
    assert "appendix cut short" in out


def test_cli_inspect_unreadable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "slot.bin"
    path.write_bytes(b"GGUF" + small()[4:])
    assert main(["slotfile", "inspect", str(path)]) == 2
    assert "byte 0: bad magic" in capsys.readouterr().err
    assert main(["slotfile", "inspect", str(tmp_path / "missing.bin")]) == 2
    assert "cannot read the file" in capsys.readouterr().err


def test_cli_inspect_real_file(
    real: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "mamba-a.bin"
    path.write_bytes(real)
    assert main(["slotfile", "inspect", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["total_bytes"], doc["n_read"], doc["tokens"]["count"]) == (21960, 21960, 602)
    assert doc["appendix"]["status"] == "absent" and doc["state"]["bytes"] == 19524
    lay = doc["state"]["layout"]
    assert doc["state"]["located"] == "layout" and lay["kind"] == "recurrent" and lay["version"] == 3
    (part,) = lay["parts"]
    (stream,) = part["streams"]
    assert (part["memory"], part["offset"], part["bytes"]) == ("recurrent", 2436, 19524)
    assert (stream["cell_count"], stream["positions"], stream["trans"], stream["n_layer"]) == (1, [[601, 601]], 0, 2)
    assert [(r["tensor"], r["type_name"], r["row_bytes"]) for r in stream["rows"]] == [
        ("r", "f32", 1536), ("r", "f32", 1536), ("s", "f32", 8192), ("s", "f32", 8192)
    ]
