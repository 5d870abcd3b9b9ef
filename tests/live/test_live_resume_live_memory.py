"""REUSE-1 on the binaries: on an SWA model, a prompt that shares fewer tokens with the slot than
the window is re-processed from 0, although the slot's memory holds every cell of the shared
prefix (route ``live-memory-test``).

The C++ designs resume from live memory only when ``pos_min < pos_min_thold``, ``pos_min_thold =
max(0, pos_next - n_swa)`` (server-context.cpp:3274-3278 and 3330 at 0c1e570, the same test in
b11549): with ``pos_next <= n_swa`` the threshold is 0 and no memory passes; the scan then looks
for a checkpoint, and the one the first prompt left (at ``n_tokens`` 36) is past the shared
prefix: ``forcing full prompt re-processing``. The tiny SWA model has a window of 32; a 40-token
prompt, then one sharing its first 20 tokens: ``cache_n`` 0. ``fixed``'s patch 0014 resumes from
the state that keeps most, judged by what the window needs (the memory starts at position 0):
``cache_n`` 20, and the answer is the uncached one. The model of each build says the same, and
REUSE-1 only of the C++ designs.

Each test skips when its build is not cached (``pcspec build --design D``, or
``--tree b11549``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pcspec.live.schedule import ServerFacts, read_facts

pytestmark = pytest.mark.live
pytest.importorskip("gguf", reason="pip install gguf (the live models are made with it)")

from pcspec.live.client import Client, top_logprobs  # noqa: E402
from pcspec.live.models import ensure_model  # noqa: E402
from pcspec.live.process import Flags, ServerProcess  # noqa: E402
from pcspec.model import events as ev  # noqa: E402
from tests.support.live import BUILD_RULES, build_or_skip, close_logprobs, model_of  # noqa: E402

FLAGS = Flags(n_slots=1, n_ctx=512, n_batch=64, n_ubatch=64, cache_ram_mib=0, ctx_checkpoints=8,
              checkpoint_min_step=0)
FACTS = ServerFacts(1, 512, 256)
PROMPTS = (list(range(1, 41)), [*range(1, 21), 200, 201, 202])
FORCED = "forcing full prompt re-processing"


def _model(build: str) -> tuple[list[int], list[str]]:
    """The model of the build: the tokens each prompt takes from the slot, and REUSE-1's messages."""
    srv, found = model_of(build, "swa", FLAGS, FACTS, PROMPTS, ["REUSE-1"])
    return [e.n_past for e in srv.heap.events if isinstance(e, ev.PromptStart)], found


@pytest.mark.parametrize("build", list(BUILD_RULES))
def test_a_short_shared_prefix_is_re_processed_except_on_fixed(build: str, tmp_path: Path) -> None:
    cached, violated = _model(build)
    binary = build_or_skip(build)
    server = ServerProcess(binary, ensure_model("swa", tmp_path / "models"), FLAGS, tmp_path, name="s")
    with server:
        client = Client(server.url, timeout=30)
        replies = [client.completion(p, n_predict=3) for p in PROMPTS]
        uncached = client.completion(PROMPTS[-1], n_predict=3, cache_prompt=False)
    log = server.log_bytes().decode("utf-8", "replace")
    assert read_facts(log) == FACTS
    assert all(r.ok for r in (*replies, uncached)), [r.error for r in (*replies, uncached)]
    assert [r.data["timings"]["cache_n"] for r in replies] == cached
    assert replies[-1].data["tokens"] == uncached.data["tokens"]
    assert close_logprobs(top_logprobs(replies[-1]), top_logprobs(uncached))
    if build == "fixed":  # patch 0014: resumed from the slot's memory
        assert "resuming from the memory of the slot (n_past = 20)" in log and FORCED not in log
        assert cached == [0, 20] and violated == []
        return
    assert FORCED in log and cached == [0, 0]
    assert any(v.startswith("REUSE-1: ") for v in violated), violated
