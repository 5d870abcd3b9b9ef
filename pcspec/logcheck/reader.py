"""Read a llama-server log into typed events (``pcspec.logcheck.events``).

The log is read as bytes and decoded with ``errors="replace"`` (token pieces in DEBUG lines are
often not valid UTF-8; a replaced byte never swallows the newline, so line numbers are exact).
ANSI colour codes are removed. Each line may carry the ``<min>.<ss>.<mmm>.<uuu> `` timestamp
and the level letter (``I`` is both INFO and TRACE, server-common.h / common/log.h), or neither
(``--no-log-prefix``). After them comes the ``SRV_x`` prefix ``srv  <func, 12 chars>: `` or the
``SLT_x`` prefix ``slot <func, 12 chars>: id %2d | task %d | `` (llama-server-behavior.md 5.1).
The function tag is not used to recognise a message: builds before the lambda refactor print
``update_slots`` where newer ones print ``operator()``, so recognition goes by message text.

Cost: a line is first tested with two substring checks (``"srv "``/``"slot "``), then the
prefix regex, then a dictionary lookup on the first word of the message
(``pcspec.logcheck.messages.DISPATCH``); only lines whose first word can start a known message
reach a message regex. Everything else is skipped.

Older message variants accepted (llama-server-behavior.md 5.2-5.5, see ``messages``): ``sim =``
for ``f_sim =``, ``sim_best`` for ``f_sim_best``, ``Checking`` for ``checking``, any level
letter, key=value pairs inside parentheses that may be absent (``n_tokens``, ``n_past``,
``n_swa``, ``pos_next``), the ``created prompt processing context checkpoint`` variant, a
summary line without ``est`` and a per-entry line without ``checkpoints``.

Two more things real captures contain: a message printed without a newline glued to the next
line (the later timestamped prefix is found), and a last line without a newline (a log cut
while being written: ignored, with a note, since a number in it may be cut short).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from pcspec.errors import PcspecError
from pcspec.logcheck import events as ev
from pcspec.logcheck.messages import DISPATCH

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

# timestamp, level letter, tag, function (12 chars, right-aligned), then for slot lines the
# "id %2d | task %d | " fields (server-common.h: SLT_x / SRV_x).
_HEADER = re.compile(
    r"(?:\d+\.\d\d\.\d\d\d\.\d\d\d )?(?:([A-Z]) )?(srv|slot) +\S{1,12}: "
    r"(?:id +(-?\d+) \| task (-?\d+) \| )?"
)

# the same prefix with a timestamp, found after other text on the line
_TS_HEADER = re.compile(
    r"\d+\.\d\d\.\d\d\d\.\d\d\d (?:([A-Z]) )?(srv|slot) +\S{1,12}: "
    r"(?:id +(-?\d+) \| task (-?\d+) \| )?"
)

@dataclass(slots=True)
class LogRead:
    """What the reader found in one log."""

    source: str
    n_lines: int
    events: list[ev.Event]
    notes: list[str] = field(default_factory=list)
    binary: bool = False


def _build(m: re.Match[str], line: str, ln: int) -> ev.Event | None:
    body = line[m.end():].lstrip(" -").rstrip()
    sp = body.find(" ")
    builder = DISPATCH.get(body[:sp] if sp >= 0 else body)
    if builder is None:
        return None
    slot_s = m.group(3)
    task_s = m.group(4)
    return builder(
        ln, m.group(1) or "", int(slot_s) if slot_s is not None else None,
        int(task_s) if task_s is not None else None, body,
    )


def parse_text(text: str, source: str = "<text>") -> LogRead:
    """Turn decoded log text into events. ``text`` may contain ANSI codes."""
    lines = text.split("\n")
    complete = text.endswith("\n") or text == ""
    if complete:
        lines.pop()  # the empty string after the final newline
    n_lines = len(lines)
    out: list[ev.Event] = []
    notes: list[str] = []
    last = _ANSI.sub("", lines[-1]) if lines else ""
    if not complete and (_HEADER.match(last) or _TS_HEADER.search(last)):
        # the last server line has no newline: the writer may have been cut off in the middle
        # of a number, so nothing read from it can be trusted
        notes.append(f"line {n_lines}: last line has no line end (truncated?); ignored")
        lines.pop()
    header = _HEADER.match
    inner = _TS_HEADER.search
    strip_ansi = _ANSI.sub
    for i, line in enumerate(lines):
        # prefilter: every relevant line is an SRV_x or SLT_x line
        if "srv " not in line and "slot " not in line:
            continue
        if "\x1b" in line:
            # colours wrap the timestamp and level letter, never the "srv"/"slot" tag
            line = strip_ansi("", line)
        m = header(line)
        event = _build(m, line, i + 1) if m is not None else None
        if event is None:
            # two writes glued on one line: a message printed without "\n" followed by a
            # complete one (03-eviction.log line 2496 holds "...content parser.0.00.810.936 I
            # slot release: ..."); look for a later timestamped prefix
            p = m.end() if m is not None else 1
            if "srv " not in line[p:] and "slot " not in line[p:]:
                continue
            m2 = inner(line, p)
            if m2 is None:
                continue
            event = _build(m2, line, i + 1)
            if event is None:
                continue
        out.append(event)
    return LogRead(source, n_lines, out, notes)


def parse_bytes(data: bytes, source: str = "<bytes>") -> LogRead:
    """Decode (invalid UTF-8 replaced) and parse a whole log."""
    read = parse_text(data.decode("utf-8", errors="replace"), source)
    # NUL bytes never occur in a text log; with no recognised line it is not a log at all
    read.binary = b"\x00" in data[:65536]
    return read


def read_log(path: str | Path) -> LogRead:
    """Read one log file. Raises ``PcspecError`` when it cannot be read or is binary data."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except IsADirectoryError:
        raise PcspecError("is a directory, not a log file", str(p)) from None
    except FileNotFoundError:
        raise PcspecError("no such file", str(p)) from None
    except OSError as exc:
        raise PcspecError(f"cannot read: {exc.strerror or exc}", str(p)) from None
    read = parse_bytes(data, str(p))
    if read.binary and not read.events:
        raise PcspecError("binary data, not a llama-server log", str(p))
    return read
