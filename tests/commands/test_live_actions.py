"""The live checker's user-facing actions are ``pcspec`` sub-commands (``build``, ``smoke``,
``models``, ``decision``) with the options of their modules, bad input reported as every
command reports it (one line, exit 2); ``python -m pcspec.live.MODULE`` still runs them, for
development. No server is built or started here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pcspec.cli import main

BAD_INPUT = [
    (["build", "--faults"], "--faults needs --design"),
    (["build", "--design", "nosuch"], "unknown design 'nosuch'"),
    (["build", "--patch", "no-such.patch"], "no such patch file: no-such.patch"),
    (["smoke", "--server", "/no/such/llama-server"], "no such server binary"),
    (["decision", "--server", "/no/such/llama-server"], "no server: pcspec build --tree"),
    (["models", "nosuch", "out.gguf"], "invalid choice: 'nosuch'"),
]


@pytest.mark.parametrize(("argv", "said"), BAD_INPUT, ids=[" ".join(a) for a, _ in BAD_INPUT])
def test_bad_input_is_one_line_and_exit_2(argv: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1, err


def test_build_where_names_the_cached_path_without_building(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["build", "--design", "pr30137", "--where"])
    assert code in (0, 1)  # (1: not built here; nothing is built either way)
    assert capsys.readouterr().out.strip().endswith("llama-server")


def test_help_lists_the_actions(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--help"])
    out = capsys.readouterr().out
    for name in ("build", "smoke", "models", "decision"):
        assert f"\n    {name} " in out, name


def test_models_writes_a_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("gguf")  # (a live-only dependency)
    out = tmp_path / "tiny-kv.gguf"
    assert main(["models", "kv", str(out), "3"]) == 0
    assert out.stat().st_size > 0 and str(out) in capsys.readouterr().out


def test_python_m_still_runs_a_module_for_development() -> None:
    done = subprocess.run([sys.executable, "-m", "pcspec.live.build", "--faults"], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 2 and done.stderr == "pcspec live build: --faults needs --design\n"
