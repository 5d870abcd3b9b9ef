"""Designs of one's own, written through the documented extension points only
(``tests/tools/user_designs.py``): each broken one is caught by the property its bug breaks,
with a shrunk trace that replays under that very design; the correct ones hold; ``prove`` never
says ``proved`` where an overridden point is not encoded; a design whose events omit or misstate
a number is judged by the judge's own numbers."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from pcspec.core.trace import load
from pcspec.engines.search import hunt, survey
from pcspec.model import design as d
from pcspec.model import events as ev
from pcspec.model.designs import Fixed, get_design
from pcspec.model.server import Server
from pcspec.model.slot import Slot
from pcspec.proofs.encoded import encode
from pcspec.proofs.obligations import OBLIGATIONS
from pcspec.proofs.run import RunConfig
from pcspec.proofs.suite import run_suite
from pcspec.properties.judge import replay, shrink_trace, write_counterexample
from pcspec.tools.point_coverage import counting, own_points
from tests.support.paths import ROOT
from tests.tools import user_designs as ud

pytestmark = pytest.mark.slow

SOURCE = Path(ud.__file__)


def test_the_designs_use_the_documented_points_only() -> None:
    """No private name of pcspec, nothing but extension points overridden, no assignment to
    another module's attribute (monkeypatching)."""
    tree = ast.parse(SOURCE.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            assert not node.attr.startswith("_"), f"line {node.lineno}: private name {node.attr}"
        if isinstance(node, ast.ImportFrom):
            assert node.module is not None and not any(a.name.startswith("_") for a in node.names), node.lineno
        if isinstance(node, ast.Assign):
            assert all(not isinstance(t, ast.Attribute) for t in node.targets), f"line {node.lineno}: monkeypatch"
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    assert item.name in d.POINTS, f"{node.name}.{item.name} is not an extension point"
                if isinstance(item, ast.Assign):
                    names = [t.id for t in item.targets if isinstance(t, ast.Name)]
                    assert all(n in (*d.POINTS, "name", "summary", "rules") for n in names), (node.name, names)


@pytest.mark.parametrize("cls", list(ud.BROKEN), ids=lambda c: c.name)
def test_a_broken_design_is_caught_by_its_property(cls: type[d.Design], tmp_path: Path) -> None:
    design, pid = cls(), ud.BROKEN[cls]
    run, hit = hunt(design, pid, 0, 4000)
    assert hit is not None, f"{design.name}: {pid} not found in {run.steps} steps"
    trace = shrink_trace(hit.trace, pid)
    assert len(trace.ops) <= len(hit.trace.ops)
    assert replay(trace).matches(trace.expect)
    # the design it starts from holds the property on the same operations: the bug is the design's
    parent = get_design(next(c.name for c in cls.__mro__[1:] if c.__module__.startswith("pcspec.model")))
    from dataclasses import replace as dc_replace

    assert not [v for v in replay(dc_replace(trace, variant=parent, expect=[])).violations if v.rule == pid]
    # the trace names the design's class: it replays under that design, by itself
    path = write_counterexample(trace, tmp_path, f"{design.name}__{pid}")
    assert load(path).variant.name == design.name
    done = subprocess.run([sys.executable, "-m", "pcspec", "replay", str(path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-800:] + done.stderr[-800:]
    assert f"VIOLATED {pid}" in done.stdout


@pytest.mark.parametrize("cls", list(ud.CORRECT), ids=lambda c: c.name)
def test_a_correct_design_holds_and_its_points_are_reached(cls: type[d.Design]) -> None:
    design = cls()
    with counting(design) as calls:
        run, hits = survey(design, 0, 150)
    assert run.complete and not hits, {p: h.message for p, h in hits.items()}
    assert own_points(design) and all(calls[p] for p in own_points(design)), calls


@pytest.mark.parametrize("cls", [*ud.BROKEN, *ud.CORRECT], ids=lambda c: c.name)
def test_prove_never_proves_a_point_it_does_not_encode(cls: type[d.Design]) -> None:
    design = cls()
    _, unknown = encode(design)
    assert unknown, "every design here runs code of its own somewhere the encodings read"
    rows = run_suite(RunConfig(), variants=[design]).rows
    for row, ob in zip(rows, OBLIGATIONS, strict=True):
        missing = ob.not_covered(unknown)
        if missing:
            assert row.result != "proved", (ob.id, row.detail)
            assert row.result == "not covered" or (row.result == "counterexample" and row.replayed), row.result
    # (a design whose only code of its own decides what every proof lets decide anything, its
    # restore choice say, is covered: its rows are proved)
    if any(ob.not_covered(unknown) for ob in OBLIGATIONS):
        assert any(r.result == "not covered" for r in rows)
    else:
        assert all(r.result in ("proved", "counterexample") for r in rows), [r.result for r in rows]


# -- a design whose events omit or misstate a number, or give a false reason ---------------------


class EvictsSaying(Fixed):
    """Before each save, evicts the oldest entry itself (no number, the given reason)."""

    name = "evicts-saying"
    reason = "make_room"

    def prompt_save(self, srv: Server, slot: Slot, size_tgt: int, size_dft: int) -> bool:
        cache = srv.cache
        assert cache is not None
        if cache.entries:
            cache.evict(cache.entries[0], self.reason)  # no unique_total, no limit
        return super().prompt_save(srv, slot, size_tgt, size_dft)


class EvictsSayingObsolete(EvictsSaying):
    name = "evicts-saying-obsolete"
    reason = "obsolete"


class EvictsSayingNumbers(EvictsSaying):
    """... and states numbers that would excuse it."""

    name = "evicts-saying-numbers"

    def prompt_save(self, srv: Server, slot: Slot, size_tgt: int, size_dft: int) -> bool:
        cache = srv.cache
        assert cache is not None
        if cache.entries:
            cache.evict(cache.entries[0], "make_room", unique_total=10**12, limit=1)
        return Fixed.prompt_save(self, srv, slot, size_tgt, size_dft)


class RejectsSayingOversize(Fixed):
    """Refuses every save, announcing an entry of a trillion bytes."""

    name = "rejects-saying-oversize"

    def prompt_save(self, srv: Server, slot: Slot, size_tgt: int, size_dft: int) -> bool:
        assert srv.cache is not None
        srv.heap.emit(ev.SaveRejectOversize(size=10**12, own_unique=10**12, limit=srv.cache.limit_size))
        return False


class InsertsSayingSmall(Fixed):
    """Never makes room, and announces each entry as small."""

    name = "inserts-saying-small"

    def make_room(self, sizes: Sequence[int], new_size: int, limit: int) -> list[int]:
        return []


@pytest.mark.parametrize(("cls", "pid"), [(EvictsSaying, "ACC-3"), (EvictsSayingObsolete, "ACC-3"),
                                          (EvictsSayingNumbers, "ACC-3"), (RejectsSayingOversize, "ACC-2"),
                                          (InsertsSayingSmall, "LIMIT-1")], ids=lambda x: getattr(x, "name", x))
def test_a_misstated_number_or_reason_does_not_hide_a_violation(cls: type[d.Design], pid: str) -> None:
    run, hit = hunt(cls(), pid, 0, 2000)
    assert hit is not None, f"{cls.name}: {pid} not found in {run.steps} steps"
