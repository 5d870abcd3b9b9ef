"""IMM-2 and STATE-1 on the fault-point builds: a prompt-cache load whose draft half fails leaves an
emptied entry in the cache, and a later load of it answers wrongly (docs/FINDINGS.md, F10).

``server_prompt_cache::load`` (server-task.cpp:1825-1865 at 0c1e570) restores an entry's target
state, clears it (``data.clear()``), then restores the draft state; a failed draft restore
returns false with the entry still in the cache, its target state gone (IMM-2). The caller clears
the slot and processes the prompt from 0. A later task choosing the same entry "loads" its empty
target state, which changes nothing (a 0-byte ``llama_state_seq_set_data_ext`` returns 0, the
size it was given), and takes over its tokens: the slot bookkeeps the entry's 42 tokens over the
memory of the prompt it held before (STATE-1), reuses 40 of them, and answers differently from
the same prompt processed from 0. ``fixed``'s patch 0007 drops the entry whose load fails, so the
later task loads the other entry, and its answer is the uncached one.

The draft load is the second full state read of the run (``LLAMA_FAULTS=state.read.full@2``,
patches/faults/0001: the first cache load's target read is the first), the model's
``load.write.dft``. Each test skips when its design's fault build is not cached
(``pcspec build --design D --faults``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pcspec.live.schedule import ServerFacts, read_facts

pytestmark = pytest.mark.live
pytest.importorskip("gguf", reason="pip install gguf (the live models are made with it)")

from pcspec.live import calibrate  # noqa: E402
from pcspec.live.client import Client, top_logprobs  # noqa: E402
from pcspec.live.models import ensure_model  # noqa: E402
from pcspec.live.process import Flags, ServerProcess  # noqa: E402
from pcspec.model import events as ev  # noqa: E402
from pcspec.model.config import MemoryKind  # noqa: E402
from pcspec.model.server import Server  # noqa: E402
from pcspec.properties.catalogue import get_property  # noqa: E402
from pcspec.properties.judge import Judge  # noqa: E402
from tests.support.live import build_or_skip  # noqa: E402

BASE = Flags(n_slots=1, n_ctx=512, n_batch=64, n_ubatch=64, cache_ram_mib=8, ctx_checkpoints=4,
             checkpoint_min_step=8)
FACTS = ServerFacts(1, 512, None)
A40, B40, C40 = list(range(100, 140)), list(range(150, 190)), list(range(20, 60))
# A, B (A saved), A extended (B saved, A's entry loaded: its draft read fails), C (the extension
# saved), A extended otherwise (C saved, an entry of A loaded)
PROMPTS = (A40, B40, [*A40, 1, 2], C40, [*A40, 3, 4])
FAULTED = 2  # the prompt whose cache load meets the fault
ENV = {"LLAMA_FAULTS": "state.read.full@2"}




def _model(design: str) -> tuple[int, list[str]]:
    """The model of ``design``'s build with a KV draft context and the draft load failing: the
    tokens the last prompt takes from the cache, and IMM-2's and STATE-1's messages."""
    cfg = replace(calibrate.model_config("kv", BASE, FACTS), has_draft=True, draft_memory=MemoryKind.KV).validate()
    srv = Server(cfg, calibrate.variant(calibrate.design_rules(design, "0c1e570")))
    judge = Judge(srv, [get_property("IMM-2"), get_property("STATE-1")])
    found = []
    for i, tokens in enumerate(PROMPTS):
        if i == FAULTED:
            srv.inject("load.write.dft")
        srv.request(tuple(tokens), n_predict=3)
        srv.run()
        found += judge()
    start = [e for e in srv.heap.events if isinstance(e, ev.PromptStart)][-1]
    return start.n_past, [f"{v.rule}: {v.message}" for v in found]


@pytest.mark.parametrize("design", ["baseline", "pr30137", "pr27451", "fixed"])
def test_a_failed_draft_load_leaves_an_emptied_entry_that_answers_wrongly(design: str, tmp_path: Path) -> None:
    n_past, violated = _model(design)
    models = tmp_path / "models"
    flags = replace(BASE, extra=("-md", str(ensure_model("kv", models)), "--spec-type", "draft-simple",
                                 "--spec-draft-n-max", "4"))
    binary = build_or_skip(design, faults=True)
    server = ServerProcess(binary, ensure_model("kv", models), flags, tmp_path, name="s", env=ENV)
    with server:
        client = Client(server.url, timeout=30)
        replies = [client.completion(p, n_predict=3) for p in PROMPTS]
        reference = client.completion(PROMPTS[-1], n_predict=3, cache_prompt=False)
    log = server.log_bytes().decode("utf-8", "replace")
    assert read_facts(log) == FACTS
    assert all(r.ok for r in (*replies, reference)), [r.error for r in (*replies, reference)]
    assert "(draft: 0.021 MiB)" in log  # a draft state reaches the cache
    assert "fault point 'state.read.full' fired at call 2" in log and "failed to restore state" in log
    last = replies[-1]
    assert last.data["timings"]["cache_n"] == n_past == 40
    if design == "fixed":  # patch 0007: the entry is dropped, the other entry of A is loaded
        assert top_logprobs(last) == top_logprobs(reference)
        assert violated == []
        return
    # the emptied entry is loaded over C's memory: another answer than the uncached one
    assert top_logprobs(last)[0] != top_logprobs(reference)[0]
    assert any(v.startswith("IMM-2: ") for v in violated), violated
    assert any(v.startswith("STATE-1: ") for v in violated), violated
