"""The model's fault sites fired in the real code: each design built with the fault points
(``pcspec build --design D --faults``; patches/faults/, docs/DESIGNS.md "Fault
points"), and the verdict the model gives that design on the same failure seen on the binary.

RB-1 ("a failed save leaves no partial or invalid entry in the cache") is violated by ``baseline``
and ``pr27451`` and holds for ``pr30137`` and ``fixed`` (docs/PROPERTIES.md). #27451 leaves
``prompt_save``'s unchecked count as it is. Its short-write
route: ``llama_state_seq_get_data_ext`` writes less than ``get_size`` said while a slot's prompt
is saved to the cache. ``baseline``'s ``prompt_save`` does not look at the count
(server-context.cpp:276 at 0c1e570) and publishes the entry, whose second half was never
written (zeros: baseline's buffers are zero-filled), and a later request loads it, which fails
(``state_read_data: mismatched value type``); #30137 checks the count, logs ``failed to save
complete prompt state`` and pops the entry; ``fixed`` publishes only a whole entry (its patch
0004).

RB-2 ("a failed save leaves the cache exactly as it was") through an allocation that fails:
``server_prompt_cache::alloc`` catches the ``std::bad_alloc`` of a state's ``resize`` and shrinks
the cache's byte limit to 0.4 of what it holds (server-task.cpp:1762-1775 at 0c1e570), for good;
``fixed`` keeps the limit (its patch 0008). A checkpoint whose allocation fails aborts every
other design's server when its slot is the only one in the batch (docs/FINDINGS.md, F6);
``fixed`` goes on without the checkpoint (its patch 0009). The
allocation is named by its size (``alloc.SIZE@n``, patches/faults/0002), which the model of the
same requests gives (``tests.live.allocfaults``).

Each test skips when its design's fault build is not cached.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pcspec.live.schedule import ServerFacts, read_facts

pytestmark = pytest.mark.live
pytest.importorskip("gguf", reason="pip install gguf (the live models are made with it)")

from pcspec.live import calibrate  # noqa: E402
from pcspec.live.client import Client, Reply, generated, top_logprobs  # noqa: E402
from pcspec.live.models import ensure_model  # noqa: E402
from pcspec.live.process import Flags, ServerProcess  # noqa: E402
from pcspec.live.transparency import compare  # noqa: E402
from pcspec.model import events as ev  # noqa: E402
from pcspec.model.config import Config  # noqa: E402
from pcspec.model.design import runs  # noqa: E402
from pcspec.model.designs import DESIGNS, Fixed  # noqa: E402
from pcspec.model.server import Server  # noqa: E402
from pcspec.properties.catalogue import CATALOGUE, get_property  # noqa: E402
from pcspec.properties.judge import Judge  # noqa: E402
from tests.live.allocfaults import AllocCalls  # noqa: E402
from tests.support.live import build_or_skip  # noqa: E402

FLAGS = Flags(n_slots=1, n_ctx=1024, n_batch=64, n_ubatch=64, cache_ram_mib=8, ctx_checkpoints=0)
A = [128 + (7 * i) % 120 for i in range(200)]
B = [129 + (11 * i) % 110 for i in range(200)]
# the first llama_state_seq_get_data_ext of the run is B's save of A's prompt (no checkpoints on
# the kv model, and a completion reads no state)
FAULTS = {"LLAMA_FAULTS": "state.write.short@1"}




def _run(binary: Path, workdir: Path, env: dict[str, str], prompts: tuple[list[int], ...] = (A, B, A)
         ) -> tuple[list[Reply], str]:
    server = ServerProcess(binary, ensure_model("kv", workdir / "models"), FLAGS, workdir, name="s", env=env)
    with server:
        client = Client(server.url, timeout=30)
        replies = [client.completion(p, n_predict=2) for p in prompts]
    return replies, server.log_bytes().decode("utf-8", "replace")


def _rules(design: str) -> str:
    """The model of ``design``'s build on 0c1e570: the design under the October rules."""
    return calibrate.design_rules(design, "0c1e570")


def _model_with_alloc_fault(design: str, kind: str, flags: Flags, facts: ServerFacts,
                            prompts: tuple[list[int], ...], site: str, armed_after: int
                            ) -> tuple[Server, dict[str, str], set[str]]:
    """The model of ``design``'s build, configured for the server, on ``prompts``, with one
    fault at ``site`` armed once ``armed_after`` allocations of the site's role were made. It
    gives the fault build's environment that fails the same allocation, and the properties the
    model violates on the way."""
    srv = Server(calibrate.model_config(kind, flags, facts), calibrate.variant(_rules(design)))
    calls = AllocCalls(srv.heap)
    role = {"ckpt.alloc": "ckpt_tgt", "save.alloc.main": "main", "save.alloc.drft": "drft"}[site]
    made = [0]

    def count(e: ev.Event) -> None:
        if isinstance(e, ev.Alloc) and e.role == role:
            made[0] += 1

    srv.heap.watch(ev.Alloc.kind, count)
    judge = Judge(srv, list(CATALOGUE))
    found = []
    armed = False
    for prompt in prompts:
        srv.request(tuple(prompt), n_predict=2)
        found += judge()
        while not srv.idle and srv.crash is None:
            if not armed and made[0] >= armed_after:
                srv.inject(site)
                armed = True
            srv.step()
            found += judge()
        if srv.crash is not None:
            break
    assert armed and calls.items, "the model never made the allocation the fault is for"
    return srv, calls.env(), {v.property for v in found}


def _model_rb1(design: str) -> bool:
    """Whether the model's ``design`` violates RB-1 on the same three requests with the same
    fault (``state.write.short`` at the save of A's prompt)."""
    srv = Server(Config(n_slots=1, n_ctx_slot=1024, n_batch=64, n_ubatch=64, cache_ram=8 << 20), DESIGNS[design])
    judge = Judge(srv, [get_property("RB-1")])
    found = []
    for i, prompt in enumerate((A, B, A)):
        if i == 1:
            srv.inject("state.write.short")
            found += judge()
        srv.request(tuple(prompt), n_predict=2)
        found += judge()
        srv.run()
        found += judge()
    return bool(found)


@pytest.mark.parametrize("design", ["baseline", "pr27451", "pr30137", "fixed"])
def test_a_short_state_write_at_a_cache_save(design: str, tmp_path: Path) -> None:
    binary = build_or_skip(design, faults=True)
    replies, log = _run(binary, tmp_path / "faulted", FAULTS)
    assert all(r.ok for r in replies), [r.error for r in replies]
    _before, fired, after = log.partition("fault point 'state.write.short' fired at call 1")
    assert fired, "the fault did not fire"
    # the cache right after the failed save: "cache state: N prompts"
    held = int(re.findall(r"cache state: (\d+) prompts", after)[0])
    load_failed = "failed to load prompt from cache" in after
    violates = _model_rb1(design)
    if design in ("baseline", "pr27451"):
        # the entry whose second half was never written is published; the first prompt, sent
        # again, loads it, the load fails (state_read_data: mismatched value type) and the
        # prompt is re-processed from 0
        assert held == 1 and load_failed and "failed to save complete prompt state" not in log
        assert violates
    else:
        assert held == 0 and not load_failed
        assert not violates
    if design == "pr30137":
        assert "failed to save complete prompt state" in after
    # every answer is still the uncached one (the failed load cleared the slot)
    reference, _ = _run(binary, tmp_path / "clean", {})
    verdict = compare(top_logprobs(replies[2]), generated(replies[2]),
                      top_logprobs(reference[2]), generated(reference[2]), 0.1)
    assert verdict.ok, verdict


@pytest.mark.parametrize("design", ["baseline", "pr27451", "pr30137", "fixed"])
def test_a_checkpoint_restore_that_fails_aborts_every_build_but_fixed(design: str, tmp_path: Path) -> None:
    """NOABORT-1 on the binaries: the SWA smoke sequence (pcspec.live.smoke: a prompt that
    leaves checkpoints, another, the first again, which restores one) with
    ``LLAMA_FAULTS=state.read.partial@1``: the restore's ``llama_state_seq_set_data_ext`` fails
    and ``common_prompt_checkpoint::load_tgt`` aborts, ``checkpoint size mismatch``
    (common/common.cpp:2336-2339 at 0c1e570), on the builds of baseline, #27451 and #30137.
    ``fixed`` contains the failure (``checkpoint_load_failed``, ``restore_failed``: its patch
    0009): the checkpoint is erased, the prompt processed from the start, and the answer is the
    uncached one."""
    from pcspec.live.calibrate import variant
    from pcspec.live.smoke import FLAGS as SMOKE_FLAGS
    from pcspec.live.smoke import PROMPT_A, PROMPT_B

    binary = build_or_skip(design, faults=True)

    def run(workdir: Path, env: dict[str, str]) -> tuple[list[Reply], bool, str]:
        server = ServerProcess(binary, ensure_model("swa", tmp_path / "models"), SMOKE_FLAGS, workdir, name="s",
                               env=env)
        replies = []
        with server:
            client = Client(server.url, timeout=20)
            for prompt in (PROMPT_A, PROMPT_B, PROMPT_A):
                replies.append(client.completion(prompt, n_predict=2))
            if server.proc is not None and design != "fixed":
                server.proc.wait(timeout=20)  # the abort ends the process
            alive = server.alive()
        return replies, alive, server.log_bytes().decode("utf-8", "replace")

    replies, alive, log = run(tmp_path / "faulted", {"LLAMA_FAULTS": "state.read.partial@1"})
    statuses = [r.status for r in replies]
    assert "fault point 'state.read.partial' fired at call 1" in log
    assert "checkpoint size mismatch" in log
    model = variant(_rules(design))
    contained = runs(model, "checkpoint_load_failed", Fixed) and runs(model, "restore_failed", Fixed)
    assert contained == (design == "fixed")
    if not contained:
        assert statuses[:2] == [200, 200] and statuses[2] != 200 and not alive
        return
    assert statuses == [200, 200, 200] and alive
    _before, failed, after = log.partition("failed to restore context checkpoint")
    assert failed and "forcing full prompt re-processing" in after
    reference, _alive, _log = run(tmp_path / "clean", {})
    verdict = compare(top_logprobs(replies[2]), generated(replies[2]),
                      top_logprobs(reference[2]), generated(reference[2]), 0.1)
    assert verdict.ok, verdict


C = [130 + (5 * i) % 100 for i in range(200)]


@pytest.mark.parametrize("design", ["baseline", "pr27451", "pr30137", "fixed"])
def test_a_failed_state_allocation_at_a_cache_save(design: str, tmp_path: Path) -> None:
    """RB-2 on the binaries: the target state's allocation of the cache save that B's request
    makes (A's prompt) throws ``std::bad_alloc``. baseline, #27451 and #30137 shrink the cache's
    limit to 0.4 of its 0 bytes, 1 byte, and every later save is refused as over the limit: the
    failed save changed the cache for good. fixed's build keeps the limit and caches the
    prompts that come after (its patch 0008). The model of each build, on the same requests
    with the same fault, gives the same verdict and the same cache."""
    prompts = (A, B, C, A)
    model, env, violated = _model_with_alloc_fault(design, "kv", FLAGS, ServerFacts(1, 1024, None), prompts,
                                                   "save.alloc.main", 0)
    (item,) = env["LLAMA_FAULTS"].split(",")
    replies, log = _run(build_or_skip(design, faults=True), tmp_path, env, prompts)
    assert read_facts(log) == ServerFacts(1, 1024, None)  # the facts the model was given
    assert all(r.ok for r in replies), [r.error for r in replies]
    size, n = item.removeprefix("alloc.").split("@")
    _before, fired, after = log.partition(f"fault point 'alloc.{size}' fired at call {n}")
    assert fired, f"the fault {item} did not fire"
    # the next error line is the cache's catch: the fault fired at the allocation it was for
    error = re.search(r" E .*", after)
    assert error is not None and error[0].endswith("failed to allocate memory for prompt cache state: std::bad_alloc")
    shrunk = "cache size limit reduced to" in after
    held = int(re.findall(r"cache state: (\d+) prompts", after)[-1])
    assert shrunk == ("RB-2" in violated) == (design != "fixed")
    assert held == len(model.cache.entries)
    if shrunk:
        assert "exceeds cache size limit" in after and held == 0
    else:
        assert held == 2


@pytest.mark.parametrize("design", ["baseline", "pr27451", "pr30137", "fixed"])
def test_a_failed_checkpoint_allocation_aborts_every_build_but_fixed(design: str, tmp_path: Path) -> None:
    """F6 (docs/FINDINGS.md) on the binaries: the SWA smoke sequence with the allocation of
    prompt A's second checkpoint failing. ``iterate`` catches the ``std::bad_alloc`` out of
    ``create_checkpoint``, answers A with an error and releases the slot, before the slot marks
    the batch as its own (``batch.slot_batched``); its tokens are in the batch, no other slot
    is, and ``GGML_ASSERT(batch.slot_batched || batch.size() == 0)`` aborts the server
    (server-context.cpp:2826 at 0c1e570; the line moves with each design's patch). The model of
    each of these builds crashes at the same place. ``fixed`` (its patch 0009) goes on without
    that checkpoint and answers A; its model does the same."""
    from pcspec.live.smoke import FLAGS as SMOKE_FLAGS
    from pcspec.live.smoke import PROMPT_A, PROMPT_B

    facts = ServerFacts(1, 2048, 256)
    model, env, violated = _model_with_alloc_fault(design, "swa", SMOKE_FLAGS, facts, (PROMPT_A, PROMPT_B, PROMPT_A),
                                                   "ckpt.alloc", 1)
    contained = runs(calibrate.variant(_rules(design)), "checkpoint_create_failed", Fixed)
    assert contained == (design == "fixed")
    assert (model.crash is None) == contained and ("NOABORT-1" in violated) != contained
    binary = build_or_skip(design, faults=True)
    server = ServerProcess(binary, ensure_model("swa", tmp_path / "models"), SMOKE_FLAGS, tmp_path,
                           name="s", env=env)
    with server:
        client = Client(server.url, timeout=20)
        reply = client.completion(PROMPT_A, n_predict=2)
        if contained:
            rest = [client.completion(p, n_predict=2) for p in (PROMPT_B, PROMPT_A)]
        elif server.proc is not None:
            server.proc.wait(timeout=20)
        alive = server.alive()
    log = server.log_bytes().decode("utf-8", "replace")
    assert read_facts(log) == facts
    item = env["LLAMA_FAULTS"]
    assert item == "alloc.16840@2"  # the second checkpoint of A (a full window of 32 cells)
    assert "fault point 'alloc.16840' fired at call 2" in log
    if not contained:
        assert reply.status == 500 and reply.error and "bad_alloc" in reply.error
        assert "got exception: std::bad_alloc" in log and not alive
        assert model.crash is not None and model.crash.message in log
        return
    assert reply.ok and all(r.ok for r in rest) and alive, [r.error for r in (reply, *rest)]
    assert "got exception" not in log and "failed to create context checkpoint" in log
    # the checkpoints the binary created are the model's (the failed one is not among them)
    created = [int(n) for n in re.findall(r"created context checkpoint \d+ of \d+ \(pos_min = -?\d+, "
                                          r"pos_max = -?\d+, n_tokens = (\d+)", log)]
    assert created == [e.n_tokens for e in model.heap.events if isinstance(e, ev.CkptCreate)]


LONG = [200, 201, 202, 203]


@pytest.mark.parametrize("design", ["baseline", "pr27451", "pr30137", "fixed"])
def test_an_empty_checkpoint_after_a_failed_allocation_beside_a_generating_slot(design: str, tmp_path: Path) -> None:
    """CKPT-2 on the binaries ("every checkpoint held is the state of a prefix"): slot 1
    generates 3,000 tokens, so it has made the batch its own when the allocation of prompt A's
    second checkpoint on slot 0 fails (``alloc.16844@2``: two KV streams add 4 bytes); the server
    goes on (compare F6). baseline and #27451 appended the checkpoint before its fill
    (server-context.cpp:2335 at 0c1e570): it stays, empty, goes to the cache with A's prompt
    when B comes, and A sent again restores it (``restored context checkpoint (... n_tokens =
    296 ... size = 0.000 MiB)``), a no-op load. #30137 appends a checkpoint only once filled, so
    ``pr30137`` and ``fixed`` restore the one at 236. The model of each build, on the same
    requests and fault, gives the same verdict and restores the same checkpoint."""
    import threading
    import time
    from dataclasses import replace

    from pcspec.live.smoke import FLAGS as SMOKE_FLAGS
    from pcspec.live.smoke import PROMPT_A, PROMPT_B
    from pcspec.model.slot import SlotState

    flags = replace(SMOKE_FLAGS, n_slots=2, n_ctx=8192)
    facts = ServerFacts(2, 4096, 256)
    # the model: slot 1 generating, then A on slot 0 with the fault armed after its first checkpoint
    srv = Server(calibrate.model_config("swa", flags, facts), calibrate.variant(_rules(design)))
    calls = AllocCalls(srv.heap)
    judge = Judge(srv, [get_property("CKPT-2")])
    found = []
    srv.request(tuple(LONG), n_predict=3000, id_slot=1)
    while srv.slots[1].state != SlotState.GENERATING:
        srv.step()
    srv.request(tuple(PROMPT_A), n_predict=2, id_slot=0)
    while not any(isinstance(e, ev.Alloc) and e.role == "ckpt_tgt" for e in srv.heap.events):
        srv.step()
        found += judge()
    srv.inject("ckpt.alloc")
    srv.run()
    found += judge()
    for prompt in (PROMPT_B, PROMPT_A):
        srv.request(tuple(prompt), n_predict=2, id_slot=0)
        srv.run()
        found += judge()
    assert srv.crash is None
    restored = [e for e in srv.heap.events if isinstance(e, ev.CkptRestore)][-1]
    env = calls.env()
    assert env == {"LLAMA_FAULTS": "alloc.16844@2"}

    binary = build_or_skip(design, faults=True)

    server = ServerProcess(binary, ensure_model("swa", tmp_path / "models"), flags, tmp_path,
                           name="s", env=env)
    with server:
        client = Client(server.url, timeout=60)
        long: list[Reply] = []
        generating = threading.Thread(target=lambda: long.append(client.completion(LONG, n_predict=3000, id_slot=1)))
        generating.start()
        time.sleep(1.0)  # slot 1 is generating (its 4-token prompt takes milliseconds)
        first = client.completion(PROMPT_A, n_predict=2, id_slot=0)
        generating.join()
        rest = [client.completion(p, n_predict=2, id_slot=0) for p in (PROMPT_B, PROMPT_A)]
        alive = server.alive()
    log = server.log_bytes().decode("utf-8", "replace")
    assert read_facts(log) == facts
    assert "fault point 'alloc.16844' fired at call 2" in log
    if design == "fixed":  # its patch 0009: the slot goes on without the checkpoint
        assert first.ok, first.error
    else:
        assert first.status == 500 and first.error and "bad_alloc" in first.error
    assert all(r.ok for r in (*long, *rest)) and alive, [r.error for r in (*long, *rest)]
    lines = re.findall(r"restored context checkpoint \(pos_min = \d+, pos_max = \d+, n_tokens = (\d+), "
                       r"n_past = \d+, size = ([\d.]+) MiB\)", log)
    n_tokens, size = lines[-1]
    empty = float(size) == 0.0
    assert int(n_tokens) == restored.n_tokens
    assert empty == bool(found) == (design in ("baseline", "pr27451"))


@pytest.mark.parametrize("design", ["baseline", "pr27451", "pr30137", "fixed"])
def test_the_checkpoint_payloads_each_design_copies(design: str, tmp_path: Path) -> None:
    """The bytes a save copies, measured on the binary: ``alloc.16840@0`` fails nothing and logs
    every allocation of a full-window checkpoint payload (16,840 bytes on the SWA model) in the
    smoke sequence. baseline deep-copies A's two checkpoints into the cache entry when B comes
    (``states.push_back({..., prompt.checkpoints})``, server-task.cpp:1779-1788 at 0c1e570) and
    back into the slot when A returns: 4 copies, 67,360 bytes, 33,680 of them in the save. The
    shared designs copy none: every such allocation is a checkpoint being made (one fewer on
    ``fixed``, whose 0013 does not re-create the checkpoint A's return restores). The model counts
    the same allocations of that size (``tests.live.allocfaults``)."""
    from pcspec.live.smoke import FLAGS as SMOKE_FLAGS
    from pcspec.live.smoke import PROMPT_A, PROMPT_B

    facts = ServerFacts(1, 2048, 256)
    srv = Server(calibrate.model_config("swa", SMOKE_FLAGS, facts), calibrate.variant(_rules(design)))
    calls = AllocCalls(srv.heap)
    for prompt in (PROMPT_A, PROMPT_B, PROMPT_A):
        srv.request(tuple(prompt), n_predict=2)
        srv.run()
    copies = [e for e in srv.heap.events if isinstance(e, ev.CopyPayload) and e.bytes == 16840]

    binary = build_or_skip(design, faults=True)

    server = ServerProcess(binary, ensure_model("swa", tmp_path / "models"), SMOKE_FLAGS, tmp_path,
                           name="s", env={"LLAMA_FAULTS": "alloc.16840@0"})
    with server:
        client = Client(server.url, timeout=30)
        replies = [client.completion(p, n_predict=2) for p in (PROMPT_A, PROMPT_B, PROMPT_A)]
    log = server.log_bytes().decode("utf-8", "replace")
    assert all(r.ok for r in replies) and read_facts(log) == facts
    counted = re.findall(r"fault point 'alloc.16840' counted call (\d+)", log)
    assert [int(n) for n in counted] == list(range(1, len(counted) + 1))
    assert len(counted) == calls.by_size[16840]
    # the save of A's prompt when B comes: from its line to the cache's state after it
    save = log[log.index("saving prompt with length"):]
    save = save[: save.index("cache state:")]
    in_save = save.count("fault point 'alloc.16840' counted call")
    if design == "baseline":
        assert (len(counted), len(copies), in_save) == (9, 4, 2)
    elif design == "fixed":  # 0013: the third prompt keeps the checkpoint it restored, no re-creation
        assert (len(counted), len(copies), in_save) == (4, 0, 0)
    else:
        assert (len(counted), len(copies), in_save) == (5, 0, 0)
