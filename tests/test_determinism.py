"""Verdicts are a function of the commit, the seed and the example budgets (issue 8, section 1).

The cause of the machine-dependent verdicts was Hypothesis mining integer constants from every
module it takes for local code (outside site-packages) and drawing them in about one choice in
twenty: an editable install and a wheel install of the same commit generated different
examples. ``pcspec.determinism.seed_only_generation`` turns that off; these tests show both
that it matters (without it, a local module changes what is generated) and that with it, it
does not."""

from __future__ import annotations

import contextlib
import importlib
import json
import sys
from pathlib import Path

import pytest

import pcspec.fuzzing as fuzzing
from pcspec.cli import main
from pcspec.model.variants import get_variant


def _survey_fingerprint() -> tuple[int, tuple[str, ...]]:
    run, hits = fuzzing.survey(get_variant("pr30137"), examples=60, seconds=600)
    return run.steps, tuple(sorted(f"{p}:{h.trace.dumps()}" for p, h in hits.items()))


@pytest.fixture
def local_module_with_constants(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A module outside site-packages full of integer literals, imported: exactly what an
    editable install (or a user's own helper module) looks like to Hypothesis."""
    src = "VALUES = [" + ", ".join(str(v) for v in (0, 1, 2, 3, 7, 8, 16, 31, 63, 64, 128, 4096, -1, 99)) + "]\n"
    (tmp_path / "pcspec_det_probe.py").write_text(src, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("pcspec_det_probe")
    yield
    sys.modules.pop("pcspec_det_probe", None)


def test_local_constants_do_not_change_generation(local_module_with_constants: None) -> None:
    with_probe = _survey_fingerprint()
    sys.modules.pop("pcspec_det_probe", None)
    assert _survey_fingerprint() == with_probe


def test_the_guard_is_what_ignores_local_constants(monkeypatch: pytest.MonkeyPatch) -> None:
    """Non-vacuity, without depending on which modules Hypothesis happens to scan: hand it a
    pool of local constants directly. Guarded, the run is the run without them; unguarded,
    the same seed generates something else."""
    from hypothesis.internal.conjecture import providers

    baseline = _survey_fingerprint()
    pool = providers.Constants()  # type: ignore[attr-defined]
    pool.integers.update([0, 1, 2, 3, 7, 8, 16, 31, 63, 64, 128, 4096, -1, 99])
    monkeypatch.setattr(providers, "_get_local_constants", lambda: pool)
    providers.CONSTANTS_CACHE.cache.clear()
    assert _survey_fingerprint() == baseline
    monkeypatch.setattr(fuzzing, "seed_only_generation", contextlib.nullcontext)
    providers.CONSTANTS_CACHE.cache.clear()
    try:
        assert _survey_fingerprint() != baseline
    finally:
        providers.CONSTANTS_CACHE.cache.clear()


def test_time_cap_gives_unknown_never_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A survey the safety cap cuts short settles nothing: every cell it could not settle is
    ``unknown``, the summary says so and the exit status is 3 (not 0, not a mismatch's 1)."""
    code = main(["verify", "--variant", "fixed", "--survey-seconds", "0.2", "--json", "--out", str(tmp_path)])
    data = json.loads(capsys.readouterr().out)
    assert code == 3 and data["ok"] is False and data["unknown"] > 0
    assert all(c["verdict"] != "holds" for c in data["fuzz"])
    code = main(["verify", "--variant", "fixed", "--survey-seconds", "0.2", "--out", str(tmp_path)])
    assert code == 3 and "UNKNOWN:" in capsys.readouterr().out
