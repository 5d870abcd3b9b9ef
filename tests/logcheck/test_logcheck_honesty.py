"""What check-log says when it checked nothing (item 10) and what its build line names (item
13): a text that is not a llama-server log is bad input (exit 2, one line naming the file and
why), a log of server lines none of which is about the cache or checkpoints says so (exit 3)
instead of passing, and the build evidence names the tree, never a path of this machine."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import pytest

from pcspec.cli import main
from pcspec.commands.check_log import EXIT_CODES
from pcspec.logcheck import Options, check_log, parse_options
from tests.support.paths import ROOT

# the checkout's root, wherever in tests/ this file is
DATA_LOGS = sorted((ROOT / "tests" / "data").rglob("*.log"))
# logs of a build whose rules the checker is told (tests/data/real/README-logs.md): fixed's, with
# the options pcspec live passes for it (pcspec.live.analyze.logcheck_options)
OPTIONS: dict[str, dict[str, str]] = {
    "fixed-keep-restored.log": {"accounting": "unique", "pos-min": "payload", "invalidation": "n-prefix",
                                "restored-owner": "restorer"},
}


def _options(log: Path) -> Options:
    return parse_options([f"{k}={v}" for k, v in OPTIONS.get(log.name, {}).items()])


def _flags(log: Path) -> list[str]:
    return [f for k, v in OPTIONS.get(log.name, {}).items() for f in ("--option", f"{k}={v}")]


def test_readme_is_not_a_log(capsys: pytest.CaptureFixture[str]) -> None:
    """The README has lines, none a server line: exit 2, one line, no pass."""
    assert main(["check-log", str(ROOT / "README.md")]) == 2
    cap = capsys.readouterr()
    assert "no deviations" not in cap.out
    err = cap.err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "README.md" in err and "not a llama-server log" in err


def test_empty_file_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "empty.log"
    p.write_bytes(b"")
    assert main(["check-log", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "empty" in err and "empty.log" in err


def test_server_lines_about_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Server lines (the prefix), none about the cache or checkpoints, and start-up lines: the
    report says nothing was checked and the exit code is 3, not the pass of exit 0."""
    p = tmp_path / "health.log"
    p.write_text(
        "0.00.000.001 I srv    load_model: initializing, n_slots = 1, n_ctx_slot = 4096\n"
        "0.00.000.002 I srv    load_model: prompt cache is enabled, size limit: 8192 MiB\n"
        "0.00.100.000 I srv  log_server_r: done request: GET /health 127.0.0.1 200\n"
    )
    assert main(["check-log", str(p)]) == 3
    out = capsys.readouterr().out
    assert "nothing to check" in out and "no deviations" not in out
    assert main(["check-log", str(p), "--json"]) == 3
    data = json.loads(capsys.readouterr().out)
    assert data["nothing_to_check"] is True and data["deviation_count"] == 0
    # beside a log that was checked, the run still says one was not
    assert main(["check-log", str(ROOT / "tests/data/real/01-growing.log"), str(p)]) == 3
    capsys.readouterr()


def test_exit_codes_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    with contextlib.suppress(SystemExit):
        main(["check-log", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert " ".join(EXIT_CODES.split()) in out
    assert "3 no deviation" in out


@pytest.mark.parametrize("log", DATA_LOGS, ids=lambda p: p.name)
def test_data_logs_are_checked(log: Path) -> None:
    """Every log the tests hold is checked: none is reported as having nothing to check."""
    r = check_log(log, _options(log))
    assert not r.nothing_to_check and r.n_deviations == 0


def test_build_line_names_the_tree_not_a_path(capsys: pytest.CaptureFixture[str]) -> None:
    """Item 13: the build evidence names the October tree by its commit; no line of the
    report of any data log holds a path of the machine (the home, the working directory, the
    checkout) other than the log's own name."""
    r = check_log(ROOT / "tests/data/real/01-growing.log")
    evidence = r.runs[0].build_evidence
    assert r.runs[0].build == "october"
    assert "llama.cpp 0c1e570" in evidence and "the October tree" in evidence
    assert "/" not in evidence
    forbidden = {str(ROOT), os.path.expanduser("~"), os.getcwd()} - {"/"}
    for log in DATA_LOGS:
        rel = str(log.relative_to(ROOT))
        assert main(["check-log", rel, *_flags(log)]) == 0
        text = capsys.readouterr().out
        for line in text.splitlines()[1:]:  # the first names the log as given
            assert not any(f in line for f in forbidden), line
            if "build era" in line:
                assert "/" not in line, line
        for run in check_log(rel, _options(log)).runs:
            assert "/" not in run.build_evidence and "/" not in run.era_evidence
