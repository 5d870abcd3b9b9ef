"""``pcspec live --design NAME``: a design's build against the model's variant of that name.

* the argument errors, one line and exit 2, with no binary needed: a design without a build, an
  unknown name, ``--design`` with ``--server``, a design not built without ``--build``;
* the rules chosen: ``october`` for baseline, ``DESIGN@0c1e570`` (the design under the October
  tree's rule set) for the patched designs, and ``--variant`` still overrides;
* a tiny campaign on the pr30137 build (``live``: skipped when it is not cached), its report
  naming the design and the rules.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pcspec.cli import main
from pcspec.live import build, calibrate
from pcspec.live.designs import design_of
from pcspec.model.design import POINTS, runs
from pcspec.model.designs import DESIGNS, RULE_SET_MODELS, Fixed
from pcspec.model.rulesets import OCTOBER

BASELINE, PR30137, PR27451 = DESIGNS["baseline"], DESIGNS["pr30137"], DESIGNS["pr27451"]
# A checkpoint one token past the shared prefix, its positions within it, as (pos_min, pos_max,
# n_tokens): the November invalidation erases it (n_tokens > n_prefix), the October one keeps it.
PAST_PREFIX = [(0, 5, 6)]


def _one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str], needle: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert needle in err, err


def test_a_design_without_a_build_is_refused(capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from pcspec.live import designs

    monkeypatch.delitem(designs.DESIGNS, "fixed")
    monkeypatch.setitem(designs.UNAVAILABLE, "fixed", "no patch")
    _one_line_error(capsys, ["live", "--design", "fixed"], "not available as a build yet")


def test_unknown_design(capsys: pytest.CaptureFixture[str]) -> None:
    _one_line_error(capsys, ["live", "--design", "nope"], "unknown design 'nope'")


def test_design_with_server_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    fake = tmp_path / "llama-server"
    fake.write_text("")
    _one_line_error(capsys, ["live", "--design", "pr30137", "--server", str(fake)], "drop --server")


def test_a_design_not_built_names_the_build_command(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(build.ENV_CACHE, str(tmp_path))  # an empty cache
    _one_line_error(capsys, ["live", "--design", "pr27451"], "pcspec live --design pr27451 --build")


def test_the_rules_of_each_design() -> None:
    assert calibrate.design_rules("baseline", "0c1e570") == "october"
    for base in (PR30137, PR27451, BASELINE):
        v = calibrate.variant(f"{base.name}@0c1e570")
        assert v.name == f"{base.name}@0c1e570"
        # the design's code, the October tree's invalidation and slot files
        assert type(v) is type(base)
        assert v.rules is OCTOBER
        assert v.invalidated(PAST_PREFIX, 5, 5, 0) == []  # OCTOBER.invalidate_n_prefix is off
        assert v.rules.slot_file_appendix == OCTOBER.slot_file_appendix
    # fixed: its patches' points, every point of the design
    v = calibrate.variant("fixed@0c1e570")
    assert all(runs(v, p, Fixed) for p in POINTS)
    assert v.cache_update_busy_slot is False
    # the November invalidation, which the October tree lacks: patch 0012 (fixed's own ``invalidated``)
    assert v.invalidated(PAST_PREFIX, 5, 5, 0) == [0] and v.rules.slot_file_appendix == OCTOBER.slot_file_appendix
    # baseline under the October rules is the October rule set's model
    october = calibrate.variant("october")
    assert october is RULE_SET_MODELS["october"]
    baseline = calibrate.variant("baseline@0c1e570")
    assert type(baseline) is type(october) and baseline.rules is october.rules


@pytest.mark.live
def test_a_tiny_campaign_on_the_pr30137_build(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("gguf", reason="pip install gguf (the live models are made with it)")
    d = design_of("pr30137")
    server = build.find_server(d.tree, d.patch_paths())
    if server is None:
        pytest.skip("pr30137 is not built: pcspec live --design pr30137 --build")
    code = main(["live", "--design", "pr30137", "--kind", "swa", "--requests", "8", "--run-requests", "8",
                 "--no-shrink", "--out", str(tmp_path), "--json"])
    rep = json.loads(capsys.readouterr().out)
    assert rep["design"] == "pr30137" and rep["rules"] == "pr30137@0c1e570"
    assert rep["server"] == str(server)
    assert rep["kinds"][0]["requests"] == 8
    assert code == (1 if rep["unexplained"] else 0)


@pytest.mark.live
def test_a_short_campaign_on_the_fixed_build_finds_nothing(capsys: pytest.CaptureFixture[str],
                                                          tmp_path: Path) -> None:
    """CI's live run of `fixed` (.ci/run builds it): every memory kind, its build against its own
    rules, nothing unexplained. F3 (a slot file carries no checkpoint: the October format), F4 (a
    recurrent checkpoint at the prompt's very end serves no resume, and no earlier one exists) and
    F5 (not located) may show; F1 and F2, which its patches 0002 and 0005 remove, and any finding
    without an explanation, may not."""
    pytest.importorskip("gguf", reason="pip install gguf (the live models are made with it)")
    d = design_of("fixed")
    server = build.find_server(d.tree, d.patch_paths())
    if server is None:
        pytest.skip("fixed is not built: pcspec build --design fixed")
    code = main(["live", "--design", "fixed", "--requests", "20", "--seed", "1", "--out", str(tmp_path), "--json"])
    rep = json.loads(capsys.readouterr().out)
    assert rep["design"] == "fixed" and rep["rules"] == "fixed@0c1e570"
    assert [k["kind"] for k in rep["kinds"]] == ["kv", "swa", "recurrent", "hybrid"]
    assert all(k["requests"] == 20 and k["transparency_checks"] > 0 for k in rep["kinds"]), rep["kinds"]
    kept = [f for k in rep["kinds"] for f in k["findings"] if f["explanation"][:3] not in ("F3 ", "F4 ", "F5 ")]
    assert kept == []
    assert (code, rep["unexplained"]) == (0, 0)


@pytest.mark.live
def test_a_tiny_campaign_on_the_fixed_fault_point_build(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("gguf", reason="pip install gguf (the live models are made with it)")
    """``--faults``: the design's fault-point build (its code with the LLAMA_FAULTS hooks, none
    armed) runs and is compared with the design's own rules, as the build without them is."""
    from pcspec.live.designs import with_faults

    d = design_of("fixed")
    patches, flags = with_faults(d)
    server = build.find_server(d.tree, patches, flags)
    if server is None:
        pytest.skip("fixed's fault build is not cached: pcspec build --design fixed --faults")
    code = main(["live", "--design", "fixed", "--faults", "--kind", "swa", "--requests", "8", "--run-requests", "8",
                 "--no-shrink", "--out", str(tmp_path), "--json"])
    rep = json.loads(capsys.readouterr().out)
    assert rep["server"] == str(server) and rep["rules"] == "fixed@0c1e570"
    assert (code, rep["unexplained"]) == (0, 0)
