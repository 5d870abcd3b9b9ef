"""The one exception type that crosses the CLI boundary.

Bad input (a malformed trace, a corrupted slot file, a log that is not a log, an invalid
configuration) is reported as a ``PcspecError`` naming *where* (a file and line, or a byte
offset) and *why*. The CLI prints it as one line and exits 2; it never shows a traceback.
"""

from __future__ import annotations


class PcspecError(Exception):
    """A user-facing error: ``where`` locates the problem, ``why`` explains it."""

    def __init__(self, why: str, where: str | None = None) -> None:
        self.why = why
        self.where = where
        super().__init__(f"{where}: {why}" if where else why)
