"""What a log shows of the server build that wrote it.

Two questions, answered per server run from its lines (``pcspec.logcheck.scan`` feeds them):

**The format era** (``EraDetector``): message formats changed over 2026, each era ended by the
pull request that names it. Markers, oldest first:

* ``pre-20287`` (before 2026-03): "created context checkpoint" without ``n_tokens``;
* ``pre-25078`` (before 2026-06-28): ``Checking checkpoint``, or the restore / forcing /
  invalidation / creation lines at WARN level;
* ``pre-26271`` (before 2026-07-29): ``sim =`` instead of ``f_sim =`` in load lines;
* otherwise ``current``.

**Which rule set** (``BuildEvidence``, ``choose``): the builds pcspec has rule sets for
(``pcspec.model.variants.RULE_SETS``, docs/RULESETS.md) print the same message formats but
differ in rules the log shows, e.g. which checkpoints a prompt start erases (``pos_max >
pos_next`` up to b11549, also ``n_tokens > n_prefix`` in the November code). Evidence,
strongest first:

* the build line, ``common_params_print_info: build N (commit) with ...`` (TRACE, so only in
  ``-v`` / ``-lv 4`` logs: common/common.cpp:402 at 0c1e570, common/common.cpp:406 of b11434 and
  of b11549), or the same numbers as ``--version`` prints them, ``version: V (build N, commit
  C)`` (common/build-info.cpp.in:33 in all three trees). A known commit, or a known build number,
  names its rule set; a number newer than every known one gets the newest rule set and a
  warning; a number between two known ones leaves the two (the messages may tell them apart).
  ``build 0`` with commit ``unknown`` is a tree built without git metadata and without
  ``LLAMA_BUILD_NUMBER`` (cmake/build-info.cmake:1-2 in all three trees): it names nothing;
* a message only some builds print: "restored N context checkpoint(s) from" and "<invalid|
  truncated> context checkpoint appendix" (the slot-file appendix, #26004: b11549
  server-context.cpp:2674-2712, and the November code; neither 0c1e570 nor b11434 has it), and
  "failed to save complete prompt state" (#30137's merged diff only).

When neither settles one rule set, the checker accepts what every remaining one allows
(``pcspec.logcheck.options``), and ``--rules NAME`` chooses one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import pairwise

from pcspec.logcheck import events as ev

ERAS = ("current", "pre-26271", "pre-25078", "pre-20287")  # newest first
_RANK = {era: i for i, era in enumerate(ERAS)}


@dataclass(frozen=True, slots=True)
class KnownBuild:
    """A build pcspec has a rule set for, and what its build line can print of it."""

    rule_set: str
    description: str
    number: int | None  # the upstream build number (tag bN); None when not known
    # commits as printed: full hashes (a log prints a prefix of 7+ hex digits), and the names
    # pcspec's own builds pass as LLAMA_BUILD_COMMIT (pcspec/live/build.py)
    commits: tuple[str, ...]


KNOWN_BUILDS: tuple[KnownBuild, ...] = (  # oldest first, as RULE_SETS
    KnownBuild("october", "llama.cpp 0c1e570 (2026-10-01, the October tree)", None,
               ("0c1e57098bba43ac29e6e3b677cdceebdd22334f",)),
    KnownBuild("b11434", "llama.cpp b11434 (about 2026-10-06)", 11434, ("b11434",)),
    KnownBuild("b11549", "llama.cpp b11549 (about 2026-10-10)", 11549, ("b11549",)),
    KnownBuild("november", "llama.cpp e152332 (#30137, 2026-11-05, the November tree)", None,
               ("e152332a15986f4b15f79396df1980276b984001", "november")),
)
ALL_RULE_SETS: tuple[str, ...] = tuple(b.rule_set for b in KNOWN_BUILDS)
NEWEST = KNOWN_BUILDS[-1]  # (tests/logcheck/test_logcheck_builds.py: the same as the model's)
_NUMBERED = sorted((b for b in KNOWN_BUILDS if b.number is not None), key=lambda b: b.number or 0)
_HEX = re.compile(r"[0-9a-f]{7,40}")

# The forms a build names itself in (see the module docstring): the log's TRACE line, the
# ``--version`` answer, and ``build: N (commit)`` (none of the three trees prints it; accepted
# so that a log of another build that does is not left unnamed).
_FORMS = (
    re.compile(r"common_params_print_info: build (\d+) \(([^)\s]*)\) with "),
    re.compile(r"version: \S+ \(build (\d+), commit ([^)\s]*)\)"),
    re.compile(r"\bbuild: (\d+) \(([^)\s]*)\)"),
)


def parse_build(text: str) -> tuple[int, str] | None:
    """(number, commit) of the first build line in ``text``, in any of the forms."""
    for form in _FORMS:
        m = form.search(text)
        if m is not None:
            return int(m.group(1)), m.group(2)
    return None


def known_build(commit: str) -> KnownBuild | None:
    """The known build a printed commit names, or None."""
    c = commit.lower()
    for b in KNOWN_BUILDS:
        if c in b.commits or (_HEX.fullmatch(c) and any(full.startswith(c) for full in b.commits)):
            return b
    return None


@dataclass(frozen=True, slots=True)
class BuildChoice:
    """What a build line says: the rule sets it may be (oldest first), why, whether the
    line settles it (``exact``: messages are not consulted), and a warning for the user."""

    candidates: tuple[str, ...]
    evidence: str
    exact: bool = False
    warning: str = ""


def choose(number: int, commit: str, where: str = "") -> BuildChoice:
    """The rule sets a build line ``build number (commit)`` leaves (``where``: "line N: ")."""
    named = f"{where}build {number} ({commit})"
    known = known_build(commit)
    if known is not None:
        return BuildChoice((known.rule_set,), f"{named} = {known.description}", exact=True)
    if number == 0 and commit == "unknown":
        return BuildChoice(ALL_RULE_SETS, f"{named}: built without git metadata, it names no build")
    for b in _NUMBERED:
        if b.number == number:
            return BuildChoice((b.rule_set,), f"{named} = {b.description}", exact=True)
    newest = _NUMBERED[-1]
    if newest.number is not None and number > newest.number:
        # between the newest numbered build and the code after it (no number): any of them
        later = tuple(dict.fromkeys((newest.rule_set, NEWEST.rule_set)))
        warning = (f"build {number} is newer than every known build (newest numbered: b{newest.number}): checked "
                   f"with what any of {', '.join(later)} allows (--rules NAME to choose one)")
        return BuildChoice(later, f"{named}: newer than every known build, between b{newest.number} and "
                           f"{later[-1]}", exact=len(later) == 1, warning=warning)
    for lo, hi in pairwise(_NUMBERED):
        if (lo.number or 0) < number < (hi.number or 0):
            return BuildChoice((lo.rule_set, hi.rule_set),
                               f"{named}: between b{lo.number} and b{hi.number}")
    return BuildChoice(ALL_RULE_SETS, f"{named} is not a known build")


class EraDetector:
    """The oldest format era whose markers appear, and the line that shows it."""

    __slots__ = ("era", "evidence")

    def __init__(self) -> None:
        self.era = "current"
        self.evidence = "no older message format seen"

    def add(self, e: ev.Event) -> None:
        era: str | None = None
        why = ""
        if isinstance(e, ev.CheckpointCreated):
            if e.n_tokens is None:
                era, why = "pre-20287", "'created context checkpoint' without n_tokens"
            elif e.level == "W":
                era, why = "pre-25078", "'created context checkpoint' at WARN level"
        elif isinstance(e, ev.CheckpointChecked) and e.legacy:
            era, why = "pre-25078", "'Checking checkpoint' spelling"
        elif isinstance(e, ev.CheckpointRestored | ev.FullReprocess | ev.CheckpointInvalidated):
            if e.level == "W":
                era, why = "pre-25078", f"'{e.kind}' line at WARN level"
        elif isinstance(e, ev.LoadLookup) and e.legacy:
            era, why = "pre-26271", "'sim =' instead of 'f_sim =' in load lines"
        if era is not None and _RANK[era] > _RANK[self.era]:
            self.era, self.evidence = era, f"line {e.line}: {why}"


# Messages only some builds print -> the rule sets that print them.
_APPENDIX_BUILDS = ("b11549", "november")
_SAVE_FAILED_BUILDS = ("november",)


@dataclass(slots=True)
class BuildEvidence:
    """Which rule set one server run shows, and why."""

    build: ev.BuildLine | None = None  # the process's build line (inherited across runs)
    # the rule sets the messages seen so far allow, and the lines that narrowed them
    allowed: tuple[str, ...] = ALL_RULE_SETS
    why: list[str] = field(default_factory=list)

    def add(self, e: ev.Event) -> None:
        if isinstance(e, ev.SlotFileCheckpoints):
            self._narrow(e.line, "a slot-file checkpoint appendix line", _APPENDIX_BUILDS)
        elif isinstance(e, ev.SaveFailed):
            self._narrow(e.line, "'failed to save complete prompt state'", _SAVE_FAILED_BUILDS)

    def _narrow(self, line: int, what: str, builds: tuple[str, ...]) -> None:
        kept = tuple(b for b in self.allowed if b in builds)
        if kept != self.allowed:
            self.allowed = kept
            self.why.append(f"line {line}: {what} ({' or '.join(builds)})")

    def choice(self) -> BuildChoice:
        """The rule sets this run may follow: the build line's, narrowed by the messages."""
        line = self.build
        got = choose(line.number, line.commit, f"line {line.line}: ") if line is not None else None
        if got is not None and got.exact:
            return got
        base = got.candidates if got is not None else ALL_RULE_SETS
        said = [got.evidence] if got is not None else ["no build line"]
        kept = tuple(b for b in base if b in self.allowed)
        if not self.why:
            said.append("no message only some builds print")
        elif kept:
            said.extend(self.why)
        else:  # the messages contradict the build line: the line is the stronger evidence
            said.append(f"{'; '.join(self.why)}, which the build line rules out")
            kept = base
        if len(kept) > 1:
            said.append(f"accepting what {' or '.join(kept)} allow (--rules NAME to choose)")
        warning = got.warning if got is not None else ""
        if len(kept) > 1 and line is not None and line.number == 0:
            warning = (f"line {line.line}: build 0 (unknown) names no build and the log does not tell "
                       f"{', '.join(kept)} apart: checked with what any of them allows (--rules NAME "
                       f"to choose one)")
        return BuildChoice(kept, "; ".join(said), exact=False, warning=warning)

    def rule_set(self) -> tuple[str | None, str]:
        """(rule set or None when more than one remains, evidence)."""
        got = self.choice()
        return (got.candidates[0] if len(got.candidates) == 1 else None), got.evidence
