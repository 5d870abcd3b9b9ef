"""The two real llama-server logs in tests/data/real: they parse completely, check with no
deviation, and their counts are those of the logs' README (README-logs.md)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from pcspec.cli import main
from pcspec.logcheck import check_events, check_log, load_trace, read_log
from tests.support.paths import DATA

LOGS = DATA / "real"
GROWING = LOGS / "01-growing.log"
EVICTION = LOGS / "03-eviction.log"

pytestmark = pytest.mark.skipif(not GROWING.exists(), reason="sample logs not present")

# tests/data/real/README-logs.md
EXPECTED = {
    GROWING: {"checkpoint_created": 30, "checkpoint_erased_old": 13,
              "checkpoint_erased_too_close": 9, "checkpoint_restored": 0},
    EVICTION: {"checkpoint_created": 30, "checkpoint_restored": 1,
               "checkpoint_invalidated": 28, "full_reprocess": 13, "cache_evicted": 11,
               "cache_loaded": 1},
}


@pytest.mark.parametrize("path", [GROWING, EVICTION], ids=["01-growing", "03-eviction"])
def test_counts_and_no_deviation(path: Path) -> None:
    result = check_log(path)
    assert result.deviations == []
    counts = result.stats.event_counts()
    for key, value in EXPECTED[path].items():
        assert counts[key] == value, key
    # nothing was judged on a guess: both logs show every input the checks need
    assert result.weakened == {}


def test_other_counts() -> None:
    growing = check_log(GROWING).stats
    assert growing.requests == 10 and growing.cache_miss == 1 and growing.full_reprocess == 0
    eviction = check_log(EVICTION).stats
    assert eviction.requests == 15
    assert eviction.reprocess_no_usable == 13 and eviction.reprocess_no_checkpoints == 0
    assert eviction.cache_saves == 14 and eviction.cache_lookups == 15
    assert eviction.evict_make_room == 11 and eviction.evict_limit_bytes == 0
    assert eviction.peak_cache_mib == pytest.approx(0.746)
    assert eviction.restored_then_erased == []


# lines that every build of the checker must turn into events: checkpoint and cache messages
_RELEVANT = re.compile(
    r"context checkpoint|forcing full|cached n_tokens|new prompt|srv +(alloc|load|update|"
    r"prompt_save): |selected slot|checking sim|updating prompt cache|stop processing"
)


@pytest.mark.parametrize("path", [GROWING, EVICTION], ids=["01-growing", "03-eviction"])
def test_parses_completely(path: Path) -> None:
    read = read_log(path)
    lines = path.read_bytes().decode("utf-8", errors="replace").split("\n")
    relevant = {i + 1 for i, line in enumerate(lines) if _RELEVANT.search(line)}
    assert relevant <= {e.line for e in read.events}
    assert read.notes == []
    assert read.n_lines == len(lines) - 1


@pytest.mark.parametrize("path", [GROWING, EVICTION], ids=["01-growing", "03-eviction"])
def test_prefix_free_and_coloured_variants(path: Path) -> None:
    """The same log printed with --no-log-prefix, or with colours and CRLF line ends."""
    text = path.read_bytes().decode("utf-8", errors="replace")
    base = check_log(path).stats.event_counts()
    bare = re.sub(r"(?m)^(?:\x1b\[[0-9;]*m)*\d+\.\d\d\.\d\d\d\.\d\d\d [A-Z] ", "", text)
    coloured = re.sub(r"(?m)^(\d+\.\d\d\.\d\d\d\.\d\d\d )([A-Z]) ",
                      "\x1b[90m\\1\x1b[0m\x1b[32m\\2\x1b[0m ", text).replace("\n", "\r\n")
    from pcspec.logcheck import parse_text

    for variant in (bare, coloured):
        read = parse_text(variant)
        result = check_events(read.events, n_lines=read.n_lines)
        assert result.deviations == []
        assert result.stats.event_counts() == base


def test_cli_json_and_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "events.jsonl"
    code = main(["check-log", str(GROWING), str(EVICTION), "--json", "--trace", str(trace)])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["schema"] == 1
    assert out["lines"] == 4649 + 3755
    for key in ("checkpoint_created", "checkpoint_restored", "checkpoint_invalidated",
                "checkpoint_erased_old", "checkpoint_erased_too_close", "full_reprocess",
                "cache_saved", "cache_loaded", "cache_evicted"):
        assert key in out["events"]
    assert out["events"]["checkpoint_created"] == 60
    assert out["deviations"] == []
    assert [log["source"] for log in out["logs"]] == [str(GROWING), str(EVICTION)]
    header = json.loads(trace.read_text().splitlines()[0])
    assert header == {"schema": 1, "kind": "pcspec-log-events", "source": str(GROWING)}
    logs = load_trace(trace)
    assert [src for src, _ in logs] == [str(GROWING), str(EVICTION)]
    assert logs[1][1] == read_log(EVICTION).events
    assert check_events(logs[1][1]).stats.event_counts() == check_log(EVICTION).stats.event_counts()


def test_cli_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-log", str(EVICTION)]) == 0
    out = capsys.readouterr().out
    assert "no deviations" in out
    assert "forced 13 (no usable checkpoint 13" in out


def test_rich_report() -> None:
    import io

    from pcspec.logcheck.report import render_rich

    buf = io.StringIO()
    render_rich([check_log(EVICTION)], buf)
    text = buf.getvalue()
    assert "checkpoint_invalidated" in text and "no deviations" in text


def test_streaming_check_equals_in_memory_check(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """check_log (two passes over blocks of the file) and check_events (the events in memory)
    agree, whatever the block size; three copies of the log are three server runs."""
    from pcspec.logcheck import source

    p = tmp_path / "three.log"
    p.write_bytes(EVICTION.read_bytes() * 3)
    read = read_log(p)
    whole = check_events(read.events, source=str(p), n_lines=read.n_lines, notes=read.notes)
    for block in (4096, 1 << 20):
        monkeypatch.setattr(source, "BLOCK", block)
        streamed = check_log(p)
        assert streamed.as_dict() == whole.as_dict()
        assert len(streamed.runs) == 3 and streamed.n_events == len(read.events)


def test_first_pass_stays_one_run_ahead() -> None:
    """The first pass (scan_runs) is pulled one run at a time, so the replay never waits for
    more than the run after the current one: memory does not grow with the log."""
    from pcspec.logcheck import events as ev
    from pcspec.logcheck.checker import LogChecker
    from pcspec.logcheck.scan import scan_runs

    events = read_log(EVICTION).events * 4
    starts = [i for i, e in enumerate(events) if isinstance(e, ev.ServerInit)]
    assert len(starts) == 4
    read_ahead = [0]

    def first_pass() -> Iterator[ev.Event]:
        for e in events:
            read_ahead[0] += 1
            yield e

    checker = LogChecker(None, scan_runs(first_pass()))
    for i, e in enumerate(events):
        checker.feed(e)
        run = sum(1 for s in starts if s <= i) - 1
        # the current run's summary was complete at the next run's first line: no further
        limit = starts[run + 1] + 1 if run + 1 < len(starts) else len(events)
        assert read_ahead[0] <= limit
    assert checker.finish().n_deviations == 0


def test_a_trace_written_before_the_update_time_was_read_still_loads(tmp_path: Path) -> None:
    """``cache_update_done`` gained its time (``ms``) after traces had been written without it:
    such a line loads with no time, and a line missing a field without a default is still one
    error naming the line."""
    from pcspec.logcheck import events as ev
    from pcspec.model.errors import PcspecError

    old = tmp_path / "old.jsonl"
    old.write_text('{"schema": 1, "kind": "pcspec-log-events", "source": "a.log"}\n'
                   '{"event": "cache_update_done", "line": 7, "level": "D"}\n')
    ((_src, (done,)),) = load_trace(old)
    assert isinstance(done, ev.CacheUpdateDone) and done.ms is None and done.line == 7
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"schema": 1, "kind": "pcspec-log-events", "source": "a.log"}\n'
                   '{"event": "prompt_save", "line": 7, "level": "D", "length": 3}\n')
    with pytest.raises(PcspecError, match="bad fields for prompt_save"):
        load_trace(bad)
