"""Logs at every verbosity (issue 34, item 1): the levels of the lines the reader knows, the cut
of a -v log to what a server at a lower verbosity prints, the verbosity a log shows, and the
rules a log at that verbosity does not let the checker judge (skipped or weakened, named in the
report)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pcspec.cli import main
from pcspec.logcheck import check_log, parse_options, parse_text, read_log
from pcspec.logcheck import events as ev
from pcspec.logcheck.context import Context
from pcspec.logcheck.cut import cut_file
from pcspec.logcheck.cut import main as cut_main
from pcspec.logcheck.levels import DBG, INF, LEVELS, TRC, level_of
from pcspec.logcheck.needs import NEEDS, verdicts
from pcspec.logcheck.options import Options, resolve
from pcspec.logcheck.rules import RULES
from pcspec.logcheck.scan import scan_runs
from pcspec.logcheck.stats import Stats
from tests.support.paths import DATA

SAMPLES = DATA / "default-verbosity"
REAL = DATA / "real"
# the -v logs with timestamps and level letters (old-build.log has neither)
VERBOSE = sorted([*REAL.glob("*.log"), *(DATA / "logs").glob("*.log")])
VERBOSE = [p for p in VERBOSE if p.name not in ("old-build.log", "equal-lengths.log")
           or p.read_text(errors="replace").startswith("0.")]
# fixed-keep-restored.log is checked under its design's option (tests/data/real/README-logs.md)
_OPTIONS = {"fixed-keep-restored.log": ["restored-owner=restorer"]}


def test_every_event_kind_has_a_level() -> None:
    assert set(ev.ALL_EVENT_TYPES) <= set(LEVELS)


def test_every_rule_states_what_it_needs() -> None:
    assert set(NEEDS) == set(RULES)


def test_the_cut_keeps_only_what_the_default_verbosity_prints(tmp_path: Path) -> None:
    src = REAL / "03-eviction.log"
    out = tmp_path / "cut.log"
    cut_file(src, out)
    text = out.read_text(errors="replace")
    assert not any(line[13:15] == "D " for line in text.splitlines())
    cut = read_log(out).events
    assert all(level_of(e) <= INF for e in cut), {type(e).__name__ for e in cut if level_of(e) > INF}
    full = read_log(src).events
    # every INFO, WARN and ERROR line the reader knows is still there, and nothing else
    assert [type(e) for e in full if level_of(e) <= INF and not isinstance(e, ev.VerbosityLine)] \
        == [type(e) for e in cut if not isinstance(e, ev.VerbosityLine)]
    assert sum(isinstance(e, ev.CacheMakeRoom) for e in cut) == 11
    assert [e.verbosity for e in cut if isinstance(e, ev.VerbosityLine)] == [3]


def test_the_cut_to_trace_drops_only_debug(tmp_path: Path) -> None:
    src = REAL / "03-eviction.log"
    out = tmp_path / "cut.log"
    cut_file(src, out, 4)
    full = [type(e) for e in read_log(src).events if level_of(e) < DBG and not isinstance(e, ev.VerbosityLine)]
    cut = [type(e) for e in read_log(out).events if not isinstance(e, ev.VerbosityLine)]
    assert full == cut and ev.StateRead not in cut and ev.DoCheckpoint not in cut


@pytest.mark.parametrize("name, src, verbosity", [
    ("01-growing.v3.log", REAL / "01-growing.log", 3),
    ("03-eviction.v3.log", REAL / "03-eviction.log", 3),
    ("fixed-keep-restored.v3.log", REAL / "fixed-keep-restored.log", 3),
    ("slot-restore.v4.log", DATA / "logs" / "slot-restore.log", 4),
])
def test_the_samples_are_the_cut_of_their_logs(tmp_path: Path, name: str, src: Path, verbosity: int) -> None:
    cut_file(src, tmp_path / name, verbosity)
    assert (tmp_path / name).read_bytes() == (SAMPLES / name).read_bytes()


@pytest.mark.parametrize("path", sorted(SAMPLES.glob("*.log")), ids=lambda p: p.name)
def test_default_verbosity_samples_give_no_deviation(path: Path) -> None:
    r = check_log(path)
    assert r.n_deviations == 0, [d.message for d in r.deviations]
    assert r.not_judged  # below -v some rules are always skipped or weakened
    assert all(run.verbosity in (3, 4) for run in r.runs)


@pytest.mark.parametrize("verbosity", [3, 4, 5])
@pytest.mark.parametrize("path", VERBOSE, ids=lambda p: p.name)
def test_every_real_log_at_every_verbosity_gives_no_deviation(tmp_path: Path, path: Path, verbosity: int) -> None:
    options = parse_options(_OPTIONS.get(path.name, []))
    target = path
    if verbosity < 5:
        target = tmp_path / "cut.log"
        cut_file(path, target, verbosity)
    r = check_log(target, options)
    assert r.n_deviations == 0, [d.message for d in r.deviations]


def _verbosity_of(text: str) -> tuple[int, str]:
    summary = next(scan_runs(parse_text(text).events))
    return summary.verbosity()


_INIT = "0.00.013.254 I srv    load_model: initializing, n_slots = 1, n_ctx_slot = 4096, kv_unified = 'false'\n"
_PICK = "0.00.020.000 I slot get_availabl: id  0 | task -1 | selected slot by LRU, t_last = -1\n"
_NEW = ("0.00.020.100 I slot   operator(): id  0 | task 0 | new prompt, n_ctx_slot = 4096, n_keep = 0, "
        "task.n_tokens = 300\n")
_DO = "0.00.020.200 D slot update_slots: id  0 | task 0 | main/do_checkpoint = yes, pos_min = 0, pos_max = 9\n"


def _vline(n: int) -> str:
    return (f"0.00.002.351 I cmn  common_param: common_params_print_info: verbosity = {n} "
            "(adjust with the `-lv N` CLI arg)\n")


def test_the_verbosity_a_log_shows() -> None:
    assert _verbosity_of(_vline(3) + _INIT + _PICK)[0] == 3
    assert _verbosity_of(_vline(4) + _INIT + _PICK + _NEW)[0] == 4
    assert _verbosity_of(_vline(2147483647) + _INIT + _PICK)[0] == 2147483647
    # without the line: the highest level shown
    assert _verbosity_of(_INIT + _PICK) == (3, "no verbosity line; the run shows no TRACE or DEBUG line")
    assert _verbosity_of(_INIT + _PICK + _NEW)[0] == TRC
    assert _verbosity_of(_INIT + _PICK + _NEW + _DO)[0] > DBG
    # a line saying less than the run shows: the run wins
    v, why = _verbosity_of(_vline(3) + _INIT + _PICK + _NEW)
    assert v == TRC and "shows TRC lines" in why


def test_the_verbosity_line_is_read_and_carried_to_later_runs() -> None:
    events = parse_text(_vline(3) + _INIT + _PICK + _INIT + _PICK).events
    assert [type(e) for e in events][:2] == [ev.VerbosityLine, ev.ServerInit]
    runs = list(scan_runs(events))
    assert [r.verbosity()[0] for r in runs] == [3, 3]


def test_at_the_default_verbosity_every_rule_is_skipped_and_says_why() -> None:
    v3 = verdicts(3)
    assert set(v3) == set(RULES) and all(v.status == "skipped" for v in v3.values())
    assert "checkpoint_created (TRC)" in v3["ckpt-count"].why
    v4 = verdicts(4)
    assert v4["ckpt-position"].status == "weakened" and "do_checkpoint (DBG)" in v4["ckpt-position"].why
    assert v4["restore-scan"].status == "weakened" and "state_read (DBG)" in v4["restore-scan"].why
    assert "load-scan" not in v4 and "cache-summary" not in v4
    assert verdicts(5) == {}


def test_a_skipped_rule_never_deviates() -> None:
    summary = next(scan_runs(parse_text(_vline(3) + _INIT + _PICK).events))
    ctx = Context(resolve(Options(), summary), Stats())
    ctx.deviate(9, "cache-limit", "a limit the log cannot show")
    assert ctx.deviations.count == 0 and ctx.unjudged["cache-limit"] == 1
    summary = next(scan_runs(parse_text(_vline(4) + _INIT + _PICK + _NEW).events))
    ctx = Context(resolve(Options(), summary), Stats())
    ctx.deviate(9, "cache-limit", "judged at -lv 4")
    assert ctx.deviations.count == 1


def test_the_report_names_each_rule_not_judged(capsys: pytest.CaptureFixture[str]) -> None:
    path = SAMPLES / "03-eviction.v3.log"
    assert main(["check-log", str(path)]) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith("not judged")]
    assert len(lines) == len(RULES)
    assert any("restore-scan: skipped at verbosity 3: its lines are not printed" in ln for ln in lines)
    assert "verbosity 3" in out
    assert main(["check-log", "--json", str(path)]) == 0
    data = json.loads(capsys.readouterr().out)
    report = data["logs"][0] if "logs" in data else data
    assert set(report["not_judged"]) == set(RULES)
    assert report["runs"][0]["verbosity"] == 3
    # a -v log: nothing left out
    assert check_log(REAL / "03-eviction.log").not_judged == {}


def test_help_does_not_claim_any_verbosity(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-log", "--help"]) == 0
    out = capsys.readouterr().out
    assert "any verbosity" not in out and "not judged" in out


def test_cut_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cut_main([str(tmp_path / "missing.log"), str(tmp_path / "out.log")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot read" in err
    plain = tmp_path / "plain.log"
    plain.write_text("srv  update_slots: all slots are idle\n")
    assert cut_main([str(plain), str(tmp_path / "out.log")]) == 2
    assert "--no-log-prefix" in capsys.readouterr().err


def test_an_october_restore_hidden_below_debug_is_read_from_the_prompt_start() -> None:
    """-lv 4: an October slot-file restore prints only a DEBUG line, and the slot's next prompt
    start finds no checkpoint to invalidate: read as that restore (a weakened check), not as an
    invalidation deviation (the -v original, which shows the restore, gives none either)."""
    r = check_log(SAMPLES / "october-hybrid-restore.v4.log")
    assert r.n_deviations == 0, [d.message for d in r.deviations]
    assert any("slot-file restore the log cannot show" in k for k in r.weakened)
    assert r.stats.slot_file_restores >= 1


def test_requests_are_counted_from_their_launch_below_trace() -> None:
    """The 10 requests of 01-growing (tests/data/real/README-logs.md): "new prompt" lines at -v,
    "processing task" lines (INFO) at the default verbosity."""
    assert check_log(REAL / "01-growing.log").stats.requests == 10
    assert check_log(SAMPLES / "01-growing.v3.log").stats.requests == 10
