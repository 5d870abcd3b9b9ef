"""Read a llama-server log into typed events (``pcspec.logcheck.events``).

The log is read as bytes, in blocks of whole lines (``pcspec.logcheck.source``), each decoded
with ``errors="replace"`` (token pieces in DEBUG lines are often not valid UTF-8; a replaced byte
never swallows the newline, so line numbers are exact).
ANSI colour codes are removed. Each line may carry the ``<min>.<ss>.<mmm>.<uuu> `` timestamp
and the level letter (``I`` is both INFO and TRACE, server-common.h / common/log.h), or neither
(``--no-log-prefix``). After them comes the ``SRV_x`` prefix ``srv  <func, 12 chars>: `` or the
``SLT_x`` prefix ``slot <func, 12 chars>: id %2d | task %d | `` (server-common.h:28-35 at 0c1e570).
The function tag is not used to recognise a message: builds before the lambda refactor print
``update_slots`` where newer ones print ``operator()``, so recognition goes by message text.

Cost: a line is first tested with two substring checks (``"srv "``/``"slot "``), then the
prefix regex, then a dictionary lookup on the first word of the message
(``pcspec.logcheck.messages.DISPATCH``); only lines whose first word can start a known message
reach a message regex. Everything else is skipped.

Older message variants accepted (the eras of ``builds``, see ``messages``): ``sim =``
for ``f_sim =``, ``sim_best`` for ``f_sim_best``, ``Checking`` for ``checking``, any level
letter, key=value pairs inside parentheses that may be absent (``n_tokens``, ``n_past``,
``n_swa``, ``pos_next``), the ``created prompt processing context checkpoint`` variant, a
summary line without ``est`` and a per-entry line without ``checkpoints``.

Two more things real captures contain: a message printed without a newline glued to the next
line (the later timestamped prefix is found), and a last line without a newline (a log cut
while being written: ignored, with a note, since a number in it may be cut short).

Three lines without the ``srv``/``slot`` prefix are read as well: the build line
(``common_params_print_info: build N (commit)``, which tells the rule set, see
``pcspec.logcheck.builds``), the verbosity line (``common_params_print_info: verbosity = N``,
which tells which line kinds the log can show, see ``pcspec.logcheck.levels``) and libllama's
DEBUG ``state_read_meta`` line (which shows a slot-file restore). A block is searched for their
key words once, and only the lines of a block
that has one are tested for them.

``stream_events`` reads a ``LogFile`` block by block (memory independent of the log's length);
``parse_text`` and ``parse_bytes`` do the same for text in memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pcspec.core.errors import PcspecError
from pcspec.logcheck import events as ev
from pcspec.logcheck.builds import parse_build
from pcspec.logcheck.messages import DISPATCH
from pcspec.logcheck.source import LogFile

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

_STATE_READ_WORD = "state_read_meta: "
_STATE_READ = re.compile(
    r"(?:\d+\.\d\d\.\d\d\d\.\d\d\d )?(?:([A-Z]) )?state_read_meta: cell_count = (\d+), "
    r"dest_seq_id = (-?\d+)"
)
_BUILD_WORD = "print_info: build "
_VERBOSITY_WORD = "print_info: verbosity = "
_VERBOSITY = re.compile(
    r"(?:\d+\.\d\d\.\d\d\d\.\d\d\d )?(?:([A-Z]) )?cmn +\S{1,12}: common_params_print_info: "
    r"verbosity = (-?\d+) "
)
# the other forms a build names itself in (pcspec.logcheck.builds.parse_build)
_OTHER_BUILD_WORDS = ("(build ", "build: ")
_BUILD = re.compile(
    r"(?:\d+\.\d\d\.\d\d\d\.\d\d\d )?(?:([A-Z]) )?cmn +\S{1,12}: common_params_print_info: "
    r"build (\d+) \(([^)\s]*)\) with "
)


@dataclass(slots=True)
class LogRead:
    """What the reader found in one log (all its events in memory: for tests and small logs;
    the checker streams instead)."""

    source: str
    n_lines: int
    events: list[ev.Event]
    notes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ReadInfo:
    """What a stream learnt besides its events, complete once the stream is exhausted."""

    n_lines: int = 0
    notes: list[str] = field(default_factory=list)
    # lines with the server's log prefix (``srv``/``slot``, the build line, libllama's state
    # read), recognised as an event or not: none means the file is not a llama-server log
    n_server_lines: int = 0


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


def _other(line: str, ln: int) -> ev.Event | None:
    """The two recognised lines without an ``srv``/``slot`` prefix."""
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    m = _STATE_READ.match(line)
    if m is not None:
        return ev.StateRead(ln, m.group(1) or "", int(m.group(2)), int(m.group(3)))
    m = _VERBOSITY.match(line)
    if m is not None:
        return ev.VerbosityLine(ln, m.group(1) or "", int(m.group(2)))
    m = _BUILD.match(line)
    if m is not None:
        return ev.BuildLine(ln, m.group(1) or "", int(m.group(2)), m.group(3))
    named = parse_build(line)
    if named is not None:
        return ev.BuildLine(ln, "", *named)
    return None


def _names_build(line: str) -> bool:
    return _BUILD_WORD in line or _VERBOSITY_WORD in line or any(w in line for w in _OTHER_BUILD_WORDS)


def parse_lines(lines: list[str], first: int, text: str, out: list[ev.Event]) -> int:
    """Append the events of ``lines`` (line numbers from ``first + 1``) to ``out``; ``text`` is
    the text the lines come from (searched once for the rare non-prefixed lines). Returns how
    many of the lines are server lines (the prefix matched, whether or not the message is one
    the checker reads)."""
    state_reads = _STATE_READ_WORD in text
    builds = _BUILD_WORD in text or _VERBOSITY_WORD in text or any(w in text for w in _OTHER_BUILD_WORDS)
    header = _HEADER.match
    inner = _TS_HEADER.search
    strip_ansi = _ANSI.sub
    n_server = 0
    for i, line in enumerate(lines, first + 1):
        # prefilter: every relevant line but two rare ones is an SRV_x or SLT_x line
        if "srv " not in line and "slot " not in line:
            if (state_reads and _STATE_READ_WORD in line) or (builds and _names_build(line)):
                other = _other(line, i)
                if other is not None:
                    n_server += 1
                    out.append(other)
            continue
        if "\x1b" in line:
            # colours wrap the timestamp and level letter, never the "srv"/"slot" tag
            line = strip_ansi("", line)
        m = header(line)
        event = _build(m, line, i) if m is not None else None
        if m is not None:
            n_server += 1
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
            n_server += m is None
            event = _build(m2, line, i)
            if event is None:
                continue
        out.append(event)
    return n_server


def _cut_last(last: str, n_lines: int, notes: list[str]) -> bool:
    """Whether a last line without a line end is a server line, to be ignored: the writer may
    have been cut off in the middle of a number, so nothing read from it can be trusted."""
    last = _ANSI.sub("", last)
    if _HEADER.match(last) or _TS_HEADER.search(last) or _STATE_READ.match(last):
        notes.append(f"line {n_lines}: last line has no line end (truncated?); ignored")
        return True
    return False


def _parse_block(text: str, before: int, notes: list[str], out: list[ev.Event]) -> tuple[int, int]:
    """Append the events of a block of whole lines that follows ``before`` lines (its last line
    may lack the line end: a log cut while being written) to ``out``; (lines so far, server
    lines in the block)."""
    lines = text.split("\n")
    if text.endswith("\n") or text == "":
        lines.pop()  # the empty string after the final newline
    n_lines = before + len(lines)
    if not text.endswith("\n") and text and _cut_last(lines[-1], n_lines, notes):
        lines.pop()
    return n_lines, parse_lines(lines, before, text, out)


def parse_text(text: str, source: str = "<text>") -> LogRead:
    """Turn decoded log text into events. ``text`` may contain ANSI codes."""
    out: list[ev.Event] = []
    notes: list[str] = []
    n_lines, _ = _parse_block(text, 0, notes, out)
    return LogRead(source, n_lines, out, notes)


def parse_bytes(data: bytes, source: str = "<bytes>") -> LogRead:
    """Decode (invalid UTF-8 replaced) and parse a whole log."""
    return parse_text(data.decode("utf-8", errors="replace"), source)


def stream_events(log: LogFile, info: ReadInfo | None = None) -> Iterator[ev.Event]:
    """The events of ``log`` in order, read block by block. ``info`` (if given) receives the
    line count and the notes once the iterator is exhausted."""
    notes: list[str] = [] if info is None else info.notes
    n_lines = 0
    out: list[ev.Event] = []
    for before, block in log.blocks(notes):
        n_lines, n_server = _parse_block(block.decode("utf-8", errors="replace"), before, notes,
                                         out)
        if info is not None:
            info.n_server_lines += n_server
        yield from out
        out.clear()
    if info is not None:
        info.n_lines = n_lines


def read_log(path: str | Path) -> LogRead:
    """Read one whole log into memory. Raises ``PcspecError`` when it cannot be read or is
    binary data."""
    with LogFile(path) as log:
        info = ReadInfo()
        events = list(stream_events(log, info))
        if log.looks_binary and not events:
            raise PcspecError("binary data, not a llama-server log", log.source)
        return LogRead(log.source, info.n_lines, events, info.notes)
