"""Generate the parts of docs/SPEC.md the code holds, in place.

docs/SPEC.md is hand-written prose with generated blocks between ``<!-- generated: NAME -->``
and ``<!-- end: NAME -->``: the operations and their fields (``conform.protocol.OPS``), the
events (``EVENTS``), the port's configuration, the JSON Schemas of the protocol's lines, the
fault sites (``Faults.SITES`` with the comment the model gives each), the seams (``Variant``'s
fields with their comments and each design's value) and the property catalogue (statements
from ``properties.catalogue``, which of them ``conform.judge`` judges on a port, and who sees the others).
``python -m pcspec.tools.specgen`` rewrites the blocks; ``tests/project/test_spec_doc.py`` fails when the file
and the code drift apart, and when a block, an operation's section or a property's
restatement is missing.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import re
import sys
from collections.abc import Callable
from enum import Enum
from pathlib import Path

from pcspec.conform import protocol
from pcspec.conform.judge import NOT_JUDGED
from pcspec.model import heap, variants
from pcspec.model.variants import DESIGNS, Variant
from pcspec.properties.catalogue import CATALOGUE

SPEC = Path(__file__).resolve().parents[1] / "docs" / "SPEC.md"

# The seams a port of `fixed` implements, and the core operations each shapes; the others are
# the environment's (the model decides them and lowers their effect into the trace).
SEAM_OPS = {
    "sharing": "save, load, checkpoint",
    "zero_init": "save, checkpoint",
    "save_protocol": "save",
    "alloc_scope": "save",
    "accounting": "save, update",
    "keep_restored": "checkpoint",
    "contain_failures": "load, prompt_start, checkpoint",
    "shrink_limit_on_bad_alloc": "save",
    "record_payload_pos_min": "prompt_start (the environment records pos_min; the restore choice uses it)",
    "restore_only_prefixes": "prompt_start",
    "resume_best": "prompt_start",
    "tail_checkpoints": "environment (the batch fill)",
    "invalidate_n_prefix": "prompt_start (the rule sets october, b11434, b11549)",
    "slot_file_appendix": "slot files (the rule sets october, b11434)",
    "state_seq_version": "slot files (the rule sets b11434, b11549, november)",
    "checkpoint_load_checked": "prompt_start (the rule sets october, b11434)",
    "decision_tasks": "environment (the fuzzing rules send decision tasks: the rule sets b11434, b11549, november)",
    "spans_from_chat_only": "environment (a raw completion's spans: the rule sets b11549, november)",
    "threshold_uses_new_tokens": "prompt_start",
    "threshold_minus_one": "prompt_start",
    "restore_accepts_pos_min_zero": "prompt_start",
    "restore_rejects_beyond_pos_next": "prompt_start",
    "sweep_only_when_full": "checkpoint",
    "sweep_rechecks_full": "checkpoint",
    "inplace_update": "checkpoint",
    "free_on_evict": "save, update",
    "make_room": "save",
    "invalidate": "prompt_start",
    "invalidate_by_pos_min": "prompt_start",
    "cap_checkpoints": "checkpoint",
    "resync_on_file_restore": "environment (slot restore)",
    "resync_draft_on_file_restore": "environment (slot restore)",
    "consult_cache_for_empty_pinned": "environment (slot selection)",
    "cache_update_busy_slot": "environment (slot selection)",
    "count_appendix_bytes": "environment (slot files)",
    "restore_uncapped": "environment (slot restore)",
    "trust_size_field": "environment (slot files)",
    "space_user_breaks": "environment (the batch fill)",
    "empty_slot_baseline": "load",
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
    """Each dataclass field's comment in the source: on its line, else the block of comment
    lines above it (a block is shared by the fields that follow it up to a blank line); an
    enum-typed field without one gets its members' comments."""
    out: dict[str, str] = {}
    block: list[str] = []
    fresh = False
    for line in inspect.getsource(cls).splitlines():
        s = line.strip()
        m = re.match(r"(\w+): [^=#]+(?:= [^#]+)?(?:#\s*(.*))?$", s)
        if s.startswith("#"):
            text = s.lstrip("#").strip()
            block = [] if text.startswith("--") else ([*block, text] if fresh else [text])
            fresh = True
        elif m:
            out[m.group(1)] = (m.group(2) or " ".join(block)).strip()
            fresh = False
        elif not s:
            block, fresh = [], False
    for f in dataclasses.fields(cls):
        kind = f.type if isinstance(f.type, type) else getattr(variants, str(f.type), None)
        if not out.get(f.name) and isinstance(kind, type) and issubclass(kind, Enum):
            members = re.findall(r'(\w+) = "(\w+)"\s*#\s*(.*)', inspect.getsource(kind))
            out[f.name] = "; ".join(f"`{v}`: {c.strip()}" for _, v, c in members)
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


def seams_table() -> str:
    comments = _field_comments(Variant)
    names = list(DESIGNS)
    head = "| seam | meaning | " + " | ".join(f"`{d}`" for d in names) + " | shapes |"
    lines = [head, "|---|---|" + "---|" * len(names) + "---|"]
    for f in dataclasses.fields(Variant):
        if f.name in ("name", "summary", "mutant", "base"):
            continue
        values = " | ".join(_value(getattr(DESIGNS[d], f.name)) for d in names)
        lines.append(f"| `{f.name}` | {_cell(comments.get(f.name, ''))} | {values} | {SEAM_OPS.get(f.name, '?')} |")
    return "\n".join(lines)


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
    return "\n".join(f"- `{m.name}`: {m.summary}" for m in variants.MUTANTS.values())


BLOCKS: dict[str, Callable[[], str]] = {
    "operations": ops_table,
    "events": events_table,
    "config": config_table,
    "schemas": schemas_block,
    "sites": sites_table,
    "seams": seams_table,
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
