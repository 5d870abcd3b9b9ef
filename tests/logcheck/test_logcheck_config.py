"""The log checker's configuration is the model's: a design (its points by the model's names) and
a rule set (the object, its fields), with the spellings of before still read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pcspec.cli import main
from pcspec.logcheck import check_events, parse_bytes, parse_options, parse_text
from pcspec.logcheck.checker import CheckResult
from pcspec.logcheck.options import ALIASES, POINTS, Options, options_for
from pcspec.model.design import POINTS as MODEL_POINTS
from pcspec.model.designs import DESIGNS
from pcspec.model.rulesets import get_rule_set
from tests.logcheck.test_logcheck_rules import (
    cached,
    checking,
    found,
    invalidated,
    line_of,
    restore_scenario,
    restored,
    stamp,
)
from tests.support.paths import DATA

# pcspec's fixed build, patch 0013 (tests/data/real/README-logs.md)
KEPT = DATA / "real" / "fixed-keep-restored.log"
NOVEMBER = DATA / "real" / "november-recurrent.log"


def _check(path: Path, options: Options) -> CheckResult:
    return check_events(parse_bytes(path.read_bytes()).events, options)


def _rules(result: CheckResult) -> list[str]:
    return sorted(d.rule for d in result.deviations)


def test_every_option_point_is_a_point_of_the_model() -> None:
    for key, points in POINTS.items():
        assert key in MODEL_POINTS and set(points) <= set(MODEL_POINTS), key
    for key, (point, values) in ALIASES.items():
        assert point in POINTS, key
        assert set(values.values()) <= set(DESIGNS), key


@pytest.mark.parametrize(("old", "new"), [
    ("accounting=unique", "entry_sizes=fixed"),
    ("accounting=per-holder", "entry_sizes=baseline"),
    ("restored-owner=restorer", "kept_checkpoint=fixed"),
    ("restored-owner=creator", "kept_checkpoint=baseline"),
    ("pos-min=payload", "checkpoint_pos_min=fixed"),
    ("pos-min=memory", "checkpoint_pos_min=baseline"),
])
def test_the_spellings_of_before_are_one_point_each(old: str, new: str) -> None:
    assert parse_options([old]) == parse_options([new])


def test_the_design_judges_as_its_points_do() -> None:
    """``--design fixed`` and fixed's code at the three points judge fixed's log alike; the
    upstream code (no design) reports the sweep and the cap that patch 0013 changes."""
    by_design = _check(KEPT, options_for(DESIGNS["fixed"], parse_options(["invalidation=n-prefix"])))
    by_points = _check(KEPT, parse_options(["entry_sizes=fixed", "kept_checkpoint=fixed",
                                            "checkpoint_pos_min=fixed", "invalidation=n-prefix"]))
    upstream = _check(KEPT, parse_options(["invalidation=n-prefix"]))
    assert _rules(by_design) == _rules(by_points) == []
    assert _rules(upstream) == ["ckpt-cap-evict", "ckpt-sweep"]
    (run,) = by_points.runs
    assert run.design is not None and run.design.name.startswith("baseline+entry_sizes=fixed")
    assert (run.accounting, run.restored_owner, run.pos_min) == ("unique", "restorer", "payload")


def test_a_point_option_applies_over_the_design() -> None:
    """``--design fixed`` with baseline's ``kept_checkpoint``: fixed everywhere but there, so the
    sweep and the cap are judged the upstream way again."""
    result = _check(KEPT, options_for(DESIGNS["fixed"], parse_options(["kept_checkpoint=baseline",
                                                                       "invalidation=n-prefix"])))
    assert _rules(result) == ["ckpt-cap-evict", "ckpt-sweep"]
    (run,) = result.runs
    assert run.design is not None and run.design.name == "fixed+kept_checkpoint=baseline"
    assert (run.accounting, run.restored_owner, run.pos_min) == ("unique", "creator", "payload")


def test_the_run_holds_its_rule_set_object() -> None:
    (run,) = _check(NOVEMBER, Options()).runs
    assert run.rule_set is get_rule_set("november")
    assert run.as_dict()["build"] == "november"


@pytest.mark.parametrize(("option", "says"), [
    ("entry_sizes=fixd", "option entry_sizes names the design whose code runs there: one of baseline, "),
    ("accounting=shared", "option accounting must be one of per-holder, unique, not 'shared'"),
    ("entry-sizes=fixed", "unknown option 'entry-sizes=fixed'"),
])
def test_a_bad_option_is_one_line(option: str, says: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-log", str(KEPT), "--option", option]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1


def test_a_design_under_a_rule_set_judges_a_log(capsys: pytest.CaptureFixture[str]) -> None:
    """Today's upstream master by the name ``pcspec live`` gives it: its log checks clean, and
    the report names the design."""
    assert main(["check-log", "--json", "--design", "pr30137@november", str(NOVEMBER)]) == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert (run["design"], run["build"], run["invalidation"]) == ("pr30137@november", "november", "n-prefix")


def test_a_built_in_design_judges_by_its_own_decisions() -> None:
    """``fixed`` restores an SWA checkpoint only if its payload holds the window the first
    re-processed token needs (``Fixed.restore_choice``, patch 0005): a restore of ``[190, 199]``
    for ``pos_next = 250`` (n_swa = 32) is upstream's choice and not fixed's, so the same log
    is clean under the upstream code and a ``restore-choice`` deviation under ``--design fixed``."""
    lines = restore_scenario([checking(200, 279, 218), checking(190, 199, 218), restored(190, 199, 200, 199),
                              invalidated(200, 279, 280, 199), cached(199)], b=(190, 199))
    events = parse_text(stamp(lines), "<test>").events
    assert found(check_events(events, Options())) == []
    fixed = check_events(events, options_for(DESIGNS["fixed"]))
    assert found(fixed) == [(line_of(lines, "restored context"), "restore-choice")]
    assert "picks [0, 99]" in fixed.deviations[0].message
