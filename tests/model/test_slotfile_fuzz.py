"""Property fuzzing of the slot file reader and writer (Hypothesis, derandomized).

The reader's contract on *any* bytes: return a ``SlotFile`` or raise ``PcspecError``, nothing
else, and never create an object sized by a length field beyond the file's size (``ReadStats``
sees every such allocation). Inputs are mutations of valid files: truncations, bit flips, length
and count fields set to huge or off-by-one values, appended junk and appendices, spliced bytes.
"""

from __future__ import annotations

import struct
import tracemalloc
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pcspec.core.errors import PcspecError
from pcspec.model.slotfile import (
    MIN_STATE_BYTES,
    SLOT_CKPT_MAX_COUNT,
    FileCheckpoint,
    ReadStats,
    SlotFile,
    encode_appendix,
    field_map,
    read_slot_file,
    write_slot_file,
)

# Deterministic and bounded: the same examples on every run, nothing stored between runs. The
# profile is applied per test (not loaded globally) so it does not change other test modules.
settings.register_profile(
    "slotfile-ci",
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=500,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
CI = settings.get_profile("slotfile-ci")

I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
BLOB = st.binary(max_size=24)
CHECKPOINT = st.builds(
    FileCheckpoint,
    n_tokens=I64,
    pos_min=I32,
    pos_max=I32,
    data_tgt=st.binary(min_size=1, max_size=24),
    data_dft=BLOB,
    data_spec=BLOB,
)
SCKP = b"SCKP"


@dataclass(frozen=True)
class Spec:
    tokens: list[int]
    state: bytes
    checkpoints: list[FileCheckpoint]
    packed: bool
    version: int

    def write(self) -> bytes:
        return write_slot_file(
            self.tokens,
            self.state,
            self.checkpoints,
            state_version=self.version,
            packed=self.packed,
        )


@st.composite
def specs(draw: st.DrawFn, stray_magic: bool = False) -> Spec:
    state = draw(st.binary(min_size=MIN_STATE_BYTES, max_size=48))
    if stray_magic:  # a state that itself holds "SCKP", optionally followed by version 1
        at = draw(st.integers(0, len(state)))
        tail = draw(
            st.sampled_from([b"", b"\x01\x00\x00\x00", b"\x01\x00\x00\x00\x00\x00\x00\x00"])
        )
        state = state[:at] + SCKP + tail + state[at:]
    elif SCKP in state:
        state = state.replace(SCKP, b"SCKQ")  # the scan needs a state without the magic
    return Spec(
        tokens=draw(st.lists(st.integers(0, 2**31 - 1), max_size=12)),
        state=state,
        checkpoints=draw(st.lists(CHECKPOINT, max_size=4)),
        packed=draw(st.booleans()),
        version=draw(st.sampled_from([2, 3])),
    )


def check_read(data: bytes, state_size: int | None, cap: int | None) -> SlotFile | None:
    """Read ``data`` and check everything that must hold of any result."""
    stats = ReadStats()
    try:
        f = read_slot_file(data, "fuzz.bin", cap, state_size=state_size, stats=stats)
    except PcspecError as exc:
        assert exc.where is not None and exc.where.startswith("fuzz.bin: byte ")
        return None
    finally:
        assert stats.max_alloc <= len(data)
    parts = f.header_bytes + f.tokens_bytes + f.state_bytes + f.appendix_bytes
    assert parts + f.trailing_bytes == f.total_bytes == len(data)
    assert f.state_bytes >= MIN_STATE_BYTES and len(f.state) == f.state_bytes
    assert state_size is None or f.state_bytes == state_size
    assert all(t >= 0 for t in f.tokens)
    end_of_state = f.state_offset + f.state_bytes
    if f.appendix_status == "valid":
        assert f.checkpoints is not None
        assert f.n_read == end_of_state + f.appendix_bytes
        assert all(c.data_tgt for c in f.checkpoints)
        assert data[end_of_state : end_of_state + 8] == SCKP + b"\x01\x00\x00\x00"
        assert f.appendix_count is not None and f.appendix_count <= SLOT_CKPT_MAX_COUNT
        expected = f.appendix_count if cap is None or cap < 0 else min(cap, f.appendix_count)
        assert len(f.checkpoints) == len(f.checkpoint_offsets) == expected
    else:
        assert f.checkpoints is None and f.n_read == end_of_state
    if f.appendix_status in ("truncated", "invalid"):
        assert f.appendix_reason and "byte" in f.appendix_reason
    else:
        assert (f.appendix_reason is None) == (f.trailing_bytes == 0)
    return f


# --- round trips ------------------------------------------------------------------------------


@settings(CI)
@given(specs())
def test_round_trip_by_scanning(spec: Spec) -> None:
    data = spec.write()
    f = check_read(data, None, None)
    assert f is not None
    assert (f.tokens, f.state, f.packed, f.state_version) == (
        spec.tokens,
        spec.state,
        spec.packed,
        spec.version,
    )
    assert f.checkpoints == (spec.checkpoints or None)
    assert f.n_read == len(data)  # FILE-2: what was written is what is read


@settings(CI)
@given(specs(stray_magic=True))
def test_round_trip_with_the_state_size(spec: Spec) -> None:
    # any state bytes at all, "SCKP" included: with its size known the layout is exact
    data = spec.write()
    f = check_read(data, len(spec.state), None)
    assert f is not None
    assert (f.tokens, f.state) == (spec.tokens, spec.state)
    assert f.checkpoints == (spec.checkpoints or None)
    assert f.n_read == len(data)


@settings(CI)
@given(specs(), st.integers(-1, 6))
def test_cap_keeps_the_last(spec: Spec, cap: int) -> None:
    f = check_read(spec.write(), None, cap)
    assert f is not None
    n = len(spec.checkpoints)
    # push_back then pop_front: the last `cap`; a negative cap is a huge size_t, no cap at all
    expected = spec.checkpoints if cap < 0 else spec.checkpoints[max(0, n - cap) :]
    assert f.checkpoints == (expected if n else None)


# --- mutations --------------------------------------------------------------------------------


def special_values(width: int, original: int) -> st.SearchStrategy[int]:
    top = 2 ** (8 * width) - 1
    return st.sampled_from(
        [
            0,
            1,
            top,
            top // 2,
            (original + 1) & top,
            (original - 1) & top,
            SLOT_CKPT_MAX_COUNT,
            SLOT_CKPT_MAX_COUNT + 1,
            2**40 & top,
        ]
    ) | st.integers(0, top)


@st.composite
def mutated(draw: st.DrawFn) -> tuple[bytes, int, int | None]:
    """A valid file after 1-4 mutations, with the original state size and a cap."""
    spec = draw(specs())
    data = bytearray(spec.write())
    fmap = field_map(read_slot_file(bytes(data)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(
            st.sampled_from(["truncate", "flip", "field", "append", "insert", "delete", "dup"])
        )
        if kind == "truncate":
            del data[draw(st.integers(0, len(data))) :]
        elif kind == "flip" and data:
            i = draw(st.integers(0, len(data) - 1))
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif kind == "field":
            _, off, width = draw(st.sampled_from(fmap))
            if off + width <= len(data):
                fmt = "<I" if width == 4 else "<Q"
                original = struct.unpack_from(fmt, data, off)[0]
                struct.pack_into(fmt, data, off, draw(special_values(width, original)))
        elif kind == "append":
            junk = draw(
                st.binary(max_size=16)
                | st.just(SCKP)
                | st.just(SCKP + b"\x01\x00\x00\x00")
                | st.lists(CHECKPOINT, min_size=1, max_size=2).map(encode_appendix)
            )
            data += junk
        elif kind == "insert":
            at = draw(st.integers(0, len(data)))
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete" and data:
            at = draw(st.integers(0, len(data) - 1))
            del data[at : at + draw(st.integers(1, 8))]
        elif kind == "dup" and data:  # a copy of a stretch of the file appended (an appendix twice)
            at = draw(st.integers(0, len(data) - 1))
            data += data[at:]
    return bytes(data), len(spec.state), draw(st.none() | st.integers(-1, 5))


@pytest.mark.slow
@settings(CI, max_examples=4000)
@given(mutated())
def test_mutated_files_read_or_fail_cleanly(case: tuple[bytes, int, int | None]) -> None:
    data, state_size, cap = case
    check_read(data, None, cap)
    check_read(data, state_size, cap)


@settings(CI, max_examples=300)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_after_a_valid_header(tail: bytes) -> None:
    header = struct.pack("<III", 0x67677371, 3, 0)
    check_read(header + tail, None, None)
    check_read(tail, None, None)


def test_huge_lengths_do_not_allocate() -> None:
    # A second, independent view of the allocation bound: Python's own allocator. Every length
    # field of a small file set to the largest values; the traced peak stays near the file size.
    spec = Spec([1, 2, 3], b"STATE", [FileCheckpoint(3, 0, 2, b"t" * 16, b"d", b"s")] * 2, True, 3)
    base = spec.write()
    for name, off, width in field_map(read_slot_file(base)):
        if name in ("magic", "state version", "tokens marker", "appendix magic"):
            continue
        for value in (2 ** (8 * width) - 1, 2 ** (8 * width - 1), 2**31):
            data = bytearray(base)
            struct.pack_into("<I" if width == 4 else "<Q", data, off, value)
            tracemalloc.start()
            try:
                check_read(bytes(data), None, None)
                check_read(bytes(data), len(spec.state), None)
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            assert peak < 64 * 1024, (name, value, peak)
