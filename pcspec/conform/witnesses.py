"""The violating cases of the golden suite: for every property, short model traces on which a
design or a mutant violates it (``pcspec verify``'s counterexamples, shrunk by replay).

Lowered under ``fixed`` they are the holding case of the same trace: a port of ``fixed`` must
reproduce ``fixed``'s observations there, and a port broken at the seam the property guards
diverges there. ``tests/conform/test_conform_golden.py`` checks that each still violates its property
on its variant and that ``fixed`` holds every property on it.

Refresh them from a verify run (``pcspec verify --out DIR``) with::

    python -m pcspec.conform.witnesses DIR

which rewrites ``witnesses.jsonl`` next to this module (package data, as the golden suite is):
one JSON object per line and witness: name, the (variant, property) pairs it shows, the model
configuration's non-default keys, the operations.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pcspec.conform.scenarios import Scenario
from pcspec.core.trace import config_diff, load
from pcspec.model.config import Config

DATA = Path(__file__).resolve().with_name("witnesses.jsonl")


def witnesses() -> list[dict[str, Any]]:
    return [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]


def witness_scenarios() -> list[Scenario]:
    out = []
    for w in witnesses():
        shows = tuple((str(v), str(p)) for v, p in w["shows"])
        cfg = Config.from_json(w["config"], f"witness {w['name']}")
        what = ", ".join(f"{v} violates {p}" for v, p in shows)
        out.append(Scenario(str(w["name"]), f"{what} (pcspec verify, shrunk); fixed holds", cfg, list(w["ops"]), shows))
    return out


def refresh(out_dir: Path) -> str:
    """The lines of ``witnesses.jsonl`` for the counterexamples in a ``pcspec verify`` output
    folder (one witness per distinct trace, with every (variant, property) it shows)."""
    found: dict[str, dict[str, Any]] = {}
    for f in sorted(out_dir.glob("*.jsonl")):
        tr = load(f)
        if not tr.expect:
            continue
        pid = tr.expect[0]["property"]
        key = json.dumps([config_diff(tr.config), [op.to_json() for op in tr.ops]], sort_keys=True)
        if key not in found:
            name = f"witness-{tr.variant.name.replace('mutant:', 'mutant-')}-{pid}".lower()
            found[key] = {"name": name, "shows": [], "config": config_diff(tr.config), "ops": tr.ops}
        found[key]["shows"].append([tr.variant.name, pid])
    return "".join(json.dumps(w, sort_keys=True, separators=(",", ":")) + "\n" for w in found.values())


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m pcspec.conform.witnesses VERIFY_OUT_DIR", file=sys.stderr)
        return 2
    DATA.write_text(refresh(Path(argv[0])), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
