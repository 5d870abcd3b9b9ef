"""State-sequence versions 3 and 4 in whole slot files, the appendix as b11549 reads it, and
`pcspec slotfile inspect` on parsed states: a cut or an overwrite inside the state is an error at
its byte (exit 2, one line), and the layout is shown."""

from __future__ import annotations

import dataclasses
import json
import struct
from pathlib import Path

import pytest

from pcspec.cli import main
from pcspec.codec.layout import encode_state
from pcspec.codec.reader import parse_state
from pcspec.model.config import Config
from pcspec.model.designs import get_design
from pcspec.model.errors import PcspecError
from pcspec.model.server import Server
from pcspec.model.slotfile import FileCheckpoint, read_slot_file, write_slot_file
from pcspec.model.state_versions import RESTORE_LOAD_FAILED, STATE_SEQ_VERSION_DEFAULT
from tests.support.state_builders import (
    REAL_FILES,
    as_version,
    encoded,
    kv_part,
    kv_stream,
    real,
    real_layout,
    state_of,
)

CKPTS = [FileCheckpoint(20, 19, 19, b"tgt", b"", b""), FileCheckpoint(40, 39, 39, b"tgt2", b"d", b"")]


def slot_file(name: str, version: int, checkpoints: list[FileCheckpoint] | None = None) -> bytes:
    """The real file ``name`` as a build of ``version`` writes it (the same state in that
    version's layout), with ``checkpoints`` appended."""
    data = real(name)
    f = read_slot_file(data)
    state = encode_state(as_version(real_layout(name), version))
    return write_slot_file(f.tokens, state, checkpoints or [], state_version=version)


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err.strip()


# --- versions: write, read, refuse -----------------------------------------------------------------


@pytest.mark.parametrize("name", REAL_FILES)
@pytest.mark.parametrize("version", [3, 4])
def test_whole_file_round_trip(name: str, version: int) -> None:
    data = slot_file(name, version, CKPTS)
    if version == 3:
        assert data[: len(real(name))] == real(name)  # the real file, then the appendix
    start, got = state_of(data)
    assert got == version
    lay = parse_state(data, start, version, with_data=True)
    f = read_slot_file(data, state_size=lay.size, expected_version=version)
    assert f.state_version == version and f.checkpoints == CKPTS and f.n_read == len(data)
    assert f.state == encode_state(lay) and f.tokens == read_slot_file(real(name)).tokens


@pytest.mark.parametrize(("version", "reader", "where"), [
    (3, 4, "llama-context.cpp:3334-3337 of b11434, 3421-3424 of b11549"),
    (4, 3, "llama-context.cpp:3331-3334 of the October tree"),
])
def test_a_reader_of_one_version_refuses_the_other(version: int, reader: int, where: str) -> None:
    data = slot_file("kv-a.bin", version)
    assert read_slot_file(data).state_version == version  # an inspector reads both
    assert read_slot_file(data, expected_version=version).state_version == version
    with pytest.raises(PcspecError) as info:
        read_slot_file(data, "f.bin", expected_version=reader)
    assert info.value.where == "f.bin: byte 4"
    why = info.value.why
    assert f"state-sequence version {version}, but this build reads {reader}" in why
    assert f"unknown (magic, version) for sequence state file: 67677371, {version:08x}" in why
    assert where in why and RESTORE_LOAD_FAILED in why


def test_the_model_restores_its_own_version_only() -> None:
    # The model's server is the October build: it writes version 3 and refuses a version 4 file
    # as that build's llama_state_seq_load_file does; the slot is cleared.
    assert STATE_SEQ_VERSION_DEFAULT == 3
    srv = Server(Config(n_slots=1, n_ctx_slot=64, n_batch=16, n_ubatch=4, cache_ram=-1), get_design("fixed"))
    srv.request(tuple(range(1, 20)), n_predict=1)
    srv.run()
    srv.slot_action("save", 0, "f.bin")
    data = srv.files["f.bin"]
    assert struct.unpack_from("<I", data, 4) == (3,)
    srv.files["g.bin"] = data[:4] + struct.pack("<I", 4) + data[8:]
    srv.slot_action("restore", 0, "g.bin")
    assert srv.slots[0].prompt.n_tokens == 0
    error = str(srv.last_result["error"])
    assert "but this build reads 3" in error and RESTORE_LOAD_FAILED in error
    srv.slot_action("restore", 0, "f.bin")
    assert srv.slots[0].prompt.n_tokens == 19


def test_the_writer_writes_the_version_asked_for() -> None:
    for version in (2, 3, 4):
        data = write_slot_file([1, 2], b"SSSS", state_version=version)
        assert struct.unpack_from("<I", data, 4) == (version,)
    with pytest.raises(PcspecError, match="unsupported state-sequence version 5"):
        write_slot_file([1, 2], b"SSSS", state_version=5)


# --- the appendix, as b11549 reads it ----------------------------------------------------------------


def test_an_appendix_cut_in_its_header_is_invalid() -> None:
    # server-context.cpp:2672-2676 of b11549: a version or a count that cannot be read is an
    # "invalid context checkpoint appendix"; a record cut short (2681-2689) a "truncated" one
    full = slot_file("kv-a.bin", 4, CKPTS)
    at = len(slot_file("kv-a.bin", 4))  # where the appendix starts
    size = at - state_of(full)[0]
    for cut in range(at + 4, at + 12):
        f = read_slot_file(full[:cut], state_size=size)
        assert f.appendix_status == "invalid" and "appendix cut short" in (f.appendix_reason or ""), cut
        assert f.n_read == at and f.checkpoints is None
    for cut in (at + 12, at + 30, len(full) - 1):
        assert read_slot_file(full[:cut], state_size=size).appendix_status == "truncated"


def test_the_appendix_follows_the_parsed_state() -> None:
    # K rows that look like an appendix: the scan takes them for a damaged one, the parsed state
    # is exact and has none.
    st = kv_stream(2, n_layer=1, row_bytes=16)
    fake = b"SCKP" + struct.pack("<II", 1, 5) + bytes(20)  # the 32 bytes of the two cells' K rows
    st = dataclasses.replace(st, rows=(dataclasses.replace(st.rows[0], data=fake), st.rows[1]))
    state = encoded("kv", 3, kv_part("kv", st))
    data = write_slot_file([1, 2], state)
    scan = read_slot_file(data)
    assert scan.appendix_status != "absent" and scan.state_bytes < len(state)  # the scan's documented limit
    start, _ = state_of(data)
    lay = parse_state(data, start, 3)
    exact = read_slot_file(data, state_size=lay.size)
    assert exact.appendix_status == "absent" and exact.state == state and exact.n_read == len(data)


# --- inspect --------------------------------------------------------------------------------------


def test_inspect_a_cut_recurrent_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = real("mamba-a.bin")
    for cut, field in ((3000, "r rows of layer 0"), (21000, "s rows of layer 1")):
        path = tmp_path / f"cut-{cut}.bin"
        path.write_bytes(data[:cut])
        line = one_line_error(capsys, ["slotfile", "inspect", str(path)])
        assert f"cut-{cut}.bin: byte {cut}: the file ends inside the recurrent part, {field}" in line
        assert "read as the recurrent layout, state-sequence version 3" in line


@pytest.mark.parametrize("name", REAL_FILES)
def test_inspect_a_cut_or_an_overwrite_in_every_real_file(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = real(name)
    lay = real_layout(name)
    path = tmp_path / name
    for part in lay.parts:
        cut = (part.offset + part.end) // 2
        path.write_bytes(data[:cut])
        assert f"byte {cut}: the file ends inside the " in one_line_error(capsys, ["slotfile", "inspect", str(path)])
        n_layer_at = next(o for n, o, _ in parse_state(data, lay.offset, 3).fields
                          if n.startswith(f"{part.role} part") and n.endswith("n_layer"))
        bad = bytearray(data)
        struct.pack_into("<I", bad, n_layer_at, 0)
        path.write_bytes(bytes(bad))
        line = one_line_error(capsys, ["slotfile", "inspect", str(path)])
        assert f"byte {n_layer_at}: " in line and "n_layer is 0" in line


@pytest.mark.parametrize(("name", "needles"), [
    ("kv-a.bin", ["state layout            kv (state-sequence version 3 layout)",
                  "kv part: 22072 bytes at 196..22267: 42 cells of sequence 0, positions 0..41; v_trans 0; n_layer 2",
                  "k rows: 2 layers x 128 bytes a cell (f16, 64 elements)"]),
    ("kv-vtrans.bin", ["v_trans 1", "v rows: 2 layers x 128 bytes a cell (f16, 64 elements, transposed)"]),
    ("kv-streams.bin", ["kv part: 22076 bytes at 196..22271: 2 streams", "stream 0: no cells",
                        "stream 1: 42 cells of sequence 1"]),
    ("swa-a.bin", ["state layout            iswa", "base part: 22072 bytes at 196..22267: 42 cells",
                   "swa part: 16832 bytes at 22268..39099: 32 cells of sequence 0, positions 10..41"]),
    ("hybrid-a.bin", ["state layout            hybrid", "attention part: 22072 bytes",
                      "recurrent part: 19524 bytes at 22268..41791: 1 cell, positions 41; s_trans 0; n_layer 4",
                      "r rows: 2 layers x 1536 bytes a cell (f32, 384 elements)"]),
    ("mamba-a.bin", ["recurrent part: 19524 bytes at 2436..21959: 1 cell, positions 601; s_trans 0; n_layer 2",
                     "s rows: 2 layers x 8192 bytes a cell (f32, 2048 elements)",
                     "state-sequence version  3 (written and read by the October tree (0c1e570) only; "
                     "version 4: b11434, b11549)"]),
])
def test_inspect_shows_the_layout(name: str, needles: list[str], tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / name
    path.write_bytes(real(name))
    assert main(["slotfile", "inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "(end found by parsing the layout)" in out
    for needle in needles:
        assert needle in out, (needle, out)


def test_inspect_version_4_and_its_appendix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "v4.bin"
    path.write_bytes(slot_file("hybrid-a.bin", 4, CKPTS))
    assert main(["slotfile", "inspect", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["state_version"] == 4 and doc["state_version_builds"] == ["b11434", "b11549"]
    assert doc["state"]["layout"]["kind"] == "hybrid" and doc["state"]["layout"]["version"] == 4
    assert doc["state"]["layout"]["parts"][0]["streams"][0]["n_rot"] == [0, 0]
    assert doc["appendix"]["status"] == "valid" and doc["appendix"]["builds"] == ["b11549"]
    assert doc["appendix"]["offset"] == doc["state"]["offset"] + doc["state"]["bytes"]
    assert main(["slotfile", "inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "4 (written and read from b11434 on, checked up to b11549; version 3: the October tree (0c1e570))" in out
    assert "n_rot_k 0, n_rot_v 0" in out and "appendix readers        b11549" in out


def test_inspect_expect_version(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "m.bin"
    path.write_bytes(real("mamba-a.bin"))
    assert main(["slotfile", "inspect", str(path), "--expect-version", "3"]) == 0
    capsys.readouterr()
    line = one_line_error(capsys, ["slotfile", "inspect", str(path), "--expect-version", "4"])
    assert "m.bin: byte 4: state-sequence version 3, but this build reads 4" in line and RESTORE_LOAD_FAILED in line


def test_inspect_other_states(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # version 2: no layout known, the end is found by scanning; the model's own symbolic state:
    # read by its length field; an unknown blob: no layout reads it
    path = tmp_path / "s.bin"
    path.write_bytes(write_slot_file([1, 2], b"STATE-BLOB", state_version=2))
    assert main(["slotfile", "inspect", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["state"]["located"] == "scan"
    srv = Server(Config(n_slots=1, n_ctx_slot=64, n_batch=16, n_ubatch=4, cache_ram=-1), get_design("fixed"))
    srv.request(tuple(range(1, 20)), n_predict=1)
    srv.run()
    srv.slot_action("save", 0, "f.bin")
    path.write_bytes(srv.files["f.bin"])
    assert main(["slotfile", "inspect", str(path)]) == 0
    assert "the model's symbolic state, not a llama.cpp state" in capsys.readouterr().out
    path.write_bytes(write_slot_file([1, 2], b"STATE-BLOB"))
    assert "s.bin: byte 36: " in one_line_error(capsys, ["slotfile", "inspect", str(path)])
