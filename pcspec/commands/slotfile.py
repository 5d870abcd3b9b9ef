"""``pcspec slotfile inspect FILE``: what a slot file holds and whether a restore accepts it.
``pcspec slotfile write OUT``: a slot file as the model's server writes it (``slotfile_writer``).

Inspect exits 0 when tokens and state are readable (a damaged checkpoint appendix is reported,
not fatal, because the server ignores it and still restores); 2 (a ``PcspecError``) when they
are not. A file whose first 8 bytes are not a slot file's magic and version is refused before
the rest of it is read.
"""

from __future__ import annotations

import argparse
import json
import struct
from pathlib import Path
from typing import Any, BinaryIO

from pcspec.commands.argtypes import count
from pcspec.core.errors import PcspecError
from pcspec.core.outdir import check_output_file, write_output
from pcspec.core.trace import load
from pcspec.model.config import Config
from pcspec.model.slotfile import (
    HEADER_BYTES,
    LLAMA_STATE_SEQ_MAGIC,
    STATE_SEQ_VERSIONS,
    SlotFile,
    read_slot_file,
)
from pcspec.model.variants import Variant, get_variant
from pcspec.properties.catalogue import BY_ID
from pcspec.tools.slotfile_writer import Written, from_tokens, from_trace
from pcspec.tools.user_variant import add_variant_options, chosen_variant

JSON_SCHEMA = 1
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
        "without it the end of the state is found by scanning for the appendix",
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
        variant = chosen if isinstance(chosen, Variant) else get_variant(chosen or "fixed")
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


def _refuse_bad_header(head: bytes, path: str) -> None:
    """Refuse a file whose magic or version is wrong from its first 8 bytes alone: a file that
    is not a slot file (a model, a log) can be any size."""
    if len(head) < 8:
        return  # shorter than the header: the whole file is these bytes, read_slot_file says why
    magic, version = struct.unpack_from("<II", head)
    if magic != LLAMA_STATE_SEQ_MAGIC or version not in STATE_SEQ_VERSIONS:
        read_slot_file(head, path)  # raises the reader's own message for this header


def _read(f: BinaryIO, path: str) -> bytes:
    head = f.read(HEADER_BYTES)
    _refuse_bad_header(head, path)
    return head + f.read()


def _inspect(args: argparse.Namespace) -> int:
    path = str(args.file)
    try:
        with Path(path).open("rb") as f:
            data = _read(f, path)
    except OSError as exc:
        raise PcspecError(f"cannot read the file: {exc.strerror or exc}", where=path) from None
    parsed = read_slot_file(
        data, path, n_ctx_checkpoints=args.n_ctx_checkpoints, state_size=args.state_size
    )
    if args.json:
        print(json.dumps(to_json(parsed, path), indent=2))
    else:
        print(to_text(parsed, path))
    return 0


def to_json(f: SlotFile, path: str) -> dict[str, Any]:
    """The ``--json`` object (schema 1)."""
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
            "located": f.state_located,
        },
        "appendix": {
            "status": f.appendix_status,
            "reason": f.appendix_reason,
            "offset": f.appendix_offset,
            "bytes": f.appendix_bytes,
            "count": f.appendix_count,
            "checkpoints": checkpoints,
        },
        "trailing_bytes": f.trailing_bytes,
    }


def to_text(f: SlotFile, path: str) -> str:
    """The human-readable report."""
    form = "packed server_tokens" if f.packed else "legacy token list"
    head = " ".join(str(t) for t in f.tokens[:FIRST_TOKENS])
    more = " ..." if len(f.tokens) > FIRST_TOKENS else ""
    state_end = f.state_offset + f.state_bytes
    how = "exact size given" if f.state_located == "exact" else "end found by scanning"
    lines = [
        f"{path}: slot file, {f.total_bytes} bytes, n_read {f.n_read}",
        f"  state-sequence version  {f.state_version}",
        f"  tokens                  {len(f.tokens)} ({form}; {f.tokens_bytes} bytes at "
        f"{f.tokens_offset}..{f.state_offset - 1})",
    ]
    if f.tokens:
        lines.append(f"  first tokens            {head}{more}")
    lines.append(
        f"  state                   {f.state_bytes} bytes at {f.state_offset}..{state_end - 1} "
        f"({how})"
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
