"""CKPT-1 and STATE-1 on the binaries: a slot file whose tokens marker was changed, restored, and a
prompt extending what it installed (route ``tokens-marker`` of docs/PROPERTIES.md).

A slot file's token list is packed (server_tokens::serialize, server-common.cpp:571-591 at
0c1e570: the marker ``LLAMA_TOKEN_NULL``, a version, the count, the tokens, the media keys'
count). With another marker, ``server_tokens::deserialize`` (595-599) takes the words for a plain
legacy list, four longer than the tokens the state holds, and the restore (server-context.cpp:
2596-2620) installs them without comparing. The next prompt that extends those words takes a
checkpoint whose ``n_tokens`` is the list's and whose ``pos_max`` is the memory's
(create_checkpoint, 2337-2352), then the decoder refuses the batch, whose positions do not go
on from the memory's last one (src/llama-batch.cpp:322-346), and the task is answered ``Invalid
input batch.`` (server-context.cpp:3669-3703). ``fixed``'s patch 0010 refuses the file instead.

The model of each build (the recurrent model's configuration, the build's rule set) runs the same
operations and must say the same: the checkpoint's fields, the refused batch, or the refused file.

Each test skips when its design's build is not cached (``pcspec build --design D``).
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

from pcspec.live.schedule import ServerFacts, read_facts

pytestmark = pytest.mark.live
pytest.importorskip("gguf", reason="pip install gguf (the live models are made with it)")

from pcspec.live import calibrate  # noqa: E402
from pcspec.live.client import Client  # noqa: E402
from pcspec.live.models import ensure_model  # noqa: E402
from pcspec.live.process import Flags, ServerProcess  # noqa: E402
from pcspec.model import events as ev  # noqa: E402
from pcspec.model.server import Server  # noqa: E402
from pcspec.properties.catalogue import get_property  # noqa: E402
from pcspec.properties.judge import Judge  # noqa: E402
from tests.support.live import build_or_skip  # noqa: E402

FLAGS = Flags(n_slots=1, n_ctx=512, n_batch=64, n_ubatch=64, cache_ram_mib=0, ctx_checkpoints=4,
              checkpoint_min_step=8)
FACTS = ServerFacts(1, 512, None)
A40 = list(range(100, 140))
MORE = [77, 78]
TOKENS_AT = 12  # the token words follow the header: magic, state version, n_token_count (u32 each)
CREATED = re.compile(r"created context checkpoint \d+ of \d+ \(pos_min = (-?\d+), pos_max = (-?\d+), n_tokens = (\d+)")
REFUSED = "inconsistent sequence positions"




def _marker_changed(path: Path) -> list[int]:
    """Set the file's tokens marker to 0; the words the changed file's token list now reads as."""
    data = bytearray(path.read_bytes())
    (n_words,) = struct.unpack_from("<I", data, TOKENS_AT - 4)
    struct.pack_into("<i", data, TOKENS_AT, 0)
    path.write_bytes(bytes(data))
    return list(struct.unpack_from(f"<{n_words}i", data, TOKENS_AT))


def _model(design: str) -> tuple[Server, list[str]]:
    """The model of ``design``'s build on the workload, and CKPT-1's and STATE-1's messages."""
    srv = Server(calibrate.model_config("recurrent", FLAGS, FACTS),
                 calibrate.variant(calibrate.design_rules(design, "0c1e570")))
    judge = Judge(srv, [get_property("CKPT-1"), get_property("STATE-1")])
    srv.request(tuple(A40), n_predict=3)
    srv.run()
    srv.slot_action("save", 0, "a.bin")
    srv.corrupt_file("a.bin", 0, b"", field="tokens marker", value=0)
    found = judge()
    srv.slot_action("restore", 0, "a.bin")
    found += judge()
    srv.request((*srv.slots[0].prompt.tokens, *MORE), n_predict=3)
    srv.run()
    found += judge()
    return srv, [f"{v.rule}: {v.message}" for v in found]


@pytest.mark.parametrize("design", ["baseline", "pr30137", "pr27451", "fixed"])
def test_a_changed_tokens_marker_is_installed_except_on_fixed(design: str, tmp_path: Path) -> None:
    srv, violated = _model(design)
    events = srv.heap.events
    binary = build_or_skip(design)
    server = ServerProcess(binary, ensure_model("recurrent", tmp_path / "models"), FLAGS, tmp_path, name="s")
    with server:
        client = Client(server.url, timeout=30)
        first = client.completion(A40, n_predict=3)
        saved = client.slot_action(0, "save", "a.bin")
        words = _marker_changed(server.slot_dir / "a.bin")
        restored = client.slot_action(0, "restore", "a.bin")
        extended = client.completion([*words, *MORE], n_predict=3)
        after = client.completion([*A40, *MORE], n_predict=3)  # the server still answers
    log = server.log_bytes().decode("utf-8", "replace")
    assert read_facts(log) == FACTS
    assert first.ok and saved.ok and after.ok, [r.error for r in (first, saved, after)]
    n_saved = saved.data["n_saved"]  # the 40 prompt tokens and the 2 decoded of the 3 generated
    assert len(words) == n_saved + 4 and words[:3] == [0, 1, n_saved]
    created = [tuple(map(int, m.groups())) for m in CREATED.finditer(log)]
    model_created = [(e.pos_min, e.pos_max, e.n_tokens) for e in events if isinstance(e, ev.CkptCreate)]
    if design == "fixed":  # patch 0010: the file is refused and the slot cleared
        why = f"the state holds {n_saved} positions but the file has {n_saved + 4} tokens"
        assert not restored.ok and why in restored.error, restored.error
        assert [e.reason for e in events if isinstance(e, ev.FileRestoreFailed)] == [why]
        assert extended.ok and REFUSED not in log
        assert all(pos_max == n_tokens - 1 for _, pos_max, n_tokens in created), created
        assert violated == []
        return
    # the words are installed over the state of the n_saved tokens the file holds
    assert restored.ok and restored.data["n_restored"] == len(words)
    bad = (n_saved - 1, n_saved - 1, len(words))  # a recurrent state: pos_min == pos_max
    assert bad in created and bad in model_created, (created, model_created)
    assert not extended.ok and "Invalid input batch." in extended.error, extended.error
    assert REFUSED in log
    refused = [e for e in events if isinstance(e, ev.DecodeRefused)]
    assert [(e.context, e.pos_max, e.start) for e in refused] == [("tgt", n_saved - 1, len(words))]
    assert any(isinstance(e, ev.Release) and e.error == "Invalid input batch." for e in events)
    assert any(v.startswith("CKPT-1: ") for v in violated), violated
    assert any(v.startswith("STATE-1: ") for v in violated), violated
