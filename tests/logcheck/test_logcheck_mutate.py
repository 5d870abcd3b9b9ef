"""The mutation campaign (issue 34, item 2): one wrong line in a real log costs the deviations on
its own lines, not one at every later step, because the checker rebuilds its view of the slot's
checkpoints from the next lines that show them; and the campaign itself is deterministic."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pcspec.logcheck import check_log
from pcspec.logcheck.mutate import GOOD, Log, load, main, mutate_one, run
from pcspec.logcheck.options import Options
from tests.support.paths import DATA

GROWING = DATA / "real" / "01-growing.log"
EVICTION = DATA / "real" / "03-eviction.log"


def _at(log: Log, line: int) -> int:
    return next(i for i, e in enumerate(log.events) if e.line == line)


# (line, op, deviations before the resync of issue 34)
@pytest.mark.parametrize("line, op, before", [
    (1158, "duplicate", 78),  # a creation recorded twice: every later "k of N" was off by one
    (1513, "duplicate", 78),
    (2619, "duplicate", 61),
    (2214, "delete", 73),  # a too-close erasure not shown: the list kept one checkpoint too many
])
def test_one_wrong_checkpoint_line_costs_a_few_deviations(line: int, op: str, before: int) -> None:
    log = load(GROWING, Options())
    m = mutate_one(log, _at(log, line), op, random.Random(0))
    assert 1 <= m.deviations <= GOOD + 1, (m.show(), m.deviations, before)


def edited(tmp_path: Path, log: Path, old: str, new: str) -> Path:
    """A copy of ``log`` with its one line holding ``old`` edited to ``new``."""
    text = log.read_text(encoding="utf-8", errors="replace")
    assert text.count(old) == 1
    out = tmp_path / log.name
    out.write_text(text.replace(old, new), encoding="utf-8")
    return out


def test_an_edited_cap_is_adopted_from_the_creation_lines(tmp_path: Path) -> None:
    """--ctx-checkpoints edited on the start-up line: the first creation's "k of 8" deviates
    and its cap is adopted (52 deviations, one per creation, before)."""
    r = check_log(edited(tmp_path, GROWING, "context checkpoints enabled, max = 8,",
                         "context checkpoints enabled, max = 18,"))
    assert r.n_deviations == 1 and r.deviations[0].rule == "ckpt-count"
    assert "adopted" in r.deviations[0].message


def test_a_small_campaign() -> None:
    logs = [load(GROWING, Options()), load(EVICTION, Options())]
    a = run(logs, 40, 7)
    b = run(logs, 40, 7)
    assert [(m.source, m.line, m.op, m.deviations) for m in a.mutants] \
        == [(m.source, m.line, m.op, m.deviations) for m in b.mutants]
    s = a.summary()
    assert s["crashed"] == 0
    assert s["mutants"] == 40 and isinstance(s["share_at_most_3"], float) and s["share_at_most_3"] >= 0.9
    silent = [m for m in a.mutants if m.deviations == 0]
    assert all(m.category in ("not read", "no rule", "not judged here", "unreadable", "consistent") for m in silent)


def test_campaign_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "missing.log"), "--mutants", "3"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    # a log that does not check clean cannot be measured
    deviating = DATA / "real" / "fixed-keep-restored.log"
    assert main([str(deviating), "--mutants", "3"]) == 2
    assert "checks clean" in capsys.readouterr().err
    assert main([str(deviating), "--mutants", "3", "--option", "restored-owner=restorer"]) == 0
    assert "3 mutants (seed 1)" in capsys.readouterr().out


def test_an_edited_cache_limit_is_adopted_from_the_summary(tmp_path: Path) -> None:
    """--cache-ram edited on the start-up line (1 -> 2 MiB): the first "cache state" summary,
    which prints the server's limit, deviates and its limit is adopted (one deviation at every
    summary and a few at the saves, 20 or more, before)."""
    r = check_log(edited(tmp_path, EVICTION, "prompt cache is enabled, size limit: 1 MiB",
                         "prompt cache is enabled, size limit: 2 MiB"))
    assert 1 <= r.n_deviations <= GOOD, [d.message for d in r.deviations]
    assert any("adopted" in d.message for d in r.deviations)
