"""STATE-1 of the draft context on the binaries: a slot file restored on a server with a draft
model leaves the draft behind, and every later request extending the restored tokens fails
(docs/FINDINGS.md, F9).

The restore (server-context.cpp:2596-2620 at 0c1e570) loads the file's state into the target
context only; the draft context keeps what the slot held before (here a 5-token prompt, 7
positions). The next prompt extending the restored 32 tokens resumes at 30 on both contexts
(``common_memory::seq_rm`` removes nothing from the draft's 7), the target decodes the batch,
and the draft refuses it: its positions do not go on from the draft's last one (src/
llama-batch.cpp:322-346). ``common_speculative_process`` fails, the thrown ``failed to process
speculative batch`` reaches ``abort_all_slots`` (server-context.cpp:3725-3735, 2735-2742,
2868-2874), which answers and releases the slot without clearing it, so the next request fails
the same way. ``fixed``'s patch 0011 (seam ``resync_draft_on_file_restore``) decodes the restored
tokens into the draft context at the restore: both extensions are answered, as they are when
processed from 0. The model of each build, given the same operations, refuses the same batches
with the same answers, or none.

Each test skips when its design's build is not cached (``pcspec build --design D``).
"""

from __future__ import annotations

from dataclasses import replace
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
from pcspec.model.config import MemoryKind  # noqa: E402
from pcspec.model.server import Server  # noqa: E402
from pcspec.properties.catalogue import get_property  # noqa: E402
from pcspec.properties.judge import Judge  # noqa: E402
from tests.support.live import build_or_skip  # noqa: E402

BASE = Flags(n_slots=1, n_ctx=512, n_batch=64, n_ubatch=64, cache_ram_mib=0, ctx_checkpoints=4,
             checkpoint_min_step=8)
FACTS = ServerFacts(1, 512, None)
L30 = list(range(100, 130))
S5 = list(range(200, 205))
EXTENSIONS = ([50, 51, 52], [60, 61])
FAILED = "decode() failed: failed to process speculative batch"
REFUSED = "inconsistent sequence positions"




def _model(design: str) -> tuple[list[str | None], list[str]]:
    """The model of ``design``'s build with a KV draft context: the error of each extending
    request (None: answered) and STATE-1's messages."""
    cfg = replace(calibrate.model_config("kv", BASE, FACTS), has_draft=True, draft_memory=MemoryKind.KV).validate()
    srv = Server(cfg, calibrate.variant(calibrate.design_rules(design, "0c1e570")))
    judge = Judge(srv, [get_property("STATE-1")])
    found = []
    for tokens in (L30, None, S5, "restore"):
        if tokens is None:
            srv.slot_action("save", 0, "f.bin")
        elif tokens == "restore":
            srv.slot_action("restore", 0, "f.bin")
        else:
            srv.request(tuple(tokens), n_predict=3)
            srv.run()
        found += judge()
    errors: list[str | None] = []
    for more in EXTENSIONS:
        srv.request((*L30, *more), n_predict=3)
        srv.run()
        found += judge()
        errors.append([e for e in srv.heap.events if isinstance(e, ev.Release)][-1].error)
    return errors, [v.message for v in found]


@pytest.mark.parametrize("design", ["baseline", "pr30137", "pr27451", "fixed"])
def test_a_file_restore_leaves_the_draft_behind_and_later_requests_fail(design: str, tmp_path: Path) -> None:
    errors, violated = _model(design)
    models = tmp_path / "models"
    flags = replace(BASE, extra=("-md", str(ensure_model("kv", models)), "--spec-type", "draft-simple",
                                 "--spec-draft-n-max", "4"))
    binary = build_or_skip(design)
    server = ServerProcess(binary, ensure_model("kv", models), flags, tmp_path, name="s")
    with server:
        client = Client(server.url, timeout=30)
        first = client.completion(L30, n_predict=3)
        saved = client.slot_action(0, "save", "f.bin")
        other = client.completion(S5, n_predict=3)
        restored = client.slot_action(0, "restore", "f.bin")
        extended = [client.completion([*L30, *more], n_predict=3) for more in EXTENSIONS]
        fresh = client.completion([*S5, 9], n_predict=3)  # a prompt sharing nothing is processed from 0
        uncached = [client.completion([*L30, *more], n_predict=3, cache_prompt=False) for more in EXTENSIONS]
    log = server.log_bytes().decode("utf-8", "replace")
    assert read_facts(log) == FACTS
    answered = (first, saved, other, restored, fresh, *uncached)
    assert all(r.ok for r in answered), [r.error for r in answered]
    assert saved.data["n_saved"] == restored.data["n_restored"] == 32
    if design == "fixed":  # patch 0011: the draft re-decodes the restored tokens
        assert errors == [None, None] and violated == []
        assert all(r.ok and r.data["timings"]["cache_n"] == 30 for r in extended), [r.error for r in extended]
        assert [r.data["tokens"] for r in extended] == [r.data["tokens"] for r in uncached]
        assert REFUSED not in log
        return
    assert [None if r.ok else FAILED for r in extended] == errors == [FAILED, FAILED]
    assert all(FAILED in r.error for r in extended), [r.error for r in extended]
    assert log.count(REFUSED) == 2 and "failed to decode draft batch" in log
    assert any("context dft memory holds 7 tokens" in v for v in violated), violated
