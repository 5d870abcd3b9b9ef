"""Trace files: versioned JSON lines that drive a ``Server``.

Line 1 is the header::

    {"schema": 1, "kind": "pcspec-trace", "variant": "pr30137", "config": {...},
     "seed": 7, "expect": [{"property": "RB-2", "op": 5, "message": "..."}]}

``config`` holds only the keys that differ from ``Config()`` defaults (any may be given);
``expect`` (optional) lists the violations the trace is known to show, each a known property
ID with the operation index where it shows (``op``; without it, any operation) and a message
for people. ``pcspec replay`` exits 0 when every expected violation is present among what it
observes (other violations may show too), or, without ``expect``, when it observes none.
Every further line is one operation of ``pcspec.core.ops``.

Files are read as a stream: the header is checked before any further line is read, and each
operation as its line comes, so a file that is not a trace (or breaks at line 2) is refused
at once, however large it is.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Collection, Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pcspec.core import ops
from pcspec.core.errors import PcspecError
from pcspec.model.config import Config
from pcspec.model.design import Design
from pcspec.model.designs import current_name, from_origin, get_design, renamed_error

SCHEMA = 1
KIND = "pcspec-trace"
# A header holds a configuration and a few expected violations: far below this. A longer first
# line is some other file (a log, a binary) and is refused without reading it whole.
MAX_HEADER_BYTES = 1 << 20

Lines = Generator[tuple[int, str], None, None]  # (line number, text), blank lines left out

__all__ = ["KIND", "SCHEMA", "Trace", "config_diff", "load", "parse", "read"]


@dataclass
class Trace:
    variant: Design
    config: Config
    ops: list[ops.Operation]
    seed: int | None = None
    expect: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        # An operation may be given as its JSON object (a counterexample script's STEPS, a
        # test's literal): it is parsed here, so a misspelt field is refused before any runs.
        self.ops = [ops.parse(op) for op in self.ops]

    def header(self) -> dict[str, Any]:
        head: dict[str, Any] = {"schema": SCHEMA, "kind": KIND, "variant": self.variant.name}
        origin = self.variant.origin
        if origin is not None:  # a design of one's own: where to import it from, and its rules
            head["design"] = origin
            if self.variant.rules is not type(self.variant).rules:
                head["rules"] = self.variant.rules.name
        head["config"] = config_diff(self.config)
        if self.seed is not None:
            head["seed"] = self.seed
        if self.expect:
            head["expect"] = self.expect
        return head

    def dumps(self) -> str:
        lines = [json.dumps(self.header(), sort_keys=True)]
        lines += [json.dumps(op.to_json(), sort_keys=True) for op in self.ops]
        return "\n".join(lines) + "\n"

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.dumps(), encoding="utf-8")


def config_diff(config: Config) -> dict[str, Any]:
    """The configuration's JSON keys that differ from ``Config()``'s."""
    defaults = Config().to_json()
    return {k: v for k, v in config.to_json().items() if defaults.get(k) != v}


# -- reading ---------------------------------------------------------------------------------


def text_lines(text: str) -> Lines:
    return ((n, ln) for n, ln in enumerate(text.splitlines(), 1) if ln.strip())


def file_lines(path: Path) -> Lines:
    """The file's lines, read one at a time; the first is read with a length cap."""
    where = str(path)
    try:
        with path.open("rb") as f:
            n = 0
            while True:  # the header: the first non-blank line, at most MAX_HEADER_BYTES long
                raw = f.readline(MAX_HEADER_BYTES + 1)
                n += 1
                if len(raw) > MAX_HEADER_BYTES:
                    raise PcspecError(f"line {n} is longer than {MAX_HEADER_BYTES} bytes: not a pcspec trace", where)
                if not raw or raw.strip():
                    break
            if raw:
                yield n, _decoded(n, raw, where)
            for k, raw in enumerate(f, n + 1):
                if raw.strip():
                    yield k, _decoded(k, raw, where)
    except FileNotFoundError:
        raise PcspecError("no such file", where) from None
    except OSError as exc:
        raise PcspecError(f"cannot read ({exc.strerror or exc})", where) from None


def _decoded(n: int, raw: bytes, where: str) -> str:
    # Decoded line by line (not by the text layer's chunks) so the error names the right line.
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise PcspecError(f"line {n} is not UTF-8 text: not a pcspec trace", where) from None


def _json(n: int, line: str, where: str) -> Any:
    """One line's JSON value. Inputs json cannot take (nesting deeper than the interpreter's
    stack, integers beyond the int-parsing digit limit) are refused as such: no trace field
    is nested more than two levels or needs more than 19 digits."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise PcspecError(f"line {n} is not JSON ({exc.msg} at column {exc.colno})", where) from None
    except RecursionError:
        raise PcspecError(f"line {n} is nested too deeply to be a trace line", where) from None
    except ValueError:  # int(): "Exceeds the limit (4300 digits) for integer string conversion"
        digits = sys.get_int_max_str_digits()
        raise PcspecError(f"line {n} holds an integer of more than {digits} digits", where) from None


def first_object(lines: Lines, where: str) -> tuple[int, Any]:
    """The first line's JSON value (the header), read before anything else."""
    first = next(lines, None)
    if first is None:
        raise PcspecError("empty trace: expected a header line", where)
    return first[0], _json(*first, where)


def _variant(name: object, override: str | Design | None, origin: object = None, rules: object = None) -> Design:
    if isinstance(override, Design):
        return override
    if override is None and isinstance(origin, str):  # the design that made it, by its class
        return from_origin(origin, str(name or ""), rules if isinstance(rules, str) else None)
    if override:  # a command line's --variant: an old design name is refused, saying the new one
        renamed = renamed_error(override)
        if renamed is not None:
            raise renamed
    try:
        # a header's old design name (``master``, before it was ``baseline``) reads as the new one
        return get_design(override or current_name(str(name or "")))
    except PcspecError as exc:  # a trace of one's own variant is replayed with --variant-module
        raise PcspecError(f"{exc.why} (a variant of your own: give --variant-module MODULE:NAME)") from None


def _expect(raw: object, known: Collection[str] | None) -> list[dict[str, Any]]:
    """The header's ``expect``: every entry a property ID (one of ``known`` when given: the
    catalogue's, which this layer does not import), ``op`` an operation index."""
    if not isinstance(raw, list) or not all(isinstance(e, dict) for e in raw):
        raise PcspecError('"expect" must be a list of {"property": ..., "op": ...}')
    for e in raw:
        pid = e.get("property")
        if not isinstance(pid, str) or not pid:
            raise PcspecError(f'"expect": "property" must be a property ID, got {pid!r}')
        if known is not None and pid not in known:
            raise PcspecError(f'"expect": unknown property {pid!r}; valid properties: {", ".join(known)}')
        op = e.get("op")
        if op is not None and (isinstance(op, bool) or not isinstance(op, int) or op < 0):
            raise PcspecError(f'"expect": "op" must be an operation index (0 or more), got {op!r}')
    return raw


def from_header(
    n0: int,
    head: Any,
    lines: Lines,
    where: str,
    variant: str | Design | None = None,
    known: Collection[str] | None = None,
) -> Trace:
    """The trace whose header (line ``n0``) is ``head``; its operations are read from ``lines``."""
    if not isinstance(head, dict) or head.get("kind") != KIND:
        raise PcspecError(
            f'line {n0}: not a pcspec trace header (expected {{"schema": {SCHEMA}, "kind": "{KIND}", ...}})', where
        )
    if head.get("schema") != SCHEMA:
        raise PcspecError(
            f"line {n0}: unsupported trace schema {head.get('schema')!r} (this pcspec reads {SCHEMA})", where
        )
    try:
        v = _variant(head.get("variant"), variant, head.get("design"), head.get("rules"))
        expect = _expect(head.get("expect", []), known)
    except PcspecError as exc:
        raise PcspecError(f"line {n0}: {exc.why}", where) from None
    cfg = Config.from_json(head.get("config", {}), f"{where}: line {n0}")
    out: list[ops.Operation] = []
    for n, line in lines:
        op = _json(n, line, where)
        try:
            out.append(ops.parse(op))
        except PcspecError as exc:
            raise PcspecError(f"line {n}: {exc.why}", where) from None
    seed = head.get("seed")
    return Trace(v, cfg, out, seed if isinstance(seed, int) and not isinstance(seed, bool) else None, expect)


def read(
    lines: Lines, where: str, variant: str | Design | None = None, known: Collection[str] | None = None
) -> Trace:
    return from_header(*first_object(lines, where), lines, where, variant, known)


def parse(
    text: str, where: str = "<trace>", variant: str | Design | None = None, known: Collection[str] | None = None
) -> Trace:
    """Parse a trace; every problem names the line and the reason. ``known``: the property IDs
    an ``expect`` may name (``pcspec.properties.catalogue.IDS``; None: any ID)."""
    return read(text_lines(text), where, variant, known)


def load(path: Path, variant: str | Design | None = None, known: Collection[str] | None = None) -> Trace:
    """Read a trace file as a stream (see the module docstring)."""
    return read(file_lines(path), str(path), variant, known)
