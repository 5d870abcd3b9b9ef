"""The lines of how the server runs its tasks (pcspec/logcheck/tasks.py): read as typed events by
``read_events`` for live and bench, never by the checker's own reader, whose counts and verdicts
they must not change."""

from __future__ import annotations

from pcspec.logcheck import events as ev
from pcspec.logcheck import parse_text, read_events

LOG = "\n".join([
    "0.00.100.000 I srv    load_model: initializing, n_slots = 2, n_ctx_slot = 1024, kv_unified = 'false'",
    "0.00.050.000 I llama_kv_cache_iswa: creating     SWA KV cache, size = 256 cells",
    "0.01.000.000 D que          post: new task, id = 8/1, front = 1",
    "0.01.000.001 D que  process_new_: processing task, id = 7",
    "0.01.000.002 D srv  process_sing: decoding, decline task, id_task = 7",
    "0.01.000.003 D srv  update_slots: posting NEXT_RESPONSE",
    "0.01.000.004 D que    start_loop: update slots",
    "0.01.000.005 I srv  handle_compl: launching slots for parent task id_task = 3 with 1 child tasks",
    "0.01.000.006 D slot update_slots: id  0 | task 4 | waiting for parent slot to complete",
    "0.01.000.007 I slot update_slots: id  1 | task 3 |  - copying shared prompt (60 tokens) to child 0",
    "0.01.000.008 D llama_kv_cache: copying KV buffer: stream 1 to stream 0",
    "0.01.000.009 I slot update_slots: id  0 | task 4 | cached n_tokens = 60, memory_seq_rm [60, end)",
    "0.01.000.010 D slot send_decisio: id  0 | task 4 | sending decision result",
    "0.01.000.011 I srv  get_availabl: prompt cache update took 0.21 ms",
])


def test_task_lines_are_typed_events_in_line_order() -> None:
    got = [(type(e), e.line) for e in read_events(LOG)]
    assert [t for t, _ in got] == [
        ev.ServerInit, ev.SwaCacheCreated, ev.TaskPosted, ev.TaskTaken, ev.TaskDeclined, ev.NextResponsePosted,
        ev.UpdateSlots, ev.ParentLaunched, ev.WaitingForParent, ev.SharedPromptCopied, ev.KvStreamCopied,
        ev.CachedTokens, ev.DecisionSent, ev.CacheUpdateDone]
    assert [n for _, n in got] == list(range(1, 15))
    events = {type(e): e for e in read_events(LOG)}
    assert events[ev.TaskPosted] == ev.TaskPosted(3, "D", 8, True)
    assert events[ev.SharedPromptCopied] == ev.SharedPromptCopied(10, "I", 1, 3, 60, 0)
    assert events[ev.KvStreamCopied] == ev.KvStreamCopied(11, "D", 1, 0)
    assert events[ev.SwaCacheCreated].cells == 256
    assert events[ev.CacheUpdateDone].ms == 0.21


def test_the_checkers_reader_yields_none_of_them() -> None:
    kinds = {type(e) for e in parse_text(LOG + "\n").events}
    assert kinds == {ev.ServerInit, ev.CachedTokens, ev.CacheUpdateDone}


def test_a_glued_message_and_a_last_line_without_its_end_are_read() -> None:
    glued = "0.01.000.000 I srv  log_server_r: done request: POST /completion 127.0.0.1 2000.01.000.001 D que    " \
            "start_loop: update slots\n0.01.000.002 D que  process_new_: processing task, id = 9"
    assert [(type(e), e.line) for e in read_events(glued)] == [(ev.UpdateSlots, 1), (ev.TaskTaken, 2)]
