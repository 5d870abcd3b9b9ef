"""The C++ port of ``fixed`` (ports/cpp) passes ``pcspec conform``, and each of its broken builds
fails it with the property named.

The port is built with ``-fsanitize=address,undefined`` (``.ci/run`` builds it in build/port
first; otherwise the test builds it in a temporary folder). Without CMake and a C++ compiler the
tests skip with a message: plain ``pytest`` needs no compiler.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pcspec.cli import main
from tests.support.paths import ROOT

pytestmark = pytest.mark.cpp  # builds the C++ port with CMake (or uses build/port)

SOURCE = ROOT / "ports" / "cpp"
BROKEN = {
    "inplace-update": "IMM-1",
    "publish-before-validate": "RB-1",
    "per-holder-accounting": "ACC-1",
    "forget-restored": "PERF-2",
}


def _toolchain() -> str | None:
    if shutil.which("cmake") is None:
        return "no cmake"
    if not any(shutil.which(c) for c in ("c++", "g++", "clang++")):
        return "no C++ compiler"
    return None


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sanitized build of the port and its broken variants: build/port (or $PCSPEC_PORT_BUILD)
    if configured there, brought up to date; else a fresh one."""
    missing = _toolchain()
    if missing:
        pytest.skip(f"{missing}: the C++ port (ports/cpp) is not built or checked; .ci/run builds it")
    folder = Path(os.environ.get("PCSPEC_PORT_BUILD", ROOT / "build" / "port"))
    if not (folder / "CMakeCache.txt").exists():
        folder = tmp_path_factory.mktemp("port")
        subprocess.run(
            ["cmake", "-S", str(SOURCE), "-B", str(folder), "-DPCSPEC_SANITIZE=ON", "-DPCSPEC_BROKEN=ON"],
            check=True,
            capture_output=True,
        )
    done = subprocess.run(["cmake", "--build", str(folder), "-j2"], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"the C++ port does not build:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    if not (folder / "pcspec-port-broken-forget-restored").exists():
        pytest.skip(f"{folder} was configured without -DPCSPEC_BROKEN=ON")
    return folder


def conform(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, port: Path, *args: str
) -> tuple[int, dict[str, object]]:
    code = main(["conform", "--cmd", str(port), "--json", "--out", str(tmp_path), *args])
    return code, json.loads(capsys.readouterr().out)


def test_port_conforms_at_the_default_budget(build: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The command's default run (the golden suite, then 1,000 fuzzed traces of seed 0), as a
    user runs it: its trace 636 (a clear of a slot just before a slot restore) once diverged
    where 100 traces never went (about two minutes of CPU, the Python side's)."""
    code, out = conform(capsys, tmp_path, build / "pcspec-port")
    assert code == 0, json.dumps(out.get("divergence"), indent=1)[:4000]
    assert out["ok"] and out["fuzzed"] == 1000


@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_broken_port_is_caught(build: Path, broken: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = conform(capsys, tmp_path, build / f"pcspec-port-broken-{broken}", "--fuzz", "50")
    assert code == 1, f"the port with {broken} broken passed"
    d = out["divergence"]
    assert isinstance(d, dict)
    assert BROKEN[broken] in d["properties"], d
