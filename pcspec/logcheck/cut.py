"""Cut a ``-v`` llama-server log to what the same server prints at a lower verbosity.

``python -m pcspec.logcheck.cut IN OUT [--verbosity N]`` (default 3, the server's default)
writes the lines of ``IN`` that a server started with ``-lv N`` prints, byte for byte, in order.
What decides (``pcspec.logcheck.levels`` for the C++):

* a ``D`` line is DEBUG (verbosity 5): kept only from ``N >= 5``;
* a ``W`` or ``E`` line is kept at every verbosity;
* an ``I`` line the reader recognises (an event of ``pcspec.logcheck.events``) has the level of
  its call site (``levels.LEVELS``: INFO 3 or TRACE 4);
* the verbosity line itself (INFO) is kept, with the printed number replaced by ``N``
  (common.cpp:404-405 prints the threshold in force);
* the other ``I`` lines are not read by the checker: without a ``tag func:`` prefix they are
  libllama's INFO lines, which ``common_log_default_callback`` prints at TRACE (log.cpp:532):
  dropped below 4; so are the ``COM_TRC`` start-up lines (``_COM_TRACE``) and the frequent
  ``SLT_TRC`` / ``SRV_TRC`` lines the checker does not read (``_SERVER_TRACE``), both listed
  from their call sites; every other tagged one is kept (its level does not change what the
  checker sees);
* a line without a timestamp continues the entry above it (a message with its own line ends)
  and shares its fate; two entries glued on one line (a message printed without a line end) are
  judged one by one.

A log without timestamps and level letters (``--no-log-prefix``) cannot be cut: exit 2.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from pcspec.core.errors import PcspecError
from pcspec.logcheck import events as ev
from pcspec.logcheck import levels
from pcspec.logcheck.reader import parse_lines

# "M.SS.mmm.uuu L " at the start of an entry (common/log.cpp:138-154)
_ENTRY = re.compile(rb"\d+\.\d\d\.\d\d\d\.\d\d\d ([A-Z]) ")
_TAGGED = re.compile(rb"\d+\.\d\d\.\d\d\d\.\d\d\d I (\w{1,4}) +\S{1,12}: ")
_VERBOSITY_NUMBER = re.compile(rb"(common_params_print_info: verbosity = )-?\d+")
# COM_TRC lines of common_params_print_info (common.cpp:409-417) and common_init_from_params
# (1201-1202, 1277, 1417, 1498, 1524) that a -v log shows at start-up
_COM_TRACE = (b"device_info:", b"  - ", b"system_info: ", b"fitting params to device memory",
              b"(for bugs during this step", b"warming up the model", b"the context supports",
              b"the context does not support", b"added ")
# SLT_TRC / SRV_TRC messages the checker does not read (0c1e570 server-context.cpp: 388 "init
# sampler", 1338 and 1344 the prompt-cache hints, 1785-1786 the sampler, 2788 and 2800 "all
# slots are idle"; server-stream.cpp's "conv_id=" and "done request" of b11549)
_SERVER_TRACE = (b"init sampler, took ", b"use `--cache-ram 0` to disable", b"for more info see ",
                 b"sampler chain: ", b"sampler params: ", b"all slots are idle", b"conv_id=",
                 b"done request: ", b"launching slots for parent task", b" - copying ")
_SLOT_FIELDS = re.compile(rb"id +-?\d+ \| task -?\d+ \| ")


def _level(entry: bytes) -> int:
    """The verbosity at which ``entry`` (one log entry, starting with its timestamp) prints."""
    m = _ENTRY.match(entry)
    assert m is not None
    letter = m.group(1)
    if letter == b"D":
        return levels.DBG
    if letter in (b"W", b"E"):
        return levels.WRN
    text = entry.decode("utf-8", errors="replace").rstrip("\n")
    found: list[ev.Event] = []
    parse_lines([text], 0, text, found)
    if found:
        return levels.level_of(found[0])
    tagged = _TAGGED.match(entry)
    if tagged is None:
        return levels.TRC  # libllama INFO (log.cpp:532)
    body = entry[tagged.end():]
    if tagged.group(1) == b"cmn":
        return levels.TRC if body.startswith(_COM_TRACE) else levels.INF
    fields = _SLOT_FIELDS.match(body)
    if fields is not None:
        body = body[fields.end():]
    return levels.TRC if body.startswith(_SERVER_TRACE) else levels.INF


def _entries(line: bytes) -> Iterator[bytes]:
    """The entries of one physical line: more than one when a message without a line end was
    followed by another (the later timestamped prefix starts a new entry)."""
    starts = [m.start() for m in _ENTRY.finditer(line)]
    if not starts or starts[0] != 0:
        starts = [0, *starts]
    for a, b in zip(starts, [*starts[1:], len(line)], strict=True):
        yield line[a:b]


def cut_lines(lines: Iterable[bytes], verbosity: int = levels.DEFAULT_VERBOSITY) -> Iterator[bytes]:
    """The lines (each with its line end) a server at ``verbosity`` prints of a ``-v`` log's."""
    keep = True  # the fate of the entry an unprefixed line continues
    any_prefix = False
    for line in lines:
        out: list[bytes] = []
        for entry in _entries(line):
            if _ENTRY.match(entry) is None:
                if keep:
                    out.append(entry)
                continue
            any_prefix = True
            keep = _level(entry) <= verbosity
            if keep:
                out.append(_VERBOSITY_NUMBER.sub(rb"\g<1>" + str(verbosity).encode(), entry))
        if out:
            joined = b"".join(out)
            yield joined if joined.endswith(b"\n") or not line.endswith(b"\n") else joined + b"\n"
    if not any_prefix:
        raise PcspecError("no line with a timestamp and a level letter: a log written with "
                          "--no-log-prefix cannot be cut by level")


def cut_file(src: str | Path, dst: str | Path, verbosity: int = levels.DEFAULT_VERBOSITY) -> int:
    """Write ``src`` cut to ``verbosity`` into ``dst``; returns the number of lines written."""
    try:
        data = Path(src).read_bytes()
    except OSError as exc:
        raise PcspecError(f"cannot read: {exc.strerror or exc}", str(src)) from None
    out = list(cut_lines(data.splitlines(keepends=True), verbosity))
    try:
        Path(dst).write_bytes(b"".join(out))
    except OSError as exc:
        raise PcspecError(f"cannot write: {exc.strerror or exc}", str(dst)) from None
    return len(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pcspec.logcheck.cut", description=__doc__.split("\n\n")[0])
    p.add_argument("src", metavar="IN", help="a log written with -v")
    p.add_argument("dst", metavar="OUT", help="where to write the cut log")
    p.add_argument("--verbosity", type=int, default=levels.DEFAULT_VERBOSITY,
                   help="the -lv threshold to cut to (default 3, the server's default)")
    args = p.parse_args(argv)
    try:
        n = cut_file(args.src, args.dst, args.verbosity)
    except PcspecError as exc:
        print(f"cut: {exc}", file=sys.stderr)
        return 2
    print(f"{args.dst}: {n} lines at verbosity {args.verbosity}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
