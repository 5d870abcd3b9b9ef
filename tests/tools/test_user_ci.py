"""pcspec in a user's own CI: a variant of one's own gates the build, the pytest plugin, no
surprises in the user's tree or pipes, and the messages a user acts on. Each test failed on
the behaviour before."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pcspec.cli import main
from pcspec.commands import prove as prove_command
from pcspec.model import designs
from pcspec.model.config import Config
from pcspec.model.designs import DESIGNS
from pcspec.properties import accounting
from pcspec.properties.base import Events
from tests.support.paths import ROOT

EXAMPLE = ROOT / "docs" / "examples" / "ci-gate"
BIN = Path(sys.executable).parent


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's project: the example's variant module, the current folder; pcspec knows the
    designs it knew before the test (a user's command is a process of its own: the design a
    test's commands loaded by name is forgotten after it, as its module is)."""
    shutil.copy(EXAMPLE / "my_variants.py", tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(designs, "_NAMED", dict(designs._NAMED))
    yield tmp_path
    sys.modules.pop("my_variants", None)


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env, timeout=900, check=False)


# -- 1. a variant of one's own fails the build ------------------------------------------------


@pytest.mark.slow
def test_a_violation_of_ones_own_variant_exits_1_unless_declared(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["fuzz", "--variant-module", "my_variants:NOROLLBACK", "--property", "RB-1", "--json", "--out", "out"]
    assert main(args) == 1
    cell = json.loads(capsys.readouterr().out)["fuzz"][0]
    assert cell["expected"] == "." and cell["verdict"] == "violated" and not cell["ok"]
    assert main([*args, "--expect", "RB-1"]) == 0
    capsys.readouterr()
    (project / "my_variants.py").write_text(
        (project / "my_variants.py").read_text() + '\nPCSPEC_EXPECT = {"NOROLLBACK": ["RB-1"]}\n'
    )
    sys.modules.pop("my_variants", None)
    assert main(args) == 0


def test_expect_is_for_ones_own_variant_only(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fuzz", "--variant", "fixed", "--expect", "RB-1", "--out", "out"]) == 2
    assert "--expect is for a variant of your own" in capsys.readouterr().err


def test_a_counterexample_to_ones_own_variant_fails_prove(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["prove", "--variant-module", "my_variants:NOROLLBACK", "--obligation", "RB-2", "--out", "out"]
    assert main(args) == 1
    out = capsys.readouterr().out
    assert "<-- expected proved" in out and "FAILED" in out
    assert main([*args, "--expect", "RB-2"]) == 0


# -- 2. its pytest file imports it --------------------------------------------------------------


@pytest.mark.slow
def test_the_reproduction_file_imports_the_users_variant(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["fuzz", "--variant-module", "my_variants:NOROLLBACK", "--property", "RB-1", "--out", "out"])
    repro = project / "out" / "repro_norollback__RB_1.py"
    text = repro.read_text()
    assert "from my_variants import NOROLLBACK\n" in text and "VARIANT = NOROLLBACK\n" in text
    done = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(repro)], project)
    assert done.returncode == 1, done.stdout  # it fails while the violation reproduces


# -- 3. the pytest plugin ---------------------------------------------------------------------


@pytest.mark.slow
def test_the_plugin_fails_on_a_broken_variant_with_the_trace(project: Path) -> None:
    done = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--pcspec-variant",
                 "my_variants:NOROLLBACK"], project)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "norollback violates" in done.stdout and "[0] {" in done.stdout
    assert "state.new_prompt(" not in done.stdout and "state.alternate(" not in done.stdout  # not Hypothesis calls
    traces = sorted((project / "pcspec-out").glob("norollback__*.jsonl"))
    assert traces
    replayed = _run([str(BIN / "pcspec"), "replay", str(traces[0]), "--variant-module", "my_variants:NOROLLBACK"],
                    project)
    assert replayed.returncode == 0 and "expected violations reproduced" in replayed.stdout
    # the steps printed are the trace's operations, numbered as the trace numbers them
    ops = [json.loads(line) for line in traces[0].read_text().splitlines()[1:]]
    for i, op in enumerate(ops):
        assert f"[{i}] {json.dumps(op, sort_keys=True)}" in done.stdout


@pytest.mark.slow
def test_the_plugin_passes_a_variant_that_holds_and_is_inert_without_its_option(project: Path) -> None:
    (project / "fine.py").write_text(
        "from pcspec.model.designs import Fixed\n\n\nclass Fine(Fixed):\n    name = 'fine'\n\n\nFINE = Fine()\n"
    )
    (project / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    done = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--pcspec-variant", "fine:FINE"],
                project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
    plain = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], project)
    assert plain.returncode == 0 and "1 passed" in plain.stdout


# -- 4. a cap gives unknown and exit 3 everywhere ----------------------------------------------


def test_a_capped_fuzz_is_unknown_and_exits_3(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fuzz", "--variant", "fixed", "--survey-seconds", "0.2", "--out", "out"]) == 3
    out = capsys.readouterr().out
    assert "unknown" in out and "does not match" not in out


# -- 5. an unknown proof names what ran out ------------------------------------------------------


def test_an_unknown_proof_names_the_limit_and_its_option(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["prove", "--obligation", "LIMIT-1", "--variant", "fixed", "--proof-rlimit", "1000", "--json",
                 "--out", "out"])
    data = json.loads(capsys.readouterr().out)
    assert code == 3
    detail = " ".join(str(r["detail"]) for r in data["proofs"] if r["result"] == "unknown")
    assert "resource limit (1,000 units)" in detail and "--proof-rlimit" in detail


# -- 6. no surprises in the user's tree ---------------------------------------------------------


@pytest.mark.slow
def test_a_plain_pytest_never_collects_pcspecs_output(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for out in ("out-a", "out-b"):  # two output folders with the same file names
        main(["fuzz", "--variant-module", "my_variants:NOROLLBACK", "--property", "RB-1", "--out", out])
    (project / "test_mine.py").write_text("def test_mine():\n    pass\n")
    done = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], project)
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout
    one = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "out-a/repro_norollback__RB_1.py"],
               project)
    assert one.returncode == 1 and "1 failed" in one.stdout


# -- 7. a closed pipe ends the command quietly ----------------------------------------------------


@pytest.mark.parametrize("command", ["prove", "slotfile inspect --json {slot}"])
def test_a_closed_pipe_ends_quietly(project: Path, command: str) -> None:
    slot = ROOT / "tests" / "data" / "real" / "mamba-a.bin"
    shell = f"{BIN / 'pcspec'} {command.format(slot=slot)} | head -c 1"
    done = subprocess.run(["bash", "-c", f"set -o pipefail; {shell}"], cwd=project, capture_output=True, text=True,
                          timeout=600, check=False)
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert done.returncode in (0, 141)


# -- 8. prove says where it wrote, and checks for cvc5 first --------------------------------------


def test_prove_says_where_its_smt2_files_went(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prove", "--obligation", "IMM-1", "--smt2", "q", "--out", "out"]) == 0
    out = capsys.readouterr().out
    n = len(list((project / "q").glob("*.smt2")))
    assert n > 0 and f"wrote {n} SMT-LIB files to q/" in out


def test_recheck_without_cvc5_fails_before_any_proof(project: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("pcspec.proofs.recheck.available", lambda: False)

    def no_proof(*_a: object, **_k: object) -> None:
        raise AssertionError("a proof ran before cvc5 was checked")

    monkeypatch.setattr(prove_command, "run_suite", no_proof)
    assert main(["prove", "--smt2", "q", "--recheck", "--out", "out"]) == 2
    assert "cvc5 is not installed" in capsys.readouterr().err


# -- 9. the licence and the run time ------------------------------------------------------------


def test_the_licence_is_there_and_the_readme_says_how_long_the_main_job_takes() -> None:
    assert "MIT License" in (ROOT / "LICENSE").read_text()
    assert 'license = "MIT"' in (ROOT / "pyproject.toml").read_text()
    readme = (ROOT / "README.md").read_text()
    # a figure with its unit, next to the command
    assert re.search(r"about \d+( to \d+)? (s|seconds|minutes)\b", readme.split("pcspec verify", 2)[1][:600])


# -- 13. messages that do not mislead ------------------------------------------------------------


def test_a_limit_set_where_there_was_none_says_so() -> None:
    from pcspec.model.server import Server

    srv = Server(Config(cache_ram=-1), DESIGNS["fixed"])
    assert srv.cfg.limit_size == 0 and srv.cache is not None
    srv.cache.limit_size = 1
    (msg,) = accounting.live1_limit_not_reduced(srv, Events([]))
    assert "had no byte limit" in msg and "from 0" not in msg


def test_no_route_is_named_for_an_expectation_that_did_not_reproduce(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps({"schema": 1, "kind": "pcspec-trace", "variant": "pr30137", "config": {},
                                 "expect": [{"property": "ACC-1"}]}) + "\n")
    assert main(["replay", str(trace)]) == 1
    out = capsys.readouterr().out
    assert "NOT reproduced" in out and "route of" not in out
