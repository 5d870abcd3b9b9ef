"""``pcspec slotfile inspect FILE``: what a slot file holds and whether a restore accepts it.

Exit 0 when tokens and state are readable (a damaged checkpoint appendix is reported, not fatal,
because the server ignores it and still restores); 2 (a ``PcspecError``) when they are not.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pcspec.errors import PcspecError
from pcspec.model.slotfile import SlotFile, read_slot_file

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
        type=int,
        metavar="N",
        help="the state's exact byte length (what the target context's state_read consumes); "
        "without it the end of the state is found by scanning for the appendix",
    )
    inspect.add_argument(
        "--n-ctx-checkpoints",
        type=int,
        metavar="N",
        help="keep only the last N checkpoints, as a server with --ctx-checkpoints N does",
    )
    inspect.set_defaults(func=_inspect)


def _inspect(args: argparse.Namespace) -> int:
    path = str(args.file)
    try:
        data = Path(path).read_bytes()
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
