"""FILE-1 on the November binaries: a slot file's checkpoint appendix whose record was changed in
place still parses, and only ``fixed``'s appendix check (patches/fixed-november/0015) refuses it.

The November server (b11549 with #30137 merged: docs/DESIGNS.md, "The November server") writes the
slot's checkpoints after the state (#26004) and reads them back, checking the appendix's magic,
version, count, that each length fits the file and that each record has a target state
(server-context.cpp:2669-2713 of b11549, adapted by #30137). A record whose ``pos_min`` was set
below its ``pos_max`` parses, and is installed as a checkpoint of a recurrent model, whose state is
one position. ``fixed@november`` checks the records against the restored slot
(``Fixed.file_checkpoint_refused``) and ignores the whole appendix, with the reason; the slot keeps
its tokens and state.

The model of each build runs the same operations and must say the same: the appendix installed, or
ignored. A round trip of an unchanged file restores the checkpoints on both (FILE-1's first half).

Each test skips when its design's build is not cached (``pcspec build --design D``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.live
pytest.importorskip("gguf", reason="pip install gguf (the live models are made with it)")

from pcspec.live import calibrate  # noqa: E402
from pcspec.live.client import Client  # noqa: E402
from pcspec.live.models import ensure_model  # noqa: E402
from pcspec.live.process import Flags, ServerProcess  # noqa: E402
from pcspec.live.schedule import ServerFacts, read_facts  # noqa: E402
from pcspec.model import events as ev  # noqa: E402
from pcspec.model.server import Server  # noqa: E402
from pcspec.model.slotfile import field_map, read_slot_file  # noqa: E402
from pcspec.properties.catalogue import get_property  # noqa: E402
from pcspec.properties.judge import Judge  # noqa: E402
from tests.support.live import build_or_skip  # noqa: E402

FLAGS = Flags(n_slots=1, n_ctx=512, n_batch=64, n_ubatch=64, cache_ram_mib=0, ctx_checkpoints=4,
              checkpoint_min_step=8)
FACTS = ServerFacts(1, 512, None)
A40 = list(range(100, 140))
OTHER = [207, 208, 209]
RESTORED = "context checkpoint(s) from "
IGNORED = "invalid context checkpoint appendix in"
WHY = "does not fit the slot"


def _pos_min_field(raw: bytes) -> tuple[int, int]:
    """The offset of the first record's ``pos_min`` and the value that breaks it (its ``pos_max``
    minus one: a recurrent checkpoint is one position)."""
    f = read_slot_file(raw, "a.bin")
    assert f.checkpoints, "the file has no checkpoint"
    (offset,) = [at for name, at, _w in field_map(f) if name == "ckpt 0 pos_min"]
    return offset, f.checkpoints[0].pos_max - 1


def _model(design: str, corrupt: int | None) -> tuple[Server, list[str]]:
    """The model of ``design``'s build on the workload, and FILE-1's messages."""
    variant = calibrate.variant(design)
    srv = Server(calibrate.model_config("recurrent", FLAGS, FACTS, state_seq_version=variant.rules.state_seq_version),
                 variant)
    judge = Judge(srv, [get_property("FILE-1"), get_property("STATE-1")])
    srv.request(tuple(A40), n_predict=3)
    srv.run()
    srv.slot_action("save", 0, "a.bin")
    found = judge()
    if corrupt is not None:
        srv.corrupt_file("a.bin", 0, b"", field="ckpt 0 pos_min", value=corrupt)
    srv.request(tuple(OTHER), n_predict=3)
    srv.run()
    srv.slot_action("restore", 0, "a.bin")
    found += judge()
    srv.request((*A40[:30], 77, 78), n_predict=3)
    srv.run()
    found += judge()
    return srv, [f"{v.rule}: {v.message}" for v in found]


@pytest.mark.parametrize("design", ["pr30137@november", "fixed@november"])
@pytest.mark.parametrize("changed", [False, True], ids=["unchanged", "pos-min-changed"])
def test_an_appendix_record_changed_in_place_is_refused_only_by_fixed(design: str, changed: bool,
                                                                       tmp_path: Path) -> None:
    binary = build_or_skip(design)
    server = ServerProcess(binary, ensure_model("recurrent", tmp_path / "models"), FLAGS, tmp_path, name="s")
    corrupt: int | None = None
    with server:
        client = Client(server.url, timeout=30)
        first = client.completion(A40, n_predict=3)
        saved = client.slot_action(0, "save", "a.bin")
        path = server.slot_dir / "a.bin"
        n_records = len(read_slot_file(path.read_bytes(), "a.bin").checkpoints or [])
        if changed:
            offset, corrupt = _pos_min_field(path.read_bytes())
            raw = bytearray(path.read_bytes())
            raw[offset:offset + 4] = corrupt.to_bytes(4, "little", signed=True)
            path.write_bytes(bytes(raw))
        other = client.completion(OTHER, n_predict=3)
        restored = client.slot_action(0, "restore", "a.bin")
        resumed = client.completion([*A40[:30], 77, 78], n_predict=3)
    log = server.log_bytes().decode("utf-8", "replace")
    assert "build 11549 (november)" in log or "build: 11549 (november)" in log or read_facts(log) == FACTS
    assert first.ok and saved.ok and other.ok and resumed.ok, [r.error for r in (first, saved, other, resumed)]
    assert restored.ok and restored.data["n_restored"] == len(A40) + 2  # the prompt and 2 of 3 decoded
    srv, violated = _model(design, corrupt)
    ignored = [e.reason for e in srv.heap.events if isinstance(e, ev.FileAppendixIgnored)]
    refused = changed and design.startswith("fixed")
    if refused:  # 0015: the whole appendix ignored, with the reason, the slot kept
        assert WHY in log and IGNORED in log and f"restored {n_records} {RESTORED}" not in log
        assert len(ignored) == 1 and "pos_min == pos_max" in ignored[0], ignored
    else:  # the records are installed as they read
        assert n_records > 0 and f"restored {n_records} {RESTORED}" in log and IGNORED not in log
        assert ignored == []
    assert violated == [], violated
