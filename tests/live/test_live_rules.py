"""``pcspec live`` compares a server with the rule set of the build it names (``--version``),
``--rules`` overrides, and pcspec's own build recipe makes its servers name themselves."""

from __future__ import annotations

import argparse
import stat
from pathlib import Path

import pytest

from pcspec.cli import build_parser, main
from pcspec.commands import live as live_cmd
from pcspec.live import build
from pcspec.live.buildinfo import FALLBACK, rules_for_server, rules_for_text
from pcspec.logcheck.builds import choose
from pcspec.model.rulesets import NEWEST, RULE_SETS


def fake_server(tmp_path: Path, number: int, commit: str) -> Path:
    """A stand-in binary that answers ``--version`` as build-info.cpp.in:33 does (on stderr)."""
    path = tmp_path / "llama-server"
    path.write_text("#!/bin/sh\n"
                    f"echo 'version: 0.5.0-dev (build {number}, commit {commit})' >&2\n"
                    "echo 'built with GNU 12.2.0 for Linux x86_64' >&2\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def parsed(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["live", *argv])


@pytest.mark.parametrize(("number", "commit", "rule_set"), [
    (1, "0c1e570", "october"), (11434, "b11434", "b11434"), (11549, "b11549", "b11549"),
    (7306, "e152332", "november"),
])
def test_the_rule_set_of_the_build_the_server_names(tmp_path: Path, number: int, commit: str,
                                                    rule_set: str) -> None:
    chosen = rules_for_server(fake_server(tmp_path, number, commit))
    assert (chosen.rule_set, chosen.warning) == (rule_set, "")
    args = parsed("--server", str(fake_server(tmp_path, number, commit)))
    live_cmd._server(args)
    assert args.variant == rule_set
    assert args.rules_evidence.startswith(f"build {number} ({commit}) = ")


def test_a_newer_build_gets_the_nearest_known_build_with_a_warning(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A build above b11549 may have the November code or not: it is compared with b11549, the
    nearest known build, and the warning names both and --rules."""
    args = parsed("--server", str(fake_server(tmp_path, 12000, "0123abc")))
    live_cmd._server(args)
    assert args.variant == "b11549"
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("pcspec live: warning: build 12000 (0123abc): newer than")
    assert f"b11549 or {NEWEST}" in err[0] and "--rules" in err[0]


def test_a_server_that_names_nothing_gets_october_and_the_offer_of_rules(tmp_path: Path) -> None:
    chosen = rules_for_server(fake_server(tmp_path, 0, "unknown"))
    assert chosen.rule_set == FALLBACK == "october"
    assert "--rules NAME" in chosen.warning and "\n" not in chosen.warning
    silent = rules_for_text("")
    assert silent.rule_set == FALLBACK and "names no build" in silent.warning
    assert rules_for_server(tmp_path / "missing").rule_set == FALLBACK


def test_rules_overrides_and_is_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server = str(fake_server(tmp_path, 11549, "b11549"))
    args = parsed("--server", server, "--rules", "b11434")
    live_cmd._server(args)
    assert (args.variant, args.rules_evidence) == ("b11434", "--rules b11434")
    for argv, needle in (
        (["--rules", "nope"], f"unknown rule set 'nope'; known rule sets: {', '.join(RULE_SETS)}"),
        (["--server", server, "--rules", "b11434", "--variant", "fixed"], "give one"),
        (["--design", "baseline", "--rules", "october"], "drop --rules"),
    ):
        assert main(["live", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and needle in err, err


def test_the_recipe_names_its_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CMake line the recipe runs for each tree (the build itself is not run): b11434 and
    b11549 get LLAMA_BUILD_NUMBER and LLAMA_BUILD_COMMIT (CMakeLists.txt:153-157 of each tree,
    which otherwise take cmake/build-info.cmake's 0 and "unknown"), and the build line those
    print names the tree's rule set; the October sdist names itself (its own git metadata)."""
    monkeypatch.setenv(build.ENV_CACHE, str(tmp_path / "cache"))
    ran: list[list[str]] = []

    def fake_run(cmd: list[str], log: Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
        ran.append(cmd)
        if "--build" in cmd:
            out = Path(cmd[cmd.index("--build") + 1]) / "bin"
            out.mkdir(parents=True)
            (out / "llama-server").write_text("")

    def fake_extract(t: build.Tree, tarball: Path, dest: Path) -> Path:
        src = dest / "src" / t.folder
        src.mkdir(parents=True)
        return src

    monkeypatch.setattr(build, "_run", fake_run)
    monkeypatch.setattr(build, "sdist", lambda t, log: tmp_path / "x.tar.gz")
    monkeypatch.setattr(build, "extract", fake_extract)
    for tree, rule_set in (("b11434", "b11434"), ("b11549", "b11549"), ("0c1e570", None)):
        ran.clear()
        build.build(tree=tree, quiet=True)
        configure = next(c for c in ran if c[:2] == ["cmake", "-S"])
        named = [f for f in configure if f.startswith(("-DLLAMA_BUILD_NUMBER=", "-DLLAMA_BUILD_COMMIT="))]
        if rule_set is None:
            assert named == []
            continue
        number = build.TREES[tree].build_number
        assert named == [f"-DLLAMA_BUILD_NUMBER={number}", f"-DLLAMA_BUILD_COMMIT={tree}"]
        assert number is not None
        assert choose(number, tree).candidates == (rule_set,)


def test_llama_names_the_tree_whose_cached_build_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """``pcspec live --llama b11549`` runs the cached build of that tree and picks its rule set
    from the build it names; without a cached build it says how to build it (exit 2), and it
    cannot be given with --server or --design."""
    from pcspec.core.errors import PcspecError

    monkeypatch.setenv("PCSPEC_CACHE", str(tmp_path / "cache"))
    args = parsed("--llama", "b11549")
    with pytest.raises(PcspecError, match=r"pcspec live --build --llama b11549"):
        live_cmd._server(args)
    binary = build.cached_server("b11549")
    binary.parent.mkdir(parents=True)
    binary.write_bytes(fake_server(tmp_path, 11549, "b11549").read_bytes())
    binary.chmod(0o755)
    args = parsed("--llama", "b11549")
    assert live_cmd._server(args) == binary and args.variant == "b11549"
    for argv, needle in ((["--llama", "b11549", "--server", str(binary)], "give one"),
                         (["--llama", "b11549", "--design", "baseline"], "drop --llama"),
                         (["--llama", "b99999"], "invalid choice")):
        assert main(["live", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert needle in err.splitlines()[-1], err
