"""After a deviation the checker adopts what the log shows and goes on (item 11): one edited
number in a real log gives the few deviations on its own lines, not one at every later line that
depends on it; what it resolved by adopting the log is counted as knock-on, and said."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pcspec.cli import main
from pcspec.logcheck import check_log

# the real logs, wherever in tests/ this file is
REAL = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file()) \
    / "tests" / "data" / "real"
CREATED = ("created context checkpoint 3 of 8 (pos_min = 19, pos_max = 274, n_tokens = 275, "
           "size = 0.016 MiB)")
ERASED = ("erasing context checkpoint too close to an earlier one (pos_min = 19, pos_max = 274, "
          "n_tokens = 275, size = 0.016 MiB)")


def edited(tmp_path: Path, name: str, old: str, new: str) -> Path:
    """``name`` with ``old`` (which occurs on exactly one line) replaced by ``new``."""
    text = (REAL / name).read_text(encoding="utf-8", errors="replace")
    assert text.count(old) == 1
    out = tmp_path / name
    out.write_text(text.replace(old, new), encoding="utf-8")
    return out


def test_edited_creation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``n_tokens = 275`` -> ``300`` on the line that creates the checkpoint: the two exact
    deviations of that line (73 before the resync, one at every later step of the slot)."""
    log = edited(tmp_path, "01-growing.log", CREATED, CREATED.replace("275", "300"))
    r = check_log(log)
    assert [(d.line, d.rule) for d in r.deviations] == [(1177, "ckpt-position")] * 2
    assert r.n_deviations == 2 and r.n_knock_on == 1
    assert main(["check-log", str(log)]) == 1
    out = capsys.readouterr().out
    assert "2 deviation(s); 1 knock-on disagreement(s) suppressed" in out
    assert "adopts what the log shows" in out
    assert main(["check-log", str(log), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["knock_on_suppressed"] == 1


def test_edited_erasure(tmp_path: Path) -> None:
    """The same number edited on the line that erases the checkpoint: that line deviates (the
    slot holds the checkpoint with n_tokens 275), the log's value is adopted, and the sweep
    judged on it deviates on the same line; nothing later (71 before)."""
    log = edited(tmp_path, "01-growing.log", ERASED, ERASED.replace("275", "300"))
    r = check_log(log)
    assert [(d.line, d.rule) for d in r.deviations] == [(1867, "ckpt-sweep")] * 2
    assert "adopted" in r.deviations[0].message and r.n_knock_on == 0


def test_edited_listing(tmp_path: Path) -> None:
    """A cache entry's size edited in one "cache state" listing: that line deviates; the next
    listing, which disagrees with the adopted size, is that deviation again (3 before)."""
    row = "prompt 0x5583d3ec38f0:     611 tokens, checkpoints:  2,     0.354 MiB"
    text = (REAL / "03-eviction.log").read_text(encoding="utf-8", errors="replace")
    first = text.index(row)
    log = tmp_path / "03-eviction.log"
    log.write_text(text[:first] + row.replace("0.354", "0.454") + text[first + len(row):],
                   encoding="utf-8")
    r = check_log(log)
    assert [(d.line, d.rule) for d in r.deviations] == [(1226, "cache-summary")]
    assert r.n_knock_on == 2


@pytest.mark.parametrize("name", ["01-growing.log", "03-eviction.log"])
def test_unedited_logs_unchanged(name: str) -> None:
    r = check_log(REAL / name)
    assert r.n_deviations == 0 and r.n_knock_on == 0


def test_identical_checkpoints_are_a_multiset() -> None:
    """30 identical fillers beside two real checkpoints, restored from a slot file, learnt from
    the scan and erased in an order of the server's own: each erasure line takes one of them
    (the first match for every line left 29 "kept which must be erased")."""
    logs = REAL.parent / "logs"
    r = check_log(logs / "restored-fillers.log")
    assert r.n_deviations == 0, [d.message[:200] for d in r.deviations]
    assert r.stats.ckpt_invalidated == 32
