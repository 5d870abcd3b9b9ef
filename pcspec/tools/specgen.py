"""Generate the parts of docs/SPEC.md the code holds, in place.

docs/SPEC.md is hand-written prose with generated blocks between ``<!-- generated: NAME -->``
and ``<!-- end: NAME -->``: the operations and their fields (``conform.protocol.OPS``), the
events (``EVENTS``), the port's configuration, the JSON Schemas of the protocol's lines, the
fault sites (``Faults.SITES`` with the comment the model gives each), the seams (``Design``'s
fields with their comments and each design's value) and the property catalogue (statements
from ``properties.catalogue``, which of them ``conform.judge`` judges on a port, and who sees the others).
``python -m pcspec.tools.specgen`` rewrites the blocks; ``tests/project/test_spec_doc.py`` fails when the file
and the code drift apart, and when a block, an operation's section or a property's
restatement is missing.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

from pcspec.conform import protocol
from pcspec.conform.judge import NOT_JUDGED
from pcspec.model import heap
from pcspec.model.design import (
    ATTRIBUTE_POINTS,
    CHOICE_POINTS,
    DECISION_POINTS,
    EFFECT_POINTS,
    POINTS,
    Design,
    defined_by,
)
from pcspec.model.designs import DESIGNS
from pcspec.properties.catalogue import CATALOGUE
from pcspec.properties.mutants import MUTANTS

SPEC = Path(__file__).resolve().parents[1] / "docs" / "SPEC.md"

# The seams a port of `fixed` implements, and the core operations each shapes; the others are
# the environment's (the model decides them and lowers their effect into the trace).
# The core operations each extension point shapes (the environment's points change what the
# trace contains, not what a port of the core does).
POINT_OPS = {
    "zero_init": "save, checkpoint",
    "sharing": "save, load, checkpoint",
    "cache_update_busy_slot": "environment (slot selection)",
    "alloc_scope": "save",
    "update_cache_on_select": "environment (slot selection)",
    "load_baseline": "load",
    "load_select": "load",
    "is_oversize": "save",
    "make_room": "save",
    "update_evictions": "update",
    "limit_after_bad_alloc": "save",
    "breaks_at_user_message": "environment (the batch fill)",
    "tail_breaks": "environment (the batch fill)",
    "sweep_too_close": "checkpoint",
    "cap_evictions": "checkpoint",
    "pos_min_threshold": "prompt_start",
    "restore_choice": "prompt_start",
    "invalidated": "prompt_start",
    "appendix_cap": "environment (slot restore)",
    "bytes_reported": "environment (slot files)",
    "file_restore_refuses": "environment (slot restore)",
    "file_checkpoint_refused": "environment (slot restore)",
    "get_available_slot": "environment (slot selection)",
    "checkpoint_pos_min": "prompt_start (the environment records pos_min; the restore choice uses it)",
    "kept_checkpoint": "checkpoint",
    "reuse_payload": "checkpoint",
    "copy_checkpoints": "save, load, checkpoint",
    "load_entry": "load",
    "on_contained": "save",
    "prompt_save": "save",
    "entry_sizes": "save, update",
    "candidate_size": "save",
    "release_evicted": "save, update",
    "checkpoint_create_failed": "checkpoint",
    "resume": "prompt_start",
    "checkpoint_load_failed": "prompt_start",
    "restore_failed": "prompt_start",
    "sync_draft": "environment (slot restore)",
    "seq_rm_refused": "prompt_start",
    "file_read": "environment (slot files)",
    "file_restore_begin": "environment (slot restore)",
}

# What `fixed` leaves behind when a site fails (docs/SPEC.md restates each per operation).
FAULT_EFFECTS = {
    "save.alloc.main": "save: nothing published, the cache unchanged; save_bad_alloc, save_end ok=false",
    "save.alloc.drft": "save: nothing published, the cache unchanged; save_bad_alloc, save_end ok=false",
    "save.alloc.entry": "save: nothing published, the cache unchanged; save_bad_alloc, save_end ok=false",
    "save.read.tgt": "save: the partial entry dropped, the cache unchanged; save_fill_short, save_end ok=false",
    "save.read.dft": "save: the partial entry dropped, the cache unchanged; save_fill_short, save_end ok=false",
    "load.write.tgt": "load: the entry dropped (entry_evict load_failed), the slot unchanged (the caller clears it)",
    "load.write.dft": "load: the entry dropped (entry_evict load_failed), the slot unchanged (the caller clears it)",
    "ckpt.read.tgt": "checkpoint: nothing created (ckpt_create_failed); the erasures before it stand",
    "ckpt.read.dft": "checkpoint: nothing created (ckpt_create_failed); the erasures before it stand",
    "ckpt.alloc": "checkpoint: nothing created (ckpt_create_failed); the erasures before it stand",
    "ckpt.write.tgt": "prompt_start: the checkpoint erased (invalidated), the prompt re-processed from 0",
    "ckpt.write.dft": "prompt_start: the checkpoint erased (invalidated), the prompt re-processed from 0",
    "file.write.tgt": "environment: the slot restore is rejected and the slot cleared (a clear operation)",
    "state.write.short": "save or checkpoint: as a short read at that site",
}


def _field_comments(cls: type) -> dict[str, str]:
    """Each class attribute's comment in the source: on its line, else the block of comment
    lines above it (a block is shared by the attributes that follow it up to a blank line)."""
    out: dict[str, str] = {}
    block: list[str] = []
    fresh = False
    for line in inspect.getsource(cls).splitlines():
        s = line.strip()
        m = re.match(r"(\w+): [^=#]+(?:= [^#]+)?(?:#\s*(.*))?$", s)
        if s.startswith("#"):
            text = s.lstrip("#").strip()
            block = [] if text.startswith("--") or text.startswith("==") else ([*block, text] if fresh else [text])
            fresh = True
        elif m:
            out[m.group(1)] = (m.group(2) or " ".join(block)).strip()
            fresh = False
        elif not s:
            block, fresh = [], False
    return out


def _site_comments() -> dict[str, str]:
    src = inspect.getsource(heap.Faults)
    return {m.group(1): m.group(2).strip() for m in re.finditer(r'"([a-z.]+)",\s*#\s*(.*)', src)}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def ops_table() -> str:
    lines = [
        "| operation | kind | mirrors (C++, `file:line` at 0c1e570) | fields | fault sites |",
        "|---|---|---|---|---|",
    ]
    for o in protocol.OPS:
        fields = "; ".join(f"`{f.name}`{' (optional)' if f.optional else ''}: {f.meaning}" for f in o.fields) or "-"
        sites = ", ".join(f"`{s}`" for s in o.sites) or "-"
        kind = "core" if o.core else "environment"
        lines.append(f"| `{o.name}` | {kind} | {_cell(o.cpp)} | {_cell(fields)} | {sites} |")
    return "\n".join(lines)


def events_table() -> str:
    lines = ["| kind | fields | emitted by | meaning |", "|---|---|---|---|"]
    for e in protocol.EVENTS:
        fields = "; ".join(f"`{n}`: {m}" for n, m in e.fields) or "-"
        ops = ", ".join(f"`{o}`" for o in e.ops)
        lines.append(f"| `{e.kind}` | {_cell(fields)} | {ops} | {_cell(e.meaning)} |")
    return "\n".join(lines)


def config_table() -> str:
    lines = ["| key | type | meaning |", "|---|---|---|"]
    for k, (schema, meaning) in protocol.CONFIG_FIELDS.items():
        lines.append(f"| `{k}` | `{json.dumps(schema)}` | {_cell(meaning)} |")
    return "\n".join(lines)


def schemas_block() -> str:
    return "```json\n" + json.dumps(protocol.schemas(), indent=1) + "\n```"


def sites_table() -> str:
    comments = _site_comments()
    reached = {s: [o.name for o in protocol.OPS if s in o.sites] for s in heap.Faults.SITES}
    lines = ["| site | where the C++ fails | core operations that reach it | what `fixed` leaves behind |",
             "|---|---|---|---|"]
    for s in heap.Faults.SITES:
        ops = ", ".join(f"`{o}`" for o in reached[s]) or "none (environment)"
        lines.append(f"| `{s}` | {_cell(comments.get(s, ''))} | {ops} | {_cell(FAULT_EFFECTS.get(s, '?'))} |")
    return "\n".join(lines)


def points_table() -> str:
    """One row per extension point of ``Design``: its kind, the C++ it decides (the first
    sentence of its docstring), what each built-in design runs there (the class whose code it
    is, or the attribute's value) and the core operations it shapes."""
    names = list(DESIGNS)
    head = "| point | kind | the C++ | " + " | ".join(f"`{n}`" for n in names) + " | shapes |"
    lines = [head, "|---|---|---|" + "---|" * len(names) + "---|"]
    for point in POINTS:
        kind = next(k for k, ps in _KINDS.items() if point in ps)
        doc = inspect.getdoc(getattr(Design, point)) if kind != "attribute" else _field_comments(Design).get(point, "")
        if doc and kind != "attribute":
            doc = doc.split(". ", 1)[1] if doc.split(". ", 1)[0] in ("DECISION", "EFFECT") else doc
            doc = doc.replace("EFFECT (reads the slots). ", "").replace("EFFECT (reads the cache). ", "")
        first = _cell((doc or "").split("\n\n")[0])
        cells = " | ".join(_runs(DESIGNS[n], point) for n in names)
        lines.append(f"| `{point}` | {kind} | {first} | {cells} | {POINT_OPS.get(point, '?')} |")
    return "\n".join(lines)


_KINDS = {"attribute": ATTRIBUTE_POINTS, "decision": DECISION_POINTS, "choice": CHOICE_POINTS,
          "effect": EFFECT_POINTS}


def _runs(design: Design, point: str) -> str:
    if point in ATTRIBUTE_POINTS:
        return _value(getattr(design, point))
    return defined_by(design, point).__name__


def _value(v: object) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(getattr(v, "value", v))


def catalogue_table() -> str:
    lines = ["| ID | statement (the catalogue's) | judged on a port by |", "|---|---|---|"]
    for p in CATALOGUE:
        who = NOT_JUDGED.get(p.id, "its check, over the port's observations (`conform/judge.py`)")
        lines.append(f"| {p.id} | {_cell(p.statement)} | {_cell(who)} |")
    return "\n".join(lines)


def variants_list() -> str:
    return "\n".join(f"- `{m.name}`: {m.summary}" for m in MUTANTS.values())


BLOCKS: dict[str, Callable[[], str]] = {
    "operations": ops_table,
    "events": events_table,
    "config": config_table,
    "schemas": schemas_block,
    "sites": sites_table,
    "seams": points_table,
    "catalogue": catalogue_table,
    "mutants": variants_list,
}


def render(text: str) -> str:
    """``text`` with every generated block regenerated."""
    for name, make in BLOCKS.items():
        pattern = re.compile(rf"(<!-- generated: {name} -->\n)(?:.*?\n)?(<!-- end: {name} -->)", re.S)
        if not pattern.search(text):
            markers = f"<!-- generated: {name} --> ... <!-- end: {name} -->"
            raise ValueError(f"docs/SPEC.md has no block {name!r} ({markers})")
        body = make() + "\n"
        text = pattern.sub(lambda m, body=body: m.group(1) + body + m.group(2), text)  # type: ignore[misc]
    return text


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m pcspec.tools.specgen",
        description="Rewrite the generated blocks of docs/SPEC.md (or FILE) from the code.",
    )
    # the checkout's docs/SPEC.md; an installed pcspec has none beside it: the current folder's
    default = SPEC if SPEC.exists() else Path("docs") / "SPEC.md"
    ap.add_argument("file", nargs="?", type=Path, default=default, help=f"the spec to update (default: {default})")
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if the file is not current")
    args = ap.parse_args(argv)
    path: Path = args.file
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        print(f"pcspec.tools.specgen: cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    new = render(text)
    if new == text:
        print(f"{path} is current")
        return 0
    if args.check:
        print(f"{path} is not current: run python -m pcspec.tools.specgen {path}")
        return 1
    path.write_text(new, encoding="utf-8")
    print(f"updated {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
