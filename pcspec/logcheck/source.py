"""A log file as a source of newline-terminated blocks, read in bounded memory.

The checker reads a log twice (``pcspec.logcheck.checker``: a first pass learns what each server
run shows, the second replays it), and the two passes run side by side, so a ``LogFile`` hands
out independent readers over one open file. Its length is fixed when it is opened: a log the
server is still writing is checked as it was then, and both passes see the same bytes.

* A block ends at a line end (``\\n``), so decoding it on its own gives the same text as decoding
  the whole file (a line end is never part of a multi-byte UTF-8 sequence) and line numbers stay
  exact. A block holds whole lines of about ``BLOCK`` bytes.
* A line longer than ``MAX_LINE`` (no server line is; a captured binary blob or a request body
  dumped at DEBUG level can be) is cut to its first ``HEAD`` bytes, with a note.
* A pipe or FIFO (``<(ssh host cat server.log)``) cannot be read twice: it is first copied to an
  anonymous temporary file, so memory stays bounded while the disk holds the copy.
* Bad input raises ``PcspecError`` with a one-line reason: missing, a directory, unreadable, a
  device, empty. Binary data is only sniffed here (``looks_binary``); whether the file holds a
  server line anyway is the caller's decision.
"""

from __future__ import annotations

import io
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

from pcspec.core.errors import PcspecError

BLOCK = 64 << 10  # bytes read at a time (larger blocks cost RSS, not speed)
MAX_LINE = 8 << 20  # a line longer than this is cut ...
HEAD = 64 << 10  # ... to its first HEAD bytes
SNIFF = 64 << 10  # bytes looked at to tell text from binary data


class LogFile:
    """One log opened for reading. Use as a context manager; ``blocks()`` may be called several
    times, and the iterators it returns may be interleaved."""

    def __init__(self, path: str | Path) -> None:
        self.source = str(path)
        self._file: BinaryIO = self._open(Path(path))
        try:
            self.size = self._file.seek(0, io.SEEK_END)
            if self.size == 0:
                raise PcspecError("empty file, not a llama-server log", self.source)
            self.looks_binary = _looks_binary(self._read_at(0, SNIFF))
        except BaseException:
            self._file.close()
            raise

    def _open(self, p: Path) -> BinaryIO:
        try:
            f: BinaryIO = open(p, "rb", buffering=0)  # noqa: SIM115 (kept open, see close())
        except FileNotFoundError:
            raise PcspecError("no such file", str(p)) from None
        except IsADirectoryError:
            raise PcspecError("is a directory, not a log file", str(p)) from None
        except OSError as exc:
            raise PcspecError(f"cannot read: {exc.strerror or exc}", str(p)) from None
        try:
            mode = os.fstat(f.fileno()).st_mode
            if stat.S_ISREG(mode):
                return f
            with f:
                if stat.S_ISDIR(mode):
                    raise PcspecError("is a directory, not a log file", str(p))
                if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
                    raise PcspecError("not a regular file or a pipe", str(p))
                # two passes need a file that can be read again: copy the pipe to disk
                spool: BinaryIO = tempfile.TemporaryFile()  # noqa: SIM115 (kept open)
                try:
                    shutil.copyfileobj(f, spool, BLOCK)
                except BaseException:
                    spool.close()
                    raise
                return spool
        except OSError as exc:
            f.close()
            raise PcspecError(f"cannot read: {exc.strerror or exc}", str(p)) from None

    def _read_at(self, offset: int, n: int) -> bytes:
        n = min(n, self.size - offset)
        if n <= 0:
            return b""
        try:
            self._file.seek(offset)
            data = self._file.read(n)
        except OSError as exc:
            raise PcspecError(f"cannot read: {exc.strerror or exc}", self.source) from None
        if len(data) < n:
            # the file shrank (rotated or truncated) while being checked
            raise PcspecError("the file changed while it was being read", self.source)
        return data

    def blocks(self, notes: list[str] | None = None) -> Iterator[tuple[int, bytes]]:
        """``(lines before the block, block)`` for the whole file. Every block but the last ends
        with ``\\n``; the last one is the final line without a line end, if there is one. Notes
        about cut lines go to ``notes``."""
        offset = 0
        n_lines = 0
        carry: list[bytes] = []  # the start of a line longer than a block (kept as parts: no
        carry_len = 0  # quadratic re-joining)
        cutting = False  # inside an over-long line, past its first HEAD bytes
        while offset < self.size:
            data = self._read_at(offset, BLOCK)
            offset += len(data)
            end = data.rfind(b"\n")
            if end < 0:
                if not cutting:
                    carry.append(data)
                    carry_len += len(data)
                    if carry_len > MAX_LINE:
                        carry, carry_len, cutting = [b"".join(carry)[:HEAD]], HEAD, True
                        if notes is not None:
                            notes.append(f"line {n_lines + 1}: longer than {MAX_LINE} bytes, "
                                         f"only its first {HEAD} bytes were read")
                continue
            if carry:
                first = data.find(b"\n") + 1
                head = b"".join(carry) + (b"\n" if cutting else data[:first])
                carry, carry_len, cutting = [], 0, False
                yield n_lines, head
                n_lines += 1
                data = data[first:]
                end -= first
            if end >= 0:
                yield n_lines, data[:end + 1]
                n_lines += data.count(b"\n", 0, end + 1)
            if end + 1 < len(data):
                carry, carry_len = [data[end + 1:]], len(data) - end - 1
        if carry:
            yield n_lines, b"".join(carry)

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> LogFile:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _looks_binary(head: bytes) -> bool:
    """NUL bytes never occur in a text log, and in UTF-8 text invalid sequences are rare (real
    logs have a few, from token pieces cut mid-character)."""
    if b"\x00" in head:
        return True
    bad = head.decode("utf-8", errors="replace").count("\ufffd")
    return bad * 8 > len(head)
