"""Replaying a saved live workload on a real llama-server (the live tests' one helper for it).

Imported by the live test modules after they skip without the ``gguf`` package.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pcspec.live.build import TREES, find_server
from pcspec.live.calibrate import DEFAULT_VARIANT
from pcspec.live.campaign import References
from pcspec.live.designs import design_of, with_faults
from pcspec.live.explain import explain
from pcspec.live.models import ensure_model
from pcspec.live.report import read_workload
from pcspec.live.session import Outcome, Target, execute
from tests.support import paths

Found = list[tuple[str, str | None]]


def build_or_skip(name: str, faults: bool = False) -> Path:
    """The cached server of a design (``faults``: its fault-point build) or of a tree (``b11549``),
    else the test skips, naming the command that builds it."""
    if name in TREES:
        found, how = find_server(name), f"--tree {name}"
    else:
        d = design_of(name)
        patches, flags = with_faults(d) if faults else (d.patch_paths(), ())
        found, how = find_server(d.tree, patches, flags), f"--design {name}" + (" --faults" if faults else "")
    if found is None:
        pytest.skip(f"not built: python -m pcspec.live.build {how}")
    return found


def replay(binary: Path, name: str, models: Path, tmp_path: Path, *, timeout: float = 15,
           variant: str = DEFAULT_VARIANT) -> Outcome:
    """``tests/data/live/NAME`` run once on ``binary`` beside its uncached reference, compared
    with the model under ``variant``'s rules."""
    kind, flags, _seed, ops = read_workload(paths.DATA / "live" / name)
    model = ensure_model(kind, models)
    refs = References(binary, model, tmp_path, timeout, kind)
    try:
        return execute(Target(binary, model, kind, flags), tmp_path / "run", refs.get(flags), ops=ops,
                       timeout=timeout, variant=variant)
    finally:
        refs.close()


def explained(out: Outcome) -> Found:
    """Each finding's class and its explanation (None: unexplained)."""
    return [(f.rule, explain(f, out)) for f in out.analysis.findings]
