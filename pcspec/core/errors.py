"""The one exception type that crosses the CLI boundary.

Bad input (a malformed trace, a corrupted slot file, a log that is not a log, an invalid
configuration) is reported as a ``PcspecError`` naming *where* (a file and line, or a byte
offset) and *why*. The CLI prints it as one line and exits 2; it never shows a traceback.

The class is the model's own (``pcspec.model.errors``): the spec must not depend on the glue,
and one class means one ``except`` catches the model's errors and the glue's alike.
"""

from __future__ import annotations

from pcspec.model.errors import PcspecError

__all__ = ["PcspecError"]
