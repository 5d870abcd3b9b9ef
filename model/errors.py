"""The spec's one error type: bad input to the model, named by *where* and *why*.

A malformed operation, an invalid configuration, a slot file that does not parse: the model
raises ``PcspecError`` with where the problem is (a field, a file and line, a byte offset) and
why. It lives here, in the model, so that the spec depends on nothing outside it (the glue's
``pcspec.errors`` re-exports it, and the CLI prints it as one line and exits 2).
"""

from __future__ import annotations


class PcspecError(Exception):
    """A user-facing error: ``where`` locates the problem, ``why`` explains it."""

    def __init__(self, why: str, where: str | None = None) -> None:
        self.why = why
        self.where = where
        super().__init__(f"{where}: {why}" if where else why)
