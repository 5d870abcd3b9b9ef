"""The shared state of one server run being checked: configuration seen at start-up, the rule
variants in force, and the sinks for deviations, notes and statistics."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from pcspec.core.results import Finding, deviation
from pcspec.logcheck import events as ev
from pcspec.logcheck.mib import Approx
from pcspec.logcheck.needs import Verdict, verdicts
from pcspec.logcheck.options import Rules
from pcspec.logcheck.rules import RULES
from pcspec.logcheck.stats import Stats


@dataclass(slots=True)
class RunConfig:
    """Server configuration as far as the log shows it (None = not shown)."""

    cap: int | None = None  # --ctx-checkpoints
    min_step: int | None = None  # --checkpoint-min-step
    no_limit: bool = False  # --cache-ram -1: limit_size == 0
    limit: Approx | None = None  # byte limit in MiB (exact from start-up, approximate after)
    limit_tokens: int | None = None  # limit_tokens (n_ctx total)
    idle_clear: bool | None = None
    n_swa: int | None = None  # the server's n_swa, from invalidation lines

    def limit_bytes(self) -> tuple[int, int] | None:
        """(lowest, highest) byte limit consistent with the log; (0, 0) for no limit."""
        if self.no_limit:
            return (0, 0)
        if self.limit is None:
            return None
        return (self.limit.bytes_lo(), self.limit.bytes_hi())

    def set_limit_mib(self, mib: int | None) -> None:
        if mib is None:
            self.no_limit, self.limit = True, None
        else:
            self.no_limit, self.limit = False, Approx.exact(float(mib))

    def learn(self, e: ev.CacheConfig | ev.CheckpointConfig | ev.IdleSlotConfig) -> None:
        """A start-up line: what the server was started with."""
        if isinstance(e, ev.CacheConfig):
            if e.enabled:
                self.set_limit_mib(e.limit_mib)
        elif isinstance(e, ev.CheckpointConfig):
            self.cap = e.max if e.enabled else 0
            self.min_step = e.min_spacing if e.enabled else None
        else:
            self.idle_clear = e.enabled and e.clear


MAX_KEPT_DEVIATIONS = 10_000  # a log deviating at every line must not fill the memory


@dataclass(slots=True)
class Deviations:
    """A log's deviations: every one counted, the first ``MAX_KEPT_DEVIATIONS`` kept.

    After a deviation the checker adopts what the log shows (the server's state, not its own
    expectation) and goes on, so one wrong number gives the few deviations it causes on its own
    lines, not one at every later line that depends on it. ``knock_on`` counts the later
    disagreements that only restate an earlier deviation (a checkpoint recorded from a deviating
    line, named again by a later line): they are resolved by adopting the log, not reported."""

    kept: list[Finding] = field(default_factory=list)
    count: int = 0
    knock_on: int = 0

    def add(self, d: Finding) -> None:
        self.count += 1
        if len(self.kept) < MAX_KEPT_DEVIATIONS:
            self.kept.append(d)


@dataclass(slots=True)
class InvalidationChoice:
    """The invalidation rules a run may still follow: all the options allow until a prompt
    start only one of them explains (one binary follows one rule), then that one."""

    rules: tuple[str, ...]
    evidence: str = ""

    def narrow(self, explained: set[str], line: int) -> None:
        if len(self.rules) > 1 and len(explained) == 1:
            self.rules = tuple(explained)
            self.evidence = (f"line {line}: a prompt start only the {self.rules[0]} rule "
                             "explains")


@dataclass(slots=True)
class Context:
    rules: Rules
    stats: Stats
    deviations: Deviations = field(default_factory=Deviations)
    config: RunConfig = field(default_factory=RunConfig)
    notes: list[str] = field(default_factory=list)
    weakened: Counter[str] = field(default_factory=Counter)
    invalidation: InvalidationChoice = field(init=False)
    # the rules this run's verbosity does not let the checker judge in full (needs.verdicts)
    not_judged: dict[str, Verdict] = field(init=False)
    # disagreements of a skipped rule: dropped, counted by rule
    unjudged: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.invalidation = InvalidationChoice(self.rules.invalidation_rules())
        self.not_judged = verdicts(self.rules.verbosity)

    def deviate(self, line: int, rule: str, message: str) -> None:
        assert rule in RULES, rule
        verdict = self.not_judged.get(rule)
        if verdict is not None and verdict.status == "skipped":
            # the lines it needs are not printed at this verbosity: a disagreement is the
            # checker's missing input, not the server's deviation
            self.unjudged[rule] += 1
            return
        point = dict(self.rules.skipped).get(rule)
        if point is not None:  # the design runs its own code where this rule hangs: not judged
            self.weaken(f"{rule}: not judged, the design's own {point} (an effect, not replayable from a log)")
            return
        self.deviations.add(deviation(rule, line, message))

    def knock_on(self) -> None:
        """Count a disagreement that follows from an earlier deviation (see ``Deviations``)."""
        self.deviations.knock_on += 1

    def weaken(self, why: str) -> None:
        """Count a check that ran without an input the log did not show."""
        self.weakened[why] += 1
