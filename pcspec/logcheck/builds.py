"""What a log shows of the server build that wrote it.

Two questions, answered per server run from its lines (``pcspec.logcheck.scan`` feeds them):

**The format era** (``EraDetector``): message formats changed over 2026, each era ended by the
pull request that names it. Markers, oldest first:

* ``pre-20287`` (before 2026-03): "created context checkpoint" without ``n_tokens``;
* ``pre-25078`` (before 2026-06-28): ``Checking checkpoint``, or the restore / forcing /
  invalidation / creation lines at WARN level;
* ``pre-26271`` (before 2026-07-29): ``sim =`` instead of ``f_sim =`` in load lines;
* otherwise ``current``.

**Which current build** (``BuildEvidence``): the October 2026 code (0c1e570) and the November
2026 code (e152332, #30137) print the same formats but erase different checkpoints at prompt
start: October only those with ``pos_max > pos_next`` (server-context.cpp:3369-3378 at 0c1e570),
November also those with ``n_tokens > n_prefix`` (server-context.cpp:4317-4323 at e152332).
Evidence, strongest first:

* the build line ``common_params_print_info: build N (commit)`` (common/common.cpp:402 at
  0c1e570; TRACE, so only in ``-v`` / ``-lv 4`` logs) naming a commit in ``KNOWN_BUILDS``;
* a message only the November code prints: "restored N context checkpoint(s) from" and
  "<invalid|truncated> context checkpoint appendix" (the slot-file appendix, #26004 as adapted in
  #30137; the October tree 0c1e570 has none: server-context.cpp:2575-2640), and "failed to save
  complete prompt state" (#30137).

Neither is there (a default-verbosity log, another commit): the build is unknown, and the
checker accepts what either rule set allows (``pcspec.logcheck.options``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pcspec.logcheck import events as ev

ERAS = ("current", "pre-26271", "pre-25078", "pre-20287")  # newest first
_RANK = {era: i for i, era in enumerate(ERAS)}

# full commit -> (rule set, description). A log prints a prefix of the commit (7+ hex digits).
KNOWN_BUILDS: dict[str, tuple[str, str]] = {
    "0c1e57098bba43ac29e6e3b677cdceebdd22334f": (
        "october", "llama.cpp 0c1e570 (2026-10-01, the October tree)"),
    "e152332a15986f4b15f79396df1980276b984001": (
        "november", "llama.cpp e152332 (#30137, 2026-11-05, the November tree)"),
}


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


def known_build(commit: str) -> tuple[str, str] | None:
    """(rule set, description) of a printed commit, or None when it is not a known one."""
    c = commit.lower()
    if len(c) < 7:
        return None
    for full, known in KNOWN_BUILDS.items():
        if full.startswith(c):
            return known
    return None


@dataclass(slots=True)
class BuildEvidence:
    """Which rule set of a current-format build one server run shows, and why."""

    build: ev.BuildLine | None = None  # the process's build line (inherited across runs)
    november_line: int | None = None  # first line only the November code prints
    november_what: str = ""

    def add(self, e: ev.Event) -> None:
        if self.november_line is not None:
            return
        if isinstance(e, ev.SlotFileCheckpoints):
            self.november_line, self.november_what = e.line, "slot-file checkpoint appendix line"
        elif isinstance(e, ev.SaveFailed):
            self.november_line, self.november_what = e.line, "'failed to save complete prompt state'"

    def rule_set(self) -> tuple[str | None, str]:
        """(rule set or None when unknown, evidence)."""
        if self.build is not None:
            known = known_build(self.build.commit)
            if known is not None:
                return known[0], f"line {self.build.line}: build {self.build.number} = {known[1]}"
        if self.november_line is not None:
            return "november", f"line {self.november_line}: {self.november_what} (November code)"
        if self.build is not None:
            return None, (f"line {self.build.line}: build {self.build.number} "
                          f"({self.build.commit}) is not a known commit")
        return None, "no build line and no message only one build prints"
