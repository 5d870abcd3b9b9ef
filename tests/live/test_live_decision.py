"""Decision requests (``POST /v1/systemone``) on the tiny decision models: the parent and child
tasks of a shared prompt prefix (``n_tokens_shared``), read from the log (pcspec/live/decision.py,
docs/LIVE.md "Decision requests and shared-prefix children").

``busy_parent_load`` drives F1 on a busy parent (docs/FINDINGS.md) for the one test of it.

Each test is skipped without the cached build of its tree (``pcspec build --tree
b11549``, ``--tree b11434``); all without the ``gguf`` package that makes the models.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from pcspec.live.build import cached_server, find_server
from pcspec.live.client import Client, Reply
from pcspec.logcheck import events as ev

pytestmark = pytest.mark.live  # a real llama-server

pytest.importorskip("gguf", reason="pip install gguf (the live models are made with it)")

from pcspec.live import decision as d  # noqa: E402
from pcspec.live.models import KINDS, ensure_model  # noqa: E402
from pcspec.live.process import Flags, ServerDied, ServerProcess  # noqa: E402

ONE_SLOT = Flags(n_slots=1, n_ctx=2048, n_batch=64, n_ubatch=64)


def binary(tree: str) -> Path:
    found = find_server(tree)
    if found is None:
        pytest.skip(f"no {tree} llama-server built: run `pcspec build --tree {tree}` "
                    f"(cached as {cached_server(tree)})")
    return found


def cached(run: d.DecisionRun) -> list[tuple[int, int, int, int]]:
    """Each prompt step's slot, task, cached tokens and where memory_seq_rm starts."""
    return [(e.slot, e.task, e.n_tokens, e.seq_rm_from) for e in run.of(ev.CachedTokens)]


CASES = [("b11549", "lfm2-d1", kind) for kind in KINDS] + [("b11549", "openjev", "kv"), ("b11434", "openjev", "kv")]


@pytest.mark.parametrize(("tree", "decision", "kind"), CASES)
def test_two_questions_on_two_slots_share_their_prefix(tree: str, decision: str, kind: str, tmp_path: Path) -> None:
    """Two questions, ``-np 2``: one parent (slot 1, LRU) and one child (slot 0); the parent stops
    at the shared prefix, copies it to the child, and the child starts from it. The answers are
    those of one slot, where nothing is shared (each task is a group of its own)."""
    server = binary(tree)
    body = d.systemone_body()
    n_shared = d.expected_shared(body)
    run = d.run(server, kind, tmp_path / "two", decision=decision, body=body)
    assert run.ok, run.summary()
    assert not run.missing(), run.summary()
    (parent,) = run.of(ev.ParentLaunched)
    assert parent.n_children == 1
    (child,) = run.children()
    assert child.task != parent.task
    (copy,) = run.of(ev.SharedPromptCopied)
    assert (copy.task, copy.child, copy.n_tokens) == (parent.task, child.slot, n_shared) and copy.slot != child.slot
    # the child starts from the copy, the parent went through the prefix from 0
    assert (child.slot, child.task, n_shared, n_shared) in cached(run)
    assert (copy.slot, copy.task, 0, 0) in cached(run)
    # a child keeps nothing when it is released (server-context.cpp:592-595 of b11549)
    assert [(e.slot, e.task) for e in run.of(ev.PromptCleared)] == [(child.slot, child.task)]
    single = d.run(server, kind, tmp_path / "one", decision=decision, body=body, flags=ONE_SLOT)
    assert single.ok and not single.of(ev.ParentLaunched) and not single.of(ev.SharedPromptCopied), single.summary()
    shared, alone = d.probabilities(run.replies[0]), d.probabilities(single.replies[0])
    assert shared.keys() == alone.keys() == body["questions"].keys()
    for q in shared:
        for opt, p in shared[q].items():
            assert abs(p - alone[q][opt]) < 1e-4, (tree, decision, kind, q, opt, p, alone[q][opt])


def test_a_repeated_request_recomputes_the_parents_own_tokens(tmp_path: Path) -> None:
    """The same request twice: the parent's slot holds its whole prompt, but ``n_past`` is capped
    at ``n_tokens_shared`` for the parent too (server-context.cpp:3593-3596 of b11549): the copy
    to the child must be the prefix alone, so the parent's own tokens are evaluated again."""
    body = d.systemone_body()
    n_shared = d.expected_shared(body)
    run = d.run(binary("b11549"), "kv", tmp_path, body=body, requests=2)
    assert run.ok and len(run.of(ev.ParentLaunched)) == 2, run.summary()
    _first, second = run.of(ev.ParentLaunched)
    assert [c for c in cached(run) if c[1] == second.task] == [(1, second.task, n_shared, n_shared)]


def test_three_questions_with_a_common_start_on_three_and_on_two_slots(tmp_path: Path) -> None:
    """Instructions that start alike ("Pick "): the shared prefix runs into them. On ``-np 3`` one
    parent copies it to two children; on ``-np 2`` the third question is a group of its own
    (server-decision.cpp:1143-1158 of b11549), and takes the prefix from the parent's slot by the
    ordinary prompt reuse, not by a copy."""
    server = binary("b11549")
    choice = {"type": "choice", "criteria": {"A": "x", "B": "y"}}
    body = d.systemone_body(questions={
        "a": {**choice, "instructions": "Pick one"},
        "b": {"type": "score", "instructions": "Pick two", "criteria": ["low", "high"]},
        "c": {**choice, "instructions": "Pick three"},
    })
    n_shared = d.expected_shared(body)
    assert n_shared == 1 + len(d.STATE) + 1 + len("Pick ")
    three = d.run(server, "kv", tmp_path / "three", body=body,
                  flags=Flags(n_slots=3, n_ctx=3072, n_batch=64, n_ubatch=64))
    assert three.ok, three.summary()
    (parent,) = three.of(ev.ParentLaunched)
    assert parent.n_children == 2
    copies = three.of(ev.SharedPromptCopied)
    assert sorted(c.child for c in copies) == sorted(e.slot for e in three.children())
    assert {(c.task, c.n_tokens) for c in copies} == {(parent.task, n_shared)}
    two = d.run(server, "kv", tmp_path / "two", body=body)
    assert two.ok, two.summary()
    (parent2,) = two.of(ev.ParentLaunched)
    assert parent2.n_children == 1 and len(two.of(ev.SharedPromptCopied)) == 1
    last = max(t for _s, t, _n, _p in cached(two))
    slot_parent = next(s for s, t, _n, _p in cached(two) if t == parent2.task)
    assert (slot_parent, last, n_shared, n_shared) in cached(two)


ASSERT_SHARED = "GGML_ASSERT(slot.task->n_tokens_shared == 0) failed"  # server-context.cpp:4260 of b11549


def busy_parent_load(binary: Path, workdir: Path, *, kind: str = "kv", decision: str = d.DECISION_TYPE,
                     delay: float = 0.01, reps: int = 24) -> d.DecisionRun:
    """F1 on a shared-prefix parent (docs/FINDINGS.md, the model's prediction of
    tests/model/test_scenarios_children.py): a completion of ``n_tokens_shared`` + 2 tokens
    leaves an entry of ``n_tokens_shared`` + 5 tokens in the cache (the idle-slot save after two
    more completions); a decision request of two questions is sent, and ``delay`` seconds later a
    completion of the same tokens and three more, pinned to the parent's slot (the LRU pick: the
    slot of the second completion). Its cache update, on the busy slot, loads that entry onto the
    parent, which then holds more than the shared prefix, never copies it to its child, fills to
    its end, and the end of ``decode`` aborts (``ASSERT_SHARED``; the log's last lines hold it)."""
    model = ensure_model(kind, workdir / "models", decision=decision)
    state = "the quick brown fox jumps over the lazy dog " * reps
    body = d.systemone_body(state=state)
    n_shared = d.expected_shared(body)
    tokens = [10 + (i * 7) % 90 for i in range(n_shared + 2)]
    flags = Flags(n_slots=2, n_ctx=8192, n_batch=16, n_ubatch=16)
    replies: list[Reply] = []
    server = ServerProcess(binary, model, flags, workdir, name=f"busy-parent-{kind}")
    try:
        with server:
            client = Client(server.url, timeout=60.0)
            replies.append(client.completion(tokens, n_predict=4))
            replies.append(client.completion([5, 6, 7, 8], n_predict=2))
            replies.append(client.completion([9, 8, 7, 6], n_predict=2))
            parent = replies[1].data.get("id_slot", -1)
            answer: list[Reply] = []
            sender = threading.Thread(target=lambda: answer.append(d.systemone(client, body, timeout=30.0)))
            sender.start()
            time.sleep(delay)
            replies.append(client.completion([*tokens, 11, 12, 13], n_predict=2, id_slot=parent, timeout=30.0))
            sender.join()
            replies += answer
    except ServerDied:
        pass
    return d.DecisionRun(binary, kind, decision, server.log_bytes().decode("utf-8", "replace"), replies)


@pytest.mark.parametrize(("tree", "decision"), [("b11549", "lfm2-d1"), ("b11434", "openjev")])
def test_a_completion_pinned_to_a_busy_parent_aborts(tree: str, decision: str, tmp_path: Path) -> None:
    """The model's prediction (docs/FINDINGS.md, F1 on a shared-prefix parent;
    tests/model/test_scenarios_children.py): a cache entry loaded onto the busy parent, longer than
    the shared prefix, keeps the parent from ever copying it to its child; the parent fills to its
    end and ``decode`` fails ``GGML_ASSERT(slot.task->n_tokens_shared == 0)`` (server-context.cpp:
    4260 of b11549). The pinned completion is sent 10 ms after the decision request, while the
    parent fills its 1058 shared tokens 16 at a time; on a loaded machine the timing may miss
    (the completion then comes before the launch or after the copy), so up to three tries."""
    for attempt in range(3):
        run = busy_parent_load(binary(tree), tmp_path / str(attempt), decision=decision)
        assert [r.status for r in run.replies[:3]] == [200, 200, 200], run.summary()
        if ASSERT_SHARED in run.log:
            break
    assert ASSERT_SHARED in run.log, run.summary()
    assert not run.of(ev.SharedPromptCopied)  # the parent never held exactly n_tokens_shared tokens
