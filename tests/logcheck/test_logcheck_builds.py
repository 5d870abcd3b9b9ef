"""The rule set of a log's build: chosen from the build line in every form the trees print,
narrowed by the messages only some builds print, or named with ``--rules``."""

from __future__ import annotations

from pathlib import Path

import pytest

from pcspec.cli import main
from pcspec.logcheck import Options
from pcspec.logcheck.builds import ALL_RULE_SETS, KNOWN_BUILDS, NEWEST, choose, parse_build
from pcspec.logcheck.options import with_rules
from pcspec.model.errors import PcspecError
from pcspec.model.rulesets import NEWEST as NEWEST_RULE_SET
from pcspec.model.rulesets import RULE_SETS
from tests.support.logs import LOGS, check, erase_at_b, found, lines_of, where
from tests.support.paths import DATA

REAL = DATA / "real"

# The forms a build names itself in, as ``line`` templates (number, commit).
FORMS = {
    # common/common.cpp:402 at 0c1e570, 406 of b11434 and b11549 (TRACE, the log's own line)
    "print_info": "0.00.002.504 I cmn  common_param: common_params_print_info: build {n} ({c}) with GNU 12.2.0 "
                  "for Linux x86_64",
    # common/build-info.cpp.in:33 (--version), in a capture that holds it
    "version": "version: 0.5.0-dev (build {n}, commit {c})",
    # a form none of the three trees prints, read all the same
    "build:": "build: {n} ({c}) with cc (GCC) 12.2.0 for x86_64-linux-gnu",
}
# How each rule set's build names itself: (number, commit) as its line prints them.
NAMED = {
    "october": (1, "0c1e570"),  # the October sdist's own git metadata (tests/data/real)
    "b11434": (11434, "b11434"),  # pcspec's recipe: LLAMA_BUILD_NUMBER / LLAMA_BUILD_COMMIT
    "b11549": (11549, "b11549"),
    "november": (7306, "e152332"),  # a clone of the merge commit
}


def with_build_line(lines: list[str], line: str) -> list[str]:
    """The October log with its build line replaced by ``line``."""
    return [line if "print_info: build" in x else x for x in lines]


def test_the_known_builds_are_the_models_rule_sets() -> None:
    assert tuple(RULE_SETS) == ALL_RULE_SETS
    assert NEWEST.rule_set == NEWEST_RULE_SET == ALL_RULE_SETS[-1]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("rule_set", list(NAMED))
def test_each_rule_set_from_a_build_line_of_each_form(rule_set: str, form: str) -> None:
    n, c = NAMED[rule_set]
    line = FORMS[form].format(n=n, c=c)
    assert parse_build(line) == (n, c)
    got = check(with_build_line(lines_of("october-build.log"), line))
    run = got.runs[0]
    assert (run.build, run.build_warning) == (rule_set, "")
    expected = "n-prefix" if RULE_SETS[rule_set].invalidate_n_prefix else "pos-max"
    assert run.invalidation == expected
    # the log's request B keeps a checkpoint only the n_prefix rule erases: the November rule
    # set calls the keeping a deviation, every other one passes it
    assert bool(found(got)) == (rule_set == "november")


@pytest.mark.parametrize("rule_set", list(NAMED))
def test_the_full_commit_and_its_prefixes_name_the_build(rule_set: str) -> None:
    for full in next(b for b in KNOWN_BUILDS if b.rule_set == rule_set).commits:
        # a hash by any prefix of 7 digits or more; a name pcspec's builds pass (b11549, november) whole
        hexa = all(c in "0123456789abcdef" for c in full) and len(full) == 40
        for commit in ({full, full[:7], full[:12], full.upper()} if hexa else {full, full.upper()}):
            assert choose(0, commit).candidates == (rule_set,)


def test_a_build_newer_than_every_known_one_gets_what_any_later_rule_set_allows_and_a_warning(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A build numbered above b11549 may be anything from b11549 to the November code: it is
    judged by what any of them allows, and told so (not held to the strictest)."""
    got = choose(11600, "abcdef0")
    assert got.candidates == ("b11549", NEWEST_RULE_SET) and not got.exact
    assert "newer than every known build" in got.warning and NEWEST_RULE_SET in got.warning
    assert "\n" not in got.warning
    log = tmp_path / "new.log"
    line = FORMS["print_info"].format(n=11600, c="abcdef0")
    log.write_text("\n".join(with_build_line(lines_of("october-build.log"), line)) + "\n")
    code = main(["check-log", str(log)])
    err = capsys.readouterr().err.splitlines()
    assert code == 0  # (b11549's invalidation keeps what this log keeps; the November rule would not)
    assert len(err) == 1 and err[0].startswith("pcspec check-log: warning: ")
    assert f"any of b11549, {NEWEST_RULE_SET} allows" in err[0]
    assert main(["check-log", str(log), "--rules", NEWEST_RULE_SET]) == 1


def test_builds_between_and_below_the_known_numbers() -> None:
    assert choose(11500, "1234567").candidates == ("b11434", "b11549")
    assert not choose(11500, "1234567").exact
    assert choose(11434, "1234567").candidates == ("b11434",)
    assert choose(9000, "1234567").candidates == ALL_RULE_SETS  # no known build names it
    assert choose(1, "1234567").candidates == ALL_RULE_SETS  # a shallow clone of another commit


SDIST = FORMS["print_info"].format(n=0, c="unknown")


def appendix_line(lines: list[str]) -> list[str]:
    """The slot-restore log with the appendix line b11549 and the November code print."""
    at = where(lines, "state_read_meta", 1)
    stamp = lines[at - 1].split(" ")[0]
    return [*lines[:at], f"{stamp} I slot restore_slot: id  0 | task -1 | restored 2 context "
            "checkpoint(s) from 'slots/conversation.bin'", *lines[at:]]


def test_an_sdist_build_is_narrowed_by_the_messages_only_some_builds_print() -> None:
    plain = with_build_line(lines_of("slot-restore.log"), SDIST)
    run = check(plain).runs[0]
    assert (run.build, run.invalidation) == ("unknown", "either")
    assert "built without git metadata" in run.build_evidence and "--rules NAME" in run.build_evidence
    assert "--rules NAME" in run.build_warning and "\n" not in run.build_warning
    both = check(appendix_line(plain)).runs[0]
    assert (both.build, both.invalidation) == ("unknown", "either")
    assert "b11549, november" in both.build_warning
    at = where(plain, "state_read_meta", 1)
    stamp = plain[at - 1].split(" ")[0]
    saved = [*plain[:at], f"{stamp} E slot  prompt_save: id  0 | task 2 | failed to save complete prompt state",
             *plain[at:]]
    one = check(saved).runs[0]
    assert (one.build, one.build_warning) == ("november", "")
    assert "'failed to save complete prompt state'" in one.build_evidence


def test_a_named_build_is_not_overruled_by_a_message() -> None:
    """The build line is the stronger evidence: b11434 stays b11434 beside an appendix line."""
    line = FORMS["print_info"].format(n=11434, c="b11434")
    run = check(appendix_line(with_build_line(lines_of("slot-restore.log"), line))).runs[0]
    assert run.build == "b11434"


def test_rules_overrides_the_build_line() -> None:
    erasing = erase_at_b(lines_of("october-build.log"))  # the build line says 0c1e570
    assert found(check(erasing)) == [(where(erasing, "erased invalidated"), "invalidate")]
    overridden = check(erasing, rules="november")
    assert found(overridden) == []
    assert (overridden.runs[0].build, overridden.runs[0].build_evidence) == ("november", "--rules november")
    assert found(check(erasing, rules="b11549")) == found(check(erasing))


def test_rules_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    log = str(LOGS / "october-build.log")
    assert main(["check-log", log, "--rules", "b11434"]) == 0
    assert main(["check-log", log, "--rules", "november"]) == 1
    capsys.readouterr()
    assert main(["check-log", log, "--rules", "december"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"pcspec: error: unknown rule set 'december'; known rule sets: {', '.join(RULE_SETS)}"]
    with pytest.raises(PcspecError):
        with_rules(Options(), "baseline")  # a design is not a rule set


def test_the_real_logs_check_the_same() -> None:
    """The captures of the October build: their build line names october, 0 deviations."""
    for name in ("01-growing.log", "03-eviction.log"):
        lines = (REAL / name).read_bytes().decode("utf-8", errors="replace").splitlines()
        got = check(lines)
        assert found(got) == [] and {r.build for r in got.runs} == {"october"}
