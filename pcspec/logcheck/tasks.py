"""The lines of how the server runs its tasks, which the checker does not replay, and
``read_events``: every typed event of a log, the one way ``pcspec live`` and ``pcspec bench``
read a server's log.

The lines: the task queue's ``QUE_x`` lines (``que <func>: ``, server-queue.cpp;
``messages.QUEUE``), the ``SRV_x`` / ``SLT_x`` lines of the loop's own tasks and of decision
tasks (``messages.TASKS``), and two of libllama's lines about the KV cache (the SWA cache's
size, a copy across KV streams), which carry libllama's function name where the server's carry
its tag. Live follows the order in which the server took tasks with them
(``pcspec.live.schedule``) and a decision request's parent and children
(``pcspec.live.decision``).

The checker's reader (``pcspec.logcheck.reader``) does not read them, so that ``check-log``
counts, levels and judges exactly the lines it did before they were recognised here; this
module reads them in a pass of its own over the same lines, under the reader's rules: the
prefix with or without timestamp and level letter, ANSI colours removed, and a message glued
after another on one line found by its timestamped prefix.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterator

from pcspec.logcheck import events as ev
from pcspec.logcheck.messages import QUEUE, TASKS
from pcspec.logcheck.reader import parse_text

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# the reader's prefix (reader._HEADER) with the queue's tag, at the start of a line, and with a
# timestamp after other text (a message printed without a line end before it)
_PREFIX = r"(?:([A-Z]) )?(srv|slot|que) +\S{1,12}: (?:id +(-?\d+) \| task (-?\d+) \| )?"
_HEADER = re.compile(r"(?:\d+\.\d\d\.\d\d\d\.\d\d\d )?" + _PREFIX)
_TS_HEADER = re.compile(r"\d+\.\d\d\.\d\d\d\.\d\d\d " + _PREFIX)
_LEVEL = re.compile(r"(?:\d+\.\d\d\.\d\d\d\.\d\d\d )?([A-Z]) ")
# libllama's lines: "<func>: " before the message, found anywhere in the line
_SWA = re.compile(r"creating +SWA KV cache, size = (\d+) cells")
_STREAM = re.compile(r"copying KV buffer: stream (\d+) to stream (\d+)")


def _message(m: re.Match[str], line: str, ln: int) -> ev.Event | None:
    body = line[m.end():].lstrip(" -").rstrip()
    sp = body.find(" ")
    table = QUEUE if m.group(2) == "que" else TASKS
    builder = table.get(body[:sp] if sp >= 0 else body)
    if builder is None:
        return None
    slot, task = m.group(3), m.group(4)
    return builder(ln, m.group(1) or "", int(slot) if slot is not None else None,
                   int(task) if task is not None else None, body)


def _libllama(line: str, ln: int) -> ev.Event | None:
    level = _LEVEL.match(line)
    lv = level.group(1) if level is not None else ""
    if (m := _SWA.search(line)) is not None:
        return ev.SwaCacheCreated(ln, lv, int(m[1]))
    if (m := _STREAM.search(line)) is not None:
        return ev.KvStreamCopied(ln, lv, int(m[1]), int(m[2]))
    return None


def _task_line(line: str, ln: int) -> ev.Event | None:
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    if "KV cache, size" in line or "KV buffer: stream" in line:
        return _libllama(line, ln)
    m = _HEADER.match(line)
    if m is not None and (e := _message(m, line, ln)) is not None:
        return e
    p = m.end() if m is not None else 1
    if "que " not in line[p:] and "srv " not in line[p:] and "slot " not in line[p:]:
        return None
    for later in _TS_HEADER.finditer(line, p):
        if (e := _message(later, line, ln)) is not None:
            return e
    return None


def task_events(lines: list[str]) -> Iterator[ev.Event]:
    """The events of this module's lines among ``lines`` (numbered from 1)."""
    for ln, line in enumerate(lines, 1):
        # prefilter: a queue, server or slot tag, or one of the two libllama lines
        if "que " in line or "srv " in line or "slot " in line or " KV " in line:
            e = _task_line(line, ln)
            if e is not None:
                yield e


def read_events(text: str) -> list[ev.Event]:
    """Every event of a log's text, the checker's (``reader.parse_text``) and this module's, in
    line order. A last line without a line end is read too: the checker sets it aside as a log
    cut while being written, but the text here is its caller's own cut of a log (up to where an
    operation's lines end, or a stopped server's whole log)."""
    if text and not text.endswith("\n"):
        text += "\n"
    lines = text.split("\n")
    lines.pop()  # the empty string after the last line end
    return list(heapq.merge(parse_text(text).events, task_events(lines), key=lambda e: e.line))
