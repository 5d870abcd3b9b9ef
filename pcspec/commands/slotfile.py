"""``pcspec slotfile inspect FILE``: what a slot file holds and whether a restore accepts it.
``pcspec slotfile write OUT``: a slot file as the model's server writes it (``slotfile_writer``).

Inspect exits 0 when tokens and state are readable (a damaged checkpoint appendix is reported,
not fatal, because the server ignores it and still restores); 2 (a ``PcspecError``) when they
are not. A file whose first 8 bytes are not a slot file's magic and version is refused before
the rest of it is read.

The state is delimited and described by parsing it (``codec.reader.parse_state``: the KV,
iSWA, recurrent and hybrid layouts of versions 3 and 4), so a cut or an overwrite inside it is
reported at its byte. Three other ways: the model's own files hold a symbolic state blob (not a
llama.cpp state), read by its length field (``slot_files.symbolic_state_size``);
``--state-size`` gives the length and skips the parse; a version whose layout is unknown (2) is
delimited by scanning for the appendix. ``--expect-version`` reads the file as a build of that
version restores it: another version is refused as that build's loader refuses it.

JSON schema 2: ``state.located`` is "layout", "model", "exact" (``--state-size``) or "scan",
``state.layout`` the parsed layout (``tools.state_report``) or null; ``state_version_builds``
and ``appendix.builds`` name the builds that write and read them.
"""

from __future__ import annotations

import argparse
import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from pcspec.codec.layout import LAYOUT_VERSIONS, StateLayout
from pcspec.codec.reader import parse_state
from pcspec.commands.argtypes import count
from pcspec.core.errors import PcspecError
from pcspec.core.outdir import check_output_file, write_output
from pcspec.core.trace import load
from pcspec.model.config import Config
from pcspec.model.design import Design
from pcspec.model.designs import get_design
from pcspec.model.slot_files import symbolic_state_size
from pcspec.model.slotfile import HEADER_BYTES, LLAMA_STATE_SEQ_MAGIC, Head, SlotFile, read_head, read_slot_file
from pcspec.model.state_versions import APPENDIX_BUILDS, STATE_SEQ_BUILDS, STATE_SEQ_VERSIONS
from pcspec.properties.catalogue import BY_ID
from pcspec.tools.slotfile_writer import Written, from_tokens, from_trace
from pcspec.tools.state_report import last_position, layout_json, layout_text
from pcspec.tools.user_variant import add_variant_options, chosen_variant

JSON_SCHEMA = 2
FIRST_TOKENS = 16  # how many leading tokens the human output shows


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "slotfile",
        help="inspect llama-server slot save files",
        description="Read llama-server slot save files (POST /slots/{id}?action=save).",
    )
    sub = parser.add_subparsers(dest="slotfile_command", metavar="ACTION", required=True)
    inspect = sub.add_parser(
        "inspect",
        help="show a slot file's tokens, state and checkpoint appendix",
        description="Show a slot file's layout: header, tokens, state and the context checkpoint "
        "appendix. Exit 0 when the tokens and state are readable, 2 when they are not.",
    )
    inspect.add_argument("file", help="the slot file")
    inspect.add_argument("--json", action="store_true", help="print one JSON object")
    inspect.add_argument(
        "--state-size",
        type=count,
        metavar="N",
        help="the state's exact byte length (what the target context's state_read consumes); "
        "without it the state is parsed (KV, iSWA, recurrent, hybrid layouts of versions 3 and 4)",
    )
    inspect.add_argument(
        "--expect-version",
        type=count,
        metavar="V",
        help="read the file as a build of state-sequence version V restores it (3: the October tree; "
        "4: b11434, b11549): another version is refused as that build refuses it",
    )
    inspect.add_argument(
        "--n-ctx-checkpoints",
        type=count,
        metavar="N",
        help="keep only the last N checkpoints, as a server with --ctx-checkpoints N does",
    )
    inspect.set_defaults(func=_inspect)
    _register_write(sub)


def _register_write(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    write = sub.add_parser(
        "write",
        help="write a slot file the way the model's server saves one",
        description="Write the slot file the model's server saves (POST /slots/N?action=save) after "
        "one request of the given tokens, or after a trace; or the file a trace saved itself.",
    )
    write.add_argument("out", type=Path, help="the slot file to write")
    source = write.add_mutually_exclusive_group(required=True)
    source.add_argument("--tokens", type=int, nargs="+", metavar="ID", help="the tokens of the one request")
    source.add_argument("--trace", type=Path, help="a pcspec trace to replay first")
    write.add_argument("--slot", type=count, default=0, help="the slot to save (default 0)")
    write.add_argument(
        "--saved", metavar="NAME", help="with --trace: the file the trace saved as NAME (slot_save), as left"
    )
    write.add_argument(
        "--config", metavar="JSON", help='with --tokens: configuration fields, e.g. \'{"memory": "recurrent"}\''
    )
    add_variant_options(write, "a built-in variant (default: the trace's, or fixed)")
    write.add_argument("--json", action="store_true", help="print one JSON object")
    write.set_defaults(func=_write)


def _config(text: str | None) -> Config:
    if text is None:
        return Config()
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise PcspecError("not a JSON object", "--config") from None
    return Config.from_json(data, "--config")


def _write(args: argparse.Namespace) -> int:
    check_output_file(args.out, "OUT")
    chosen = chosen_variant(args)
    written: Written
    if args.trace is not None:
        if args.config is not None:
            raise PcspecError("--config goes with --tokens; a trace has its own configuration", "--config")
        written = from_trace(load(args.trace, chosen, BY_ID), args.slot, args.saved, args.out.name)
    else:
        if args.saved is not None:
            raise PcspecError("--saved goes with --trace", "--saved")
        variant = chosen if isinstance(chosen, Design) else get_design(chosen or "fixed")
        written = from_tokens(args.tokens, _config(args.config), variant, args.slot, args.out.name)
    write_output(args.out, written.data, "OUT")
    # What the file holds, read back; a file the trace damaged (corrupt_file) is written all the
    # same -- inspecting it is the point -- and the reason a restore refuses it is shown.
    try:
        parsed: SlotFile | None = read_slot_file(written.data, str(args.out))
        refused = None
    except PcspecError as exc:
        parsed, refused = None, str(exc)
    origin = f"slot {written.slot}" if written.slot is not None else f"the trace's file {args.saved}"
    if args.json:
        out: dict[str, Any] = {"schema": JSON_SCHEMA, "file": str(args.out), "bytes": len(written.data)}
        out |= {"variant": written.variant, "slot": written.slot, "saved": args.saved, "refused": refused}
        if parsed is not None:
            out |= {"tokens": len(parsed.tokens), "checkpoints": len(parsed.checkpoints or [])}
        print(json.dumps(out))
    elif parsed is not None:
        print(
            f"wrote {args.out}: {len(written.data)} bytes, {len(parsed.tokens)} tokens, "
            f"{len(parsed.checkpoints or [])} checkpoint(s) ({origin}, variant {written.variant})"
        )
    else:
        print(f"wrote {args.out}: {len(written.data)} bytes ({origin}, variant {written.variant})")
        print(f"  a restore refuses it: {refused}")
    return 0


def _refuse_bad_header(head: bytes, path: str, expected: int | None) -> None:
    """Refuse a file whose magic or version is wrong from its first 8 bytes alone: a file that
    is not a slot file (a model, a log) can be any size."""
    if len(head) < 8:
        return  # shorter than the header: the whole file is these bytes, read_slot_file says why
    magic, version = struct.unpack_from("<II", head)
    if magic != LLAMA_STATE_SEQ_MAGIC or version not in STATE_SEQ_VERSIONS or expected not in (None, version):
        read_slot_file(head, path, expected_version=expected)  # raises the reader's own message


def _read(f: BinaryIO, path: str, expected: int | None) -> bytes:
    head = f.read(HEADER_BYTES)
    _refuse_bad_header(head, path, expected)
    return head + f.read()


@dataclass(frozen=True)
class _State:
    size: int | None
    located: str  # layout, model, exact, scan
    layout: StateLayout | None = None


def _locate_state(data: bytes, head: Head, given: int | None, path: str) -> _State:
    if given is not None:
        return _State(given, "exact")
    symbolic = symbolic_state_size(data, head.state_offset)
    if symbolic is not None:  # the model's own file: not a llama.cpp state
        return _State(symbolic, "model")
    if head.state_version not in LAYOUT_VERSIONS:
        return _State(None, "scan")
    lay = parse_state(data, head.state_offset, head.state_version, path)
    return _State(lay.size, "layout", lay)


def _inspect(args: argparse.Namespace) -> int:
    path = str(args.file)
    try:
        with Path(path).open("rb") as f:
            data = _read(f, path, args.expect_version)
    except OSError as exc:
        raise PcspecError(f"cannot read the file: {exc.strerror or exc}", where=path) from None
    head = read_head(data, path, expected_version=args.expect_version)
    state = _locate_state(data, head, args.state_size, path)
    parsed = read_slot_file(
        data, path, n_ctx_checkpoints=args.n_ctx_checkpoints, state_size=state.size,
        expected_version=args.expect_version,
    )
    if args.json:
        print(json.dumps(to_json(parsed, path, state), indent=2))
    else:
        print(to_text(parsed, path, state))
    return 0


def to_json(f: SlotFile, path: str, state: _State) -> dict[str, Any]:
    """The ``--json`` object (schema 2)."""
    checkpoints = None
    if f.checkpoints is not None:
        checkpoints = [
            {
                "offset": off,
                "n_tokens": c.n_tokens,
                "pos_min": c.pos_min,
                "pos_max": c.pos_max,
                "data_tgt_bytes": len(c.data_tgt),
                "data_dft_bytes": len(c.data_dft),
                "data_spec_bytes": len(c.data_spec),
            }
            for off, c in zip(f.checkpoint_offsets, f.checkpoints, strict=True)
        ]
    return {
        "schema": JSON_SCHEMA,
        "file": path,
        "total_bytes": f.total_bytes,
        "n_read": f.n_read,
        "state_version": f.state_version,
        "state_version_builds": list(STATE_SEQ_BUILDS.get(f.state_version, ())),
        "tokens": {
            "count": len(f.tokens),
            "packed": f.packed,
            "offset": f.tokens_offset,
            "bytes": f.tokens_bytes,
            "tokens": f.tokens,
        },
        "state": {
            "offset": f.state_offset,
            "bytes": f.state_bytes,
            "located": state.located,
            "layout": layout_json(state.layout) if state.layout is not None else None,
        },
        "appendix": {
            "status": f.appendix_status,
            "reason": f.appendix_reason,
            "offset": f.appendix_offset,
            "bytes": f.appendix_bytes,
            "count": f.appendix_count,
            "checkpoints": checkpoints,
            "builds": list(APPENDIX_BUILDS),
        },
        "trailing_bytes": f.trailing_bytes,
    }


_HOW = {
    "layout": "end found by parsing the layout",
    "model": "the model's symbolic state, not a llama.cpp state: its length field",
    "exact": "exact size given",
    "scan": "layout of this version unknown: end found by scanning",
}


def _version_text(version: int) -> str:
    builds = STATE_SEQ_BUILDS.get(version, ())
    others = [
        f"version {v}: {', '.join(b)}" for v, b in STATE_SEQ_BUILDS.items() if v != version and v in LAYOUT_VERSIONS
    ]
    if version == max(STATE_SEQ_BUILDS) and builds:
        # the newest version: builds after the newest pcspec knows may write it too
        text = f"{version} (written and read from {builds[0]} on, checked up to {builds[-1]}"
    else:
        text = f"{version} (written and read by {', '.join(builds)} only" if builds else f"{version} (no known build"
    return text + (f"; {'; '.join(others)})" if others else ")")


def to_text(f: SlotFile, path: str, state: _State) -> str:
    """The human-readable report."""
    form = "packed server_tokens" if f.packed else "legacy token list"
    head = " ".join(str(t) for t in f.tokens[:FIRST_TOKENS])
    more = " ..." if len(f.tokens) > FIRST_TOKENS else ""
    state_end = f.state_offset + f.state_bytes
    how = _HOW[state.located]
    lines = [
        f"{path}: slot file, {f.total_bytes} bytes, n_read {f.n_read}",
        f"  state-sequence version  {_version_text(f.state_version)}",
        f"  tokens                  {len(f.tokens)} ({form}; {f.tokens_bytes} bytes at "
        f"{f.tokens_offset}..{f.state_offset - 1})",
    ]
    if f.tokens:
        lines.append(f"  first tokens            {head}{more}")
    lines.append(
        f"  state                   {f.state_bytes} bytes at {f.state_offset}..{state_end - 1} "
        f"({how})"
    )
    if state.layout is not None:
        lines += layout_text(state.layout)
        last = last_position(state.layout)
        if last is not None and last + 1 != len(f.tokens):
            lines.append(
                f"  note                    the state's last position is {last}, the file has {len(f.tokens)} tokens"
            )
    if f.appendix_status == "absent":
        lines.append("  appendix                absent (no checkpoints restored)")
    elif f.appendix_status == "valid":
        count = f"{f.appendix_count} record(s)"
        if f.checkpoints is not None and len(f.checkpoints) != f.appendix_count:
            count += f", last {len(f.checkpoints)} kept"
        lines.append(
            f"  appendix                valid, {count}, {f.appendix_bytes} bytes at "
            f"{f.appendix_offset}"
        )
    else:
        lines.append(
            f"  appendix                {f.appendix_status} at byte {f.appendix_offset} "
            "- ignored (restore keeps tokens and state, no checkpoints)"
        )
    if f.appendix_status != "absent":
        lines.append(
            f"  appendix readers        {', '.join(APPENDIX_BUILDS)} (the October tree and b11434 read "
            "nothing after the state)"
        )
    if f.appendix_reason:
        lines.append(f"  note                    {f.appendix_reason}")
    if f.checkpoints:
        lines.append("  checkpoints")
        lines.append(
            f"    {'#':>3} {'offset':>10} {'n_tokens':>10} {'[pos_min, pos_max]':>20} "
            f"{'tgt':>10} {'dft':>10} {'spec':>10}"
        )
        for i, (off, c) in enumerate(zip(f.checkpoint_offsets, f.checkpoints, strict=True)):
            span = f"[{c.pos_min}, {c.pos_max}]"
            lines.append(
                f"    {i:>3} {off:>10} {c.n_tokens:>10} {span:>20} {len(c.data_tgt):>10} "
                f"{len(c.data_dft):>10} {len(c.data_spec):>10}"
            )
    return "\n".join(lines)
