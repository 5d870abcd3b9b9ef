"""Log-checker test helpers: a test log's lines, the check of edited lines, where a line is."""

from __future__ import annotations

from pcspec.logcheck import Options, check_events, parse_text
from pcspec.logcheck.checker import CheckResult
from tests.support.paths import DATA

LOGS = DATA / "logs"


def lines_of(name: str) -> list[str]:
    return (LOGS / name).read_text().splitlines()


def check(lines: list[str], rules: str = "auto") -> CheckResult:
    read = parse_text("\n".join(lines) + "\n")
    return check_events(read.events, Options(rules=rules), n_lines=read.n_lines, notes=read.notes)


def found(result: CheckResult) -> list[tuple[int, str]]:
    return [(d.line, d.rule) for d in result.deviations]


def where(lines: list[str], needle: str, nth: int = 0) -> int:
    """1-based number of the ``nth`` line containing ``needle``."""
    return [i + 1 for i, x in enumerate(lines) if needle in x][nth]


def erase_at_b(lines: list[str]) -> list[str]:
    """Request B of october-build.log erases [40, 295], as the November code does (its
    invalidation also erases n_tokens > n_prefix), and numbers its checkpoint to match."""
    at = where(lines, "task.n_tokens = 310")
    stamp = lines[at - 1].split(" ")[0]
    erased = (f"{stamp} I slot   operator(): id  0 | task 8 | erased invalidated context "
              "checkpoint (pos_min = 40, pos_max = 295, n_tokens = 296, n_swa = 32, "
              "pos_next = 295, size = 0.016 MiB)")
    out = [*lines[:at], erased, *lines[at:]]
    return [x.replace("created context checkpoint 3 of 8 (pos_min = 50",
                      "created context checkpoint 2 of 8 (pos_min = 50") for x in out]
