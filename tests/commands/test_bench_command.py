"""``pcspec bench`` on the command line: bad input is one line naming the field or option, exit 2,
before any server starts; a model-only run prints its table or JSON, exit 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pcspec.cli import main


def _one_line(capsys: pytest.CaptureFixture[str], argv: list[str], needle: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err, err


def test_a_bad_workload_file_is_one_line_naming_the_field(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    f = tmp_path / "w.toml"
    f.write_text("cache_ram_mib = '4G'\n")
    _one_line(capsys, ["bench", str(f), "--model-only"], "cache_ram_mib: '4G' is not an integer")


def test_an_absurd_size_is_refused_before_anything_runs(capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import pcspec.commands.bench as cmd

    monkeypatch.setattr(cmd, "bench", lambda *a, **k: pytest.fail("ran"))
    _one_line(capsys, ["bench", "grown", "alternating", "--turns", "100000"], "turns: 100000 is above 64")


def test_unknown_workload_and_design(capsys: pytest.CaptureFixture[str]) -> None:
    _one_line(capsys, ["bench", "nothing"], "unknown workload 'nothing'")
    _one_line(capsys, ["bench", "grown", "--design", "pr1"], "--design: unknown design 'pr1'")
    _one_line(capsys, ["bench", "grown", "--model-only", "--plot", "x.svg"], "--plot: x.svg is not a .png file")


def test_a_model_only_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "grown", "--model-only", "--turns", "3", "--design", "baseline", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data[0]["model_only"] and data[0]["workload"]["turns"] == 3
    assert data[0]["designs"][0]["predicted"]["saves"] == 2


def test_save_and_plot_paths_are_checked_first(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    _one_line(capsys, ["bench", "grown", "--model-only", "--save", str(tmp_path / "no" / "x.json")],
              f"--save: {tmp_path / 'no'} is not a folder")
    out = tmp_path / "x.json"
    assert main(["bench", "grown", "--model-only", "--turns", "2", "--design", "fixed", "--save", str(out)]) == 0
    assert "model: saves" in capsys.readouterr().out
    assert json.loads(out.read_text())[0]["designs"][0]["design"] == "fixed"
