"""PERF-2 on the binaries: a task that resumes from a checkpoint re-creates it at once, with the
same data (route ``supersede``; the #30137 review, #30683).

A 5-token prompt on the recurrent model leaves a checkpoint at ``n_tokens`` 1; the prompt
``[1 2]`` shares both tokens, cannot resume from the live state (it is at position 7, and a
recurrent state does not roll back here: ``n_rs_seq`` 0), restores that checkpoint
(``n_past`` 1), and the checkpoint its batch then takes is at ``n_tokens`` 1 again: the
C++ designs supersede the restored one with a copy of the same state (create_checkpoint,
server-context.cpp:2320-2331 at 0c1e570, 2731-2742 of b11549). ``fixed``'s patch 0013 keeps the
checkpoint the task restored and creates none. Both answer as the uncached prompt does; the
model of each build says the same, and PERF-2 only of the C++ designs.

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

FLAGS = Flags(n_slots=1, n_ctx=512, n_batch=64, n_ubatch=64, cache_ram_mib=0, ctx_checkpoints=4,
              checkpoint_min_step=0)
FACTS = ServerFacts(1, 512, None)
PROMPTS = ([1, 2, 3, 4, 5], [1, 2])
RESTORED = "restored context checkpoint (pos_min = 0, pos_max = 0, n_tokens = 1, n_past = 1"
SUPERSEDED = "superseding context checkpoint at n_tokens = 1"
KEPT = "keeping the restored context checkpoint at n_tokens = 1 instead of re-creating it"


def _model(build: str) -> tuple[list[int], int, list[str]]:
    """The model of the build: the tokens each prompt takes from the slot, the checkpoints the
    second task creates, and PERF-2's messages."""
    srv, found = model_of(build, "recurrent", FLAGS, FACTS, PROMPTS, ["PERF-2"])
    cached = [e.n_past for e in srv.heap.events if isinstance(e, ev.PromptStart)]
    created = [e for e in srv.heap.events if isinstance(e, ev.CkptCreate) and e.task != 0]
    return cached, len(created), found


@pytest.mark.parametrize("build", list(BUILD_RULES))
def test_the_restored_checkpoint_is_re_created_except_on_fixed(build: str, tmp_path: Path) -> None:
    cached, created, violated = _model(build)
    binary = build_or_skip(build)
    server = ServerProcess(binary, ensure_model("recurrent", tmp_path / "models"), FLAGS, tmp_path, name="s")
    with server:
        client = Client(server.url, timeout=30)
        replies = [client.completion(p, n_predict=3) for p in PROMPTS]
        uncached = client.completion(PROMPTS[-1], n_predict=3, cache_prompt=False)
    log = server.log_bytes().decode("utf-8", "replace")
    assert read_facts(log) == FACTS
    assert all(r.ok for r in (*replies, uncached)), [r.error for r in (*replies, uncached)]
    assert RESTORED in log
    assert [r.data["timings"]["cache_n"] for r in replies] == cached == [0, 1]
    assert replies[-1].data["tokens"] == uncached.data["tokens"]
    assert close_logprobs(top_logprobs(replies[-1]), top_logprobs(uncached))
    if build == "fixed":  # patch 0013: kept, nothing created
        assert KEPT in log and SUPERSEDED not in log
        assert created == 0 and violated == []
        return
    assert SUPERSEDED in log and KEPT not in log
    assert log.count("created context checkpoint 1 of 4 (pos_min = 0, pos_max = 0, n_tokens = 1,") == 2
    assert created == 1
    assert any(v.startswith("PERF-2: ") for v in violated), violated
