"""The shared state of one server run being checked: configuration seen at start-up, the rule
variants in force, and the sinks for deviations, notes and statistics."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from pcspec.logcheck.mib import MIB, Approx
from pcspec.logcheck.options import Rules
from pcspec.logcheck.rules import RULES, Deviation
from pcspec.logcheck.stats import Stats


@dataclass(slots=True)
class RunConfig:
    """Server configuration as far as the log shows it (None = not shown)."""

    cap: int | None = None  # --ctx-checkpoints
    min_step: int | None = None  # --checkpoint-min-step
    cache_enabled: bool | None = None
    no_limit: bool = False  # --cache-ram -1: limit_size == 0
    limit: Approx | None = None  # byte limit in MiB (exact from start-up, approximate after)
    limit_tokens: int | None = None  # limit_tokens (n_ctx total)
    n_slots: int | None = None
    kv_unified: bool | None = None
    idle_enabled: bool | None = None
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

    @staticmethod
    def exact_bytes(mib: int) -> int:
        return mib * MIB


@dataclass(slots=True)
class Context:
    rules: Rules
    stats: Stats
    config: RunConfig = field(default_factory=RunConfig)
    deviations: list[Deviation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    weakened: Counter[str] = field(default_factory=Counter)

    def deviate(self, line: int, rule: str, message: str) -> None:
        assert rule in RULES, rule
        self.deviations.append(Deviation(line, rule, message))

    def weaken(self, why: str) -> None:
        """Count a check that ran without an input the log did not show."""
        self.weakened[why] += 1
