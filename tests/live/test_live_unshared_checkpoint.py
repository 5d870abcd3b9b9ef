"""RESTORE-1 and STATE-1 on the binaries: a checkpoint whose last position is the first one a new
prompt does not share survives the prompt start, and a later prompt restores it: a wrong answer
with no error logged (docs/FINDINGS.md, F11; route ``unshared-last-position``).

At a prompt start the October tree and b11549 erase the checkpoints with ``pos_max > pos_next``
only (server-context.cpp:3367-3378 at 0c1e570, 3776-3786 of b11549). A 5-token prompt leaves a
checkpoint at ``n_tokens`` 1 (``pos_max`` 0: the state of its first token) on the recurrent
model; a prompt sharing nothing is processed from 0, so ``pos_next`` is 0 and the checkpoint is
kept; a prompt sharing the second prompt's first token restores it and decodes on the state of
another token. ``fixed``'s patch 0012 also erases ``n_tokens > n_prefix`` (the November rule):
the third prompt is processed from 0 and answers as it does uncached. The model of each build
says the same: the same restore, and the same verdicts.

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
from tests.support.live import BUILD_RULES, build_or_skip, model_of  # noqa: E402

FLAGS = Flags(n_slots=1, n_ctx=512, n_batch=64, n_ubatch=64, cache_ram_mib=0, ctx_checkpoints=4,
              checkpoint_min_step=0)
FACTS = ServerFacts(1, 512, None)
PROMPTS = ([1, 2, 3, 4, 5], [207], [207, 210])
RESTORED = "restored context checkpoint (pos_min = 0, pos_max = 0, n_tokens = 1, n_past = 1"




def _model(build: str) -> tuple[list[int], list[str]]:
    """The model of the build: the tokens each prompt takes from the slot, and RESTORE-1's and
    STATE-1's messages."""
    srv, found = model_of(build, "recurrent", FLAGS, FACTS, PROMPTS, ["RESTORE-1", "STATE-1"])
    return [e.n_past for e in srv.heap.events if isinstance(e, ev.PromptStart)], found


@pytest.mark.parametrize("build", list(BUILD_RULES))
def test_a_checkpoint_of_an_unshared_token_is_restored_except_on_fixed(build: str, tmp_path: Path) -> None:
    cached, violated = _model(build)
    binary = build_or_skip(build)
    server = ServerProcess(binary, ensure_model("recurrent", tmp_path / "models"), FLAGS, tmp_path, name="s")
    with server:
        client = Client(server.url, timeout=30)
        replies = [client.completion(p, n_predict=3) for p in PROMPTS]
        uncached = client.completion(PROMPTS[-1], n_predict=3, cache_prompt=False)
    log = server.log_bytes().decode("utf-8", "replace")
    assert read_facts(log) == FACTS
    assert all(r.ok for r in (*replies, uncached)), [r.error for r in (*replies, uncached)]
    assert "created context checkpoint 1 of 4 (pos_min = 0, pos_max = 0, n_tokens = 1," in log
    assert [r.data["timings"]["cache_n"] for r in replies] == cached
    if build == "fixed":  # patch 0012: erased at the second prompt's start
        assert "erased invalidated context checkpoint (pos_min = 0, pos_max = 0, n_tokens = 1," in log
        assert RESTORED not in log and cached == [0, 0, 0]
        assert replies[-1].data["tokens"] == uncached.data["tokens"]
        assert top_logprobs(replies[-1]) == top_logprobs(uncached)
        assert violated == []
        return
    # kept, then restored under the token 207: another answer than the uncached one
    assert RESTORED in log and cached == [0, 0, 1]
    assert replies[-1].data["tokens"] != uncached.data["tokens"]
    assert any(v.startswith("RESTORE-1: ") for v in violated), violated
    assert any(v.startswith("STATE-1: ") for v in violated), violated
