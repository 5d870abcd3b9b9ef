"""REUSE-2 on the binaries: a task pinned to an empty slot, whose prompt extends a cached one.

``get_available_slot`` (server-context.cpp:1578-1591 at 0c1e570) computes ``f_keep =
f_sim_best * n_tokens / n_slot`` for the pinned slot; an empty slot has ``n_slot`` 0, so
``f_keep`` is NaN, ``f_keep < 0.5f`` is false and the cache is never consulted: the prompt is
processed from 0 although the cache holds its first 30 tokens. ``fixed``'s patch 0006 takes
``f_keep = 0`` for an empty slot, and the cached entry is loaded. The workload is the model's
scenario (tests/support/common.py: ``PINNED_EMPTY``): a 30-token prompt on slot 1 (the least
recently used slot, ties to the last), another prompt on slot 0, which saves the idle slot 1 into
the cache (``--cache-idle-slots``, on by default), slot 0 erased, then the first prompt extended by
two tokens and pinned to slot 0. The model of each build, on the same requests, gives the same
number of tokens taken from the cache and the same REUSE-2 verdict.

Each test skips when its design's build is not cached (``pcspec build --design D``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pcspec.live.schedule import ServerFacts, read_facts

pytestmark = pytest.mark.live
pytest.importorskip("gguf", reason="pip install gguf (the live models are made with it)")

from pcspec.live import calibrate  # noqa: E402
from pcspec.live.client import Client, Reply  # noqa: E402
from pcspec.live.models import ensure_model  # noqa: E402
from pcspec.live.process import Flags, ServerProcess  # noqa: E402
from pcspec.model import events as ev  # noqa: E402
from pcspec.model.server import Server  # noqa: E402
from pcspec.properties.catalogue import get_property  # noqa: E402
from pcspec.properties.judge import Judge  # noqa: E402
from tests.support.live import build_or_skip  # noqa: E402

FLAGS = Flags(n_slots=2, n_ctx=1024, n_batch=64, n_ubatch=64, cache_ram_mib=8, ctx_checkpoints=0)
FACTS = ServerFacts(2, 512, None)
A30 = list(range(130, 160))
OTHER = list(range(200, 230))
# server_prompt_cache::load (server-task.cpp:1800-1860 at 0c1e570): one line per consultation
# of the cache, one more when an entry is chosen
LOOKED = " - looking for better prompt"
LOADED = " - found better prompt with f_keep"




def _rules(design: str) -> str:
    """The model of ``design``'s build on 0c1e570: the design under the October rules."""
    return calibrate.design_rules(design, "0c1e570")


def _model(design: str) -> tuple[int, list[str]]:
    """The model of ``design``'s build on the workload: the tokens the pinned request takes
    from the cache, and REUSE-2's messages."""
    srv = Server(calibrate.model_config("kv", FLAGS, FACTS), calibrate.variant(_rules(design)))
    judge = Judge(srv, [get_property("REUSE-2")])
    found = []
    for tokens, pin in ((A30, -1), (OTHER, -1)):
        srv.request(tuple(tokens), n_predict=2, id_slot=pin)
        srv.run()
        found += judge()
    srv.slot_action("erase", 0)
    found += judge()
    srv.request((*A30, 77, 78), n_predict=2, id_slot=0)
    srv.run()
    found += judge()
    start = [e for e in srv.heap.events if isinstance(e, ev.PromptStart)][-1]
    return start.n_past, [v.message for v in found]


@pytest.mark.parametrize("design", ["baseline", "pr30137", "pr27451", "fixed"])
def test_a_task_pinned_to_an_empty_slot_consults_the_cache_only_on_fixed(design: str, tmp_path: Path) -> None:
    n_past, violated = _model(design)
    binary = build_or_skip(design)
    server = ServerProcess(binary, ensure_model("kv", tmp_path / "models"), FLAGS, tmp_path, name="s")
    with server:
        client = Client(server.url, timeout=30)
        first = [client.completion(A30, n_predict=2), client.completion(OTHER, n_predict=2)]
        erased = client.slot_action(0, "erase")
        pinned: Reply = client.completion([*A30, 77, 78], n_predict=2, id_slot=0)
    log = server.log_bytes().decode("utf-8", "replace")
    assert read_facts(log) == FACTS  # the facts the model was given
    assert all(r.ok for r in (*first, erased, pinned)), [r.error for r in (*first, erased, pinned)]
    assert [r.data.get("id_slot") for r in (*first, pinned)] == [1, 0, 0]
    assert erased.data.get("n_erased") == 31  # OTHER and the token generated after it
    timings = pinned.data["timings"]
    # the first two requests consult the cache (an unpinned task on the least recently used slot)
    if design == "fixed":  # patch 0006: the cached 30 tokens are loaded into the empty slot
        assert log.count(LOOKED) == 3 and log.count(LOADED) == 1
        assert (timings["cache_n"], timings["prompt_n"]) == (n_past, 2) == (30, 2) and violated == []
    else:  # NaN f_keep: the cache is not consulted, the prompt is processed from 0
        assert log.count(LOOKED) == 2 and LOADED not in log
        assert (timings["cache_n"], timings["prompt_n"]) == (n_past, 32) == (0, 32)
        assert violated, "the model of the build must violate REUSE-2 here"
