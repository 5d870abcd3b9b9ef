"""Where pcspec writes: output folders and files, checked before the work that fills them.

A verify runs for minutes before it writes its first counterexample, a replay can run long
before it writes its ``--dot`` graph: an output path that cannot be written must be refused
up front, in one line naming the option, not with a traceback at the end of the run.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from pcspec.core.errors import PcspecError


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def ensure_writable_dir(path: Path, option: str = "--out") -> Path:
    """Create the output folder ``path`` if missing and check that files can be created in it.

    Refused (``PcspecError`` naming ``option``): a path that is a file, a path under a file, a
    folder that cannot be created, a folder in which a file cannot be created (read-only). The
    check creates and removes one empty file: permission bits do not tell (root ignores them,
    a read-only mount ignores them for everyone).
    """
    where = f"{option} {path}"
    if path.exists() and not path.is_dir():
        raise PcspecError("is a file, not a folder: give a folder (it is created if missing)", where)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = next(p for p in path.parents if p.exists())
        raise PcspecError(f"{blocker} is a file, so no folder can be created under it", where) from None
    except OSError as exc:
        raise PcspecError(f"cannot create this folder ({_reason(exc)}): give another", where) from None
    try:
        with tempfile.TemporaryFile(dir=path, prefix=".pcspec-write-check-"):
            pass
    except OSError as exc:
        raise PcspecError(f"cannot write in this folder ({_reason(exc)}): give a writable one", where) from None
    return path


def check_output_file(path: Path, option: str) -> Path:
    """Check, before the work, that ``path`` can be written as a file: not a folder, and in a
    folder that exists and is writable. The file itself is written later (``write_output``)."""
    where = f"{option} {path}"
    if path.is_dir():
        raise PcspecError("is a folder: give a file name", where)
    parent = path.parent
    if not parent.is_dir():
        what = "is a file" if parent.exists() else "does not exist"
        raise PcspecError(f"the folder {parent} {what}: create it or give another path", where)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PcspecError(f"cannot write in the folder {parent}: give a writable one", where)
    return path


def write_output(path: Path, data: str | bytes, option: str) -> None:
    """Write an output file; a failure (the disk filled, the folder vanished) is one line."""
    try:
        if isinstance(data, str):
            path.write_text(data, encoding="utf-8")
        else:
            path.write_bytes(data)
    except OSError as exc:
        raise PcspecError(f"cannot write ({_reason(exc)})", f"{option} {path}") from None
