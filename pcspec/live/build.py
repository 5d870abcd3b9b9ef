"""Build ``llama-server`` from the llama.cpp tree vendored in a PyPI source distribution.

``llama-cpp-python==0.3.36`` vendors llama.cpp at 0c1e570 (2026-10-01), the October tree the
C++ citations of pcspec name (``pip download llama-cpp-python==0.3.36 --no-deps --no-binary
:all:``, its folder ``vendor/llama.cpp/``). The sdist comes through pip (the ordinary client of the
registry); nothing else is downloaded. The binary is cached outside the checkout, keyed by the
sdist version, the commit and the build flags, and reused: a second build is a cache hit.

    python -m pcspec.live.build            # build (or find) the server; print its path
    python -m pcspec.live.build --where    # print the cached path, exit 1 when not built

The build is CPU-only, Release, the ``llama-server`` target alone, statically linked (one file
to cache), ``-j2``: about 5 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

SDIST_NAME = "llama-cpp-python"
SDIST_VERSION = "0.3.36"
LLAMA_COMMIT = "0c1e570"
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=OFF",  # the cached binary runs on any x86-64 of this kind of machine
    "-DBUILD_SHARED_LIBS=OFF",  # one self-contained file
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
)
ENV_CACHE = "PCSPEC_CACHE"
ENV_SERVER = "PCSPEC_LLAMA_SERVER"


@dataclass(frozen=True)
class BuildResult:
    path: Path
    cached: bool
    seconds: float  # 0 when cached
    configure_seconds: float = 0.0
    download_seconds: float = 0.0


def cache_root() -> Path:
    """``$PCSPEC_CACHE``, else ``$XDG_CACHE_HOME/pcspec``, else ``~/.cache/pcspec``."""
    env = os.environ.get(ENV_CACHE)
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "pcspec"


def build_key() -> str:
    flags = hashlib.sha256(" ".join(CMAKE_FLAGS).encode()).hexdigest()[:8]
    return f"llama-server-{SDIST_VERSION}-{LLAMA_COMMIT}-{flags}"


def cached_server() -> Path:
    return cache_root() / build_key() / "llama-server"


def find_server() -> Path | None:
    """The server to use without building: ``$PCSPEC_LLAMA_SERVER``, else the cached build."""
    env = os.environ.get(ENV_SERVER)
    if env:
        p = Path(env)
        return p if p.is_file() and os.access(p, os.X_OK) else None
    p = cached_server()
    return p if p.is_file() and os.access(p, os.X_OK) else None


def _run(cmd: list[str], log: Path, cwd: Path | None = None) -> None:
    with log.open("ab") as out:
        out.write(("$ " + " ".join(cmd) + "\n").encode())
        out.flush()
        proc = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-30:]
        raise RuntimeError(f"command failed ({proc.returncode}): {' '.join(cmd)}\n" + "\n".join(tail))


def _sdist(dest: Path, log: Path) -> Path:
    """The sdist tarball, downloaded once through pip into the cache."""
    dest.mkdir(parents=True, exist_ok=True)
    found = sorted(dest.glob(f"llama_cpp_python-{SDIST_VERSION}.tar.gz"))
    if found:
        return found[0]
    _run([sys.executable, "-m", "pip", "download", f"{SDIST_NAME}=={SDIST_VERSION}", "--no-deps",
          "--no-binary", ":all:", "-d", str(dest)], log)
    found = sorted(dest.glob(f"llama_cpp_python-{SDIST_VERSION}.tar.gz"))
    if not found:
        raise RuntimeError(f"pip download left no sdist in {dest}")
    return found[0]


def _extract_vendor(tarball: Path, dest: Path) -> Path:
    """Extract ``vendor/llama.cpp`` only; return its directory."""
    with tarfile.open(tarball) as tf:
        members = [m for m in tf.getmembers() if "/vendor/llama.cpp/" in m.name + "/"]
        tf.extractall(dest, members=members, filter="data")
    roots = list(dest.glob("*/vendor/llama.cpp"))
    if not roots:
        raise RuntimeError(f"{tarball} has no vendor/llama.cpp")
    return roots[0]


def build(*, jobs: int = 2, keep_tree: bool = False, quiet: bool = False) -> BuildResult:
    """Build the server unless the cache has it. Raises ``RuntimeError`` with the log's tail."""
    target = cached_server()
    if target.is_file():
        return BuildResult(target, cached=True, seconds=0.0)
    key_dir = target.parent
    key_dir.mkdir(parents=True, exist_ok=True)
    log = key_dir / "build.log"
    t0 = time.monotonic()
    tarball = _sdist(cache_root() / "sdist", log)
    t_dl = time.monotonic() - t0
    work = Path(tempfile.mkdtemp(prefix="build-", dir=key_dir))
    try:
        src = _extract_vendor(tarball, work)
        bdir = work / "build"
        t1 = time.monotonic()
        _run(["cmake", "-S", str(src), "-B", str(bdir), *CMAKE_FLAGS], log)
        t_conf = time.monotonic() - t1
        if not quiet:
            print(f"building llama-server ({LLAMA_COMMIT}) with -j{jobs}; log: {log}", file=sys.stderr)
        _run(["cmake", "--build", str(bdir), "--target", "llama-server", f"-j{jobs}"], log)
        binary = bdir / "bin" / "llama-server"
        if not binary.is_file():
            raise RuntimeError(f"the build made no {binary}")
        tmp = target.with_suffix(".tmp")
        shutil.copy2(binary, tmp)
        tmp.replace(target)  # atomic: a half-copied binary is never found
    finally:
        if not keep_tree:
            shutil.rmtree(work, ignore_errors=True)
    return BuildResult(target, cached=False, seconds=time.monotonic() - t0,
                       configure_seconds=t_conf, download_seconds=t_dl)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pcspec.live.build", description=__doc__.split("\n\n")[0])
    p.add_argument("--where", action="store_true", help="print the cached path; exit 1 when not built")
    p.add_argument("-j", "--jobs", type=int, default=2)
    p.add_argument("--keep-tree", action="store_true", help="keep the source and build trees")
    args = p.parse_args(argv)
    if args.where:
        found = find_server()
        print(found if found else cached_server())
        return 0 if found else 1
    try:
        res = build(jobs=args.jobs, keep_tree=args.keep_tree)
    except (RuntimeError, OSError) as exc:
        print(f"pcspec live build: {exc}", file=sys.stderr)
        return 1
    how = "cached" if res.cached else f"built in {res.seconds:.0f} s"
    print(f"{res.path} ({how})")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
