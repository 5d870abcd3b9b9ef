"""The log's events as a pcspec trace file (``pcspec check-log --trace OUT.jsonl``).

Format, schema 1, JSON lines (UTF-8, one object per line):

* a header per log: ``{"schema": 1, "kind": "pcspec-log-events", "source": "<log path>"}``;
* then one object per event of that log, in log order:
  ``{"event": "<name>", "line": <int>, "level": "<letter or empty>", <fields>}``,
  where ``<name>`` is the event's ``kind`` (``checkpoint_created``, ``cache_make_room``, ...)
  and the fields are those of the event class in ``pcspec.logcheck.events`` (``slot`` and
  ``task`` for slot lines; sizes in MiB as logged; fields an older build does not print are
  ``null``; a ``nan`` value, which the server prints for an empty pinned slot, is ``null``).

Several logs are written one after the other, each opened by its own header. ``TraceWriter``
writes the events as a log is read (``pcspec check-log --trace``); ``load_trace`` reads the file
back into the same event objects.
"""

from __future__ import annotations

import json
import math
from dataclasses import MISSING, fields
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

from pcspec.core.errors import PcspecError
from pcspec.logcheck import events as ev

SCHEMA = 1
KIND = "pcspec-log-events"

_BY_NAME: dict[str, type[ev.Event]] = {t.kind: t for t in ev.ALL_EVENT_TYPES}


def event_record(e: ev.Event) -> dict[str, Any]:
    rec: dict[str, Any] = {"event": e.kind}
    for f in fields(e):
        v = getattr(e, f.name)
        if isinstance(v, float) and math.isnan(v):
            v = None
        rec[f.name] = v
    return rec


class TraceWriter:
    """Writes a trace as the logs are read (one event at a time). Opening it fails at once, with
    a ``PcspecError``, when the path cannot be written."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        try:
            self._out: TextIO = open(path, "w", encoding="utf-8")  # noqa: SIM115 (close())
        except OSError as exc:
            raise self._error(exc) from None

    def _error(self, exc: OSError) -> PcspecError:
        return PcspecError(f"cannot write the trace: {exc.strerror or exc}", self.path)

    def begin(self, source: str) -> None:
        """Start the events of one log."""
        self._write(json.dumps({"schema": SCHEMA, "kind": KIND, "source": source}) + "\n")

    def write(self, e: ev.Event) -> None:
        self._write(json.dumps(event_record(e)) + "\n")

    def _write(self, text: str) -> None:
        try:
            self._out.write(text)
        except OSError as exc:
            raise self._error(exc) from None

    def close(self) -> None:
        try:
            self._out.close()
        except OSError as exc:
            raise self._error(exc) from None

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def load_trace(path: str | Path) -> list[tuple[str, list[ev.Event]]]:
    """Read a file written by ``TraceWriter``; raises PcspecError naming the bad line."""
    logs: list[tuple[str, list[ev.Event]]] = []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PcspecError(f"cannot read the trace: {exc}", str(path)) from None
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        where = f"{path}:{n}"
        try:
            rec = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise PcspecError(f"not JSON: {exc.msg}", where) from None
        if not isinstance(rec, dict):
            raise PcspecError("expected a JSON object", where)
        if rec.get("kind") == KIND:
            if rec.get("schema") != SCHEMA:
                raise PcspecError(f"unsupported schema {rec.get('schema')!r}", where)
            logs.append((str(rec.get("source", "")), []))
            continue
        if not logs:
            raise PcspecError("event before the header line", where)
        cls = _BY_NAME.get(str(rec.get("event")))
        if cls is None:
            raise PcspecError(f"unknown event {rec.get('event')!r}", where)
        try:
            # a field with a default may be missing: a trace written before the field was added
            args = {f.name: rec[f.name] for f in fields(cls) if f.name in rec or f.default is MISSING}
            logs[-1][1].append(cls(**args))
        except (KeyError, TypeError) as exc:
            raise PcspecError(f"bad fields for {cls.kind}: {exc}", where) from None
    return logs
